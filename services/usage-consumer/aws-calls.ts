import { SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";
import { lambdaLogCalls } from "../reconciler/aws-calls";

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
        source: "components/hub/UsageLedger.ts",
        action: "sqs:SendMessage",
        resource: "{failureQueueArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "a batch past its age goes to the failure destination",
    },
    ...lambdaLogCalls("services/usage-consumer/handler.ts"),
];
