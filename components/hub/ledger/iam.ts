import { FAILED_BATCH_PREFIX } from "../../../services/usage-consumer/config";
import { inBucketAccount } from "../../../lib/policy-document";
/** The ledger key decrypts a secret only when Secrets Manager asks, in the hub's region (`kms:ViaService`). */
export function viaSecretsManager(region: string) {
    return { StringEquals: { "kms:ViaService": `secretsmanager.${region}.amazonaws.com` } };
}

/** Pure: the migrator role's permissions: the master secret (RDS-managed) and the two role passwords, logs. */
export function migratorPolicy(x: {
    masterSecretArn: string;
    roleSecretArns: string[];
    kmsKeyArn: string;
    logGroupArn: string;
    region: string;
}) {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "DatabaseSecrets",
                Effect: "Allow",
                Action: ["secretsmanager:GetSecretValue"],
                Resource: [x.masterSecretArn, ...x.roleSecretArns],
            },
            {
                Sid: "DecryptDatabaseSecrets",
                Effect: "Allow",
                Action: ["kms:Decrypt"],
                Resource: x.kmsKeyArn,
                Condition: viaSecretsManager(x.region),
            },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/** Pure: the reconciliation role's permissions: its read-only password, the gap metric (one namespace), logs. */
export function reconcilerPolicy(x: { secretArn: string; kmsKeyArn: string; logGroupArn: string; namespace: string; region: string }) {
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "DatabasePassword", Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: x.secretArn },
            {
                Sid: "DecryptDatabasePassword",
                Effect: "Allow",
                Action: ["kms:Decrypt"],
                Resource: x.kmsKeyArn,
                Condition: viaSecretsManager(x.region),
            },
            // PutMetricData has no resource type; the namespace condition is the only scope (IAM service authorization reference).
            {
                Sid: "GapMetric",
                Effect: "Allow",
                Action: ["cloudwatch:PutMetricData"],
                Resource: "*",
                Condition: { StringEquals: { "cloudwatch:namespace": x.namespace } },
            },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/**
 * Pure: the operator's ledger Lambda's permissions (services/reconciler/ops.ts): the two login roles' passwords
 * (status reads as the reporter, replay ingests as the ingest role), decrypted by Secrets Manager only; reading a
 * failed batch under `failed/` of the failure bucket (the caller names only its key), decrypted by S3 only; its logs.
 * No write to S3, no stream.
 */
export function ledgerOpsPolicy(x: {
    roleSecretArns: string[];
    kmsKeyArn: string;
    logGroupArn: string;
    region: string;
    failedBatchBucketArn: string;
    /** The hub's account, which owns the failure bucket (`s3:ResourceAccount`). */
    bucketOwner: string;
}) {
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "DatabasePasswords", Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: x.roleSecretArns },
            {
                Sid: "DecryptDatabasePasswords",
                Effect: "Allow",
                Action: ["kms:Decrypt"],
                Resource: x.kmsKeyArn,
                Condition: viaSecretsManager(x.region),
            },
            {
                Sid: "ReadFailedBatches",
                Effect: "Allow",
                Action: ["s3:GetObject"],
                Resource: `${x.failedBatchBucketArn}/${FAILED_BATCH_PREFIX}*`,
                Condition: inBucketAccount(x.bucketOwner),
            },
            {
                Sid: "DecryptFailedBatches",
                Effect: "Allow",
                Action: ["kms:Decrypt"],
                Resource: x.kmsKeyArn,
                Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
            },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/** Pure: the consumer role's permissions (everything named, no wildcard resources except CloudWatch Logs' group). */
export function consumerPolicy(x: {
    streamArns: string[];
    queueArn: string;
    secretArn: string;
    kmsKeyArn: string;
    logGroupArn: string;
    region: string;
    failedBatchBucketArn: string;
    /** The hub's account, which owns the failure bucket (`s3:ResourceAccount`). */
    bucketOwner: string;
}) {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "ReadUsageStreams",
                Effect: "Allow",
                Action: [
                    "kinesis:GetRecords",
                    "kinesis:GetShardIterator",
                    "kinesis:DescribeStream",
                    "kinesis:DescribeStreamSummary",
                    "kinesis:ListShards",
                ],
                Resource: x.streamArns,
            },
            { Sid: "ListStreams", Effect: "Allow", Action: ["kinesis:ListStreams"], Resource: "*" },
            { Sid: "FailureDestination", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: x.queueArn },
            { Sid: "DatabasePassword", Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: x.secretArn },
            {
                Sid: "DecryptDatabasePassword",
                Effect: "Allow",
                Action: ["kms:Decrypt"],
                Resource: x.kmsKeyArn,
                Condition: viaSecretsManager(x.region),
            },
            // A failing batch's records go to the failure bucket (services/usage-consumer/failed-batches.ts), under the
            // ledger key: S3 asks KMS for the data key with the consumer's credentials.
            {
                Sid: "KeepFailedBatches",
                Effect: "Allow",
                Action: ["s3:PutObject"],
                Resource: `${x.failedBatchBucketArn}/${FAILED_BATCH_PREFIX}*`,
                Condition: inBucketAccount(x.bucketOwner),
            },
            {
                Sid: "EncryptFailedBatches",
                Effect: "Allow",
                Action: ["kms:GenerateDataKey"],
                Resource: x.kmsKeyArn,
                Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
            },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/**
 * Pure: what Lambda needs of a VPC function's execution role to manage its network interfaces, in place of the
 * managed AWSLambdaVPCAccessExecutionRole (ENI actions on `*`, CloudWatch Logs everywhere): describe (no resource
 * types), create only in the ledger's subnets with the Lambdas' security group in the ledger's VPC, and delete or
 * re-address only interfaces of that VPC (`ec2:Vpc`; IAM service authorization reference for Amazon EC2).
 */
export function lambdaVpcPolicy(x: { vpcArn: string; subnetArns: string[]; securityGroupArns: string[]; region: string; account: string }) {
    const eni = `arn:aws:ec2:${x.region}:${x.account}:network-interface/*`;
    const inVpc = { ArnEquals: { "ec2:Vpc": x.vpcArn } };
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "DescribeVpcConfig", Effect: "Allow", Action: ["ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"], Resource: "*" },
            { Sid: "CreateEniInLedgerVpc", Effect: "Allow", Action: ["ec2:CreateNetworkInterface"], Resource: eni, Condition: inVpc },
            {
                Sid: "CreateEniInLedgerSubnets",
                Effect: "Allow",
                Action: ["ec2:CreateNetworkInterface"],
                Resource: [...x.subnetArns, ...x.securityGroupArns],
            },
            {
                Sid: "ManageEniInLedgerVpc",
                Effect: "Allow",
                Action: ["ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"],
                Resource: eni,
                Condition: inVpc,
            },
        ],
    };
}

/** Trust policy of a Lambda execution role. */
export const LAMBDA_TRUST = JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
});
