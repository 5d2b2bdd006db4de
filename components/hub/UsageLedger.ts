import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { createHash } from "crypto";
import * as esbuild from "esbuild";
import * as fs from "fs";
import * as path from "path";
import type { UsageContract } from "../../config/contract";
import { subnet, parseCidr } from "../../lib/cidr";
import { ALL_SPOKES, GAP_METRIC, METRIC_NAMESPACE } from "../../services/reconciler/metric";
import { INGEST_ROLE, REPORTER_ROLE } from "../../services/reconciler/roles";

const REPO_ROOT = path.resolve(__dirname, "..", "..");

/** The consumer Lambda's code, bundled from services/usage-consumer/handler.ts. */
export interface ConsumerBundle {
    /** CommonJS source of `index.js` (exports `handler`). */
    code: string;
    /** Base64 SHA-256 of `code` (Lambda `sourceCodeHash`): changes exactly when the code changes. */
    sha256: string;
}

/**
 * Bundles the usage consumer with esbuild (in-process, ~0.2 s), so `npm run render` and `pulumi up` need no
 * prebuilt artifact. The ledger schema (services/ledger/schema.sql) is inlined through `define`; the AWS SDK v3
 * is left external because the Lambda Node.js runtime provides it; `pg-native` is an optional peer of `pg`.
 * @throws Error with esbuild's messages when the bundle does not build
 */
export function bundleUsageConsumer(): ConsumerBundle {
    return bundleLambda(path.join("services", "usage-consumer", "handler.ts"));
}

/**
 * Bundles one hub Lambda (entry relative to the repo root; it exports `handler`) the same way as the consumer:
 * the migrator and the reconciliation (services/reconciler).
 * @throws Error with esbuild's messages when the bundle does not build
 */
export function bundleLambda(entry: string): ConsumerBundle {
    const r = esbuild.buildSync({
        entryPoints: [path.join(REPO_ROOT, entry)],
        absWorkingDir: REPO_ROOT,
        bundle: true,
        write: false,
        platform: "node",
        target: "node24",
        format: "cjs",
        minify: true,
        legalComments: "none",
        logLevel: "silent",
        external: ["@aws-sdk/*", "pg-native"],
        define: { __LEDGER_SCHEMA_SQL__: JSON.stringify(fs.readFileSync(path.join(REPO_ROOT, "services", "ledger", "schema.sql"), "utf8")) },
    });
    const code = r.outputFiles[0].text;
    return { code, sha256: createHash("sha256").update(code).digest("base64") };
}

/** Kinesis stream name of a spoke's usage stream. */
export function usageStreamName(spoke: string): string {
    return `platform-usage-${spoke}`;
}

/**
 * Lambda runtime of the hub's functions: Node.js 24, the platform's runtime (package.json `engines`, .nvmrc), so the
 * code runs on Lambda with the Node.js it is tested with (`aws.lambda.Runtime.NodeJS24dX` in @pulumi/aws 7.48.0).
 */
export const CONSUMER_RUNTIME: aws.lambda.Runtime = aws.lambda.Runtime.NodeJS24dX;
/**
 * Database and master user. The master password is managed and rotated by RDS (`manageMasterUserPassword`, a
 * Secrets Manager secret RDS owns); only the migrator uses it. The consumer logs in as `ledger_ingest`, the
 * reconciliation as `ledger_reporter` (services/reconciler/roles.ts).
 */
export const LEDGER_DATABASE = "ledger";
export const LEDGER_USER = "ledger_admin";
/** Fixed physical names of the ledger's stateful resources (never auto-suffixed, so nothing renames them). */
export const LEDGER_CLUSTER_ID = "platform-usage-ledger";

/**
 * Pure: the cluster parameter group family of an Aurora PostgreSQL engine version (`16.6` -> `aurora-postgresql16`).
 * @throws Error for a version without a major number
 */
export function parameterGroupFamily(engineVersion: string): string {
    const major = /^(\d+)\./.exec(engineVersion)?.[1];
    if (!major) throw new Error(`engine version ${engineVersion} has no major version`);
    return `aurora-postgresql${major}`;
}

/**
 * Cluster parameters: `rds.force_ssl=1` refuses every connection without TLS (Aurora PostgreSQL defaults to 0
 * before major 17; docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraPostgreSQL.Security.html#AuroraPostgreSQL.Security.SSL.RequiringSSL).
 */
export const LEDGER_CLUSTER_PARAMETERS = [{ name: "rds.force_ssl", value: "1", applyMethod: "immediate" as const }];

/** Where the hub's alarms go, and the reconciliation's schedule (`platform:alarms`). */
export interface LedgerAlarmArgs {
    topicArn: string;
    iteratorAgeSeconds: number;
    reconcileSchedule: string;
    reconcileLookbackHours: number;
}

export interface UsageLedgerArgs {
    /** Spoke names; each gets its own stream, so a spoke's identity can put only to its own. */
    spokes: string[];
    /** AWS region (for the contract). */
    region: string;
    /** The two availability zones of the private subnets. */
    availabilityZones: [string, string];
    /** VPC block; two /24s (one per AZ) are carved from it. */
    vpcCidr: string;
    engineVersion: string;
    minAcu: number;
    maxAcu: number;
    instances: number;
    backupRetentionDays: number;
    streamRetentionHours: number;
    consumerBatchSize: number;
    deletionProtection: boolean;
    alarms: LedgerAlarmArgs;
}

/** The ledger key decrypts a secret only when Secrets Manager asks, in the hub's region (`kms:ViaService`). */
function viaSecretsManager(region: string) {
    return { StringEquals: { "kms:ViaService": `secretsmanager.${region}.amazonaws.com` } };
}

/** Pure: the migrator role's permissions: the master secret (RDS-managed) and the two role passwords, logs. */
export function migratorPolicy(x: { masterSecretArn: string; roleSecretArns: string[]; kmsKeyArn: string; logGroupArn: string; region: string }) {
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "DatabaseSecrets", Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: [x.masterSecretArn, ...x.roleSecretArns] },
            { Sid: "DecryptDatabaseSecrets", Effect: "Allow", Action: ["kms:Decrypt"], Resource: x.kmsKeyArn, Condition: viaSecretsManager(x.region) },
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
            { Sid: "DecryptDatabasePassword", Effect: "Allow", Action: ["kms:Decrypt"], Resource: x.kmsKeyArn, Condition: viaSecretsManager(x.region) },
            // PutMetricData has no resource type; the namespace condition is the only scope (IAM service authorization reference).
            { Sid: "GapMetric", Effect: "Allow", Action: ["cloudwatch:PutMetricData"], Resource: "*", Condition: { StringEquals: { "cloudwatch:namespace": x.namespace } } },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/** Pure: the consumer role's permissions (everything named, no wildcard resources except CloudWatch Logs' group). */
export function consumerPolicy(x: { streamArns: string[]; queueArn: string; secretArn: string; kmsKeyArn: string; logGroupArn: string; region: string }) {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "ReadUsageStreams", Effect: "Allow",
                Action: ["kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:DescribeStream", "kinesis:DescribeStreamSummary", "kinesis:ListShards"],
                Resource: x.streamArns,
            },
            { Sid: "ListStreams", Effect: "Allow", Action: ["kinesis:ListStreams"], Resource: "*" },
            { Sid: "FailureDestination", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: x.queueArn },
            { Sid: "DatabasePassword", Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: x.secretArn },
            { Sid: "DecryptDatabasePassword", Effect: "Allow", Action: ["kms:Decrypt"], Resource: x.kmsKeyArn, Condition: viaSecretsManager(x.region) },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/**
 * The hub's usage ledger (DESIGN §3): per spoke an encrypted Kinesis stream (the transport), one consumer
 * Lambda (services/usage-consumer, bundled at program run) reading all of them with a failure destination
 * (SQS), and the ledger itself on Aurora Serverless v2 PostgreSQL (services/ledger/schema.sql: each
 * `(spoke, requestId)` counted once; hourly aggregates read live from the events and rolled up for closed hours by
 * the scheduled reconciliation).
 *
 * - Streams: on-demand capacity, SSE with the AWS managed key `alias/aws/kinesis` (producers then need only
 *   `kinesis:PutRecord(s)` on the stream: {@link streamArnFor} for SpokeIdentity), retention
 *   `streamRetentionHours`.
 * - Consumer: in the ledger VPC (no internet route; Secrets Manager through an interface endpoint), retries a
 *   failing batch (bisecting it) until the records are a day from expiring, then sends the batch's shard and
 *   sequence range to the SQS failure destination; replaying it is safe (idempotent ingestion).
 * - Database: encrypted with the ledger's KMS key, private subnets only, password from `@pulumi/random`
 *   (a Pulumi secret) stored in Secrets Manager for the consumer; TLS verified against the RDS CAs.
 */
export class UsageLedger extends pulumi.ComponentResource {
    /** Spoke -> its stream's name and ARN. */
    public readonly streams: Record<string, { name: pulumi.Output<string>; arn: pulumi.Output<string> }>;
    public readonly consumerArn: pulumi.Output<string>;
    public readonly failureQueueArn: pulumi.Output<string>;
    public readonly clusterEndpoint: pulumi.Output<string>;
    public readonly passwordSecretArn: pulumi.Output<string>;
    private readonly region: string;

    constructor(name: string, args: UsageLedgerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:UsageLedger", name, {}, opts);
        const parent = { parent: this };
        const tags = { "platform:component": "usage-ledger" };
        this.region = args.region;

        // Stateful or hard to recreate: protect (the engine refuses to delete or replace it, so a change to an
        // immutable argument fails the update instead of creating an empty twin) and retainOnDelete (removing it
        // from the program never deletes the cloud object).
        const keep: pulumi.CustomResourceOptions = { parent: this, protect: true, retainOnDelete: true };
        const key = new aws.kms.Key(`${name}-key`, {
            description: "Usage ledger: Aurora storage and the database secrets",
            enableKeyRotation: true, deletionWindowInDays: 30, tags,
        }, keep);
        new aws.kms.Alias(`${name}-key-alias`, { name: "alias/platform-usage-ledger", targetKeyId: key.keyId }, parent);

        // ---- transport: one stream per spoke
        this.streams = {};
        const streamResources = [...args.spokes].sort().map((spoke) => {
            const s = new aws.kinesis.Stream(`${name}-${spoke}`, {
                name: usageStreamName(spoke),
                streamModeDetails: { streamMode: "ON_DEMAND" },
                retentionPeriod: args.streamRetentionHours,
                encryptionType: "KMS",
                kmsKeyId: "alias/aws/kinesis",
                tags: { ...tags, "platform:spoke": spoke },
            }, keep);
            this.streams[spoke] = { name: s.name, arn: s.arn };
            return { spoke, stream: s };
        });

        // ---- network: two private subnets, no internet route
        const block = parseCidr(args.vpcCidr);
        const vpc = new aws.ec2.Vpc(`${name}-vpc`, { cidrBlock: args.vpcCidr, enableDnsHostnames: true, enableDnsSupport: true, tags: { ...tags, Name: `${name}-vpc` } }, parent);
        const subnets = args.availabilityZones.map((az, i) => new aws.ec2.Subnet(`${name}-private-${i}`, {
            vpcId: vpc.id, availabilityZone: az, cidrBlock: subnet(block, 24, i).text, mapPublicIpOnLaunch: false, tags: { ...tags, Name: `${name}-private-${az}` },
        }, parent));
        // One security group for the ledger's Lambdas (consumer, migrator, reconciliation): database + endpoints only.
        const lambdaSg = new aws.ec2.SecurityGroup(`${name}-consumer-sg`, { vpcId: vpc.id, description: "usage consumer Lambda", tags }, parent);
        const dbSg = new aws.ec2.SecurityGroup(`${name}-db-sg`, { vpcId: vpc.id, description: "usage ledger database", tags }, parent);
        const endpointSg = new aws.ec2.SecurityGroup(`${name}-endpoint-sg`, { vpcId: vpc.id, description: "Secrets Manager endpoint", tags }, parent);
        new aws.vpc.SecurityGroupIngressRule(`${name}-db-from-consumer`, { securityGroupId: dbSg.id, referencedSecurityGroupId: lambdaSg.id, ipProtocol: "tcp", fromPort: 5432, toPort: 5432, description: "PostgreSQL from the consumer" }, parent);
        new aws.vpc.SecurityGroupIngressRule(`${name}-endpoint-from-consumer`, { securityGroupId: endpointSg.id, referencedSecurityGroupId: lambdaSg.id, ipProtocol: "tcp", fromPort: 443, toPort: 443, description: "HTTPS from the consumer" }, parent);
        new aws.vpc.SecurityGroupEgressRule(`${name}-consumer-to-db`, { securityGroupId: lambdaSg.id, referencedSecurityGroupId: dbSg.id, ipProtocol: "tcp", fromPort: 5432, toPort: 5432, description: "PostgreSQL" }, parent);
        new aws.vpc.SecurityGroupEgressRule(`${name}-consumer-to-endpoint`, { securityGroupId: lambdaSg.id, referencedSecurityGroupId: endpointSg.id, ipProtocol: "tcp", fromPort: 443, toPort: 443, description: "Secrets Manager" }, parent);
        // Interface endpoints: Secrets Manager (every Lambda's password) and CloudWatch metrics (the reconciliation).
        for (const svc of ["secretsmanager", "monitoring"] as const) {
            new aws.ec2.VpcEndpoint(`${name}-${svc}`, {
                vpcId: vpc.id, serviceName: `com.amazonaws.${args.region}.${svc}`, vpcEndpointType: "Interface",
                privateDnsEnabled: true, subnetIds: subnets.map((s) => s.id), securityGroupIds: [endpointSg.id], tags: { ...tags, Name: `${name}-${svc}` },
            }, parent);
        }

        // ---- ledger database: TLS enforced, master password managed and rotated by RDS
        const subnetGroup = new aws.rds.SubnetGroup(`${name}-db-subnets`, { subnetIds: subnets.map((s) => s.id), description: "usage ledger", tags }, parent);
        const parameters = new aws.rds.ClusterParameterGroup(`${name}-db-params`, {
            name: `${LEDGER_CLUSTER_ID}-${parameterGroupFamily(args.engineVersion)}`,
            family: parameterGroupFamily(args.engineVersion),
            description: "usage ledger: TLS only",
            parameters: LEDGER_CLUSTER_PARAMETERS,
            tags,
        // Named per family: a new engine major gets a new group beside the old one, never a name clash.
        }, parent);
        const cluster = new aws.rds.Cluster(`${name}-db`, {
            clusterIdentifier: LEDGER_CLUSTER_ID,
            engine: "aurora-postgresql",
            engineMode: "provisioned",
            engineVersion: args.engineVersion,
            databaseName: LEDGER_DATABASE,
            masterUsername: LEDGER_USER,
            manageMasterUserPassword: true,
            masterUserSecretKmsKeyId: key.arn,
            dbClusterParameterGroupName: parameters.name,
            serverlessv2ScalingConfiguration: { minCapacity: args.minAcu, maxCapacity: args.maxAcu },
            storageEncrypted: true,
            kmsKeyId: key.arn,
            dbSubnetGroupName: subnetGroup.name,
            vpcSecurityGroupIds: [dbSg.id],
            backupRetentionPeriod: args.backupRetentionDays,
            preferredBackupWindow: "17:00-18:00",
            copyTagsToSnapshot: true,
            deletionProtection: args.deletionProtection,
            skipFinalSnapshot: false,
            finalSnapshotIdentifier: `${LEDGER_CLUSTER_ID}-final`,
            enabledCloudwatchLogsExports: ["postgresql"],
            tags,
        }, keep);
        const instances = Array.from({ length: args.instances }, (_, i) => new aws.rds.ClusterInstance(`${name}-db-${i}`, {
            identifier: `${LEDGER_CLUSTER_ID}-${i}`,
            clusterIdentifier: cluster.id,
            instanceClass: "db.serverless",
            engine: "aurora-postgresql",
            engineVersion: args.engineVersion,
            availabilityZone: args.availabilityZones[i % 2],
            publiclyAccessible: false,
            autoMinorVersionUpgrade: true,
            tags,
        }, keep));
        const masterSecretArn = cluster.masterUserSecrets.apply((s) => {
            const arn = s?.[0]?.secretArn;
            if (!arn) throw new Error(`UsageLedger: cluster ${LEDGER_CLUSTER_ID} reports no RDS-managed master secret`);
            return arn;
        });

        // Login roles' passwords (created by the migrator), each in its own secret read only by its Lambda's role.
        const roleSecret = (role: "ingest" | "reporter", what: string) => {
            const pw = new random.RandomPassword(`${name}-${role}-password`, { length: 40, special: false }, parent);
            const sec = new aws.secretsmanager.Secret(`${name}-${role}-password`, {
                name: `platform/usage-ledger/${role}`, description: `Usage ledger: password of ledger_${role} (${what})`, kmsKeyId: key.arn, recoveryWindowInDays: 7, tags,
            }, parent);
            const version = new aws.secretsmanager.SecretVersion(`${name}-${role}-password`, { secretId: sec.id, secretString: pulumi.secret(pw.result) }, parent);
            return { secret: sec, version };
        };
        const ingest = roleSecret("ingest", "usage consumer");
        const reporter = roleSecret("reporter", "scheduled reconciliation");

        const lambdaRole = (id: string, description: string, policy: pulumi.Output<string>) => {
            const role = new aws.iam.Role(`${name}-${id}-role`, {
                assumeRolePolicy: JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }] }),
                description, tags,
            }, parent);
            new aws.iam.RolePolicyAttachment(`${name}-${id}-vpc`, { role: role.name, policyArn: "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole" }, parent);
            const permissions = new aws.iam.RolePolicy(`${name}-${id}-permissions`, { role: role.name, policy }, parent);
            return { role, permissions };
        };
        const dbEnv = { PGHOST: cluster.endpoint, PGPORT: "5432", PGDATABASE: LEDGER_DATABASE, NODE_EXTRA_CA_CERTS: "/var/runtime/ca-cert.pem" };
        const vpcConfig = { subnetIds: subnets.map((s) => s.id), securityGroupIds: [lambdaSg.id] };
        const logGroupFor = (id: string, functionName: string) => new aws.cloudwatch.LogGroup(`${name}-${id}-logs`, { name: `/aws/lambda/${functionName}`, retentionInDays: 90, tags }, parent);
        const lambdaFn = (id: string, functionName: string, description: string, entry: string, role: aws.iam.Role, deps: pulumi.Resource[], variables: Record<string, pulumi.Input<string>>, timeout: number) => {
            const b = bundleLambda(entry);
            return new aws.lambda.Function(`${name}-${id}`, {
                name: functionName, description, runtime: CONSUMER_RUNTIME, architectures: ["arm64"], handler: "index.handler",
                code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.StringAsset(b.code) }), sourceCodeHash: b.sha256,
                role: role.arn, memorySize: 512, timeout, vpcConfig, environment: { variables: { ...dbEnv, ...variables } }, tags,
            }, { parent: this, dependsOn: deps });
        };

        // ---- migrator: schema + roles as the master user, run by `pulumi up` when the schema or its code changes
        const migratorName = "platform-usage-ledger-migrator";
        const migratorLogs = logGroupFor("migrator", migratorName);
        const migratorIam = lambdaRole("migrator", "usage ledger migrator: schema and roles as the master user",
            pulumi.all([masterSecretArn, ingest.secret.arn, reporter.secret.arn, key.arn, migratorLogs.arn]).apply(([m, i, r, k, l]) =>
                JSON.stringify(migratorPolicy({ masterSecretArn: m, roleSecretArns: [i, r], kmsKeyArn: k, logGroupArn: l, region: args.region }))));
        const migrator = lambdaFn("migrator", migratorName, "Applies services/ledger/schema.sql and the ledger roles (services/reconciler/migrator.ts)",
            path.join("services", "reconciler", "migrator.ts"), migratorIam.role, [migratorLogs, migratorIam.permissions],
            { MASTER_SECRET_ARN: masterSecretArn, INGEST_SECRET_ARN: ingest.secret.arn, REPORTER_SECRET_ARN: reporter.secret.arn }, 120);
        const schemaSha256 = createHash("sha256").update(fs.readFileSync(path.join(REPO_ROOT, "services", "ledger", "schema.sql"))).digest("hex");
        const migration = new aws.lambda.Invocation(`${name}-migration`, {
            functionName: migrator.name,
            input: JSON.stringify({ schemaSha256 }),
            // Re-run when the schema, the migrator or the role passwords change.
            triggers: { schemaSha256, code: migrator.sourceCodeHash.apply((h) => h ?? ""), ingest: ingest.version.versionId, reporter: reporter.version.versionId },
        }, { parent: this, dependsOn: [...instances, ingest.version, reporter.version] });

        // ---- consumer (ingest role: SELECT/INSERT on the ledger tables; no UPDATE, DELETE or DDL)
        const queue = new aws.sqs.Queue(`${name}-failures`, { messageRetentionSeconds: 14 * 24 * 3600, sqsManagedSseEnabled: true, tags }, parent);
        const functionName = "platform-usage-consumer";
        const logGroup = new aws.cloudwatch.LogGroup(`${name}-consumer-logs`, { name: `/aws/lambda/${functionName}`, retentionInDays: 90, tags }, parent);
        const role = new aws.iam.Role(`${name}-consumer-role`, {
            assumeRolePolicy: JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }] }),
            description: "usage consumer: read the usage streams, write the ledger",
            tags,
        }, parent);
        new aws.iam.RolePolicyAttachment(`${name}-consumer-vpc`, { role: role.name, policyArn: "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole" }, parent);
        const rolePolicy = new aws.iam.RolePolicy(`${name}-consumer-permissions`, {
            role: role.name,
            policy: pulumi.all([pulumi.all(streamResources.map((x) => x.stream.arn)), queue.arn, ingest.secret.arn, key.arn, logGroup.arn])
                .apply(([streamArns, queueArn, secretArn, kmsKeyArn, logGroupArn]) => JSON.stringify(consumerPolicy({ streamArns, queueArn, secretArn, kmsKeyArn, logGroupArn, region: args.region }))),
        }, parent);
        const bundle = bundleUsageConsumer();
        const fn = new aws.lambda.Function(`${name}-consumer`, {
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
                    STREAM_SPOKES: pulumi.all(streamResources.map((x) => x.stream.arn.apply((arn) => [arn, x.spoke] as const)))
                        .apply((pairs) => JSON.stringify(Object.fromEntries(pairs))),
                },
            },
            tags,
        }, { parent: this, dependsOn: [logGroup, rolePolicy] });
        for (const { spoke, stream } of streamResources) {
            new aws.lambda.EventSourceMapping(`${name}-${spoke}-mapping`, {
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
            }, { parent: this, dependsOn: [migration] });
        }

        // ---- scheduled reconciliation (reporter role: reads, plus the hourly rollup function) publishing the gap metric
        const reconcilerName = "platform-usage-reconciliation";
        const reconcilerLogs = logGroupFor("reconciler", reconcilerName);
        const reconcilerIam = lambdaRole("reconciler", "usage reconciliation: read the ledger, publish the gap metric",
            pulumi.all([reporter.secret.arn, key.arn, reconcilerLogs.arn]).apply(([secretArn, kmsKeyArn, logGroupArn]) =>
                JSON.stringify(reconcilerPolicy({ secretArn, kmsKeyArn, logGroupArn, namespace: METRIC_NAMESPACE, region: args.region }))));
        const reconciler = lambdaFn("reconciler", reconcilerName, "Reconciliation report -> CloudWatch gap metric (services/reconciler/handler.ts)",
            path.join("services", "reconciler", "handler.ts"), reconcilerIam.role, [reconcilerLogs, reconcilerIam.permissions, migration],
            { PGUSER: REPORTER_ROLE, DB_PASSWORD_SECRET_ARN: reporter.secret.arn, SPOKES: JSON.stringify([...args.spokes].sort()), LOOKBACK_HOURS: String(args.alarms.reconcileLookbackHours) }, 300);
        const schedule = new aws.cloudwatch.EventRule(`${name}-reconcile-schedule`, {
            name: "platform-usage-reconciliation", description: "Runs the usage reconciliation", scheduleExpression: args.alarms.reconcileSchedule, tags,
        }, parent);
        new aws.lambda.Permission(`${name}-reconcile-invoke`, { action: "lambda:InvokeFunction", function: reconciler.name, principal: "events.amazonaws.com", sourceArn: schedule.arn }, parent);
        new aws.cloudwatch.EventTarget(`${name}-reconcile-target`, { rule: schedule.name, arn: reconciler.arn }, parent);

        // ---- alarms to the operator's topic
        const actions = { alarmActions: [args.alarms.topicArn], okActions: [args.alarms.topicArn] };
        new aws.cloudwatch.MetricAlarm(`${name}-failures-alarm`, {
            name: "platform-usage-failure-queue",
            alarmDescription: "Usage batches reached the failure queue: replay them before the records age out of Kinesis (components/hub/UsageLedger.ts)",
            namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: queue.name },
            statistic: "Maximum", period: 300, evaluationPeriods: 1, threshold: 0, comparisonOperator: "GreaterThanThreshold", treatMissingData: "notBreaching",
            ...actions, tags,
        }, parent);
        new aws.cloudwatch.MetricAlarm(`${name}-iterator-age-alarm`, {
            name: "platform-usage-consumer-iterator-age",
            alarmDescription: `The usage consumer is more than ${args.alarms.iteratorAgeSeconds} s behind its streams`,
            namespace: "AWS/Lambda", metricName: "IteratorAge", dimensions: { FunctionName: fn.name },
            // IteratorAge is in milliseconds (AWS Lambda metrics for event source mappings).
            statistic: "Maximum", period: 300, evaluationPeriods: 3, threshold: args.alarms.iteratorAgeSeconds * 1000, comparisonOperator: "GreaterThanThreshold", treatMissingData: "notBreaching",
            ...actions, tags,
        }, parent);
        new aws.cloudwatch.MetricAlarm(`${name}-gaps-alarm`, {
            name: "platform-usage-reconciliation-gaps",
            alarmDescription: "Usage events a spoke sent never reached the ledger (reconciliation gaps), or the reconciliation did not run",
            namespace: METRIC_NAMESPACE, metricName: GAP_METRIC, dimensions: { Spoke: ALL_SPOKES },
            // No datum = the scheduled reconciliation did not run: that pages too.
            statistic: "Maximum", period: 3600, evaluationPeriods: 2, datapointsToAlarm: 1, threshold: 0, comparisonOperator: "GreaterThanThreshold", treatMissingData: "breaching",
            ...actions, tags,
        }, parent);

        this.consumerArn = fn.arn;
        this.failureQueueArn = queue.arn;
        this.clusterEndpoint = cluster.endpoint;
        this.passwordSecretArn = ingest.secret.arn;
        this.registerOutputs({
            streams: this.streams, consumerArn: this.consumerArn, failureQueueArn: this.failureQueueArn,
            clusterEndpoint: this.clusterEndpoint, passwordSecretArn: this.passwordSecretArn,
        });
    }

    /**
     * ARN of `spoke`'s stream: what its SpokeIdentity may `kinesis:PutRecord(s)` to.
     * @throws Error for a spoke the ledger was not built for
     */
    streamArnFor(spoke: string): pulumi.Output<string> {
        const s = this.streams[spoke];
        if (!s) throw new Error(`UsageLedger: no usage stream for spoke "${spoke}"`);
        return s.arn;
    }

    /** The contract's `usage` block for `spoke` (config/contract.ts UsageContractSchema). */
    usageContract(spoke: string): pulumi.Output<UsageContract> {
        const s = this.streams[spoke];
        if (!s) throw new Error(`UsageLedger: no usage stream for spoke "${spoke}"`);
        return pulumi.all([s.name, s.arn]).apply(([streamName, streamArn]) => ({ streamName, streamArn, region: this.region }));
    }
}
