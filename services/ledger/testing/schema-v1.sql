-- Test fixture: services/ledger/schema.sql before (usage_hourly upserted per batch), for the migration
-- test (services/ledger/testing/ledger-v1.ts). Not applied anywhere else.
-- Usage ledger (hub) Applied by migrate in services/ledger/ledger.ts (idempotent; the consumer
-- Lambda runs it once per cold start under an advisory lock).
--
-- Exactly-once counting: usage_events has PRIMARY KEY (spoke, request_id). ingestBatch inserts with
-- ON CONFLICT DO NOTHING and feeds only the rows it actually inserted (RETURNING) into usage_hourly, all in
-- one statement, so a redelivered or overlapping batch changes nothing.
--
-- Reconciliation: every (spoke, source, seq) the hub has received is in exactly one of usage_events (the
-- delivery that was counted), usage_receipts (a further delivery of a request already counted, under a new seq:
-- a collector retry after a metering restart) or usage_spoke_quarantine (an event the spoke could not ship), so
-- sequence gaps over their union mean events that never arrived. Keeping receipts only for such duplicates
-- writes one table per event instead of two (npm run bench: ledger ingestion vs a raw INSERT).

CREATE TABLE IF NOT EXISTS usage_events (
    spoke               text        NOT NULL,
    request_id          text        NOT NULL,
    tenant              text        NOT NULL,
    team                text        NOT NULL,
    key_id              text        NOT NULL,
    model               text        NOT NULL,
    endpoint            text        NOT NULL,
    input_tokens        bigint      NOT NULL CHECK (input_tokens >= 0),
    output_tokens       bigint      NOT NULL CHECK (output_tokens >= 0),
    cached_input_tokens bigint      NOT NULL CHECK (cached_input_tokens >= 0),
    status              smallint    NOT NULL CHECK (status BETWEEN 100 AND 599),
    stream              boolean     NOT NULL,
    truncated           boolean     NOT NULL,
    usage_source        text        NOT NULL CHECK (usage_source IN ('reported', 'estimated')),
    started_at          timestamptz NOT NULL,
    ended_at            timestamptz NOT NULL,
    -- Billing hour: the UTC hour containing ended_at (the response is complete then).
    hour                timestamptz NOT NULL,
    source              text        NOT NULL,
    seq                 bigint      NOT NULL CHECK (seq >= 0),
    received_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (spoke, request_id)
);
-- Billing hours arrive in (nearly) time order: a BRIN index serves the per-hour reports at almost no write cost.
DROP INDEX IF EXISTS usage_events_spoke_hour;
CREATE INDEX IF NOT EXISTS usage_events_hour_brin ON usage_events USING brin (hour);
-- Duplicate detection at ingest looks a delivery up by the primary key (spoke, request_id) and compares its
-- (source, seq); gap detection sorts per spoke. No index on (source, seq): one btree fewer per event.

CREATE TABLE IF NOT EXISTS usage_hourly (
    tenant              text        NOT NULL,
    team                text        NOT NULL,
    key_id              text        NOT NULL,
    model               text        NOT NULL,
    hour                timestamptz NOT NULL,
    requests            bigint      NOT NULL,
    input_tokens        bigint      NOT NULL,
    output_tokens       bigint      NOT NULL,
    cached_input_tokens bigint      NOT NULL,
    -- Requests whose usage was estimated (stream cut before its usage chunk) and, of those, truncated ones.
    estimated_requests  bigint      NOT NULL,
    truncated_requests  bigint      NOT NULL,
    PRIMARY KEY (tenant, team, key_id, model, hour)
);
-- Every ingested batch updates its aggregate rows in place: room on each page keeps those updates HOT (no new
-- index entry per update; PostgreSQL docs "Heap-Only Tuples").
ALTER TABLE usage_hourly SET (fillfactor = 50);

CREATE TABLE IF NOT EXISTS usage_receipts (
    spoke       text        NOT NULL,
    source      text        NOT NULL,
    seq         bigint      NOT NULL,
    request_id  text        NOT NULL,
    hour        timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (spoke, source, seq)
);
DROP INDEX IF EXISTS usage_receipts_spoke_hour;

-- Records the consumer could not turn into usage events (bad JSON, schema violation, wrong spoke for the
-- stream). Never silently dropped: each keeps its reason and raw payload. origin is the Kinesis eventID
-- (shardId:sequenceNumber), so a redelivered bad record is stored once.
CREATE TABLE IF NOT EXISTS usage_quarantine (
    id          bigserial   PRIMARY KEY,
    origin      text        NOT NULL UNIQUE,
    reason      text        NOT NULL,
    payload     text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- Events the spoke could not ship (Kinesis refused the record: over the record size limit, or invalid). The spoke
-- keeps the full event in its own quarantine and ships a small marker instead (services/shared/usage.ts
-- QuarantineMarkerSchema); its (spoke, source, seq) counts as received, so the reconciliation shows the event as
-- quarantined, not as a gap. A redelivered marker is stored once.
CREATE TABLE IF NOT EXISTS usage_spoke_quarantine (
    spoke       text        NOT NULL,
    source      text        NOT NULL,
    seq         bigint      NOT NULL,
    request_id  text        NOT NULL,
    reason      text        NOT NULL,
    bytes       bigint      NOT NULL,
    hour        timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (spoke, source, seq)
);

-- Results of scheduled reconciliation runs (services/ledger/status.ts recordReconciliation), newest per spoke
-- read by `npm run status`.
CREATE TABLE IF NOT EXISTS reconciliation_runs (
    id          bigserial   PRIMARY KEY,
    spoke       text        NOT NULL,
    ran_at      timestamptz NOT NULL DEFAULT now(),
    from_hour   timestamptz,
    to_hour     timestamptz,
    sent        bigint      NOT NULL,
    received    bigint      NOT NULL,
    counted     bigint      NOT NULL,
    duplicates  bigint      NOT NULL,
    missing     bigint      NOT NULL,
    quarantined bigint      NOT NULL,
    gaps        jsonb       NOT NULL
);
CREATE INDEX IF NOT EXISTS reconciliation_runs_spoke_ran_at ON reconciliation_runs (spoke, ran_at DESC);
