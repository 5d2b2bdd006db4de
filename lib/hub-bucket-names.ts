/**
 * The hub's fixed S3 bucket names, one builder for the components that create the buckets and the check that refuses
 * a name S3 would refuse. Fixed and globally unique (account and region in the name), never an auto-suffix.
 */

/** S3's longest bucket name (S3 user guide, "General purpose bucket naming rules": 3 to 63 characters). */
export const S3_BUCKET_NAME_MAX = 63;

/** The words after the name prefix of each fixed hub bucket. */
export const HUB_BUCKETS = {
    /** components/hub/PolicyStore.ts: the signed policy bundles. */
    policy: "policy-bundles",
    /** components/hub/ledger/failures.ts: failed usage batches. */
    failure: "usage-failed-batches",
    /** components/hub/AccessLogs.ts: the S3 server access logs of the other two. */
    accessLogs: "s3-access-logs",
} as const;

/**
 * Key prefix of the policy bucket's server access logs in the log bucket (programs/hub.ts hands it to
 * components/hub/AccessLogs.ts; tools/status.ts reads the logs under it and checks the bucket's logging names it).
 */
export const POLICY_BUCKET_LOG_PREFIX = "policy-bundles/";

/**
 * The date S3 partitions server access log keys by (`TargetObjectKeyFormat.PartitionedPrefix.PartitionDateSource`,
 * S3 API reference, PutBucketLogging: `EventTime` or `DeliveryTime`): components/hub/AccessLogs.ts sets it,
 * tools/status.ts checks it.
 */
export const ACCESS_LOG_PARTITION_DATE_SOURCE = "EventTime";

/** Pure: `<namePrefix>-<words>-<account>-<region>`. */
export function hubBucketName(kind: keyof typeof HUB_BUCKETS, namePrefix: string, accountId: string, region: string): string {
    return `${namePrefix}-${HUB_BUCKETS[kind]}-${accountId}-${region}`;
}

/**
 * Pure: why a hub bucket name would be longer than S3 allows with this name prefix and region (an AWS account id is
 * always 12 digits), or undefined. config/hub.ts `HUB_NAME_PREFIX_MAX` keeps the prefix short enough for every
 * region name of 14 characters or fewer; a longer region is caught here, before anything is created.
 */
export function hubBucketNameIssue(namePrefix: string, region: string): string | undefined {
    for (const kind of Object.keys(HUB_BUCKETS) as Array<keyof typeof HUB_BUCKETS>) {
        const name = hubBucketName(kind, namePrefix, "0".repeat(12), region);
        if (name.length > S3_BUCKET_NAME_MAX)
            return `the ${kind} bucket <namePrefix>-${HUB_BUCKETS[kind]}-<account>-<region> would be ${name.length} characters with platform:namePrefix "${namePrefix}" and aws:region "${region}", over S3's ${S3_BUCKET_NAME_MAX}: shorten platform:namePrefix by ${name.length - S3_BUCKET_NAME_MAX}`;
    }
    return undefined;
}

/**
 * Pure: the access log bucket of the hub whose policy bucket is `policyBucket` (same name prefix, account and region:
 * {@link hubBucketName}), or undefined when `policyBucket` is not a hub policy bucket name.
 */
export function accessLogBucketOf(policyBucket: string): string | undefined {
    const m = new RegExp(`^(.+)-${HUB_BUCKETS.policy}-(\\d{12})-([a-z0-9-]+)$`).exec(policyBucket);
    return m ? hubBucketName("accessLogs", m[1], m[2], m[3]) : undefined;
}
