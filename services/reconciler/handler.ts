import { Client } from "pg";
import type { ReconciliationRow } from "../ledger/reconcile";
import { runReconciliation } from "../ledger/status";
import { gapMetrics, METRIC_NAMESPACE, reconcileWindow } from "./metric";
import { need, secretString } from "./secrets";

/**
 * Scheduled reconciliation Lambda (hub; EventBridge rule in components/hub/UsageLedger.ts): runs
 * services/ledger/status.ts `runReconciliation` over the last LOOKBACK_HOURS full hours as the reporter role (reads the
 * ledger, records the run in reconciliation_runs) and publishes {@link gapMetrics} to CloudWatch.
 * Environment: PGHOST, PGPORT, PGDATABASE, PGUSER, DB_PASSWORD_SECRET_ARN, SPOKES (JSON array), LOOKBACK_HOURS.
 * @throws on a database or CloudWatch error (the run fails; the alarm treats the missing datum as breaching)
 */
export async function handler(): Promise<{ missing: number; rows: number }> {
    const env = process.env;
    const spokes = JSON.parse(need(env, "SPOKES")) as string[];
    const client = new Client({
        host: need(env, "PGHOST"), port: Number(env.PGPORT ?? 5432), database: need(env, "PGDATABASE"), user: need(env, "PGUSER"),
        password: await secretString(need(env, "DB_PASSWORD_SECRET_ARN")),
        ssl: { rejectUnauthorized: true }, connectionTimeoutMillis: 10_000, statement_timeout: 120_000,
    });
    await client.connect();
    let rows: ReconciliationRow[];
    try {
        // Records the run per spoke in reconciliation_runs (what `npm run status` shows as the last reconciliation).
        ({ rows } = await runReconciliation(client, { ...reconcileWindow(new Date(), Number(env.LOOKBACK_HOURS ?? 48)), spokes }));
    } finally {
        await client.end().catch(() => undefined);
    }
    const data = gapMetrics(rows, spokes);
    const cw = await import("@aws-sdk/client-cloudwatch");
    await new cw.CloudWatchClient({}).send(new cw.PutMetricDataCommand({ Namespace: METRIC_NAMESPACE, MetricData: data }));
    const missing = data[data.length - 1].Value;
    console.log(JSON.stringify({ msg: "reconciliation", rows: rows.length, missing, bySpoke: Object.fromEntries(data.slice(0, -1).map((d) => [d.Dimensions[0].Value, d.Value])) }));
    return { missing, rows: rows.length };
}
