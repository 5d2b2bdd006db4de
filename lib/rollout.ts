/**
 * Gated canary rollouts of an endpoint (config/rollout.ts, docs/rollout.md), as pure functions: the revisions a
 * placement renders and their weights, the state machine `npm run rollout` drives, the ordering rules between two
 * consecutive renders, the gate over the spoke's Prometheus, and the edit of the hub stack file.
 *
 * Ordering: every state below is one reviewed `pulumi up`, and two consecutive states never change capacity and
 * traffic together. Shifting up, capacity goes first (`warming`: the target's graph is added at weight 0; the health
 * gate then lets traffic follow); shifting down, traffic goes first (the last step puts the source at weight 0 before
 * promotion removes its graph; `aborting` puts the target at weight 0 before the next abort removes its graph).
 *
 * Judgement: each step below 100% is judged by comparing the target with the source ({@link evaluateGate}); the 100%
 * step, where the source has no traffic, by a soak of the target alone ({@link evaluatePromotion}), after which the
 * promotion makes the target the endpoint's settings under the same graph name `<revision>-<endpoint>`.
 */
import YAML, { type Document, isMap, isSeq, type YAMLMap } from "yaml";
import type { Endpoint, Rollout } from "../config/endpoint";
import { dgdName, type RolloutGate, type RolloutState, sourceEndpoint, targetEndpoint } from "../config/rollout";
import { frontendGateSeries, stepAppliedSignal } from "../upstream/rollout";
import { INFERENCE_NAMESPACE } from "./labels";
import type { RolloutAnnotationEntry, RolloutRevisionEntry } from "./labels";

export { dgdName, rolloutHubIssues, sourceEndpoint, targetEndpoint } from "../config/rollout";
export { REVISION_LABEL, REVISION_OF_LABEL, ROLLOUT_ANNOTATION } from "./labels";

/**
 * The Dynamo namespace the operator gives a graph's components: `<Kubernetes namespace>-<DGD name>` with dots replaced
 * by `-` (upstream/rollout.ts `dynamoNamespaceFact`). The frontends' series carry it as `dynamo_namespace`
 * (lib/observability.ts relabels the pod label onto the target).
 */
export function dynamoNamespace(dgd: string, k8sNamespace = INFERENCE_NAMESPACE): string {
    return `${k8sNamespace}-${dgd.replaceAll(".", "-")}`;
}

/** The state a rollout is in; a rollout just added by a person is `warming` (no `state` written yet). */
export function stateOf(r: Rollout): RolloutState | { phase: "warming"; since?: undefined; targetReady?: boolean } {
    return r.state ?? { phase: "warming" };
}

/** One revision of an endpoint as a spoke renders it. */
export interface RenderedRevision {
    /** The logical endpoint (hub `platform:endpoints[].name`). */
    endpoint: string;
    /** The endpoint settings this revision runs, with `name` = its DynamoGraphDeployment name. */
    graph: Endpoint;
    revision: string | undefined;
    role: "source" | "target";
    /** Percent of the model's traffic (0-100); `undefined` outside a rollout (no weight is rendered). */
    weight: number | undefined;
    ready: boolean;
}

/**
 * The revisions an endpoint renders: one graph outside a rollout; during one, the source and target graphs side by
 * side with the weights of the current state (warming: 100/0; shifting step k: 100-steps[k]/steps[k]; aborting: 100/0).
 */
export function revisionsOf(e: Endpoint): RenderedRevision[] {
    const src = sourceEndpoint(e);
    const srcDgd = dgdName(e.name, e.revision);
    if (!e.rollout)
        return [
            { endpoint: e.name, graph: { ...src, name: srcDgd }, revision: e.revision, role: "source", weight: undefined, ready: true },
        ];
    const st = stateOf(e.rollout);
    const toTarget = st.phase === "shifting" ? e.rollout.steps[st.step ?? 0] : 0;
    const tgt = targetEndpoint(e);
    return [
        { endpoint: e.name, graph: { ...src, name: srcDgd }, revision: e.revision, role: "source", weight: 100 - toTarget, ready: true },
        {
            endpoint: e.name,
            graph: { ...tgt, name: dgdName(e.name, e.rollout.revision) },
            revision: e.rollout.revision,
            role: "target",
            weight: toTarget,
            ready: !!st.targetReady,
        },
    ];
}

/** Every graph a spoke renders for its placed endpoints (both revisions of a rollout), in placement order. */
export function renderedRevisions(endpoints: readonly Endpoint[]): RenderedRevision[] {
    return endpoints.flatMap(revisionsOf);
}

/** The route annotation entry of each endpoint under a rollout ({@link ROLLOUT_ANNOTATION}). */
export function rolloutAnnotation(endpoints: readonly Endpoint[]): RolloutAnnotationEntry[] {
    return endpoints
        .filter((e) => e.rollout)
        .map((e) => {
            const st = stateOf(e.rollout!);
            const revs = revisionsOf(e).map(
                (r): RolloutRevisionEntry => ({ dgd: r.graph.name, role: r.role, weight: r.weight ?? 0, ready: r.ready }),
            );
            return {
                endpoint: e.name,
                model: e.model,
                phase: st.phase,
                ...(st.phase === "shifting" ? { step: (st as RolloutState).step } : {}),
                steps: [...e.rollout!.steps],
                revisions: [revs[0], revs[1]],
            };
        });
}

/* ---------------------------------------------------------------- ordering rules between consecutive renders */

/** What the ordering rules see of one render: per graph, whether it has capacity and the traffic percent it gets. */
export type RenderView = Map<string, { capacity: boolean; weight: number }>;

/** The view of an endpoint's render (graphs present have capacity; weight 100 outside a rollout). */
export function viewOf(e: Endpoint | undefined): RenderView {
    const v: RenderView = new Map();
    if (e) for (const r of revisionsOf(e)) v.set(r.graph.name, { capacity: true, weight: r.weight ?? 100 });
    return v;
}

/**
 * Why going from render `a` to render `b` breaks the ordering rules (empty when it does not): a graph carrying
 * traffic in `b` has capacity in `b` and had it in `a` already (capacity before traffic); a graph losing capacity
 * carried no traffic in `a` (traffic before capacity); and no state changes capacity and traffic together.
 */
export function transitionProblems(a: RenderView, b: RenderView): string[] {
    const out: string[] = [];
    const names = new Set([...a.keys(), ...b.keys()]);
    let capacityChanged = false;
    let trafficChanged = false;
    for (const n of names) {
        const x = a.get(n) ?? { capacity: false, weight: 0 };
        const y = b.get(n) ?? { capacity: false, weight: 0 };
        if (x.capacity !== y.capacity) capacityChanged = true;
        if (x.weight !== y.weight) trafficChanged = true;
        if (y.weight > 0 && !y.capacity) out.push(`${n} gets ${y.weight}% of the traffic but has no capacity`);
        if (y.weight > x.weight && !x.capacity) out.push(`${n} gets traffic in the same step its capacity is added`);
        if (!y.capacity && x.capacity && x.weight > 0) out.push(`${n} loses its capacity while still carrying ${x.weight}% of the traffic`);
    }
    if (capacityChanged && trafficChanged) out.push("capacity and traffic change in one step");
    return out;
}

/* ---------------------------------------------------------------- the gate */

/** A gate evaluation's measurements of one revision (undefined: no series). */
export interface RevisionMeasure {
    dynamoNamespace: string;
    requests?: number;
    errors?: number;
    errorRate?: number;
    ttftP95Seconds?: number;
    itlP99Seconds?: number;
}

/** The result of {@link evaluateGate}. */
export interface GateResult {
    /**
     * What was judged: `comparison`, the target against the source on a step below 100% ({@link evaluateGate});
     * `soak`, the target alone at the 100% step before promotion ({@link evaluatePromotion}). Absent: comparison.
     */
    judged?: "comparison" | "soak";
    verdict: "pass" | "hold" | "wait";
    /** Why, one line per finding. */
    reasons: string[];
    /** The step's traffic read: from the step's start to `now - ingestDelay`, seconds. */
    range: { from: string; to: string; seconds: number };
    source: RevisionMeasure;
    target: RevisionMeasure;
    /** The PromQL queries run, for the report. */
    queries: string[];
    /**
     * Whether the spoke serves the step's weights ({@link stepApplied}): `from` is when the target's served share last
     * crossed to the step's side (the window starts there or at the step's `since`, whichever is later).
     */
    applied: StepApplied;
}

/** The traffic split a step writes: the target's percent in this step and in the state before it. */
export interface StepWeights {
    /** Percent of the model's traffic the current step gives the target (`steps[k]`). */
    step: number;
    /** Percent the target had before this step (`steps[k-1]`, 0 for the first step). */
    previous: number;
}

/** Inputs of {@link evaluateGate}. */
export interface GateInput {
    /** Base URL of the spoke's Prometheus (`http://host:9090`). */
    prometheusUrl: string;
    gate: RolloutGate;
    sourceDgd: string;
    targetDgd: string;
    /** When the current step was written to the hub file (the gate reads only traffic after it was applied). */
    since: Date;
    /** The step's weights: the gate reads only traffic after the spoke serves them ({@link stepApplied}). */
    weights: StepWeights;
    now: Date;
    /** Kubernetes namespace of the graphs (default the inference namespace). */
    k8sNamespace?: string;
}

/**
 * One Prometheus HTTP API query (`GET /api/v1/<endpoint>?<params>`).
 * @returns the result vector or matrix (empty when there is none)
 * @throws Error when Prometheus cannot be reached or answers an error (naming `query`)
 */
async function promApi<T>(baseUrl: string, endpoint: "query" | "query_range", params: string, query: string): Promise<T[]> {
    let res: Response;
    try {
        res = await fetch(`${baseUrl.replace(/\/$/, "")}/api/v1/${endpoint}?${params}`);
    } catch (e) {
        throw new Error(`cannot reach Prometheus at ${baseUrl}: ${(e as Error).message}`);
    }
    const body = (await res.json().catch(() => ({}))) as { status?: string; error?: string; data?: { result?: T[] } };
    if (!res.ok || body.status !== "success") throw new Error(`Prometheus ${baseUrl} refused ${query}: ${body.error ?? res.status}`);
    return body.data?.result ?? [];
}

/**
 * Runs one instant PromQL query over the Prometheus HTTP API (`GET /api/v1/query`).
 * @returns the scalar value of the single result, or undefined when the result vector is empty or NaN
 * @throws Error when Prometheus cannot be reached or answers an error
 */
export async function promQuery(baseUrl: string, query: string, at: Date): Promise<number | undefined> {
    const r = await promApi<{ value: [number, string] }>(
        baseUrl,
        "query",
        `query=${encodeURIComponent(query)}&time=${at.getTime() / 1000}`,
        query,
    );
    if (r.length === 0) return undefined;
    const v = Number(r[0].value[1]);
    return Number.isNaN(v) ? undefined : v;
}

/** The PromQL of one revision's gate figures over `range` seconds (selected by Dynamo namespace). */
export function gateQueries(ns: string, rangeSeconds: number) {
    const sel = `dynamo_namespace="${ns}"`;
    const r = `[${rangeSeconds}s]`;
    const s = frontendGateSeries;
    return {
        requests: `sum(increase(${s.requests}{${sel}}${r}))`,
        errors: `sum(increase(${s.requests}{${sel},${s.statusLabel}="${s.errorStatus}"}${r}))`,
        ttftP95: `histogram_quantile(0.95, sum by (le) (increase(${s.ttft}_bucket{${sel}}${r})))`,
        itlP99: `histogram_quantile(0.99, sum by (le) (increase(${s.itl}_bucket{${sel}}${r})))`,
    };
}

/** The weights of step `k` of `steps` (the first step's previous weight is 0: warming sent the target nothing). */
export function stepWeights(steps: readonly number[], k: number): StepWeights {
    return { step: steps[k], previous: k > 0 ? steps[k - 1] : 0 };
}

/**
 * Runs a PromQL range query over the Prometheus HTTP API (`GET /api/v1/query_range`).
 * @returns the single result's points as [seconds since the epoch, value] (NaN kept as NaN); empty without a result
 * @throws Error when Prometheus cannot be reached or answers an error
 */
export async function promQueryRange(
    baseUrl: string,
    query: string,
    from: Date,
    to: Date,
    stepSeconds: number,
): Promise<Array<[number, number]>> {
    const q = `query=${encodeURIComponent(query)}&start=${from.getTime() / 1000}&end=${to.getTime() / 1000}&step=${stepSeconds}`;
    const r = await promApi<{ values: Array<[number, string]> }>(baseUrl, "query_range", q, query);
    return r.length === 0 ? [] : r[0].values.map(([t, v]) => [Number(t), Number(v)] as [number, number]);
}

/**
 * Seconds of traffic each point of the applied check reads ({@link stepApplied}): two minutes, so a point holds
 * several scrapes at the usual 15-30 s interval.
 */
export const APPLIED_SHARE_WINDOW_SECONDS = 120;
/** Resolution of the applied check's range query, seconds. */
export const APPLIED_SHARE_STEP_SECONDS = 30;

/**
 * PromQL of the share of the model's requests the target revision's frontend answered over the last `windowSeconds`
 * (upstream/rollout.ts `stepAppliedSignal`): target / (target + source), NaN when neither answered any.
 */
export function appliedShareQuery(sourceNs: string, targetNs: string, windowSeconds = APPLIED_SHARE_WINDOW_SECONDS): string {
    const rate = (ns: string) => `(sum(rate(${frontendGateSeries.requests}{dynamo_namespace="${ns}"}[${windowSeconds}s])) or vector(0))`;
    return `${rate(targetNs)} / (${rate(targetNs)} + ${rate(sourceNs)})`;
}

/** Whether the spoke serves a step's weights (the result of {@link stepApplied}). */
export interface StepApplied {
    /** True when the latest point's share is on the step's side. */
    applied: boolean;
    /** Start of the last run of points on the step's side up to the end of the range (the window starts here). */
    from?: string;
    /** Target share (0-1) at the latest point; undefined when neither revision answered a request. */
    latestShare?: number;
    /** The PromQL run. */
    query: string;
}

/**
 * Whether the spoke applied a step: the route's new weights show in the traffic each revision's frontend answers
 * (upstream/rollout.ts `stepAppliedSignal`), not in the hub file. A point (the share over the
 * {@link APPLIED_SHARE_WINDOW_SECONDS} before it, every {@link APPLIED_SHARE_STEP_SECONDS} from `since` to `to`) is on
 * the step's side when the target's share is nearer the step's weight than the previous state's (so 10% -> 25% is
 * applied from a share above 17.5%); a point without traffic is not. Applied from the first point of the last run of
 * such points reaching `to`: a burst before the spoke's `pulumi up` that happened to look like the new split is
 * followed by points on the old side and so never opens the window.
 * @throws Error when Prometheus cannot be reached
 */
export async function stepApplied(x: {
    prometheusUrl: string;
    sourceNs: string;
    targetNs: string;
    weights: StepWeights;
    since: Date;
    to: Date;
}): Promise<StepApplied> {
    const query = appliedShareQuery(x.sourceNs, x.targetNs);
    if (x.to.getTime() <= x.since.getTime()) return { applied: false, query };
    const points = await promQueryRange(x.prometheusUrl, query, x.since, x.to, APPLIED_SHARE_STEP_SECONDS);
    const want = x.weights.step / 100;
    const before = x.weights.previous / 100;
    const onStep = (v: number) => Number.isFinite(v) && Math.abs(v - want) < Math.abs(v - before);
    const last = points[points.length - 1];
    // The range query's last point is at or before `to`; a range without one reaching within a step of `to` has no
    // recent traffic to judge.
    if (!last || last[0] * 1000 < x.to.getTime() - APPLIED_SHARE_STEP_SECONDS * 1000 || !onStep(last[1]))
        return { applied: false, latestShare: last && Number.isFinite(last[1]) ? last[1] : undefined, query };
    let i = points.length - 1;
    while (i > 0 && onStep(points[i - 1][1]) && points[i][0] - points[i - 1][0] <= APPLIED_SHARE_STEP_SECONDS) i--;
    return { applied: true, from: new Date(points[i][0] * 1000).toISOString(), latestShare: last[1], query };
}

/** PromQL of the health gate: a worker of the graph registered with its frontend (KV blocks reported). */
export function readyQuery(ns: string): string {
    return `max(${frontendGateSeries.ready}{dynamo_namespace="${ns}"})`;
}

const fmtS = (x: number | undefined) => (x === undefined ? "none" : `${(x * 1000).toFixed(0)} ms`);
const fmtPct = (x: number | undefined) => (x === undefined ? "none" : `${(x * 100).toFixed(2)}%`);

/**
 * Evaluates a rollout gate for the current step only: the step's traffic from when the spoke serves it
 * ({@link stepApplied}, never before `since`, when the step was written to the hub file) to `now - ingestDelay`.
 * Verdicts, in order:
 * - `wait`: the spoke does not serve the step's weights yet (not applied, or no traffic to tell);
 * - `wait`: the step's readable traffic is shorter than `windowSeconds`;
 * - `hold`: a series is missing for either revision (requests, TTFT or ITL histogram): a gate never passes on
 *   missing data;
 * - `wait`: either revision answered fewer than `minRequests` requests in the step;
 * - `hold`: TTFT p95 or ITL p99 target/source ratio above its limit, or target error rate above the source's by more
 *   than `errorRateDelta`;
 * - `pass` otherwise.
 * Error requests are the frontend's `status="error"` requests; no such series with a requests series present means
 * none failed.
 * @throws Error when Prometheus cannot be reached (no verdict is invented)
 */
export async function evaluateGate(x: GateInput): Promise<GateResult> {
    const g = x.gate;
    const to = new Date(x.now.getTime() - g.ingestDelaySeconds * 1000);
    const srcNs = dynamoNamespace(x.sourceDgd, x.k8sNamespace);
    const tgtNs = dynamoNamespace(x.targetDgd, x.k8sNamespace);
    const applied = await stepApplied({
        prometheusUrl: x.prometheusUrl,
        sourceNs: srcNs,
        targetNs: tgtNs,
        weights: x.weights,
        since: x.since,
        to,
    });
    const queries: string[] = [applied.query];
    if (!applied.applied) return notApplied(x, to, applied, "comparison");
    const { range, seconds, measure } = stepRange(x, to, applied, queries);
    const source = await measure(x.sourceDgd);
    const target = await measure(x.targetDgd);
    const done = (verdict: GateResult["verdict"], reasons: string[]): GateResult => ({
        judged: "comparison",
        verdict,
        reasons,
        range,
        source,
        target,
        queries,
        applied,
    });
    if (seconds < g.windowSeconds)
        return done("wait", [
            `the step has ${Math.max(seconds, 0)} s of readable traffic since the spoke serves it (from ${range.from}, less the ${g.ingestDelaySeconds} s ingest delay); the gate needs ${g.windowSeconds} s`,
        ]);
    const missing: string[] = [];
    for (const [role, m] of [
        ["source", source],
        ["target", target],
    ] as const) {
        if (m.requests === undefined) missing.push(`${role} (${m.dynamoNamespace}): no ${frontendGateSeries.requests}`);
        if (m.ttftP95Seconds === undefined && (m.requests ?? 0) >= g.minRequests)
            missing.push(`${role} (${m.dynamoNamespace}): no ${frontendGateSeries.ttft} histogram`);
        if (m.itlP99Seconds === undefined && (m.requests ?? 0) >= g.minRequests)
            missing.push(`${role} (${m.dynamoNamespace}): no ${frontendGateSeries.itl} histogram`);
    }
    if (missing.length)
        return done(
            "hold",
            missing.map((s) => `missing series: ${s}; a gate never passes without its data`),
        );
    const few = (
        [
            ["source", source],
            ["target", target],
        ] as const
    )
        .filter(([, m]) => (m.requests ?? 0) < g.minRequests)
        .map(([role, m]) => `${role} answered ${Math.round(m.requests ?? 0)} requests in the step; the gate needs ${g.minRequests}`);
    if (few.length) return done("wait", few);
    const reasons: string[] = [];
    const ratio = (t: number, s: number) => (s > 0 ? t / s : t > 0 ? Number.POSITIVE_INFINITY : 1);
    const ttft = ratio(target.ttftP95Seconds!, source.ttftP95Seconds!);
    const itl = ratio(target.itlP99Seconds!, source.itlP99Seconds!);
    const dErr = (target.errorRate ?? 0) - (source.errorRate ?? 0);
    if (ttft > g.ttftP95Ratio)
        reasons.push(
            `TTFT p95 ${fmtS(target.ttftP95Seconds)} vs ${fmtS(source.ttftP95Seconds)}: ratio ${ttft.toFixed(2)} above ${g.ttftP95Ratio}`,
        );
    if (itl > g.itlP99Ratio)
        reasons.push(
            `ITL p99 ${fmtS(target.itlP99Seconds)} vs ${fmtS(source.itlP99Seconds)}: ratio ${itl.toFixed(2)} above ${g.itlP99Ratio}`,
        );
    if (dErr > g.errorRateDelta)
        reasons.push(
            `error rate ${fmtPct(target.errorRate)} vs ${fmtPct(source.errorRate)}: ${(dErr * 100).toFixed(2)} points above, limit ${(g.errorRateDelta * 100).toFixed(2)}`,
        );
    if (reasons.length) return done("hold", reasons);
    return done("pass", [
        `TTFT p95 ratio ${ttft.toFixed(2)} (≤ ${g.ttftP95Ratio}), ITL p99 ratio ${itl.toFixed(2)} (≤ ${g.itlP99Ratio}), error rate ${fmtPct(target.errorRate)} vs ${fmtPct(source.errorRate)}; ${Math.round(target.requests!)} / ${Math.round(source.requests!)} requests`,
    ]);
}

/** The `wait` of a step the spoke does not serve yet ({@link stepApplied}): the share seen, and what to run. */
function notApplied(x: GateInput, to: Date, applied: StepApplied, judged: GateResult["judged"]): GateResult {
    const seen =
        applied.latestShare === undefined
            ? "neither revision's frontend answered a request in the readable range"
            : `the target's frontend answered ${(applied.latestShare * 100).toFixed(1)}% of the requests in the ${APPLIED_SHARE_WINDOW_SECONDS} s before ${to.toISOString()}`;
    return {
        judged,
        verdict: "wait",
        reasons: [
            `the spoke does not serve this step yet: ${seen}, nearer the previous ${x.weights.previous}% than the step's ${x.weights.step}% (${stepAppliedSignal.source}); the step was written to the hub file at ${x.since.toISOString()}: run \`pulumi up\` on the hub and the spoke, and the gate's window starts once the spoke serves the new weights`,
        ],
        range: { from: x.since.toISOString(), to: to.toISOString(), seconds: 0 },
        source: { dynamoNamespace: dynamoNamespace(x.sourceDgd, x.k8sNamespace) },
        target: { dynamoNamespace: dynamoNamespace(x.targetDgd, x.k8sNamespace) },
        queries: [applied.query],
        applied,
    };
}

/**
 * The range a judgement reads once the spoke serves the step: from the later of the step's `since` and the applied
 * time to `to`, and a reader of one revision's figures over it (queries appended to `queries`).
 */
function stepRange(x: GateInput, to: Date, applied: StepApplied, queries: string[]) {
    const start = new Date(Math.max(x.since.getTime(), new Date(applied.from!).getTime()));
    const seconds = Math.floor((to.getTime() - start.getTime()) / 1000);
    const range = { from: start.toISOString(), to: to.toISOString(), seconds };
    const measure = async (dgd: string, only?: "requests"): Promise<RevisionMeasure> => {
        const ns = dynamoNamespace(dgd, x.k8sNamespace);
        const m: RevisionMeasure = { dynamoNamespace: ns };
        if (seconds < 1) return m;
        const q = gateQueries(ns, seconds);
        queries.push(...(only ? [q.requests] : Object.values(q)));
        m.requests = await promQuery(x.prometheusUrl, q.requests, to);
        if (only) return m;
        const errors = await promQuery(x.prometheusUrl, q.errors, to);
        m.errors = m.requests === undefined ? undefined : (errors ?? 0);
        m.errorRate = m.requests ? (m.errors ?? 0) / m.requests : undefined;
        m.ttftP95Seconds = await promQuery(x.prometheusUrl, q.ttftP95, to);
        m.itlP99Seconds = await promQuery(x.prometheusUrl, q.itlP99, to);
        return m;
    };
    return { range, seconds, measure };
}

/**
 * Evaluates the 100% step before promotion: the source carries no traffic there, so nothing compares; the target is
 * judged alone (the gate's `promotion` soak) over its traffic from when the spoke serves the step ({@link stepApplied}
 * with the weights `previous` -> 100, never before `since`) to `now - ingestDelay`. Verdicts, in order:
 * - `wait`: the spoke does not serve the 100% step yet;
 * - `wait`: the readable traffic is shorter than `promotion.soakSeconds`;
 * - `hold`: the target's requests series, or (with enough requests) its TTFT or ITL histogram, is missing;
 * - `wait`: the target answered fewer than `promotion.minRequests`;
 * - `hold`: the target's error rate above `promotion.maxErrorRate`, or its TTFT p95 / ITL p99 above the optional
 *   absolute bounds;
 * - `pass` otherwise: the rollout may be promoted.
 * The source's requests over the soak are read for the report only.
 * @throws Error when Prometheus cannot be reached (no verdict is invented)
 */
export async function evaluatePromotion(x: GateInput): Promise<GateResult> {
    const g = x.gate;
    const p = g.promotion;
    const to = new Date(x.now.getTime() - g.ingestDelaySeconds * 1000);
    const applied = await stepApplied({
        prometheusUrl: x.prometheusUrl,
        sourceNs: dynamoNamespace(x.sourceDgd, x.k8sNamespace),
        targetNs: dynamoNamespace(x.targetDgd, x.k8sNamespace),
        weights: x.weights,
        since: x.since,
        to,
    });
    if (!applied.applied) return notApplied(x, to, applied, "soak");
    const queries: string[] = [applied.query];
    const { range, seconds, measure } = stepRange(x, to, applied, queries);
    const target = await measure(x.targetDgd);
    const source = await measure(x.sourceDgd, "requests");
    const done = (verdict: GateResult["verdict"], reasons: string[]): GateResult => ({
        judged: "soak",
        verdict,
        reasons,
        range,
        source,
        target,
        queries,
        applied,
    });
    if (seconds < p.soakSeconds)
        return done("wait", [
            `the 100% step has ${Math.max(seconds, 0)} s of readable traffic since the spoke serves it (from ${range.from}, less the ${g.ingestDelaySeconds} s ingest delay); the promotion soak needs ${p.soakSeconds} s`,
        ]);
    const enough = (target.requests ?? 0) >= p.minRequests;
    const missing = [
        ...(target.requests === undefined ? [`no ${frontendGateSeries.requests}`] : []),
        ...(enough && target.ttftP95Seconds === undefined ? [`no ${frontendGateSeries.ttft} histogram`] : []),
        ...(enough && target.itlP99Seconds === undefined ? [`no ${frontendGateSeries.itl} histogram`] : []),
    ];
    if (missing.length)
        return done(
            "hold",
            missing.map((m) => `missing series: target (${target.dynamoNamespace}): ${m}; a promotion never passes without its data`),
        );
    if (!enough)
        return done("wait", [
            `target answered ${Math.round(target.requests ?? 0)} requests in the soak; the promotion needs ${p.minRequests}`,
        ]);
    const reasons: string[] = [];
    if ((target.errorRate ?? 0) > p.maxErrorRate)
        reasons.push(`error rate ${fmtPct(target.errorRate)} above the promotion's ${fmtPct(p.maxErrorRate)}`);
    if (p.ttftP95Seconds !== undefined && target.ttftP95Seconds! > p.ttftP95Seconds)
        reasons.push(`TTFT p95 ${fmtS(target.ttftP95Seconds)} above the promotion's ${fmtS(p.ttftP95Seconds)}`);
    if (p.itlP99Seconds !== undefined && target.itlP99Seconds! > p.itlP99Seconds)
        reasons.push(`ITL p99 ${fmtS(target.itlP99Seconds)} above the promotion's ${fmtS(p.itlP99Seconds)}`);
    if (reasons.length) return done("hold", reasons);
    const bound = (v: number | undefined, b: number | undefined) => `${fmtS(v)}${b === undefined ? "" : ` (≤ ${fmtS(b)})`}`;
    return done("pass", [
        `soak ${seconds} s at 100%: error rate ${fmtPct(target.errorRate)} (≤ ${fmtPct(p.maxErrorRate)}), TTFT p95 ${bound(target.ttftP95Seconds, p.ttftP95Seconds)}, ITL p99 ${bound(target.itlP99Seconds, p.itlP99Seconds)}; ${Math.round(target.requests!)} requests (source ${Math.round(source.requests ?? 0)})`,
    ]);
}

/** One line summarising a gate result (what the hub file's `lastGate.summary` keeps). */
export function gateSummary(r: GateResult): string {
    const m = (x: RevisionMeasure) =>
        `${Math.round(x.requests ?? 0)} req, TTFT p95 ${fmtS(x.ttftP95Seconds)}, ITL p99 ${fmtS(x.itlP99Seconds)}, errors ${fmtPct(x.errorRate)}`;
    const src = r.judged === "soak" ? `source ${Math.round(r.source.requests ?? 0)} req` : `source ${m(r.source)}`;
    return `${r.verdict}: ${r.reasons.join("; ")} [target ${m(r.target)} | ${src} | ${r.range.seconds} s from ${r.range.from}]`;
}

/* ---------------------------------------------------------------- the state machine */

/** An edit `npm run rollout` makes to one endpoint of the hub file. */
export type RolloutEdit =
    | { kind: "state"; state: RolloutState }
    /** The rollout completed: the endpoint takes the target's settings and revision; the rollout block goes. */
    | { kind: "promote"; settings: Record<string, unknown>; revision: string }
    /** The abort completed: the rollout block goes (the target's graph with it). */
    | { kind: "remove" }
    | { kind: "none" };

/** What the CLI decided and why. */
export interface Decision {
    edit: RolloutEdit;
    /** What the person reads. */
    message: string;
    /** Process exit code: 0 moved or nothing to do, 2 held, 3 waiting, 1 refused. */
    exitCode: 0 | 1 | 2 | 3;
}

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * `advance`: from warming, the health gate (`targetReady`: the target's frontend reports a registered worker) lets the
 * first step's traffic go; while shifting, the judgement of the step being left decides: below 100% the comparison
 * gate ({@link evaluateGate}), at 100% the promotion soak ({@link evaluatePromotion}); pass writes the next step (from
 * the 100% step, the promotion), hold holds with what was measured, wait writes only the verdict. A verdict of the
 * wrong kind for the step (`judged`) is refused. A held rollout moves only after a
 * person resumes it (`resume`); an aborting one only by `abort`.
 */
export function decideAdvance(e: Endpoint, now: Date, input: { targetReady?: boolean; gate?: GateResult }): Decision {
    const r = e.rollout!;
    const st = stateOf(r);
    if (st.phase === "aborting")
        return { edit: { kind: "none" }, message: `${e.name} is aborting: run abort again to remove the target revision`, exitCode: 1 };
    if ("held" in st && st.held)
        return {
            edit: { kind: "none" },
            message: `${e.name} is held since ${st.held.at} (${st.held.reason}): a person decides: resume or abort`,
            exitCode: 2,
        };
    if (st.phase === "warming") {
        if (!input.targetReady)
            return {
                edit: {
                    kind: "state",
                    state: {
                        phase: "warming",
                        since: st.since ?? iso(now),
                        lastGate: {
                            at: iso(now),
                            verdict: "wait",
                            summary: "wait: the target's frontend reports no registered worker yet",
                        },
                    },
                },
                message: `${e.name}: the target ${dgdName(e.name, r.revision)} has no ready capacity yet; no traffic is sent to it`,
                exitCode: 3,
            };
        return {
            edit: {
                kind: "state",
                state: {
                    phase: "shifting",
                    step: 0,
                    since: iso(now),
                    targetReady: true,
                    lastGate: { at: iso(now), verdict: "pass", summary: "pass: health gate, the target's workers are registered" },
                },
            },
            message: `${e.name}: target ready; step 1/${r.steps.length}: ${r.steps[0]}% to ${dgdName(e.name, r.revision)}`,
            exitCode: 0,
        };
    }
    const cur = st as RolloutState;
    const g = input.gate!;
    const lastGate = { at: iso(now), verdict: g.verdict, summary: gateSummary(g) };
    const k = cur.step ?? 0;
    const last = k + 1 === r.steps.length;
    if (last !== (g.judged === "soak"))
        return {
            edit: { kind: "none" },
            message: last
                ? `${e.name}: the 100% step is judged by the promotion soak (the target alone; the source carries no traffic to compare with), not by a comparison gate`
                : `${e.name}: step ${k + 1} (${r.steps[k]}%) is judged by the comparison gate; the promotion soak judges the 100% step only`,
            exitCode: 1,
        };
    if (g.verdict === "wait")
        return { edit: { kind: "state", state: { ...cur, lastGate } }, message: `${e.name}: ${gateSummary(g)}`, exitCode: 3 };
    if (g.verdict === "hold")
        return {
            edit: {
                kind: "state",
                state: {
                    ...cur,
                    lastGate,
                    held: { at: iso(now), reason: `${last ? "promotion soak" : "gate"} failed: ${g.reasons.join("; ")}` },
                },
            },
            message: `${e.name}: HELD at ${r.steps[k]}%: ${gateSummary(g)}`,
            exitCode: 2,
        };
    if (k + 1 < r.steps.length)
        return {
            edit: { kind: "state", state: { phase: "shifting", step: k + 1, since: iso(now), targetReady: true, lastGate } },
            message: `${e.name}: step ${k + 2}/${r.steps.length}: ${r.steps[k + 1]}% to ${dgdName(e.name, r.revision)}${k + 2 === r.steps.length ? `; once applied, promote soaks the target alone (${r.gate.promotion.soakSeconds} s) before the source graph goes` : ""}`,
            exitCode: 0,
        };
    return {
        edit: { kind: "promote", settings: { ...r.target }, revision: r.revision },
        message: `${e.name}: the 100% step passed its soak; promoted revision ${r.revision}: the endpoint runs the target's settings as revision ${r.revision}, its graph ${dgdName(e.name, r.revision)} keeps its name (no capacity gap), and the source graph ${dgdName(e.name, e.revision)} goes (it carries no traffic)`,
        exitCode: 0,
    };
}

/**
 * `promote`: the 100% step's transition, named. The same as `advance` at the 100% step (the soak of
 * {@link evaluatePromotion}, then the promotion); refused at any other step or phase.
 */
export function decidePromote(e: Endpoint, now: Date, input: { gate?: GateResult }): Decision {
    const r = e.rollout!;
    const st = stateOf(r);
    const k = st.phase === "shifting" ? ((st as RolloutState).step ?? 0) : -1;
    if (k + 1 !== r.steps.length)
        return {
            edit: { kind: "none" },
            message: `${e.name} is ${st.phase === "shifting" ? `at step ${k + 1}/${r.steps.length} (${r.steps[k]}%)` : st.phase}: promote is the transition from the 100% step; run advance until the rollout reaches it`,
            exitCode: 1,
        };
    return decideAdvance(e, now, input);
}

/** `hold`: stops the rollout where it is until a person resumes or aborts. */
export function decideHold(e: Endpoint, now: Date, reason: string): Decision {
    const st = stateOf(e.rollout!);
    const base: RolloutState = st.since ? (st as RolloutState) : { phase: "warming", since: iso(now) };
    return {
        edit: { kind: "state", state: { ...base, held: { at: iso(now), reason } } },
        message: `${e.name}: held (${reason})`,
        exitCode: 0,
    };
}

/** `resume`: a person lifts a hold; the current step starts again (its gate reads only traffic from now on). */
export function decideResume(e: Endpoint, now: Date): Decision {
    const st = stateOf(e.rollout!);
    if (!("held" in st) || !st.held) return { edit: { kind: "none" }, message: `${e.name} is not held`, exitCode: 1 };
    const { held: _h, ...rest } = st as RolloutState;
    return {
        edit: { kind: "state", state: { ...rest, since: iso(now) } },
        message: `${e.name}: resumed; the step's window restarts`,
        exitCode: 0,
    };
}

/**
 * `abort`: traffic goes back before capacity. From a step carrying traffic: every request back to the source
 * (`aborting`, both graphs kept). From warming (no traffic on the target) or aborting: the rollout block goes, and
 * with it the target's graph.
 */
export function decideAbort(e: Endpoint, now: Date): Decision {
    const st = stateOf(e.rollout!);
    if (st.phase === "shifting")
        return {
            edit: { kind: "state", state: { phase: "aborting", since: iso(now), targetReady: st.targetReady } },
            message: `${e.name}: aborting: all traffic back to ${dgdName(e.name, e.revision)}; run abort again after this is applied to remove ${dgdName(e.name, e.rollout!.revision)}`,
            exitCode: 0,
        };
    return { edit: { kind: "remove" }, message: `${e.name}: rollout removed; ${dgdName(e.name, e.rollout!.revision)} goes`, exitCode: 0 };
}

/* ---------------------------------------------------------------- the hub file */

/** The key of the endpoints list in a hub stack file. */
const ENDPOINTS_KEY = "platform:endpoints";

/**
 * Applies an edit to the hub stack file's text with the `yaml` Document API, so comments and layout elsewhere stay.
 * @param index the endpoint's index in `platform:endpoints`
 * @throws Error naming the file when the document has no such endpoint
 */
export function applyEdit(text: string, file: string, index: number, edit: RolloutEdit): string {
    if (edit.kind === "none") return text;
    const doc: Document = YAML.parseDocument(text);
    const list = doc.getIn(["config", ENDPOINTS_KEY]);
    const ep = isSeq(list) ? list.items[index] : undefined;
    if (!isMap(ep)) throw new Error(`${file}: config.${ENDPOINTS_KEY}[${index}] is not an endpoint map`);
    const m = ep as YAMLMap;
    if (edit.kind === "state") {
        const ro = m.get("rollout", true);
        if (!isMap(ro)) throw new Error(`${file}: config.${ENDPOINTS_KEY}[${index}].rollout is missing`);
        const node = doc.createNode(edit.state);
        node.flow = false;
        (ro as YAMLMap).set("state", node);
    } else if (edit.kind === "promote") {
        for (const [k, v] of Object.entries(edit.settings)) m.set(k, doc.createNode(v));
        m.set("revision", edit.revision);
        m.delete("rollout");
    } else {
        m.delete("rollout");
    }
    return doc.toString({ lineWidth: 0 });
}

/**
 * Finds the endpoint a CLI argument names: `<spoke>/<endpoint>`, or `<endpoint>` when exactly one endpoint of that
 * name has a rollout (or exists).
 * @returns its index in the hub's endpoints, or an error message
 */
export function findEndpoint(endpoints: readonly Endpoint[], arg: string): { index: number } | { error: string } {
    const [spoke, name] = arg.includes("/") ? arg.split("/", 2) : [undefined, arg];
    const hits = endpoints.map((e, i) => ({ e, i })).filter(({ e }) => e.name === name && (!spoke || e.spoke === spoke));
    const withRollout = hits.filter(({ e }) => e.rollout);
    const pick = hits.length === 1 ? hits : withRollout.length === 1 && !spoke ? withRollout : hits;
    if (pick.length === 1) return { index: pick[0].i };
    if (pick.length === 0)
        return { error: `no endpoint ${arg} in the hub (known: ${endpoints.map((e) => `${e.spoke}/${e.name}`).join(", ")})` };
    return { error: `${arg} names ${pick.length} endpoints; say which: ${pick.map(({ e }) => `${e.spoke}/${e.name}`).join(", ")}` };
}

/* ---------------------------------------------------------------- placement */

/**
 * The graphs a spoke places for its endpoints (both revisions during a rollout, each named after its
 * DynamoGraphDeployment) and the `endpointPools` mapping extended so a revision runs on its endpoint's pool.
 */
export function placedGraphs<S extends { endpointPools: Record<string, string> }>(
    endpoints: readonly Endpoint[],
    serving: S,
): { graphs: Endpoint[]; revisions: RenderedRevision[]; serving: S } {
    const revisions = renderedRevisions(endpoints);
    const pools = { ...serving.endpointPools };
    for (const r of revisions) {
        const p = serving.endpointPools[r.endpoint];
        if (p !== undefined && r.graph.name !== r.endpoint) pools[r.graph.name] = p;
    }
    return { graphs: revisions.map((r) => r.graph), revisions, serving: { ...serving, endpointPools: pools } };
}

/**
 * One line per rollout in the hub's placement contracts (hub output `spokeContracts`, as `npm run status` reads it):
 * endpoint, target revision, phase and step, weights per graph, hold and last gate verdict. Empty without rollouts.
 */
export function rolloutStatusLines(spokeContracts: unknown): string[] {
    if (!spokeContracts || typeof spokeContracts !== "object") return [];
    const out: string[] = [];
    for (const [spoke, c] of Object.entries(spokeContracts as Record<string, { endpoints?: Endpoint[] }>)) {
        for (const e of Array.isArray(c?.endpoints) ? c.endpoints : []) {
            if (!e?.rollout) continue;
            out.push(`${spoke}/${e.name} -> ${rolloutSummary(e)}`);
        }
    }
    return out;
}

/**
 * One line on an endpoint's rollout: target revision, phase and step, weights per graph, hold and last gate verdict
 * (`npm run status`, the PR diff's placement table). Empty without a rollout.
 */
export function rolloutSummary(e: Endpoint): string {
    if (!e.rollout) return "";
    const st = stateOf(e.rollout);
    const step = st.phase === "shifting" ? ` step ${(st.step ?? 0) + 1}/${e.rollout.steps.length}` : "";
    const weights = revisionsOf(e)
        .map((r) => `${r.graph.name} ${r.weight ?? 0}%${r.role === "target" && !r.ready ? " (not ready)" : ""}`)
        .join(" · ");
    const held = "held" in st && st.held ? `; HELD ${st.held.at}: ${st.held.reason}` : "";
    const gate = "lastGate" in st && st.lastGate ? `; last gate ${st.lastGate.verdict} at ${st.lastGate.at}` : "; no gate yet";
    return `${e.rollout.revision}: ${st.phase}${step}; ${weights}${held}${gate}`;
}
