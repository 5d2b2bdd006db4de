import type { Queryable } from "./ledger";
import { reconcile, type ReconcileOptions, type ReconciliationRow, type SeqGap } from "./reconcile";

/**
 * Ledger-side data of `npm run status` and of the hub's scheduled reconciliation.
 * Read-only except {@link recordReconciliation} / {@link runReconciliation}, which append to `reconciliation_runs`.
 */

/** Last reconciliation of one spoke (one row of `reconciliation_runs`). Counts are sums over the run's hours. */
export interface ReconciliationSummary {
    /** ISO-8601 time the run was recorded. */
    ranAt: string;
    /** Hours covered, ISO-8601 (null: unbounded). */
    from: string | null;
    to: string | null;
    sent: number;
    received: number;
    counted: number;
    duplicates: number;
    missing: number;
    quarantined: number;
    gaps: SeqGap[];
}

/** Usage status of one spoke, as the hub's ledger sees it. */
export interface SpokeUsageStatus {
    spoke: string;
    /** Latest `endedAt` of a counted event (ISO-8601), null when none: "usage up to". */
    lastUsageEndedAt: string | null;
    /** When the hub last received anything from the spoke (receipt time, ISO-8601), null when never. */
    lastIngestedAt: string | null;
    /** Events counted in the ledger. */
    counted: number;
    /** Events the spoke quarantined (Kinesis would not take them), all time. */
    quarantined: number;
    /** Latest run recorded by {@link recordReconciliation}; undefined when none. */
    lastReconciliation?: ReconciliationSummary;
}

const iso = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string).toISOString());

/**
 * Per spoke: usage lag inputs, quarantined events, last reconciliation. Spokes are those the ledger has heard
 * of plus `opts.spokes` (the hub's configured spokes, so a spoke that never sent anything is listed with nulls).
 * Sorted by spoke name.
 * @throws the driver's error when a query fails
 */
export async function spokeUsageStatus(db: Queryable, opts: { spokes?: readonly string[] } = {}): Promise<SpokeUsageStatus[]> {
    // One after another: a pg Client runs one query at a time (queued concurrent queries are deprecated in pg 8).
    const queries = [
        () => db.query("SELECT spoke, max(ended_at) AS last_end, count(*)::bigint AS n FROM usage_events GROUP BY spoke"),
        () =>
            db.query(`SELECT spoke, max(t) AS last_recv FROM (SELECT spoke, max(received_at) AS t FROM usage_events GROUP BY spoke
                  UNION ALL SELECT spoke, max(received_at) FROM usage_receipts GROUP BY spoke
                  UNION ALL SELECT spoke, max(received_at) FROM usage_spoke_quarantine GROUP BY spoke) x GROUP BY spoke`),
        () => db.query("SELECT spoke, count(*)::bigint AS n FROM usage_spoke_quarantine GROUP BY spoke"),
        () =>
            db.query(`SELECT DISTINCT ON (spoke) spoke, ran_at, from_hour, to_hour, sent, received, counted, duplicates, missing, quarantined, gaps
                  FROM reconciliation_runs ORDER BY spoke, ran_at DESC, id DESC`),
    ];
    const results: Array<Awaited<ReturnType<(typeof queries)[number]>>> = [];
    for (const run of queries) results.push(await run());
    const [ev, rec, q, runs] = results;
    const names = new Set<string>(opts.spokes ?? []);
    for (const r of [...ev.rows, ...rec.rows, ...q.rows, ...runs.rows]) names.add(r.spoke);
    const by = <T extends { spoke: string }>(rows: T[]) => new Map(rows.map((r) => [r.spoke, r]));
    const e = by(ev.rows),
        r = by(rec.rows),
        qq = by(q.rows),
        rr = by(runs.rows);
    return [...names].sort().map((spoke) => {
        const run = rr.get(spoke);
        const s: SpokeUsageStatus = {
            spoke,
            lastUsageEndedAt: iso(e.get(spoke)?.last_end),
            lastIngestedAt: iso(r.get(spoke)?.last_recv),
            counted: Number(e.get(spoke)?.n ?? 0),
            quarantined: Number(qq.get(spoke)?.n ?? 0),
        };
        if (run) {
            s.lastReconciliation = {
                ranAt: iso(run.ran_at)!,
                from: iso(run.from_hour),
                to: iso(run.to_hour),
                sent: Number(run.sent),
                received: Number(run.received),
                counted: Number(run.counted),
                duplicates: Number(run.duplicates),
                missing: Number(run.missing),
                quarantined: Number(run.quarantined),
                gaps: run.gaps as SeqGap[],
            };
        }
        return s;
    });
}

/**
 * Stores one reconciliation result per spoke (sums over `rows`' hours, gaps concatenated) in
 * `reconciliation_runs`. Spokes in `spokes` without rows are stored with zeros (a run that saw nothing).
 * @returns the number of rows written
 * @throws the driver's error
 */
export async function recordReconciliation(
    db: Queryable,
    rows: readonly ReconciliationRow[],
    window: { from?: string; to?: string; spokes?: readonly string[] } = {},
): Promise<number> {
    const per = new Map<string, Omit<ReconciliationSummary, "ranAt" | "from" | "to">>();
    for (const s of window.spokes ?? [])
        per.set(s, { sent: 0, received: 0, counted: 0, duplicates: 0, missing: 0, quarantined: 0, gaps: [] });
    for (const r of rows) {
        const a = per.get(r.spoke) ?? { sent: 0, received: 0, counted: 0, duplicates: 0, missing: 0, quarantined: 0, gaps: [] };
        a.sent += r.sent;
        a.received += r.received;
        a.counted += r.counted;
        a.duplicates += r.duplicates;
        a.missing += r.missing;
        a.quarantined += r.quarantined;
        a.gaps.push(...r.gaps);
        per.set(r.spoke, a);
    }
    if (per.size === 0) return 0;
    const payload = [...per].map(([spoke, a]) => ({ spoke, ...a, gaps: a.gaps }));
    const res = await db.query(
        `INSERT INTO reconciliation_runs (spoke, from_hour, to_hour, sent, received, counted, duplicates, missing, quarantined, gaps)
         SELECT spoke, $2::timestamptz, $3::timestamptz, sent, received, counted, duplicates, missing, quarantined, gaps
         FROM jsonb_to_recordset($1::jsonb) AS x(spoke text, sent bigint, received bigint, counted bigint, duplicates bigint, missing bigint, quarantined bigint, gaps jsonb)`,
        [JSON.stringify(payload), window.from ?? null, window.to ?? null],
    );
    return res.rowCount ?? 0;
}

/**
 * What the hub's scheduled reconciliation runs: {@link reconcile} over a window, then {@link recordReconciliation}.
 * @returns the rows and whether anything is missing (alarm on `missing > 0`)
 */
export async function runReconciliation(
    db: Queryable,
    opts: ReconcileOptions & { spokes?: readonly string[] } = {},
): Promise<{ rows: ReconciliationRow[]; missing: number; quarantined: number }> {
    const rows = await reconcile(db, opts);
    const spokes = opts.spoke ? [opts.spoke] : opts.spokes;
    await recordReconciliation(db, rows, { from: opts.from, to: opts.to, spokes });
    return { rows, missing: rows.reduce((n, r) => n + r.missing, 0), quarantined: rows.reduce((n, r) => n + r.quarantined, 0) };
}
