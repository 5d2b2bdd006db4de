import { describe, expect, it } from "vitest";
import { expectedAggregates, hourlyAggregates, ingestBatch } from "../ledger/ledger";
import { useLedgerDb } from "../ledger/testing/ledger-db";
import type { UsageEvent } from "../shared/usage";
import { decodeBatch, type KinesisStreamEvent, processBatch, readEnv } from "./handler";

const ledgerDb = useLedgerDb();

function ev(i: number, over: Partial<UsageEvent> = {}): UsageEvent {
    return {
        requestId: `r-${i}`,
        spoke: "hn1",
        tenant: "acme",
        team: "search",
        keyId: "k",
        model: "m",
        endpoint: "e",
        inputTokens: 100 + i,
        outputTokens: 10 + i,
        cachedInputTokens: i,
        status: 200,
        stream: true,
        truncated: false,
        usageSource: "reported",
        startedAt: "2026-11-29T09:58:00.000Z",
        endedAt: "2026-11-29T09:59:59.999Z",
        seq: i,
        source: "metering-0.aaaa0000",
        ...over,
    };
}

describe("usage consumer (Lambda handler logic, real PostgreSQL)", () => {
    const ARN = "arn:aws:kinesis:ap-southeast-1:123456789012:stream/usage-hn1";
    const rec = (id: string, payload: string) => ({
        eventID: id,
        eventSourceARN: ARN,
        kinesis: { data: Buffer.from(payload).toString("base64"), partitionKey: "p", sequenceNumber: id },
    });

    it("malformed records are quarantined with a reason (once), valid ones counted once, on redelivery too", async () => {
        const good = [ev(1), ev(2)];
        const batch: KinesisStreamEvent = {
            Records: [
                rec("s0:1", JSON.stringify(good[0])),
                rec("s0:2", "{not json"),
                rec("s0:3", JSON.stringify({ ...ev(3), inputTokens: -5 })),
                rec("s0:4", JSON.stringify(ev(4, { spoke: "hcm1" }))),
                rec("s0:5", JSON.stringify(good[1])),
            ],
        };
        expect(await processBatch(ledgerDb.db, batch, { [ARN]: "hn1" })).toEqual({
            received: 2,
            inserted: 2,
            receipts: 2,
            quarantined: 3,
            spokeQuarantined: 0,
        });
        expect(await processBatch(ledgerDb.db, batch, { [ARN]: "hn1" })).toEqual({
            received: 2,
            inserted: 0,
            receipts: 0,
            quarantined: 0,
            spokeQuarantined: 0,
        });
        const q = (await ledgerDb.db.query("SELECT origin, reason FROM usage_quarantine ORDER BY origin")).rows;
        expect(q.map((r) => r.origin)).toEqual(["s0:2", "s0:3", "s0:4"]);
        expect(q[0].reason).toMatch(/^invalid JSON: /);
        expect(q[1].reason).toBe("schema: inputTokens: Too small: expected number to be >=0");
        expect(q[2].reason).toBe('event names spoke "hcm1" but arrived on the stream of spoke "hn1"');
        expect(await hourlyAggregates(ledgerDb.db)).toEqual(expectedAggregates(good));
    });

    it("a batch racing another consumer's uncommitted insert of the same requests is run again and counted once", async () => {
        await ledgerDb.db.query("TRUNCATE usage_events, usage_hourly, usage_receipts, usage_quarantine, usage_spoke_quarantine");
        const first = [ev(10), ev(11)],
            all = [...first, ev(12), ev(13)];
        const [other, consumer] = await Promise.all([ledgerDb.connect(), ledgerDb.connect()]);
        try {
            await other.query("BEGIN");
            await ingestBatch(other, first, { attempts: 1 });
            const pid = (await consumer.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
            const batch: KinesisStreamEvent = { Records: [...all.map((e, i) => rec(`s2:${i}`, JSON.stringify(e))), rec("s2:9", "{bad")] };
            const pending = processBatch(consumer, batch, { [ARN]: "hn1" });
            // The consumer's optimistic insert waits on the other transaction's rows, then meets them committed.
            for (;;) {
                const r = await ledgerDb.db.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [pid]);
                if (r.rows[0]?.wait_event_type === "Lock") break;
                await new Promise((res) => setTimeout(res, 20));
            }
            await other.query("COMMIT");
            expect(await pending).toEqual({ received: 4, inserted: 2, receipts: 2, quarantined: 1, spokeQuarantined: 0 });
        } finally {
            await Promise.all([other.end(), consumer.end()]);
        }
        expect(await hourlyAggregates(ledgerDb.db)).toEqual(expectedAggregates(all));
        expect((await ledgerDb.db.query("SELECT count(*)::int AS n FROM usage_receipts")).rows[0].n).toBe(0);
        expect((await ledgerDb.db.query("SELECT count(*)::int AS n FROM usage_quarantine")).rows[0].n).toBe(1);
    });

    it("a record from an unknown stream is quarantined", () => {
        const { events, bad } = decodeBatch({ Records: [rec("s1:1", JSON.stringify(ev(1)))] }, {});
        expect(events).toEqual([]);
        expect(bad[0].reason).toBe(`stream ${ARN} is not a known usage stream`);
    });
});

describe("usage consumer environment", () => {
    it("names the missing variable", () => {
        expect(() => readEnv({ PGHOST: "h", PGDATABASE: "ledger", PGUSER: "u", DB_PASSWORD_SECRET_ARN: "arn:x" })).toThrow(
            /invalid usage consumer configuration:\n {2}STREAM_SPOKES: /,
        );
        expect(() =>
            readEnv({ PGHOST: "h", PGDATABASE: "ledger", PGUSER: "u", DB_PASSWORD_SECRET_ARN: "arn:x", STREAM_SPOKES: "{" }),
        ).toThrow(/STREAM_SPOKES: invalid JSON/);
        expect(() =>
            readEnv({ PGHOST: "h", PGDATABASE: "ledger", PGUSER: "u", DB_PASSWORD_SECRET_ARN: "arn:x", STREAM_SPOKES: '{"arn:s":"hn1"}' }),
        ).toThrow(/FAILED_BATCH_BUCKET: /);
        expect(
            readEnv({
                PGHOST: "h",
                PGDATABASE: "ledger",
                PGUSER: "u",
                DB_PASSWORD_SECRET_ARN: "arn:x",
                STREAM_SPOKES: '{"arn:s":"hn1"}',
                FAILED_BATCH_BUCKET: "b",
                FAILED_BATCH_BUCKET_OWNER: "123456789012",
                FAILED_BATCH_KMS_KEY_ARN: "arn:k",
            }),
        ).toEqual({
            host: "h",
            port: 5432,
            database: "ledger",
            user: "u",
            passwordSecretArn: "arn:x",
            streamSpokes: { "arn:s": "hn1" },
            failedBatchBucket: "b",
            failedBatchBucketOwner: "123456789012",
            failedBatchKmsKeyArn: "arn:k",
        });
    });
});
