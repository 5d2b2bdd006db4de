import type { ReconciliationRow } from "../ledger/reconcile";

import { ALL_SPOKES, GAP_METRIC } from "./config";

export { ALL_SPOKES, GAP_METRIC, METRIC_NAMESPACE } from "./config";

/** One CloudWatch datum (the subset of `MetricDatum` this module writes). */
export interface GapDatum {
    MetricName: string;
    Dimensions: Array<{ Name: "Spoke"; Value: string }>;
    Value: number;
    Unit: "Count";
}

/**
 * Pure: the gap metric from a reconciliation: per spoke the events its sequence numbers say were sent but never
 * reached the ledger in the window, and the total under `Spoke=all`. Every spoke of `spokes` gets a datum (0 when
 * nothing is missing), so the alarm sees data on every run and "no data" means the reconciliation did not run.
 */
export function gapMetrics(rows: readonly ReconciliationRow[], spokes: readonly string[]): GapDatum[] {
    const missing = new Map(spokes.map((s) => [s, 0]));
    for (const r of rows) missing.set(r.spoke, (missing.get(r.spoke) ?? 0) + r.missing);
    const datum = (spoke: string, value: number): GapDatum => ({
        MetricName: GAP_METRIC,
        Dimensions: [{ Name: "Spoke", Value: spoke }],
        Value: value,
        Unit: "Count",
    });
    const per = [...missing.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([s, v]) => datum(s, v));
    return [
        ...per,
        datum(
            ALL_SPOKES,
            per.reduce((n, d) => n + d.Value, 0),
        ),
    ];
}

/** Pure: the reconciliation window ending at the start of `now`'s hour (the current hour is still filling). */
export function reconcileWindow(now: Date, lookbackHours: number): { from: string; to: string } {
    const to = new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000);
    return { from: new Date(to.getTime() - lookbackHours * 3_600_000).toISOString(), to: to.toISOString() };
}
