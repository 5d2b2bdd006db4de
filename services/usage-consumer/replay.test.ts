/**
 * Failed usage batches end to end, against the local stand-ins: a Kinesis stream (kinesalite), the failure bucket
 * (s3rver) and the ledger (real PostgreSQL). The consumer fails batches while its database is gone; their records are
 * kept in the bucket; `npm run replay-usage` (spawned as the operator runs it) lists them in a dry run, then ingests
 * them once, idempotently, and removes them.
 */
import { execFile } from "node:child_process";
import { PutRecordsCommand } from "@aws-sdk/client-kinesis";
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUCKET, BUCKET_OWNER_ACCOUNT, ownerCheckedClient, type S3Server, startS3 } from "../auth/test/harness";
import { expectedAggregates, hourlyAggregates, ingestBatch } from "../ledger/ledger";
import { useLedgerDb } from "../ledger/testing/ledger-db";
import type { UsageEvent } from "../shared/usage";
import { FAILED_BATCH_PREFIX, FailedBatchSchema, failedBatchKey } from "./failed-batches";
import { consumeBatch, type KinesisStreamEvent } from "./handler";
import { pollStream, startKinesis, type TestKinesis } from "./testing/kinesis";

const ROOT = path.join(__dirname, "..", "..");
const LOADER = path.join(ROOT, "tools", "register-esbuild.js");
const KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555";

const ledger = useLedgerDb();
let s3: S3Server;
let kinesis: TestKinesis;
beforeAll(async () => {
    [s3, kinesis] = await Promise.all([startS3(), startKinesis()]);
});
afterAll(async () => {
    await Promise.all([s3?.destroy(), kinesis?.stop()]);
});

function ev(i: number): UsageEvent {
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
        cachedInputTokens: 0,
        status: 200,
        stream: false,
        truncated: false,
        usageSource: "reported",
        startedAt: "2026-11-29T09:58:00.000Z",
        endedAt: "2026-11-29T09:59:59.999Z",
        seq: i,
        source: "metering-0.aaaa0000",
    };
}

function replay(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
        execFile(
            process.execPath,
            ["-r", LOADER, path.join(ROOT, "tools", "replay-usage.ts"), ...args],
            {
                cwd: ROOT,
                env: { ...process.env, AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER", ...env },
            },
            (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
        );
    });
}

async function storedKeys(client: S3Client): Promise<string[]> {
    const r = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: FAILED_BATCH_PREFIX }));
    return (r.Contents ?? []).map((o) => o.Key!).sort();
}

describe("failed usage batches: kept with their records, replayed once", () => {
    it("a batch the consumer fails is stored with its records under the ledger key; the replay tool ingests it once", async () => {
        const client = s3.client as S3Client;
        const events = Array.from({ length: 7 }, (_, i) => ev(i));
        const arn = await kinesis.createStream("platform-usage-hn1", 1);
        await kinesis.client.send(
            new PutRecordsCommand({
                StreamName: "platform-usage-hn1",
                Records: events.map((e) => ({ Data: Buffer.from(JSON.stringify(e)), PartitionKey: e.requestId })),
            }),
        );
        const streamSpokes = { [arn]: "hn1" };

        // The database is gone: every batch fails (the driver's own error), and each batch is kept before it fails.
        const gone = await ledger.connect();
        await gone.end();
        // Our writes go through a client the stand-in refuses without the hub's account as the expected owner.
        const store = { s3: ownerCheckedClient(s3.endpoint).client, bucket: BUCKET, bucketOwner: BUCKET_OWNER_ACCOUNT, kmsKeyArn: KEY_ARN };
        const failed: KinesisStreamEvent[] = [];
        await pollStream(kinesis.client, "platform-usage-hn1", arn, 3, async (batch) => {
            await expect(consumeBatch(gone, batch, streamSpokes, store)).rejects.toThrow(/Client was closed|not queryable|closed/i);
            failed.push(batch);
        });
        expect(failed.map((b) => b.Records.length)).toEqual([3, 3, 1]);
        const keys = await storedKeys(client);
        expect(keys).toEqual(failed.map((b) => failedBatchKey(b, streamSpokes)).sort());
        expect(keys.every((k) => k.startsWith("failed/hn1/shardId-000000000000/"))).toBe(true);
        const stored = FailedBatchSchema.parse(
            JSON.parse(
                await (
                    await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: failedBatchKey(failed[0], streamSpokes) }))
                ).Body!.transformToString(),
            ),
        );
        expect(stored.records).toEqual(failed[0].Records);
        expect(stored.streamSpokes).toEqual(streamSpokes);
        expect(stored.error).toMatch(/closed/i);
        // The same batch failing again overwrites its own object: no pile-up during an outage.
        await expect(consumeBatch(gone, failed[0], streamSpokes, store)).rejects.toThrow();
        expect(await storedKeys(client)).toEqual(keys);
        expect(await hourlyAggregates(ledger.db)).toEqual([]);

        // One of the events reached the ledger meanwhile (another delivery of the same record): the replay counts it once.
        await ingestBatch(ledger.db, [events[0]]);

        const common = ["--bucket", BUCKET, "--bucket-owner", BUCKET_OWNER_ACCOUNT, "--region", "us-east-1", "--s3-endpoint", s3.endpoint];
        const dry = await replay(common);
        expect(dry.stderr).toBe("");
        expect(dry.code).toBe(0);
        expect(dry.stdout).toContain("3 failed batches, 7 records (dry run: nothing ingested; --apply to replay)");
        expect(await storedKeys(client)).toEqual(keys);
        expect((await ledger.db.query("SELECT count(*)::int AS n FROM usage_events")).rows[0].n).toBe(1);

        const url = `postgresql://${ledger.db.user}@${ledger.db.host}:${ledger.db.port}/${ledger.db.database}`;
        const applied = await replay([...common, "--apply"], { DATABASE_URL: url });
        expect(applied.stderr).toBe("");
        expect(applied.code).toBe(0);
        expect(applied.stdout).toContain("3 batches replayed, 7 records, 6 events were missing from the ledger");
        expect(await storedKeys(client)).toEqual([]);
        expect(await hourlyAggregates(ledger.db)).toEqual(expectedAggregates(events));

        const again = await replay([...common, "--apply"], { DATABASE_URL: url });
        expect(again.stdout).toContain("0 batches replayed, 0 records");
        expect(await hourlyAggregates(ledger.db)).toEqual(expectedAggregates(events));
    }, 60_000);

    it("--apply without a reachable ledger fails with the variables to set, and leaves the batches", async () => {
        const r = await replay(
            ["--bucket", BUCKET, "--bucket-owner", BUCKET_OWNER_ACCOUNT, "--region", "us-east-1", "--s3-endpoint", s3.endpoint, "--apply"],
            {
                DATABASE_URL: "postgresql://nobody@127.0.0.1:1/ledger",
            },
        );
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(
            /^replay-usage: cannot reach the usage ledger \(DATABASE_URL\): .*Set DATABASE_URL or the libpq variables/,
        );
    }, 30_000);

    it("usage the consumer never ran on (only pointers in the failure queue): --rescue-stream keeps it in the bucket while the stream still has it, then the replay ingests it once", async () => {
        const client = s3.client as S3Client;
        const events = Array.from({ length: 5 }, (_, i) => ({ ...ev(100 + i), spoke: "hcm1" }));
        const arn = await kinesis.createStream("platform-usage-hcm1", 2);
        await kinesis.client.send(
            new PutRecordsCommand({
                StreamName: "platform-usage-hcm1",
                Records: events.map((e) => ({ Data: Buffer.from(JSON.stringify(e)), PartitionKey: e.requestId })),
            }),
        );
        // What `pulumi stack output --json` of the hub says about the ledger (the consumer never ran: no object yet).
        const outputs = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "rescue-")), "hub.json");
        await fs.writeFile(
            outputs,
            JSON.stringify({
                usageLedger: {
                    failedBatchBucket: BUCKET,
                    failedBatchKeyArn: KEY_ARN,
                    streams: { hcm1: { streamName: "platform-usage-hcm1", streamArn: arn, region: "us-east-1" } },
                },
            }),
        );
        const before = await storedKeys(client);
        const common = [
            "--outputs",
            outputs,
            "--region",
            "us-east-1",
            "--s3-endpoint",
            s3.endpoint,
            "--kinesis-endpoint",
            kinesis.endpoint,
        ];
        const dry = await replay([...common, "--rescue-stream"]);
        expect(dry.stderr).toBe("");
        expect(dry.stdout).toContain(`hcm1 (${arn}): 2 shards, 5 records`);
        expect(dry.stdout).toContain("5 records still in the streams (dry run: nothing copied");
        expect(await storedKeys(client)).toEqual(before);

        const kept = await replay([...common, "--rescue-stream", "--apply"]);
        expect(kept.stderr).toBe("");
        expect(kept.stdout).toContain("5 records kept in the failure bucket");
        const keys = (await storedKeys(client)).filter((k) => !before.includes(k));
        expect(keys.length).toBeGreaterThanOrEqual(1);
        expect(keys.every((k) => k.startsWith("failed/hcm1/shardId-"))).toBe(true);
        const stored = FailedBatchSchema.parse(
            JSON.parse(await (await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: keys[0] }))).Body!.transformToString()),
        );
        expect(stored.streamSpokes).toEqual({ [arn]: "hcm1" });
        expect(stored.error).toMatch(/rescued from the stream/);

        // The stream may expire now: the records are in the bucket. The replay ingests them once, even if run twice.
        const url = `postgresql://${ledger.db.user}@${ledger.db.host}:${ledger.db.port}/${ledger.db.database}`;
        const count = async () =>
            (await ledger.db.query("SELECT count(*)::int AS n FROM usage_events WHERE spoke = 'hcm1'")).rows[0].n as number;
        const applied = await replay(
            ["--bucket", BUCKET, "--bucket-owner", BUCKET_OWNER_ACCOUNT, "--region", "us-east-1", "--s3-endpoint", s3.endpoint, "--apply"],
            {
                DATABASE_URL: url,
            },
        );
        expect(applied.stderr).toBe("");
        expect(await count()).toBe(5);
        await replay([...common, "--rescue-stream", "--apply"]);
        await replay(
            ["--bucket", BUCKET, "--bucket-owner", BUCKET_OWNER_ACCOUNT, "--region", "us-east-1", "--s3-endpoint", s3.endpoint, "--apply"],
            { DATABASE_URL: url },
        );
        expect(await count()).toBe(5);
    }, 60_000);

    it("without a bucket it reads hub outputs, and says which output is missing", async () => {
        const r = await replay(["--outputs", path.join(ROOT, "package.json")]);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(/no usageLedger\.failedBatchBucket output .*pass --bucket/);
    }, 30_000);
});
