/**
 * S3 server access logging of the hub's two data buckets (components/hub/AccessLogs.ts, `platform:accessLogs`): the
 * rendered log bucket and the logging of each source bucket. Its policy is evaluated by the IAM simulator in
 * test/aws-simulate.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { CapturedResource } from "../tools/harness";
import { byType, flatConfig, inputs, runRepoStack, stackConfigDoc } from "./helpers";

let rs: CapturedResource[];
beforeAll(async () => {
    rs = (await runRepoStack("hub-prod")).resources;
});
const one = (res: CapturedResource[], type: string, name: string) => {
    const r = res.find((x) => x.type === type && x.name === name);
    if (!r) throw new Error(`no ${type} ${name}`);
    return r;
};

describe("the hub's data buckets log every request to a dedicated log bucket", () => {
    it("the log bucket: fixed name, protected and retained, SSE-S3, public access blocked, ownership enforced, expiring after a year", () => {
        const bucket = one(rs, "aws:s3/bucket:Bucket", "access-logs-bucket");
        expect(inputs(bucket).bucket).toBe("platform-s3-access-logs-123456789012-ap-southeast-1");
        expect(bucket.options).toMatchObject({ protect: true, retainOnDelete: true });
        const name = inputs(bucket).bucket;
        const of = (type: string) =>
            byType(rs, type)
                .filter((r) => inputs(r).bucket === name)
                .map(inputs);
        expect(of("aws:s3/bucketOwnershipControls:BucketOwnershipControls")).toEqual([
            expect.objectContaining({ rule: { objectOwnership: "BucketOwnerEnforced" } }),
        ]);
        expect(of("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")).toEqual([
            expect.objectContaining({
                blockPublicAcls: true,
                blockPublicPolicy: true,
                ignorePublicAcls: true,
                restrictPublicBuckets: true,
            }),
        ]);
        // Server access log delivery supports SSE-S3 default encryption on the target bucket, not SSE-KMS.
        expect(of("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")).toEqual([
            expect.objectContaining({ rules: [{ applyServerSideEncryptionByDefault: { sseAlgorithm: "AES256" } }] }),
        ]);
        expect(of("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")).toEqual([
            expect.objectContaining({
                rules: [expect.objectContaining({ status: "Enabled", filter: { prefix: "" }, expiration: { days: 365 } })],
            }),
        ]);
        expect(of("aws:s3/bucketPolicy:BucketPolicy")).toHaveLength(1);
    });

    it("the policy bucket and the failure bucket each log under their own prefix, date-partitioned, once the policy admits delivery", () => {
        const logging = byType(rs, "aws:s3/bucketLogging:BucketLogging");
        const byBucket = Object.fromEntries(logging.map((l) => [inputs(l).bucket, inputs(l)]));
        expect(Object.keys(byBucket).sort()).toEqual([
            "platform-policy-bundles-123456789012-ap-southeast-1",
            "platform-usage-failed-batches-123456789012-ap-southeast-1",
        ]);
        expect(byBucket["platform-policy-bundles-123456789012-ap-southeast-1"].targetPrefix).toBe("policy-bundles/");
        expect(byBucket["platform-usage-failed-batches-123456789012-ap-southeast-1"].targetPrefix).toBe("usage-failed-batches/");
        const policy = one(rs, "aws:s3/bucketPolicy:BucketPolicy", "access-logs-policy");
        for (const l of logging) {
            expect(inputs(l)).toMatchObject({
                targetBucket: "platform-s3-access-logs-123456789012-ap-southeast-1",
                targetObjectKeyFormat: { partitionedPrefix: { partitionDateSource: "EventTime" } },
            });
            expect(l.dependencies).toContain(policy.urn);
        }
        // Every S3 bucket of the hub is either a logged data bucket or the log bucket itself.
        const buckets = byType(rs, "aws:s3/bucket:Bucket").map((b) => inputs(b).bucket);
        expect(buckets.filter((b) => !byBucket[b])).toEqual(["platform-s3-access-logs-123456789012-ap-southeast-1"]);
    });

    it("platform:accessLogs.retentionDays sets the expiry; a bad value is refused naming the key", async () => {
        const d = stackConfigDoc("hub-prod");
        d["platform:accessLogs"] = { retentionDays: 90 };
        const up = (await runRepoStack("hub-prod", { config: flatConfig(d) })).resources;
        expect(
            inputs(one(up, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "access-logs-expiry")).rules[0].expiration,
        ).toEqual({ days: 90 });
        d["platform:accessLogs"] = { retentionDays: 0 };
        await expect(runRepoStack("hub-prod", { config: flatConfig(d) })).rejects.toThrow(/platform:accessLogs\.retentionDays/);
    });
});
