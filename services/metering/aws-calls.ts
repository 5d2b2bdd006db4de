import { S3_TRANSPORT, SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";

/**
 * Every AWS call of the metering service (as the spoke's role, service account `metering`): ship usage batches to
 * its own stream (services/metering/shipper.ts) and read its own policy bundle for token windows
 * (services/metering/policy-reader.ts). The stream is encrypted with the AWS managed key `aws/kinesis`, whose AWS-owned key
 * policy admits every principal of the account through Kinesis; no customer policy takes part. See
 * services/shared/aws-calls.ts for the placeholders.
 */
export const METERING_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "PutRecordsCommand",
        source: "services/metering/shipper.ts",
        action: "kinesis:PutRecords",
        resource: "{usageStreamArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "ship a batch of usage events",
    },
    {
        command: "GetObjectCommand",
        source: "services/metering/policy-reader.ts",
        action: "s3:GetObject",
        resource: "{policyBucketArn}/spokes/{spoke}/current.json",
        context: { ...S3_TRANSPORT },
        purpose: "read the current bundle pointer",
    },
    {
        command: "GetObjectCommand",
        source: "services/metering/policy-reader.ts",
        action: "s3:GetObject",
        resource: "{policyBucketArn}/spokes/{spoke}/bundles/{revision}.json",
        context: { ...S3_TRANSPORT },
        purpose: "read the bundle's token windows",
    },
    {
        source: "services/metering/policy-reader.ts",
        action: "kms:Decrypt",
        resource: "{policyKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 decrypts the bundle",
    },
];
