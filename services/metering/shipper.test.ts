import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reconcile } from "../ledger/reconcile";
import type { UsageEvent } from "../shared/usage";
import { KINESIS_MAX_RECORD_BYTES, kinesisRecordBytes, quarantineMarker, Shipper, type Transport } from "./shipper";
import { Spool } from "./spool";
import { type Rig, startRig } from "./testing/rig";
import { kinesisSilentThenHealed, pendingEvent, poisonRecordInBatch } from "./testing/scenarios";

/**
 * The shipper on a bad day, against kinesalite and PostgreSQL on loopback: a silent partition (connections
 * open, nothing answers) that heals, and a record Kinesis cannot take. Limits: Amazon Kinesis Data Streams API
 * Reference, `PutRecordsRequestEntry` (data + partition key ≤ 1 MiB, `Data` length ≤ 1,048,576) and
 * `PutRecords` (500 records, 5 MiB per call, per-record `ErrorCode` with `FailedRecordCount`).
 */
let rig: Rig;
beforeAll(async () => {
    rig = await startRig();
});
afterAll(async () => {
    await rig?.stop();
});

describe("shipper: bounded Kinesis calls", () => {
    it("a silent Kinesis connection is dropped at the request timeout; after the heal the spool drains within seconds, nothing lost or doubled", async () => {
        const f = await kinesisSilentThenHealed(rig, { silenceMs: 3000, requestTimeoutMs: 1000, drainTimeoutMs: 15_000 });
        expect(f.drained).toBe(true);
        // Request timeout 1 s + backoff cap 0.5 s: the drain needs at most a few seconds after the heal.
        expect(f.recoverySeconds!).toBeLessThan(5);
        expect(f.reconnected).toBeGreaterThan(0);
        expect(f.lost).toBe(0);
        expect(f.doubleCounted).toBe(0);
    });
});

describe("shipper: poison records never block the stream", () => {
    it("an event over the 1 MiB record limit is quarantined on the spoke with an alert line; the rest ships; the hub reports it as quarantined", async () => {
        const f = await poisonRecordInBatch(rig);
        expect(f.poisoned).toBe(1);
        expect(f.lost).toBe(0);
        expect(f.doubleCounted).toBe(0);
        expect(f.quarantined).toBe(1);
        expect(f.missing).toBe(0);
        expect(f.spokeQuarantine).toHaveLength(1);
        expect(f.spokeQuarantine[0].reason).toMatch(
            /^poison: record is \d+ bytes \(data \+ partition key\), over the Kinesis record limit of 1048576 \(seq 7, source metering-0\.[0-9a-f]{8}\)$/,
        );
        expect(f.spokeQuarantine[0].record.requestId).toBe("poison-7");
        const rep = await reconcile(rig.db, { spoke: "hn1" });
        expect(rep.reduce((n, r) => n + r.quarantined, 0)).toBe(1);
        expect(rep.reduce((n, r) => n + r.counted, 0)).toBe(29);
        expect(rep.reduce((n, r) => n + r.duplicates, 0)).toBe(0);
        expect(rep.reduce((n, r) => n + r.sent, 0)).toBe(30);
    });

    it("a record the service refuses in a ValidationException (pre-check off) is isolated and quarantined; the rest ships", async () => {
        const f = await poisonRecordInBatch(rig, { viaService: true });
        expect(f.poisoned).toBe(1);
        expect(f.spokeQuarantine[0].reason).toMatch(/^poison: Kinesis ValidationException: .*records\.\d+\.member\.data/);
        expect([f.lost, f.doubleCounted, f.quarantined, f.missing]).toEqual([0, 0, 1, 0]);
    });

    it("partial PutRecords failures resend only the failed records, in place, until accepted once", async () => {
        const dir = rig.tempDir("shipper-partial-");
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        const sent: number[][] = [];
        const accepted: number[] = [];
        let call = 0;
        const t: Transport = {
            async put(records) {
                call++;
                sent.push(records.map((r) => r.seq));
                // First call: records 1 and 3 throttled (ErrorCode ProvisionedThroughputExceededException).
                const retry = call === 1 ? [1, 3] : [];
                records.forEach((r, i) => {
                    if (!retry.includes(i)) accepted.push(r.seq);
                });
                return { retry, poison: [] };
            },
        };
        const sh = new Shipper(s, t, { minBackoffMs: 1, maxBackoffMs: 2, idleMs: 5 });
        await s.append(Array.from({ length: 5 }, (_, i) => pendingEvent("partial", i)));
        sh.start();
        await sh.drained(5000);
        await sh.stop();
        expect(sent).toEqual([
            [0, 1, 2, 3, 4],
            [1, 3],
        ]);
        expect(accepted.sort()).toEqual([0, 1, 2, 3, 4]);
        await s.close();
    });

    it("the quarantine marker always fits in a record", () => {
        const e = {
            ...pendingEvent("m", 1, { requestId: "r".repeat(2 * 1024 * 1024) }),
            seq: 3,
            source: "metering-0.abcd0123",
        } as UsageEvent;
        const m = quarantineMarker(e, "x".repeat(10_000), 5);
        expect(m.requestId).toMatch(/^sha256:[0-9a-f]{64}$/);
        expect(kinesisRecordBytes(m)).toBeLessThan(KINESIS_MAX_RECORD_BYTES / 100);
    });
});
