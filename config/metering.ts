import { z } from "zod";

/**
 * Usage metering settings. Every field has a default, so stack files need no
 * `platform:usage` / `platform:metering` key unless they change one. Defaults live here and only here.
 */

/** `platform:usage` of the hub stack: the usage ledger (Kinesis, consumer Lambda, Aurora Serverless v2). */
export const UsageLedgerConfigSchema = z
    .object({
        /** VPC block for the ledger's private subnets (the database and the consumer Lambda); two /24s are carved from it. */
        vpcCidr: z
            .string()
            .regex(/^\d+\.\d+\.\d+\.\d+\/(1[6-9]|2[0-3])$/, "an IPv4 CIDR from /16 to /23")
            .default("10.250.0.0/22"),
        /** Availability zones of the two subnets; default `<region>a`, `<region>b`. Aurora needs two. */
        availabilityZones: z.array(z.string().min(1)).length(2).optional(),
        /**
         * Aurora PostgreSQL engine version. 16.6 supports Serverless v2 (AWS Aurora PostgreSQL release notes);
         * change on purpose (major upgrades are not in place).
         */
        engineVersion: z
            .string()
            .regex(/^\d+\.\d+$/)
            .default("16.6"),
        /** Serverless v2 capacity range in ACUs (1 ACU ≈ 2 GiB). Min 0.5 keeps one warm writer; ingestion is batched. */
        minAcu: z.number().min(0.5).max(256).default(0.5),
        maxAcu: z.number().min(1).max(256).default(8),
        /** Database instances: 2 = writer + reader in the other AZ (failover in ~30 s). */
        instances: z.number().int().min(1).max(4).default(2),
        /** Automated backup retention, days (point-in-time recovery window). */
        backupRetentionDays: z.number().int().min(1).max(35).default(14),
        /**
         * Kinesis retention, hours (72-8760). 168 h (7 days): the consumer can be down a week without losing
         * events; the failure destination fires a day before records would expire, so at least 72 h leaves two days of
         * retries and a day to replay from the stream after the failure queue pages (a failing batch's records are also
         * kept in the failure bucket: `npm run replay-usage`).
         */
        streamRetentionHours: z.number().int().min(72).max(8760).default(168),
        /** Records per consumer invocation (Kinesis event source mapping `batchSize`, 1-10000). */
        consumerBatchSize: z.number().int().min(1).max(10_000).default(500),
        /**
         * Rotation mark of the ledger login roles' passwords (`ledger_ingest`, `ledger_reporter`), e.g. the date of the
         * last rotation (`2026-12-01`). Changing it and running `pulumi up` generates new passwords, writes them to their
         * secrets and re-runs the migrator, which sets them on the roles; the Lambdas read the new secret on their next
         * connection. Unset: the passwords generated at the first `up` are kept. The master password is rotated by RDS.
         */
        rolePasswordRotation: z
            .string()
            .regex(/^[A-Za-z0-9._:-]{1,64}$/, "must be a short mark such as a date (2026-12-01)")
            .optional(),
        /** Refuse deleting the database by accident (set false only to tear a test hub down). */
        deletionProtection: z.boolean().default(true),
    })
    .strict()
    .refine((c) => c.minAcu <= c.maxAcu, { message: "minAcu must be ≤ maxAcu", path: ["minAcu"] });

/** `platform:usage` of the hub as parsed ({@link UsageLedgerConfigSchema}, defaults filled in). */
export type UsageLedgerConfig = z.infer<typeof UsageLedgerConfigSchema>;

/** Default availability zones of the ledger subnets for `region`. */
export function ledgerAvailabilityZones(cfg: UsageLedgerConfig, region: string): [string, string] {
    const azs = cfg.availabilityZones ?? [`${region}a`, `${region}b`];
    return [azs[0], azs[1]];
}

/** `platform:metering` of a spoke stack: the metering service and its access-log collector. */
export const MeteringConfigSchema = z
    .object({
        /** Metering instances (StatefulSet replicas, one spool volume each). ≥ 2 so a restart never stops intake. */
        replicas: z.number().int().min(1).max(16).default(2),
        /**
         * Spool volume per instance, GiB. Sizing: bytes/event (~500) x events/s x longest hub outage to ride out.
         * 20 GiB holds ~36M events: 10 hours at 1,000 requests/s.
         */
        spoolVolumeGiB: z.number().int().min(1).max(4096).default(20),
        /** StorageClass of the spool and collector queue volumes; unset = the cluster default. */
        storageClassName: z.string().min(1).optional(),
        /** Collector replicas (StatefulSet, one persistent queue volume each). */
        collectorReplicas: z.number().int().min(1).max(16).default(2),
        /** Collector persistent sending queue volume, GiB (buffers access logs while metering is unavailable). */
        collectorQueueGiB: z.number().int().min(1).max(1024).default(5),
    })
    .strict();

/** `platform:metering` of a spoke as parsed ({@link MeteringConfigSchema}, defaults filled in). */
export type MeteringConfig = z.infer<typeof MeteringConfigSchema>;
