import * as fs from "node:fs";
import type { Redis } from "ioredis";
import * as path from "node:path";
import { expectedAggregates, hourlyAggregates } from "../../ledger/ledger";
import { reconcile } from "../../ledger/reconcile";
import { tierIds } from "../../shared/identity";
import { tokenKeys } from "../../shared/limits";
import { processBatch } from "../../usage-consumer/handler";
import { pollStream } from "../../usage-consumer/testing/kinesis";
import type { ChaosFigure } from "../../shared/chaos";
import { TEST_CREDENTIALS, TEST_REGION } from "../../usage-consumer/testing/kinesis";
import type { PendingEvent } from "../normalise";
import { KinesisTransport, Shipper } from "../shipper";
import { Spool } from "../spool";
import { startMeteringChild } from "./child";
import { freePort, ledgerState, type Rig, truncateLedger } from "./rig";
import { startSilentProxy } from "../../shared/testing/silent-proxy";
import { syntheticRequests } from "./synthetic";

/**
 * Fault scenarios of the metering pipeline, shared by the tests (which assert on the figures) and
 * `npm run chaos` (which prints them). Each runs against real local servers of a {@link Rig}.
 */

/** A pending usage event ending now (token windows of the auth service are current). */
export function pendingEvent(prefix: string, i: number, over: Partial<PendingEvent> = {}): PendingEvent {
    const end = Date.now();
    return {
        requestId: `${prefix}-${i}`,
        spoke: "hn1",
        tenant: "acme",
        team: "search",
        keyId: `key-${i % 3}`,
        model: "meta-llama/Llama-3.3-70B-Instruct",
        endpoint: "inference/llama-70b",
        inputTokens: 100 + i,
        outputTokens: 10 + (i % 50),
        cachedInputTokens: 0,
        status: 200,
        stream: true,
        truncated: false,
        usageSource: "reported",
        startedAt: new Date(end - 1500).toISOString(),
        endedAt: new Date(end).toISOString(),
        ...over,
    };
}

/** Figure of a run: events lost / counted twice, given what the spoke acknowledged. */
async function figure(
    rig: Rig,
    expectedIds: string[],
    quarantinedIds: string[],
    recoverySeconds: number | null,
    detail: string,
): Promise<ChaosFigure & { quarantined: number }> {
    const st = await ledgerState(rig.db);
    const quarantinedHub = (await rig.db.query("SELECT request_id FROM usage_spoke_quarantine")).rows.map((r) => r.request_id as string);
    const accounted = new Set([...st.ids, ...quarantinedHub]);
    const lost = expectedIds.filter((id) => !accounted.has(id)).length;
    const wrongQuarantine = quarantinedIds.filter((id) => !quarantinedHub.includes(id)).length;
    const doubleCounted = Math.max(0, st.aggregated - st.events) + [...st.ids].filter((id) => quarantinedHub.includes(id)).length;
    return { recoverySeconds, lost: lost + wrongQuarantine, doubleCounted, quarantined: quarantinedHub.length, detail };
}

export interface SilentKinesisOptions {
    /** How long the partition lasts, ms. Default 3 s. */
    silenceMs?: number;
    /** Shipper request timeout, ms. Default 1 s. */
    requestTimeoutMs?: number;
    /** Give up waiting for the drain after this, ms. Default 20 s. */
    drainTimeoutMs?: number;
}

/**
 * Kinesis goes silent (connections open, nothing answers) while the spoke keeps spooling, then heals.
 * Figure: seconds from the heal until the spool is drained, events lost / double counted in the ledger.
 * `reconnected`: connections the shipper opened after the heal (it must give up the dead one).
 */
export async function kinesisSilentThenHealed(
    rig: Rig,
    o: SilentKinesisOptions = {},
): Promise<ChaosFigure & { drained: boolean; reconnected: number }> {
    await truncateLedger(rig.db);
    const stream = await rig.stream("usage-silent");
    const kinPort = Number(new URL(rig.kin.endpoint).port);
    const proxy = await startSilentProxy({ host: "127.0.0.1", port: kinPort });
    const spool = await Spool.open({ dir: rig.tempDir("chaos-silent-"), instance: "metering-0", maxBytes: 64 << 20 });
    const transport = new KinesisTransport({
        streamName: stream.name,
        region: TEST_REGION,
        credentials: TEST_CREDENTIALS,
        endpoint: proxy.endpoint,
        requestTimeoutMs: o.requestTimeoutMs ?? 1000,
        connectionTimeoutMs: 500,
    });
    const shipper = new Shipper(spool, transport, { minBackoffMs: 50, maxBackoffMs: 500, idleMs: 20 });
    const ids: string[] = [];
    let drained = false,
        recoverySeconds: number | null = null,
        reconnected = 0;
    try {
        shipper.start();
        const first = await spool.append(Array.from({ length: 50 }, (_, i) => pendingEvent("silent", i)));
        ids.push(...first.map((e) => e.requestId));
        await shipper.drained(10_000);
        proxy.silence();
        // Traffic during the partition: the shipper's connection is now dead but open.
        for (let b = 0; b < 5; b++) {
            const st = await spool.append(Array.from({ length: 40 }, (_, i) => pendingEvent("silent", 50 + b * 40 + i)));
            ids.push(...st.map((e) => e.requestId));
            await new Promise((r) => setTimeout(r, (o.silenceMs ?? 3000) / 5));
        }
        const before = proxy.accepted;
        proxy.heal();
        const healedAt = Date.now();
        try {
            await shipper.drained(o.drainTimeoutMs ?? 20_000);
            drained = true;
            recoverySeconds = (Date.now() - healedAt) / 1000;
        } catch {
            /* figure shows it */
        }
        reconnected = proxy.accepted - before;
    } finally {
        await shipper.stop();
        await spool.close();
        transport.destroy();
        await proxy.close();
    }
    await rig.consume(stream, "hn1", 2);
    const f = await figure(rig, ids, [], recoverySeconds, "");
    return {
        ...f,
        drained,
        reconnected,
        detail: `partition ${o.silenceMs ?? 3000} ms, ${ids.length} events, ${drained ? "drained" : "NOT drained"}, ${reconnected} new connection(s) after heal`,
    };
}

/**
 * A batch holds one event over Kinesis' 1 MiB record limit (and, with `viaService`, one the service itself
 * refuses because the pre-check is turned off). Figure: the rest ships, the poison is quarantined on the spoke
 * and reported to the hub as quarantined; 0 lost, 0 double counted.
 */
export async function poisonRecordInBatch(
    rig: Rig,
    opts: { viaService?: boolean } = {},
): Promise<
    ChaosFigure & {
        quarantined: number;
        spokeQuarantine: Array<{ reason: string; record: { requestId: string } }>;
        poisoned: number;
        missing: number;
    }
> {
    await truncateLedger(rig.db);
    const stream = await rig.stream("usage-poison");
    const dir = rig.tempDir("chaos-poison-");
    const spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 64 << 20 });
    const transport = new KinesisTransport({
        streamName: stream.name,
        region: TEST_REGION,
        credentials: TEST_CREDENTIALS,
        endpoint: rig.kin.endpoint,
    });
    const logs: Array<Record<string, unknown>> = [];
    const shipper = new Shipper(spool, transport, {
        minBackoffMs: 20,
        maxBackoffMs: 200,
        idleMs: 20,
        maxRecordBytes: opts.viaService ? 64 << 20 : undefined,
        log: (msg, f) => logs.push({ msg, ...f }),
    });
    const huge = "x".repeat(1024 * 1024 + 10);
    const events = Array.from({ length: 30 }, (_, i) => pendingEvent("poison", i, i === 7 ? { endpoint: huge } : {}));
    let drained = false;
    try {
        await spool.append(events.slice(0, 20));
        await spool.append(events.slice(20));
        shipper.start();
        try {
            await shipper.drained(15_000);
            drained = true;
        } catch {
            /* figure shows it */
        }
    } finally {
        await shipper.stop();
        await spool.close();
        transport.destroy();
    }
    await rig.consume(stream, "hn1", 2);
    const ids = events.map((e) => e.requestId);
    const f = await figure(rig, ids, ["poison-7"], null, "");
    const q = fs.existsSync(path.join(dir, "quarantine.jsonl"))
        ? fs
              .readFileSync(path.join(dir, "quarantine.jsonl"), "utf8")
              .trim()
              .split("\n")
              .filter(Boolean)
              .map((l) => JSON.parse(l))
        : [];
    const missing = (await reconcile(rig.db, { spoke: "hn1" })).reduce((n, r) => n + r.missing, 0);
    const alerts = logs.filter((l) => l.alert === "MeteringPoisonRecord").length;
    return {
        ...f,
        lost: f.lost + (drained ? 0 : 1),
        spokeQuarantine: q,
        poisoned: shipper.poisoned,
        missing,
        detail: `${events.length} events, 1 over 1 MiB${opts.viaService ? " (refused by the service)" : ""}: ${drained ? "rest shipped" : "stream BLOCKED"}, ${f.quarantined} quarantined at the hub, ${alerts} alert log line(s), reconciliation missing ${missing}`,
    };
}

/** Token-window counters the ledger implies (60 s windows, metering's default without a bundle), by Redis key. */
export async function countersFromLedger(rig: Rig, windowSeconds = 60): Promise<Map<string, number>> {
    const rows = (await rig.db.query("SELECT tenant, team, key_id, model, ended_at, input_tokens + output_tokens AS t FROM usage_events"))
        .rows;
    const out = new Map<string, number>();
    for (const r of rows) {
        const t = Number(r.t);
        if (t <= 0) continue;
        const ids = tierIds({ tenant: r.tenant, team: r.team, keyId: r.key_id, model: r.model });
        const ws = { model: windowSeconds, team: windowSeconds, key: windowSeconds };
        for (const k of tokenKeys(ids, new Date(r.ended_at).getTime(), ws)) out.set(k, (out.get(k) ?? 0) + t);
    }
    return out;
}

/** Every token-window counter in Redis (`rl:{<tier>:<id>}:tok:<start>`). */
export async function countersInRedis(redis: Redis): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    let cursor = "0";
    do {
        const [next, keys] = await redis.scan(cursor, "MATCH", "rl:*:tok:*", "COUNT", 1000);
        cursor = next;
        if (keys.length) {
            const vals = await redis.mget(...keys);
            keys.forEach((k, i) => {
                if (vals[i] !== null) out.set(k, Number(vals[i]));
            });
        }
    } while (cursor !== "0");
    return out;
}

/** Where the metering process dies in {@link meteringKillAndRedeliver}. */
export type KillStep = "after-spool" | "after-tokens" | "after-put" | "mid-shipping";

/**
 * The real metering process is killed with SIGKILL at `step` while a batch goes through, restarted, and the
 * collector redelivers the batch it is unsure of (plus new traffic). Figure: ledger events lost / doubled, and
 * Redis token counters that differ from what the ledger implies (over = double counted, under = lost).
 */
export async function meteringKillAndRedeliver(
    rig: Rig,
    redis: Redis,
    redisUrl: string,
    step: KillStep,
    seed = 7,
): Promise<
    ChaosFigure & { counterMismatches: string[]; counters: number; ledgerEvents: number; metered: number; killedByFailpoint: boolean }
> {
    await truncateLedger(rig.db);
    await redis.flushall();
    const stream = await rig.stream(`usage-kill-${step}`);
    const spoolDir = rig.tempDir("chaos-kill-");
    const port = await freePort();
    const reqs = syntheticRequests(300, "hn1", seed, Date.now());
    const a = reqs.slice(0, 150),
        b = reqs.slice(150);
    const start = (failpoint?: "after-spool" | "after-tokens" | "after-put") =>
        startMeteringChild({ spoolDir, port, stream: stream.name, kinesisEndpoint: rig.kin.endpoint, redisUrl, failpoint });
    let child = await start(step === "mid-shipping" ? undefined : step);
    await child.post(a.map((r) => r.record));
    // The failpoint fires by itself; "mid-shipping" (and a build without failpoints) is killed from outside.
    const killedByFailpoint = step !== "mid-shipping" && (await child.exited(5000));
    if (step === "mid-shipping") {
        // Kill once shipping is under way (the hub has acknowledged a first batch), not before.
        const until = Date.now() + 5000;
        while (!((await child.metric("metering_shipped_through_seq")) >= 0) && Date.now() < until)
            await new Promise((r) => setTimeout(r, 20));
    }
    await child.kill9();
    const restartedAt = Date.now();
    child = await start();
    let recoverySeconds: number | null = null;
    try {
        // The collector did not see (or cannot trust) the acknowledgement of batch A: it sends it again.
        await child.post(a.map((r) => r.record));
        await child.post(b.map((r) => r.record));
        const deadline = Date.now() + 30_000;
        for (;;) {
            const next = await child.metric("metering_spool_next_seq");
            const shipped = await child.metric("metering_shipped_through_seq");
            const applied = await child.metric("metering_tokens_applied_through_seq");
            if (next > 0 && shipped === next - 1 && applied === next - 1) break;
            if (Date.now() > deadline) break;
            await new Promise((r) => setTimeout(r, 100));
        }
        recoverySeconds = (Date.now() - restartedAt) / 1000;
    } finally {
        await child.stop();
    }
    await rig.consume(stream, "hn1", 2);
    const metered = reqs.filter((r) => r.expected).map((r) => r.expected!.requestId);
    const f = await figure(rig, metered, [], recoverySeconds, "");
    const want = await countersFromLedger(rig),
        got = await countersInRedis(redis);
    const keys = new Set([...want.keys(), ...got.keys()]);
    const over: string[] = [],
        under: string[] = [];
    for (const k of keys) {
        const w = want.get(k) ?? 0,
            g = got.get(k) ?? 0;
        if (g > w) over.push(`${k}: redis ${g} > ledger ${w}`);
        else if (g < w) under.push(`${k}: redis ${g} < ledger ${w}`);
    }
    const st = await ledgerState(rig.db);
    return {
        ...f,
        lost: f.lost + under.length,
        doubleCounted: f.doubleCounted + over.length,
        counterMismatches: [...over, ...under],
        counters: keys.size,
        ledgerEvents: st.events,
        metered: metered.length,
        killedByFailpoint,
        detail: `kill -9 ${step}${killedByFailpoint ? "" : " (from outside)"}, batch redelivered after restart: ledger ${st.events}/${metered.length} events, ${keys.size} token counters, ${over.length} over, ${under.length} under`,
    };
}

/**
 * A consumer (Lambda) that crashed after committing a batch gets it again after its restart, on a new
 * connection, while a second consumer works the same stream. Figure: the ledger counts each event once.
 */
export async function redeliveryAfterConsumerRestart(rig: Rig): Promise<ChaosFigure> {
    await truncateLedger(rig.db);
    const stream = await rig.stream("usage-redeliver");
    const spool = await Spool.open({ dir: rig.tempDir("chaos-redeliver-"), instance: "metering-0", maxBytes: 64 << 20 });
    const transport = new KinesisTransport({
        streamName: stream.name,
        region: TEST_REGION,
        credentials: TEST_CREDENTIALS,
        endpoint: rig.kin.endpoint,
    });
    const shipper = new Shipper(spool, transport, { minBackoffMs: 20, maxBackoffMs: 200, idleMs: 20 });
    const events = Array.from({ length: 400 }, (_, i) => pendingEvent("redeliver", i));
    try {
        await spool.append(events);
        shipper.start();
        await shipper.drained(15_000);
    } finally {
        await shipper.stop();
        await spool.close();
        transport.destroy();
    }
    const spokes = { [stream.arn]: "hn1" };
    const t0 = Date.now();
    // First consumer: commits every batch, then "crashes" (its connection is dropped without a reply).
    const c1 = await rig.pg.connect();
    await pollStream(rig.kin.client, stream.name, stream.arn, 100, async (e) => {
        await processBatch(c1, e, spokes);
    });
    await c1.end();
    // Restarted consumer and a concurrent one get every batch again (Lambda retries from the checkpoint).
    const [c2, c3] = await Promise.all([rig.pg.connect(), rig.pg.connect()]);
    await Promise.all([
        pollStream(rig.kin.client, stream.name, stream.arn, 100, async (e) => {
            await processBatch(c2, e, spokes);
        }),
        pollStream(rig.kin.client, stream.name, stream.arn, 37, async (e) => {
            await processBatch(c3, e, spokes);
        }),
    ]);
    await Promise.all([c2.end(), c3.end()]);
    const f = await figure(
        rig,
        events.map((e) => e.requestId),
        [],
        (Date.now() - t0) / 1000,
        "",
    );
    const agg = await hourlyAggregates(rig.db);
    const want = expectedAggregates(events.map((e, i) => ({ ...e, seq: i, source: "x" })));
    const aggOk = JSON.stringify(agg) === JSON.stringify(want);
    return {
        ...f,
        doubleCounted: f.doubleCounted + (aggOk ? 0 : 1),
        detail: `400 events consumed 3 times over 2 restarts/consumers: hourly aggregates ${aggOk ? "exact" : "WRONG"}`,
    };
}
