import type { Queryable } from "./ledger";

/** A run of sequence numbers a metering instance assigned that never reached the hub. */
export interface SeqGap {
    /** Metering instance (`UsageEvent.source`). */
    source: string;
    /** First missing seq (inclusive). */
    fromSeq: number;
    /** Last missing seq (inclusive). */
    toSeq: number;
}

/** Reconciliation of one spoke for one UTC hour. */
export interface ReconciliationRow {
    spoke: string;
    /** ISO-8601 UTC hour start (billing hour of the events: `endedAt` truncated to the hour). */
    hour: string;
    /** Distinct `(source, seq)` received, duplicates of a request included. */
    received: number;
    /** Requests counted in the ledger (distinct `requestId`). */
    counted: number;
    /** `received - counted - quarantined`: deliveries of a request already counted (same request id, new seq). */
    duplicates: number;
    /**
     * Events the spoke quarantined because Kinesis would not take them (received as markers, not counted, not
     * lost: the full event is in the spoke's quarantine). See `usage_spoke_quarantine`.
     */
    quarantined: number;
    /** Sequence numbers missing just before a seq received in this hour. */
    missing: number;
    /** What the spoke's sequence numbers say it sent: `received + missing`. */
    sent: number;
    gaps: SeqGap[];
}

export interface ReconcileOptions {
    /** Only this spoke; all when unset. */
    spoke?: string;
    /** Hours from (inclusive, ISO-8601); all when unset. */
    from?: string;
    /** Hours before (exclusive, ISO-8601); all when unset. */
    to?: string;
}

/**
 * Gaps are computed over each instance's whole sequence (a seq is assigned when the spoke's metering spools
 * the event, starting at 0 for a new spool), then attributed to the hour of the first seq received after
 * the gap. A gap at the very end of a sequence (events sent after the last one received) shows up once a
 * later event of that instance arrives.
 */
const DELIVERED = `
    SELECT spoke, source, seq, hour FROM usage_events WHERE ($1::text IS NULL OR spoke = $1)
    UNION
    SELECT spoke, source, seq, hour FROM usage_receipts WHERE ($1::text IS NULL OR spoke = $1)
    UNION
    SELECT spoke, source, seq, hour FROM usage_spoke_quarantine WHERE ($1::text IS NULL OR spoke = $1)`;

const GAPS_SQL = `
WITH d AS (${DELIVERED}),
r AS (
    SELECT spoke, source, seq, hour, lag(seq) OVER (PARTITION BY spoke, source ORDER BY seq) AS prev FROM d
)
SELECT spoke, source, hour, COALESCE(prev + 1, 0) AS gap_from, seq - 1 AS gap_to
FROM r
WHERE seq > COALESCE(prev + 1, 0)
  AND ($2::timestamptz IS NULL OR hour >= $2) AND ($3::timestamptz IS NULL OR hour < $3)`;

const SUMMARY_SQL = `
WITH d AS (${DELIVERED}),
f AS (
    SELECT spoke, hour, 1 AS received, 0 AS counted, 0 AS quarantined FROM d
    WHERE ($2::timestamptz IS NULL OR hour >= $2) AND ($3::timestamptz IS NULL OR hour < $3)
    UNION ALL
    SELECT spoke, hour, 0, 1, 0 FROM usage_events
    WHERE ($1::text IS NULL OR spoke = $1) AND ($2::timestamptz IS NULL OR hour >= $2) AND ($3::timestamptz IS NULL OR hour < $3)
    UNION ALL
    SELECT spoke, hour, 0, 0, 1 FROM usage_spoke_quarantine
    WHERE ($1::text IS NULL OR spoke = $1) AND ($2::timestamptz IS NULL OR hour >= $2) AND ($3::timestamptz IS NULL OR hour < $3)
)
SELECT spoke, hour, sum(received) AS received, sum(counted) AS counted, sum(quarantined) AS quarantined
FROM f GROUP BY spoke, hour`;

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The reconciliation report: per spoke and hour, events received vs events the spoke says it sent (from the
 * sequence numbers in the events), with the gaps listed. Read-only.
 * @throws the driver's error when a query fails
 */
export async function reconcile(db: Queryable, opts: ReconcileOptions = {}): Promise<ReconciliationRow[]> {
    const args = [opts.spoke ?? null, opts.from ?? null, opts.to ?? null];
    // Sequential: a pg Client runs one query at a time (queued concurrent queries are deprecated in pg 8).
    const summary = await db.query(SUMMARY_SQL, args);
    const gaps = await db.query(GAPS_SQL, args);
    const rows = new Map<string, ReconciliationRow>();
    const key = (spoke: string, hour: Date) => `${spoke}\u0000${hour.toISOString()}`;
    for (const s of summary.rows) {
        const received = Number(s.received),
            counted = Number(s.counted),
            quarantined = Number(s.quarantined);
        rows.set(key(s.spoke, new Date(s.hour)), {
            spoke: s.spoke,
            hour: new Date(s.hour).toISOString(),
            received,
            counted,
            duplicates: received - counted - quarantined,
            quarantined,
            missing: 0,
            sent: received,
            gaps: [],
        });
    }
    for (const g of gaps.rows) {
        const row = rows.get(key(g.spoke, new Date(g.hour)));
        if (!row) continue; // cannot happen: the receipt after the gap is in the same (spoke, hour)
        const gap = { source: g.source, fromSeq: Number(g.gap_from), toSeq: Number(g.gap_to) };
        row.gaps.push(gap);
        row.missing += gap.toSeq - gap.fromSeq + 1;
        row.sent = row.received + row.missing;
    }
    for (const r of rows.values()) r.gaps.sort((a, b) => cmp(a.source, b.source) || a.fromSeq - b.fromSeq);
    return [...rows.values()].sort((a, b) => cmp(a.spoke, b.spoke) || cmp(a.hour, b.hour));
}

/** Plain-text rendering of {@link reconcile}'s rows, one line per spoke-hour plus one per gap (`quarantined`: shipped as markers, kept on the spoke). */
export function formatReport(rows: readonly ReconciliationRow[]): string {
    const lines = ["spoke\thour\tsent\treceived\tcounted\tduplicates\tquarantined\tmissing"];
    for (const r of rows) {
        lines.push([r.spoke, r.hour, r.sent, r.received, r.counted, r.duplicates, r.quarantined, r.missing].join("\t"));
        for (const g of r.gaps) lines.push(`  gap\t${g.source}\tseq ${g.fromSeq}..${g.toSeq} (${g.toSeq - g.fromSeq + 1})`);
    }
    return `${lines.join("\n")}\n`;
}
