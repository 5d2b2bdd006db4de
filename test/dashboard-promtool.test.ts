/**
 * The "Output tokens/s per GPU" panel divides by GPUs counted from series, evaluated by Prometheus' own engine
 * (`promtool test rules`, `promql_expr_test`): the DCGM exporter's per-GPU series labelled with the pod the GPU is
 * allocated to (NVIDIA/dcgm-exporter@07c87278a5e18805287ee56cba8abe9eb7a87ced:internal/pkg/transformation/const.go),
 * joined with the Dynamo workers serving the model. A Planner scale-up changes the divisor; another model's GPUs do
 * not count. promtool comes from Debian's `prometheus` package; without it this FAILS.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { promtool as runPromtool } from "./promtool";
import YAML from "yaml";
import { dashboards, tokensPerGpuExpr } from "../lib/observability";

const LLAMA = "meta-llama/Llama-3.3-70B-Instruct";
const QWEN = "Qwen/Qwen3-32B";
let dir: string;
beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "promtool-dash-"));
});
afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
});

/** promtool in this test's folder (test/promtool.ts). */
const promtool = (args: string[]) => runPromtool(args, dir);

const gpu = (pod: string, i: number) => ({
    series: `DCGM_FI_DEV_GPU_UTIL{namespace="inference",pod="${pod}",gpu="${i}",UUID="GPU-${pod}-${i}"}`,
    values: "50x20",
});
const worker = (pod: string, model: string) => ({
    series: `dynamo_component_gpu_cache_usage_percent{namespace="inference",pod="${pod}",model="${model}",dynamo_component="decode",dp_rank="0"}`,
    values: "0.5x20",
});
// 48,000 tokens a minute = 800 tokens/s.
const frontend = { series: `dynamo_frontend_output_tokens_total{model="${LLAMA}"}`, values: "0+48000x20" };
const base = [
    frontend,
    ...[0, 1, 2, 3].map((i) => gpu("llama-prefill-0", i)),
    ...[0, 1, 2, 3].map((i) => gpu("llama-decode-0", i)),
    ...[0, 1].map((i) => gpu("qwen-decode-0", i)),
    worker("llama-prefill-0", LLAMA),
    worker("llama-decode-0", LLAMA),
    worker("qwen-decode-0", QWEN),
];

describe("Output tokens/s per GPU under promtool", () => {
    it("the dashboard uses the series-derived divisor, no fixed GPU count", () => {
        const panel = dashboards("hn1", [{ name: "llama-70b", model: LLAMA, engine: "vllm", gpus: 8, disaggregated: true }])
            .flatMap((d) => d.panels)
            .find((p) => p.title === "Output tokens/s per GPU")!;
        expect(panel.queries.map((q) => q.expr)).toEqual([tokensPerGpuExpr(LLAMA)]);
        expect(panel.queries[0].expr).not.toMatch(/\/\s*\d+\s*$/);
    });
    it("800 tokens/s over the 8 GPUs serving the model is 100; after a 4-GPU scale-up, 800/12", () => {
        fs.writeFileSync(path.join(dir, "empty.yaml"), YAML.stringify({ groups: [] }));
        const expr = tokensPerGpuExpr(LLAMA);
        const tests = [
            {
                interval: "1m",
                input_series: base,
                promql_expr_test: [{ expr, eval_time: "10m", exp_samples: [{ labels: "{}", value: 100 }] }],
            },
            {
                interval: "1m",
                input_series: [...base, ...[0, 1, 2, 3].map((i) => gpu("llama-decode-1", i)), worker("llama-decode-1", LLAMA)],
                promql_expr_test: [
                    {
                        expr: `round(${expr} * 1000)`,
                        eval_time: "10m",
                        exp_samples: [{ labels: "{}", value: Math.round((800 / 12) * 1000) }],
                    },
                ],
            },
        ];
        fs.writeFileSync(path.join(dir, "tests.yaml"), YAML.stringify({ rule_files: ["empty.yaml"], evaluation_interval: "1m", tests }));
        const r = promtool(["test", "rules", "tests.yaml"]);
        expect(r.ok, r.out).toBe(true);
    });
    it("the harness can fail: the old fixed divisor (/ 4) is refused by promtool", () => {
        const tests = [
            {
                interval: "1m",
                input_series: base,
                promql_expr_test: [
                    {
                        expr: `sum(rate(dynamo_frontend_output_tokens_total{model="${LLAMA}"}[5m])) / 4`,
                        eval_time: "10m",
                        exp_samples: [{ labels: "{}", value: 100 }],
                    },
                ],
            },
        ];
        fs.writeFileSync(path.join(dir, "neg.yaml"), YAML.stringify({ rule_files: ["empty.yaml"], evaluation_interval: "1m", tests }));
        const r = promtool(["test", "rules", "neg.yaml"]);
        expect(r.ok).toBe(false);
    });
});
