import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { createHash } from "crypto";
import * as esbuild from "esbuild";
import * as fs from "fs";
import * as path from "path";
import type { UsageContract } from "../../config/contract";
import { subnet, parseCidr } from "../../lib/cidr";

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
    const r = esbuild.buildSync({
        entryPoints: [path.join(REPO_ROOT, "services", "usage-consumer", "handler.ts")],
        absWorkingDir: REPO_ROOT,
        bundle: true,
        write: false,
        platform: "node",
        target: "node22",
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

/** Lambda runtime of the consumer: Node.js 22 (Node.js 20 on Lambda is deprecated since 2026-04-30). */
export const CONSUMER_RUNTIME = "nodejs22.x";
/** Database and admin user the consumer connects as (the schema is applied by the consumer itself). */
export const LEDGER_DATABASE = "ledger";
export const LEDGER_USER = "ledger_admin";

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
}

/** Pure: the consumer role's permissions (everything named, no wildcard resources except CloudWatch Logs' group). */
export function consumerPolicy(x: { streamArns: string[]; queueArn: string; secretArn: string; kmsKeyArn: string; logGroupArn: string }) {
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
            { Sid: "DecryptDatabasePassword", Effect: "Allow", Action: ["kms:Decrypt"], Resource: x.kmsKeyArn },
            { Sid: "Logs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${x.logGroupArn}:*` },
        ],
    };
}

/**
 * The hub's usage ledger (DESIGN §3): per spoke an encrypted Kinesis stream (the transport), one consumer
 * Lambda (services/usage-consumer, bundled at program run) reading all of them with a failure destination
 * (SQS), and the ledger itself on Aurora Serverless v2 PostgreSQL (services/ledger/schema.sql: each
 * `(spoke, requestId)` counted once, hourly aggregates in the same statement).
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

        const key = new aws.kms.Key(`${name}-key`, {
            description: "Usage ledger: Aurora storage and the database password secret",
            enableKeyRotation: true, deletionWindowInDays: 30, tags,
        }, parent);
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
            }, parent);
            this.streams[spoke] = { name: s.name, arn: s.arn };
            return { spoke, stream: s };
        });

        // ---- network: two private subnets, no internet route
        const block = parseCidr(args.vpcCidr);
        const vpc = new aws.ec2.Vpc(`${name}-vpc`, { cidrBlock: args.vpcCidr, enableDnsHostnames: true, enableDnsSupport: true, tags: { ...tags, Name: `${name}-vpc` } }, parent);
        const subnets = args.availabilityZones.map((az, i) => new aws.ec2.Subnet(`${name}-private-${i}`, {
            vpcId: vpc.id, availabilityZone: az, cidrBlock: subnet(block, 24, i).text, mapPublicIpOnLaunch: false, tags: { ...tags, Name: `${name}-private-${az}` },
        }, parent));
        const lambdaSg = new aws.ec2.SecurityGroup(`${name}-consumer-sg`, { vpcId: vpc.id, description: "usage consumer Lambda", tags }, parent);
        const dbSg = new aws.ec2.SecurityGroup(`${name}-db-sg`, { vpcId: vpc.id, description: "usage ledger database", tags }, parent);
        const endpointSg = new aws.ec2.SecurityGroup(`${name}-endpoint-sg`, { vpcId: vpc.id, description: "Secrets Manager endpoint", tags }, parent);
        new aws.vpc.SecurityGroupIngressRule(`${name}-db-from-consumer`, { securityGroupId: dbSg.id, referencedSecurityGroupId: lambdaSg.id, ipProtocol: "tcp", fromPort: 5432, toPort: 5432, description: "PostgreSQL from the consumer" }, parent);
        new aws.vpc.SecurityGroupIngressRule(`${name}-endpoint-from-consumer`, { securityGroupId: endpointSg.id, referencedSecurityGroupId: lambdaSg.id, ipProtocol: "tcp", fromPort: 443, toPort: 443, description: "HTTPS from the consumer" }, parent);
        new aws.vpc.SecurityGroupEgressRule(`${name}-consumer-to-db`, { securityGroupId: lambdaSg.id, referencedSecurityGroupId: dbSg.id, ipProtocol: "tcp", fromPort: 5432, toPort: 5432, description: "PostgreSQL" }, parent);
        new aws.vpc.SecurityGroupEgressRule(`${name}-consumer-to-endpoint`, { securityGroupId: lambdaSg.id, referencedSecurityGroupId: endpointSg.id, ipProtocol: "tcp", fromPort: 443, toPort: 443, description: "Secrets Manager" }, parent);
        new aws.ec2.VpcEndpoint(`${name}-secretsmanager`, {
            vpcId: vpc.id, serviceName: `com.amazonaws.${args.region}.secretsmanager`, vpcEndpointType: "Interface",
            privateDnsEnabled: true, subnetIds: subnets.map((s) => s.id), securityGroupIds: [endpointSg.id], tags,
        }, parent);

        // ---- ledger database
        const password = new random.RandomPassword(`${name}-db-password`, { length: 40, special: false }, parent);
        const secret = new aws.secretsmanager.Secret(`${name}-db-password`, {
            description: "Usage ledger database password (consumer Lambda)", kmsKeyId: key.arn, recoveryWindowInDays: 7, tags,
        }, parent);
        new aws.secretsmanager.SecretVersion(`${name}-db-password`, { secretId: secret.id, secretString: pulumi.secret(password.result) }, parent);
        const subnetGroup = new aws.rds.SubnetGroup(`${name}-db-subnets`, { subnetIds: subnets.map((s) => s.id), description: "usage ledger", tags }, parent);
        const cluster = new aws.rds.Cluster(`${name}-db`, {
            engine: "aurora-postgresql",
            engineMode: "provisioned",
            engineVersion: args.engineVersion,
            databaseName: LEDGER_DATABASE,
            masterUsername: LEDGER_USER,
            masterPassword: pulumi.secret(password.result),
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
            finalSnapshotIdentifier: `${name}-final`,
            enabledCloudwatchLogsExports: ["postgresql"],
            tags,
        }, parent);
        for (let i = 0; i < args.instances; i++) {
            new aws.rds.ClusterInstance(`${name}-db-${i}`, {
                clusterIdentifier: cluster.id,
                instanceClass: "db.serverless",
                engine: "aurora-postgresql",
                engineVersion: args.engineVersion,
                availabilityZone: args.availabilityZones[i % 2],
                publiclyAccessible: false,
                autoMinorVersionUpgrade: true,
                tags,
            }, parent);
        }

        // ---- consumer
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
            policy: pulumi.all([pulumi.all(streamResources.map((x) => x.stream.arn)), queue.arn, secret.arn, key.arn, logGroup.arn])
                .apply(([streamArns, queueArn, secretArn, kmsKeyArn, logGroupArn]) => JSON.stringify(consumerPolicy({ streamArns, queueArn, secretArn, kmsKeyArn, logGroupArn }))),
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
            vpcConfig: { subnetIds: subnets.map((s) => s.id), securityGroupIds: [lambdaSg.id] },
            environment: {
                variables: {
                    PGHOST: cluster.endpoint,
                    PGPORT: "5432",
                    PGDATABASE: LEDGER_DATABASE,
                    PGUSER: LEDGER_USER,
                    DB_PASSWORD_SECRET_ARN: secret.arn,
                    STREAM_SPOKES: pulumi.all(streamResources.map((x) => x.stream.arn.apply((arn) => [arn, x.spoke] as const)))
                        .apply((pairs) => JSON.stringify(Object.fromEntries(pairs))),
                    // Node.js 20+ Lambda runtimes do not load the RDS CA bundle unless told to (AWS Lambda docs).
                    NODE_EXTRA_CA_CERTS: "/var/runtime/ca-cert.pem",
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
            }, parent);
        }

        this.consumerArn = fn.arn;
        this.failureQueueArn = queue.arn;
        this.clusterEndpoint = cluster.endpoint;
        this.passwordSecretArn = secret.arn;
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
