import { beforeEach, describe, expect, it } from "vitest";
import { expectedAggregates, hourlyAggregates, ingestBatch } from "./ledger";
import { reconcile } from "./reconcile";
import { mixedEvent, range } from "./testing/events";
import { useLedgerDb } from "./testing/ledger-db";

const ledgerDb = useLedgerDb();
beforeEach(async () => {
    await ledgerDb.db.query("TRUNCATE usage_events, usage_hourly, usage_receipts, usage_quarantine, usage_spoke_quarantine");
});

const ev = mixedEvent;

describe("ledger ingestion (real PostgreSQL)", () => {
    it("the same batch twice counts once", async () => {
        const batch = range(0, 50).map((i) => ev(i));
        expect(await ingestBatch(ledgerDb.db, batch)).toEqual({ received: 50, inserted: 50, receipts: 50 });
        expect(await ingestBatch(ledgerDb.db, batch)).toEqual({ received: 50, inserted: 0, receipts: 0 });
        expect(await hourlyAggregates(ledgerDb.db)).toEqual(expectedAggregates(batch));
        expect((await ledgerDb.db.query("SELECT count(*)::int AS n FROM usage_events")).rows[0].n).toBe(50);
    });

    it("overlapping batches and duplicates inside one batch count once; aggregates match exactly", async () => {
        const all = range(0, 100).map((i) => ev(i));
        await ingestBatch(ledgerDb.db, all.slice(0, 60));
        await ingestBatch(ledgerDb.db, [...all.slice(40, 100), ...all.slice(50, 55)]);
        // A retried request re-spooled with a new seq (collector retry after metering restarted): same requestId.
        await ingestBatch(ledgerDb.db, [ev(7, { seq: 100, inputTokens: 999 })]);
        const got = await hourlyAggregates(ledgerDb.db);
        expect(got).toEqual(expectedAggregates(all));
        expect(got.reduce((n, a) => n + a.requests, 0)).toBe(100);
        expect(got.reduce((n, a) => n + a.inputTokens, 0)).toBe(range(0, 100).reduce((n, i) => n + 100 + i, 0));
        expect(got.filter((a) => a.hour === "2026-11-29T10:00:00.000Z").reduce((n, a) => n + a.requests, 0)).toBe(25);
        // Reconciliation: 101 receipts (seq 0..100), 100 counted, 1 duplicate, no gaps.
        const rep = await reconcile(ledgerDb.db);
        expect(rep.map((r) => [r.hour, r.sent, r.received, r.counted, r.duplicates, r.missing])).toEqual([
            ["2026-11-29T09:00:00.000Z", 76, 76, 75, 1, 0],
            ["2026-11-29T10:00:00.000Z", 25, 25, 25, 0, 0],
        ]);
    });

    it("concurrent consumers ingesting the same events count them once", async () => {
        const all = range(0, 400).map((i) => ev(i));
        const conns = await Promise.all([ledgerDb.connect(), ledgerDb.connect(), ledgerDb.connect()]);
        await Promise.all(conns.map((c, k) => ingestBatch(c, k === 1 ? [...all].reverse() : all)));
        await Promise.all(conns.map((c) => c.end()));
        expect(await hourlyAggregates(ledgerDb.db)).toEqual(expectedAggregates(all));
    });

    it("reconciliation lists the gaps per spoke and hour", async () => {
        const seqs = [0, 1, 2, 5, 6, 9];
        await ingestBatch(
            ledgerDb.db,
            seqs.map((s) => ev(s, { endedAt: s < 6 ? "2026-11-29T09:30:00.000Z" : "2026-11-29T10:30:00.000Z" })),
        );
        await ingestBatch(ledgerDb.db, [ev(1000, { spoke: "hcm1", seq: 3, source: "metering-1.bbbb0000" })]);
        const rep = await reconcile(ledgerDb.db);
        expect(rep).toEqual([
            {
                spoke: "hcm1",
                hour: "2026-11-29T10:00:00.000Z",
                received: 1,
                counted: 1,
                duplicates: 0,
                quarantined: 0,
                missing: 3,
                sent: 4,
                gaps: [{ source: "metering-1.bbbb0000", fromSeq: 0, toSeq: 2 }],
            },
            {
                spoke: "hn1",
                hour: "2026-11-29T09:00:00.000Z",
                received: 4,
                counted: 4,
                duplicates: 0,
                quarantined: 0,
                missing: 2,
                sent: 6,
                gaps: [{ source: "metering-0.aaaa0000", fromSeq: 3, toSeq: 4 }],
            },
            {
                spoke: "hn1",
                hour: "2026-11-29T10:00:00.000Z",
                received: 2,
                counted: 2,
                duplicates: 0,
                quarantined: 0,
                missing: 2,
                sent: 4,
                gaps: [{ source: "metering-0.aaaa0000", fromSeq: 7, toSeq: 8 }],
            },
        ]);
        expect(await reconcile(ledgerDb.db, { spoke: "hn1", from: "2026-11-29T10:00:00Z" })).toHaveLength(1);
    });
});
