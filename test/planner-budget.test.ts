/**
 * Planner budgets with room for one more worker. Upstream (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f,
 * components/src/dynamo/planner/core/load_scaling.py and core/budget.py): a scale-up proposes `num_workers + 1` of one
 * pool, and `max_gpu_budget` is a hard ceiling every proposal is clamped under (`proportional_clamp_pair` for
 * prefill/decode, `proportional_clamp_single` for aggregated). The hub check (config/hub-checks.ts
 * `plannerBudgetIssues`) is compared with a port of those clamps over random pool shapes, refuses the budgets hub-prod
 * shipped before they were retuned, and the upstream rule (upstream/check/planner-config.ts) judges rendered graphs.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { plannerBudgetIssues } from "../config/hub-checks";
import { endpointGpus } from "../config/endpoint";
import { revisionsToCheck } from "../config/rollout";
import { parseFlatStackConfig } from "../config/stack";
import { checkPlannerHeadroom } from "../upstream/check/planner-config";
import { flatConfig, stackConfigDoc } from "./helpers";
import { endpoint, endpointObjects } from "./policies/rdma-fixtures";

const NOW = new Date("2026-12-01T00:00:00Z");
const FILE = "stacks/Pulumi.hub-prod.yaml";

/** hub-prod, mutated, parsed as the program loads it: the issues `key: message`, or [] when accepted. */
function hubIssues(mutate: (d: Record<string, any>) => void = () => {}): string[] {
    const doc = structuredClone(stackConfigDoc("hub-prod"));
    mutate(doc);
    try {
        parseFlatStackConfig(flatConfig(doc), FILE, [], { now: NOW });
    } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        expect(e.stackFile).toBe(FILE);
        expect(e.message).toContain(FILE);
        return e.issues.map((i) => `${i.key}: ${i.message}`);
    }
    return [];
}

/** The endpoint of hub-prod at `spoke`/`name` (index into platform:endpoints). */
const at = (d: Record<string, any>, spoke: string, name: string) =>
    (d["platform:endpoints"] as Array<Record<string, any>>).findIndex((e) => e.spoke === spoke && e.name === name);

describe("hub-prod's planner budgets", () => {
    it("refuses the budgets shipped before: each planner that could never add a worker, naming the key", () => {
        let idx: Record<string, number> = {};
        const issues = hubIssues((d) => {
            idx = { hn1: at(d, "hn1", "llama-70b"), hcm1: at(d, "hcm1", "qwen3-32b"), sg1: at(d, "sg1", "llama-70b") };
            d["platform:endpoints"][idx.sg1].planner = { optimizationTarget: "load", maxGpuBudget: 4, minReplicas: 1 };
            d["platform:endpoints"][idx.hn1].planner.maxGpuBudget = 10;
            d["platform:endpoints"][idx.hcm1].rollout.target.planner = { optimizationTarget: "load", maxGpuBudget: 4 };
        });
        expect(issues).toEqual([
            expect.stringMatching(
                new RegExp(
                    `^platform:endpoints\\[${idx.hn1}\\]\\.planner\\.maxGpuBudget: 10 GPUs leaves no room for one more worker: the endpoint uses 8 .* one more prefill or decode worker takes 4 .* set it to at least 12 .*core/budget\\.py`,
                ),
            ),
            expect.stringMatching(
                new RegExp(
                    `^platform:endpoints\\[${idx.hcm1}\\]\\.rollout\\.target\\.planner\\.maxGpuBudget: 4 GPUs leaves no room .* uses 4 .* one more prefill or decode worker takes 2 .* at least 6 `,
                ),
            ),
            expect.stringMatching(
                new RegExp(
                    `^platform:endpoints\\[${idx.sg1}\\]\\.planner\\.maxGpuBudget: 4 GPUs leaves no room .* one more aggregated worker takes 4 \\(platform:endpoints\\[${idx.sg1}\\]\\.topology\\.workers\\.gpusPerWorker\\).* at least 8 `,
                ),
            ),
        ]);
    });

    it("hcm1's Llama at two workers with budget 10 could only scale down", () => {
        const issues = hubIssues((d) => {
            const i = at(d, "hcm1", "llama-70b");
            d["platform:endpoints"][i].topology.workers.replicas = 2;
            d["platform:endpoints"][i].planner.maxGpuBudget = 10;
        });
        // And 10 beside Qwen's two fixed graphs (8) is more than hcm1's 16: the spoke check names it too.
        expect(issues).toEqual([
            expect.stringMatching(/planner\.maxGpuBudget: 10 GPUs leaves no room .* uses 8 .* at least 12 /),
            expect.stringMatching(/planner\.maxGpuBudget: spoke "hcm1" has 16 GPUs .* claim 18 .* at most 8,/),
        ]);
    });

    it("accepts the retuned file: every planner can add a worker, and each spoke's budgets and fixed graphs fit its GPUs", () => {
        expect(hubIssues()).toEqual([]);
        const cfg = parseFlatStackConfig(flatConfig(stackConfigDoc("hub-prod")), FILE, [], { now: NOW });
        if (cfg.role !== "hub") throw new Error("not a hub");
        const claimed = new Map<string, number>();
        cfg.hub.endpoints.forEach((ep, i) => {
            for (const { endpoint: e, key } of revisionsToCheck(ep, `platform:endpoints[${i}]`)) {
                const gpus = cfg.hub.spokes.find((s) => s.name === e.spoke)!.gpus;
                expect(plannerBudgetIssues(e, key, gpus, 0)).toEqual([]);
                claimed.set(e.spoke, (claimed.get(e.spoke) ?? 0) + (e.planner.enabled ? e.planner.maxGpuBudget : endpointGpus(e)));
            }
        });
        for (const s of cfg.hub.spokes) expect(claimed.get(s.name), s.name).toBeLessThanOrEqual(s.gpus);
        expect(cfg.hub.endpoints.filter((e) => e.planner.enabled).map((e) => `${e.spoke}/${e.name} ${e.planner.maxGpuBudget}`)).toEqual([
            "hn1/llama-70b 12",
            "hcm1/llama-70b 8",
            "sg1/llama-70b 8",
        ]);
    });

    it("refuses a budget the other graphs on the spoke leave no room for, naming each planner's key", () => {
        // hn1: Llama's budget 12 + Qwen fixed at 4 = 16. A budget of 16 passes Llama's own check (at most the
        // spoke's 16) but could never grow past the 12 GPUs Qwen leaves free.
        let i = -1;
        let q = -1;
        const issues = hubIssues((d) => {
            i = at(d, "hn1", "llama-70b");
            q = at(d, "hn1", "qwen3-32b");
            d["platform:endpoints"][i].planner.maxGpuBudget = 16;
        });
        expect(issues).toEqual([
            `platform:endpoints[${i}].planner.maxGpuBudget: spoke "hn1" has 16 GPUs (platform:spokes[0].gpus) but its endpoints claim 20 (platform:endpoints[${i}] llama-70b: budget 16, platform:endpoints[${q}] qwen3-32b: 4 fixed): max_gpu_budget bounds only this graph, so past the 12 GPUs the others leave free its scale-ups stay Pending; lower it to at most 12, or lower the other budgets or replicas, or set platform:endpoints[${i}].planner.enabled: false (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/core/budget.py)`,
        ]);
        // Qwen's planner on too (budget 6, its own check passes): both planners are named, each with what is left to it.
        const both = hubIssues((d) => {
            d["platform:endpoints"][at(d, "hn1", "qwen3-32b")].planner = { optimizationTarget: "load", maxGpuBudget: 6 };
        });
        expect(both).toEqual([
            expect.stringMatching(
                /^platform:endpoints\[\d+\]\.planner\.maxGpuBudget: spoke "hn1" has 16 GPUs .* claim 18 .* lower it to at most 10,/,
            ),
            expect.stringMatching(
                /^platform:endpoints\[\d+\]\.planner\.maxGpuBudget: spoke "hn1" has 16 GPUs .* claim 18 .* lower it to at most 4,/,
            ),
        ]);
    });

    it("counts both graphs of a rollout: a planner on the target claims its budget beside the source's graph", () => {
        // hcm1: Llama's budget 8 + Qwen source 4 fixed + target 4 fixed = 16; a target planner of 6 makes it 18.
        let q = -1;
        const issues = hubIssues((d) => {
            q = at(d, "hcm1", "qwen3-32b");
            d["platform:endpoints"][q].rollout.target.planner = { optimizationTarget: "load", maxGpuBudget: 6 };
        });
        expect(issues).toEqual([
            expect.stringMatching(/\.planner\.maxGpuBudget: spoke "hcm1" has 16 GPUs .* claim 18 .*/),
            expect.stringMatching(
                new RegExp(
                    `^platform:endpoints\\[${q}\\]\\.rollout\\.target\\.planner\\.maxGpuBudget: spoke "hcm1" has 16 GPUs .* platform:endpoints\\[${q}\\] qwen3-32b: 4 fixed, platform:endpoints\\[${q}\\]\\.rollout\\.target qwen3-32b: budget 6\\).* at most 4,`,
                ),
            ),
        ]);
    });

    it("the minimum side and the spoke's GPUs", () => {
        const up = (f: (e: Record<string, any>) => void) => hubIssues((d) => f(d["platform:endpoints"][at(d, "sg1", "llama-70b")]));
        expect(up((e) => (e.planner.minReplicas = 2))).toEqual([
            expect.stringMatching(/\.planner\.minReplicas: 2 workers is above .*topology\.workers\.replicas 1: the planner raises/),
            expect.stringMatching(/\.planner\.maxGpuBudget: 8 GPUs leaves no room .* uses 8 .* at least 12 /),
        ]);
        expect(up((e) => (e.planner.maxGpuBudget = 24))).toEqual([
            expect.stringMatching(/\.planner\.maxGpuBudget: 24 GPUs is above the spoke's 16 \(platform:spokes\[2\]\.gpus\)/),
            expect.stringMatching(/\.planner\.maxGpuBudget: spoke "sg1" has 16 GPUs .* claim 32 .* at most 8,/),
        ]);
        // Placed in full (4 x 4 of 16): no budget lets it scale there (the hub's placement check passes it).
        const full = endpoint({
            topology: { mode: "aggregated", workers: { replicas: 4, gpusPerWorker: 4 } },
            planner: { optimizationTarget: "load", maxGpuBudget: 16 },
        });
        expect(plannerBudgetIssues(full, "platform:endpoints[5]", 16, 2).map((i) => `${i.key}: ${i.message}`)).toEqual([
            expect.stringMatching(
                /^platform:endpoints\[5\]\.planner\.maxGpuBudget: the planner can never add a worker within the spoke's 16 GPUs \(platform:spokes\[2\]\.gpus\): .* starts at 16 GPUs .* 20 in all; lower the replicas or set platform:endpoints\[5\]\.planner\.enabled: false$/,
            ),
        ]);
        expect(up((e) => (e.planner.maxGpuBudget = 3))).toEqual([
            expect.stringMatching(/\.planner\.maxGpuBudget: 3 GPUs is below the 4 the endpoint already uses .* at least 8 /),
        ]);
        expect(up((e) => (e.planner = { enabled: false }))).toEqual([]);
    });
});

// A port of upstream's clamps with min_gpu_budget -1 (the product never sets it): budget.py proportional_clamp_single
// and proportional_clamp_pair, ceiling path.
function clampSingle(desired: number, gpu: number, max: number, minEp: number): number {
    if (desired * gpu <= max) return desired;
    if (max < minEp * gpu) return 0;
    return Math.max(minEp, Math.floor(max / gpu));
}
function clampPair(p: number, d: number, pg: number, dg: number, max: number, pMin: number, dMin: number): [number, number] {
    const total = p * pg + d * dg;
    if (total <= max) return [p, d];
    if (max < pMin * pg + dMin * dg) return [0, 0];
    const scale = max / total;
    const maxP = Math.floor((max - dMin * dg) / pg);
    const np = Math.max(pMin, Math.min(maxP, Math.floor(p * scale)));
    return [np, Math.max(dMin, Math.floor((max - np * pg) / dg))];
}

describe("the check against upstream's clamp", () => {
    const group = fc.record({ replicas: fc.integer({ min: 1, max: 4 }), gpusPerWorker: fc.integer({ min: 1, max: 8 }) });
    it("refuses a budget exactly when a one-worker scale-up of some pool is clamped back", () => {
        fc.assert(
            fc.property(
                fc.oneof(
                    fc.record({ mode: fc.constant("aggregated" as const), workers: group }),
                    fc.record({ mode: fc.constant("disaggregated" as const), prefill: group, decode: group }),
                ),
                fc.integer({ min: 1, max: 3 }),
                fc.integer({ min: 1, max: 48 }),
                (topology, minReplicas, budget) => {
                    const e = endpoint({ topology, planner: { optimizationTarget: "load", maxGpuBudget: budget, minReplicas } });
                    // Where the planner starts: each pool raised to min_endpoint (state_machine.py max(desired, min_endpoint)).
                    let admitted: boolean;
                    if (topology.mode === "aggregated") {
                        const n = Math.max(topology.workers.replicas, minReplicas);
                        admitted = clampSingle(n + 1, topology.workers.gpusPerWorker, budget, minReplicas) === n + 1;
                    } else {
                        const p = Math.max(topology.prefill.replicas, minReplicas);
                        const d = Math.max(topology.decode.replicas, minReplicas);
                        const [pg, dg] = [topology.prefill.gpusPerWorker, topology.decode.gpusPerWorker];
                        const up = (np: number, nd: number) => clampPair(np, nd, pg, dg, budget, minReplicas, minReplicas);
                        admitted = up(p + 1, d).join() === [p + 1, d].join() && up(p, d + 1).join() === [p, d + 1].join();
                    }
                    const refused = plannerBudgetIssues(e, "k", undefined, -1).some((i) => i.key === "k.planner.maxGpuBudget");
                    expect(refused).toBe(!admitted);
                },
            ),
            { numRuns: 2000 },
        );
    });
});

describe("a decision that moves both pools (load_scaling.py _advance_load_disagg)", () => {
    it("with a budget the check accepts, both pools asking for one more keeps prefill and grows decode by at least one", () => {
        fc.assert(
            fc.property(
                fc.integer({ min: 1, max: 6 }),
                fc.integer({ min: 1, max: 6 }),
                fc.integer({ min: 1, max: 8 }),
                fc.integer({ min: 1, max: 8 }),
                fc.integer({ min: 0, max: 8 }),
                (p, d, pg, dg, spare) => {
                    const budget = p * pg + d * dg + Math.max(pg, dg) + spare;
                    const [np, nd] = clampPair(p + 1, d + 1, pg, dg, budget, 1, 1);
                    if ((p + 1) * pg + (d + 1) * dg <= budget) expect([np, nd]).toEqual([p + 1, d + 1]);
                    else {
                        expect(np).toBe(p);
                        expect(nd).toBeGreaterThanOrEqual(d + 1);
                        expect(np * pg + nd * dg).toBeLessThanOrEqual(budget);
                    }
                },
            ),
            { numRuns: 2000 },
        );
        // Decode takes every GPU prefill leaves: prefill 1 x 4 + decode 3 x 1 at budget 11, both asking, gives (1, 7).
        expect(clampPair(2, 4, 4, 1, 11, 1, 1)).toEqual([1, 7]);
    });
});

describe("the rendered graph (upstream-check planner-scale-up-headroom)", () => {
    const TP44 = {
        topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } },
    };
    const findings = (budget: number) => {
        const { dgd, others } = endpointObjects(endpoint({ ...TP44, planner: { optimizationTarget: "load", maxGpuBudget: budget } }));
        return checkPlannerHeadroom({ stack: "s", objects: [dgd, ...others], releases: [] });
    };
    it("reads max_gpu_budget from the Planner's --config and the workers' GPUs and replicas from the graph", () => {
        expect(findings(12)).toEqual([]);
        expect(findings(10)).toEqual([
            expect.objectContaining({
                key: "--config.max_gpu_budget",
                message: expect.stringMatching(
                    /^planner-scale-up-headroom .* max_gpu_budget 10 is below the graph's 8 GPUs plus one more 4-GPU worker \(12\) \[ai-dynamo\/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components\/src\/dynamo\/planner\/core\/budget\.py\]$/,
                ),
            }),
        ]);
    });
});
