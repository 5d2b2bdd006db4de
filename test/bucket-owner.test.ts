/**
 * Every S3 call our code makes to a hub bucket (the policy bucket: pointers, bundles, ACKs; the usage failure bucket
 * `failed/`) carries `ExpectedBucketOwner` = the hub's account. Evaluated, not inspected: the real code runs against
 * the S3 stand-in (s3rver, which ignores the header) through a client that behaves as S3 does for a bucket owned by
 * the hub's account and, stricter than S3, also refuses a request without the header
 * (services/auth/test/harness.ts `requireBucketOwner`). A call that drops the condition fails here.
 */
import * as path from "node:path";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolicyContractSchema, policyBucketOwner } from "../config/contract";
import { BundleStore, createS3Client } from "../services/auth/bundles";
import { loadConfig as loadAuthConfig } from "../services/auth/config";
import { AuthMetrics } from "../services/auth/metrics";
import {
    BUCKET,
    BUCKET_OWNER_ACCOUNT,
    hubKeys,
    makePolicy,
    memoryLogger,
    ownerCheckedClient,
    publishBundle,
    requireBucketOwner,
    type S3Server,
    startS3,
    tempDir,
    type TempDir,
    testConfig,
} from "../services/auth/test/harness";
import { loadConfig as loadMeteringConfig } from "../services/metering/config";
import { BundleWindows } from "../services/metering/limits";
import { policyObjectReader } from "../services/metering/policy-reader";
import { readFailedBatch } from "../services/reconciler/ops";
import { expectBucketOwner } from "../services/shared/bucket-owner";
import { bundlePaths } from "../services/shared/bundle";
import { keepFailedBatch } from "../services/usage-consumer/failed-batches";
import { replayFailedBatches } from "../services/usage-consumer/replay";
import { failureBucketFromHubOutputs } from "../tools/replay-usage";
import { spokesFromHubOutputs } from "../tools/status";

const OTHER_ACCOUNT = "999999999999";
const KEY_ARN = `arn:aws:kms:us-east-1:${BUCKET_OWNER_ACCOUNT}:key/11111111-2222-3333-4444-555555555555`;
const MODEL = "Qwen/Qwen3-32B";
const hub = hubKeys();
const policy = makePolicy({
    models: { [MODEL]: undefined },
    keys: [{ id: "k1", secret: "sk-one-aaaaaaaaaaaa", tenant: "acme", team: "core", models: [MODEL] }],
});

let s3: S3Server;
let tmp: TempDir;
beforeAll(async () => {
    s3 = await startS3();
    tmp = tempDir("bucket-owner-");
    await publishBundle(s3, hub, "hn1", 1, policy);
});
afterAll(async () => {
    await s3?.destroy();
    tmp?.remove();
});

/** The auth service's BundleStore on the client the service builds (createS3Client), checked by the stand-in. */
function authStore(owner: string, cacheName: string) {
    const config = testConfig({
        spoke: "hn1",
        publicKey: hub.publicKey,
        s3Endpoint: s3.endpoint,
        redisUrl: "redis://127.0.0.1:1",
        cachePath: path.join(tmp.dir, cacheName),
        env: { AUTH_POLICY_BUCKET_OWNER: owner },
    });
    const checked = requireBucketOwner(createS3Client(config.s3));
    const store = new BundleStore({
        s3: checked.client,
        bucket: config.s3.bucket,
        spoke: "hn1",
        publicKey: hub.publicKey,
        cachePath: config.cachePath,
        pollIntervalMs: 60_000,
        metrics: new AuthMetrics(() => undefined),
        log: memoryLogger().log,
        now: Date.now,
    });
    return { store, seen: checked.seen, client: checked.client };
}

describe("ExpectedBucketOwner on every call to a hub bucket", () => {
    it("auth: pointer, bundle and ACK carry the hub's account (AUTH_POLICY_BUCKET_OWNER); a bucket of another account is never read", async () => {
        const ok = authStore(BUCKET_OWNER_ACCOUNT, "ok.json");
        expect(await ok.store.syncOnce()).toBe("updated");
        expect(await s3.get(bundlePaths.ack("hn1", 1))).toBeDefined();
        expect(ok.seen.map((r) => `${r.method} ${r.owner}`)).toEqual([
            `GET ${BUCKET_OWNER_ACCOUNT}`,
            `GET ${BUCKET_OWNER_ACCOUNT}`,
            `PUT ${BUCKET_OWNER_ACCOUNT}`,
        ]);
        ok.client.destroy();

        // The service configured with another account: S3 refuses, nothing is served.
        const other = authStore(OTHER_ACCOUNT, "other.json");
        expect(await other.store.syncOnce()).toBe("error");
        expect(other.store.current()).toBeUndefined();
        expect(other.seen.map((r) => r.owner)).toEqual([OTHER_ACCOUNT]);
        other.client.destroy();
    });

    it("auth: the client refuses a command naming another owner, and the service refuses to start without one", async () => {
        const { client } = authStore(BUCKET_OWNER_ACCOUNT, "x.json");
        await expect(
            client.send(new GetObjectCommand({ Bucket: BUCKET, Key: bundlePaths.current("hn1"), ExpectedBucketOwner: OTHER_ACCOUNT })),
        ).rejects.toThrow(/expects bucket owner 999999999999, this client serves 123456789012's buckets only/);
        client.destroy();
        expect(() => expectBucketOwner(ownerCheckedClient(s3.endpoint).client, "12345")).toThrow(/12-digit AWS account id/);
        const env = {
            AUTH_SPOKE: "hn1",
            AUTH_HUB_PUBLIC_KEY: hub.publicKey,
            AUTH_POLICY_BUCKET: BUCKET,
            AUTH_S3_REGION: "us-east-1",
            AUTH_REDIS_URL: "redis://127.0.0.1:1",
            AUTH_CACHE_SALT_KEY: Buffer.alloc(32, 1).toString("base64"),
        };
        expect(() => loadAuthConfig(env)).toThrow(/AUTH_POLICY_BUCKET_OWNER/);
        expect(loadAuthConfig({ ...env, AUTH_POLICY_BUCKET_OWNER: BUCKET_OWNER_ACCOUNT }).s3.expectedBucketOwner).toBe(
            BUCKET_OWNER_ACCOUNT,
        );
    });

    it("metering: the token windows' reads of pointer and bundle carry it; a policy bucket without its owner is refused", async () => {
        const { client, seen } = ownerCheckedClient(s3.endpoint);
        const windows = new BundleWindows(policyObjectReader(client, BUCKET, BUCKET_OWNER_ACCOUNT), "hn1", hub.publicKey);
        expect(await windows.refresh()).toBe(true);
        expect(seen.map((r) => `${r.method} ${r.owner}`)).toEqual([`GET ${BUCKET_OWNER_ACCOUNT}`, `GET ${BUCKET_OWNER_ACCOUNT}`]);
        const stranger = new BundleWindows(policyObjectReader(client, BUCKET, OTHER_ACCOUNT), "hn1", hub.publicKey);
        await expect(stranger.refresh()).rejects.toThrow(/Access Denied/);
        client.destroy();
        const env = { METERING_SPOKE: "hn1", METERING_INSTANCE: "metering-0", METERING_STREAM_NAME: "s", METERING_STREAM_REGION: "r" };
        expect(() => loadMeteringConfig({ ...env, METERING_POLICY_BUCKET: BUCKET })).toThrow(/METERING_POLICY_BUCKET_OWNER: required/);
        expect(
            loadMeteringConfig({ ...env, METERING_POLICY_BUCKET: BUCKET, METERING_POLICY_BUCKET_OWNER: BUCKET_OWNER_ACCOUNT }),
        ).toBeDefined();
    });

    it("failure bucket: the consumer's upload, the replay's list/get/delete and the ledger Lambda's read carry it", async () => {
        const { client, seen } = ownerCheckedClient(s3.endpoint);
        const arn = `arn:aws:kinesis:us-east-1:${BUCKET_OWNER_ACCOUNT}:stream/platform-usage-hn1`;
        const event = {
            Records: [
                {
                    eventID: "shardId-000000000000:1",
                    eventSourceARN: arn,
                    kinesis: { data: Buffer.from("{}").toString("base64"), partitionKey: "p", sequenceNumber: "1" },
                },
            ],
        };
        const store = { s3: client, bucket: BUCKET, bucketOwner: BUCKET_OWNER_ACCOUNT, kmsKeyArn: KEY_ARN };
        const key = await keepFailedBatch(store, event as never, { [arn]: "hn1" }, new Error("database gone"));
        expect(JSON.parse(await readFailedBatch(client, { bucket: BUCKET, owner: BUCKET_OWNER_ACCOUNT }, key)).records).toHaveLength(1);
        const ingested: string[] = [];
        const rows = await replayFailedBatches({
            s3: client,
            bucket: BUCKET,
            bucketOwner: BUCKET_OWNER_ACCOUNT,
            ingest: async (k) => {
                ingested.push(k);
                return { inserted: 1, duplicates: 0, quarantined: 0 } as never;
            },
            dryRun: false,
        });
        expect(rows.map((r) => r.deleted)).toEqual([true]);
        expect(ingested).toEqual([key]);
        // PUT (keep), GET (the Lambda's read), GET list, GET object, DELETE: every one with the hub's account.
        expect(seen.map((r) => r.method)).toEqual(["PUT", "GET", "GET", "GET", "DELETE"]);
        expect(new Set(seen.map((r) => r.owner))).toEqual(new Set([BUCKET_OWNER_ACCOUNT]));

        // Pointed at a bucket of another account, each of them is refused before anything is read, written or removed.
        await expect(keepFailedBatch({ ...store, bucketOwner: OTHER_ACCOUNT }, event as never, { [arn]: "hn1" }, "x")).rejects.toThrow(
            /Access Denied/,
        );
        await expect(readFailedBatch(client, { bucket: BUCKET, owner: OTHER_ACCOUNT }, key)).rejects.toThrow(/Access Denied/);
        await expect(replayFailedBatches({ s3: client, bucket: BUCKET, bucketOwner: OTHER_ACCOUNT, dryRun: true })).rejects.toThrow(
            /Access Denied/,
        );
        client.destroy();
    });

    it("the owner reaches the spoke and the operator tools from the hub's outputs (and from the key's account for an older hub)", () => {
        const policyBlock = { bucket: "b", region: "us-east-1", kmsKeyArn: KEY_ARN };
        expect(policyBucketOwner({ ...policyBlock, bucketOwner: "111111111111" })).toBe("111111111111");
        expect(policyBucketOwner(policyBlock)).toBe(BUCKET_OWNER_ACCOUNT);
        expect(() => policyBucketOwner({ kmsKeyArn: "arn:k" })).toThrow(/no bucket owner/);
        expect(
            spokesFromHubOutputs({ spokeContracts: { hn1: { policy: { ...policyBlock, bucketOwner: "111111111111" } } } }, "f").hn1,
        ).toEqual({
            bucket: "b",
            owner: "111111111111",
            region: "us-east-1",
        });
        expect(spokesFromHubOutputs({ spokeContracts: { hn1: { policy: policyBlock } } }, "f").hn1.owner).toBe(BUCKET_OWNER_ACCOUNT);
        expect(() => spokesFromHubOutputs({ spokeContracts: { hn1: { policy: { bucket: "b", region: "r" } } } }, "f")).toThrow(
            /names no bucket owner/,
        );
        const ledger = { failedBatchBucket: "fb", streams: { hn1: { region: "us-east-1" } } };
        expect(failureBucketFromHubOutputs({ usageLedger: { ...ledger, failedBatchBucketOwner: "111111111111" } }, "f").owner).toBe(
            "111111111111",
        );
        expect(failureBucketFromHubOutputs({ usageLedger: { ...ledger, failedBatchKeyArn: KEY_ARN } }, "f").owner).toBe(
            BUCKET_OWNER_ACCOUNT,
        );
        expect(() => failureBucketFromHubOutputs({ usageLedger: ledger }, "f")).toThrow(/pass --bucket-owner/);
    });

    it("a contract's policy block whose bucketOwner is not the account of its kmsKeyArn is refused, naming bucketOwner", () => {
        const block = {
            bucket: "policy-bundles",
            bucketOwner: BUCKET_OWNER_ACCOUNT,
            region: "us-east-1",
            prefix: "spokes/hn1/",
            publicKey: `${"A".repeat(43)}=`,
            keyId: "0123456789abcdef",
            kmsKeyArn: KEY_ARN,
            roleArn: `arn:aws:iam::${BUCKET_OWNER_ACCOUNT}:role/r`,
            revision: 1,
            contentHash: "0".repeat(64),
        };
        expect(PolicyContractSchema.safeParse(block).success).toBe(true);
        expect(PolicyContractSchema.safeParse({ ...block, bucketOwner: undefined }).success).toBe(true);
        const r = PolicyContractSchema.safeParse({ ...block, bucketOwner: OTHER_ACCOUNT });
        expect(r.success).toBe(false);
        expect(r.error?.issues.map((i) => [i.path.join("."), i.message])).toEqual([
            ["bucketOwner", expect.stringMatching(new RegExp(`bucketOwner ${OTHER_ACCOUNT} is not the account of kmsKeyArn`))],
        ]);
    });
});
