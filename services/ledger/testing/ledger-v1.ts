/**
 * The ledger as it was before (hourly aggregates upserted into `usage_hourly` by every ingest), kept so the
 * migration test can build a database the way production has one: testing/schema-v1.sql is services/ledger/schema.sql
 * of that version, {@link INGEST_SQL_V1} its ingest statement (`$1`: the batch as JSON). Test fixtures only.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** The schema of that version. */
export function schemaV1(): string {
    return fs.readFileSync(path.join(__dirname, "schema-v1.sql"), "utf8");
}

const HOUR = (col: string) => `date_trunc('hour', (${col}) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;
export const INGEST_SQL_V1 = `
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
