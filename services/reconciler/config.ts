import { z } from "zod";
import { NODE_RUNTIME_ENV, parseEnv } from "../shared/env";
import { CONSUMER_ENV } from "../usage-consumer/config";

/**
 * Contracts of the hub's ledger Lambdas (services/shared/env.ts): the migrator (services/reconciler/migrator.ts)
 * and the scheduled reconciliation (services/reconciler/handler.ts), both set by components/hub/UsageLedger.ts,
 * with the names that component shares with them. Run-time dependency-free (zod only): the component imports it.
 * A new variable is one entry in its schema.
 */

/** CloudWatch namespace and metric the reconciliation publishes (the hub's gap alarm reads it). */
export const METRIC_NAMESPACE = "Platform/Usage";
export const GAP_METRIC = "ReconciliationMissingEvents";
/** Dimension value of the all-spokes datum (the alarm's series). */
export const ALL_SPOKES = "all";
/** Login roles of the ledger (services/reconciler/roles.ts): the usage consumer's and the reconciliation's. */
export const INGEST_ROLE = "ledger_ingest";
export const REPORTER_ROLE = "ledger_reporter";

/** The ledger database both Lambdas reach (libpq variable names, as `pg` reads them). */
const LEDGER_DB = {
    PGHOST: z.string().min(1),
    PGPORT: z.coerce.number().int().min(1).max(65535).default(5432),
    PGDATABASE: z.string().min(1),
    /** The RDS CAs the Lambda runtime ships (`/var/runtime/ca-cert.pem`): TLS to Aurora is verified against them. */
    ...NODE_RUNTIME_ENV,
};

/** JSON array of spoke names. */
const spokeList = z.string().transform((text, ctx) => {
    try {
        const r = z.array(z.string().regex(/^[a-z0-9][a-z0-9-]*$/)).safeParse(JSON.parse(text));
        if (r.success) return r.data;
        ctx.addIssue({ code: "custom", message: `must be a JSON array of spoke names: ${r.error.issues[0]?.message}` });
    } catch (e) {
        ctx.addIssue({ code: "custom", message: `invalid JSON: ${(e as Error).message}` });
    }
    return z.NEVER;
});

/** Migrator: connects as the master user; applies the schema and sets the two roles' passwords. */
export const MIGRATOR_ENV = z.object({
    ...LEDGER_DB,
    /** RDS-managed master secret (JSON `{username, password}`). */
    MASTER_SECRET_ARN: z.string().min(1),
    /** Plain-password secrets of {@link INGEST_ROLE} and {@link REPORTER_ROLE}. */
    INGEST_SECRET_ARN: z.string().min(1),
    REPORTER_SECRET_ARN: z.string().min(1),
});

/** Scheduled reconciliation: runs as {@link REPORTER_ROLE}. */
export const RECONCILER_ENV = z.object({
    ...LEDGER_DB,
    PGUSER: z.string().min(1),
    /** Secret holding the role's password (SecretString). */
    DB_PASSWORD_SECRET_ARN: z.string().min(1),
    /** Every spoke the hub serves (JSON array): a spoke with no events in the window is a gap, not an absence. */
    SPOKES: spokeList,
    /** Hours before now the run reconciles (full hours). */
    LOOKBACK_HOURS: z.coerce.number().int().positive().default(48),
});

/**
 * The operator's ledger Lambda (services/reconciler/ops.ts): `npm run status` reads as {@link REPORTER_ROLE},
 * `npm run replay-usage -- --apply` ingests as {@link INGEST_ROLE}; it holds both passwords and the consumer's
 * stream -> spoke map (a replayed record is attributed exactly as the consumer would).
 */
export const LEDGER_OPS_ENV = z.object({
    ...LEDGER_DB,
    INGEST_SECRET_ARN: z.string().min(1),
    REPORTER_SECRET_ARN: z.string().min(1),
    /** JSON object, stream ARN -> the only spoke allowed to write it (as the consumer's). */
    STREAM_SPOKES: CONSUMER_ENV.shape.STREAM_SPOKES,
    /** The failure bucket: `replay` reads the named failed batch from it (under `failed/`, never from the caller). */
    FAILED_BATCH_BUCKET: CONSUMER_ENV.shape.FAILED_BATCH_BUCKET,
    /** The hub's account, which owns the failure bucket: sent as `ExpectedBucketOwner` with the read. */
    FAILED_BATCH_BUCKET_OWNER: CONSUMER_ENV.shape.FAILED_BATCH_BUCKET_OWNER,
});

/** @throws Error naming each missing or invalid variable. */
export function loadLedgerOpsEnv(env: NodeJS.ProcessEnv): z.output<typeof LEDGER_OPS_ENV> {
    return parseEnv("ledger operations", LEDGER_OPS_ENV, env);
}

/** @throws Error naming each missing or invalid variable. */
export function loadMigratorEnv(env: NodeJS.ProcessEnv): z.output<typeof MIGRATOR_ENV> {
    return parseEnv("ledger migrator", MIGRATOR_ENV, env);
}

/** @throws Error naming each missing or invalid variable. */
export function loadReconcilerEnv(env: NodeJS.ProcessEnv): z.output<typeof RECONCILER_ENV> {
    return parseEnv("reconciliation", RECONCILER_ENV, env);
}
