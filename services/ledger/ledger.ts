import * as fs from "node:fs";
import * as path from "node:path";
import type { QuarantineMarker, UsageEvent } from "../shared/usage";

/** The part of a `pg` Client / PoolClient the ledger uses (so tests and the Lambda pass either). */
export interface Queryable {
    // biome-ignore lint/suspicious/noExplicitAny: the row type of pg's own QueryResultRow
    query<R extends Record<string, any> = any>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
    /** With `name`: a prepared statement, parsed and planned once per connection (pg `QueryConfig`). */
    // biome-ignore lint/suspicious/noExplicitAny: the row type of pg's own QueryResultRow
    query<R extends Record<string, any> = any>(config: {
        name?: string;
        text: string;
        values?: unknown[];
    }): Promise<{ rows: R[]; rowCount: number | null }>;
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

/** How the ingest statement counts events ({@link ingestSql}). */
export type IngestMode = "optimistic" | "on-conflict";

/**
 * The ingest statement, one per batch: events for every new (spoke, requestId), a receipt for every further
 * delivery of a request already counted under another (spoke, source, seq), and, for counted events whose hour is
 * already rolled up (late events), one `usage_hourly` delta per (tenant, team, key, model, hour) group. Events of
 * later hours need nothing more: `usage_hourly_totals` aggregates them at read time (schema.sql says why, and why
 * the watermark check cannot race a rollup). Data-modifying CTEs run in one snapshot and commit (or fail) together,
 * so aggregates can never disagree with the events table. A delivery whose (spoke, source, seq) is already the
 * counted one writes nothing.
 *
 * Parameters: `$1` {@link ingestPayload} (the batch as JSON in {@link ingestOrder}, each delivery after the first
 * of its request marked `"repeat": true`); `$2` its number of deliveries. `json_to_recordset`, not `jsonb`: the
 * text is read once, with no jsonb tree built first.
 *
 * Counting, by `mode` (the primary key decides what is counted in both):
 * - `"optimistic"`: a plain INSERT of the first delivery of each request. Right for a batch none of whose requests
 *   is counted yet, the steady state of a consumer that keeps up. If one is (a redelivery, an overlapping batch, a
 *   concurrent consumer), the primary key refuses it: the statement fails with unique_violation on
 *   `usage_events_pkey` ({@link isIngestRace}) and writes nothing, and the batch is run again `"on-conflict"`.
 *   It saves what ON CONFLICT costs on every row (a pre-check of the index, a speculative-insertion lock, a
 *   confirmation WAL record): about a fifth of the ingest (npm run bench -- ledger). A guard with NOT EXISTS
 *   instead was measured: as a join, its plan cached while the table was empty or just truncated probes by
 *   sequential scan (quadratic until the next ANALYZE); as a per-row subplan it costs what ON CONFLICT does;
 * - `"on-conflict"`: `ON CONFLICT (spoke, request_id) DO NOTHING`, which skips requests already counted and waits
 *   for a concurrent insert of the same request. Always succeeds.
 * Rows go in array order (a function scan, no sort on the server), so concurrent consumers insert overlapping
 * batches in the same key order and cannot deadlock on usage_events.
 *
 * Receipts: a delivery not inserted here is either the counted one (a redelivery: nothing to write) or another
 * delivery of a counted request (a receipt). `usage_uncounted_deliveries` (schema.sql) tells them apart with a
 * fresh snapshot, which sees what a concurrent consumer committed while this statement waited on it. A batch
 * counted in full (the common case) skips all of that: `$2` equals the rows inserted, a one-time filter.
 */
export function ingestSql(mode: IngestMode): string {
    const counting = mode === "optimistic" ? "WHERE x.repeat IS NULL" : "ON CONFLICT (spoke, request_id) DO NOTHING";
    return `
WITH ins AS (
    INSERT INTO usage_events (spoke, request_id, tenant, team, key_id, model, endpoint, input_tokens, output_tokens,
        cached_input_tokens, status, stream, truncated, usage_source, started_at, ended_at, hour, source, seq)
    SELECT spoke, "requestId", tenant, team, "keyId", model, endpoint, "inputTokens", "outputTokens",
        "cachedInputTokens", status, stream, truncated, "usageSource", "startedAt", "endedAt", ${HOUR(`"endedAt"`)},
        source, seq
    FROM json_to_recordset($1::json) AS x(
        "requestId" text, spoke text, tenant text, team text, "keyId" text, model text, endpoint text,
        "inputTokens" bigint, "outputTokens" bigint, "cachedInputTokens" bigint, status smallint,
        stream boolean, truncated boolean, "usageSource" text, "startedAt" timestamptz, "endedAt" timestamptz,
        seq bigint, source text, repeat boolean)
    ${counting}
    RETURNING spoke, source, seq, tenant, team, key_id, model, hour, input_tokens, output_tokens, cached_input_tokens, truncated, usage_source
),
counted AS (
    SELECT count(*)::int AS n, min(hour) AS first, max(hour) AS last FROM ins
),
rest AS (
    SELECT r.spoke, r."requestId", r.source, r.seq, ${HOUR(`r."endedAt"`)} AS hour
    FROM json_to_recordset($1::json) AS r("requestId" text, spoke text, "endedAt" timestamptz, seq bigint, source text)
    WHERE NOT EXISTS (SELECT 1 FROM ins i WHERE i.spoke = r.spoke AND i.source = r.source AND i.seq = r.seq)
),
dup AS (
    INSERT INTO usage_receipts (spoke, source, seq, request_id, hour)
    SELECT DISTINCT ON (u.spoke, u.source, u.seq) u.spoke, u.source, u.seq, u.request_id, u.hour
    FROM (SELECT array_agg(spoke) AS spokes, array_agg("requestId") AS ids, array_agg(source) AS sources,
                 array_agg(seq) AS seqs, array_agg(hour) AS hours FROM rest) a,
         usage_uncounted_deliveries(a.spokes, a.ids, a.sources, a.seqs, a.hours) u
    WHERE (SELECT n FROM counted) < $2::int
    ORDER BY u.spoke, u.source, u.seq
    ON CONFLICT (spoke, source, seq) DO NOTHING
    RETURNING 1
),
agg AS (
    INSERT INTO usage_hourly (tenant, team, key_id, model, hour, requests, input_tokens, output_tokens,
        cached_input_tokens, estimated_requests, truncated_requests)
    SELECT tenant, team, key_id, model, hour, count(*), sum(input_tokens), sum(output_tokens), sum(cached_input_tokens),
        count(*) FILTER (WHERE usage_source = 'estimated'), count(*) FILTER (WHERE truncated)
    FROM ins
    WHERE hour < (SELECT usage_rollup_watermark(first, last,
                      CASE WHEN last - first > interval '48 hours' THEN (SELECT array_agg(DISTINCT hour) FROM ins) END)
                  FROM counted WHERE n > 0)
    GROUP BY tenant, team, key_id, model, hour
)
SELECT (SELECT n FROM counted) AS inserted, (SELECT count(*) FROM dup)::int AS receipts`;
}

/** {@link ingestSql} per mode, and the prepared-statement names they run under (parsed and planned once per connection). */
export const INGEST_SQL: Readonly<Record<IngestMode, string>> = {
    optimistic: ingestSql("optimistic"),
    "on-conflict": ingestSql("on-conflict"),
};
export const INGEST_STATEMENTS: Readonly<Record<IngestMode, string>> = {
    optimistic: "ledger_ingest",
    "on-conflict": "ledger_ingest_on_conflict",
};

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Pure: the batch in the order the ingest statement inserts it: by spoke, requestId, source, seq (strings in
 * code-unit order, independent of the server's collation; seq numerically). Of several deliveries of one request
 * in a batch, the one with the lowest (source, seq) is counted; the rest become receipts. Sorting here instead of
 * in the statement keeps a sort of ~500 wide rows off the server for every batch. A new array; `events` is not
 * changed.
 */
export function ingestOrder(events: readonly UsageEvent[]): UsageEvent[] {
    return [...events].sort((a, b) => cmp(a.spoke, b.spoke) || cmp(a.requestId, b.requestId) || cmp(a.source, b.source) || a.seq - b.seq);
}

/** Pure: `$1` of the ingest statement: {@link ingestOrder}, each delivery after the first of its request marked `"repeat": true`. */
export function ingestPayload(events: readonly UsageEvent[]): string {
    const rows: Array<UsageEvent & { repeat?: true }> = ingestOrder(events);
    for (let i = 1; i < rows.length; i++) {
        if (rows[i].requestId === rows[i - 1].requestId && rows[i].spoke === rows[i - 1].spoke) rows[i] = { ...rows[i], repeat: true };
    }
    return JSON.stringify(rows);
}

/** SQLSTATEs worth retrying the whole statement for: deadlock_detected, serialization_failure. */
const RETRYABLE = new Set(["40P01", "40001"]);

/**
 * True for the error of an `"optimistic"` ingest that met a request already counted (unique_violation on
 * `usage_events_pkey`): nothing was written; run the batch again `"on-conflict"`.
 */
export function isIngestRace(e: unknown): boolean {
    const x = e as { code?: string; constraint?: string } | null | undefined;
    return x?.code === "23505" && x.constraint === "usage_events_pkey";
}

/**
 * The mode each connection starts its next batch with: the one that suited its last batch. Redeliveries come in
 * runs (a retried batch, a replay from the failure destination), so after a fallback the connection stays
 * `"on-conflict"` until a batch turns out to hold no request already counted. One failed statement per run of
 * redeliveries, not per batch.
 */
const nextMode = new WeakMap<Queryable, IngestMode>();

/** Options of {@link ingestBatch}. */
export interface IngestOptions {
    /**
     * Statement executions before giving up (default 5): a deadlock or serialization failure is retried, and an
     * `"optimistic"` statement refused by a request already counted is run again `"on-conflict"`. Pass 1 inside a
     * transaction of your own: the error has aborted it, so run the whole transaction again (the next call on the
     * same connection starts `"on-conflict"`; services/usage-consumer/handler.ts processBatch).
     */
    attempts?: number;
    /** Mode of the first statement; default: what suited this connection's last batch (`"optimistic"` at first). */
    mode?: IngestMode;
}

/**
 * Records a batch of already-validated usage events: each `(spoke, requestId)` counts once, ever, and the
 * per tenant/team/key/model/hour aggregates move by exactly the newly counted rows, atomically (one prepared
 * statement, {@link ingestSql}; one round trip). Safe to call again with the same or an overlapping batch
 * (at-least-once delivery), and concurrently with other consumers.
 *
 * @param events validated with `UsageEventSchema` by the caller; any order (sorted here, {@link ingestOrder})
 * @throws the driver's error when the tries are used up ({@link isIngestRace} included) or for anything else
 *   (connection lost, constraint violation); a failed statement writes nothing
 */
export async function ingestBatch(db: Queryable, events: readonly UsageEvent[], opts: IngestOptions = {}): Promise<IngestResult> {
    if (events.length === 0) return { received: 0, inserted: 0, receipts: 0 };
    const attempts = opts.attempts ?? 5;
    let mode = opts.mode ?? nextMode.get(db) ?? "optimistic";
    const values = [ingestPayload(events), events.length];
    for (let i = 1; ; i++) {
        try {
            const r = await db.query<{ inserted: number; receipts: number }>({
                name: INGEST_STATEMENTS[mode],
                text: INGEST_SQL[mode],
                values,
            });
            const row = r.rows[0];
            // Back to optimistic once a batch needed no conflict handling (every request in it was new).
            nextMode.set(
                db,
                mode === "on-conflict" && row.inserted < new Set(events.map((e) => `${e.spoke}\u0000${e.requestId}`)).size
                    ? "on-conflict"
                    : "optimistic",
            );
            return { received: events.length, inserted: row.inserted, receipts: row.inserted + row.receipts };
        } catch (e) {
            const race = mode === "optimistic" && isIngestRace(e);
            if (race) nextMode.set(db, "on-conflict");
            const code = (e as { code?: string }).code;
            if (i >= attempts || !(race || (code && RETRYABLE.has(code)))) throw e;
            if (race) mode = "on-conflict";
            else await new Promise((res) => setTimeout(res, 10 * i));
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
        [JSON.stringify(items)],
    );
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
    const r = await db.query<{ n: number }>(
        `
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
SELECT (SELECT count(*) FROM q)::int AS n`,
        [JSON.stringify(markers)],
    );
    return r.rows[0].n;
}

/** One hourly aggregate (a row of `usage_hourly_totals`), numbers as JS numbers (token sums stay far below 2^53). */
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

/**
 * Hourly aggregates, one per (tenant, team, key, model, hour), ordered by {@link sortAggregates}: view
 * `usage_hourly_totals` (rolled-up hours from `usage_hourly`, later hours aggregated from `usage_events`), exact
 * whether or not an hour has been rolled up.
 * @param opts.from hours from (inclusive, ISO-8601), opts.to hours before (exclusive); all when unset
 * @throws the driver's error when the query fails
 */
export async function hourlyAggregates(db: Queryable, opts: { from?: string; to?: string } = {}): Promise<HourlyAggregate[]> {
    const r = await db.query(
        `SELECT tenant, team, key_id, model, hour, requests, input_tokens, output_tokens, cached_input_tokens,
                estimated_requests, truncated_requests
         FROM usage_hourly_totals
         WHERE ($1::timestamptz IS NULL OR hour >= $1) AND ($2::timestamptz IS NULL OR hour < $2)`,
        [opts.from ?? null, opts.to ?? null],
    );
    return sortAggregates(
        r.rows.map((x) => ({
            tenant: x.tenant,
            team: x.team,
            keyId: x.key_id,
            model: x.model,
            hour: new Date(x.hour).toISOString(),
            requests: Number(x.requests),
            inputTokens: Number(x.input_tokens),
            outputTokens: Number(x.output_tokens),
            cachedInputTokens: Number(x.cached_input_tokens),
            estimatedRequests: Number(x.estimated_requests),
            truncatedRequests: Number(x.truncated_requests),
        })),
    );
}

/** Outcome of one {@link rollupHourly}. */
export interface RollupResult {
    /** Watermark before and after (ISO-8601 UTC hours): hours [from, to) were rolled up; equal when none were. */
    from: string;
    to: string;
    /** Rows written to `usage_hourly` (one per group and hour). */
    groups: number;
}

/**
 * Rolls the closed hours before `until` into `usage_hourly` (SQL function `usage_hourly_rollup`, schema.sql): moves
 * the watermark `usage_rollup.rolled_until` forward, never past the current hour, `maxHoursPerStep` hours per
 * transaction, step after step until `until` or `maxSteps`. Aggregates read the same before and after; reads of
 * rolled-up hours no longer scan their events. Safe concurrently with ingestion (an ingest of an hour being rolled
 * up waits for that step, so steps are one hour by default; later ones append deltas) and with another rollup (they
 * serialise). Run by the scheduled reconciliation; its role needs EXECUTE on the function only.
 * @param until ISO-8601; truncated to its UTC hour
 * @param opts.maxHoursPerStep default 1; opts.maxSteps default 48 (a longer backlog is caught up by later runs)
 * @returns the hours rolled over all steps, [from, to), and the rows written
 * @throws the driver's error (the step that failed is rolled back; earlier steps stay)
 */
export async function rollupHourly(
    db: Queryable,
    until: string,
    opts: { maxHoursPerStep?: number; maxSteps?: number } = {},
): Promise<RollupResult> {
    const per = opts.maxHoursPerStep ?? 1,
        steps = opts.maxSteps ?? 48;
    let from: string | undefined,
        to = "",
        groups = 0;
    for (let i = 0; i < steps; i++) {
        const r = await db.query<{ from_hour: Date; to_hour: Date; groups: string }>(
            "SELECT from_hour, to_hour, groups FROM usage_hourly_rollup($1, $2)",
            [until, per],
        );
        const row = r.rows[0];
        from ??= new Date(row.from_hour).toISOString();
        to = new Date(row.to_hour).toISOString();
        groups += Number(row.groups);
        if (row.to_hour.getTime() === row.from_hour.getTime()) break;
    }
    return { from: from!, to, groups };
}

/** Outcome of one {@link compactHourly}. */
export interface CompactResult {
    /** Groups whose rows were folded into one. */
    groups: number;
    /** Rows those groups had (replaced by `groups` rows). */
    deltas: number;
}

/**
 * Folds the `usage_hourly` rows of each group and hour in [from, to) into one (a rollup row plus the deltas of late
 * events; SQL function `usage_hourly_compact`, schema.sql): aggregates are unchanged. Safe concurrently with
 * ingestion and with another compaction. Run by the scheduled reconciliation after {@link rollupHourly}.
 * @param window ISO-8601 hour bounds, `to` exclusive
 * @throws the driver's error (nothing is changed then)
 */
export async function compactHourly(db: Queryable, window: { from: string; to: string }): Promise<CompactResult> {
    const r = await db.query<{ groups: string; deltas: string }>("SELECT groups, deltas FROM usage_hourly_compact($1, $2)", [
        window.from,
        window.to,
    ]);
    return { groups: Number(r.rows[0].groups), deltas: Number(r.rows[0].deltas) };
}

/** Sorts by tenant, team, key, model, hour (code-point order, independent of the server's collation). */
export function sortAggregates(rows: HourlyAggregate[]): HourlyAggregate[] {
    return rows.sort(
        (a, b) => cmp(a.tenant, b.tenant) || cmp(a.team, b.team) || cmp(a.keyId, b.keyId) || cmp(a.model, b.model) || cmp(a.hour, b.hour),
    );
}

/** UTC hour start (ISO-8601) of a timestamp: the ledger's billing hour. */
export function hourOf(iso: string): string {
    const d = new Date(iso);
    d.setUTCMinutes(0, 0, 0);
    return d.toISOString();
}

/**
 * Pure: the aggregates the ledger must hold for a set of events delivered any number of times (first
 * occurrence of each `(spoke, requestId)` wins). Used by tests as the oracle. The ledger counts the delivery
 * ingested first and, within one batch, the one with the lowest (source, seq) ({@link ingestOrder}): the same
 * aggregates whenever the deliveries of a request carry the same usage, as redeliveries do.
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
            a = {
                tenant: e.tenant,
                team: e.team,
                keyId: e.keyId,
                model: e.model,
                hour,
                requests: 0,
                inputTokens: 0,
                outputTokens: 0,
                cachedInputTokens: 0,
                estimatedRequests: 0,
                truncatedRequests: 0,
            };
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
