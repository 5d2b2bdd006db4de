import { Client } from "pg";
import { compactHourly, rollupHourly } from "../ledger/ledger";
import { runReconciliation } from "../ledger/status";
import { gapMetrics, METRIC_NAMESPACE, reconcileWindow } from "./metric";
import { loadReconcilerEnv } from "./config";
import { secretString } from "./secrets";

/**
 * Scheduled reconciliation Lambda (hub; EventBridge rule in components/hub/UsageLedger.ts): runs
 * services/ledger/status.ts `runReconciliation` over the last LOOKBACK_HOURS full hours as the reporter role (reads the
 * ledger, records the run in reconciliation_runs), publishes {@link gapMetrics} to CloudWatch, then rolls the closed
 * hours up into `usage_hourly` and folds the deltas of late events in the window (services/ledger/ledger.ts
 * `rollupHourly`, `compactHourly`: aggregates read the same before and after, later reads are cheaper).
 * Environment: services/reconciler/config.ts `RECONCILER_ENV`.
 * @throws on a database or CloudWatch error (the run fails; the alarm treats the missing datum as breaching)
 */
export async function handler(): Promise<{ missing: number; rows: number }> {
    const env = loadReconcilerEnv(process.env);
    const spokes = env.SPOKES;
    const client = new Client({
        host: env.PGHOST,
        port: env.PGPORT,
        database: env.PGDATABASE,
        user: env.PGUSER,
        password: await secretString(env.DB_PASSWORD_SECRET_ARN),
        ssl: { rejectUnauthorized: true },
        connectionTimeoutMillis: 10_000,
        statement_timeout: 120_000,
    });
    await client.connect();
    try {
        // Records the run per spoke in reconciliation_runs (what `npm run status` shows as the last reconciliation).
        const window = reconcileWindow(new Date(), env.LOOKBACK_HOURS);
        const { rows } = await runReconciliation(client, { ...window, spokes });
        const data = gapMetrics(rows, spokes);
        const cw = await import("@aws-sdk/client-cloudwatch");
        await new cw.CloudWatchClient({}).send(new cw.PutMetricDataCommand({ Namespace: METRIC_NAMESPACE, MetricData: data }));
        const missing = data[data.length - 1].Value;
        console.log(
            JSON.stringify({
                msg: "reconciliation",
                rows: rows.length,
                missing,
                bySpoke: Object.fromEntries(data.slice(0, -1).map((d) => [d.Dimensions[0].Value, d.Value])),
            }),
        );
        // After the metric, so a failing rollup (the Lambda errors) never hides the gap datum. Aggregates stay exact
        // without it: hours not rolled up are read from the events.
        const rolled = await rollupHourly(client, window.to);
        const compacted = await compactHourly(client, window);
        console.log(JSON.stringify({ msg: "hourly rollup", ...rolled, compacted }));
        return { missing, rows: rows.length };
    } finally {
        await client.end().catch(() => undefined);
    }
}
