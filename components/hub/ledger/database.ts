import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { LedgerNetwork } from "./network";
import type { LedgerScope } from "./scope";

/**
 * Database and master user. The master password is managed and rotated by RDS (`manageMasterUserPassword`, a
 * Secrets Manager secret RDS owns); only the migrator uses it. The consumer logs in as `ledger_ingest`, the
 * reconciliation as `ledger_reporter` (services/reconciler/roles.ts).
 */
export const LEDGER_DATABASE = "ledger";
/** The RDS-managed master user (its password in the secret RDS owns); only the migrator logs in as it. */
export const LEDGER_USER = "ledger_admin";
/**
 * Aurora cluster identifier of the ledger of a hub whose names begin with `prefix` (`platform:namePrefix`): a fixed
 * physical name (never auto-suffixed, so nothing renames it); its instances, parameter groups and final snapshot
 * begin with it.
 */
export function ledgerClusterId(prefix: string): string {
    return `${prefix}-usage-ledger`;
}
/**
 * Days CloudWatch Logs keeps the ledger database's PostgreSQL log (as the ledger Lambdas' log groups,
 * components/hub/ledger/functions.ts).
 */
export const LEDGER_LOG_RETENTION_DAYS = 90;

/**
 * Log types the ledger cluster exports to CloudWatch Logs (`enabledCloudwatchLogsExports`): the PostgreSQL log
 * (connections refused by `rds.force_ssl`, errors, the migrator's DDL). Aurora PostgreSQL exports `postgresql`,
 * `instance` and `iam-db-auth-error`, no `upgrade` (RDS API reference, CreateDBCluster `EnableCloudwatchLogsExports`;
 * `iam-db-auth-error` would stay empty: the ledger's roles log in with passwords). It writes each type to
 * `/aws/rds/cluster/<cluster identifier>/<type>` (Aurora user guide, "Publishing Aurora PostgreSQL logs to Amazon
 * CloudWatch Logs"); {@link ledgerDatabase} creates those log groups itself.
 */
export const LEDGER_LOG_EXPORTS = ["postgresql"] as const;

/** Pure: the log group Aurora writes the ledger cluster's exported `type` log to ({@link LEDGER_LOG_EXPORTS}). */
export function ledgerLogGroupName(prefix: string, type: (typeof LEDGER_LOG_EXPORTS)[number]): string {
    return `/aws/rds/cluster/${ledgerClusterId(prefix)}/${type}`;
}

/** The shipped hub's cluster identifier ({@link ledgerClusterId} of the default prefix `platform`). */
export const LEDGER_CLUSTER_ID = ledgerClusterId("platform");

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

/** What the Lambdas need of the database. */
export interface LedgerDatabase {
    cluster: aws.rds.Cluster;
    instances: aws.rds.ClusterInstance[];
    /** ARN of the RDS-managed master secret. */
    masterSecretArn: pulumi.Output<string>;
    /** The login roles' password secrets. */
    ingest: { secret: aws.secretsmanager.Secret; version: aws.secretsmanager.SecretVersion };
    reporter: { secret: aws.secretsmanager.Secret; version: aws.secretsmanager.SecretVersion };
    /** The log groups of the cluster's exported logs ({@link LEDGER_LOG_EXPORTS}), created before it. */
    logGroups: aws.cloudwatch.LogGroup[];
}

/**
 * The ledger database: Aurora Serverless v2 PostgreSQL, TLS enforced (`rds.force_ssl`), encrypted with the ledger's
 * key, master password managed and rotated by RDS; the two login roles' passwords, each in its own secret.
 * @throws Error for an engine version without a major number ({@link parameterGroupFamily}); during the deployment
 *   (inside `masterSecretArn`), when the cluster reports no RDS-managed master secret
 */
export function ledgerDatabase(
    scope: LedgerScope,
    args: {
        engineVersion: string;
        minAcu: number;
        maxAcu: number;
        instances: number;
        backupRetentionDays: number;
        deletionProtection: boolean;
        availabilityZones: [string, string];
        rolePasswordRotation?: string;
    },
    key: aws.kms.Key,
    net: LedgerNetwork,
): LedgerDatabase {
    const { subnets, dbSg } = net;
    const clusterId = ledgerClusterId(scope.prefix);
    const subnetGroup = new aws.rds.SubnetGroup(
        `${scope.name}-db-subnets`,
        { subnetIds: subnets.map((s) => s.id), description: "usage ledger", tags: scope.tags },
        scope.parent,
    );
    const parameters = new aws.rds.ClusterParameterGroup(
        `${scope.name}-db-params`,
        {
            name: `${clusterId}-${parameterGroupFamily(args.engineVersion)}`,
            family: parameterGroupFamily(args.engineVersion),
            description: "usage ledger: TLS only",
            parameters: LEDGER_CLUSTER_PARAMETERS,
            tags: scope.tags,
            // Named per family: a new engine major gets a new group beside the old one, never a name clash.
        },
        scope.parent,
    );
    // The exported logs' groups, created here before the cluster, so RDS never creates them itself (without retention,
    // unencrypted): the ledger key encrypts them (its policy lets CloudWatch Logs use it for exactly these groups,
    // components/hub/UsageLedger.ts) and they expire like the Lambdas' logs.
    const logGroups = LEDGER_LOG_EXPORTS.map(
        (type) =>
            new aws.cloudwatch.LogGroup(
                `${scope.name}-db-${type}-logs`,
                {
                    name: ledgerLogGroupName(scope.prefix, type),
                    retentionInDays: LEDGER_LOG_RETENTION_DAYS,
                    kmsKeyId: key.arn,
                    tags: scope.tags,
                },
                scope.parent,
            ),
    );
    const cluster = new aws.rds.Cluster(
        `${scope.name}-db`,
        {
            clusterIdentifier: clusterId,
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
            // A major bump of the pin (16.x -> 17.x) is an in-place upgrade with the new family's parameter group
            // (named per family, created beside the old one), not a replacement the protected cluster would refuse.
            allowMajorVersionUpgrade: true,
            skipFinalSnapshot: false,
            finalSnapshotIdentifier: `${clusterId}-final`,
            enabledCloudwatchLogsExports: [...LEDGER_LOG_EXPORTS],
            tags: scope.tags,
        },
        { ...scope.keep, dependsOn: logGroups },
    );
    const instances = Array.from(
        { length: args.instances },
        (_, i) =>
            new aws.rds.ClusterInstance(
                `${scope.name}-db-${i}`,
                {
                    identifier: `${clusterId}-${i}`,
                    clusterIdentifier: cluster.id,
                    instanceClass: "db.serverless",
                    engine: "aurora-postgresql",
                    engineVersion: args.engineVersion,
                    availabilityZone: args.availabilityZones[i % 2],
                    publiclyAccessible: false,
                    // The engine version is pinned (platform:usage.engineVersion): an automatic minor upgrade would make the
                    // next `up` ask for a downgrade RDS refuses. Upgrades are a bump of the pin.
                    autoMinorVersionUpgrade: false,
                    tags: scope.tags,
                },
                scope.keep,
            ),
    );
    const masterSecretArn = cluster.masterUserSecrets.apply((s) => {
        const arn = s?.[0]?.secretArn;
        if (!arn) throw new Error(`UsageLedger: cluster ${ledgerClusterId(scope.prefix)} reports no RDS-managed master secret`);
        return arn;
    });

    // Login roles' passwords (created by the migrator), each in its own secret read only by its Lambda's role.
    const roleSecret = (role: "ingest" | "reporter", what: string) => {
        // A new rotation mark (platform:usage.rolePasswordRotation) replaces the password: new secret version, the
        // migration runs again (its triggers include the version) and sets it on the role.
        const pw = new random.RandomPassword(
            `${scope.name}-${role}-password`,
            {
                length: 40,
                special: false,
                ...(args.rolePasswordRotation ? { keepers: { rotation: args.rolePasswordRotation } } : {}),
            },
            scope.parent,
        );
        const sec = new aws.secretsmanager.Secret(
            `${scope.name}-${role}-password`,
            {
                name: `${scope.prefix}/usage-ledger/${role}`,
                description: `Usage ledger: password of ledger_${role} (${what})`,
                kmsKeyId: key.arn,
                recoveryWindowInDays: 7,
                tags: scope.tags,
            },
            scope.parent,
        );
        const version = new aws.secretsmanager.SecretVersion(
            `${scope.name}-${role}-password`,
            { secretId: sec.id, secretString: pulumi.secret(pw.result) },
            scope.parent,
        );
        return { secret: sec, version };
    };
    const ingest = roleSecret("ingest", "usage consumer");
    const reporter = roleSecret("reporter", "scheduled reconciliation");

    return { cluster, instances, masterSecretArn, ingest, reporter, logGroups };
}
