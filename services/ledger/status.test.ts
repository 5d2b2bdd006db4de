import { beforeEach, describe, expect, it } from "vitest";
import type { QuarantineMarker, UsageEvent } from "../shared/usage";
import { ingestBatch, recordSpokeQuarantine } from "./ledger";
import { runReconciliation, spokeUsageStatus } from "./status";
import { useLedgerDb } from "./testing/ledger-db";

const ledgerDb = useLedgerDb();
beforeEach(async () => {
    await ledgerDb.db.query(
        "TRUNCATE usage_events, usage_hourly, usage_receipts, usage_quarantine, usage_spoke_quarantine, reconciliation_runs",
    );
});

function ev(i: number, over: Partial<UsageEvent> = {}): UsageEvent {
    return {
        requestId: `r-${i}`,
        spoke: "hn1",
        tenant: "acme",
        team: "search",
        keyId: "k",
        model: "m",
        endpoint: "e",
        inputTokens: 10,
        outputTokens: 1,
        cachedInputTokens: 0,
        status: 200,
        stream: false,
        truncated: false,
        usageSource: "reported",
        startedAt: "2026-11-29T09:00:00.000Z",
        endedAt: `2026-11-29T09:${String(10 + i).padStart(2, "0")}:00.000Z`,
        seq: i,
        source: "metering-0.aaaa0000",
        ...over,
    };
}

describe("spoke usage status (npm run status, ledger side)", () => {
    it("per spoke: last usage, last ingest, quarantined events and the last reconciliation; configured spokes without data are listed", async () => {
        await ingestBatch(
            ledgerDb.db,
            [0, 1, 2, 4].map((i) => ev(i)),
        );
        const marker: QuarantineMarker = {
            kind: "quarantined",
            requestId: "r-3",
            spoke: "hn1",
            source: "metering-0.aaaa0000",
            seq: 3,
            endedAt: "2026-11-29T09:13:00.000Z",
            reason: "too large",
            bytes: 2_000_000,
        };
        expect(await recordSpokeQuarantine(ledgerDb.db, [marker, marker])).toBe(1);
        await ingestBatch(ledgerDb.db, [ev(9, { spoke: "hcm1", seq: 2, source: "metering-0.bbbb0000" })]);

        const run = await runReconciliation(ledgerDb.db, { spokes: ["hn1", "hcm1", "new-region"] });
        expect([run.missing, run.quarantined]).toEqual([2, 1]);

        const st = await spokeUsageStatus(ledgerDb.db, { spokes: ["new-region"] });
        expect(st.map((s) => s.spoke)).toEqual(["hcm1", "hn1", "new-region"]);
        const hn1 = st[1];
        expect(hn1.lastUsageEndedAt).toBe("2026-11-29T09:14:00.000Z");
        expect(hn1.lastIngestedAt).not.toBeNull();
        expect([hn1.counted, hn1.quarantined]).toEqual([4, 1]);
        // seq 0..4: four counted, seq 3 quarantined, nothing missing, nothing duplicated.
        expect(hn1.lastReconciliation).toMatchObject({
            sent: 5,
            received: 5,
            counted: 4,
            duplicates: 0,
            missing: 0,
            quarantined: 1,
            gaps: [],
        });
        expect(st[0].lastReconciliation).toMatchObject({ missing: 2, gaps: [{ source: "metering-0.bbbb0000", fromSeq: 0, toSeq: 1 }] });
        expect(st[2]).toEqual({
            spoke: "new-region",
            lastUsageEndedAt: null,
            lastIngestedAt: null,
            counted: 0,
            quarantined: 0,
            lastReconciliation: expect.objectContaining({ sent: 0, missing: 0 }),
        });
    });
});
