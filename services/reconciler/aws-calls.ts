import { SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";
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
];

export { logs as lambdaLogCalls };
