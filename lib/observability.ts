import type { ObservabilityConfig } from "../config/observability";
import { ROLE_LABEL } from "./dgd";
import { ENDPOINT_LABEL, INFERENCE_NAMESPACE } from "./labels";

/**
 * Dashboards, alerts and scrape targets of a spoke, as plain data (components/spoke/Observability.ts turns them into
 * Kubernetes objects). Every metric an expression selects is an upstream fact in upstream/metrics.ts; the tests parse
 * every expression with the Prometheus project's PromQL grammar and check each selector against those facts.
 *
 * Where the series come from (every scrape object is rendered here, with the labels the configured Prometheus selects):
 * - Dynamo frontends and workers: {@link dynamoScrapeTargets}. The dynamo-platform chart's own PodMonitors carry no
 *   labels, so kube-prometheus-stack's default `release: <name>` selector never picks them up; they are turned off
 *   (components/spoke/DynamoPlatform.ts). The engines' own series (`vllm:*`, `sglang:*`) are served on the worker's
 *   `system` port with Dynamo's; SGLang registers them only with `--enable-metrics` (lib/dgd.ts).
 * - The Agent Router's Envoy proxies, the auth service and metering: {@link scrapeTargets}.
 */

/** One endpoint as the dashboards and alerts see it (from the hub's placement). */
export interface ObservedEndpoint {
    /** DynamoGraphDeployment / endpoint name. */
    name: string;
    /** Served model name: the frontend's `model` label (`--served-model-name`, lib/dgd.ts). */
    model: string;
    engine: "vllm" | "sglang" | "trtllm";
    /** GPUs the endpoint occupies at its configured replica counts (config/endpoint.ts endpointGpus). */
    gpus: number;
    /** Disaggregated prefill/decode: KV moves between workers over NIXL, so the KV-transfer guard applies. */
    disaggregated: boolean;
    /** The endpoint runs a Mooncake store pool (lib/mooncake.ts): its master is scraped and the pool alerted on. */
    mooncakePool?: boolean;
}

/** A PrometheusRule alerting rule (prometheus-operator `spec.groups[].rules[]`). */
export interface AlertRule {
    alert: string;
    expr: string;
    /** Prometheus duration, e.g. `10m`. */
    for: string;
    labels: { severity: "critical" | "warning" | "info"; spoke: string };
    annotations: { summary: string; description: string };
}

/** A PrometheusRule group. */
export interface AlertGroup {
    name: string;
    rules: AlertRule[];
}

/** Namespace the DynamoGraphDeployments run in (lib/labels.ts INFERENCE_NAMESPACE; the PodMonitor's `namespace` label). */
const WORKERS = `namespace="${INFERENCE_NAMESPACE}"`;

function promString(s: string): string {
    return JSON.stringify(s);
}

/** `model=~"a|b"` over the endpoints' served names, regex-escaped. */
function modelMatcher(endpoints: ObservedEndpoint[]): string {
    const alts = [...new Set(endpoints.map((e) => e.model))].sort().map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    return `model=~${promString(alts.join("|"))}`;
}

/**
 * The spoke's alerting rules. Serving alerts are rendered only when the hub placed endpoints here; the KV-transfer
 * guard (the run-time half of the RDMA policy: KV moving over TCP or the wrong NIC shows as a transfer rate far below
 * the rail's) only for engines that run disaggregated endpoints here.
 *
 * @param spoke `platform:spoke.name`, set as the `spoke` label of every alert
 */
export function alertGroups(spoke: string, endpoints: ObservedEndpoint[], cfg: ObservabilityConfig): AlertGroup[] {
    const t = cfg.alerts;
    const labels = (severity: AlertRule["labels"]["severity"]) => ({ severity, spoke });
    const groups: AlertGroup[] = [];

    if (endpoints.length > 0) {
        const models = modelMatcher(endpoints);
        const serving: AlertRule[] = [
            {
                alert: "PlatformTTFTHigh",
                expr: `histogram_quantile(0.95, sum by (le, model) (rate(dynamo_frontend_time_to_first_token_seconds_bucket{${models}}[5m]))) > ${t.ttftP95Seconds}`,
                for: "10m",
                labels: labels("critical"),
                annotations: {
                    summary: "TTFT p95 of {{ $labels.model }} is {{ $value | humanizeDuration }}",
                    description: `Time to first token p95 above ${t.ttftP95Seconds} s for 10 minutes on spoke ${spoke}. Check the planner's prefill replicas, KV cache utilisation and the KV-aware router's hit rate.`,
                },
            },
            {
                alert: "PlatformITLHigh",
                expr: `histogram_quantile(0.99, sum by (le, model) (rate(dynamo_frontend_inter_token_latency_seconds_bucket{${models}}[5m]))) > ${t.itlP99Seconds}`,
                for: "10m",
                labels: labels("warning"),
                annotations: {
                    summary: "ITL p99 of {{ $labels.model }} is {{ $value | humanizeDuration }}",
                    description: `Inter-token latency p99 above ${t.itlP99Seconds} s for 10 minutes on spoke ${spoke}: decode workers are overloaded or prefill runs on them.`,
                },
            },
            {
                alert: "PlatformKVCacheFull",
                expr: `max by (namespace, pod) (dynamo_component_gpu_cache_usage_percent{${WORKERS}}) > ${t.kvUsageFraction}`,
                for: "15m",
                labels: labels("warning"),
                annotations: {
                    summary: "KV cache of {{ $labels.pod }} is {{ $value | humanizePercentage }} full",
                    description: `GPU KV cache above ${t.kvUsageFraction * 100}% for 15 minutes: requests queue or are preempted. The planner scales on KV utilisation; check its GPU budget.`,
                },
            },
            {
                alert: "PlatformRequestsQueued",
                expr: `sum by (model) (dynamo_frontend_queued_requests{${models}}) > 2 * sum by (model) (dynamo_frontend_inflight_requests{${models}})`,
                for: "10m",
                labels: labels("warning"),
                annotations: {
                    summary: "{{ $labels.model }} has more requests waiting for a first token than being served",
                    description: "Queued requests exceed twice the in-flight ones for 10 minutes: capacity is short of demand.",
                },
            },
        ];
        groups.push({ name: "platform-serving", rules: serving });

        const disagg = new Set(endpoints.filter((e) => e.disaggregated).map((e) => e.engine));
        const kv: AlertRule[] = [];
        const minBytes = t.kvTransferMinGBps * 1e9;
        if (disagg.has("vllm")) {
            kv.push(
                {
                    alert: "PlatformKVTransferSlow",
                    expr: `(sum by (namespace, pod) (rate(vllm:nixl_bytes_transferred_sum{${WORKERS}}[10m])) / sum by (namespace, pod) (rate(vllm:nixl_xfer_time_seconds_sum{${WORKERS}}[10m]))) < ${minBytes} and sum by (namespace, pod) (rate(vllm:nixl_xfer_time_seconds_count{${WORKERS}}[10m])) > 0`,
                    for: "10m",
                    labels: labels("critical"),
                    annotations: {
                        summary: "NIXL KV transfers of {{ $labels.pod }} average {{ $value | humanize }}B/s",
                        description: `KV transfer rate below ${t.kvTransferMinGBps} GB/s (a tenth of a 400 Gb/s rail) for 10 minutes: NIXL/UCX is moving KV over TCP or a non-affine NIC. Check the pod's preflight log and UCX_NET_DEVICES.`,
                    },
                },
                {
                    alert: "PlatformKVTransferFailures",
                    expr: `sum by (namespace, pod) (increase(vllm:nixl_num_failed_transfers_total{${WORKERS}}[10m])) > 0`,
                    for: "0m",
                    labels: labels("critical"),
                    annotations: {
                        summary: "{{ $labels.pod }} had {{ $value }} failed NIXL KV transfers in 10 minutes",
                        description:
                            "Failed KV transfers between prefill and decode: requests fail (kv_load_failure_policy fail) or recompute.",
                    },
                },
            );
        }
        if (disagg.has("sglang")) {
            kv.push({
                alert: "PlatformKVTransferSlowSGLang",
                expr: `max by (namespace, pod) (sglang:kv_transfer_speed_gb_s{${WORKERS}}) < ${t.kvTransferMinGBps}`,
                for: "10m",
                labels: labels("critical"),
                annotations: {
                    summary: "SGLang KV transfers of {{ $labels.pod }} run at {{ $value }} GB/s",
                    description: `KV transfer speed below ${t.kvTransferMinGBps} GB/s for 10 minutes: the transfer backend is on TCP or a non-affine NIC.`,
                },
            });
        }
        if (kv.length) groups.push({ name: "platform-kv-transfer", rules: kv });
        if (endpoints.some((e) => e.mooncakePool)) {
            // Mooncake master gauges (upstream/metrics.ts); one series per master, i.e. per endpoint's pool.
            const MASTERS = `namespace=${promString(INFERENCE_NAMESPACE)}`;
            groups.push({
                name: "platform-kv-pool",
                rules: [
                    {
                        alert: "PlatformKVPoolNoCapacity",
                        expr: `max by (namespace, pod) (master_total_capacity_bytes{${MASTERS}}) == 0`,
                        for: "10m",
                        labels: labels("critical"),
                        annotations: {
                            summary: "Mooncake master {{ $labels.pod }} has no store segment mounted",
                            description: `The KV pool's master reports zero capacity for 10 minutes on spoke ${spoke}: no store has mounted its segment (store pods down, or their RDMA registration failed), so every pool read misses and prefill recomputes.`,
                        },
                    },
                    {
                        alert: "PlatformKVPoolFull",
                        expr: `max by (namespace, pod) (master_allocated_bytes{${MASTERS}} / master_total_capacity_bytes{${MASTERS}} > 0) > ${t.kvUsageFraction}`,
                        for: "15m",
                        labels: labels("warning"),
                        annotations: {
                            summary: "Mooncake pool of {{ $labels.pod }} is {{ $value | humanizePercentage }} allocated",
                            description: `The KV pool is above ${t.kvUsageFraction} allocated for 15 minutes on spoke ${spoke}: the master is evicting constantly; add store replicas or segment size.`,
                        },
                    },
                ],
            });
        }
    }

    groups.push(
        {
            name: "platform-gateway",
            rules: [
                {
                    alert: "PlatformAuthFailingClosed",
                    expr: `sum(rate(auth_decisions_total{code="503"}[5m])) > 0`,
                    for: "5m",
                    labels: labels("critical"),
                    annotations: {
                        summary: "The auth service answers 503 ({{ $value | humanize }}/s)",
                        description:
                            "ext_authz fails closed: Redis is unreachable or no valid policy bundle was ever loaded. Every request is refused.",
                    },
                },
                {
                    alert: "PlatformNoPolicyBundle",
                    expr: `min(auth_bundle_revision) == 0`,
                    for: "5m",
                    labels: labels("critical"),
                    annotations: {
                        summary: "An auth replica serves no policy bundle",
                        description:
                            "A replica never loaded a valid bundle and denies everything: check the bundle bucket, its signature and the replica's logs.",
                    },
                },
                {
                    alert: "PlatformBundleRevisionDrift",
                    expr: `max(auth_bundle_revision) - min(auth_bundle_revision) > 0`,
                    for: "15m",
                    labels: labels("warning"),
                    annotations: {
                        summary: "Auth replicas serve different policy revisions (spread {{ $value }})",
                        description: "Replicas disagree on the revision for 15 minutes: one cannot reach or verify the newest bundle.",
                    },
                },
                {
                    alert: "PlatformBundleStale",
                    expr: `max(auth_bundle_age_seconds) > ${t.bundleMaxAgeSeconds}`,
                    for: "5m",
                    labels: labels("warning"),
                    annotations: {
                        summary: "Policy bundle not confirmed for {{ $value | humanizeDuration }}",
                        description:
                            "The spoke serves its last-known-good bundle: the hub's bucket is unreachable. Revocations do not arrive.",
                    },
                },
                {
                    alert: "PlatformRateLimitedShare",
                    expr: `sum(rate(auth_decisions_total{code="429"}[5m])) / sum(rate(auth_decisions_total[5m])) > 0.2`,
                    for: "15m",
                    labels: labels("info"),
                    annotations: {
                        summary: "{{ $value | humanizePercentage }} of requests are rate limited",
                        description: "More than a fifth of requests get 429 for 15 minutes: limits may be too tight for demand.",
                    },
                },
                {
                    alert: "PlatformGateway5xx",
                    expr: `sum(rate(envoy_http_downstream_rq_xx{envoy_response_code_class="5"}[5m])) / sum(rate(envoy_http_downstream_rq_xx[5m])) > 0.05`,
                    for: "10m",
                    labels: labels("critical"),
                    annotations: {
                        summary: "{{ $value | humanizePercentage }} of gateway responses are 5xx",
                        description: "The Agent Router returns more than 5% server errors for 10 minutes.",
                    },
                },
            ],
        },
        {
            name: "platform-metering",
            rules: [
                {
                    alert: "PlatformUsageBacklog",
                    expr: `max(metering_spool_unshipped_bytes) > ${t.spoolUnshippedBytes}`,
                    for: "15m",
                    labels: labels("warning"),
                    annotations: {
                        summary: "{{ $value | humanize1024 }}B of usage not acknowledged by the hub",
                        description:
                            "Usage events pile up in the spool: the hub stream is unreachable or throttling. Token limits lag and the spool may fill.",
                    },
                },
                {
                    alert: "PlatformUsageShippingFailing",
                    expr: `max(metering_ship_consecutive_failures) > 10`,
                    for: "10m",
                    labels: labels("critical"),
                    annotations: {
                        summary: "Usage shipping failed {{ $value }} times in a row",
                        description: "The metering service cannot put records on the hub's Kinesis stream.",
                    },
                },
                {
                    alert: "PlatformUsagePoisonRecord",
                    expr: `sum(increase(metering_poisoned_events_total[1h])) > 0`,
                    for: "0m",
                    labels: labels("warning"),
                    annotations: {
                        summary: "{{ $value }} usage events Kinesis would not take were quarantined in the last hour",
                        description:
                            "The shipper set them aside (services/metering quarantine.jsonl) and shipped a marker; the rest kept shipping. The reconciliation report lists them as quarantined.",
                    },
                },
                {
                    alert: "PlatformTokenCountersSkipped",
                    expr: `max(metering_tokens_skipped) > 0`,
                    for: "0m",
                    labels: labels("warning"),
                    annotations: {
                        summary: "{{ $value }} usage events never reached the token limit counters",
                        description:
                            "Redis was unreachable for longer than the spool keeps unapplied events: token limits undercount until the window rolls over. Billing (the ledger) is unaffected.",
                    },
                },
                {
                    alert: "PlatformUsageQuarantined",
                    expr: `sum(increase(metering_records_total{outcome="quarantined"}[1h])) > 0`,
                    for: "0m",
                    labels: labels("warning"),
                    annotations: {
                        summary: "{{ $value }} usage records quarantined in the last hour",
                        description:
                            "Records that could not be billed as they are were set aside on the spoke; the reconciliation report lists them.",
                    },
                },
            ],
        },
    );
    return groups;
}

/** One Grafana panel target. */
export interface PanelQuery {
    expr: string;
    legendFormat: string;
}

/** One Grafana time-series panel. */
export interface Panel {
    title: string;
    /** Grafana unit id (`s`, `percentunit`, `Bps`, `reqps`, `short`, `bytes`). */
    unit: string;
    queries: PanelQuery[];
}

/** A dashboard as data: uid, title and panels (rendered to Grafana JSON by {@link grafanaDashboard}). */
export interface Dashboard {
    uid: string;
    title: string;
    panels: Panel[];
}

/**
 * Output tokens/s per GPU of a model, with the GPU count read from series, not from config: the GPUs the DCGM exporter
 * reports for pods that serve the model (one `DCGM_FI_DEV_GPU_UTIL` series per GPU, labelled with the pod it is
 * allocated to: NVIDIA/dcgm-exporter@07c87278a5e18805287ee56cba8abe9eb7a87ced:internal/pkg/transformation/const.go
 * `podAttribute`; kept as `pod` because the GPU Operator's ServiceMonitor honours the exporter's labels,
 * components/spoke/GpuOperator.ts), joined on (namespace, pod) with the Dynamo workers that serve it. Scaled
 * workers are counted as they come and go; a config count (`/ 8`) would be wrong after the first Planner decision.
 */
export function tokensPerGpuExpr(model: string): string {
    const m = promString(model);
    return `sum(rate(dynamo_frontend_output_tokens_total{model=${m}}[5m])) / count(DCGM_FI_DEV_GPU_UTIL{${WORKERS}} and on (namespace, pod) dynamo_component_gpu_cache_usage_percent{${WORKERS}, model=${m}})`;
}

/**
 * Pure: the spoke's dashboards (rendered by {@link grafanaDashboard} into the Grafana sidecar's ConfigMaps,
 * components/spoke/Observability.ts).
 * - `platform-serving-<spoke>` (only when `endpoints` is non-empty), per model: TTFT p95 and ITL p99 (seconds, the
 *   Dynamo frontend histograms), output tokens/s per GPU ({@link tokensPerGpuExpr}), KV cache utilisation per worker
 *   (fraction), requests queued / in flight, and, where an engine exports it, the KV cache hit rate (fraction: vLLM
 *   `prefix_cache_hits_total / prefix_cache_queries_total`, vllm-project/vllm@v0.28.0:vllm/v1/metrics/loggers.py;
 *   SGLang `cache_hit_rate`, sgl-project/sglang@v0.5.18:python/sglang/srt/metrics/collector.py) and, for
 *   disaggregated endpoints, the KV transfer rate per worker in bytes/s (panel unit `Bps`): vLLM NIXL bytes over
 *   transfer seconds (vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py
 *   `NixlPromMetrics`), SGLang `kv_transfer_speed_gb_s` (GB/s, gigabytes) x 1e9. Metric names and sources:
 *   upstream/metrics.ts.
 * - `platform-ops-<spoke>`: auth decisions by status (requests/s), auth check latency p99 (s), bundle revision and age
 *   (s) per replica, usage not yet acknowledged by the hub (bytes), usage records by outcome, gateway responses by
 *   code class.
 * @param spoke the spoke name, in each dashboard's `uid` and title
 * @param endpoints the endpoints placed on the spoke; the engine set decides which hit-rate and transfer queries appear
 * @returns one or two dashboards, serving first; never throws
 */
export function dashboards(spoke: string, endpoints: ObservedEndpoint[]): Dashboard[] {
    const serving: Panel[] = [];
    if (endpoints.length > 0) {
        const models = modelMatcher(endpoints);
        const engines = new Set(endpoints.map((e) => e.engine));
        const hit: PanelQuery[] = [];
        if (engines.has("vllm"))
            hit.push({
                expr: `sum by (model_name) (rate(vllm:prefix_cache_hits_total{${WORKERS}}[5m])) / sum by (model_name) (rate(vllm:prefix_cache_queries_total{${WORKERS}}[5m]))`,
                legendFormat: "{{model_name}} (vLLM)",
            });
        if (engines.has("sglang"))
            hit.push({ expr: `avg by (model_name) (sglang:cache_hit_rate{${WORKERS}})`, legendFormat: "{{model_name}} (SGLang)" });
        const transfer: PanelQuery[] = [];
        if (endpoints.some((e) => e.disaggregated && e.engine === "vllm"))
            transfer.push({
                expr: `sum by (pod) (rate(vllm:nixl_bytes_transferred_sum{${WORKERS}}[5m])) / sum by (pod) (rate(vllm:nixl_xfer_time_seconds_sum{${WORKERS}}[5m]))`,
                legendFormat: "{{pod}}",
            });
        if (endpoints.some((e) => e.disaggregated && e.engine === "sglang"))
            transfer.push({ expr: `max by (pod) (sglang:kv_transfer_speed_gb_s{${WORKERS}}) * 1e9`, legendFormat: "{{pod}}" });
        serving.push(
            {
                title: "TTFT p95",
                unit: "s",
                queries: [
                    {
                        expr: `histogram_quantile(0.95, sum by (le, model) (rate(dynamo_frontend_time_to_first_token_seconds_bucket{${models}}[5m])))`,
                        legendFormat: "{{model}}",
                    },
                ],
            },
            {
                title: "ITL p99",
                unit: "s",
                queries: [
                    {
                        expr: `histogram_quantile(0.99, sum by (le, model) (rate(dynamo_frontend_inter_token_latency_seconds_bucket{${models}}[5m])))`,
                        legendFormat: "{{model}}",
                    },
                ],
            },
            {
                title: "Output tokens/s per GPU",
                unit: "short",
                queries: endpoints.map((e) => ({ expr: tokensPerGpuExpr(e.model), legendFormat: e.name })),
            },
            {
                title: "KV cache utilisation per worker",
                unit: "percentunit",
                queries: [{ expr: `max by (pod) (dynamo_component_gpu_cache_usage_percent{${WORKERS}})`, legendFormat: "{{pod}}" }],
            },
            {
                title: "Requests queued / in flight (frontend)",
                unit: "short",
                queries: [
                    { expr: `sum by (model) (dynamo_frontend_queued_requests{${models}})`, legendFormat: "{{model}} queued" },
                    { expr: `sum by (model) (dynamo_frontend_inflight_requests{${models}})`, legendFormat: "{{model}} in flight" },
                ],
            },
            {
                title: "In flight per worker",
                unit: "short",
                queries: [{ expr: `sum by (pod) (dynamo_component_inflight_requests{${WORKERS}})`, legendFormat: "{{pod}}" }],
            },
        );
        if (hit.length) serving.push({ title: "KV cache hit rate", unit: "percentunit", queries: hit });
        if (transfer.length) serving.push({ title: "KV transfer rate per worker (RDMA guard)", unit: "Bps", queries: transfer });
    }
    const platform: Panel[] = [
        {
            title: "Auth decisions by status",
            unit: "reqps",
            queries: [{ expr: `sum by (code) (rate(auth_decisions_total[5m]))`, legendFormat: "{{code}}" }],
        },
        {
            title: "Auth check latency p99",
            unit: "s",
            queries: [
                { expr: `histogram_quantile(0.99, sum by (le) (rate(auth_check_duration_seconds_bucket[5m])))`, legendFormat: "p99" },
            ],
        },
        {
            title: "Policy bundle revision per replica",
            unit: "short",
            queries: [{ expr: `max by (pod) (auth_bundle_revision)`, legendFormat: "{{pod}}" }],
        },
        { title: "Policy bundle age", unit: "s", queries: [{ expr: `max by (pod) (auth_bundle_age_seconds)`, legendFormat: "{{pod}}" }] },
        {
            title: "Usage not yet acknowledged by the hub",
            unit: "bytes",
            queries: [{ expr: `max by (pod) (metering_spool_unshipped_bytes)`, legendFormat: "{{pod}}" }],
        },
        {
            title: "Usage records by outcome",
            unit: "short",
            queries: [{ expr: `sum by (outcome) (rate(metering_records_total[5m]))`, legendFormat: "{{outcome}}" }],
        },
        {
            title: "Gateway responses by code class",
            unit: "reqps",
            queries: [
                {
                    expr: `sum by (envoy_response_code_class) (rate(envoy_http_downstream_rq_xx[5m]))`,
                    legendFormat: "{{envoy_response_code_class}}xx",
                },
            ],
        },
    ];
    const out: Dashboard[] = [];
    if (serving.length) out.push({ uid: `platform-serving-${spoke}`, title: `Serving: ${spoke}`, panels: serving });
    out.push({ uid: `platform-ops-${spoke}`, title: `Platform: ${spoke}`, panels: platform });
    return out;
}

/**
 * Grafana dashboard JSON model (schemaVersion 39) for the sidecar: one `datasource` variable of type Prometheus,
 * time-series panels two per row.
 */
export function grafanaDashboard(d: Dashboard): Record<string, unknown> {
    return {
        uid: d.uid,
        title: d.title,
        schemaVersion: 39,
        version: 1,
        editable: false,
        tags: ["inference-platform"],
        time: { from: "now-6h", to: "now" },
        refresh: "30s",
        templating: { list: [{ name: "datasource", type: "datasource", query: "prometheus", label: "Prometheus" }] },
        panels: d.panels.map((p, i) => ({
            id: i + 1,
            type: "timeseries",
            title: p.title,
            gridPos: { x: (i % 2) * 12, y: Math.floor(i / 2) * 8, w: 12, h: 8 },
            datasource: { type: "prometheus", uid: "${datasource}" },
            fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
            targets: p.queries.map((q, j) => ({
                refId: String.fromCharCode(65 + j),
                expr: q.expr,
                legendFormat: q.legendFormat,
                datasource: { type: "prometheus", uid: "${datasource}" },
            })),
        })),
    };
}

/** A pod scrape target rendered as a PodMonitor. */
export interface ScrapeTarget {
    name: string;
    namespace: string;
    podLabels: Record<string, string>;
    /** Extra `selector.matchExpressions` (label In values). */
    podIn?: Array<{ key: string; values: string[] }>;
    /** Keep the exporter's own labels over the target's (`honorLabels`). */
    honorLabels?: boolean;
    /** Target labels copied from pod labels: `[pod label, target label]` (a `replace` relabeling each). */
    podLabelsToTarget?: Array<[string, string]>;
    /** Named container port, or the port number where the container declares no name for it. */
    port: { name: string } | { number: number };
    path: string;
}

/**
 * The PodMonitors this spoke renders itself (Dynamo's come from its chart, see the module comment).
 * - auth service: container port `ops` (9090) `/metrics` (components/spoke/AuthService.ts).
 * - metering: container port `http` (8080) `/metrics` (components/spoke/Metering.ts).
 * - Envoy proxies: the stats listener Envoy Gateway bootstraps on port 19001 serving `/stats/prometheus`
 *   (envoyproxy/gateway@v1.9.2:internal/xds/bootstrap/bootstrap.go `EnvoyStatsPort = 19001`, bootstrap.yaml.tpl).
 */
export function scrapeTargets(x: {
    authNamespace: string;
    authLabels: Record<string, string>;
    meteringNamespace: string;
    meteringLabels: Record<string, string>;
    envoyNamespace: string;
    envoyLabels: Record<string, string>;
}): ScrapeTarget[] {
    return [
        { name: "platform-auth", namespace: x.authNamespace, podLabels: x.authLabels, port: { name: "ops" }, path: "/metrics" },
        {
            name: "platform-metering",
            namespace: x.meteringNamespace,
            podLabels: x.meteringLabels,
            port: { name: "http" },
            path: "/metrics",
        },
        {
            name: "agent-router-envoy",
            namespace: x.envoyNamespace,
            podLabels: x.envoyLabels,
            port: { number: 19001 },
            path: "/stats/prometheus",
        },
    ];
}

/** The Dynamo container ports the operator declares: `http` on the frontend (8000), `system` on workers (9090). */
export const DYNAMO_PORTS = {
    /** Frontend HTTP port, serving `/metrics` (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f: deploy/operator/internal/dynamo/component_frontend.go). */
    frontend: "http",
    /** Worker system port (`DYN_SYSTEM_PORT`, set with `DYN_SYSTEM_ENABLED=true` by deploy/operator/internal/dynamo/component_worker.go; name `system`, deploy/operator/internal/consts/consts.go `DynamoSystemPortName`). */
    worker: "system",
} as const;

/** The roles whose pods serve engine and `dynamo_component_*` series on the `system` port. */
export const WORKER_ROLES = ["prefill", "decode", "worker"] as const;

/**
 * PodMonitors for every Dynamo frontend and every prefill, decode and aggregated worker of the placed endpoints,
 * selected by the platform's own pod labels (lib/dgd.ts ENDPOINT_LABEL and ROLE_LABEL, which every DGD component's
 * pod template carries) in the inference namespace. Empty when nothing is placed here.
 */
export function dynamoScrapeTargets(endpoints: readonly ObservedEndpoint[]): ScrapeTarget[] {
    if (endpoints.length === 0) return [];
    const names = [...new Set(endpoints.map((e) => e.name))].sort();
    const ep = { key: ENDPOINT_LABEL, values: names };
    return [
        // As the chart's own PodMonitors do: the frontend keeps the runtime's labels (honorLabels) and gets
        // `dynamo_namespace`, which the Planner filters its queries by
        // (components/src/dynamo/planner/monitoring/traffic_metrics.py); workers get `dynamo_component_type`.
        {
            name: "dynamo-frontends",
            namespace: INFERENCE_NAMESPACE,
            podLabels: {},
            podIn: [ep, { key: ROLE_LABEL, values: ["frontend"] }],
            port: { name: DYNAMO_PORTS.frontend },
            path: "/metrics",
            honorLabels: true,
            podLabelsToTarget: [["nvidia.com/dynamo-namespace", "dynamo_namespace"]],
        },
        {
            name: "dynamo-workers",
            namespace: INFERENCE_NAMESPACE,
            podLabels: {},
            podIn: [ep, { key: ROLE_LABEL, values: [...WORKER_ROLES] }],
            port: { name: DYNAMO_PORTS.worker },
            path: "/metrics",
            podLabelsToTarget: [["nvidia.com/dynamo-component-type", "dynamo_component_type"]],
        },
        // The Mooncake masters of the endpoints with a KV pool (lib/mooncake.ts labels, port `metrics` = --metrics_port).
        ...(endpoints.some((e) => e.mooncakePool)
            ? [
                  {
                      name: "mooncake-masters",
                      namespace: INFERENCE_NAMESPACE,
                      podLabels: { "app.kubernetes.io/name": "mooncake-master" },
                      podIn: [
                          {
                              key: ENDPOINT_LABEL,
                              values: [...new Set(endpoints.filter((e) => e.mooncakePool).map((e) => e.name))].sort(),
                          },
                      ],
                      port: { name: "metrics" },
                      path: "/metrics",
                  },
              ]
            : []),
    ];
}

/** Prometheus' name for a pod label in service discovery (`__meta_kubernetes_pod_label_<sanitised>`). */
export function podLabelMeta(label: string): string {
    return `__meta_kubernetes_pod_label_${label.replace(/[^a-zA-Z0-9_]/g, "_")}`;
}

/** The `spec` of the PodMonitor rendered for a target (prometheus-operator `monitoring.coreos.com/v1`). */
export function podMonitorSpec(t: ScrapeTarget): Record<string, unknown> {
    return {
        namespaceSelector: { matchNames: [t.namespace] },
        selector: {
            ...(Object.keys(t.podLabels).length ? { matchLabels: t.podLabels } : {}),
            ...(t.podIn?.length ? { matchExpressions: t.podIn.map((x) => ({ key: x.key, operator: "In", values: x.values })) } : {}),
        },
        podMetricsEndpoints: [
            {
                ...("name" in t.port ? { port: t.port.name } : { portNumber: t.port.number }),
                path: t.path,
                interval: "15s",
                ...(t.honorLabels ? { honorLabels: true } : {}),
                ...(t.podLabelsToTarget?.length
                    ? {
                          relabelings: t.podLabelsToTarget.map(([from, to]) => ({
                              action: "replace",
                              sourceLabels: [podLabelMeta(from)],
                              targetLabel: to,
                          })),
                      }
                    : {}),
            },
        ],
    };
}
