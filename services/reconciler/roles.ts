import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import type { Queryable } from "../ledger/ledger";
import { INGEST_ROLE, REPORTER_ROLE } from "./config";

/**
 * Database roles of the usage ledger (least privilege each):
 * - the master user (RDS-managed secret) is used only by the migrator (services/reconciler/migrator.ts);
 * - {@link INGEST_ROLE}: the usage consumer. SELECT/INSERT on the ledger tables (every ingest statement only
 *   appends: `ON CONFLICT DO NOTHING` or a NOT EXISTS guard, and `RETURNING`; services/ledger/ledger.ts
 *   `ingestSql`), SELECT on the rollup watermark, the quarantine id sequence; no UPDATE, no DELETE, no DDL, so a
 *   counted event or aggregate cannot be rewritten through it;
 * - {@link REPORTER_ROLE}: the scheduled reconciliation. SELECT on the ledger, INSERT on {@link RECONCILIATION_TABLE}
 *   only (its own run log), and EXECUTE on {@link REPORTER_FUNCTIONS}: the hourly rollup and compaction, the one
 *   sum-preserving write it may make, through SECURITY DEFINER functions (services/ledger/schema.sql) instead of
 *   privileges on the tables.
 */
export { INGEST_ROLE, REPORTER_ROLE } from "./config";

/** The ledger's tables (services/ledger/schema.sql). */
export const LEDGER_TABLES = ["usage_events", "usage_hourly", "usage_receipts", "usage_quarantine", "usage_spoke_quarantine"] as const;
/** Read by every role, written only by the rollup function: the watermark `usage_rollup`, the view `usage_hourly_totals`. */
export const LEDGER_READ_ONLY = ["usage_rollup", "usage_hourly_totals"] as const;
/** The SECURITY DEFINER functions the reporter role runs (services/ledger/ledger.ts rollupHourly, compactHourly). */
export const REPORTER_FUNCTIONS = ["usage_hourly_rollup(timestamptz, int)", "usage_hourly_compact(timestamptz, timestamptz)"] as const;
/** Sequences the ingest role advances (`usage_quarantine.id bigserial`). */
export const LEDGER_SEQUENCES = ["usage_quarantine_id_seq"] as const;
/**
 * Where the scheduled reconciliation records each run (services/ledger/status.ts `recordReconciliation`, read by
 * `npm run status`): the reporter role may INSERT here and nowhere else.
 */
export const RECONCILIATION_TABLE = "reconciliation_runs";
export const RECONCILIATION_SEQUENCE = "reconciliation_runs_id_seq";

/** PostgreSQL's SCRAM iteration count (postgres/postgres@REL_15_0:src/include/common/scram-common.h `SCRAM_DEFAULT_ITERATIONS`). */
export const SCRAM_ITERATIONS = 4096;

/**
 * Pure (given `salt`): the SCRAM-SHA-256 verifier PostgreSQL stores for `password`,
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64), computed as PostgreSQL does
 * (postgres/postgres@REL_15_0:src/common/scram-common.c `scram_SaltedPassword`, `scram_ClientKey`, `scram_ServerKey`;
 * RFC 5802 section 3). `ALTER ROLE ... PASSWORD '<verifier>'` stores it as given, so the plaintext password never
 * reaches the server (its statement log, `pg_stat_statements`, or a replica). SASLprep is the identity for the
 * passwords used here (printable ASCII from `@pulumi/random`); a password outside printable ASCII is refused.
 * @throws Error for a password with characters outside printable ASCII, or an empty one
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = SCRAM_ITERATIONS): string {
    if (!/^[\x20-\x7e]+$/.test(password))
        throw new Error("ledger role passwords must be non-empty printable ASCII (SASLprep is not applied)");
    const salted = pbkdf2Sync(password, salt, iterations, 32, "sha256");
    const clientKey = createHmac("sha256", salted).update("Client Key").digest();
    const storedKey = createHash("sha256").update(clientKey).digest();
    const serverKey = createHmac("sha256", salted).update("Server Key").digest();
    return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

/** Passwords of the two login roles (from their Secrets Manager secrets). */
export interface RolePasswords {
    ingest: string;
    reporter: string;
}

/**
 * The statements that create (or update) the two roles and their grants, idempotent, with each password as its
 * SCRAM-SHA-256 verifier ({@link scramVerifier}, a fresh salt per call) in a SQL literal escaped by `quote` (the
 * driver's `escapeLiteral`). Run after the schema, as the master user.
 * Revokes CREATE on schema public from PUBLIC (already the default from PostgreSQL 15) so neither role can add
 * objects.
 */
export function roleStatements(pw: RolePasswords, quote: (s: string) => string): string[] {
    const role = (name: string, password: string) => [
        `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${name}') THEN CREATE ROLE ${name} LOGIN; END IF; END $$`,
        // The SCRAM verifier, computed here: the plaintext never reaches the server.
        `ALTER ROLE ${name} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD ${quote(scramVerifier(password))}`,
    ];
    const tables = [...LEDGER_TABLES, RECONCILIATION_TABLE].join(", ");
    const readOnly = LEDGER_READ_ONLY.join(", ");
    const functions = `FUNCTION ${REPORTER_FUNCTIONS.join(", ")}`;
    return [
        ...role(INGEST_ROLE, pw.ingest),
        ...role(REPORTER_ROLE, pw.reporter),
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
        `GRANT USAGE ON SCHEMA public TO ${INGEST_ROLE}, ${REPORTER_ROLE}`,
        `REVOKE ALL ON ${tables}, ${readOnly} FROM ${INGEST_ROLE}, ${REPORTER_ROLE}`,
        `GRANT SELECT, INSERT ON ${tables} TO ${INGEST_ROLE}`,
        `GRANT SELECT ON ${readOnly} TO ${INGEST_ROLE}, ${REPORTER_ROLE}`,
        `REVOKE ALL ON ${functions} FROM PUBLIC, ${INGEST_ROLE}`,
        `GRANT EXECUTE ON ${functions} TO ${REPORTER_ROLE}`,
        `GRANT USAGE ON SEQUENCE ${LEDGER_SEQUENCES.join(", ")} TO ${INGEST_ROLE}`,
        `GRANT SELECT ON ${tables} TO ${REPORTER_ROLE}`,
        `GRANT INSERT ON ${RECONCILIATION_TABLE} TO ${REPORTER_ROLE}`,
        `GRANT USAGE ON SEQUENCE ${RECONCILIATION_SEQUENCE} TO ${REPORTER_ROLE}`,
    ];
}

/**
 * Applies {@link roleStatements} in one transaction.
 * @throws the driver's error (rolled back)
 */
export async function applyRoles(db: Queryable, pw: RolePasswords, quote: (s: string) => string): Promise<void> {
    await db.query("BEGIN");
    try {
        for (const sql of roleStatements(pw, quote)) await db.query(sql);
        await db.query("COMMIT");
    } catch (e) {
        await db.query("ROLLBACK").catch(() => undefined);
        throw e;
    }
}
