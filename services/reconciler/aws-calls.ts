import { S3_TRANSPORT, SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";
import { METRIC_NAMESPACE } from "./metric";

const viaSecretsManager = { ...SDK_TRANSPORT, "kms:ViaService": "secretsmanager.{region}.amazonaws.com" };
const logs = (source: string): AwsCall[] => [
    {
        source,
        action: "logs:CreateLogStream",
        resource: "{logGroupArn}:log-stream:2026/01/01/[$LATEST]0123456789abcdef",
        context: { ...SDK_TRANSPORT },
        purpose: "the Lambda runtime opens its log stream",
    },
    {
        source,
        action: "logs:PutLogEvents",
        resource: "{logGroupArn}:log-stream:2026/01/01/[$LATEST]0123456789abcdef",
        context: { ...SDK_TRANSPORT },
        purpose: "the Lambda runtime writes the function's logs",
    },
];

/**
 * What Lambda does with a VPC function's execution role (AWS Lambda developer guide, "Giving Lambda functions access
 * to resources in an Amazon VPC": the permissions of AWSLambdaVPCAccessExecutionRole): create, describe and delete its
 * network interfaces in the ledger's subnets with the Lambdas' security group. `{ledgerVpcArn}`, `{ledgerSubnetArn}`,
 * `{lambdaSgArn}` are the ledger network's (components/hub/ledger/network.ts).
 */
const vpc = (source: string): AwsCall[] => [
    ...["ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"].map(
        (action): AwsCall => ({
            source,
            action,
            resource: "*",
            context: { ...SDK_TRANSPORT },
            purpose: "Lambda checks the function's VPC configuration",
        }),
    ),
    {
        source,
        action: "ec2:CreateNetworkInterface",
        resource: "arn:aws:ec2:{region}:{account}:network-interface/*",
        context: { ...SDK_TRANSPORT, "ec2:Vpc": "{ledgerVpcArn}", "ec2:Subnet": "{ledgerSubnetArn}" },
        purpose: "the function's ENI",
    },
    {
        source,
        action: "ec2:CreateNetworkInterface",
        resource: "{ledgerSubnetArn}",
        context: { ...SDK_TRANSPORT, "ec2:Vpc": "{ledgerVpcArn}" },
        purpose: "in a ledger subnet",
    },
    {
        source,
        action: "ec2:CreateNetworkInterface",
        resource: "{lambdaSgArn}",
        context: { ...SDK_TRANSPORT, "ec2:Vpc": "{ledgerVpcArn}" },
        purpose: "with the Lambdas' security group",
    },
    ...["ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"].map(
        (action): AwsCall => ({
            source,
            action,
            resource: "arn:aws:ec2:{region}:{account}:network-interface/eni-0123456789abcdef0",
            context: { ...SDK_TRANSPORT, "ec2:Vpc": "{ledgerVpcArn}" },
            purpose: "Lambda manages the function's ENI",
        }),
    ),
];

/**
 * Every AWS call of the migrator Lambda (services/reconciler/migrator.ts through secrets.ts): the RDS-managed master
 * secret and the two login roles' passwords, each decrypted by Secrets Manager under the ledger key. See
 * services/shared/aws-calls.ts for the placeholders.
 */
export const MIGRATOR_AWS_CALLS: readonly AwsCall[] = [
    ...["{masterSecretArn}", "{ingestSecretArn}", "{reporterSecretArn}"].flatMap((secret): AwsCall[] => [
        {
            command: "GetSecretValueCommand",
            source: "services/reconciler/secrets.ts",
            action: "secretsmanager:GetSecretValue",
            resource: secret,
            context: { ...SDK_TRANSPORT },
            purpose: "database credentials",
        },
        {
            source: "services/reconciler/secrets.ts",
            action: "kms:Decrypt",
            resource: "{ledgerKeyArn}",
            context: { ...viaSecretsManager },
            purpose: "Secrets Manager decrypts the secret",
        },
    ]),
    ...logs("services/reconciler/migrator.ts"),
    ...vpc("components/hub/ledger/functions.ts"),
];

/** Every AWS call of the reconciliation Lambda (services/reconciler/handler.ts): its password, the gap metric. */
export const RECONCILER_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "GetSecretValueCommand",
        source: "services/reconciler/secrets.ts",
        action: "secretsmanager:GetSecretValue",
        resource: "{reporterSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "ledger_reporter password",
    },
    {
        source: "services/reconciler/secrets.ts",
        action: "kms:Decrypt",
        resource: "{ledgerKeyArn}",
        context: { ...viaSecretsManager },
        purpose: "Secrets Manager decrypts the password",
    },
    {
        command: "PutMetricDataCommand",
        source: "services/reconciler/handler.ts",
        action: "cloudwatch:PutMetricData",
        resource: "*",
        context: { ...SDK_TRANSPORT, "cloudwatch:namespace": METRIC_NAMESPACE },
        purpose: "publish the gap metric",
    },
    ...logs("services/reconciler/handler.ts"),
    ...vpc("components/hub/ledger/functions.ts"),
];

/**
 * Every AWS call of the operator's ledger Lambda (services/reconciler/ops.ts through secrets.ts): the reporter's
 * password for status reads, the ingest role's for a replay, and the failed batch a replay names (S3, the ledger key).
 */
export const LEDGER_OPS_AWS_CALLS: readonly AwsCall[] = [
    ...(["{reporterSecretArn}", "{ingestSecretArn}"] as const).flatMap((secret): AwsCall[] => [
        {
            command: "GetSecretValueCommand",
            source: "services/reconciler/secrets.ts",
            action: "secretsmanager:GetSecretValue",
            resource: secret,
            context: { ...SDK_TRANSPORT },
            purpose: secret === "{reporterSecretArn}" ? "ledger_reporter password (status)" : "ledger_ingest password (replay)",
        },
    ]),
    {
        source: "services/reconciler/secrets.ts",
        action: "kms:Decrypt",
        resource: "{ledgerKeyArn}",
        context: { ...viaSecretsManager },
        purpose: "Secrets Manager decrypts the passwords",
    },
    {
        command: "GetObjectCommand",
        source: "services/reconciler/ops.ts",
        action: "s3:GetObject",
        resource: "{failedBatchBucketArn}/failed/hn1/shardId-000000000000/1-2.json",
        context: { ...S3_TRANSPORT },
        purpose: "the failed batch a replay names (by key only)",
    },
    {
        source: "services/reconciler/ops.ts",
        action: "kms:Decrypt",
        resource: "{ledgerKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "s3.{region}.amazonaws.com" },
        purpose: "S3 decrypts the failed batch (ledger key)",
    },
    ...logs("services/reconciler/ops.ts"),
    ...vpc("components/hub/ledger/functions.ts"),
];

export { logs as lambdaLogCalls, vpc as lambdaVpcCalls };
