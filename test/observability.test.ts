/**
 * Dashboards, alerts and scrape objects of a spoke (components/spoke/Observability.ts, lib/observability.ts): every
 * PromQL expression parses with the Prometheus project's grammar and selects only metrics the pinned upstream exports
 * (upstream/metrics.ts, each with its source), the KV-transfer guard is there where KV moves between workers, and the
 * objects carry the labels kube-prometheus-stack selects by.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ObservabilityConfigSchema } from "../config/observability";
import { checkPromQL } from "../lib/promql";
import { alertGroups, dashboards, type ObservedEndpoint } from "../lib/observability";
import { AuthMetrics } from "../services/auth/metrics";
import { unwrapWire } from "../tools/wire";
import { metrics } from "../upstream/metrics";
import { flatConfig, ROOT, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";
import { referenceableOutputs } from "../tools/wire";

const cfg = ObservabilityConfigSchema.parse({});
const endpoints: ObservedEndpoint[] = [
    { name: "llama", model: "meta-llama/Llama-3.3-70B-Instruct", engine: "vllm", gpus: 16, disaggregated: true },
    { name: "qwen", model: "Qwen/Qwen3-32B", engine: "sglang", gpus: 8, disaggregated: true },
];

function allExpressions(spoke: string, eps: ObservedEndpoint[]): string[] {
    return [
        ...alertGroups(spoke, eps, cfg).flatMap((g) => g.rules.map((r) => r.expr)),
        ...dashboards(spoke, eps).flatMap((d) => d.panels.flatMap((p) => p.queries.map((q) => q.expr))),
    ];
}

describe("PromQL of dashboards and alerts", () => {
    it("every expression parses and selects only upstream metrics", () => {
        const exprs = allExpressions("hn1", endpoints);
        expect(exprs.length).toBeGreaterThan(20);
        for (const e of exprs) expect(checkPromQL(e).errors, e).toEqual([]);
    });

    it("the checker refuses a planted unknown metric and a syntax error (so the check above can fail)", () => {
        expect(checkPromQL("sum(rate(vllm:gpu_cache_usage_perc_total[5m]))").errors).toEqual([
            "unknown metric vllm:gpu_cache_usage_perc_total (not in upstream/metrics.ts)",
        ]);
        expect(
            checkPromQL("histogram_quantile(0.95, sum by (le) (rate(dynamo_frontend_time_to_first_token_seconds_bucket[5m]))").errors.some(
                (x) => x.startsWith("syntax error"),
            ),
        ).toBe(true);
        // A histogram is selected through its _bucket/_sum/_count series, never by its family name.
        expect(checkPromQL("dynamo_frontend_time_to_first_token_seconds").errors).toHaveLength(1);
    });

    it("covers the figures an operator asks for", () => {
        const selected = new Set(allExpressions("hn1", endpoints).flatMap((e) => checkPromQL(e).series));
        for (const s of [
            "dynamo_frontend_time_to_first_token_seconds_bucket", // TTFT p95
            "dynamo_frontend_inter_token_latency_seconds_bucket", // ITL p99
            "vllm:prefix_cache_hits_total",
            "sglang:cache_hit_rate", // KV cache hit rate
            "dynamo_component_gpu_cache_usage_percent", // KV utilisation (the kvstats_ names were removed in Dynamo 1.0, #5704)
            "dynamo_frontend_queued_requests",
            "dynamo_component_inflight_requests", // queue, in flight per worker
            "dynamo_frontend_output_tokens_total", // output tokens/s per GPU
            "auth_decisions_total",
            "auth_bundle_revision",
            "metering_spool_unshipped_bytes",
            "vllm:nixl_bytes_transferred_sum",
            "sglang:kv_transfer_speed_gb_s", // run-time RDMA guard
        ])
            expect(selected.has(s), s).toBe(true);
    });

    it("per-GPU throughput divides by the GPUs counted from series (DCGM GPUs of the model's worker pods), never a fixed count", () => {
        const panel = dashboards("hn1", endpoints)[0].panels.find((p) => p.title === "Output tokens/s per GPU")!;
        expect(panel.queries.map((q) => q.expr)).toEqual([
            'sum(rate(dynamo_frontend_output_tokens_total{model="meta-llama/Llama-3.3-70B-Instruct"}[5m])) / count(DCGM_FI_DEV_GPU_UTIL{namespace="inference"} and on (namespace, pod) dynamo_component_gpu_cache_usage_percent{namespace="inference", model="meta-llama/Llama-3.3-70B-Instruct"})',
            'sum(rate(dynamo_frontend_output_tokens_total{model="Qwen/Qwen3-32B"}[5m])) / count(DCGM_FI_DEV_GPU_UTIL{namespace="inference"} and on (namespace, pod) dynamo_component_gpu_cache_usage_percent{namespace="inference", model="Qwen/Qwen3-32B"})',
        ]);
        // Evaluated by promtool in test/dashboard-promtool.test.ts.
    });

    it("the KV-transfer guard fires below a tenth of a 400 Gb/s rail and only where KV moves between workers", () => {
        const kv = alertGroups("hn1", endpoints, cfg).find((g) => g.name === "platform-kv-transfer")!;
        const vllm = kv.rules.find((r) => r.alert === "PlatformKVTransferSlow")!;
        // 400 Gb/s = 50 GB/s; a tenth = 5 GB/s = 5e9 bytes/s (config/observability.ts kvTransferMinGBps).
        expect(vllm.expr).toContain("< 5000000000 and");
        expect(kv.rules.find((r) => r.alert === "PlatformKVTransferSlowSGLang")!.expr).toContain("< 5");
        const aggregated = alertGroups("hcm1", [{ ...endpoints[0], disaggregated: false }], cfg);
        expect(aggregated.find((g) => g.name === "platform-kv-transfer")).toBeUndefined();
        expect(alertGroups("x", [], cfg).map((g) => g.name)).toEqual(["platform-gateway", "platform-metering"]);
    });
});

describe("our services export what the dashboards read", () => {
    it("auth metrics exist in the auth service's live registry", async () => {
        const names = new Set((await new AuthMetrics(() => 1).registry.getMetricsAsJSON()).map((m) => m.name));
        for (const [name, fact] of Object.entries(metrics))
            if (fact.source === "repo:services/auth/metrics.ts") expect(names.has(name), name).toBe(true);
    });

    it("metering metrics are registered by the metering service", () => {
        const src = fs.readFileSync(path.join(ROOT, "services/metering/service.ts"), "utf8");
        for (const [name, fact] of Object.entries(metrics))
            if (fact.source === "repo:services/metering/service.ts") expect(src).toContain(`name: "${name}"`);
    });
});

describe("rendered spoke objects", () => {
    it("spoke-hn1: one PrometheusRule, PodMonitors and dashboards, selected by kube-prometheus-stack's labels", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1");
        const objs = spoke.resources.map((r) => unwrapWire(r.inputs) as any).filter((x) => x?.kind);
        const rules = objs.filter((o) => o.kind === "PrometheusRule");
        expect(rules).toHaveLength(1);
        expect(rules[0].metadata).toMatchObject({ namespace: "monitoring", labels: { release: "kube-prometheus-stack" } });
        const alerts = rules[0].spec.groups.flatMap((g: any) => g.rules);
        for (const a of alerts) {
            expect(a.labels.spoke).toBe("hn1");
            expect(checkPromQL(a.expr).errors, a.expr).toEqual([]);
        }
        // hn1 runs disaggregated vLLM (stacks/Pulumi.hub-prod.yaml): the run-time RDMA guard is there.
        expect(alerts.map((a: any) => a.alert)).toContain("PlatformKVTransferSlow");

        const monitors = objs.filter((o) => o.kind === "PodMonitor");
        expect(monitors.map((m) => m.metadata.name).sort()).toEqual([
            "agent-router-envoy",
            "dynamo-frontends",
            "dynamo-workers",
            "mooncake-masters",
            "platform-auth",
            "platform-metering",
        ]);
        // hn1's endpoints run Mooncake pools: every master's `metrics` port (--metrics_port, kvcache-ai/Mooncake@v0.3.12.post1:
        // mooncake-store/src/master.cpp) is scraped by a selected PodMonitor, and the pool alerts are rendered.
        const masters = objs.filter((o) => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/name"] === "mooncake-master");
        expect(masters.length).toBeGreaterThan(0);
        const mm = monitors.find((m) => m.metadata.name === "mooncake-masters");
        for (const d of masters) {
            expect(mm.spec.selector.matchLabels["app.kubernetes.io/name"]).toBe(d.spec.template.metadata.labels["app.kubernetes.io/name"]);
            expect(mm.spec.selector.matchExpressions[0].values).toContain(
                d.spec.template.metadata.labels["inference-platform.io/endpoint"],
            );
            expect(d.spec.template.spec.containers[0].ports.map((p: any) => p.name)).toContain(mm.spec.podMetricsEndpoints[0].port);
        }
        expect(alerts.map((a: any) => a.alert)).toEqual(expect.arrayContaining(["PlatformKVPoolNoCapacity", "PlatformKVPoolFull"]));
        for (const m of monitors) expect(m.metadata.labels.release, m.metadata.name).toBe("kube-prometheus-stack");
        // Every frontend, prefill and decode pod of every DGD is selected by our labelled PodMonitors (the chart's carry no
        // labels, ai-dynamo/dynamo deploy/helm/charts/platform/components/operator/templates/prometheus.yaml, and are off).
        const matches = (sel: any, labels: Record<string, string>) =>
            Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
            (sel.matchExpressions ?? []).every((x: any) => x.operator === "In" && x.values.includes(labels[x.key]));
        const dgds = objs.filter((o) => o.kind === "DynamoGraphDeployment");
        expect(dgds.length).toBeGreaterThan(0);
        for (const d of dgds)
            for (const c of d.spec.components) {
                if (c.type === "planner") continue;
                const want = c.type === "frontend" ? "dynamo-frontends" : "dynamo-workers";
                const hit = monitors.filter(
                    (m) =>
                        m.spec.namespaceSelector.matchNames.includes(d.metadata.namespace) &&
                        matches(m.spec.selector, c.podTemplate.metadata.labels),
                );
                expect(
                    hit.map((m) => m.metadata.name),
                    `${d.metadata.name}/${c.name}`,
                ).toEqual([want]);
            }
        const workers = monitors.find((m) => m.metadata.name === "dynamo-workers");
        expect(workers.spec.podMetricsEndpoints[0]).toMatchObject({ port: "system", path: "/metrics" });
        const platform = spoke.resources.map((r) => unwrapWire(r.inputs) as any).find((x) => x?.chart === "dynamo-platform");
        expect(platform.values["dynamo-operator"].dynamo.metrics.podMonitors).toEqual({ enabled: false });
        const envoy = monitors.find((m) => m.metadata.name === "agent-router-envoy");
        // Envoy Gateway bootstraps its stats listener on 19001 (envoyproxy/gateway internal/xds/bootstrap/bootstrap.go).
        expect(envoy.spec.podMetricsEndpoints).toEqual([{ portNumber: 19001, path: "/stats/prometheus", interval: "15s" }]);

        const boards = objs.filter((o) => o.kind === "ConfigMap" && o.metadata.labels?.grafana_dashboard === "1");
        expect(boards.map((b) => b.metadata.name).sort()).toEqual(["dashboard-platform-ops-hn1", "dashboard-platform-serving-hn1"]);
        for (const b of boards) {
            const json = JSON.parse(Object.values(b.data as Record<string, string>)[0]);
            for (const p of json.panels) for (const t of p.targets) expect(checkPromQL(t.expr).errors, t.expr).toEqual([]);
        }
        const scrape = objs.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "metering-from-scrapers");
        expect(scrape.spec.ingress[0].ports).toEqual([{ protocol: "TCP", port: 8080 }]);
    });

    it("without the Prometheus operator no monitoring.coreos.com object is rendered, dashboards still are", async () => {
        const hub = await runRepoStack("hub-prod");
        const doc = stackConfigDoc("spoke-hn1");
        doc["platform:observability"] = { prometheusOperator: false };
        const spoke = await runRepoStack("spoke-hn1", {
            config: flatConfig(doc),
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
        });
        const objs = spoke.resources.map((r) => unwrapWire(r.inputs) as any).filter((x) => x?.kind);
        expect(objs.filter((o) => String(o.apiVersion).startsWith("monitoring.coreos.com/"))).toEqual([]);
        expect(objs.filter((o) => o.kind === "ConfigMap" && o.metadata.labels?.grafana_dashboard === "1")).toHaveLength(2);
    });
});

describe("CRD patterns in Go regexp syntax (prometheus-operator CRDs)", () => {
    it("a leading (?i) becomes the i flag, so PodMonitor/PrometheusRule schemas compile and still match", async () => {
        const { goRegExp } = await import("../tools/validate");
        // monitoring.coreos.com_podmonitors.yaml (prometheus-operator v0.93.0): `^(?i)(abort|warn)?$`
        const re = goRegExp("^(?i)(abort|warn)?$", "u");
        expect(re.flags).toContain("i");
        expect(re.test("Warn")).toBe(true);
        expect(re.test("drop")).toBe(false);
        expect(goRegExp("^[a-z]+$", "u").test("abc")).toBe(true);
    });
});
