import type { ConfigIssue } from "./errors";
import { type Endpoint, endpointUpstreamIssues, topologyGpus } from "./endpoint";
import type { HubConfig } from "./hub";
import type { LimitSet } from "./limits";
import { revisionsToCheck } from "./rollout";
import { type PlannerPool, plannerBudgetSources, plannerScaleUpNeed } from "../upstream/planner";
import { KNOWN_MODELS, tensorParallelProblem } from "./models";

/** Limit dimensions compared between tiers; tokens as a rate (per window second) so windows may differ. */
const LIMIT_DIMENSIONS: Array<[string, (l: LimitSet) => number, (l: LimitSet) => string]> = [
    ["requestsPerSecond", (l) => l.requestsPerSecond, (l) => `${l.requestsPerSecond}`],
    ["concurrentRequests", (l) => l.concurrentRequests, (l) => `${l.concurrentRequests}`],
    ["tokensPerWindow", (l) => l.tokensPerWindow / l.windowSeconds, (l) => `${l.tokensPerWindow} per ${l.windowSeconds} s`],
];

/** One issue per dimension where `inner` allows more than `outer` (a tier that can never be reached is a config error). */
function limitsAbove(inner: LimitSet, outer: LimitSet, innerKey: string, outerName: string, outerKey: string): ConfigIssue[] {
    return LIMIT_DIMENSIONS.filter(([, v]) => v(inner) > v(outer)).map(([dim, , show]) => ({
        key: `${innerKey}.${dim}`,
        message: `${show(inner)} is above ${outerName}'s ${show(outer)} (${outerKey}.${dim}); every request must pass all three tiers, so this limit can never be reached`,
    }));
}

/**
 * Checks of a parsed hub that need more than one field or the clock: API keys not expired, key limits within their
 * team's and the models they may call, team limits within some model's, tensor-parallel sizes the model can split
 * into and context lengths within the model's (config/models.ts), planner budgets with room for one more worker
 * within the spoke's GPUs ({@link plannerBudgetIssues}), and each spoke's claims (planner budgets and fixed graphs,
 * {@link spokeClaimIssues}) within its GPUs.
 *
 * @param now the time expiry is judged at
 * @returns issues with full keys (`platform:apiKeys[0].expiresAt`)
 */
export function hubSemanticIssues(h: HubConfig, now: Date): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const models = new Map(h.models.map((m, i) => [m.id, { m, i }]));
    h.apiKeys.forEach((k, i) => {
        const key = `platform:apiKeys[${i}]`;
        if (Date.parse(k.expiresAt) <= now.getTime()) {
            issues.push({
                key: `${key}.expiresAt`,
                message: `API key "${k.id}" expired at ${k.expiresAt}; the auth service would answer 401 to every request: renew it (a later expiresAt) or remove the key`,
            });
        }
        const ti = h.tenants.findIndex((t) => t.id === k.tenant);
        const tj = ti < 0 ? -1 : h.tenants[ti].teams.findIndex((x) => x.id === k.team);
        if (tj >= 0)
            issues.push(
                ...limitsAbove(
                    k.limits,
                    h.tenants[ti].teams[tj].limits,
                    `${key}.limits`,
                    `team "${k.tenant}/${k.team}"`,
                    `platform:tenants[${ti}].teams[${tj}].limits`,
                ),
            );
        for (const id of k.models) {
            const m = models.get(id);
            if (m) issues.push(...limitsAbove(k.limits, m.m.limits, `${key}.limits`, `model "${id}"`, `platform:models[${m.i}].limits`));
        }
    });
    if (h.models.length) {
        h.tenants.forEach((t, ti) =>
            t.teams.forEach((x, tj) => {
                for (const [dim, v, show] of LIMIT_DIMENSIONS) {
                    const most = h.models.reduce((a, m, i) => (v(m.limits) > v(h.models[a].limits) ? i : a), 0);
                    if (v(x.limits) > v(h.models[most].limits)) {
                        issues.push({
                            key: `platform:tenants[${ti}].teams[${tj}].limits.${dim}`,
                            message: `${show(x.limits)} is above every model's limit (highest: ${show(h.models[most].limits)} at platform:models[${most}].limits.${dim}); this team limit can never be reached`,
                        });
                    }
                }
            }),
        );
    }
    h.endpoints.forEach((ep, i) => {
        // Both revisions during a rollout: the target runs its own graph (config/rollout.ts).
        for (const { endpoint: e, key } of revisionsToCheck(ep, `platform:endpoints[${i}]`)) {
            const arch = KNOWN_MODELS[e.model];
            if (arch) {
                const groups =
                    e.topology.mode === "disaggregated"
                        ? [["prefill", e.topology.prefill] as const, ["decode", e.topology.decode] as const]
                        : [["workers", e.topology.workers] as const];
                for (const [role, g] of groups) {
                    const p = tensorParallelProblem(arch, g.gpusPerWorker);
                    if (p)
                        issues.push({
                            key: `${key}.topology.${role}.gpusPerWorker`,
                            message: `${e.model}: ${p}; the engine refuses to start (${arch.source})`,
                        });
                }
                if (e.maxModelLen !== undefined && e.maxModelLen > arch.maxPositionEmbeddings) {
                    issues.push({
                        key: `${key}.maxModelLen`,
                        message: `${e.maxModelLen} tokens is beyond ${e.model}'s max_position_embeddings ${arch.maxPositionEmbeddings}; the engine refuses it (${arch.source})`,
                    });
                }
            }
            issues.push(...endpointUpstreamIssues(e, key));
            issues.push(
                ...plannerBudgetIssues(
                    e,
                    key,
                    h.spokes.find((s) => s.name === e.spoke)?.gpus,
                    h.spokes.findIndex((s) => s.name === e.spoke),
                ),
            );
        }
    });
    h.spokes.forEach((s, si) => issues.push(...spokeClaimIssues(h, s.name, s.gpus, si)));
    return issues;
}

/**
 * GPUs an endpoint claims on its spoke, per revision it runs (during a rollout both graphs run side by side,
 * config/rollout.ts {@link revisionsToCheck}): `planner.maxGpuBudget` where the planner is on (it may grow the graph
 * up to it, upstream/planner.ts {@link plannerBudgetSources}), else the GPUs the graph uses at its replicas.
 *
 * @returns the claim in GPUs, and each revision's part with its key relative to the endpoint (`""` or `.rollout.target`)
 */
export function endpointClaims(e: Endpoint): Array<{ key: string; gpus: number; planner: boolean }> {
    return revisionsToCheck(e, "").map(({ endpoint: r, key }) => {
        const planner = r.planner !== undefined && r.planner.enabled !== false;
        return { key, planner, gpus: planner ? r.planner.maxGpuBudget : topologyGpus(r.topology) };
    });
}

/** The sum of {@link endpointClaims}: the GPUs an endpoint may come to use on its spoke. */
export function endpointClaimGpus(e: Endpoint): number {
    return endpointClaims(e).reduce((n, c) => n + c.gpus, 0);
}

/**
 * A spoke's claims against its GPUs: the sum over its endpoints of {@link endpointClaims} (planner budget where the
 * planner is on, else the graph's GPUs at its replicas; a rollout's two graphs both count) must not exceed
 * `platform:spokes[i].gpus`. A planner's `max_gpu_budget` bounds only its own graph (upstream/planner.ts
 * {@link plannerBudgetSources}), so beyond the GPUs the other graphs leave free its scale-ups stay Pending: the budget
 * would promise capacity the spoke does not have. One issue per planner on the spoke (at its `planner.maxGpuBudget`);
 * a spoke with no planner is the placement check's (config/hub.ts).
 *
 * @param spoke the spoke's name; @param gpus its GPUs; @param spokeIndex its index in `platform:spokes`
 * @returns issues with full keys (`platform:endpoints[0].planner.maxGpuBudget`)
 */
export function spokeClaimIssues(h: HubConfig, spoke: string, gpus: number, spokeIndex: number): ConfigIssue[] {
    const claims = h.endpoints.flatMap((e, i) =>
        e.spoke === spoke ? endpointClaims(e).map((c) => ({ ...c, name: e.name, key: `platform:endpoints[${i}]${c.key}` })) : [],
    );
    const total = claims.reduce((n, c) => n + c.gpus, 0);
    if (total <= gpus) return [];
    const list = claims.map((c) => `${c.key} ${c.name}: ${c.planner ? `budget ${c.gpus}` : `${c.gpus} fixed`}`).join(", ");
    return claims
        .filter((c) => c.planner)
        .map((c) => ({
            key: `${c.key}.planner.maxGpuBudget`,
            message: `spoke "${spoke}" has ${gpus} GPUs (platform:spokes[${spokeIndex}].gpus) but its endpoints claim ${total} (${list}): max_gpu_budget bounds only this graph, so past the ${gpus - (total - c.gpus)} GPUs the others leave free its scale-ups stay Pending; lower it to at most ${gpus - (total - c.gpus)}, or lower the other budgets or replicas, or set ${c.key}.planner.enabled: false (${plannerBudgetSources[2]})`,
        }));
}

/** The pools the Planner scales, with their hub-file keys under `<endpoint>.topology`. */
function plannerPools(e: Endpoint): Array<PlannerPool & { key: string }> {
    const t = e.topology;
    return t.mode === "disaggregated"
        ? [
              { role: "prefill", key: "prefill", ...t.prefill },
              { role: "decode", key: "decode", ...t.decode },
          ]
        : [{ role: "workers", key: "workers", ...t.workers }];
}

/**
 * An enabled planner's budget and reserve against the endpoint (one revision's graph) and its spoke; upstream's
 * semantics in upstream/planner.ts {@link plannerScaleUpNeed} (`max_gpu_budget` is a hard ceiling on every proposal,
 * each pool's scale-up adds one worker of it; a disaggregated decision may move both pools, and the pair clamp then
 * keeps prefill and gives decode the room):
 * - `planner.minReplicas` above a pool's `replicas`: the Planner raises the pool to it at its first decision, so the
 *   graph needs GPUs the placement does not count;
 * - `planner.maxGpuBudget` below the GPUs at the configured replicas plus the largest pool's GPUs per worker: the
 *   Planner can never add that worker (it only scales down), or at all when below the starting point;
 * - that need above the spoke's GPUs (`platform:spokes[i].gpus`): no budget lets it scale on the spoke, so lower the
 *   replicas or turn the planner off; a budget above the spoke's GPUs is refused too (workers past them stay Pending).
 * Budgets and fixed graphs of one spoke adding up to more than its GPUs: {@link spokeClaimIssues}.
 *
 * @param key the endpoint's (or its rollout target's) full key, `platform:endpoints[0]`
 * @param spokeGpus the spoke's GPUs (undefined for an unknown spoke, refused elsewhere)
 * @param spokeIndex the spoke's index in `platform:spokes`, for the key the messages name
 * @returns issues with full keys (`platform:endpoints[0].planner.maxGpuBudget`)
 */
export function plannerBudgetIssues(e: Endpoint, key: string, spokeGpus: number | undefined, spokeIndex: number): ConfigIssue[] {
    const p = e.planner;
    if (!p.enabled) return [];
    const issues: ConfigIssue[] = [];
    const pools = plannerPools(e);
    for (const x of pools) {
        if (p.minReplicas > x.replicas)
            issues.push({
                key: `${key}.planner.minReplicas`,
                message: `${p.minReplicas} workers is above ${key}.topology.${x.key}.replicas ${x.replicas}: the planner raises the ${x.role} pool to min_endpoint at its first decision, so the graph would use GPUs its placement does not count; set replicas to at least ${p.minReplicas} or lower minReplicas (${plannerBudgetSources[1]})`,
            });
    }
    const { start, step, need } = plannerScaleUpNeed(pools, p.minReplicas);
    const largest = pools.filter((x) => x.gpusPerWorker === step);
    const stepRole = largest.map((x) => (x.role === "workers" ? "aggregated" : x.role)).join(" or ");
    const stepKey = largest.map((x) => `${key}.topology.${x.key}.gpusPerWorker`).join(", ");
    const budget = p.maxGpuBudget;
    const at = `${key}.planner.maxGpuBudget`;
    const why = `max_gpu_budget is a hard ceiling on every scale-up proposal (${plannerBudgetSources[2]})`;
    if (spokeGpus !== undefined && need > spokeGpus) {
        issues.push({
            key: at,
            message: `the planner can never add a worker within the spoke's ${spokeGpus} GPUs (platform:spokes[${spokeIndex}].gpus): the endpoint starts at ${start} GPUs (${key}.topology) and one more ${stepRole} worker takes ${step} (${stepKey}), ${need} in all; lower the replicas or set ${key}.planner.enabled: false`,
        });
        return issues;
    }
    if (budget < start) {
        issues.push({
            key: at,
            message: `${budget} GPUs is below the ${start} the endpoint already uses at its configured replicas (${key}.topology); the planner could never reach its own starting point, let alone add a worker: set it to at least ${need} (${why})`,
        });
    } else if (budget < need) {
        issues.push({
            key: at,
            message: `${budget} GPUs leaves no room for one more worker: the endpoint uses ${start} at its configured replicas (${key}.topology) and one more ${stepRole} worker takes ${step} (${stepKey}), so the planner's scale-up (num_workers + 1) is always clamped back and it can only scale down; set it to at least ${need} (${why})`,
        });
    } else if (spokeGpus !== undefined && budget > spokeGpus) {
        issues.push({
            key: at,
            message: `${budget} GPUs is above the spoke's ${spokeGpus} (platform:spokes[${spokeIndex}].gpus): max_gpu_budget is the planner's capacity bound, and workers past the spoke's GPUs would stay Pending; set it to at most ${spokeGpus} (at least ${need})`,
        });
    }
    return issues;
}
