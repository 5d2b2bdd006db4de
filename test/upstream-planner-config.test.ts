/**
 * The Planner's `--config` as rendered, against PlannerConfig as read upstream
 * (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/config/planner_config.py):
 * PlannerConfig does not forbid extra keys, so a misspelt key is dropped silently; the check refuses it (closed world)
 * and evaluates the model's validators (load thresholds required and ordered; decode KV rates are percentages 0-100,
 * divided by 100 in components/src/dynamo/planner/core/load_scaling.py).
 */
import { describe, expect, it } from "vitest";
import { checkPlannerConfig, plannerConfigProblems } from "../upstream/check/planner-config";
import { plannerConfigKeys } from "../upstream/planner";
import { endpoint, endpointObjects } from "./policies/rdma-fixtures";

const TP44 = { topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } } };
const planned = (e: ReturnType<typeof endpoint>) => {
    const { dgd } = endpointObjects(e);
    const c: any = (structuredClone(dgd) as any).spec.components.find((x: any) => x.type === "planner");
    const argv: string[] = [...(c.podTemplate.spec.containers[0].command ?? []), ...(c.podTemplate.spec.containers[0].args ?? [])];
    return JSON.parse(argv[argv.indexOf("--config") + 1]);
};

describe("rendered Planner configs are valid PlannerConfig", () => {
    it("disaggregated load (vLLM, SGLang) and aggregated: every key a field, every validator holds", () => {
        for (const e of [
            endpoint(TP44),
            endpoint({ ...TP44, engine: "sglang" }),
            endpoint({ topology: { mode: "aggregated", workers: { replicas: 2, gpusPerWorker: 4 } } }),
        ]) {
            const c = planned(e);
            expect(
                Object.keys(c).every((k) => plannerConfigKeys.includes(k)),
                JSON.stringify(c),
            ).toBe(true);
            expect(plannerConfigProblems(c)).toEqual([]);
        }
        const { dgd, others } = endpointObjects(endpoint(TP44));
        expect(checkPlannerConfig({ stack: "s", objects: [dgd, ...others], releases: [] })).toEqual([]);
    });
    it("the load thresholds rendered are upstream's units: queue tokens, KV percentages 0-100", () => {
        const c = planned(endpoint(TP44));
        expect(c).toMatchObject({ optimization_target: "load", mode: "disagg" });
        expect(c.decode_scale_up_kv_rate).toBeGreaterThan(1);
        expect(c.decode_scale_up_kv_rate).toBeLessThanOrEqual(100);
    });
});

describe("planted faults", () => {
    const good = {
        environment: "kubernetes",
        backend: "vllm",
        mode: "disagg",
        optimization_target: "load",
        prefill_scale_up_queue_tokens: 200000,
        prefill_scale_down_queue_tokens: 20000,
        decode_scale_up_kv_rate: 80,
        decode_scale_down_kv_rate: 40,
    };
    it("an unknown (silently ignored) key, a mode outside the Literal, KV rates as fractions or inverted, missing prefill thresholds", () => {
        expect(plannerConfigProblems({ ...good, decode_scale_up_kv_util: 80 }).map((x) => x[0])).toEqual([
            "--config.decode_scale_up_kv_util",
        ]);
        expect(plannerConfigProblems({ ...good, mode: "disaggregated" }).map((x) => x[0])).toContain("--config.mode");
        expect(plannerConfigProblems({ ...good, decode_scale_up_kv_rate: 0.8, decode_scale_down_kv_rate: 0.9 })[0][1]).toMatch(
            /load-decode-thresholds/,
        );
        expect(plannerConfigProblems({ ...good, decode_scale_up_kv_rate: 180 })[0][1]).toMatch(/0-100/);
        const { prefill_scale_up_queue_tokens: _u, ...noPrefill } = good;
        expect(plannerConfigProblems(noPrefill)[0][1]).toMatch(/load-prefill-thresholds/);
        expect(plannerConfigProblems({ ...good, load_adjustment_interval: 5 })).toEqual([]); // pydantic alias
    });
});
