import { S3_TRANSPORT, SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";
import { lambdaLogCalls, lambdaVpcCalls } from "../reconciler/aws-calls";

/**
 * Every AWS call made as the usage consumer's role: its password (services/usage-consumer/handler.ts), and what the
 * Lambda event source mapping does with the role's credentials (AWS Lambda developer guide, "Using Lambda with
 * Kinesis": execution role permissions; "on-failure destinations": sqs:SendMessage). See
 * services/shared/aws-calls.ts for the placeholders; `{usageStreamArn}` is each spoke's stream in turn.
 */
export const CONSUMER_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "GetSecretValueCommand",
        source: "services/usage-consumer/handler.ts",
        action: "secretsmanager:GetSecretValue",
        resource: "{ingestSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "ledger_ingest password",
    },
    {
        source: "services/usage-consumer/handler.ts",
        action: "kms:Decrypt",
        resource: "{ledgerKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "secretsmanager.{region}.amazonaws.com" },
        purpose: "Secrets Manager decrypts the password",
    },
    ...[
        "kinesis:DescribeStream",
        "kinesis:DescribeStreamSummary",
        "kinesis:ListShards",
        "kinesis:GetShardIterator",
        "kinesis:GetRecords",
    ].map(
        (action): AwsCall => ({
            source: "components/hub/UsageLedger.ts",
            action,
            resource: "{usageStreamArn}",
            context: { ...SDK_TRANSPORT },
            purpose: "the event source mapping polls the spoke's stream",
        }),
    ),
    {
        command: "PutObjectCommand",
        source: "services/usage-consumer/failed-batches.ts",
        action: "s3:PutObject",
        resource: "{failedBatchBucketArn}/failed/hn1/shardId-000000000000/1-2.json",
        context: {
            ...S3_TRANSPORT,
            "s3:x-amz-server-side-encryption": "aws:kms",
            "s3:x-amz-server-side-encryption-aws-kms-key-id": "{ledgerKeyArn}",
        },
        purpose: "a failing batch's records, kept for replay",
    },
    {
        source: "services/usage-consumer/failed-batches.ts",
        action: "kms:GenerateDataKey",
        resource: "{ledgerKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 encrypts the failed batch under the ledger key",
    },
    {
        source: "components/hub/UsageLedger.ts",
        action: "sqs:SendMessage",
        resource: "{failureQueueArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "a batch past its age goes to the failure destination",
    },
    ...lambdaLogCalls("services/usage-consumer/handler.ts"),
    ...lambdaVpcCalls("components/hub/ledger/functions.ts"),
];

/**
 * Every AWS call `npm run replay-usage` makes (services/usage-consumer/replay.ts), as the operator who runs it (a hub
 * deployer): list, read and, once ingested, delete the failed batches; S3 decrypts them with the ledger key.
 */
export const REPLAY_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "ListObjectsV2Command",
        source: "services/usage-consumer/replay.ts",
        action: "s3:ListBucket",
        resource: "{failedBatchBucketArn}",
        context: { ...S3_TRANSPORT, "s3:prefix": "failed/" },
        purpose: "find the failed batches",
    },
    {
        command: "GetObjectCommand",
        source: "services/usage-consumer/replay.ts",
        action: "s3:GetObject",
        resource: "{failedBatchBucketArn}/failed/hn1/shardId-000000000000/1-2.json",
        context: { ...S3_TRANSPORT },
        purpose: "read a failed batch",
    },
    {
        source: "services/usage-consumer/replay.ts",
        action: "kms:Decrypt",
        resource: "{ledgerKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 decrypts the failed batch",
    },
    {
        command: "DeleteObjectCommand",
        source: "services/usage-consumer/replay.ts",
        action: "s3:DeleteObject",
        resource: "{failedBatchBucketArn}/failed/hn1/shardId-000000000000/1-2.json",
        context: { ...S3_TRANSPORT },
        purpose: "a replayed batch is removed",
    },
];

/**
 * Every AWS call `npm run replay-usage -- --rescue-stream` makes (services/usage-consumer/rescue.ts), as the operator
 * who runs it (a hub deployer): read what is still in a spoke's stream and keep it in the failure bucket, as the
 * consumer keeps a failing batch (SSE-KMS under the ledger key, named in the request).
 */
export const RESCUE_AWS_CALLS: readonly AwsCall[] = [
    ...(
        [
            ["ListShardsCommand", "kinesis:ListShards", "find the stream's shards"],
            ["GetShardIteratorCommand", "kinesis:GetShardIterator", "start at the oldest record, or at the failure's first arrival"],
            ["GetRecordsCommand", "kinesis:GetRecords", "read the records the consumer never ran on"],
        ] as const
    ).map(
        ([command, action, purpose]): AwsCall => ({
            command,
            source: "services/usage-consumer/rescue.ts",
            action,
            resource: "{usageStreamArn}",
            context: { ...SDK_TRANSPORT },
            purpose,
        }),
    ),
    {
        source: "services/usage-consumer/rescue.ts",
        action: "s3:PutObject",
        resource: "{failedBatchBucketArn}/failed/hn1/shardId-000000000000/1-2.json",
        context: {
            ...S3_TRANSPORT,
            "s3:x-amz-server-side-encryption": "aws:kms",
            "s3:x-amz-server-side-encryption-aws-kms-key-id": "{ledgerKeyArn}",
        },
        purpose: "keep the rescued records where they outlive the stream (failed-batches.ts keepFailedBatch)",
    },
    {
        source: "services/usage-consumer/rescue.ts",
        action: "kms:GenerateDataKey",
        resource: "{ledgerKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 encrypts the rescued batch under the ledger key",
    },
];
