import * as fs from "fs";
import * as path from "path";
import type { QuarantineMarker, UsageEvent } from "../shared/usage";

/** The part of a `pg` Client / PoolClient the ledger uses (so tests and the Lambda pass either). */
export interface Queryable {
    query<R extends Record<string, any> = any>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Set by esbuild `define` when the consumer Lambda is bundled (components/hub/UsageLedger.ts). */
declare const __LEDGER_SCHEMA_SQL__: string | undefined;

/** Path of the schema DDL file. */
export const SCHEMA_PATH = path.join(__dirname, "schema.sql");

/** Schema DDL (services/ledger/schema.sql); inlined into the Lambda bundle at build time. */
export function schemaSql(): string {
    return typeof __LEDGER_SCHEMA_SQL__ === "string" ? __LEDGER_SCHEMA_SQL__ : fs.readFileSync(SCHEMA_PATH, "utf8");
}

/** Advisory lock key held while the schema is applied, so concurrent cold starts do not race on DDL. */
export const MIGRATION_LOCK_KEY = 0x75736167; // "usag"

/**
 * Applies the ledger schema. Idempotent (`CREATE ... IF NOT EXISTS`); serialised across concurrent callers
 * with a transaction-scoped advisory lock.
 * @param ddl the schema text; defaults to {@link schemaSql}. The Lambda passes the bundled copy.
 * @throws the driver's error when the server rejects the DDL (the transaction is rolled back).
 */
export async function migrate(db: Queryable, ddl: string = schemaSql()): Promise<void> {
    await db.query("BEGIN");
    try {
        await db.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
        await db.query(ddl);
        await db.query("COMMIT");
    } catch (e) {
        await db.query("ROLLBACK").catch(() => undefined);
        throw e;
    }
}

/** Outcome of one {@link ingestBatch}. */
export interface IngestResult {
    /** Events in the batch. */
    received: number;
    /** Events counted for the first time (new `(spoke, requestId)`); the rest were already in the ledger. */
    inserted: number;
    /** New `(spoke, source, seq)` deliveries recorded (counted events + receipts of duplicates). */
    receipts: number;
}

const HOUR = (col: string) => `date_trunc('hour', (${col}) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;

/**
 * One statement: events for every new (spoke, requestId), a receipt for every further delivery of a request
 * already counted under another (spoke, source, seq), and the hourly aggregates from exactly the rows inserted.
 * Data-modifying CTEs run in one snapshot and commit (or fail) together, so aggregates can never disagree with
 * the events table. A delivery whose (spoke, source, seq) is already the counted one writes nothing.
 */
export const INGEST_SQL = `
WITH raw AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
        "requestId" text, spoke text, tenant text, team text, "keyId" text, model text, endpoint text,
        "inputTokens" bigint, "outputTokens" bigint, "cachedInputTokens" bigint, status smallint,
        stream boolean, truncated boolean, "usageSource" text, "startedAt" timestamptz, "endedAt" timestamptz,
        seq bigint, source text)
),
ins AS (
    INSERT INTO usage_events (spoke, request_id, tenant, team, key_id, model, endpoint, input_tokens, output_tokens,
        cached_input_tokens, status, stream, truncated, usage_source, started_at, ended_at, hour, source, seq)
    SELECT DISTINCT ON (spoke, "requestId") spoke, "requestId", tenant, team, "keyId", model, endpoint, "inputTokens",
        "outputTokens", "cachedInputTokens", status, stream, truncated, "usageSource", "startedAt", "endedAt",
        ${HOUR(`"endedAt"`)}, source, seq
    FROM raw ORDER BY spoke, "requestId", source, seq
    ON CONFLICT (spoke, request_id) DO NOTHING
    RETURNING spoke, source, seq, tenant, team, key_id, model, hour, input_tokens, output_tokens, cached_input_tokens, truncated, usage_source
),
dup AS (
    INSERT INTO usage_receipts (spoke, source, seq, request_id, hour)
    SELECT DISTINCT ON (r.spoke, r.source, r.seq) r.spoke, r.source, r.seq, r."requestId", ${HOUR(`r."endedAt"`)}
    FROM raw r
    WHERE NOT EXISTS (SELECT 1 FROM ins i WHERE i.spoke = r.spoke AND i.source = r.source AND i.seq = r.seq)
      AND NOT EXISTS (SELECT 1 FROM usage_events e WHERE e.spoke = r.spoke AND e.request_id = r."requestId" AND e.source = r.source AND e.seq = r.seq)
    ORDER BY r.spoke, r.source, r.seq
    ON CONFLICT (spoke, source, seq) DO NOTHING
    RETURNING 1
),
agg AS (
    INSERT INTO usage_hourly AS h (tenant, team, key_id, model, hour, requests, input_tokens, output_tokens,
        cached_input_tokens, estimated_requests, truncated_requests)
    SELECT tenant, team, key_id, model, hour, count(*), sum(input_tokens), sum(output_tokens), sum(cached_input_tokens),
        count(*) FILTER (WHERE usage_source = 'estimated'), count(*) FILTER (WHERE truncated)
    FROM ins GROUP BY tenant, team, key_id, model, hour ORDER BY tenant, team, key_id, model, hour
    ON CONFLICT (tenant, team, key_id, model, hour) DO UPDATE SET
        requests = h.requests + EXCLUDED.requests,
        input_tokens = h.input_tokens + EXCLUDED.input_tokens,
        output_tokens = h.output_tokens + EXCLUDED.output_tokens,
        cached_input_tokens = h.cached_input_tokens + EXCLUDED.cached_input_tokens,
        estimated_requests = h.estimated_requests + EXCLUDED.estimated_requests,
        truncated_requests = h.truncated_requests + EXCLUDED.truncated_requests
    RETURNING 1
)
SELECT (SELECT count(*) FROM raw)::int AS received, (SELECT count(*) FROM ins)::int AS inserted,
       ((SELECT count(*) FROM ins) + (SELECT count(*) FROM dup))::int AS receipts, (SELECT count(*) FROM agg)::int AS aggregates`;

/** SQLSTATEs worth retrying the whole statement for: deadlock_detected, serialization_failure. */
const RETRYABLE = new Set(["40P01", "40001"]);

/**
 * Records a batch of already-validated usage events: each `(spoke, requestId)` counts once, ever, and the
 * per tenant/team/key/model/hour aggregates move by exactly the newly counted rows, atomically. Safe to call
 * again with the same or an overlapping batch (at-least-once delivery).
 *
 * @param events validated with `UsageEventSchema` by the caller
 * @param attempts tries on deadlock / serialization failure (concurrent consumers updating the same aggregate)
 * @throws the driver's error for anything else (connection lost, constraint violation); nothing is written then
 */
export async function ingestBatch(db: Queryable, events: readonly UsageEvent[], attempts = 5): Promise<IngestResult> {
    if (events.length === 0) return { received: 0, inserted: 0, receipts: 0 };
    const payload = JSON.stringify(events);
    for (let i = 1; ; i++) {
        try {
            const r = await db.query<{ received: number; inserted: number; receipts: number }>(INGEST_SQL, [payload]);
            const row = r.rows[0];
            return { received: row.received, inserted: row.inserted, receipts: row.receipts };
        } catch (e) {
            const code = (e as { code?: string }).code;
            if (i >= attempts || !code || !RETRYABLE.has(code)) throw e;
            await new Promise((res) => setTimeout(res, 10 * i));
        }
    }
}

/** A record the consumer could not turn into a usage event. */
export interface QuarantineItem {
    /** Unique origin (Kinesis eventID `shardId:sequenceNumber`): the same bad record is stored once. */
    origin: string;
    reason: string;
    payload: string;
}

/**
 * Stores records that failed validation, with their reason, so nothing is silently dropped.
 * @returns how many were new (a redelivered bad record is not stored twice)
 */
export async function quarantine(db: Queryable, items: readonly QuarantineItem[]): Promise<number> {
    if (items.length === 0) return 0;
    const r = await db.query(
        `INSERT INTO usage_quarantine (origin, reason, payload)
         SELECT origin, reason, payload FROM jsonb_to_recordset($1::jsonb) AS x(origin text, reason text, payload text)
         ON CONFLICT (origin) DO NOTHING`,
        [JSON.stringify(items)]);
    return r.rowCount ?? 0;
}

/**
 * Records the markers of events a spoke quarantined because Kinesis would not take them: one row per
 * `(spoke, source, seq)` in `usage_spoke_quarantine` (the reconciliation counts its seq as received and shows it
 * as quarantined, never as missing). A redelivered marker changes nothing.
 * @param markers validated with `QuarantineMarkerSchema` by the caller
 * @returns how many markers were new
 * @throws the driver's error; nothing is written then
 */
export async function recordSpokeQuarantine(db: Queryable, markers: readonly QuarantineMarker[]): Promise<number> {
    if (markers.length === 0) return 0;
    const r = await db.query<{ n: number }>(`
WITH raw AS (
    SELECT DISTINCT ON (spoke, source, seq) * FROM jsonb_to_recordset($1::jsonb) AS x(
        "requestId" text, spoke text, source text, seq bigint, "endedAt" timestamptz, reason text, bytes bigint)
    ORDER BY spoke, source, seq
),
q AS (
    INSERT INTO usage_spoke_quarantine (spoke, source, seq, request_id, reason, bytes, hour)
    SELECT spoke, source, seq, "requestId", reason, bytes, ${HOUR(`"endedAt"`)} FROM raw
    ON CONFLICT (spoke, source, seq) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM q)::int AS n`, [JSON.stringify(markers)]);
    return r.rows[0].n;
}

/** One row of `usage_hourly`, numbers as JS numbers (token sums stay far below 2^53). */
export interface HourlyAggregate {
    tenant: string;
    team: string;
    keyId: string;
    model: string;
    /** ISO-8601 UTC hour start. */
    hour: string;
    requests: number;
    inputTokens: number;
    outputTokens: number;
    cachedInputTokens: number;
    estimatedRequests: number;
    truncatedRequests: number;
}

/** All hourly aggregates, ordered by {@link sortAggregates}. */
export async function hourlyAggregates(db: Queryable): Promise<HourlyAggregate[]> {
    const r = await db.query(
        `SELECT tenant, team, key_id, model, hour, requests, input_tokens, output_tokens, cached_input_tokens,
                estimated_requests, truncated_requests
         FROM usage_hourly`);
    return sortAggregates(r.rows.map((x) => ({
        tenant: x.tenant, team: x.team, keyId: x.key_id, model: x.model, hour: new Date(x.hour).toISOString(),
        requests: Number(x.requests), inputTokens: Number(x.input_tokens), outputTokens: Number(x.output_tokens),
        cachedInputTokens: Number(x.cached_input_tokens), estimatedRequests: Number(x.estimated_requests),
        truncatedRequests: Number(x.truncated_requests),
    })));
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Sorts by tenant, team, key, model, hour (code-point order, independent of the server's collation). */
export function sortAggregates(rows: HourlyAggregate[]): HourlyAggregate[] {
    return rows.sort((a, b) => cmp(a.tenant, b.tenant) || cmp(a.team, b.team) || cmp(a.keyId, b.keyId) || cmp(a.model, b.model) || cmp(a.hour, b.hour));
}

/** UTC hour start (ISO-8601) of a timestamp: the ledger's billing hour. */
export function hourOf(iso: string): string {
    const d = new Date(iso);
    d.setUTCMinutes(0, 0, 0);
    return d.toISOString();
}

/**
 * Pure: the aggregates the ledger must hold for a set of events delivered any number of times (first
 * occurrence of each `(spoke, requestId)` wins, as in {@link ingestBatch}). Used by tests as the oracle.
 */
export function expectedAggregates(events: Iterable<UsageEvent>): HourlyAggregate[] {
    const seen = new Set<string>();
    const byKey = new Map<string, HourlyAggregate>();
    for (const e of events) {
        const id = `${e.spoke}\u0000${e.requestId}`;
        if (seen.has(id)) continue;
        seen.add(id);
        const hour = hourOf(e.endedAt);
        const k = [e.tenant, e.team, e.keyId, e.model, hour].join("\u0000");
        let a = byKey.get(k);
        if (!a) {
            a = { tenant: e.tenant, team: e.team, keyId: e.keyId, model: e.model, hour, requests: 0, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, estimatedRequests: 0, truncatedRequests: 0 };
            byKey.set(k, a);
        }
        a.requests++;
        a.inputTokens += e.inputTokens;
        a.outputTokens += e.outputTokens;
        a.cachedInputTokens += e.cachedInputTokens;
        if (e.usageSource === "estimated") a.estimatedRequests++;
        if (e.truncated) a.truncatedRequests++;
    }
    return sortAggregates([...byKey.values()]);
}
