import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import {
    INGEST_ROLE,
    type LEDGER_OPS_ENV,
    METRIC_NAMESPACE,
    type MIGRATOR_ENV,
    type RECONCILER_ENV,
    REPORTER_ROLE,
} from "../../../services/reconciler/config";
import type { EnvVars } from "../../../services/shared/env";
import type { CONSUMER_ENV } from "../../../services/usage-consumer/config";
import { bundleLambda, bundleUsageConsumer, CONSUMER_RUNTIME, REPO_ROOT } from "./bundle";
import { LEDGER_DATABASE, LEDGER_LOG_RETENTION_DAYS, type LedgerDatabase } from "./database";
import { consumerPolicy, lambdaVpcPolicy, ledgerOpsPolicy, migratorPolicy, reconcilerPolicy } from "./iam";
import type { LedgerNetwork } from "./network";
import type { FailedBatchBucket } from "./failures";
import type { LedgerScope } from "./scope";

/**
 * The ledger's Lambdas by id, each with its function name after the hub's name prefix (`platform:namePrefix`): fixed
 * physical names, so each Lambda's log group name (`/aws/lambda/<function name>`, where Lambda writes) is known
 * before `up`, for the ledger key's policy (components/hub/UsageLedger.ts).
 */
export const LEDGER_FUNCTIONS = {
    migrator: "usage-ledger-migrator",
    consumer: "usage-consumer",
    reconciler: "usage-reconciliation",
    ops: "usage-ledger-ops",
} as const;

/** Pure: the name of the ledger Lambda `id` on a hub whose names begin with `prefix` ({@link LEDGER_FUNCTIONS}). */
export function ledgerFunctionName(prefix: string, id: keyof typeof LEDGER_FUNCTIONS): string {
    return `${prefix}-${LEDGER_FUNCTIONS[id]}`;
}

/**
 * Pure: the log groups of every ledger Lambda on a hub whose names begin with `prefix`: `/aws/lambda/<function name>`,
 * the group Lambda writes a function's logs to (AWS Lambda developer guide, "Sending Lambda function logs to
 * CloudWatch Logs", the default log group).
 */
export function ledgerFunctionLogGroupNames(prefix: string): string[] {
    return (Object.keys(LEDGER_FUNCTIONS) as Array<keyof typeof LEDGER_FUNCTIONS>).map(
        (id) => `/aws/lambda/${ledgerFunctionName(prefix, id)}`,
    );
}

/**
 * The ledger's Lambdas: the migrator (schema and roles as the master user, invoked by `pulumi up` when the schema, its
 * code or a role password changes), the consumer (every spoke's stream -> the ledger as `ledger_ingest`; a failing
 * batch's records to the failure bucket, its shard/sequence range to an SQS failure destination) and the scheduled reconciliation (gap metric, as `ledger_reporter`).
 * @throws Error with esbuild's messages when a Lambda bundle does not build (components/hub/ledger/bundle.ts
 *   `bundleLambda`, `bundleUsageConsumer`; bundled at program run)
 */
export function ledgerFunctions(
    scope: LedgerScope,
    args: {
        spokes: string[];
        streamRetentionHours: number;
        consumerBatchSize: number;
        reconcileSchedule: string;
        reconcileLookbackHours: number;
    },
    key: aws.kms.Key,
    net: LedgerNetwork,
    db: LedgerDatabase,
    streamResources: Array<{ spoke: string; stream: aws.kinesis.Stream }>,
    failures: FailedBatchBucket,
): { fn: aws.lambda.Function; queue: aws.sqs.Queue; ops: aws.lambda.Function } {
    const { subnets, lambdaSg, endpoints } = net;
    const { cluster, instances, masterSecretArn, ingest, reporter } = db;
    // Each Lambda's ENI permissions, scoped to the ledger's VPC, subnets and security group (iam.ts lambdaVpcPolicy).
    const vpcPolicyDoc = pulumi
        .all([net.vpc.arn, pulumi.all(subnets.map((s) => s.arn)), lambdaSg.arn])
        .apply(([vpcArn, subnetArns, sgArn]) =>
            JSON.stringify(
                lambdaVpcPolicy({ vpcArn, subnetArns, securityGroupArns: [sgArn], region: scope.region, account: vpcArn.split(":")[4] }),
            ),
        );
    const vpcPolicyFor = (id: string, role: aws.iam.Role) =>
        new aws.iam.RolePolicy(`${scope.name}-${id}-vpc-network`, { role: role.name, policy: vpcPolicyDoc }, scope.parent);
    const lambdaRole = (id: string, description: string, policy: pulumi.Output<string>) => {
        const role = new aws.iam.Role(
            `${scope.name}-${id}-role`,
            {
                assumeRolePolicy: JSON.stringify({
                    Version: "2012-10-17",
                    Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
                }),
                description,
                tags: scope.tags,
            },
            scope.parent,
        );
        const vpcAccess = vpcPolicyFor(id, role);
        const permissions = new aws.iam.RolePolicy(`${scope.name}-${id}-permissions`, { role: role.name, policy }, scope.parent);
        return { role, permissions, vpcAccess };
    };
    // Each Lambda's variables are typed by its service's contract (services/shared/env.ts).
    type LambdaEnv = EnvVars<
        typeof MIGRATOR_ENV & typeof RECONCILER_ENV & typeof CONSUMER_ENV & typeof LEDGER_OPS_ENV,
        pulumi.Input<string>
    >;
    const dbEnv = {
        PGHOST: cluster.endpoint,
        PGPORT: "5432",
        PGDATABASE: LEDGER_DATABASE,
        NODE_EXTRA_CA_CERTS: "/var/runtime/ca-cert.pem",
    } satisfies LambdaEnv;
    const vpcConfig = { subnetIds: subnets.map((s) => s.id), securityGroupIds: [lambdaSg.id] };
    // Each Lambda's log group, created before its function (each function depends on it), so Lambda never creates it
    // itself (without retention, unencrypted). The ledger key encrypts them: these functions handle the ledger's data
    // (usage events, ledger rows, failed batches, the role secrets: all under that key) and their logs can carry it
    // (a rejected record, a failing statement); the hub's other keys guard other data (policy bundles, API keys). Its
    // policy lets CloudWatch Logs use it for exactly these groups and the database's (components/hub/UsageLedger.ts,
    // lib/kms.ts logGroupKeyStatement). An existing group takes the key in place (the provider's update calls
    // AssociateKmsKey: hashicorp/terraform-provider-aws, bridged by pulumi/pulumi-aws@v7.48.0,
    // internal/service/logs/group.go resourceGroupUpdate), no replacement.
    const logGroupFor = (id: keyof typeof LEDGER_FUNCTIONS) =>
        new aws.cloudwatch.LogGroup(
            `${scope.name}-${id}-logs`,
            {
                name: `/aws/lambda/${ledgerFunctionName(scope.prefix, id)}`,
                retentionInDays: LEDGER_LOG_RETENTION_DAYS,
                kmsKeyId: key.arn,
                tags: scope.tags,
            },
            scope.parent,
        );
    const lambdaFn = (
        id: string,
        functionName: string,
        description: string,
        entry: string,
        role: aws.iam.Role,
        deps: pulumi.Resource[],
        variables: Record<string, pulumi.Input<string>>,
        timeout: number,
    ) => {
        const b = bundleLambda(entry);
        return new aws.lambda.Function(
            `${scope.name}-${id}`,
            {
                name: functionName,
                description,
                runtime: CONSUMER_RUNTIME,
                architectures: ["arm64"],
                handler: "index.handler",
                code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.StringAsset(b.code) }),
                sourceCodeHash: b.sha256,
                role: role.arn,
                memorySize: 512,
                timeout,
                vpcConfig,
                environment: { variables: { ...dbEnv, ...variables } },
                tags: scope.tags,
            },
            { ...scope.parent, dependsOn: deps },
        );
    };

    // ---- migrator: schema + roles as the master user, run by `pulumi up` when the schema or its code changes
    const migratorName = ledgerFunctionName(scope.prefix, "migrator");
    const migratorLogs = logGroupFor("migrator");
    const migratorIam = lambdaRole(
        "migrator",
        "usage ledger migrator: schema and roles as the master user",
        pulumi
            .all([masterSecretArn, ingest.secret.arn, reporter.secret.arn, key.arn, migratorLogs.arn])
            .apply(([m, i, r, k, l]) =>
                JSON.stringify(
                    migratorPolicy({ masterSecretArn: m, roleSecretArns: [i, r], kmsKeyArn: k, logGroupArn: l, region: scope.region }),
                ),
            ),
    );
    const migrator = lambdaFn(
        "migrator",
        migratorName,
        "Applies services/ledger/schema.sql and the ledger roles (services/reconciler/migrator.ts)",
        path.join("services", "reconciler", "migrator.ts"),
        migratorIam.role,
        [migratorLogs, migratorIam.permissions, migratorIam.vpcAccess],
        {
            MASTER_SECRET_ARN: masterSecretArn,
            INGEST_SECRET_ARN: ingest.secret.arn,
            REPORTER_SECRET_ARN: reporter.secret.arn,
        } satisfies EnvVars<typeof MIGRATOR_ENV, pulumi.Input<string>>,
        120,
    );
    const schemaSha256 = createHash("sha256")
        .update(fs.readFileSync(path.join(REPO_ROOT, "services", "ledger", "schema.sql")))
        .digest("hex");
    const migration = new aws.lambda.Invocation(
        `${scope.name}-migration`,
        {
            functionName: migrator.name,
            input: JSON.stringify({ schemaSha256 }),
            // Re-run when the schema, the migrator or the role passwords change.
            triggers: {
                schemaSha256,
                code: migrator.sourceCodeHash.apply((h) => h ?? ""),
                ingest: ingest.version.versionId,
                reporter: reporter.version.versionId,
            },
            // The migrator reads its secrets through the Secrets Manager endpoint: it runs once that exists.
        },
        { ...scope.parent, dependsOn: [...instances, ingest.version, reporter.version, ...endpoints] },
    );

    // ---- consumer (ingest role: SELECT/INSERT on the ledger tables; no UPDATE, DELETE or DDL)
    const queue = new aws.sqs.Queue(
        `${scope.name}-failures`,
        { messageRetentionSeconds: 14 * 24 * 3600, sqsManagedSseEnabled: true, tags: scope.tags },
        scope.parent,
    );
    const functionName = ledgerFunctionName(scope.prefix, "consumer");
    const logGroup = logGroupFor("consumer");
    const role = new aws.iam.Role(
        `${scope.name}-consumer-role`,
        {
            assumeRolePolicy: JSON.stringify({
                Version: "2012-10-17",
                Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
            }),
            description: "usage consumer: read the usage streams, write the ledger",
            tags: scope.tags,
        },
        scope.parent,
    );
    const consumerVpcAccess = vpcPolicyFor("consumer", role);
    const rolePolicy = new aws.iam.RolePolicy(
        `${scope.name}-consumer-permissions`,
        {
            role: role.name,
            policy: pulumi
                .all([
                    pulumi.all(streamResources.map((x) => x.stream.arn)),
                    queue.arn,
                    ingest.secret.arn,
                    key.arn,
                    logGroup.arn,
                    failures.bucket.arn,
                    failures.owner,
                ])
                .apply(([streamArns, queueArn, secretArn, kmsKeyArn, logGroupArn, failedBatchBucketArn, bucketOwner]) =>
                    JSON.stringify(
                        consumerPolicy({
                            streamArns,
                            queueArn,
                            secretArn,
                            kmsKeyArn,
                            logGroupArn,
                            region: scope.region,
                            failedBatchBucketArn,
                            bucketOwner,
                        }),
                    ),
                ),
        },
        scope.parent,
    );
    const bundle = bundleUsageConsumer();
    const streamSpokes = pulumi
        .all(streamResources.map((x) => x.stream.arn.apply((arn) => [arn, x.spoke] as const)))
        .apply((pairs) => JSON.stringify(Object.fromEntries(pairs)));
    const fn = new aws.lambda.Function(
        `${scope.name}-consumer`,
        {
            name: functionName,
            description: "Kinesis usage events -> ledger (services/usage-consumer)",
            runtime: CONSUMER_RUNTIME,
            architectures: ["arm64"],
            handler: "index.handler",
            code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.StringAsset(bundle.code) }),
            sourceCodeHash: bundle.sha256,
            role: role.arn,
            memorySize: 512,
            timeout: 60,
            vpcConfig,
            environment: {
                variables: {
                    ...dbEnv,
                    PGUSER: INGEST_ROLE,
                    DB_PASSWORD_SECRET_ARN: ingest.secret.arn,
                    STREAM_SPOKES: streamSpokes,
                    FAILED_BATCH_BUCKET: failures.bucket.bucket,
                    FAILED_BATCH_BUCKET_OWNER: failures.owner,
                    FAILED_BATCH_KMS_KEY_ARN: key.arn,
                } satisfies EnvVars<typeof CONSUMER_ENV, pulumi.Input<string>>,
            },
            tags: scope.tags,
            // Lambda checks the role's ENI permissions when it creates a function in a VPC: the attachment first.
        },
        { ...scope.parent, dependsOn: [logGroup, rolePolicy, consumerVpcAccess, failures.policy] },
    );
    for (const { spoke, stream } of streamResources) {
        new aws.lambda.EventSourceMapping(
            `${scope.name}-${spoke}-mapping`,
            {
                eventSourceArn: stream.arn,
                functionName: fn.arn,
                startingPosition: "TRIM_HORIZON",
                batchSize: args.consumerBatchSize,
                maximumBatchingWindowInSeconds: 1,
                bisectBatchOnFunctionError: true,
                maximumRetryAttempts: -1,
                // One day before Kinesis drops the records, the batch goes to the failure destination for replay.
                maximumRecordAgeInSeconds: Math.min(604_800, Math.max(60, (args.streamRetentionHours - 24) * 3600)), // API range 60..604800
                destinationConfig: { onFailure: { destinationArn: queue.arn } },
                // The consumer runs no DDL: its tables and role exist before the first batch.
            },
            { ...scope.parent, dependsOn: [migration] },
        );
    }

    // ---- scheduled reconciliation (reporter role: reads, plus the hourly rollup function) publishing the gap metric
    const reconcilerName = ledgerFunctionName(scope.prefix, "reconciler");
    const reconcilerLogs = logGroupFor("reconciler");
    const reconcilerIam = lambdaRole(
        "reconciler",
        "usage reconciliation: read the ledger, publish the gap metric",
        pulumi
            .all([reporter.secret.arn, key.arn, reconcilerLogs.arn])
            .apply(([secretArn, kmsKeyArn, logGroupArn]) =>
                JSON.stringify(reconcilerPolicy({ secretArn, kmsKeyArn, logGroupArn, namespace: METRIC_NAMESPACE, region: scope.region })),
            ),
    );
    const reconciler = lambdaFn(
        "reconciler",
        reconcilerName,
        "Reconciliation report -> CloudWatch gap metric (services/reconciler/handler.ts)",
        path.join("services", "reconciler", "handler.ts"),
        reconcilerIam.role,
        [reconcilerLogs, reconcilerIam.permissions, reconcilerIam.vpcAccess, migration],
        {
            PGUSER: REPORTER_ROLE,
            DB_PASSWORD_SECRET_ARN: reporter.secret.arn,
            SPOKES: JSON.stringify([...args.spokes].sort()),
            LOOKBACK_HOURS: String(args.reconcileLookbackHours),
        } satisfies EnvVars<typeof RECONCILER_ENV, pulumi.Input<string>>,
        300,
    );
    const schedule = new aws.cloudwatch.EventRule(
        `${scope.name}-reconcile-schedule`,
        {
            name: reconcilerName,
            description: "Runs the usage reconciliation",
            scheduleExpression: args.reconcileSchedule,
            tags: scope.tags,
        },
        scope.parent,
    );
    new aws.lambda.Permission(
        `${scope.name}-reconcile-invoke`,
        { action: "lambda:InvokeFunction", function: reconciler.name, principal: "events.amazonaws.com", sourceArn: schedule.arn },
        scope.parent,
    );
    new aws.cloudwatch.EventTarget(`${scope.name}-reconcile-target`, { rule: schedule.name, arn: reconciler.arn }, scope.parent);
    // A first reconciliation at `up` (and again when its code changes): the gap metric exists from the start, so the
    // gaps alarm (missing data = the reconciliation did not run) does not page on a fresh hub before the schedule fires.
    new aws.lambda.Invocation(
        `${scope.name}-first-reconciliation`,
        {
            functionName: reconciler.name,
            input: JSON.stringify({}),
            triggers: { code: reconciler.sourceCodeHash.apply((h) => h ?? "") },
        },
        { ...scope.parent, dependsOn: [migration] },
    );

    // ---- the operator's path to the ledger (no route from outside the VPC): `npm run status` and
    // `npm run replay-usage -- --apply` invoke this function, which runs two fixed operations (services/reconciler/ops.ts).
    const opsName = ledgerFunctionName(scope.prefix, "ops");
    const opsLogs = logGroupFor("ops");
    const opsIam = lambdaRole(
        "ops",
        "usage ledger operations for the operator tools: status reads, failed-batch replay",
        pulumi
            .all([ingest.secret.arn, reporter.secret.arn, key.arn, opsLogs.arn, failures.bucket.arn, failures.owner])
            .apply(([i, r, k, l, b, o]) =>
                JSON.stringify(
                    ledgerOpsPolicy({
                        roleSecretArns: [i, r],
                        kmsKeyArn: k,
                        logGroupArn: l,
                        region: scope.region,
                        failedBatchBucketArn: b,
                        bucketOwner: o,
                    }),
                ),
            ),
    );
    const ops = lambdaFn(
        "ops",
        opsName,
        "Ledger status reads and failed-batch replay for npm run status / replay-usage (services/reconciler/ops.ts)",
        path.join("services", "reconciler", "ops.ts"),
        opsIam.role,
        [opsLogs, opsIam.permissions, opsIam.vpcAccess, migration],
        {
            INGEST_SECRET_ARN: ingest.secret.arn,
            REPORTER_SECRET_ARN: reporter.secret.arn,
            STREAM_SPOKES: streamSpokes,
            FAILED_BATCH_BUCKET: failures.bucket.bucket,
            FAILED_BATCH_BUCKET_OWNER: failures.owner,
        } satisfies EnvVars<typeof LEDGER_OPS_ENV, pulumi.Input<string>>,
        300,
    );

    return { fn, queue, ops };
}
