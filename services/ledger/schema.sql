-- Usage ledger (hub), DESIGN §3. Applied by migrate() in services/ledger/ledger.ts (idempotent; the consumer
-- Lambda runs it once per cold start under an advisory lock).
--
-- Exactly-once counting: usage_events has PRIMARY KEY (spoke, request_id). ingestBatch() inserts with
-- ON CONFLICT DO NOTHING and feeds only the rows it actually inserted (RETURNING) into usage_hourly, all in
-- one statement, so a redelivered or overlapping batch changes nothing.
--
-- Reconciliation: usage_receipts keeps one row per (spoke, source, seq) the hub has received, duplicates of a
-- request included (a redelivered request may carry a new seq), so sequence gaps mean events that never arrived.

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
CREATE INDEX IF NOT EXISTS usage_events_spoke_hour ON usage_events (spoke, hour);

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

CREATE TABLE IF NOT EXISTS usage_receipts (
    spoke       text        NOT NULL,
    source      text        NOT NULL,
    seq         bigint      NOT NULL,
    request_id  text        NOT NULL,
    hour        timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (spoke, source, seq)
);
CREATE INDEX IF NOT EXISTS usage_receipts_spoke_hour ON usage_receipts (spoke, hour);

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
-- QuarantineMarkerSchema); the marker's (spoke, source, seq) also goes into usage_receipts, so the reconciliation
-- shows the event as quarantined, not as a gap. A redelivered marker is stored once.
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
