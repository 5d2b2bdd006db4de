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

/** Pure: the consumer role's permissions (everything named, no wildcard resources except CloudWatch Logs' group). */
export function consumerPolicy(x: {
    streamArns: string[];
    queueArn: string;
    secretArn: string;
    kmsKeyArn: string;
    logGroupArn: string;
    region: string;
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
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/** Trust policy of a Lambda execution role. */
export const LAMBDA_TRUST = JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
});
