import { S3_TRANSPORT, SDK_TRANSPORT, type AwsCall } from "../services/shared/aws-calls";

/**
 * Every AWS call the operator tools make, as the operator who runs them (a hub deployer of the hub's account;
 * test/aws-simulate.test.ts evaluates each against the rendered policies, test/aws-calls.test.ts checks the tools
 * send nothing else). Placeholders as services/shared/aws-calls.ts; `{ledgerOpsFunctionArn}` is the hub's ledger
 * Lambda (services/reconciler/ops.ts), the only way to the ledger from outside its VPC.
 */

/** `npm run status` (tools/status.ts): the policy bucket's pointers and ACKs, the ledger through its Lambda. */
export const STATUS_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "ListObjectsV2Command",
        source: "tools/status.ts",
        action: "s3:ListBucket",
        resource: "{accessLogBucketArn}",
        context: { ...S3_TRANSPORT, "s3:prefix": "policy-bundles/{account}/{region}/" },
        purpose: "the policy bucket's newest server access logs (delivery still on), and whether any arrived at all",
    },
    {
        command: "ListBucketsCommand",
        source: "tools/status.ts",
        // No resource type: ListBuckets is allowed on "*" or not at all (Service Authorization Reference, Amazon S3,
        // ListAllMyBuckets); it lists only the caller's account's buckets, their names and creation dates.
        action: "s3:ListAllMyBuckets",
        resource: "*",
        context: { ...S3_TRANSPORT },
        purpose: "the log bucket's creation date, only when no log has arrived yet (a new hub waits for its first logs)",
    },
    {
        command: "GetBucketLoggingCommand",
        source: "tools/status.ts",
        action: "s3:GetBucketLogging",
        resource: "{policyBucketArn}",
        context: { ...S3_TRANSPORT },
        purpose:
            "the policy bucket's server access logging (target bucket, prefix, key format), only on the way to waiting for the first logs",
    },
    {
        command: "GetObjectCommand",
        source: "tools/status.ts",
        action: "s3:GetObject",
        resource: "{policyBucketArn}/spokes/{spoke}/current.json",
        context: { ...S3_TRANSPORT },
        purpose: "the revision the hub published",
    },
    {
        command: "GetObjectCommand",
        source: "tools/status.ts",
        action: "s3:GetObject",
        resource: "{policyBucketArn}/spokes/{spoke}/acks/{revision}.json",
        context: { ...S3_TRANSPORT },
        purpose: "a revision the spoke ACKed",
    },
    {
        source: "tools/status.ts",
        action: "kms:Decrypt",
        resource: "{policyKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 decrypts the pointer and the ACKs",
    },
    {
        command: "ListObjectsV2Command",
        source: "tools/status.ts",
        action: "s3:ListBucket",
        resource: "{policyBucketArn}",
        context: { ...S3_TRANSPORT, "s3:prefix": "spokes/{spoke}/acks/" },
        purpose: "the spoke's ACKs",
    },
    {
        command: "InvokeCommand",
        source: "tools/status.ts",
        action: "lambda:InvokeFunction",
        resource: "{ledgerOpsFunctionArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the ledger side of each spoke's status (read as ledger_reporter)",
    },
];

/** `npm run replay-usage -- --apply` (tools/replay-usage.ts) beyond the bucket calls (services/usage-consumer/aws-calls.ts REPLAY_AWS_CALLS). */
export const REPLAY_TOOL_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "InvokeCommand",
        source: "tools/replay-usage.ts",
        action: "lambda:InvokeFunction",
        resource: "{ledgerOpsFunctionArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "ingest a stored batch (as ledger_ingest)",
    },
];
