import type { Endpoint } from "../config/endpoint";
import type { decideAdvance } from "../lib/rollout";
/**
 * Frontend series as the Dynamo frontend exports them (upstream/rollout.ts `frontendGateSeries`, the `dynamo_namespace`
 * target label lib/observability.ts relabels), as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`:
 * shared by the rollout tests that start a real Prometheus (test/prometheus-server.ts).
 */

/** Bucket bounds doubling, so "twice as slow" is one bucket up. */
const LE = [0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2];
/** Cumulative share of requests at or below each bound (base latency); +Inf is 1. */
const CDF = [0.02, 0.1, 0.4, 0.8, 0.96, 0.99, 1, 1];

export interface Rev {
    ns: string;
    /** Requests per second over the data. */
    rps: number;
    /** Share answered with status error. */
    errorShare?: number;
    /** Latency as 2^slow of the base (shifts the histogram by `slow` buckets). */
    slow?: number;
    /** Leave out the TTFT histogram (a missing series). */
    noTtft?: boolean;
    /** The frontend reports a registered worker (health gate). */
    ready?: boolean;
    /** The requests per second change at this time (seconds since the epoch): `rpsBefore` until then, `rps` after. */
    switchAt?: number;
    rpsBefore?: number;
    /**
     * Requests per second piecewise: from each `[time, rps]` (seconds since the epoch, ascending) until the next; `rps`
     * before the first. Overrides `switchAt`.
     */
    segments?: Array<[number, number]>;
}

/** Requests a revision answered from START to `t` (the counter's value). */
function countAt(r: Rev, t: number): number {
    if (r.segments) {
        let n = 0;
        let from = START;
        let rate = r.rps;
        for (const [at, rps] of r.segments) {
            if (at >= t) break;
            n += rate * (Math.max(at, START) - from);
            from = Math.max(at, START);
            rate = rps;
        }
        return Math.round(n + rate * (t - from));
    }
    return Math.round(
        r.switchAt === undefined || t <= r.switchAt
            ? (r.switchAt === undefined ? r.rps : r.rpsBefore!) * (t - START)
            : r.rpsBefore! * (r.switchAt - START) + r.rps * (t - r.switchAt),
    );
}

const STEP = 15;
/** End of the data: 30 min ago, whole minute (seconds since the epoch). */
export const END = Math.floor(Date.now() / 60_000) * 60 - 30 * 60;
/** Start of the data: 40 minutes before {@link END}. */
export const START = END - 40 * 60;

/** OpenMetrics text for the revisions' frontend series from START to END every 15 s. */
export function openMetrics(revs: Rev[]): string {
    const lines: string[] = [];
    const times: number[] = [];
    for (let t = START; t <= END; t += STEP) times.push(t);
    const n = countAt;
    lines.push("# TYPE dynamo_frontend_requests counter");
    for (const r of revs)
        for (const status of ["success", "error"]) {
            if (status === "error" && !r.errorShare) continue;
            const share = status === "error" ? r.errorShare! : 1 - (r.errorShare ?? 0);
            for (const t of times)
                lines.push(
                    `dynamo_frontend_requests_total{dynamo_namespace="${r.ns}",model="m",status="${status}"} ${Math.round(n(r, t) * share)} ${t}`,
                );
        }
    for (const fam of ["dynamo_frontend_time_to_first_token_seconds", "dynamo_frontend_inter_token_latency_seconds"]) {
        lines.push(`# TYPE ${fam} histogram`);
        for (const r of revs) {
            if (r.noTtft && fam.includes("first_token")) continue;
            const shift = r.slow ?? 0;
            const cdf = LE.map((_, i) => (i - shift >= 0 ? CDF[i - shift] : 0));
            const lab = `dynamo_namespace="${r.ns}",model="m"`;
            for (const t of times) {
                const c = n(r, t);
                LE.forEach((le, i) => lines.push(`${fam}_bucket{${lab},le="${le}"} ${Math.round(c * cdf[i])} ${t}`));
                lines.push(`${fam}_bucket{${lab},le="+Inf"} ${c} ${t}`);
                lines.push(`${fam}_count{${lab}} ${c} ${t}`);
                lines.push(`${fam}_sum{${lab}} ${(c * 0.3 * 2 ** shift).toFixed(3)} ${t}`);
            }
        }
    }
    lines.push("# TYPE dynamo_frontend_model_total_kv_blocks gauge");
    for (const r of revs.filter((x) => x.ready))
        for (const t of times) lines.push(`dynamo_frontend_model_total_kv_blocks{dynamo_namespace="${r.ns}",model="m"} 4096 ${t}`);
    lines.push("# EOF");
    return `${lines.join("\n")}\n`;
}

/** A passing gate verdict, for driving states with `decideAdvance` (lib/rollout.ts). */
export const PASS = {
    verdict: "pass" as const,
    reasons: ["ok"],
    range: { from: "", to: "", seconds: 900 },
    source: { dynamoNamespace: "s" },
    target: { dynamoNamespace: "t" },
    queries: [],
    applied: { applied: true, from: "", latestShare: 0.1, query: "" },
};

/** A passing promotion soak (the 100% step judged alone, lib/rollout.ts `evaluatePromotion`), for driving the promotion. */
export const SOAK_PASS = { ...PASS, judged: "soak" as const, applied: { ...PASS.applied, latestShare: 1 } };

/** The endpoint after an edit the command line would write (state, promotion or removal). */
export function applied(e: Endpoint, d: ReturnType<typeof decideAdvance>): Endpoint {
    const x = structuredClone(e) as any;
    if (d.edit.kind === "state") x.rollout.state = d.edit.state;
    else if (d.edit.kind === "promote") {
        Object.assign(x, d.edit.settings);
        x.revision = d.edit.revision;
        delete x.rollout;
    } else if (d.edit.kind === "remove") delete x.rollout;
    return x;
}
