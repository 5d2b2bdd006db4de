import type { ChaosFigure } from "../../shared/chaos";
import type { TestKey } from "../../auth/test/harness";
import type { Rig } from "./rig";
import { startTwoSpokes } from "./two-spokes";

/** What the drill measured, besides the chaos figure. */
export interface FailoverDrillResult extends ChaosFigure {
    requests: number;
    servedBy: Record<string, number>;
    /** Client requests that got no 200. */
    failed: number;
    /** Ledger rows for the drill's requests (either spoke's ids). */
    metered: number;
}

const MODEL = "meta-llama/Llama-3.3-70B-Instruct";

/**
 * `npm run chaos` drill: two spokes (real auth + metering services, one ledger) both serving a model, each falling back
 * to the other (services/metering/testing/two-spokes.ts). `requests` go to hn1, `concurrency` at a time; halfway
 * through, hn1's endpoint disappears (its DynamoGraphDeployment deleted: the frontend Service gone, no hosts). Figures: requests lost (a client got
 * no answer from a model, or an answered request is missing from the ledger) and requests metered twice (ledger
 * rows beyond one per answered request: both spokes log a forwarded request, only the serving one may count it).
 */
export async function endpointDisappears(rig: Rig, o: { requests?: number; concurrency?: number } = {}): Promise<FailoverDrillResult> {
    const n = o.requests ?? 200;
    const c = o.concurrency ?? 8;
    const keys: TestKey[] = [
        { id: "drill-a", secret: "sk-drill-a-0123456789", tenant: "acme", team: "search", models: [MODEL] },
        { id: "drill-b", secret: "sk-drill-b-0123456789", tenant: "globex", team: "research", models: [MODEL] },
    ];
    const two = await startTwoSpokes({ rig, names: ["hn1", "hcm1"], model: MODEL, keys });
    try {
        const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "drill" }] });
        const results: Array<{ status: number; servedBy?: string }> = [];
        let next = 0;
        let goneAt: number | undefined;
        let firstServedByPeerAt: number | undefined;
        const worker = async () => {
            for (;;) {
                const i = next++;
                if (i >= n) return;
                if (i === Math.floor(n / 2)) {
                    two.a.modelUp = false;
                    goneAt = Date.now();
                }
                const k = keys[i % keys.length];
                const r = await two.a.request({ authorization: `Bearer ${k.secret}`, "content-type": "application/json" }, body);
                if (r.servedBy === "hcm1" && firstServedByPeerAt === undefined) firstServedByPeerAt = Date.now();
                results.push(r);
            }
        };
        await Promise.all(Array.from({ length: c }, worker));
        await two.drainToLedger();
        const ids = [...two.a.records, ...two.b.records].map((r) => String(r.requestId));
        const metered = (await rig.db.query("SELECT count(*)::int AS n FROM usage_events WHERE request_id = ANY($1)", [ids])).rows[0]
            .n as number;
        const answered = results.filter((r) => r.status === 200).length;
        const servedBy: Record<string, number> = {};
        for (const r of results) if (r.servedBy) servedBy[r.servedBy] = (servedBy[r.servedBy] ?? 0) + 1;
        const failed = n - answered;
        return {
            requests: n,
            servedBy,
            failed,
            metered,
            lost: failed + Math.max(0, answered - metered),
            doubleCounted: Math.max(0, metered - answered),
            recoverySeconds:
                goneAt !== undefined && firstServedByPeerAt !== undefined ? Math.max(0, firstServedByPeerAt - goneAt) / 1000 : null,
            detail: `${n} requests to hn1, its endpoint gone after ${Math.floor(n / 2)}: served ${Object.entries(servedBy)
                .map(([s, x]) => `${x} by ${s}`)
                .join(", ")}; ${failed} failed; ${metered} metered`,
        };
    } finally {
        await two.stop();
    }
}
