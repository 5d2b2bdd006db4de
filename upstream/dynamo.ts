import { DYNAMO_REQUEST_HEADERS } from "./dynamo-headers";
import type { ComponentFacts, EntrypointFacts, InjectionFact, Source } from "./types";

/**
 * NVIDIA Dynamo 1.5.0 (GA 2026-09-18, docs.nvidia.com/dynamo/v1.5.0/reference/compatibility): the frontend, the
 * planner and the per-engine worker wrappers, and what Dynamo injects on its own. Read on main at 2a6da14c
 * (2026-08-21, through the public mirror wxsms/dynamo, identical hashes), the newest tree readable before the v1.5.0 cut
 * (no tags in the mirror), and cited at that commit: the facts are what that tree says, not proven at the 1.5.0 tag.
 */
const D = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f";

/** The Dynamo release these facts are recorded for (config/versions.ts pins it; test/upstream-facts.test.ts). */
export const DYNAMO_FACTS_RELEASE = "1.5.0";

/** `--router-mode` values (router_args.py `choices`), also those of its env var `DYN_ROUTER_MODE`. */
const ROUTER_MODES = ["round-robin", "random", "power-of-two", "kv", "direct", "least-loaded", "device-aware-weighted"];
/**
 * `--disaggregation-mode` values of the vLLM and TRT-LLM workers (backend_args.py `choices`: `agg`, `pd` and the enum's
 * values but its aggregated one), also those of their env vars, whose values argparse does not check (an env var is
 * the flag's default).
 */
const DISAGGREGATION_MODES = ["agg", "pd", "prefill", "decode", "encode"];

export const dynamoFrontend: ComponentFacts = {
    component: "dynamo-frontend",
    version: DYNAMO_FACTS_RELEASE,
    flags: {
        "--http-port": {
            takesValue: true,
            default: "8000",
            source: `${D}:components/src/dynamo/frontend/frontend_args.py`,
            note: "env DYN_HTTP_PORT",
        },
        "--router-mode": {
            takesValue: true,
            default: "round-robin",
            choices: ROUTER_MODES,
            source: `${D}:components/src/dynamo/common/configuration/groups/router_args.py`,
            note: "env DYN_ROUTER_MODE",
        },
        "--shared-cache-type": {
            takesValue: true,
            source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            note: "hicache: count Mooncake-backed HiCache hits",
        },
        "--shared-cache-multiplier": {
            takesValue: true,
            default: "0.5",
            source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
        },
        "--no-router-kv-events": { takesValue: false, source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py` },
        "--router-queue-threshold": {
            takesValue: true,
            source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            note: "env DYN_ROUTER_QUEUE_THRESHOLD; no default: unset means no router queue, so strict priority and priority jumps order nothing (upstream/activation.ts router-priority)",
        },
        "--router-conditional-disagg": {
            takesValue: false,
            source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            note: "rejected unless --router-mode kv and --router-kv-events (dynamoFrontendKvOnlyFlags)",
        },
        "--serve-indexer": {
            takesValue: false,
            default: "false",
            aliases: ["--no-serve-indexer"],
            source: `${D}:components/src/dynamo/frontend/frontend_args.py`,
            note: "env DYN_SERVE_INDEXER; rejected unless --router-mode kv (dynamoFrontendKvOnlyFlags)",
        },
        "--router-prefill-load-model": {
            takesValue: true,
            default: "none",
            choices: ["none", "aic"],
            source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            note: "env DYN_ROUTER_PREFILL_LOAD_MODEL; aic is rejected unless --router-mode kv (dynamoFrontendKvOnlyFlags)",
        },
    },
    env: {
        DYN_ROUTER_MODE: {
            default: "round-robin",
            choices: ROUTER_MODES,
            source: `${D}:components/src/dynamo/common/configuration/groups/router_args.py`,
        },
        DYN_HTTP_PORT: { default: "8000", source: `${D}:components/src/dynamo/frontend/frontend_args.py` },
    },
};

/**
 * Does a KV-routing frontend need this worker's KV events? Dynamo's router derives a KvEventSourceRequirement per
 * worker role: prefill and aggregated workers always (CacheAwareRouting); P/D decode workers only when the frontend runs
 * `--router-conditional-disagg` (ConditionalDisaggDecodeCache), otherwise NotRequired and it subscribes to none of
 * their events (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/kv_router.rs
 * KvEventSourceRequirement::derive). `role` is the DGD componentType (`prefill`, `decode`, `worker`);
 * `conditionalDisaggEnv` the frontend's DYN_ROUTER_CONDITIONAL_DISAGG, if set.
 */
export function kvRouterNeedsWorkerEvents(role: string, frontendArgs: readonly string[], conditionalDisaggEnv?: string): boolean {
    // `--router-conditional-disagg` or its env var DYN_ROUTER_CONDITIONAL_DISAGG (kv_router_args.py); any value but an
    // explicit false counts as on, so decode workers are held to publishing.
    const envOn = conditionalDisaggEnv !== undefined && !/^(|0|false|no|off|n)$/i.test(conditionalDisaggEnv.trim());
    return role !== "decode" || frontendArgs.includes("--router-conditional-disagg") || envOn;
}

/**
 * Does an SGLang worker's `--kv-events-config` emit anything? A P/D decode worker (`--disaggregation-mode decode`)
 * runs the chunk cache, which publishes no KV events, unless `--disaggregation-decode-enable-radix-cache` keeps the
 * radix cache (sgl-project/sglang@v0.5.18:python/sglang/srt/arg_groups/pd_disaggregation_hook.py; upstream/activation.ts
 * `sglang-decode-kv-events`). `args` are the worker's arguments after `python3 -m dynamo.sglang`.
 */
export function sglangEmitsKvEvents(args: readonly string[]): boolean {
    const i = args.indexOf("--disaggregation-mode");
    const decode = (i >= 0 && args[i + 1] === "decode") || args.includes("--disaggregation-mode=decode");
    return !decode || args.includes("--disaggregation-decode-enable-radix-cache");
}

/**
 * Frontend flags that take effect only behind the KV router (`--router-mode kv`), keyed by flag, with what each needs.
 * `unless`: the value (the upstream default) that needs nothing. `effect`: `startup` when FrontendConfig.validate raises
 * outside kv mode, `silent` when the flag is read only where the KV router is built and is inert elsewhere. Read at
 * the pinned tree (see {@link D}); the one list the pack (policies/dynamo.ts) and upstream/refused.ts
 * `dynamo-frontend-kv-only-flags` read.
 */
export const dynamoFrontendKvOnlyFlags: Readonly<
    Record<string, { readonly unless?: string; readonly effect: "startup" | "silent"; readonly needs: string; readonly source: Source }>
> = {
    "--router-conditional-disagg": {
        effect: "startup",
        needs: "--router-mode kv and --router-kv-events (FrontendConfig.validate raises otherwise)",
        source: `${D}:components/src/dynamo/frontend/frontend_args.py#FrontendConfig.validate`,
    },
    "--serve-indexer": {
        effect: "startup",
        needs: "--router-mode kv, and not --use-remote-indexer (FrontendConfig.validate raises otherwise)",
        source: `${D}:components/src/dynamo/frontend/frontend_args.py#FrontendConfig.validate`,
    },
    "--router-prefill-load-model": {
        unless: "none",
        effect: "startup",
        needs: "aic: --router-mode kv, --dyn-chat-processor dynamo, --aic-backend, --aic-system, --aic-model-path and --router-track-prefill-tokens (FrontendConfig.validate raises otherwise); none (the default) needs nothing",
        source: `${D}:components/src/dynamo/frontend/frontend_args.py#FrontendConfig.validate`,
    },
    "--shared-cache-type": {
        unless: "none",
        effect: "silent",
        needs: "--router-mode kv: only the KV router's chooser builds the shared-cache client (ModelManager::kv_chooser_for_with_selector); outside kv mode the flag parses and does nothing",
        source: `${D}:lib/llm/src/discovery/model_manager.rs`,
    },
};

/**
 * Frontend flags upstream still parses but ignores: `--enforce-disagg` (env DYN_ENFORCE_DISAGG) is kept only so old
 * launch commands start (`_DeprecatedEnforceDisaggAction`; "DEPRECATED: accepted for compatibility but ignored.
 * Routing topology and readiness are determined from registered worker types").
 */
export const dynamoFrontendIgnoredFlags: Readonly<Record<string, { readonly why: string; readonly source: Source }>> = {
    "--enforce-disagg": {
        why: "deprecated and ignored: routing topology and readiness come from the registered worker types",
        source: `${D}:components/src/dynamo/common/configuration/groups/router_args.py`,
    },
};

/** What one entry point does with a worker flag of {@link dynamoRemovedWorkerFlags}, and what to pass instead. */
export interface RemovedWorkerFlagFact {
    /** `startup`: the worker exits while parsing its arguments; `silent`: the flag parses and nothing reads it. */
    readonly effect: "startup" | "silent";
    /** Completes "<flag> ..." in the pack's finding. */
    readonly why: string;
    /** What replaces the flag at this entry point. */
    readonly use: string;
    readonly source: Source;
}

/**
 * The entry points' refusal of the old role flag for `mode` (`--is-prefill-worker`, `--is-decode-worker`): each fails
 * argument parsing, and `--disaggregation-mode <mode>` replaces it.
 */
function removedRoleFlag(mode: "prefill" | "decode"): Readonly<Record<string, RemovedWorkerFlagFact>> {
    const fails = "is no longer a flag of Dynamo's worker and fails argument parsing";
    const use = `--disaggregation-mode ${mode}`;
    return {
        "dynamo.vllm": { effect: "startup", why: fails, use, source: `${D}:components/src/dynamo/vllm/args.py#parse_args` },
        "dynamo.sglang": { effect: "startup", why: fails, use, source: `${D}:components/src/dynamo/sglang/args.py#parse_args` },
        "dynamo.trtllm": {
            effect: "startup",
            why: `${fails}: the --trtllm.* flag scan exits on it with "Unrecognized argument"`,
            use,
            source: `${D}:components/src/dynamo/trtllm/dynamic_flags.py#parse_dynamic_flags`,
        },
    };
}

/**
 * Worker flags Dynamo's engine wrappers no longer honour, keyed by flag, then by entry point (`dynamo.<engine>`), each
 * with what that entry point does with it (read at the pinned tree, see {@link D}) and its replacement. The pack
 * (policies/dynamo.ts `dgd-worker-role-flags`) refuses every flag at every entry point listed; an entry point not listed
 * is left to the upstream rules, which refuse any flag the entry point's facts do not record.
 */
export const dynamoRemovedWorkerFlags: Readonly<Record<string, Readonly<Record<string, RemovedWorkerFlagFact>>>> = {
    // vLLM and SGLang: an arg Dynamo's parser does not know goes to the engine's own parser (`parse_args`), which exits
    // on it. TRT-LLM: args.py#parse_args hands what its argparse parser and the router flags leave over to
    // dynamic_flags.py#parse_dynamic_flags, which logs "Unrecognized argument" and exits 1 on anything not
    // `--trtllm.*`; no TRT-LLM or shared runtime flag starts with `--is-`, so argparse's prefix matching takes neither.
    // Only dynamo.mocker still accepts the old role flags (mocker/args.py).
    "--is-prefill-worker": removedRoleFlag("prefill"),
    "--is-decode-worker": removedRoleFlag("decode"),
    // DynamoRuntimeArgGroup defines it for every worker that adds that group (common/configuration/groups/runtime_args.py,
    // nargs "*", env DYN_CONNECTOR; help "[Deprecated for vLLM] Use --kv-transfer-config instead. For TRT-LLM, options:
    // nixl, lmcache, kvbm, null, none"). dynamo.vllm raises when it is set. dynamo.sglang adds the group in
    // sglang/args.py#parse_args, so Dynamo's parser takes the flag and SGLang's parser never sees it, and nothing
    // under components/src/dynamo/sglang reads `connector`: it is accepted and ignored. dynamo.trtllm reads it, though
    // not as the help says: trtllm/args.py Config.validate takes at most one entry, keeps `none` and `kvbm`, and turns
    // any other value (nixl, lmcache, null) into `none` with a warning; dynamoTrtllm records no --connector, so the
    // upstream rules refuse it there.
    "--connector": {
        "dynamo.vllm": {
            effect: "startup",
            why: "is refused by Dynamo's vLLM worker at start (the default connector is no longer NIXL)",
            use: "--kv-transfer-config",
            source: `${D}:components/src/dynamo/vllm/args.py#_reject_connector_flag`,
        },
        "dynamo.sglang": {
            effect: "silent",
            why: "is parsed by Dynamo's shared runtime arguments and read by nothing in the SGLang worker, so it selects no KV transfer",
            use: "--disaggregation-transfer-backend (SGLang's KV transfer backend)",
            source: `${D}:components/src/dynamo/sglang/args.py#parse_args`,
        },
    },
};

/**
 * Request headers the Dynamo 1.5.0 OpenAI frontend reads into `nvext` before preprocessing, overriding the body
 * (`apply_header_routing_overrides`, called by every OpenAI/Anthropic handler in lib/llm/src/http/service/openai.rs).
 * Names and sources in upstream/dynamo-headers.ts (the one definition). The auth decision sets these three
 * (services/shared/identity.ts `DYNAMO_HEADERS`); it is the only path from a trusted
 * decision to the hints the router sees: Envoy's HTTP ext_authz can add headers but not rewrite the body, and the AI
 * Gateway's `bodyMutation` sets fixed, top-level fields per route (envoyproxy/ai-gateway@v1.2.0:api/v1beta1/ai_gateway_route.go
 * `HTTPBodyMutation`), so `nvext.agent_hints.osl` and `speculative_prefill`, which have no header, cannot be set by the platform.
 */
export const dynamoRequestHeaders: Readonly<Record<string, { nvext: string; source: Source }>> = Object.fromEntries(
    Object.values(DYNAMO_REQUEST_HEADERS).map(({ header, nvext, source }) => [header, { nvext, source }]),
);

/** Which engines' Dynamo 1.5.0 worker hands `nvext.cache_salt` to the engine's prefix hash (upstream/activation.ts cache-salt). */
export const dynamoCacheSalt: Readonly<Record<"vllm" | "sglang" | "trtllm", { keeps: boolean; source: Source }>> = {
    vllm: { keeps: true, source: `${D}:components/src/dynamo/vllm/handlers.py#_apply_nvext_cache_salt` },
    sglang: { keeps: false, source: `${D}:components/src/dynamo/sglang/request_handlers/llm/decode_handler.py` },
    trtllm: { keeps: false, source: `${D}:components/src/dynamo/trtllm/request_handlers/handler_base.py` },
};

export const dynamoPlanner: ComponentFacts = {
    component: "dynamo-planner",
    version: DYNAMO_FACTS_RELEASE,
    flags: {
        "--config": {
            takesValue: true,
            source: `${D}:components/src/dynamo/planner/__main__.py`,
            note: "PlannerConfig as JSON/YAML (components/src/dynamo/planner/config/planner_config.py)",
        },
    },
    env: {
        PROMETHEUS_ENDPOINT: {
            default: "http://prometheus-kube-prometheus-prometheus.monitoring.svc.cluster.local:9090",
            source: `${D}:components/src/dynamo/planner/config/planner_config.py#metric_pulling_prometheus_endpoint`,
        },
    },
};

/** `python3 -m dynamo.vllm`: Dynamo's own worker flags; every other flag is a vLLM engine arg (upstream/vllm.ts). */
export const dynamoVllm: ComponentFacts = {
    component: "dynamo-vllm",
    version: DYNAMO_FACTS_RELEASE,
    flags: {
        "--disaggregation-mode": {
            takesValue: true,
            choices: DISAGGREGATION_MODES,
            default: "agg",
            source: `${D}:components/src/dynamo/vllm/backend_args.py`,
            note: "env DYN_VLLM_DISAGGREGATION_MODE; the old --is-prefill-worker flags were removed (#12089)",
        },
    },
    env: {
        DYN_VLLM_DISAGGREGATION_MODE: {
            default: "agg",
            choices: DISAGGREGATION_MODES,
            source: `${D}:components/src/dynamo/vllm/backend_args.py`,
        },
    },
};

/** `python3 -m dynamo.sglang`: SGLang's ServerArgs (upstream/sglang.ts); no Dynamo-only flag is rendered. */
export const dynamoSglang: ComponentFacts = {
    component: "dynamo-sglang",
    version: DYNAMO_FACTS_RELEASE,
    flags: {},
    env: {},
};

const TRT: Source = `${D}:components/src/dynamo/trtllm/backend_args.py`;
/** `python3 -m dynamo.trtllm` flags. */
export const dynamoTrtllm: ComponentFacts = {
    component: "dynamo-trtllm",
    version: DYNAMO_FACTS_RELEASE,
    flags: {
        "--model": {
            takesValue: true,
            aliases: ["--model-path"],
            source: TRT,
            note: "env DYN_TRTLLM_MODEL; --model-path is its obsolete spelling (add_argument obsolete_flag: still parsed, and trtllm/args.py#parse_args warns with a DeprecationWarning), so the platform renders --model",
        },
        "--served-model-name": { takesValue: true, source: TRT },
        "--tensor-parallel-size": { takesValue: true, default: "1", source: TRT },
        "--disaggregation-mode": {
            takesValue: true,
            choices: DISAGGREGATION_MODES,
            default: "agg",
            source: TRT,
            note: "env DYN_TRTLLM_DISAGGREGATION_MODE; agg and pd both run the aggregated worker; prefill_and_decode (the enum value) is outside the choices, and DynamoTrtllmConfig.validate raises on it from the env var",
        },
        "--override-engine-args": {
            takesValue: true,
            source: TRT,
            note: "JSON overriding LlmArgs keys (upstream/trtllm.ts trtllmEngineArgKeys)",
        },
        "--extra-engine-args": { takesValue: true, source: TRT },
        "--kv-block-size": {
            takesValue: true,
            default: "32",
            source: TRT,
            note: "tokens per KV block; must match between prefill and decode",
        },
        "--publish-kv-events": {
            takesValue: false,
            aliases: ["--no-publish-kv-events"],
            source: TRT,
            note: "env DYN_TRTLLM_PUBLISH_KV_EVENTS (Dynamo >= 1.3.0)",
        },
    },
    env: {
        DYN_TRTLLM_PUBLISH_KV_EVENTS: { default: "false", source: TRT },
        DYN_TRTLLM_DISAGGREGATION_MODE: {
            default: "agg",
            choices: DISAGGREGATION_MODES,
            source: TRT,
            note: "the --disaggregation-mode default; argparse does not check a default against choices, DynamoTrtllmConfig.validate does (prefill_and_decode raises, any other value outside the choices fails DisaggregationMode(...))",
        },
    },
};

/**
 * What Dynamo sets by itself. The vLLM worker exports `VLLM_NIXL_SIDE_CHANNEL_HOST` (its resolved host IP, falling back
 * to 127.0.0.1) only when the top-level connector is `NixlConnector` or `PdConnector`; inside `MultiConnector` vLLM's
 * default `localhost` stays, which the prefill then advertises to decode.
 */
export const dynamoInjections: readonly InjectionFact[] = [
    {
        by: "dynamo-vllm",
        env: ["VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT"],
        when: "top-level kv_connector is NixlConnector or PdConnector",
        kvConnectors: ["NixlConnector", "PdConnector"],
        source: `${D}:components/src/dynamo/vllm/args.py`,
    },
];

/** Entry points of the Dynamo images. */
export const dynamoEntrypoints: readonly EntrypointFacts[] = [
    {
        id: "dynamo.frontend",
        argv: ["python3", "-m", "dynamo.frontend"],
        components: ["dynamo-frontend"],
        source: `${D}:components/src/dynamo/frontend/__main__.py`,
    },
    {
        id: "dynamo.planner",
        argv: ["python3", "-m", "dynamo.planner"],
        components: ["dynamo-planner"],
        source: `${D}:components/src/dynamo/planner/__main__.py`,
    },
    {
        id: "dynamo.vllm",
        argv: ["python3", "-m", "dynamo.vllm"],
        components: ["dynamo-vllm", "vllm"],
        source: `${D}:components/src/dynamo/vllm/__main__.py`,
    },
    {
        id: "dynamo.sglang",
        argv: ["python3", "-m", "dynamo.sglang"],
        components: ["dynamo-sglang", "sglang"],
        source: `${D}:components/src/dynamo/sglang/__main__.py`,
    },
    {
        id: "dynamo.trtllm",
        argv: ["python3", "-m", "dynamo.trtllm"],
        components: ["dynamo-trtllm", "trtllm"],
        source: `${D}:components/src/dynamo/trtllm/__main__.py`,
    },
];
