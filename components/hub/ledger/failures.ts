import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { FAILED_BATCH_PREFIX } from "../../../services/usage-consumer/config";
import type { LedgerScope } from "./scope";
import { hubBucketName } from "../../../lib/hub-bucket-names";
import { denyInsecureTransport, denyUnlessAdministrators } from "../../../lib/policy-document";

/** Days a failed batch stays in the failure bucket before S3 expires it (replay within this window). */
export const FAILED_BATCH_RETENTION_DAYS = 35;

/**
 * Pure: the failure bucket's policy. TLS only; uploads only under the ledger key, named in the request
 * (`x-amz-server-side-encryption-aws-kms-key-id`, which the consumer always sends: services/usage-consumer/failed-batches.ts),
 * so a failed batch is never stored under another key or unencrypted. Only `administrators` (lib/kms.ts
 * `hubAdministrators`) may change where its access logs go (`s3:PutBucketLogging`: components/hub/AccessLogs.ts).
 * @throws Error when `administrators` is empty (lib/policy-document.ts `denyUnlessAdministrators`)
 */
export function failedBatchBucketPolicy(bucketArn: string, kmsKeyArn: string, administrators: readonly string[]) {
    return {
        Version: "2012-10-17",
        Statement: [
            denyInsecureTransport(bucketArn),
            {
                Sid: "DenyOtherKeys",
                Effect: "Deny",
                Principal: "*",
                Action: "s3:PutObject",
                Resource: `${bucketArn}/*`,
                Condition: { StringNotEquals: { "s3:x-amz-server-side-encryption-aws-kms-key-id": kmsKeyArn } },
            },
            denyUnlessAdministrators("OnlyHubAdministratorsChangeLogging", ["s3:PutBucketLogging"], bucketArn, administrators),
        ],
    };
}

/** The failure bucket, its policy and its owner. */
export interface FailedBatchBucket {
    bucket: aws.s3.Bucket;
    policy: aws.s3.BucketPolicy;
    /** The hub's account, which owns the bucket: what every SDK call to it sends as `ExpectedBucketOwner`. */
    owner: pulumi.Output<string>;
}

/**
 * The failure bucket of the usage consumer: failed batches with their records (under `failed/`), SSE-KMS with the
 * ledger key, private, expiring after {@link FAILED_BATCH_RETENTION_DAYS} days, protected and retained on delete.
 * `npm run replay-usage` reads it.
 */
export function failedBatchBucket(
    scope: LedgerScope,
    key: aws.kms.Key,
    accountId: pulumi.Input<string>,
    /** lib/kms.ts `hubAdministrators`: who may change the bucket's logging. */
    administrators: readonly string[],
): FailedBatchBucket {
    // Fixed, globally unique name (account and region), never an auto-suffix; protected and retained: it may hold
    // usage not yet in the ledger.
    const bucket = new aws.s3.Bucket(
        `${scope.name}-failed-batches`,
        {
            bucket: pulumi.output(accountId).apply((a) => hubBucketName("failure", scope.prefix, a, scope.region)),
            forceDestroy: false,
            tags: scope.tags,
        },
        scope.keep,
    );
    const ownership = new aws.s3.BucketOwnershipControls(
        `${scope.name}-failed-batches-ownership`,
        { bucket: bucket.bucket, rule: { objectOwnership: "BucketOwnerEnforced" } },
        scope.parent,
    );
    const publicAccess = new aws.s3.BucketPublicAccessBlock(
        `${scope.name}-failed-batches-public-access`,
        {
            bucket: bucket.bucket,
            blockPublicAcls: true,
            blockPublicPolicy: true,
            ignorePublicAcls: true,
            restrictPublicBuckets: true,
        },
        scope.parent,
    );
    new aws.s3.BucketServerSideEncryptionConfiguration(
        `${scope.name}-failed-batches-encryption`,
        {
            bucket: bucket.bucket,
            rules: [{ applyServerSideEncryptionByDefault: { sseAlgorithm: "aws:kms", kmsMasterKeyId: key.arn }, bucketKeyEnabled: true }],
        },
        scope.parent,
    );
    new aws.s3.BucketLifecycleConfiguration(
        `${scope.name}-failed-batches-expiry`,
        {
            bucket: bucket.bucket,
            rules: [
                {
                    id: "expire-failed-batches",
                    status: "Enabled",
                    filter: { prefix: FAILED_BATCH_PREFIX },
                    expiration: { days: FAILED_BATCH_RETENTION_DAYS },
                },
            ],
        },
        scope.parent,
    );
    const policy = new aws.s3.BucketPolicy(
        `${scope.name}-failed-batches-policy`,
        {
            bucket: bucket.bucket,
            policy: pulumi.all([bucket.arn, key.arn]).apply(([b, k]) => JSON.stringify(failedBatchBucketPolicy(b, k, administrators))),
        },
        { ...scope.parent, dependsOn: [publicAccess, ownership] },
    );
    return { bucket, policy, owner: pulumi.output(accountId) };
}
