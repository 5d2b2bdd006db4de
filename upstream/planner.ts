import type { Source } from "./types";

/**
 * The Dynamo Planner's `--config` (PlannerConfig, pydantic). Read at ai-dynamo/dynamo main 2a6da14c (2026-08-21, the
 * public mirror; schemas/dynamo/SOURCE.md), the newest readable tree before the v1.5.0 cut: re-read at the tag when it
 * is readable. PlannerConfig sets no `extra="forbid"` (only its nested models do), so pydantic's default `ignore`
 * drops an unknown or misspelt top-level key SILENTLY: the Planner then runs on that key's default. The check
 * (upstream/check/planner-config.ts) therefore refuses every key not listed here (closed world) and evaluates the
 * validators below on the rendered JSON.
 */
const PC: Source = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/config/planner_config.py";
const LS: Source = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/core/load_scaling.py";

export const plannerConfigSource = PC;

/** Every top-level field of PlannerConfig (class PlannerConfig, annotated assignments, in source order). */
export const plannerConfigKeys: readonly string[] = [
    "pre_deployment_sweeping_mode",
    "environment",
    "namespace",
    "backend",
    "mode",
    "optimization_target",
    "log_dir",
    "throughput_adjustment_interval_seconds",
    "max_gpu_budget",
    "min_gpu_budget",
    "min_endpoint",
    "prefill_min_endpoint",
    "decode_min_endpoint",
    "control_api_port",
    "decode_engine_num_gpu",
    "prefill_engine_num_gpu",
    "profile_results_dir",
    "aic_interpolation",
    "aic_perf_model",
    "ttft_ms",
    "itl_ms",
    "load_predictor",
    "load_predictor_log1p",
    "prophet_window_size",
    "load_predictor_warmup_trace",
    "kalman_q_level",
    "kalman_q_trend",
    "kalman_r",
    "kalman_min_points",
    "metric_pulling_prometheus_endpoint",
    "metric_pulling_prometheus_token",
    "metric_pulling_prometheus_token_file",
    "metric_pulling_prometheus_ssl_verify",
    "metric_pulling_prometheus_extra_query_params",
    "metric_pulling_prometheus_ca_bundle",
    "metric_reporting_prometheus_port",
    "throughput_metrics_source",
    "model_name",
    "global_planner_namespace",
    "enable_throughput_scaling",
    "enable_load_scaling",
    "load_adjustment_interval_seconds",
    "max_num_fpm_samples",
    "fpm_sample_bucket_size",
    "load_scaling_down_sensitivity",
    "prefill_scale_up_queue_tokens",
    "prefill_scale_down_queue_tokens",
    "decode_scale_up_kv_rate",
    "decode_scale_down_kv_rate",
    "load_min_observations",
    "speculative_nextn",
    "advisory",
    "enable_power_awareness",
    "total_gpu_power_limit",
    "report_interval_hours",
    "report_output_dir",
    "report_filename",
    "report_write_gzip_log",
    "live_dashboard_port",
    "scheduling",
    "plugin_registration",
];

/** Validation aliases pydantic also accepts for a field (`AliasChoices`). */
export const plannerConfigAliases: Readonly<Record<string, string>> = {
    load_adjustment_interval: "load_adjustment_interval_seconds",
    throughput_adjustment_interval: "throughput_adjustment_interval_seconds",
};

/** `Literal[...]` / enum choices of the fields that have them. */
export const plannerConfigChoices: Readonly<Record<string, readonly string[]>> = {
    environment: ["kubernetes", "virtual", "global-planner"],
    backend: ["vllm", "sglang", "trtllm", "mocker"],
    mode: ["disagg", "prefill", "decode", "agg"],
    optimization_target: ["throughput", "latency", "load", "sla"],
    pre_deployment_sweeping_mode: ["none", "rapid", "thorough"],
};

/** One validator of PlannerConfig, as a predicate over the parsed JSON; `why` quotes upstream's error. */
export interface PlannerValidator {
    id: string;
    holds: (c: Record<string, any>) => boolean;
    why: string;
    source: Source;
}

export const plannerConfigValidators: readonly PlannerValidator[] = [
    {
        id: "load-interval-positive",
        holds: (c) =>
            c.load_adjustment_interval_seconds === undefined ||
            (Number.isInteger(c.load_adjustment_interval_seconds) && c.load_adjustment_interval_seconds > 0),
        why: "load_adjustment_interval_seconds: int, gt=0",
        source: PC,
    },
    {
        id: "load-prefill-thresholds",
        holds: (c) =>
            c.optimization_target !== "load" ||
            !["disagg", "prefill"].includes(c.mode ?? "disagg") ||
            (typeof c.prefill_scale_up_queue_tokens === "number" &&
                typeof c.prefill_scale_down_queue_tokens === "number" &&
                c.prefill_scale_down_queue_tokens >= 0 &&
                c.prefill_scale_up_queue_tokens > c.prefill_scale_down_queue_tokens),
        why: "optimization_target='load' requires prefill_scale_up_queue_tokens and prefill_scale_down_queue_tokens (ge=0) for prefill scaling, up greater than down",
        source: PC,
    },
    {
        id: "load-decode-thresholds",
        holds: (c) =>
            c.optimization_target !== "load" ||
            !["disagg", "decode", "agg"].includes(c.mode ?? "disagg") ||
            (typeof c.decode_scale_up_kv_rate === "number" &&
                typeof c.decode_scale_down_kv_rate === "number" &&
                c.decode_scale_down_kv_rate >= 0 &&
                c.decode_scale_up_kv_rate <= 100 &&
                c.decode_scale_up_kv_rate > c.decode_scale_down_kv_rate),
        why: "optimization_target='load' requires decode_scale_up_kv_rate and decode_scale_down_kv_rate, percentages 0-100 (load_scaling.py divides them by 100), up greater than down",
        source: LS,
    },
    {
        id: "min-endpoint-per-mode",
        holds: (c) =>
            !(c.mode === "agg" && (c.prefill_min_endpoint !== undefined || c.decode_min_endpoint !== undefined)) &&
            !(c.mode === "prefill" && c.decode_min_endpoint !== undefined) &&
            !(c.mode === "decode" && c.prefill_min_endpoint !== undefined),
        why: "prefill_min_endpoint/decode_min_endpoint are not supported for mode agg (use min_endpoint), nor the other role's for prefill/decode",
        source: PC,
    },
    {
        id: "some-scaling",
        holds: (c) =>
            (c.optimization_target !== undefined && c.optimization_target !== "sla") ||
            c.enable_load_scaling === true ||
            c.enable_throughput_scaling !== false,
        why: "At least one scaling mode must be enabled (enable_throughput_scaling or enable_load_scaling); non-sla targets force load scaling on",
        source: PC,
    },
    {
        id: "power-needs-limit",
        holds: (c) =>
            c.enable_power_awareness !== true ||
            (typeof c.total_gpu_power_limit === "number" && c.environment === "kubernetes" && c.mode !== "agg"),
        why: "enable_power_awareness needs total_gpu_power_limit, environment kubernetes and a non-agg mode",
        source: PC,
    },
];

const BUDGET: Source = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/core/budget.py";
const STATE: Source = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/core/state_machine.py";
const BASE: Source = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/core/base.py";

/**
 * How the pinned Planner bounds its replicas by GPUs, read in:
 * - {@link LS} (load scaling): each pool's load decision proposes `num_workers + 1` (scale-up) or
 *   `max(num_workers - 1, min_endpoint)` (scale-down, only when `num_workers > 1`) of that pool. Aggregated: the one
 *   pool. Disaggregated (`_advance_load_disagg`): prefill and decode decide independently and one decision carries both
 *   (`ScalingDecision(num_prefill, num_decode)`), so it may move both pools at once, each by one, in either direction;
 *   the pair then goes through the pair clamp below;
 * - {@link STATE} `_apply_global_budget` / `_budget_clamp`: every proposal passes `proportional_clamp_pair` (disagg,
 *   from both pools' GPUs per worker, read from the DGD) or `proportional_clamp_single` (agg), after
 *   `max(desired, min_endpoint)`;
 * - {@link BUDGET}: `max_gpu_budget` "is a hard hardware/capacity bound and is never relaxed": a proposal whose total
 *   (`num_p * p_gpu + num_d * d_gpu`) is above it is shrunk back under it. The pair clamp (`proportional_clamp_pair`,
 *   ceiling path) scales prefill by `max_gpu_budget / total` (floor, at least its min_endpoint) and gives decode every
 *   GPU left (`floor(remaining / d_gpu)`, at least its min_endpoint): with prefill 1x4 + decode 1x4 and budget 10 a
 *   `(2, 1)` proposal comes back `(1, 1)`; with budget 12 a `(2, 2)` one (both pools asking) comes back `(1, 2)`. So
 *   when both pools ask for one more worker and the budget holds only one, prefill is trimmed back to where it was and
 *   decode grows, by more than one where its workers are smaller than the leftover (prefill 1x4 + decode 3x1, budget
 *   11: `(2, 4)` comes back `(1, 7)`). A budget of at least the start plus the largest pool's GPUs per worker
 *   ({@link plannerScaleUpNeed}) lets either pool's one-worker scale-up through unclamped, and when both ask keeps
 *   prefill and grows decode by at least one (test/planner-budget.test.ts ports the clamp); `min_gpu_budget` (-1,
 *   off, unless set; the product never sets it) is a floor relaxed by `max(p_gpu, d_gpu)`;
 * - {@link BASE} `_minimum_endpoint_budget_errors`: the Planner refuses to start when the min-endpoint footprint
 *   (`prefill_min_endpoint * p_gpu + decode_min_endpoint * d_gpu`) is above `max_gpu_budget`.
 * Other budget keys of PlannerConfig: `min_gpu_budget` (above) and `total_gpu_power_limit` (watts, with
 * `enable_power_awareness` and a non-agg mode; not rendered). The GlobalPlanner's cluster-wide budgets are a separate
 * component the product does not run.
 */
export const plannerBudgetSources: readonly Source[] = [LS, STATE, BUDGET, BASE];

/** One pool the Planner scales: `replicas` workers of `gpusPerWorker` GPUs each. */
export interface PlannerPool {
    role: "prefill" | "decode" | "workers";
    replicas: number;
    gpusPerWorker: number;
    /** The pool's own minimum (`prefill_min_endpoint` / `decode_min_endpoint`), over the call's `minEndpoint`. */
    minEndpoint?: number;
}

/**
 * What `max_gpu_budget` must be for the Planner to add one worker of ANY of its pools from where it starts (see
 * {@link plannerBudgetSources}): the pools' GPUs at `max(replicas, minEndpoint)` workers each (the Planner raises a pool
 * to `min_endpoint` at its first decision) plus the largest pool's GPUs per worker. With a budget below it, a scale-up
 * of that pool alone is always clamped back (a budget at least `start` plus the smaller step lets only the smaller pool
 * grow). A decision that asks both pools for one more is not what this bounds: the pair clamp then keeps prefill and
 * gives decode the room (see {@link plannerBudgetSources}).
 *
 * @param pools the graph's pools (disaggregated: prefill and decode; aggregated: workers)
 * @param minEndpoint PlannerConfig `min_endpoint` (the product renders it for every role)
 * @returns `start` GPUs, the largest `step` (GPUs per worker) and its pool, and `need` = start + step, all in GPUs
 */
export function plannerScaleUpNeed(
    pools: readonly PlannerPool[],
    minEndpoint: number,
): { start: number; step: number; stepRole: PlannerPool["role"]; need: number } {
    const start = pools.reduce((n, p) => n + Math.max(p.replicas, p.minEndpoint ?? minEndpoint) * p.gpusPerWorker, 0);
    const largest = pools.reduce((a, p) => (p.gpusPerWorker > a.gpusPerWorker ? p : a), pools[0]);
    return { start, step: largest.gpusPerWorker, stepRole: largest.role, need: start + largest.gpusPerWorker };
}
