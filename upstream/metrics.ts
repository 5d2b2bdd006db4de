import type { Source } from "./types";

/**
 * Prometheus metrics the platform's dashboards and alerts read (lib/observability.ts), each as the pinned upstream
 * (or this repository's own service) exports it. Every selector in a rendered PrometheusRule or dashboard must name
 * a metric listed here; test/observability.test.ts parses each expression with the Prometheus project's own PromQL
 * grammar (@prometheus-io/lezer-promql) and checks that.
 *
 * Versions: Dynamo's frontend/component names from `lib/runtime/src/metrics/prometheus_names.rs` and
 * `lib/llm/src/http/service/metrics.rs` (read on the public mirror of ai-dynamo/dynamo, schemas/dynamo/SOURCE.md, at
 * the commits cited; the same names from the 1.1.0 line to main). vLLM and SGLang are cited at the versions Dynamo
 * 1.5.0's runtime images ship (v0.28.0, v0.5.18; upstream/vllm.ts, upstream/sglang.ts); the names were read in the
 * stored sources of those files, which are not always the exact tag: re-read them when a pin moves.
 */

/** Prometheus metric type as exposed (`counter` names end in `_total`; `histogram` adds `_bucket/_sum/_count`). */
export type MetricType = "counter" | "gauge" | "histogram";

/**
 * Which process exports a family: the Dynamo frontend (port `http`), a Dynamo worker's system port (`dynamo_component_*`
 * and the engine's own `vllm:*` / `sglang:*`), the Envoy proxies, or this repository's services. What must hold for each
 * exporter to export is an activation fact (upstream/activation.ts `exporterActivation`).
 */
export type Exporter =
    | "dynamo-frontend"
    | "dynamo-worker"
    | "vllm"
    | "sglang"
    | "envoy"
    | "auth"
    | "metering"
    | "mooncake-master"
    | "dcgm-exporter";

/** One exported metric family. */
export interface MetricFact {
    readonly type: MetricType;
    /** The exporter (see {@link Exporter}). */
    readonly exporter: Exporter;
    /** Labels the exporter sets itself (scrape-time labels such as `pod`/`namespace` come from the PodMonitor). */
    readonly labels: readonly string[];
    /** Unit and meaning, as upstream documents it. */
    readonly help: string;
    /**
     * Where the name was read: an upstream `owner/repo@ref:path`, or `repo:<path>` for this repository's own services
     * (their metrics are additionally checked against the live prom-client registry in the tests).
     */
    readonly source: Source | `repo:${string}`;
}

const DYNAMO_NAMES: Source = "ai-dynamo/dynamo@073fb4371dab5b7f80ba990246f6271de82d3906:lib/runtime/src/metrics/prometheus_names.rs";
/**
 * The worker gauges since Dynamo 1.0: `dynamo_component_` + `total_blocks` / `gpu_cache_usage_percent` (labels model,
 * dynamo_component, dp_rank); the old `dynamo_component_kvstats_*` names were removed ("KVStats Metrics Removed
 * (#5704): dynamo_component_kvstats_* metrics removed", docs/fern/pages/reference/general/releases/deprecations.mdx).
 */
const DYNAMO_GAUGES: Source =
    "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/common/utils/prometheus.py#LLMBackendMetrics";
const DYNAMO_FRONTEND: Source = "ai-dynamo/dynamo@0e77d3442ee227eeaa84ac013633ce67be6b99b8:lib/llm/src/http/service/metrics.rs";
const VLLM_LOGGERS: Source = "vllm-project/vllm@v0.28.0:vllm/v1/metrics/loggers.py";
const VLLM_NIXL: Source = "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py#NixlPromMetrics";
const SGLANG_COLLECTOR: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/metrics/collector.py";
const ENVOY_TAGS: Source = "envoyproxy/envoy@v1.39.1:source/common/config/well_known_names.cc#RESPONSE_CODE_CLASS";

/** Every metric family the rendered dashboards and alerts may select, by exposed name. */
export const metrics: Readonly<Record<string, MetricFact>> = {
    // ---- Dynamo frontend (port http, PodMonitor `dynamo-frontend` of the dynamo-platform chart)
    dynamo_frontend_time_to_first_token_seconds: {
        exporter: "dynamo-frontend",
        type: "histogram",
        labels: ["model"],
        help: "Time to first token, seconds",
        source: DYNAMO_FRONTEND,
    },
    dynamo_frontend_inter_token_latency_seconds: {
        exporter: "dynamo-frontend",
        type: "histogram",
        labels: ["model"],
        help: "Inter-token latency, seconds",
        source: DYNAMO_FRONTEND,
    },
    dynamo_frontend_requests_total: {
        exporter: "dynamo-frontend",
        type: "counter",
        labels: ["model", "endpoint", "request_type", "status"],
        help: "LLM requests processed",
        source: DYNAMO_FRONTEND,
    },
    dynamo_frontend_inflight_requests: {
        exporter: "dynamo-frontend",
        type: "gauge",
        labels: ["model"],
        help: "Requests in flight to the engine",
        source: DYNAMO_FRONTEND,
    },
    dynamo_frontend_queued_requests: {
        exporter: "dynamo-frontend",
        type: "gauge",
        labels: ["model"],
        help: "Requests waiting for their first token (HTTP queue)",
        source: DYNAMO_FRONTEND,
    },
    dynamo_frontend_model_total_kv_blocks: {
        exporter: "dynamo-frontend",
        type: "gauge",
        labels: ["model"],
        help: "Total KV cache blocks available for a worker serving the model (set once a worker registers; the rollout health gate)",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/http/service/metrics.rs",
    },
    dynamo_frontend_output_tokens_total: {
        exporter: "dynamo-frontend",
        type: "counter",
        labels: ["model"],
        help: "Output tokens generated",
        source: DYNAMO_FRONTEND,
    },
    dynamo_frontend_input_sequence_tokens: {
        exporter: "dynamo-frontend",
        type: "histogram",
        labels: ["model"],
        help: "Input sequence length, tokens",
        source: DYNAMO_FRONTEND,
    },
    // ---- Dynamo workers (port system, PodMonitor `dynamo-worker`): `dynamo_component_` + kvstats / work handler names
    // ---- DCGM exporter (GPU Operator v25.10.1's dcgmExporter; one series per GPU, pod/namespace/container of the pod it is allocated to)
    DCGM_FI_DEV_GPU_UTIL: {
        type: "gauge",
        exporter: "dcgm-exporter",
        labels: ["gpu", "UUID", "device", "modelName", "Hostname", "pod", "namespace", "container"],
        help: "GPU utilization, percent",
        source: "NVIDIA/dcgm-exporter@07c87278a5e18805287ee56cba8abe9eb7a87ced:internal/pkg/transformation/const.go",
    },
    // ---- Mooncake master (`--metrics_port`, default 9003, `/metrics`; kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/master.cpp)
    master_total_capacity_bytes: {
        type: "gauge",
        exporter: "mooncake-master",
        labels: [],
        help: "Total memory capacity across all mounted segments, bytes (0: no store has mounted a segment)",
        source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/master_metric_manager.cpp",
    },
    master_allocated_bytes: {
        type: "gauge",
        exporter: "mooncake-master",
        labels: [],
        help: "Total memory bytes currently allocated across all segments",
        source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/master_metric_manager.cpp",
    },
    dynamo_component_gpu_cache_usage_percent: {
        type: "gauge",
        exporter: "dynamo-worker",
        labels: ["model", "dynamo_component", "dp_rank"],
        help: "GPU KV cache usage, fraction 0.0-1.0",
        source: DYNAMO_GAUGES,
    },
    dynamo_component_total_blocks: {
        type: "gauge",
        exporter: "dynamo-worker",
        labels: ["model", "dynamo_component", "dp_rank"],
        help: "KV cache blocks available on the worker",
        source: DYNAMO_GAUGES,
    },
    dynamo_component_inflight_requests: {
        type: "gauge",
        exporter: "dynamo-worker",
        labels: ["dynamo_component", "dynamo_endpoint"],
        help: "Requests the worker is processing",
        source: DYNAMO_NAMES,
    },
    // ---- vLLM engine (same worker port; Dynamo re-exports the engine's registry)
    "vllm:num_requests_running": {
        exporter: "vllm",
        type: "gauge",
        labels: ["model_name", "engine"],
        help: "Requests in the running batch",
        source: VLLM_LOGGERS,
    },
    "vllm:num_requests_waiting": {
        exporter: "vllm",
        type: "gauge",
        labels: ["model_name", "engine"],
        help: "Requests waiting to be scheduled",
        source: VLLM_LOGGERS,
    },
    "vllm:kv_cache_usage_perc": {
        exporter: "vllm",
        type: "gauge",
        labels: ["model_name", "engine"],
        help: "KV cache usage, fraction 0.0-1.0",
        source: VLLM_LOGGERS,
    },
    "vllm:prefix_cache_queries_total": {
        exporter: "vllm",
        type: "counter",
        labels: ["model_name", "engine"],
        help: "Prefix cache lookups, tokens",
        source: VLLM_LOGGERS,
    },
    "vllm:prefix_cache_hits_total": {
        exporter: "vllm",
        type: "counter",
        labels: ["model_name", "engine"],
        help: "Prefix cache hits, tokens",
        source: VLLM_LOGGERS,
    },
    "vllm:nixl_xfer_time_seconds": {
        exporter: "vllm",
        type: "histogram",
        labels: ["model_name", "engine"],
        help: "Duration of one NIXL KV transfer, seconds",
        source: VLLM_NIXL,
    },
    "vllm:nixl_bytes_transferred": {
        exporter: "vllm",
        type: "histogram",
        labels: ["model_name", "engine"],
        help: "Bytes moved per NIXL KV transfer",
        source: VLLM_NIXL,
    },
    "vllm:nixl_num_failed_transfers_total": {
        exporter: "vllm",
        type: "counter",
        labels: ["model_name", "engine"],
        help: "Failed NIXL KV transfers",
        source: VLLM_NIXL,
    },
    // ---- SGLang engine
    "sglang:cache_hit_rate": {
        exporter: "sglang",
        type: "gauge",
        labels: ["model_name"],
        help: "Radix/prefix cache hit rate, fraction",
        source: SGLANG_COLLECTOR,
    },
    "sglang:token_usage": {
        exporter: "sglang",
        type: "gauge",
        labels: ["model_name"],
        help: "KV token pool usage, fraction",
        source: SGLANG_COLLECTOR,
    },
    "sglang:num_queue_reqs": {
        exporter: "sglang",
        type: "gauge",
        labels: ["model_name"],
        help: "Requests in the waiting queue",
        source: SGLANG_COLLECTOR,
    },
    "sglang:num_running_reqs": {
        exporter: "sglang",
        type: "gauge",
        labels: ["model_name"],
        help: "Running requests",
        source: SGLANG_COLLECTOR,
    },
    "sglang:kv_transfer_speed_gb_s": {
        exporter: "sglang",
        type: "gauge",
        labels: ["model_name"],
        help: "P/D KV transfer speed, GB/s (gigabytes)",
        source: SGLANG_COLLECTOR,
    },
    // ---- Envoy proxies of the Agent Router (stats listener 19001, /stats/prometheus)
    envoy_http_downstream_rq_xx: {
        exporter: "envoy",
        type: "counter",
        labels: ["envoy_http_conn_manager_prefix", "envoy_response_code_class"],
        help: "Downstream responses by code class",
        source: ENVOY_TAGS,
    },
    // ---- this repository's services
    auth_decisions_total: {
        exporter: "auth",
        type: "counter",
        labels: ["code", "tier", "reason"],
        help: "ext_authz decisions by HTTP status, limit tier and reason",
        source: "repo:services/auth/metrics.ts",
    },
    auth_check_duration_seconds: {
        exporter: "auth",
        type: "histogram",
        labels: [],
        help: "ext_authz check latency, seconds",
        source: "repo:services/auth/metrics.ts",
    },
    auth_bundle_revision: {
        exporter: "auth",
        type: "gauge",
        labels: [],
        help: "Policy bundle revision served (0 = none, deny all)",
        source: "repo:services/auth/metrics.ts",
    },
    auth_bundle_age_seconds: {
        exporter: "auth",
        type: "gauge",
        labels: [],
        help: "Seconds since the served revision was confirmed current",
        source: "repo:services/auth/metrics.ts",
    },
    metering_spool_unshipped_bytes: {
        exporter: "metering",
        type: "gauge",
        labels: [],
        help: "Bytes of usage not yet acknowledged by the hub",
        source: "repo:services/metering/service.ts",
    },
    metering_ship_consecutive_failures: {
        exporter: "metering",
        type: "gauge",
        labels: [],
        help: "Failed ship attempts since the last success",
        source: "repo:services/metering/service.ts",
    },
    metering_poisoned_events_total: {
        exporter: "metering",
        type: "counter",
        labels: ["reason"],
        help: "Usage events quarantined on the spoke because Kinesis will not take them",
        source: "repo:services/metering/service.ts",
    },
    metering_tokens_skipped: {
        exporter: "metering",
        type: "gauge",
        labels: [],
        help: "Events skipped by token accounting (Redis down beyond the spool's bound) since start",
        source: "repo:services/metering/service.ts",
    },
    metering_records_total: {
        exporter: "metering",
        type: "counter",
        labels: ["outcome"],
        help: "Access-log records by outcome (spooled, duplicate, ignored, quarantined)",
        source: "repo:services/metering/service.ts",
    },
};

/**
 * The exposed series names of a family: a histogram adds `_bucket`, `_sum`, `_count`.
 * @returns every name a selector may use for `family`
 */
export function seriesNames(family: string, fact: MetricFact): string[] {
    return fact.type === "histogram" ? [`${family}_bucket`, `${family}_sum`, `${family}_count`] : [family];
}

/** Every selectable series name, mapped to its family. */
export const knownSeries: ReadonlyMap<string, string> = new Map(
    Object.entries(metrics).flatMap(([family, fact]) => seriesNames(family, fact).map((s) => [s, family] as const)),
);
