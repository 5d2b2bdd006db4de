import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { ACCESS_LOG_PARTITION_DATE_SOURCE, hubBucketName } from "../../lib/hub-bucket-names";
import { denyInsecureTransport, denyUnlessAdministrators } from "../../lib/policy-document";

/** The S3 service principal that delivers server access logs (Amazon S3 user guide, "Enabling Amazon S3 server access logging"). */
export const S3_LOGGING_PRINCIPAL = "logging.s3.amazonaws.com";

/**
 * The log bucket's controls only the hub's administrators (lib/kms.ts `hubAdministrators`) may change: its policy (the
 * Denies that keep log lines), its expiry, encryption, object ownership and versioning.
 */
export const LOG_BUCKET_CONTROL_ACTIONS = [
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:PutLifecycleConfiguration",
    "s3:PutEncryptionConfiguration",
    "s3:PutBucketOwnershipControls",
    "s3:PutBucketVersioning",
] as const;

/** A bucket whose server access logs go to the log bucket, under `prefix`. */
export interface LoggedBucket {
    /** Resource name suffix of its `BucketLogging` (`<name>-<id>`). */
    id: string;
    bucket: pulumi.Input<string>;
    arn: pulumi.Input<string>;
    /** Key prefix of its logs in the log bucket, ending in `/` (`policy-bundles/`). */
    prefix: string;
}

/**
 * Pure: the log bucket's policy. Allows only the S3 logging service to put log objects, each source bucket under its
 * own prefix, and only for that source bucket (`aws:SourceArn`) of this account (`aws:SourceAccount`): the confused
 * deputy conditions the S3 user guide gives for a bucket policy granting `logging.s3.amazonaws.com` ("Permissions for
 * log delivery"). Denies any request not over TLS, any upload by another principal (no IAM principal writes a log
 * line, an account administrator included), every object deletion request, and any change of the bucket's controls
 * ({@link LOG_BUCKET_CONTROL_ACTIONS}) by a principal outside `administrators`. What a bucket policy cannot stop: the
 * account's root user can always delete or replace the bucket policy (S3 API reference, PutBucketPolicy and
 * DeleteBucketPolicy), and records leave by the lifecycle expiry, which is not a request; the source buckets' own
 * policies keep their logging on (`s3:PutBucketLogging`, same administrators: components/hub/PolicyStore.ts,
 * components/hub/ledger/failures.ts).
 * @throws Error when `administrators` is empty
 */
export function accessLogBucketPolicy(x: {
    logBucketArn: string;
    accountId: string;
    /** lib/kms.ts `hubAdministrators`: the hub deployers and `platform:keyAdministrators`. */
    administrators: readonly string[];
    sources: ReadonlyArray<{ arn: string; prefix: string }>;
}): Record<string, unknown> {
    return {
        Version: "2012-10-17",
        Statement: [
            denyInsecureTransport(x.logBucketArn),
            ...x.sources.map((s, i) => ({
                Sid: `S3ServerAccessLogs${i}`,
                Effect: "Allow",
                Principal: { Service: S3_LOGGING_PRINCIPAL },
                Action: "s3:PutObject",
                Resource: `${x.logBucketArn}/${s.prefix}*`,
                Condition: { ArnEquals: { "aws:SourceArn": s.arn }, StringEquals: { "aws:SourceAccount": x.accountId } },
            })),
            {
                Sid: "DenyOtherWriters",
                Effect: "Deny",
                Principal: "*",
                Action: "s3:PutObject",
                Resource: `${x.logBucketArn}/*`,
                // AWS's own form (awsdocs/amazon-s3-userguide@main:doc_source/example-bucket-policies.md, "Restrict
                // access to only Amazon S3 server access log deliveries"): the list is absent for an IAM principal
                // (ForAllValues over no values is true, so the Deny applies) and lists the service principals a request
                // is made by; only a request by the logging service escapes it.
                Condition: { "ForAllValues:StringNotEquals": { "aws:PrincipalServiceNamesList": S3_LOGGING_PRINCIPAL } },
            },
            {
                Sid: "DenyDeletingLogs",
                Effect: "Deny",
                Principal: "*",
                Action: ["s3:DeleteObject", "s3:DeleteObjectVersion"],
                Resource: `${x.logBucketArn}/*`,
            },
            denyUnlessAdministrators("OnlyHubAdministratorsChangeControls", LOG_BUCKET_CONTROL_ACTIONS, x.logBucketArn, x.administrators),
        ],
    };
}

/** Inputs of {@link AccessLogs}. */
export interface AccessLogsArgs {
    /** The buckets whose server access logs are kept (the policy bucket, the usage failure bucket). */
    sources: LoggedBucket[];
    /** Days before S3 expires a log object (`platform:accessLogs.retentionDays`). */
    retentionDays: number;
    /** Who may change the log bucket's controls (lib/kms.ts `hubAdministrators`). */
    administrators: readonly string[];
    /** The hub's account and region: the log bucket's fixed name and the policy's `aws:SourceAccount`. */
    accountId: pulumi.Input<string>;
    region: string;
    /** First word of the log bucket's name (`platform:namePrefix`). */
    namePrefix: string;
}

/**
 * S3 server access logging of the hub's data buckets into a dedicated log bucket
 * `<prefix>-s3-access-logs-<account>-<region>`: encrypted (SSE-S3: server access log delivery supports no SSE-KMS
 * default encryption on the target bucket, S3 user guide "Enabling Amazon S3 server access logging"), public access
 * blocked, ownership enforced (no ACLs: delivery is granted by the bucket policy, {@link accessLogBucketPolicy}),
 * objects expiring after `retentionDays`; protected and retained (an audit trail). Each source bucket logs under its own
 * prefix with date-partitioned keys (`<prefix><account>/<region>/<bucket>/<yyyy>/<mm>/<dd>/...`, by event time).
 * Server access logs are delivered best effort, usually within a few hours (same guide, "Best-effort server log
 * delivery").
 * @throws Error during the deployment (inside the log bucket's policy output) when `administrators` is empty
 *   ({@link accessLogBucketPolicy}: nobody could change the bucket's controls again)
 */
export class AccessLogs extends pulumi.ComponentResource {
    public readonly bucket: pulumi.Output<string>;
    public readonly bucketArn: pulumi.Output<string>;

    constructor(name: string, args: AccessLogsArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:AccessLogs", name, {}, opts);
        const parent = { parent: this };
        const tags = { "platform:component": "access-logs" };
        const bucket = new aws.s3.Bucket(
            `${name}-bucket`,
            {
                bucket: pulumi.output(args.accountId).apply((a) => hubBucketName("accessLogs", args.namePrefix, a, args.region)),
                forceDestroy: false,
                tags,
            },
            { parent: this, protect: true, retainOnDelete: true },
        );
        const ownership = new aws.s3.BucketOwnershipControls(
            `${name}-ownership`,
            { bucket: bucket.bucket, rule: { objectOwnership: "BucketOwnerEnforced" } },
            parent,
        );
        const publicAccess = new aws.s3.BucketPublicAccessBlock(
            `${name}-public-access`,
            { bucket: bucket.bucket, blockPublicAcls: true, blockPublicPolicy: true, ignorePublicAcls: true, restrictPublicBuckets: true },
            parent,
        );
        const encryption = new aws.s3.BucketServerSideEncryptionConfiguration(
            `${name}-encryption`,
            { bucket: bucket.bucket, rules: [{ applyServerSideEncryptionByDefault: { sseAlgorithm: "AES256" } }] },
            parent,
        );
        new aws.s3.BucketLifecycleConfiguration(
            `${name}-expiry`,
            {
                bucket: bucket.bucket,
                rules: [{ id: "expire-access-logs", status: "Enabled", filter: { prefix: "" }, expiration: { days: args.retentionDays } }],
            },
            parent,
        );
        const policy = new aws.s3.BucketPolicy(
            `${name}-policy`,
            {
                bucket: bucket.bucket,
                policy: pulumi
                    .all([bucket.arn, args.accountId, ...args.sources.map((s) => s.arn)])
                    .apply(([logBucketArn, accountId, ...arns]) =>
                        JSON.stringify(
                            accessLogBucketPolicy({
                                logBucketArn,
                                accountId,
                                administrators: args.administrators,
                                sources: args.sources.map((s, i) => ({ arn: arns[i], prefix: s.prefix })),
                            }),
                        ),
                    ),
            },
            { parent: this, dependsOn: [publicAccess, ownership] },
        );
        for (const s of args.sources)
            new aws.s3.BucketLogging(
                `${name}-${s.id}`,
                {
                    bucket: s.bucket,
                    targetBucket: bucket.bucket,
                    targetPrefix: s.prefix,
                    targetObjectKeyFormat: { partitionedPrefix: { partitionDateSource: ACCESS_LOG_PARTITION_DATE_SOURCE } },
                },
                // Delivery starts once the policy admits it and the bucket encrypts what arrives.
                { parent: this, dependsOn: [policy, encryption] },
            );
        this.bucket = bucket.bucket;
        this.bucketArn = bucket.arn;
        this.registerOutputs({ bucket: this.bucket, bucketArn: this.bucketArn });
    }
}
