/**
 * The spoke's alert rules (lib/observability.ts alertGroups) evaluated by Prometheus' own tool: `promtool check rules`
 * on the rules exactly as rendered (expressions and annotation templates parse), and `promtool test rules` with, for
 * every alert, a series that shows its fault (the alert fires, with the labels an operator routes on) and a healthy one
 * (it stays quiet). Series names and labels come from the facts (upstream/metrics.ts): a name or label the pinned
 * exporter does not produce is refused before promtool runs. promtool comes from Debian's `prometheus` package
 * (`.ci/run` installs it); without it these tests FAIL.
 *
 * `promtool test rules` compares annotations too, and ours are templates of the alert's value (`humanizeDuration`, ...):
 * the unit tests run on the same groups with annotations dropped (firing depends only on expr, for and labels), while
 * `promtool check rules` validates the exact rendered file, annotations included.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { promtool as runPromtool } from "./promtool";
import YAML from "yaml";
import { ObservabilityConfigSchema } from "../config/observability";
import { alertGroups, type AlertGroup, type ObservedEndpoint } from "../lib/observability";
import { metrics, seriesNames } from "../upstream/metrics";

const cfg = ObservabilityConfigSchema.parse({});
const LLAMA = "meta-llama/Llama-3.3-70B-Instruct";
const QWEN = "Qwen/Qwen3-32B";
const endpoints: ObservedEndpoint[] = [
    { name: "llama-70b", model: LLAMA, engine: "vllm", gpus: 8, disaggregated: true, mooncakePool: true },
    { name: "qwen3-32b", model: QWEN, engine: "sglang", gpus: 4, disaggregated: true },
];
const groups: AlertGroup[] = alertGroups("hn1", endpoints, cfg);
const SCRAPE = ["namespace", "pod", "le"];

/**
 * A promtool series selector for an exported series, from the facts.
 * @throws Error when the series or a label is not what the pinned exporter exports
 */
function s(name: string, labels: Record<string, string>): string {
    const family = Object.keys(metrics).find((f) => seriesNames(f, metrics[f]).includes(name));
    if (!family) throw new Error(`${name} is not exported by any pinned exporter (upstream/metrics.ts)`);
    for (const l of Object.keys(labels))
        if (![...metrics[family].labels, ...SCRAPE].includes(l)) throw new Error(`${name}: label ${l} is not set by its exporter`);
    return `${name}{${Object.entries(labels)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}}`;
}

type Series = Array<{ series: string; values: string }>;
/** One alert: the series that show its fault, the labels it must fire with, and a healthy counterpart. */
interface Case {
    fault: Series;
    fires: Record<string, string>;
    healthy: Series;
}

const W = { namespace: "inference", pod: "decode-0" };
const hist = (name: string, model: string, buckets: Array<[string, string]>): Series =>
    buckets.map(([le, values]) => ({ series: s(name, { model, le }), values }));
const none = {};

const M = { namespace: "inference", pod: "llama-70b-mooncake-master-0" };
const cases: Record<string, Case> = {
    // Mooncake master gauges (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/master_metric_manager.cpp).
    PlatformKVPoolNoCapacity: {
        fault: [{ series: s("master_total_capacity_bytes", M), values: "0x60" }],
        fires: M,
        healthy: [{ series: s("master_total_capacity_bytes", M), values: "1099511627776x60" }],
    },
    PlatformKVPoolFull: {
        fault: [
            { series: s("master_total_capacity_bytes", M), values: "1000x60" },
            { series: s("master_allocated_bytes", M), values: "990x60" },
        ],
        fires: M,
        healthy: [
            { series: s("master_total_capacity_bytes", M), values: "1000x60" },
            { series: s("master_allocated_bytes", M), values: "500x60" },
        ],
    },
    // p95 TTFT in (5 s, 10 s] for llama; all under 1 s when healthy.
    PlatformTTFTHigh: {
        fault: hist("dynamo_frontend_time_to_first_token_seconds_bucket", LLAMA, [
            ["1", "0x60"],
            ["5", "0x60"],
            ["10", "0+60x60"],
            ["+Inf", "0+60x60"],
        ]),
        fires: { model: LLAMA },
        healthy: hist("dynamo_frontend_time_to_first_token_seconds_bucket", LLAMA, [
            ["1", "0+60x60"],
            ["5", "0+60x60"],
            ["10", "0+60x60"],
            ["+Inf", "0+60x60"],
        ]),
    },
    PlatformITLHigh: {
        fault: hist("dynamo_frontend_inter_token_latency_seconds_bucket", QWEN, [
            ["0.05", "0x60"],
            ["0.1", "0+60x60"],
            ["+Inf", "0+60x60"],
        ]),
        fires: { model: QWEN },
        healthy: hist("dynamo_frontend_inter_token_latency_seconds_bucket", QWEN, [
            ["0.05", "0+60x60"],
            ["0.1", "0+60x60"],
            ["+Inf", "0+60x60"],
        ]),
    },
    PlatformKVCacheFull: {
        fault: [
            {
                series: s("dynamo_component_gpu_cache_usage_percent", { ...W, model: LLAMA, dynamo_component: "decode", dp_rank: "0" }),
                values: "0.99x60",
            },
        ],
        fires: W,
        healthy: [
            {
                series: s("dynamo_component_gpu_cache_usage_percent", { ...W, model: LLAMA, dynamo_component: "decode", dp_rank: "0" }),
                values: "0.5x60",
            },
        ],
    },
    PlatformRequestsQueued: {
        fault: [
            { series: s("dynamo_frontend_queued_requests", { model: LLAMA }), values: "30x60" },
            { series: s("dynamo_frontend_inflight_requests", { model: LLAMA }), values: "10x60" },
        ],
        fires: { model: LLAMA },
        healthy: [
            { series: s("dynamo_frontend_queued_requests", { model: LLAMA }), values: "5x60" },
            { series: s("dynamo_frontend_inflight_requests", { model: LLAMA }), values: "10x60" },
        ],
    },
    // 1 GB per second of transfer time (TCP-like) vs 20 GB/s (rail-like); 10 transfers a minute either way.
    PlatformKVTransferSlow: {
        fault: [
            { series: s("vllm:nixl_bytes_transferred_sum", { ...W, model_name: LLAMA, engine: "0" }), values: "0+1e9x60" },
            { series: s("vllm:nixl_xfer_time_seconds_sum", { ...W, model_name: LLAMA, engine: "0" }), values: "0+1x60" },
            { series: s("vllm:nixl_xfer_time_seconds_count", { ...W, model_name: LLAMA, engine: "0" }), values: "0+10x60" },
        ],
        fires: W,
        healthy: [
            { series: s("vllm:nixl_bytes_transferred_sum", { ...W, model_name: LLAMA, engine: "0" }), values: "0+2e10x60" },
            { series: s("vllm:nixl_xfer_time_seconds_sum", { ...W, model_name: LLAMA, engine: "0" }), values: "0+1x60" },
            { series: s("vllm:nixl_xfer_time_seconds_count", { ...W, model_name: LLAMA, engine: "0" }), values: "0+10x60" },
        ],
    },
    PlatformKVTransferFailures: {
        fault: [{ series: s("vllm:nixl_num_failed_transfers_total", { ...W, model_name: LLAMA, engine: "0" }), values: "0+1x60" }],
        fires: W,
        healthy: [{ series: s("vllm:nixl_num_failed_transfers_total", { ...W, model_name: LLAMA, engine: "0" }), values: "0x60" }],
    },
    PlatformKVTransferSlowSGLang: {
        fault: [{ series: s("sglang:kv_transfer_speed_gb_s", { ...W, model_name: QWEN }), values: "0.7x60" }],
        fires: W,
        healthy: [{ series: s("sglang:kv_transfer_speed_gb_s", { ...W, model_name: QWEN }), values: "20x60" }],
    },
    PlatformAuthFailingClosed: {
        fault: [{ series: s("auth_decisions_total", { code: "503", tier: "none", reason: "redis_unavailable" }), values: "0+10x60" }],
        fires: none,
        healthy: [
            { series: s("auth_decisions_total", { code: "200", tier: "none", reason: "ok" }), values: "0+10x60" },
            { series: s("auth_decisions_total", { code: "503", tier: "none", reason: "redis_unavailable" }), values: "0x60" },
        ],
    },
    PlatformNoPolicyBundle: {
        fault: [
            { series: s("auth_bundle_revision", { pod: "auth-0" }), values: "0x60" },
            { series: s("auth_bundle_revision", { pod: "auth-1" }), values: "7x60" },
        ],
        fires: none,
        healthy: [
            { series: s("auth_bundle_revision", { pod: "auth-0" }), values: "7x60" },
            { series: s("auth_bundle_revision", { pod: "auth-1" }), values: "7x60" },
        ],
    },
    PlatformBundleRevisionDrift: {
        fault: [
            { series: s("auth_bundle_revision", { pod: "auth-0" }), values: "7x60" },
            { series: s("auth_bundle_revision", { pod: "auth-1" }), values: "8x60" },
        ],
        fires: none,
        healthy: [
            { series: s("auth_bundle_revision", { pod: "auth-0" }), values: "8x60" },
            { series: s("auth_bundle_revision", { pod: "auth-1" }), values: "8x60" },
        ],
    },
    PlatformBundleStale: {
        fault: [{ series: s("auth_bundle_age_seconds", { pod: "auth-0" }), values: "2000x60" }],
        fires: none,
        healthy: [{ series: s("auth_bundle_age_seconds", { pod: "auth-0" }), values: "30x60" }],
    },
    PlatformRateLimitedShare: {
        fault: [
            { series: s("auth_decisions_total", { code: "429", tier: "key", reason: "rps" }), values: "0+50x60" },
            { series: s("auth_decisions_total", { code: "200", tier: "none", reason: "ok" }), values: "0+50x60" },
        ],
        fires: none,
        healthy: [
            { series: s("auth_decisions_total", { code: "429", tier: "key", reason: "rps" }), values: "0+1x60" },
            { series: s("auth_decisions_total", { code: "200", tier: "none", reason: "ok" }), values: "0+99x60" },
        ],
    },
    PlatformGateway5xx: {
        fault: [
            {
                series: s("envoy_http_downstream_rq_xx", { envoy_http_conn_manager_prefix: "https", envoy_response_code_class: "5" }),
                values: "0+10x60",
            },
            {
                series: s("envoy_http_downstream_rq_xx", { envoy_http_conn_manager_prefix: "https", envoy_response_code_class: "2" }),
                values: "0+10x60",
            },
        ],
        fires: none,
        healthy: [
            {
                series: s("envoy_http_downstream_rq_xx", { envoy_http_conn_manager_prefix: "https", envoy_response_code_class: "5" }),
                values: "0x60",
            },
            {
                series: s("envoy_http_downstream_rq_xx", { envoy_http_conn_manager_prefix: "https", envoy_response_code_class: "2" }),
                values: "0+100x60",
            },
        ],
    },
    PlatformUsageBacklog: {
        fault: [{ series: s("metering_spool_unshipped_bytes", { pod: "metering-0" }), values: "1e9x60" }],
        fires: none,
        healthy: [{ series: s("metering_spool_unshipped_bytes", { pod: "metering-0" }), values: "1e6x60" }],
    },
    PlatformUsageShippingFailing: {
        fault: [{ series: s("metering_ship_consecutive_failures", { pod: "metering-0" }), values: "50x60" }],
        fires: none,
        healthy: [{ series: s("metering_ship_consecutive_failures", { pod: "metering-0" }), values: "0x60" }],
    },
    PlatformUsagePoisonRecord: {
        fault: [{ series: s("metering_poisoned_events_total", { reason: "too_large" }), values: "0+1x60" }],
        fires: none,
        healthy: [{ series: s("metering_poisoned_events_total", { reason: "too_large" }), values: "0x60" }],
    },
    PlatformTokenCountersSkipped: {
        fault: [{ series: s("metering_tokens_skipped", { pod: "metering-0" }), values: "3x60" }],
        fires: none,
        healthy: [{ series: s("metering_tokens_skipped", { pod: "metering-0" }), values: "0x60" }],
    },
    PlatformUsageQuarantined: {
        fault: [{ series: s("metering_records_total", { outcome: "quarantined" }), values: "0+1x60" }],
        fires: none,
        healthy: [
            { series: s("metering_records_total", { outcome: "quarantined" }), values: "0x60" },
            { series: s("metering_records_total", { outcome: "spooled" }), values: "0+10x60" },
        ],
    },
};

let dir: string;
beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "promtool-"));
});
afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
});

/** promtool in this test's folder (test/promtool.ts). */
const promtool = (args: string[]) => runPromtool(args, dir);

describe("alert rules under promtool", () => {
    it("every rendered alert has a fault case and a healthy case", () => {
        expect(groups.flatMap((g) => g.rules.map((r) => r.alert)).sort()).toEqual(Object.keys(cases).sort());
    });

    it("promtool check rules accepts the rules exactly as rendered (expressions and annotation templates)", () => {
        fs.writeFileSync(path.join(dir, "rendered.yaml"), YAML.stringify({ groups }));
        const r = promtool(["check", "rules", "rendered.yaml"]);
        expect(r.ok, r.out).toBe(true);
        expect(r.out).toMatch(new RegExp(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`));
    });

    it("each alert fires on the series that shows its fault and stays quiet on a healthy one", () => {
        const bare = { groups: groups.map((g) => ({ name: g.name, rules: g.rules.map(({ annotations: _a, ...r }) => r) })) };
        fs.writeFileSync(path.join(dir, "rules.yaml"), YAML.stringify(bare));
        const rule = (name: string) => groups.flatMap((g) => g.rules).find((r) => r.alert === name)!;
        const tests = Object.entries(cases).flatMap(([alert, c]) => [
            {
                interval: "1m",
                input_series: c.fault,
                alert_rule_test: [
                    { eval_time: "40m", alertname: alert, exp_alerts: [{ exp_labels: { ...c.fires, ...rule(alert).labels } }] },
                ],
            },
            { interval: "1m", input_series: c.healthy, alert_rule_test: [{ eval_time: "40m", alertname: alert, exp_alerts: [] }] },
        ]);
        fs.writeFileSync(path.join(dir, "tests.yaml"), YAML.stringify({ rule_files: ["rules.yaml"], evaluation_interval: "1m", tests }));
        const r = promtool(["test", "rules", "tests.yaml"]);
        expect(r.ok, r.out).toBe(true);
        expect(r.out).toMatch(/SUCCESS/);
    });

    it("the harness can fail: an alert expected on a healthy series is reported by promtool", () => {
        const tests = [
            {
                interval: "1m",
                input_series: cases.PlatformKVCacheFull.healthy,
                alert_rule_test: [
                    {
                        eval_time: "40m",
                        alertname: "PlatformKVCacheFull",
                        exp_alerts: [
                            {
                                exp_labels: {
                                    ...W,
                                    ...groups.flatMap((g) => g.rules).find((x) => x.alert === "PlatformKVCacheFull")!.labels,
                                },
                            },
                        ],
                    },
                ],
            },
        ];
        fs.writeFileSync(path.join(dir, "neg.yaml"), YAML.stringify({ rule_files: ["rules.yaml"], evaluation_interval: "1m", tests }));
        const r = promtool(["test", "rules", "neg.yaml"]);
        expect(r.ok).toBe(false);
        expect(r.out).toMatch(/FAILED/);
    });

    it("series outside the facts are refused before promtool runs (a removed Dynamo name, a label no exporter sets)", () => {
        expect(() => s("dynamo_component_kvstats_gpu_cache_usage_percent", W)).toThrow(/not exported by any pinned exporter/);
        expect(() => s("sglang:kv_transfer_speed_gb_s", { worker: "x" })).toThrow(/label worker is not set/);
    });
});
