import type { ConfigIssue } from "./errors";
import { endpointGpus, endpointUpstreamIssues } from "./endpoint";
import type { HubConfig } from "./hub";
import type { LimitSet } from "./limits";
import { revisionsToCheck } from "./rollout";
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
 * into and context lengths within the model's (config/models.ts), and planner budgets at least what the endpoint
 * already uses.
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
            const used = endpointGpus(e);
            if (e.planner.enabled && e.planner.maxGpuBudget < used) {
                issues.push({
                    key: `${key}.planner.maxGpuBudget`,
                    message: `${e.planner.maxGpuBudget} GPUs is below the ${used} the endpoint already uses at its configured replicas (${key}.topology); the planner could never reach its own starting point`,
                });
            }
        }
    });
    return issues;
}
