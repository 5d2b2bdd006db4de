-- Usage ledger (hub) Applied by migrate in services/ledger/ledger.ts (idempotent; the consumer
-- Lambda runs it once per cold start under an advisory lock).
--
-- Exactly-once counting: usage_events has PRIMARY KEY (spoke, request_id), which decides what is counted.
-- ingestBatch inserts only requests not yet counted (services/ledger/ledger.ts ingestSql) and derives the hourly
-- aggregates from exactly the rows it inserted (usage_hourly below), in one statement, so a redelivered or
-- overlapping batch changes nothing.
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

-- Hourly aggregates per (tenant, team, key_id, model, hour): materialised below a watermark, live above it (the
-- shape of TimescaleDB's real-time continuous aggregates). usage_events is the source of truth; readers go through
-- the view usage_hourly_totals (services/ledger/ledger.ts hourlyAggregates), which adds
-- - usage_hourly: rows for hours before usage_rollup.rolled_until only. The scheduled reconciliation rolls closed
--   hours up (usage_hourly_rollup: one row per group), and an event counted into an hour already rolled up (a
--   late event: a spoke's backlog after an outage) appends its delta in the ingest statement itself;
-- - the counted events of hours from rolled_until on, aggregated at read time (BRIN on usage_events.hour: the
--   open window is the current hour plus the reconciliation's lag).
-- A group's aggregate is the sum of its rows in both parts; each counted event is in exactly one of them.
--
-- Why not one row per group updated by every ingest (INSERT ... ON CONFLICT DO UPDATE, as this schema once did):
-- a unique-index probe, a row lock and a new row version per group per batch, plus a dead tuple for vacuum, and in
-- a Kinesis batch of 500 events most groups are distinct, so it cost about as much as inserting the events
-- (npm run bench -- ledger: 0.48x of a raw INSERT); concurrent consumers also locked the same aggregate rows. An
-- append-only delta row per group per batch was measured too: cheaper, still about one more row per event there
-- (0.53-0.55x on the stricter floor of today's bench). Now the hot path writes the events and nothing else (0.65-0.68x;
-- late events, which append deltas, 0.57-0.60x); nothing in usage_hourly is ever updated in place.
--
-- The watermark and late events (exactness under concurrency): an ingest that counts events takes a shared
-- advisory lock per hour of those events, then reads rolled_until with a fresh snapshot
-- (usage_rollup_watermark); a rollup of hours [w, stop) takes the same locks exclusively, aggregates usage_events
-- (a new snapshot, after the locks) and moves rolled_until to stop, in one transaction. So an ingest either
-- committed before the rollup aggregated its hour (its events are in the rollup, and it saw the old watermark:
-- no delta) or waits for the rollup to commit and sees the new watermark (its events, invisible to the rollup,
-- get deltas). Only ingests of hours being rolled up wait: the rollup never goes past the current hour.
--
-- Migration from the upsert schema: its usage_hourly holds every counted event once, one row per group (a valid
-- set of rows to sum), so the watermark starts after its last hour (and no earlier than the current hour); events
-- counted from then on into earlier hours are late and append deltas. Nothing is rewritten.
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
    -- Requests whose usage was estimated (stream cut before its usage chunk), and truncated requests.
    estimated_requests  bigint      NOT NULL,
    truncated_requests  bigint      NOT NULL
);
ALTER TABLE usage_hourly DROP CONSTRAINT IF EXISTS usage_hourly_pkey;
-- Rows are appended, never updated: full pages (the upsert schema kept half of each page free for HOT updates).
ALTER TABLE usage_hourly RESET (fillfactor);
CREATE INDEX IF NOT EXISTS usage_hourly_hour_brin ON usage_hourly USING brin (hour);

-- The watermark: hours before rolled_until are in usage_hourly, later ones are read from usage_events. One row;
-- it only moves forward (usage_hourly_rollup).
CREATE TABLE IF NOT EXISTS usage_rollup (
    id           boolean     PRIMARY KEY DEFAULT true CHECK (id),
    rolled_until timestamptz NOT NULL
);
INSERT INTO usage_rollup (rolled_until)
SELECT greatest(date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', max(hour) + interval '1 hour') FROM usage_hourly
ON CONFLICT (id) DO NOTHING;

-- One row per group, exact at any time: what readers (reports, billing exports, ad-hoc SQL) use.
CREATE OR REPLACE VIEW usage_hourly_totals AS
SELECT tenant, team, key_id, model, hour,
       sum(requests)::bigint            AS requests,
       sum(input_tokens)::bigint        AS input_tokens,
       sum(output_tokens)::bigint       AS output_tokens,
       sum(cached_input_tokens)::bigint AS cached_input_tokens,
       sum(estimated_requests)::bigint  AS estimated_requests,
       sum(truncated_requests)::bigint  AS truncated_requests
FROM (
    SELECT tenant, team, key_id, model, hour, requests, input_tokens, output_tokens, cached_input_tokens,
           estimated_requests, truncated_requests
    FROM usage_hourly
    UNION ALL
    SELECT tenant, team, key_id, model, hour, 1, input_tokens, output_tokens, cached_input_tokens,
           (usage_source = 'estimated')::int, truncated::int
    FROM usage_events
    WHERE hour >= (SELECT rolled_until FROM usage_rollup)
) d
GROUP BY tenant, team, key_id, model, hour;

-- Called by the ingest statement once per batch that counted events, with the first and last hour of those events:
-- takes the shared advisory lock of each hour in between (key 1970495848 = 0x75736168 "usah", hour number = epoch
-- hours; held to the end of the transaction; ascending, so no lock order can cycle with a rollup's) and returns
-- rolled_until as committed now, not as of the calling statement's snapshot (a VOLATILE function takes a fresh
-- snapshot per query in READ COMMITTED; PostgreSQL docs "Function Volatility Categories"). Events before the
-- returned hour are late. A batch spans an hour or two; for one spanning more than two days (a backlog, a spoke
-- with a wrong clock) the statement passes its distinct hours instead, and only those a rollup could still take
-- are locked: none before rolled_until is rolled again (it only grows, so a stale read locks more, never fewer).
CREATE OR REPLACE FUNCTION usage_rollup_watermark(first_hour timestamptz, last_hour timestamptz, hours timestamptz[] DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    h timestamptz;
BEGIN
    IF hours IS NULL THEN
        h := first_hour;
        WHILE h <= last_hour LOOP
            PERFORM pg_advisory_xact_lock_shared(1970495848, (extract(epoch FROM h) / 3600)::int);
            h := h + interval '1 hour';
        END LOOP;
    ELSE
        FOR h IN SELECT DISTINCT x FROM unnest(hours) AS x WHERE x >= (SELECT rolled_until FROM usage_rollup) ORDER BY 1 LOOP
            PERFORM pg_advisory_xact_lock_shared(1970495848, (extract(epoch FROM h) / 3600)::int);
        END LOOP;
    END IF;
    RETURN (SELECT rolled_until FROM usage_rollup);
END
$$;

-- Rolls the closed hours from rolled_until up to `until` (at most max_hours of them, never the current hour) into
-- usage_hourly, one row per group, and moves rolled_until there; in the caller's transaction (services/ledger/
-- ledger.ts rollupHourly). One rollup at a time (advisory lock 1970495848/-1); the hours' locks make it exact
-- against concurrent ingests (see above). SECURITY DEFINER so the reconciliation's read-only role can run this one
-- sum-preserving write without privileges on the tables (EXECUTE granted in services/reconciler/roles.ts, revoked
-- from PUBLIC here); search_path pinned so the owner's rights cannot be steered to other objects.
-- Returns the hours rolled [from_hour, to_hour) and the rows written (to_hour = from_hour: nothing to do).
CREATE OR REPLACE FUNCTION usage_hourly_rollup(until timestamptz, max_hours int DEFAULT 1)
RETURNS TABLE (from_hour timestamptz, to_hour timestamptz, groups bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    w timestamptz;
    stop timestamptz;
    h timestamptz;
    n bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1970495848, -1);
    SELECT rolled_until INTO STRICT w FROM usage_rollup;
    stop := least(date_trunc('hour', until AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                  date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                  w + make_interval(hours => max_hours));
    IF stop <= w THEN
        RETURN QUERY SELECT w, w, 0::bigint;
        RETURN;
    END IF;
    FOR h IN SELECT x FROM generate_series(w, stop - interval '1 hour', interval '1 hour') AS x LOOP
        PERFORM pg_advisory_xact_lock(1970495848, (extract(epoch FROM h) / 3600)::int);
    END LOOP;
    INSERT INTO usage_hourly (tenant, team, key_id, model, hour, requests, input_tokens, output_tokens,
        cached_input_tokens, estimated_requests, truncated_requests)
    SELECT tenant, team, key_id, model, hour, count(*), sum(input_tokens), sum(output_tokens), sum(cached_input_tokens),
        count(*) FILTER (WHERE usage_source = 'estimated'), count(*) FILTER (WHERE truncated)
    FROM usage_events WHERE hour >= w AND hour < stop
    GROUP BY tenant, team, key_id, model, hour;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE usage_rollup SET rolled_until = stop;
    RETURN QUERY SELECT w, stop, n;
END
$$;
REVOKE ALL ON FUNCTION usage_hourly_rollup(timestamptz, int) FROM PUBLIC;

-- Folds the rows of each group with more than one row (its rollup row and late deltas) in hours
-- [from_hour, to_hour) into one row with their sums, in one statement (services/ledger/ledger.ts compactHourly;
-- run by the scheduled reconciliation after the rollup). Exact under concurrency: a delta appended meanwhile (a late
-- event) is not in the statement's snapshot and stays as it is; a row two compactions race for is deleted, and so
-- folded, by exactly one of them (the other skips the row it finds deleted). SECURITY DEFINER as the rollup.
-- Returns the groups folded and the rows they replaced.
CREATE OR REPLACE FUNCTION usage_hourly_compact(from_hour timestamptz, to_hour timestamptz)
RETURNS TABLE (groups bigint, deltas bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp
AS $$
WITH many AS (
    SELECT tenant, team, key_id, model, hour FROM usage_hourly
    WHERE hour >= from_hour AND hour < to_hour
    GROUP BY tenant, team, key_id, model, hour HAVING count(*) > 1
),
gone AS (
    DELETE FROM usage_hourly h USING many m
    WHERE h.hour >= from_hour AND h.hour < to_hour
      AND h.tenant = m.tenant AND h.team = m.team AND h.key_id = m.key_id AND h.model = m.model AND h.hour = m.hour
    RETURNING h.*
),
folded AS (
    INSERT INTO usage_hourly (tenant, team, key_id, model, hour, requests, input_tokens, output_tokens,
        cached_input_tokens, estimated_requests, truncated_requests)
    SELECT tenant, team, key_id, model, hour, sum(requests), sum(input_tokens), sum(output_tokens),
        sum(cached_input_tokens), sum(estimated_requests), sum(truncated_requests)
    FROM gone GROUP BY tenant, team, key_id, model, hour
    RETURNING 1
)
SELECT (SELECT count(*) FROM folded), (SELECT count(*) FROM gone)
$$;
REVOKE ALL ON FUNCTION usage_hourly_compact(timestamptz, timestamptz) FROM PUBLIC;

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

-- Of the given deliveries (parallel arrays), those that are not the counted delivery of their request (the rows
-- of usage_events) as committed when this is called, not as of the calling statement's snapshot: the receipts
-- the ingest statement must write for the deliveries it did not count itself. A delivery that lost an ON CONFLICT
-- race to a concurrent consumer's insert of the very same (spoke, source, seq) waited for that consumer to commit;
-- a fresh snapshot (a VOLATILE function takes one per query in READ COMMITTED; PostgreSQL docs "Function
-- Volatility Categories") is the only way the same statement sees that row, so no receipt duplicates a counted
-- delivery. One call per batch, not per row; not inlined (volatile).
CREATE OR REPLACE FUNCTION usage_uncounted_deliveries(spokes text[], request_ids text[], sources text[], seqs bigint[], hours timestamptz[])
RETURNS TABLE (spoke text, request_id text, source text, seq bigint, hour timestamptz)
LANGUAGE sql VOLATILE ROWS 10
AS $$
SELECT d.spoke, d.request_id, d.source, d.seq, d.hour
FROM unnest(spokes, request_ids, sources, seqs, hours) AS d(spoke, request_id, source, seq, hour)
WHERE NOT EXISTS (SELECT 1 FROM usage_events e
                  WHERE e.spoke = d.spoke AND e.request_id = d.request_id AND e.source = d.source AND e.seq = d.seq)
$$;

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
