import { z } from "zod";
import { frontendNamespacePrefixFact } from "../upstream/rollout";
import type {
    Endpoint,
    KvExceptionSchema,
    ModelRevisionSchema,
    KvPoolSchema,
    PlannerSchema,
    SpeculativeSchema,
    TopologySchema,
} from "./endpoint";

/**
 * A revision label: names a revision's DynamoGraphDeployment `<revision>-<endpoint>` (lib/rollout.ts `dgdName`), and
 * with it the revision's own Dynamo namespace `<k8s namespace>-<revision>-<endpoint>` (upstream/rollout.ts
 * `dynamoNamespaceFact`). The revision leads so that no revision's graph name begins with another's: a frontend
 * discovers every worker whose Dynamo namespace begins with its own (upstream/rollout.ts
 * `frontendNamespacePrefixFact`). At most 12 characters so the DGD name stays a DNS label of at most 53 characters.
 */
export const RevisionLabel = z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/, "must be a lower-case DNS label of at most 12 characters (e.g. v2, r20261201)");

/**
 * The promotion soak (lib/rollout.ts `evaluatePromotion`): at the 100% step the source carries no traffic, so nothing
 * compares; the target is judged alone over `soakSeconds` of its full traffic against absolute bounds before the
 * source's graph goes and the target becomes the endpoint's main settings.
 */
export const PromotionSoakSchema = z
    .object(
        {
            /** Seconds of readable traffic the 100% step needs at least (after the spoke serves it, less the ingest delay). */
            soakSeconds: z.number().int().min(60),
            /** Highest accepted target error rate over the soak, as a fraction (0.01 = 1%). */
            maxErrorRate: z.number().min(0).max(1),
            /** Requests the target must have answered in the soak before it is judged (fewer: wait). */
            minRequests: z.number().int().min(1),
            /** Highest accepted target TTFT p95 over the soak, seconds (optional absolute bound). */
            ttftP95Seconds: z.number().positive().optional(),
            /** Highest accepted target inter-token latency p99 over the soak, seconds (optional absolute bound). */
            itlP99Seconds: z.number().positive().optional(),
        },
        {
            error: (iss) =>
                iss.input === undefined
                    ? "missing: at the 100% step the source carries no traffic, so the rollout completes only after the target alone passes a soak (soakSeconds, maxErrorRate, minRequests; docs/rollout.md)"
                    : undefined,
        },
    )
    .strict();
/** A rollout's promotion soak as parsed ({@link PromotionSoakSchema}). */
export type PromotionSoak = z.infer<typeof PromotionSoakSchema>;

/**
 * The gate a rollout step must pass before the next step is written (lib/rollout.ts `evaluateGate`). Compares the
 * target revision with the source revision on the same step's traffic, read from the spoke's Prometheus: the
 * frontends' TTFT and ITL histograms and request counters, selected by Dynamo namespace. The 100% step, where the
 * source has no traffic left to compare with, is judged by `promotion` instead.
 */
export const RolloutGateSchema = z
    .object(
        {
            /** Highest accepted target/source ratio of TTFT p95 (1.2: the target may be 20% slower). */
            ttftP95Ratio: z.number().min(1),
            /** Highest accepted target/source ratio of inter-token latency p99. */
            itlP99Ratio: z.number().min(1),
            /** Highest accepted target error rate minus source error rate, as a fraction (0.01 = one percentage point). */
            errorRateDelta: z.number().min(0).max(1),
            /** Requests each revision must have answered within the step before the gate decides (fewer: wait). */
            minRequests: z.number().int().min(1),
            /** Seconds of the step's traffic the gate needs at least (the step's age less the ingest delay). */
            windowSeconds: z.number().int().min(60),
            /**
             * Seconds between a request and its series being queryable (scrape interval, relabelling, remote write): the gate
             * never reads the last `ingestDelaySeconds`. At least 90.
             */
            ingestDelaySeconds: z.number().int().min(90),
            /** The soak that judges the 100% step before promotion ({@link PromotionSoakSchema}). */
            promotion: PromotionSoakSchema,
        },
        {
            error: (iss) =>
                iss.input === undefined
                    ? "missing: a rollout without a gate is refused (ttftP95Ratio, itlP99Ratio, errorRateDelta, minRequests, windowSeconds, ingestDelaySeconds, promotion)"
                    : undefined,
        },
    )
    .strict();
/** A rollout's promotion gate as parsed ({@link RolloutGateSchema}). */
export type RolloutGate = z.infer<typeof RolloutGateSchema>;

/** The verdict of a gate evaluation (lib/rollout.ts `evaluateGate`). */
export const GateVerdict = z.enum(["pass", "hold", "wait"]);

/**
 * Where a rollout stands, written by `npm run rollout` (tools/rollout.ts); absent when a person has just added the
 * rollout (phase `warming`).
 * - `warming`: the target's capacity is up, it carries no traffic yet;
 * - `shifting`: the target carries `steps[step]` percent of the traffic, the source the rest;
 * - `aborting`: traffic is back on the source; both revisions still have capacity (the next abort removes the target).
 */
export const RolloutStateSchema = z
    .object({
        phase: z.enum(["warming", "shifting", "aborting"]),
        /** Index into `steps` (phase `shifting`). */
        step: z.number().int().min(0).optional(),
        /** When this phase/step was written (UTC, ISO 8601): the gate reads traffic from here on. */
        since: z.iso.datetime(),
        /** The target's frontend reported ready capacity (health gate), so traffic may be sent to it. */
        targetReady: z.boolean().optional(),
        /** Set when a gate failed or a person held the rollout: no step is written until a person resumes or aborts. */
        held: z
            .object({ at: z.iso.datetime(), reason: z.string().min(1) })
            .strict()
            .optional(),
        /** The last gate evaluation, as `npm run rollout -- status` reported it. */
        lastGate: z.object({ at: z.iso.datetime(), verdict: GateVerdict, summary: z.string() }).strict().optional(),
    })
    .strict();
/** A rollout's recorded state as parsed ({@link RolloutStateSchema}). */
export type RolloutState = z.infer<typeof RolloutStateSchema>;

/** The endpoint schema's building blocks a rollout target reuses. */
interface Blocks {
    ModelRevisionSchema: typeof ModelRevisionSchema;
    TopologySchema: typeof TopologySchema;
    KvPoolSchema: typeof KvPoolSchema;
    PlannerSchema: typeof PlannerSchema;
    SpeculativeSchema: typeof SpeculativeSchema;
    KvExceptionSchema: typeof KvExceptionSchema;
}

/**
 * A gated canary rollout of an endpoint to a new revision: both revisions run side by side on the endpoint's spoke,
 * each its own DynamoGraphDeployment and Dynamo namespace, behind one route rule whose backend weights are the
 * current step's. Steps are traffic percentages to the target, strictly increasing, ending at 100. The runbook is
 * docs/rollout.md. Built from the endpoint schema's blocks (config/endpoint.ts `RolloutSchema`), so the two modules
 * load in either order.
 */
export function makeRolloutSchema(b: Blocks) {
    const target = z
        .object({
            engine: z.enum(["vllm", "sglang", "trtllm"]),
            topology: b.TopologySchema,
            router: z.object({ mode: z.enum(["kv", "round-robin"]) }).strict(),
            kvPool: b.KvPoolSchema,
            planner: b.PlannerSchema,
            speculative: b.SpeculativeSchema,
            maxModelLen: z.number().int().positive(),
            /** A new Hugging Face revision of the same model repository (config/endpoint.ts `ModelRevisionSchema`). */
            modelRevision: b.ModelRevisionSchema,
            /** The reviewed tokenizer check for the target's `modelRevision` (config/endpoint.ts `tokenizerMatchesMain`). */
            tokenizerMatchesMain: b.ModelRevisionSchema,
            kvExceptions: z.array(b.KvExceptionSchema),
        })
        .partial()
        .strict()
        .refine((t) => Object.keys(t).length > 0, { message: "names no setting to change; a rollout needs at least one" });
    return z
        .object({
            /** The target revision's label (the source is the endpoint's `revision`, or the bare endpoint name). */
            revision: RevisionLabel,
            /**
             * Serving settings the target revision changes, merged over the endpoint's own (what the endpoint runs today).
             * The served `model` and the spoke stay the endpoint's: a rollout changes how a model is served, not which
             * model clients call or where.
             */
            target,
            /** Traffic percentages to the target, strictly increasing, ending at 100. */
            steps: z.array(z.number().int().min(1).max(100)).min(1),
            gate: RolloutGateSchema,
            state: RolloutStateSchema.optional(),
        })
        .strict()
        .superRefine((r, ctx) => {
            const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
            r.steps.forEach((s, i) => {
                if (i > 0 && s <= r.steps[i - 1])
                    issue(["steps", i], `${s} is not above the step before it (${r.steps[i - 1]}): steps must be strictly increasing`);
            });
            if (r.steps.length && r.steps[r.steps.length - 1] !== 100)
                issue(["steps"], `must end at 100 (the last step moves all traffic to the target), got ${r.steps[r.steps.length - 1]}`);
            const st = r.state;
            if (st?.phase === "shifting" && (st.step === undefined || st.step >= r.steps.length))
                issue(["state", "step"], `phase shifting needs a step index below ${r.steps.length}`);
            if (st?.phase === "shifting" && !st.targetReady)
                issue(["state", "targetReady"], "traffic is shifted to the target only after its capacity was reported ready");
            if (st && st.phase !== "shifting" && st.step !== undefined) issue(["state", "step"], `phase ${st.phase} carries no step`);
        });
}

export type { Rollout } from "./endpoint";

/**
 * DynamoGraphDeployment name of an endpoint's revision: `<revision>-<endpoint>`, or the endpoint's name without one.
 * Never `<endpoint>-<revision>`: the source's frontend (Dynamo namespace `<ns>-<endpoint>`) would discover the target's
 * workers by prefix (upstream/rollout.ts `frontendNamespacePrefixFact`).
 */
export function dgdName(endpoint: string, revision?: string): string {
    return revision ? `${revision}-${endpoint}` : endpoint;
}

/**
 * Hub-side checks of rollouts across the hub's endpoints (config/hub.ts): graph names unique per spoke (a revision's
 * `<revision>-<endpoint>` must not be another endpoint's graph), a target revision differing from the one the
 * endpoint runs, and no other endpoint of the same model on the spoke (the rule's weights split one model between the
 * two revisions only).
 * @returns issues with paths relative to `platform:`
 */
export function rolloutHubIssues(endpoints: readonly Endpoint[]): Array<{ path: (string | number)[]; message: string }> {
    const out: Array<{ path: (string | number)[]; message: string }> = [];
    const graphs = new Map<string, number>();
    const claim = (spoke: string, graph: string, i: number, path: (string | number)[]) => {
        const k = `${spoke}/${graph}`;
        const other = graphs.get(k);
        if (other !== undefined && other !== i)
            out.push({ path, message: `graph ${graph} on spoke ${spoke} is also endpoints[${other}]'s; pick another revision label` });
        else graphs.set(k, i);
    };
    endpoints.forEach((e, i) => claim(e.spoke, dgdName(e.name, e.revision), i, ["endpoints", i, e.revision ? "revision" : "name"]));
    // One graph's Dynamo namespace beginning with another's on the same spoke: the shorter one's frontend discovers
    // the longer one's workers (upstream/rollout.ts frontendNamespacePrefixFact), so their traffic mixes.
    const named = endpoints.flatMap((e, i) => [
        { spoke: e.spoke, graph: dgdName(e.name, e.revision), i, path: ["endpoints", i, e.revision ? "revision" : "name"] },
        ...(e.rollout
            ? [{ spoke: e.spoke, graph: dgdName(e.name, e.rollout.revision), i, path: ["endpoints", i, "rollout", "revision"] }]
            : []),
    ]);
    for (const a of named)
        for (const b of named)
            if (a.spoke === b.spoke && a.graph !== b.graph && b.graph.startsWith(a.graph))
                out.push({
                    path: b.path as (string | number)[],
                    message: `graph ${b.graph} on spoke ${a.spoke} begins with graph ${a.graph} (endpoints[${a.i}]): ${a.graph}'s frontend would discover ${b.graph}'s workers, since a Dynamo frontend discovers every namespace beginning with its own (${frontendNamespacePrefixFact.source}); rename one so that neither name begins with the other`,
                });
    endpoints.forEach((e, i) => {
        if (!e.rollout) return;
        // Early warning: a target sized below its source never reaches the 100% step (the pack's
        // rollout-traffic-needs-ready-capacity refuses that render), so the rollout could never complete. Refused while
        // the rollout carries no traffic yet; once it does, the pack refuses the step that outgrows the target and abort
        // stays writable.
        const phase = e.rollout.state?.phase ?? "warming";
        const short = phase === "warming" ? fullShareCapacityProblem(e.topology, e.rollout.target.topology ?? e.topology) : undefined;
        if (short)
            out.push({
                path: ["endpoints", i, "rollout", "target", "topology"],
                message: `the target ${dgdName(e.name, e.rollout.revision)} can never carry the last step (100%): ${short}; the rollout could not complete (the pack's rollout-traffic-needs-ready-capacity refuses that step): size target.topology for 100% before the rollout starts`,
            });
        claim(e.spoke, dgdName(e.name, e.rollout.revision), i, ["endpoints", i, "rollout", "revision"]);
        if (e.rollout.revision === e.revision)
            out.push({
                path: ["endpoints", i, "rollout", "revision"],
                message: `is the revision the endpoint already runs (${e.revision})`,
            });
        endpoints.forEach((o, j) => {
            if (j !== i && o.spoke === e.spoke && o.model === e.model)
                out.push({
                    path: ["endpoints", i, "rollout"],
                    message: `endpoints[${j}] (${o.name}) serves ${e.model} on spoke ${e.spoke} too; a rollout's weights split one model between its own two revisions only`,
                });
        });
    });
    return out;
}

/**
 * Why a target topology cannot carry all of the traffic its source topology carries (`undefined` when it can): the
 * hub-side mirror of the pack's rule at 100% (policies/rollout.ts `shareCapacityProblem`). Same worker roles: each
 * role's replicas at least the source's; other roles (aggregated to disaggregated or back): worker GPUs at least the
 * source's.
 */
export function fullShareCapacityProblem(source: Endpoint["topology"], target: Endpoint["topology"]): string | undefined {
    const groups = (t: Endpoint["topology"]) =>
        t.mode === "disaggregated"
            ? { prefill: t.prefill, decode: t.decode }
            : ({ workers: t.workers } as Record<string, { replicas: number; gpusPerWorker: number }>);
    const s = groups(source);
    const t = groups(target);
    if (source.mode === target.mode) {
        const short = Object.keys(s).filter((role) => t[role].replicas < s[role].replicas);
        if (!short.length) return undefined;
        return short
            .map(
                (role) =>
                    `its ${role} runs ${t[role].replicas} replica${t[role].replicas === 1 ? "" : "s"}, the source's ${s[role].replicas}`,
            )
            .join("; ");
    }
    const gpus = (g: Record<string, { replicas: number; gpusPerWorker: number }>) =>
        Object.values(g).reduce((a, w) => a + w.replicas * w.gpusPerWorker, 0);
    if (gpus(t) >= gpus(s)) return undefined;
    return `its ${target.mode} workers have ${gpus(t)} GPUs, the source's ${source.mode} workers ${gpus(s)} (other roles, so replicas do not compare)`;
}

/** The endpoint as its source revision runs it (what it runs without the rollout). */
export function sourceEndpoint(e: Endpoint): Endpoint {
    const { rollout: _r, ...rest } = e;
    return rest as Endpoint;
}

/**
 * Pure: the endpoint as its target revision runs it: the target settings merged over the endpoint's (shallow: a key of
 * `rollout.target` replaces the endpoint's whole value), `revision` = `rollout.revision`, no `rollout`.
 * @throws Error naming the endpoint when it has no `rollout` (call it only during a rollout: {@link revisionsToCheck})
 */
export function targetEndpoint(e: Endpoint): Endpoint {
    if (!e.rollout) throw new Error(`endpoint ${e.name} has no rollout`);
    const { rollout, ...rest } = e;
    return { ...rest, ...rollout.target, revision: rollout.revision } as Endpoint;
}

/**
 * Each revision an endpoint runs with the key its settings are checked under: the endpoint itself, and during a
 * rollout its target (key `<key>.rollout.target`), so hub checks apply to both graphs.
 */
export function revisionsToCheck(e: Endpoint, key: string): Array<{ endpoint: Endpoint; key: string }> {
    const out = [{ endpoint: sourceEndpoint(e), key }];
    if (e.rollout) out.push({ endpoint: targetEndpoint(e), key: `${key}.rollout.target` });
    return out;
}
