import type { Client } from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { UsageEvent } from "../shared/usage";
import {
    compactHourly,
    expectedAggregates,
    hourlyAggregates,
    INGEST_STATEMENTS,
    ingestBatch,
    ingestOrder,
    ingestPayload,
    migrate,
    type Queryable,
    rollupHourly,
} from "./ledger";
import { mixedEvent, range } from "./testing/events";
import { useLedgerDb } from "./testing/ledger-db";
import { INGEST_SQL_V1, schemaV1 } from "./testing/ledger-v1";
import { startPostgres, type TestPostgres } from "./testing/postgres";

/**
 * Hourly aggregates (services/ledger/schema.sql): rolled up below the watermark, read live from the events above
 * it, late events as deltas. Every test checks the aggregates against expectedAggregates of what was delivered,
 * so a double count or a lost event in any part (live, rolled up, late delta, compacted) fails it.
 */
const ledgerDb = useLedgerDb();

const H9 = "2026-11-29T09:00:00.000Z",
    H10 = "2026-11-29T10:00:00.000Z",
    H11 = "2026-11-29T11:00:00.000Z";
/** Watermarks: every test hour live, or every test hour already rolled up (so every event is late). */
const LIVE = "2026-11-29T00:00:00.000Z",
    LATE = "2026-11-30T00:00:00.000Z";

/** Every 7th event estimated (services/ledger/testing/events.ts). */
const ev = (i: number, over: Partial<UsageEvent> = {}): UsageEvent => mixedEvent(i, over, 7);
/** A further delivery of event i: same request and usage, re-spooled under a new seq (a collector retry). */
const again = (i: number, seq: number) => ev(i, { seq });

async function reset(db: Queryable, watermark: string) {
    await db.query("TRUNCATE usage_events, usage_hourly, usage_receipts, usage_quarantine, usage_spoke_quarantine");
    await db.query("UPDATE usage_rollup SET rolled_until = $1", [watermark]);
}

/**
 * The ledger's guarantees for `delivered` (every delivery, in any order and multiplicity): aggregates equal the
 * oracle, each (spoke, source, seq) delivered is in exactly one of usage_events and usage_receipts, and
 * usage_hourly never holds more requests than were counted (the metering rig's double-count check).
 */
async function expectExact(db: Queryable, delivered: readonly UsageEvent[]) {
    expect(await hourlyAggregates(db)).toEqual(expectedAggregates(delivered));
    const rows = (
        await db.query(`SELECT spoke, source, seq::int AS seq, count(*)::int AS n FROM (
        SELECT spoke, source, seq FROM usage_events UNION ALL SELECT spoke, source, seq FROM usage_receipts) d GROUP BY 1, 2, 3`)
    ).rows;
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    expect(new Set(rows.map((r) => `${r.spoke}/${r.source}/${r.seq}`))).toEqual(
        new Set(delivered.map((e) => `${e.spoke}/${e.source}/${e.seq}`)),
    );
    const { hourly, events } = (
        await db.query(
            "SELECT (SELECT COALESCE(sum(requests), 0)::int FROM usage_hourly) AS hourly, (SELECT count(*)::int FROM usage_events) AS events",
        )
    ).rows[0];
    expect(hourly).toBeLessThanOrEqual(events);
}

async function pidOf(c: Client): Promise<number> {
    return (await c.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
}

/** Resolves once backend `pid` waits on a lock (a row, a transaction, an advisory lock). Take the pid first: a
 * client runs one query at a time, so asking a blocked one would wait behind its own blocked query. */
async function blocked(db: Queryable, pid: number): Promise<void> {
    for (;;) {
        const r = await db.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [pid]);
        if (r.rows[0]?.wait_event_type === "Lock") return;
        await new Promise((res) => setTimeout(res, 20));
    }
}

describe.each([
    ["live hours", LIVE],
    ["hours already rolled up (late events)", LATE],
])("ingestion into %s (real PostgreSQL)", (_name, watermark) => {
    beforeEach(() => reset(ledgerDb.db, watermark));

    it("redelivery, overlapping batches and duplicates inside a batch count once", async () => {
        const all = range(0, 100).map((i) => ev(i));
        const delivered = [...all.slice(0, 60), ...all.slice(40, 100), ...all.slice(50, 55), again(7, 100), again(8, 101), again(8, 102)];
        expect(await ingestBatch(ledgerDb.db, all.slice(0, 60))).toEqual({ received: 60, inserted: 60, receipts: 60 });
        expect(await ingestBatch(ledgerDb.db, all.slice(0, 60))).toEqual({ received: 60, inserted: 0, receipts: 0 });
        expect(await ingestBatch(ledgerDb.db, [...all.slice(40, 100), ...all.slice(50, 55)])).toEqual({
            received: 65,
            inserted: 40,
            receipts: 40,
        });
        // Further deliveries of counted requests under new seqs: receipts, in their own batch and mixed with new events.
        expect(await ingestBatch(ledgerDb.db, [again(7, 100), again(8, 101), again(8, 102)])).toEqual({
            received: 3,
            inserted: 0,
            receipts: 3,
        });
        await expectExact(ledgerDb.db, delivered);
        const r = await ingestBatch(ledgerDb.db, [ev(200), again(200, 201), ev(200)]);
        expect(r).toEqual({ received: 3, inserted: 1, receipts: 2 });
        await expectExact(ledgerDb.db, [...delivered, ev(200), again(200, 201)]);
    });

    it("concurrent consumers ingesting the same and overlapping batches count each request once", async () => {
        const all = range(0, 400).map((i) => ev(i));
        const conns = await Promise.all([ledgerDb.connect(), ledgerDb.connect(), ledgerDb.connect(), ledgerDb.connect()]);
        try {
            await Promise.all([
                ingestBatch(conns[0], all),
                ingestBatch(conns[1], [...all].reverse()),
                ingestBatch(conns[2], all.slice(100, 300)),
                (async () => {
                    for (let i = 0; i < 400; i += 50) await ingestBatch(conns[3], all.slice(i, i + 50));
                })(),
            ]);
        } finally {
            await Promise.all(conns.map((c) => c.end()));
        }
        await expectExact(ledgerDb.db, all);
    });

    it("a batch that races a concurrent insert of the same requests falls back to ON CONFLICT and counts the rest", async () => {
        const [c1, c2] = await Promise.all([ledgerDb.connect(), ledgerDb.connect()]);
        try {
            const a = range(0, 30).map((i) => ev(i)),
                b = range(30, 60).map((i) => ev(i));
            await c1.query("BEGIN");
            await ingestBatch(c1, a, { attempts: 1 });
            // c2's optimistic plain INSERT waits on c1's uncommitted rows, then meets them committed.
            const pid = await pidOf(c2);
            const pending = ingestBatch(c2, [...a, ...b]);
            await blocked(ledgerDb.db, pid);
            await c1.query("COMMIT");
            expect(await pending).toEqual({ received: 60, inserted: 30, receipts: 30 });
        } finally {
            await Promise.all([c1.end(), c2.end()]);
        }
        await expectExact(
            ledgerDb.db,
            range(0, 60).map((i) => ev(i)),
        );
    });
});

describe("rollup of closed hours, late events, compaction (real PostgreSQL)", () => {
    beforeEach(() => reset(ledgerDb.db, H9));
    const rows = async (hour: string) =>
        (await ledgerDb.db.query("SELECT count(*)::int AS n FROM usage_hourly WHERE hour = $1", [hour])).rows[0].n;

    it("rolls hour by hour into one row per group; late events append deltas; compaction folds them; sums never move", async () => {
        const first = range(0, 80).map((i) => ev(i));
        await ingestBatch(ledgerDb.db, first);
        await expectExact(ledgerDb.db, first);
        expect(await rows(H9)).toBe(0); // live: nothing materialised

        expect(await rollupHourly(ledgerDb.db, H10)).toMatchObject({ from: H9, to: H10 });
        const groups9 = expectedAggregates(first).filter((a) => a.hour === H9).length;
        expect(await rows(H9)).toBe(groups9);
        await expectExact(ledgerDb.db, first);

        // Late: new requests into hour 9 (rolled up) and 10 (live), a redelivery, a new delivery of a counted request.
        const late = [...range(80, 100).map((i) => ev(i)), ev(3), again(5, 500)];
        await ingestBatch(ledgerDb.db, late);
        const delivered = [...first, ...late];
        await expectExact(ledgerDb.db, delivered);
        expect(await rows(H9)).toBeGreaterThan(groups9);

        // Rolling on takes hour 10 only (hour 9 is never aggregated twice); a second call finds nothing to do.
        expect(await rollupHourly(ledgerDb.db, H11)).toMatchObject({ from: H10, to: H11 });
        expect(await rollupHourly(ledgerDb.db, H11)).toMatchObject({ from: H11, to: H11, groups: 0 });
        await expectExact(ledgerDb.db, delivered);

        expect((await compactHourly(ledgerDb.db, { from: H9, to: H11 })).groups).toBeGreaterThan(0);
        const per = (
            await ledgerDb.db.query(
                "SELECT count(*)::int AS n FROM usage_hourly GROUP BY tenant, team, key_id, model, hour HAVING count(*) > 1",
            )
        ).rows;
        expect(per).toEqual([]);
        expect(await compactHourly(ledgerDb.db, { from: H9, to: H11 })).toEqual({ groups: 0, deltas: 0 });
        await expectExact(ledgerDb.db, delivered);
        expect((await hourlyAggregates(ledgerDb.db, { from: H10, to: H11 })).every((a) => a.hour === H10)).toBe(true);
    });

    it("a rollup waits for an uncommitted ingest of its hour and includes it", async () => {
        const [ing, rol] = await Promise.all([ledgerDb.connect(), ledgerDb.connect()]);
        const events = range(0, 40).map((i) => ev(i, { endedAt: "2026-11-29T09:30:00.000Z" }));
        try {
            await ing.query("BEGIN");
            await ingestBatch(ing, events, { attempts: 1 }); // live at the old watermark: no delta
            const pid = await pidOf(rol);
            const pending = rollupHourly(rol, H10);
            await blocked(ledgerDb.db, pid);
            await ing.query("COMMIT");
            expect((await pending).to).toBe(H10);
        } finally {
            await Promise.all([ing.end(), rol.end()]);
        }
        expect(await rows(H9)).toBe(expectedAggregates(events).length); // the rollup's rows only: no delta
        await expectExact(ledgerDb.db, events);
    });

    it("an ingest into an hour being rolled up waits for the rollup and appends deltas", async () => {
        const [ing, rol] = await Promise.all([ledgerDb.connect(), ledgerDb.connect()]);
        const before = range(0, 20).map((i) => ev(i, { endedAt: "2026-11-29T09:30:00.000Z" }));
        const during = range(20, 40).map((i) => ev(i, { endedAt: "2026-11-29T09:30:00.000Z" }));
        try {
            await ingestBatch(ledgerDb.db, before);
            await rol.query("BEGIN");
            await rol.query("SELECT * FROM usage_hourly_rollup($1)", [H10]);
            const pid = await pidOf(ing);
            const pending = ingestBatch(ing, during);
            await blocked(ledgerDb.db, pid);
            await rol.query("COMMIT");
            expect(await pending).toMatchObject({ inserted: 20 });
        } finally {
            await Promise.all([ing.end(), rol.end()]);
        }
        await expectExact(ledgerDb.db, [...before, ...during]);
    });
});

describe("ingest statement", () => {
    beforeEach(() => reset(ledgerDb.db, LIVE));

    it("orders by spoke, requestId, source, seq and marks the later deliveries of a request", () => {
        const batch = [ev(2), ev(1, { seq: 9 }), ev(1, { seq: 3 }), ev(1, { spoke: "a", seq: 4 })];
        expect(ingestOrder(batch).map((e) => [e.spoke, e.requestId, e.seq])).toEqual([
            ["a", "r-1", 4],
            ["hn1", "r-1", 3],
            ["hn1", "r-1", 9],
            ["hn1", "r-2", 2],
        ]);
        expect(JSON.parse(ingestPayload(batch)).map((e: { repeat?: boolean }) => e.repeat ?? false)).toEqual([false, false, true, false]);
        expect(batch.map((e) => e.seq)).toEqual([2, 9, 3, 4]); // input untouched
    });

    it("the optimistic statement counts a batch with duplicates inside it without falling back", async () => {
        const batch = [ev(1), ev(2), again(1, 50), ev(2)];
        expect(await ingestBatch(ledgerDb.db, batch, { attempts: 1, mode: "optimistic" })).toEqual({
            received: 4,
            inserted: 2,
            receipts: 3,
        });
        await expectExact(ledgerDb.db, batch);
    });

    it("no prepared ingest plan scans usage_events, whatever the table's size when it was planned", async () => {
        // Planned on an empty, never-analysed table (the state in which a join guard would choose a sequential scan).
        await ledgerDb.db.query("TRUNCATE usage_events");
        await ingestBatch(ledgerDb.db, [ev(1)], { mode: "optimistic" });
        await ingestBatch(ledgerDb.db, [ev(2), ev(1)], { mode: "on-conflict" });
        for (const name of Object.values(INGEST_STATEMENTS)) {
            const plan = (await ledgerDb.db.query(`EXPLAIN EXECUTE ${name}('[]', 0)`)).rows
                .map((r) => r["QUERY PLAN"] as string)
                .join("\n");
            expect(plan).toContain("Insert on usage_events");
            expect(plan).not.toMatch(/Scan on usage_events|Scan using usage_events/);
        }
    });
});

describe("migration from the upsert schema (usage_hourly one row per group, with data)", () => {
    let pg: TestPostgres;
    let db: Client;
    beforeAll(async () => {
        pg = await startPostgres();
        db = await pg.connect();
    });
    afterAll(async () => {
        await db?.end();
        await pg?.stop();
    });

    it("keeps every aggregate, is idempotent, and counts new, redelivered and late events exactly", async () => {
        await migrate(db, schemaV1());
        const nextHour = new Date(Date.parse(`${new Date().toISOString().slice(0, 13)}:00:00.000Z`) + 3_600_000);
        const future = ev(900, { endedAt: new Date(nextHour.getTime() + 60_000).toISOString() }); // a spoke whose clock runs ahead
        const old = [...range(0, 50).map((i) => ev(i)), again(3, 300), future];
        for (const batch of [old.slice(0, 30), old.slice(20)]) await db.query(INGEST_SQL_V1, [JSON.stringify(batch)]);
        const before = (await db.query("SELECT count(*)::int AS n FROM usage_hourly")).rows[0].n;

        await migrate(db);
        await migrate(db);
        expect((await db.query("SELECT count(*)::int AS n FROM usage_hourly")).rows[0].n).toBe(before); // nothing rewritten
        // The watermark starts after the last hour the old table aggregated.
        expect(new Date((await db.query("SELECT rolled_until FROM usage_rollup")).rows[0].rolled_until).toISOString()).toBe(
            new Date(nextHour.getTime() + 3_600_000).toISOString(),
        );
        await expectExact(db, old);

        const now = new Date().toISOString();
        const more = [ev(60), ev(61, { endedAt: now }), ev(7), again(8, 800), ev(901, { endedAt: future.endedAt })];
        await ingestBatch(db, more);
        await expectExact(db, [...old, ...more]);
        await compactHourly(db, { from: H9, to: new Date(nextHour.getTime() + 3_600_000).toISOString() });
        await expectExact(db, [...old, ...more]);
    });
});
