import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import type { PendingEvent } from "../metering/normalise";
import { Spool } from "../metering/spool";
import type { UsageEvent } from "../shared/usage";
import { expectedAggregates, hourlyAggregates, hourOf, ingestBatch, migrate } from "./ledger";
import { startPostgres } from "./testing/postgres";

/**
 * `npm run bench` (metering part): ledger ingestion with idempotency on, side by side with a raw INSERT of the
 * same rows into the same server (the floor), and the spool's append throughput. Loopback only, bounded:
 * a throwaway PostgreSQL with its default durability settings, and a temp directory for the spool.
 *
 * The events end in the current hour (live traffic, as a consumer that keeps up sees it); 20 tenants, 3 teams,
 * 200 keys and 2 models make almost every event of a 500-event batch its own hourly group, the worst case for
 * aggregation. The same batches are measured again as late events (their hour already rolled up).
 */
export interface MeteringBenchResult {
    events: number;
    batch: number;
    /** Events/s through ingestBatch (exactly-once + receipts + hourly aggregates, one prepared statement per batch). */
    ledgerEventsPerSec: number;
    /**
     * Events/s of a plain multi-row INSERT of the same rows into an unconstrained table, through the same input
     * path as ingestBatch: the batch serialised to JSON (timed, as it is in ingestBatch), one prepared statement
     * reading it with `json_to_recordset`.
     */
    rawInsertEventsPerSec: number;
    /** Median over batches of raw-INSERT time / ledger-ingest time for the same batch (the side-by-side ratio). */
    ledgerRatio: number;
    /**
     * The same ratio for late events: the same batches counted into hours already rolled up, each batch appending
     * its hourly deltas (a spoke's backlog after an outage; the uncommon path).
     */
    lateRatio: number;
    /** Events/s when every batch is delivered a second time (all duplicates: the at-least-once cost). */
    redeliveryEventsPerSec: number;
    /** Spool appends with fsync, 16 concurrent senders of 100 events (group commit). */
    spoolEventsPerSec: number;
    /** Spool appends with fsync, one sender, one event per append (one fsync per event). */
    spoolSingleEventsPerSec: number;
}

/** Event i of the bench: 37 ms apart from `base` (20,000 span 12 min), 600 (tenant, team, key, model) groups. */
function event(i: number, base: number): UsageEvent {
    const t = base + i * 37;
    return {
        requestId: `bench-${i}`,
        spoke: "hn1",
        tenant: `t${i % 20}`,
        team: `team${i % 3}`,
        keyId: `key-${i % 200}`,
        model: i % 2 ? "meta-llama/Llama-3.3-70B-Instruct" : "Qwen/Qwen3-32B",
        endpoint: "inference/llama-70b",
        inputTokens: 1000 + (i % 7000),
        outputTokens: 1 + (i % 900),
        cachedInputTokens: i % 500,
        status: 200,
        stream: i % 2 === 0,
        truncated: i % 17 === 0,
        usageSource: i % 17 === 0 ? "estimated" : "reported",
        startedAt: new Date(t).toISOString(),
        endedAt: new Date(t + 1500).toISOString(),
        seq: i,
        source: "metering-0.bench000",
    };
}

const RAW_SQL = `INSERT INTO usage_events_raw SELECT * FROM json_to_recordset($1::json) AS x(
    "requestId" text, spoke text, tenant text, team text, "keyId" text, model text, endpoint text,
    "inputTokens" bigint, "outputTokens" bigint, "cachedInputTokens" bigint, status smallint,
    stream boolean, truncated boolean, "usageSource" text, "startedAt" timestamptz, "endedAt" timestamptz, seq bigint, source text)`;

/**
 * Runs the benchmark and prints a table.
 * @param events events per ledger run (default 20,000); batch events per statement (default 500, a Kinesis batch)
 */
export async function runMeteringBench(
    opts: { events?: number; batch?: number; spoolEvents?: number; print?: (s: string) => void } = {},
): Promise<MeteringBenchResult> {
    const n = opts.events ?? 20_000,
        batch = opts.batch ?? 500,
        spoolN = opts.spoolEvents ?? 20_000;
    const print = opts.print ?? ((s: string) => process.stdout.write(`${s}\n`));
    // Live traffic: the events end in the current hour, as a consumer keeping up sees them.
    const hour = hourOf(new Date().toISOString());
    const base = Date.parse(hour);
    const events = Array.from({ length: n }, (_, i) => event(i, base));
    const batches: UsageEvent[][] = [];
    for (let i = 0; i < n; i += batch) batches.push(events.slice(i, i + batch));
    const want = JSON.stringify(expectedAggregates(events));

    const pg = await startPostgres({ durable: true });
    let ledgerEventsPerSec = 0,
        rawInsertEventsPerSec = 0,
        redeliveryEventsPerSec = 0,
        ledgerRatio = 0,
        lateRatio = 0;
    try {
        const db = await pg.connect();
        await migrate(db);
        await db.query(`CREATE TABLE usage_events_raw (request_id text, spoke text, tenant text, team text, key_id text, model text, endpoint text,
            input_tokens bigint, output_tokens bigint, cached_input_tokens bigint, status smallint, stream boolean, truncated boolean,
            usage_source text, started_at timestamptz, ended_at timestamptz, seq bigint, source text)`);
        const raw = (b: readonly UsageEvent[]) => db.query({ name: "raw_insert", text: RAW_SQL, values: [JSON.stringify(b)] });
        const clean = () => db.query("TRUNCATE usage_events, usage_hourly, usage_receipts, usage_events_raw");
        // Warm-up outside the timing (prepared statements, first-page allocation), then clean.
        await ingestBatch(db, [event(n + 1, base)]);
        await raw([event(n + 1, base)]);
        await clean();

        // Side by side: raw and ledger statements alternate batch by batch on the same connection, so both see the
        // same machine load (this machine is shared; sequential runs drift by more than the difference measured).
        // The ratio is the median of the per-batch ratios, which a load spike on one batch does not move.
        const sideBySide = async () => {
            let rawMs = 0,
                ledgerMs = 0,
                inserted = 0;
            const ratios: number[] = [];
            for (const b of batches) {
                let t0 = performance.now();
                await raw(b);
                const r = performance.now() - t0;
                t0 = performance.now();
                inserted += (await ingestBatch(db, b)).inserted;
                const l = performance.now() - t0;
                rawMs += r;
                ledgerMs += l;
                ratios.push(r / l);
            }
            if (inserted !== n) throw new Error(`bench: ${inserted} of ${n} inserted`);
            if (JSON.stringify(await hourlyAggregates(db)) !== want)
                throw new Error("bench: hourly aggregates differ from the events counted");
            ratios.sort((a, b) => a - b);
            return { rawMs, ledgerMs, ratio: ratios[Math.floor(ratios.length / 2)] };
        };
        const live = await sideBySide();
        rawInsertEventsPerSec = n / (live.rawMs / 1000);
        ledgerEventsPerSec = n / (live.ledgerMs / 1000);
        ledgerRatio = live.ratio;

        let inserted = 0;
        const t = performance.now();
        for (const b of batches) inserted += (await ingestBatch(db, b)).inserted;
        redeliveryEventsPerSec = n / ((performance.now() - t) / 1000);
        if (inserted !== 0) throw new Error("bench: a redelivered event was counted twice");

        // Late: the same events again into an empty ledger whose watermark is past their hour (as after a rollup).
        await clean();
        await db.query("UPDATE usage_rollup SET rolled_until = $1::timestamptz + interval '1 hour'", [hourOf(events[n - 1].endedAt)]);
        lateRatio = (await sideBySide()).ratio;
        await db.end();
    } finally {
        await pg.stop();
    }

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spool-bench-"));
    let spoolEventsPerSec = 0,
        spoolSingleEventsPerSec = 0;
    try {
        const pending: PendingEvent[] = events.slice(0, spoolN).map(({ seq: _s, source: _src, ...e }) => e);
        const spool = await Spool.open({ dir: path.join(dir, "a"), instance: "bench", maxBytes: 1 << 30 });
        let t = performance.now();
        const senders = 16,
            per = 100;
        let next = 0;
        await Promise.all(
            Array.from({ length: senders }, async () => {
                for (;;) {
                    const i = next;
                    next += per;
                    if (i >= pending.length) return;
                    await spool.append(pending.slice(i, i + per));
                }
            }),
        );
        spoolEventsPerSec = pending.length / ((performance.now() - t) / 1000);
        await spool.close();

        const single = await Spool.open({ dir: path.join(dir, "b"), instance: "bench", maxBytes: 1 << 30 });
        const m = Math.min(2000, pending.length);
        t = performance.now();
        for (let i = 0; i < m; i++) await single.append([pending[i]]);
        spoolSingleEventsPerSec = m / ((performance.now() - t) / 1000);
        await single.close();
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }

    const r = (x: number) => Math.round(x).toLocaleString("en-US");
    print(
        `metering bench: ${n} events, ${batch} per statement (PostgreSQL with default durability, loopback; raw and ledger batches interleaved;`,
    );
    print(`  both prepared statements reading the batch as JSON with json_to_recordset, serialisation timed for both)`);
    print(`  raw INSERT (floor)                ${r(rawInsertEventsPerSec).padStart(10)} events/s  1.00x`);
    print(
        `  ledger ingest (idempotent + agg)  ${r(ledgerEventsPerSec).padStart(10)} events/s  ${ledgerRatio.toFixed(2)}x of raw, median per batch (goal >= 0.60x; totals ${(ledgerEventsPerSec / rawInsertEventsPerSec).toFixed(2)}x)`,
    );
    print(
        `  late events (hour rolled up)                        ${lateRatio.toFixed(2)}x of raw, median per batch (each batch appends its hourly deltas)`,
    );
    print(
        `  redelivery (all duplicates)       ${r(redeliveryEventsPerSec).padStart(10)} events/s  ${(redeliveryEventsPerSec / rawInsertEventsPerSec).toFixed(2)}x of raw`,
    );
    print(`  spool append, fsync, group commit ${r(spoolEventsPerSec).padStart(10)} events/s  (16 senders x 100 events)`);
    print(`  spool append, fsync per event     ${r(spoolSingleEventsPerSec).padStart(10)} events/s  (1 sender, 1 event)`);
    return {
        events: n,
        batch,
        ledgerRatio,
        lateRatio,
        ledgerEventsPerSec,
        rawInsertEventsPerSec,
        redeliveryEventsPerSec,
        spoolEventsPerSec,
        spoolSingleEventsPerSec,
    };
}

if (require.main === module) {
    runMeteringBench().catch((e) => {
        process.stderr.write(`bench: ${(e as Error).stack}\n`);
        process.exit(1);
    });
}
