import { S3_TRANSPORT, SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";

/**
 * Every AWS call of the auth service (as the spoke's role, service account `auth`): read its own policy bundle
 * pointer and bundle, write its ACK. The ACK upload sends no server-side encryption header (services/auth/bundles.ts
 * `ack`), so the bucket's default encryption applies: SSE-KMS with the hub's key, which S3 asks KMS for with the
 * caller's credentials (`kms:ViaService`). See services/shared/aws-calls.ts for the placeholders.
 */
export const AUTH_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "GetObjectCommand",
        source: "services/auth/bundles.ts",
        action: "s3:GetObject",
        resource: "{policyBucketArn}/spokes/{spoke}/current.json",
        context: { ...S3_TRANSPORT },
        purpose: "read the current bundle pointer",
    },
    {
        command: "GetObjectCommand",
        source: "services/auth/bundles.ts",
        action: "s3:GetObject",
        resource: "{policyBucketArn}/spokes/{spoke}/bundles/{revision}.json",
        context: { ...S3_TRANSPORT },
        purpose: "read the signed bundle it names",
    },
    {
        source: "services/auth/bundles.ts",
        action: "kms:Decrypt",
        resource: "{policyKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 decrypts the SSE-KMS objects it reads",
    },
    {
        command: "PutObjectCommand",
        source: "services/auth/bundles.ts",
        action: "s3:PutObject",
        resource: "{policyBucketArn}/spokes/{spoke}/acks/{revision}.json",
        context: { ...S3_TRANSPORT },
        purpose: "ACK the served revision (no SSE header: bucket default)",
    },
    {
        source: "services/auth/bundles.ts",
        action: "kms:GenerateDataKey",
        resource: "{policyKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 encrypts the ACK under the bucket's key",
    },
];
