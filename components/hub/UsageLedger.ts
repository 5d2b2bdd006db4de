import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { UsageContract } from "../../config/contract";
import { ledgerAlarms, type LedgerAlarmArgs } from "./ledger/alarms";
import { LEDGER_LOG_EXPORTS, ledgerDatabase, ledgerLogGroupName } from "./ledger/database";
import { failedBatchBucket } from "./ledger/failures";
import { ledgerFunctionLogGroupNames, ledgerFunctions } from "./ledger/functions";
import { METRIC_NAMESPACE } from "../../services/reconciler/config";
import { interfaceEndpointPolicies, ledgerNetwork, s3EndpointPolicy } from "./ledger/network";
import type { LedgerScope } from "./ledger/scope";
import { serviceOnlyKeyPolicy } from "../../lib/kms";
import { usageStreams } from "./ledger/transport";
import { FAILED_BATCH_PREFIX } from "../../services/usage-consumer/config";

// The ledger's parts, one module per concept (components/hub/ledger/): transport (streams), network, database,
// functions (migrator, consumer, reconciliation), alarms, plus the Lambda bundling and IAM documents.
export { bundleLambda, bundleUsageConsumer, CONSUMER_RUNTIME, type ConsumerBundle } from "./ledger/bundle";
export {
    LEDGER_CLUSTER_ID,
    LEDGER_CLUSTER_PARAMETERS,
    LEDGER_DATABASE,
    LEDGER_LOG_EXPORTS,
    LEDGER_LOG_RETENTION_DAYS,
    LEDGER_USER,
    ledgerLogGroupName,
    parameterGroupFamily,
} from "./ledger/database";
export { consumerPolicy, migratorPolicy, reconcilerPolicy } from "./ledger/iam";
export { usageStreamName } from "./ledger/transport";
export type { LedgerAlarmArgs };

/**
 * Inputs of {@link UsageLedger}. The hub passes `platform:usage` (config/metering.ts `UsageLedgerConfigSchema`, where
 * every default lives and only there: this component sets none) spread in, plus its own region, account and alarms.
 * The defaults below are that schema's.
 */
export interface UsageLedgerArgs {
    /** The ledger key's administrators: the hub deployers and `platform:keyAdministrators` (lib/kms.ts keyAdministration). */
    keyAdministrators: string[];
    /** Spoke names; each gets its own stream, so a spoke's identity can put only to its own. */
    spokes: string[];
    /** AWS region (for the contract). */
    region: string;
    /** The hub's AWS partition (`aws.getPartition`); the ledger key's policy supports only `aws` (lib/kms.ts). */
    partition?: pulumi.Input<string>;
    /**
     * The two availability zones of the private subnets, the database instances alternating between them
     * (config/metering.ts `ledgerAvailabilityZones`: default `<region>a`, `<region>b`).
     */
    availabilityZones: [string, string];
    /**
     * VPC block (IPv4 CIDR, /16 to /23; default `10.250.0.0/22`); the first two /24s are the private subnets, one per AZ
     * (components/hub/ledger/network.ts).
     */
    vpcCidr: string;
    /**
     * Aurora PostgreSQL engine version, `major.minor` (default `16.6`), pinned on the cluster and its instances; the
     * cluster parameter group family follows its major (`aurora-postgresql16`, components/hub/ledger/database.ts
     * `parameterGroupFamily`). A major bump is an in-place upgrade.
     */
    engineVersion: string;
    /**
     * Aurora Serverless v2 minimum capacity, in Aurora capacity units (ACUs; 1 ACU ≈ 2 GiB of memory, as
     * config/metering.ts says), 0.5-256; default 0.5 (one warm writer). The cluster's
     * `serverlessv2ScalingConfiguration.minCapacity`.
     */
    minAcu: number;
    /** Aurora Serverless v2 maximum capacity in ACUs, 1-256, at least `minAcu`; default 8 (`maxCapacity`). */
    maxAcu: number;
    /**
     * Database instances (`db.serverless`), 1-4; default 2: a writer and a reader in the other AZ (failover in about
     * 30 s, as config/metering.ts says).
     */
    instances: number;
    /** Automated backup retention, days (1-35; default 14): the point-in-time recovery window. */
    backupRetentionDays: number;
    /**
     * Retention of each spoke's Kinesis stream, hours (72-8760; default 168 = 7 days). The consumer's
     * `maximumRecordAgeInSeconds` is this less 24 h, in seconds, clamped to 60-604,800
     * (components/hub/ledger/functions.ts), so a failing batch goes to the failure destination a day before its records
     * would expire.
     */
    streamRetentionHours: number;
    /** Records per consumer invocation: the Kinesis event source mapping's `batchSize` (1-10,000; default 500). */
    consumerBatchSize: number;
    /** The cluster's `deletionProtection` (default true; false only to tear a test hub down). */
    deletionProtection: boolean;
    /**
     * Rotation mark of the login roles' passwords (config/metering.ts `rolePasswordRotation`, e.g. `2026-12-01`); a new
     * mark rotates them. Unset: the passwords generated at the first `up` are kept.
     */
    rolePasswordRotation?: string;
    /**
     * The ledger's alarms and reconciliation (`platform:alarms`, config/hub.ts `HubAlarmsSchema`): the operator's SNS
     * topic (in the hub's region), the consumer iterator age that alarms in seconds (default 3600), the
     * reconciliation's EventBridge schedule (default `rate(1 hour)`) and look-back in hours (default 48).
     */
    alarms: LedgerAlarmArgs;
    /** The hub's account (the ledger key's policy, components/hub/kms.ts). */
    accountId: pulumi.Input<string>;
    /** First word of every fixed physical name (`platform:namePrefix`, config/hub.ts); default `platform`. */
    namePrefix?: string;
}

/**
 * The hub's usage ledger: per spoke an encrypted Kinesis stream (the transport), one consumer
 * Lambda (services/usage-consumer, bundled at program run) reading all of them with a failure destination
 * (SQS), and the ledger itself on Aurora Serverless v2 PostgreSQL (services/ledger/schema.sql: each
 * `(spoke, requestId)` counted once; hourly aggregates read live from the events and rolled up for closed hours by
 * the scheduled reconciliation).
 *
 * - Streams: on-demand capacity, SSE with the AWS managed key `alias/aws/kinesis` (producers then need only
 *   `kinesis:PutRecord(s)` on the stream: {@link streamArnFor} for SpokeIdentity), retention
 *   `streamRetentionHours`.
 * - Consumer: in the ledger VPC (no internet route; Secrets Manager through an interface endpoint, S3 through a
 *   gateway endpoint), writes a failing batch's records to the failure bucket (SSE-KMS, ledger key) and retries it
 *   (bisecting it) until the records are a day from expiring, then sends the batch's shard and sequence range to the
 *   SQS failure destination; `npm run replay-usage` ingests the stored records again (idempotent ingestion).
 * - Database: encrypted with the ledger's KMS key, private subnets only, password from `@pulumi/random`
 *   (a Pulumi secret) stored in Secrets Manager for the consumer; TLS verified against the RDS CAs.
 *
 * @throws Error from the constructor: an engine version without a major number (`parameterGroupFamily`), a `vpcCidr`
 *   that is not a CIDR or cannot hold two /24s (config/cidr.ts `parseCidr`/`subnet`; the schema refuses both first), a
 *   Lambda bundle that does not build (esbuild's messages, components/hub/ledger/bundle.ts); during the deployment
 *   (inside an output), a cluster that reports no RDS-managed master secret
 * @throws Error from {@link UsageLedger.streamArnFor} and {@link UsageLedger.usageContract} for a spoke the ledger was
 *   not built for
 */
export class UsageLedger extends pulumi.ComponentResource {
    /** Spoke -> its stream's name and ARN. */
    public readonly streams: Record<string, { name: pulumi.Output<string>; arn: pulumi.Output<string> }>;
    public readonly consumerArn: pulumi.Output<string>;
    public readonly failureQueueArn: pulumi.Output<string>;
    /** The failure bucket: failed batches with their records, for `npm run replay-usage`. */
    public readonly failedBatchBucket: pulumi.Output<string>;
    public readonly failedBatchBucketArn: pulumi.Output<string>;
    /** The ledger key (encrypts the failed batches: a rescue names it in its PutObject, services/usage-consumer/rescue.ts). */
    public readonly keyArn: pulumi.Output<string>;
    public readonly clusterEndpoint: pulumi.Output<string>;
    /**
     * The operator's ledger Lambda (services/reconciler/ops.ts): what `npm run status` and `npm run replay-usage`
     * invoke, since the database has no route from outside its VPC.
     */
    public readonly opsFunction: pulumi.Output<{ name: string; arn: string; region: string }>;
    public readonly passwordSecretArn: pulumi.Output<string>;
    private readonly region: string;

    constructor(name: string, args: UsageLedgerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:UsageLedger", name, {}, opts);
        const tags = { "platform:component": "usage-ledger" };
        this.region = args.region;
        // Every part declares its resources as children of this component under this name: URNs as before the split.
        const scope: LedgerScope = {
            name,
            parent: { parent: this },
            keep: { parent: this, protect: true, retainOnDelete: true },
            tags,
            region: args.region,
            prefix: args.namePrefix ?? "platform",
        };

        const key = new aws.kms.Key(
            `${name}-key`,
            {
                description: "Usage ledger: Aurora storage, the database secrets and failed usage batches",
                enableKeyRotation: true,
                deletionWindowInDays: 30,
                tags,
                // Used only by RDS (storage, snapshots, its grants) and Secrets Manager (the master and role secrets).
                // S3 too: the consumer's failed batches (components/hub/ledger/failures.ts). CloudWatch Logs: the database's
                // exported log groups (components/hub/ledger/database.ts) and the ledger Lambdas' log groups
                // (components/hub/ledger/functions.ts), only those.
                policy: pulumi.all([args.accountId, args.partition ?? "aws"]).apply(([accountId, partition]) =>
                    JSON.stringify(
                        serviceOnlyKeyPolicy({
                            accountId,
                            partition,
                            region: args.region,
                            services: ["rds", "secretsmanager", "s3"],
                            administrators: args.keyAdministrators,
                            logGroups: [
                                ...LEDGER_LOG_EXPORTS.map((type) => ledgerLogGroupName(scope.prefix, type)),
                                ...ledgerFunctionLogGroupNames(scope.prefix),
                            ],
                        }),
                    ),
                ),
            },
            scope.keep,
        );
        new aws.kms.Alias(`${name}-key-alias`, { name: `alias/${scope.prefix}-usage-ledger`, targetKeyId: key.keyId }, scope.parent);

        const streamResources = usageStreams(scope, args.spokes, args.streamRetentionHours);
        this.streams = Object.fromEntries(streamResources.map(({ spoke, stream }) => [spoke, { name: stream.name, arn: stream.arn }]));
        const net = ledgerNetwork(scope, args);
        const db = ledgerDatabase(scope, args, key, net);
        const failures = failedBatchBucket(scope, key, args.accountId, args.keyAdministrators);
        // The interface endpoints: the ledger's secrets and the reconciliation's metric only, for this account.
        const endpointPolicies = pulumi
            .all([db.masterSecretArn, db.ingest.secret.arn, db.reporter.secret.arn, args.accountId])
            .apply(([m, i, r, accountId]) =>
                interfaceEndpointPolicies({ secretArns: [m, i, r], metricNamespace: METRIC_NAMESPACE, accountId }),
            );
        for (const svc of ["secretsmanager", "monitoring"] as const)
            new aws.ec2.VpcEndpointPolicy(
                `${name}-${svc}-policy`,
                { vpcEndpointId: net.interfaceEndpoints[svc].id, policy: endpointPolicies.apply((p) => JSON.stringify(p[svc])) },
                scope.parent,
            );
        const { fn, queue, ops } = ledgerFunctions(
            scope,
            {
                spokes: args.spokes,
                streamRetentionHours: args.streamRetentionHours,
                consumerBatchSize: args.consumerBatchSize,
                reconcileSchedule: args.alarms.reconcileSchedule,
                reconcileLookbackHours: args.alarms.reconcileLookbackHours,
            },
            key,
            net,
            db,
            streamResources,
            failures,
        );
        // The VPC's S3 endpoint reaches the failure bucket's `failed/` only, for principals of this account;
        // reading back only for the ledger operations Lambda's role.
        new aws.ec2.VpcEndpointPolicy(
            `${name}-s3-policy`,
            {
                vpcEndpointId: net.s3Endpoint.id,
                policy: pulumi
                    .all([failures.bucket.arn, args.accountId, ops.role])
                    .apply(([bucketArn, accountId, opsRoleArn]) =>
                        JSON.stringify(s3EndpointPolicy(bucketArn, FAILED_BATCH_PREFIX, accountId, [opsRoleArn])),
                    ),
            },
            scope.parent,
        );
        ledgerAlarms(scope, args.alarms, queue, fn);

        this.consumerArn = fn.arn;
        this.failureQueueArn = queue.arn;
        this.failedBatchBucket = failures.bucket.bucket;
        this.failedBatchBucketArn = failures.bucket.arn;
        this.keyArn = key.arn;
        this.clusterEndpoint = db.cluster.endpoint;
        this.opsFunction = pulumi.all([ops.name, ops.arn]).apply(([n, a]) => ({ name: n, arn: a, region: args.region }));
        this.passwordSecretArn = db.ingest.secret.arn;
        this.registerOutputs({
            streams: this.streams,
            consumerArn: this.consumerArn,
            failureQueueArn: this.failureQueueArn,
            failedBatchBucket: this.failedBatchBucket,
            clusterEndpoint: this.clusterEndpoint,
            opsFunction: this.opsFunction,
            passwordSecretArn: this.passwordSecretArn,
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
