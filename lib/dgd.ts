import { CACHE_SCOPES_ANNOTATION, type Endpoint, type WorkerGroup } from "../config/endpoint";
import { versions } from "../config/versions";
import {
    type EnvVar,
    GPU_RESOURCE,
    type KvFabric,
    kvTransportEnv,
    memlockPath,
    mooncakeTransferEngineEnv,
    type NicSelection,
    rdmaResources,
    sglangMooncakeExtraConfig,
    sglangNixlBackendParams,
    vllmMooncakeStoreConfig,
    wrappedCommand,
} from "./nixl";
import { efaWorkerHugepages } from "./efa";
import { type ContainerSpec, preflightInitContainer, preflightVolume } from "./preflight";
import { ENDPOINT_LABEL, KV_EXCEPTIONS_ANNOTATION, ROLE_LABEL } from "./labels";
import { hfTokenEnv, hostPathOwnerInitContainers, kvbmKvTransferConfig, type LocalNvme, workerFastStart } from "./faststart";
import { SGLANG_H200_CHUNKED_PREFILL_SIZE } from "../upstream/sglang";
import { kvRouterNeedsWorkerEvents } from "../upstream/dynamo";

/**
 * The DynamoGraphDeployment (`nvidia.com/v1beta1`) of one endpoint, as plain data. Field names follow the CRD in
 * ai-dynamo/dynamo deploy/operator/config/crd/bases (components[], `type`, `podTemplate` with a container named `main`, `scalingAdapter`,
 * `sharedMemorySize`); flags follow upstream examples (ai-dynamo/dynamo examples/backends/<engine>/deploy).
 *
 * Engine choice is one field: {@link ENGINES} holds exactly what differs per engine (runtime image, module,
 * flags, how NIXL's backend is selected, /dev/shm size); everything else (placement, RDMA resources, the
 * UCX/NCCL/Mooncake environment, memlock path, preflight, planner) is shared.
 */

export type EngineName = Endpoint["engine"];

/** Component names in the graph. The operator names the frontend Service `<dgd>-frontend` (lower-cased). */
export const COMPONENT = { frontend: "Frontend", planner: "Planner", prefill: "prefill", decode: "decode", worker: "worker" } as const;

/** Dynamo frontend HTTP port (`--http-port`, upstream default 8000). */
export const FRONTEND_PORT = 8000;

/** A worker role in the graph: `worker` is an aggregated worker (prefill and decode in one engine). */
export type WorkerRole = "prefill" | "decode" | "worker";

/** What an engine's argument builder gets. */
export interface RoleContext {
    endpoint: Endpoint;
    role: WorkerRole;
    group: WorkerGroup;
    disaggregated: boolean;
    /**
     * The worker publishes KV events (ZMQ) to the router: KV-aware routing, on prefill and aggregated workers only (the
     * router subscribes to decode workers' events only under conditional disaggregation, upstream/dynamo.ts
     * kvRouterNeedsWorkerEvents, which the product's frontends never turn on).
     */
    kvEvents: boolean;
    fabric: KvFabric;
    /** Mooncake client config (SGLang extra-config shape) when the endpoint has a shared host-RAM pool. */
    mooncake?: Record<string, string | number>;
}

/** What differs per engine, and nothing else. */
export interface EngineSpec {
    /** DGD `spec.backendFramework`. */
    framework: EngineName;
    /** Python module of the Dynamo worker (`python3 -m <module>`). */
    module: string;
    /**
     * `/dev/shm` size (DGD `sharedMemorySize`): Dynamo's comms guide suggests 16Gi for vLLM and 80Gi for TRT-LLM
     * (operator default 8Gi); SGLang's own docker instructions use `--shm-size 32g`.
     */
    sharedMemory: string;
    /** Engine flags of one worker role. */
    args(c: RoleContext): string[];
    /** Environment selecting NIXL's backend (and its devices) where the engine takes it from the environment. */
    transferEnv(c: RoleContext): EnvVar[];
    /** How the engine's ranks pick their rail HCA (lib/nixl.ts {@link NicSelection}). */
    nicSelection: NicSelection;
}

/** NIXL backend for the fabric: UCX on InfiniBand, LIBFABRIC on EFA (UCX on EFA emulates in software: nixl#909, ucx#10950). */
export function nixlBackend(fabric: KvFabric): "UCX" | "LIBFABRIC" {
    return fabric.kind === "efa" ? "LIBFABRIC" : "UCX";
}

const json = (o: unknown) => JSON.stringify(o);

/**
 * Speculative decoding runs on every worker of the endpoint, prefill included, with the SAME drafter and settings: the
 * prefill computes the drafter's KV for the prompt, and vLLM's NIXL handshake refuses a prefill/decode pair whose
 * speculative config differs (vllm-project/vllm PR #49230, `NixlConnector` compatibility hash over the
 * speculative config); with `kv_load_failure_policy: fail` every disaggregated request would fail. The pairing is
 * checked by upstream/check/activation.ts (`speculative-pd-identical`) and, with every other setting, by the pair rule
 * (upstream/pairs.ts: prefill and decode identical except role settings).
 */
const speculates = (c: RoleContext) => !!c.endpoint.speculative;

/** Pod label naming the graph component's role (lib/labels.ts). */
export { ROLE_LABEL };

/** ZMQ KV-event publisher of vLLM workers (examples/backends/vllm/deploy/disagg_router.yaml). */
export const VLLM_KV_EVENTS = { publisher: "zmq", topic: "kv-events", endpoint: "tcp://*:20080", enable_kv_cache_events: true };
/** ZMQ KV-event publisher of SGLang workers (examples/backends/sglang/deploy/agg_router.yaml). */
export const SGLANG_KV_EVENTS = { publisher: "zmq", topic: "kv-events", endpoint: "tcp://*:5557" };

/**
 * vLLM `--kv-transfer-config`: NIXL for P/D, Mooncake store connector for the shared pool, both via MultiConnector.
 * P/D sets `kv_load_failure_policy: "fail"`: vLLM's default `recompute` silently re-runs the prefill on the decode
 * worker when a NIXL read fails (vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py `KVTransferConfig`,
 * Literal["recompute", "fail"]). The same object is built for prefill and decode (by construction
 * they agree on connector, backends and buffer device; upstream/pairs.ts).
 */
export function vllmKvTransferConfig(c: RoleContext): Record<string, unknown> | undefined {
    const nixl = {
        kv_connector: "NixlConnector",
        kv_role: "kv_both",
        kv_buffer_device: "cuda",
        kv_connector_extra_config: { backends: [nixlBackend(c.fabric)] },
    };
    const store = { kv_connector: "MooncakeStoreConnector", kv_role: "kv_both" };
    if (c.disaggregated && c.mooncake)
        return {
            kv_connector: "MultiConnector",
            kv_role: "kv_both",
            kv_load_failure_policy: "fail",
            kv_connector_extra_config: { connectors: [nixl, store] },
        };
    if (c.disaggregated) return { ...nixl, kv_load_failure_policy: "fail" };
    if (c.mooncake) return store;
    // KVBM host/NVMe tiers on an aggregated worker (lib/faststart.ts; disaggregated and Mooncake endpoints are refused).
    if (c.endpoint.kvTiers) return kvbmKvTransferConfig();
    return undefined;
}

/**
 * The NIXL side channel a vLLM prefill worker advertises to decode: the pod IP from the downward API. vLLM's default
 * is `localhost` (vllm-project/vllm@v0.28.0:vllm/envs.py `VLLM_NIXL_SIDE_CHANNEL_HOST`), and the Dynamo vLLM worker
 * only sets it (from its resolved hostname, falling back to 127.0.0.1) when the top-level connector is
 * `NixlConnector`/`PdConnector`, not inside `MultiConnector` (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/vllm/args.py).
 * Always rendered for P/D, so the address never depends on the connector shape.
 */
export const VLLM_SIDE_CHANNEL_HOST_ENV: EnvVar = {
    name: "VLLM_NIXL_SIDE_CHANNEL_HOST",
    valueFrom: { fieldRef: { fieldPath: "status.podIP" } },
};

/**
 * The address an SGLang P/D worker registers with the bootstrap server and advertises to its peer: the pod IP. Without
 * it SGLang guesses (interface enumeration, then a UDP route probe) and falls back to `0.0.0.0` when both fail
 * (sgl-project/sglang@v0.5.18:python/sglang/srt/utils/common.py `get_local_ip_auto`, `get_ip`: `SGLANG_HOST_IP` wins).
 */
export const SGLANG_HOST_IP_ENV: EnvVar = { name: "SGLANG_HOST_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } };

/** The container variable carrying the pod IP that SGLang's HiCache extra config names (`$(POD_IP)`, expanded by the kubelet). */
export const POD_IP_ENV: EnvVar = { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } };

/**
 * SGLang's `--hicache-storage-backend-extra-config` for the Mooncake backend: the client base plus `local_hostname`,
 * the address the worker's transfer engine registers with the master and peers connect to. When the extra config
 * names the master, SGLang builds its config from the extra config alone
 * (`MooncakeStoreConfig.load_from_extra_config`, `local_hostname` defaulting to `localhost`) and never reads
 * `MOONCAKE_LOCAL_HOSTNAME` (sgl-project/sglang@v0.5.18:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py
 * `MooncakeBaseStore._load_config`). `$(POD_IP)` is expanded by the kubelet from {@link POD_IP_ENV}.
 */
export function sglangHicacheExtraConfig(base: Record<string, string | number>): Record<string, string | number> {
    return { ...base, local_hostname: `$(${POD_IP_ENV.name})` };
}

/** SGLang flag that keeps the radix cache on a P/D decode worker (sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py). */
const SGLANG_DECODE_RADIX_CACHE = "--disaggregation-decode-enable-radix-cache";

/**
 * Does an SGLang worker keep its radix cache (and so publish KV events)? Every worker except a P/D decode worker
 * without {@link SGLANG_DECODE_RADIX_CACHE}, which lib/dgd.ts renders only with HiCache on the Mooncake pool
 * (sgl-project/sglang@v0.5.18:python/sglang/srt/arg_groups/pd_disaggregation_hook.py sets disable_radix_cache=True otherwise).
 */
function sglangKeepsRadixCache(c: RoleContext): boolean {
    return !(c.disaggregated && c.role === "decode") || !!c.mooncake;
}

/** Every supported engine. */
export const ENGINES: Record<EngineName, EngineSpec> = {
    vllm: {
        framework: "vllm",
        module: "dynamo.vllm",
        sharedMemory: "16Gi",
        args(c) {
            const e = c.endpoint;
            const a = [
                "--model",
                e.model,
                "--served-model-name",
                e.model,
                "--tensor-parallel-size",
                String(c.group.gpusPerWorker),
                // `--disaggregation-mode` (ai-dynamo/dynamo #6483); without `prefill` a worker registers as `backend` (#13238).
                "--disaggregation-mode",
                c.role === "worker" ? "agg" : c.role,
                // Every request carries the platform's priority (services/auth/entitlement.ts); vLLM's default `fcfs`
                // scheduler ignores it (upstream/activation.ts `engine-priority`).
                "--scheduling-policy",
                "priority",
            ];
            // The same revision for weights/config and tokenizer: vLLM's tokenizer revision does not follow --revision
            // (upstream/revision.ts `vllm-revision`).
            if (e.modelRevision) a.push("--revision", e.modelRevision, "--tokenizer-revision", e.modelRevision);
            const kvt = vllmKvTransferConfig(c);
            if (kvt) a.push("--kv-transfer-config", json(kvt));
            if (c.kvEvents) a.push("--kv-events-config", json(VLLM_KV_EVENTS));
            if (e.maxModelLen) a.push("--max-model-len", String(e.maxModelLen));
            if (speculates(c)) {
                const s = e.speculative!;
                const method = s.method === "eagle3" ? "eagle3" : s.method === "ngram" ? "ngram" : "mtp";
                a.push(
                    "--speculative-config",
                    json({ method, ...(s.draftModel ? { model: s.draftModel } : {}), num_speculative_tokens: s.numSpeculativeTokens }),
                );
            }
            return a;
        },
        transferEnv: (c) => (c.disaggregated ? [VLLM_SIDE_CHANNEL_HOST_ENV] : []),
        nicSelection: "vllm-pcie-map",
    },
    sglang: {
        framework: "sglang",
        module: "dynamo.sglang",
        sharedMemory: "32Gi",
        args(c) {
            const e = c.endpoint;
            // `--enable-metrics`: without it SGLang registers no `sglang:*` series and Dynamo's worker re-exports none
            // (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/sglang/publisher.py,
            // "Register SGLang multiprocess metrics only when --enable-metrics was passed"; upstream/activation.ts).
            const a = [
                "--model-path",
                e.model,
                "--served-model-name",
                e.model,
                "--tp-size",
                String(c.group.gpusPerWorker),
                "--trust-remote-code",
                "--skip-tokenizer-init",
                "--page-size",
                "64",
                "--host",
                "0.0.0.0",
                "--enable-metrics",
                // The platform's per-request priority (services/auth/entitlement.ts) orders SGLang's queue only with
                // priority scheduling on, which SGLang accepts only under the `fcfs` or `lof` policy (named here rather
                // than left to the default; upstream/activation.ts `engine-priority`).
                "--schedule-policy",
                "fcfs",
                "--enable-priority-scheduling",
            ];
            if (c.disaggregated) {
                a.push(
                    "--disaggregation-mode",
                    c.role,
                    "--disaggregation-transfer-backend",
                    "nixl",
                    "--disaggregation-bootstrap-port",
                    "12345",
                );
            }
            // Behind a queueing KV router the worker states its prefill window, the threshold's denominator; without it
            // Dynamo publishes the KV pool size and the queue almost never engages (upstream/activation.ts
            // `router-priority`; SGLang's H200 chunked prefill size, upstream/sglang.ts).
            if (e.router.mode === "kv" && e.router.queueThreshold !== undefined)
                a.push("--max-prefill-tokens", String(SGLANG_H200_CHUNKED_PREFILL_SIZE.value));
            // ServerArgs.revision (upstream/revision.ts `sglang-revision`); the worker runs --skip-tokenizer-init, so the
            // frontend tokenizes.
            if (e.modelRevision) a.push("--revision", e.modelRevision);
            // A P/D decode worker runs SGLang's chunk cache unless `--disaggregation-decode-enable-radix-cache` keeps
            // the radix cache (rendered below with HiCache), and the chunk cache publishes no KV events: the flag would
            // be read (Dynamo advertises the worker as a publisher) but inert. The KV router needs decode workers'
            // events only under `--router-conditional-disagg` (upstream/activation.ts `sglang-decode-kv-events`).
            if (c.kvEvents && sglangKeepsRadixCache(c)) a.push("--kv-events-config", json(SGLANG_KV_EVENTS));
            if (c.mooncake) {
                // HiCache with the Mooncake backend (Dynamo docs backends/sglang/hicache.md). A P/D decode worker gets
                // the radix cache forced off by SGLang's P/D hook, and HiCache without the radix cache is refused at
                // start-up unless `--disaggregation-decode-enable-radix-cache` keeps it on
                // (sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py).
                if (c.disaggregated && c.role === "decode") a.push(SGLANG_DECODE_RADIX_CACHE);
                a.push(
                    "--enable-hierarchical-cache",
                    "--hicache-ratio",
                    "2",
                    "--hicache-write-policy",
                    "write_through",
                    "--hicache-storage-backend",
                    "mooncake",
                    "--hicache-storage-backend-extra-config",
                    json(sglangHicacheExtraConfig(c.mooncake)),
                );
            }
            if (e.maxModelLen) a.push("--context-length", String(e.maxModelLen));
            if (speculates(c)) {
                const s = e.speculative!;
                a.push("--speculative-algorithm", s.method === "eagle3" ? "EAGLE3" : s.method === "ngram" ? "NGRAM" : "NEXTN");
                if (s.draftModel) a.push("--speculative-draft-model-path", s.draftModel);
                a.push("--speculative-num-draft-tokens", String(s.numSpeculativeTokens));
            }
            return a;
        },
        // SGLang picks NIXL's backend from the environment (default UCX; Dynamo efa-on-aws guide) and its UCX devices
        // from SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS (it ignores the VLLM_* NIC variables).
        transferEnv: (c) => {
            if (!c.disaggregated) return [];
            const env: EnvVar[] = [SGLANG_HOST_IP_ENV, { name: "SGLANG_DISAGGREGATION_NIXL_BACKEND", value: nixlBackend(c.fabric) }];
            const params = sglangNixlBackendParams(c.fabric);
            if (params) env.push({ name: "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS", value: json(params) });
            return env;
        },
        // NIXL sets UCX NET_DEVICES from device_list over the environment: no UCX_NET_DEVICES (lib/nixl.ts).
        nicSelection: "nixl-device-list",
    },
    trtllm: {
        framework: "trtllm",
        module: "dynamo.trtllm",
        sharedMemory: "80Gi",
        args(c) {
            const e = c.endpoint;
            // `--model`, not its obsolete spelling `--model-path` (upstream/dynamo.ts dynamoTrtllm)
            const a = ["--model", e.model, "--served-model-name", e.model, "--tensor-parallel-size", String(c.group.gpusPerWorker)];
            // modelRevision is refused on trtllm (config/endpoint.ts `model-revision-engine`); never dropped silently here.
            if (e.modelRevision) throw new Error(`endpoint ${e.name}: engine trtllm cannot take modelRevision (model-revision-engine)`);
            if (c.disaggregated) a.push("--disaggregation-mode", c.role);
            // TRT-LLM LLM-API overrides (the `--extra-engine-args` YAML keys, as JSON).
            const engine: Record<string, unknown> = { kv_cache_config: { enable_block_reuse: true } };
            if (c.disaggregated) engine.cache_transceiver_config = { backend: "NIXL" };
            if (e.maxModelLen) engine.max_seq_len = e.maxModelLen;
            if (speculates(c)) {
                const s = e.speculative!;
                engine.speculative_config =
                    s.method === "eagle3"
                        ? {
                              decoding_type: "Eagle",
                              max_draft_len: s.numSpeculativeTokens,
                              speculative_model_dir: s.draftModel,
                              eagle3_one_model: true,
                          }
                        : s.method === "ngram"
                          ? { decoding_type: "NGram", max_draft_len: s.numSpeculativeTokens }
                          : { decoding_type: "MTP", num_nextn_predict_layers: s.numSpeculativeTokens };
            }
            a.push("--override-engine-args", json(engine));
            // `--publish-kv-events` (Dynamo >= 1.3.0; the old alias was --publish-events-and-metrics). It is one switch for
            // KV events and the worker's metrics (publish_events_and_metrics turns on TRT-LLM's MetricsCollector,
            // iteration stats and the metrics publisher: ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:
            // components/src/dynamo/trtllm/workers/llm_worker.py), so a decode worker keeps it under KV routing: its KV
            // events go unread without conditional disaggregation, its metrics do not.
            if (c.kvEvents || (c.role === "decode" && c.endpoint.router.mode === "kv")) a.push("--publish-kv-events");
            return a;
        },
        transferEnv: (c) => (c.disaggregated ? [{ name: "TRTLLM_NIXL_KVCACHE_BACKEND", value: nixlBackend(c.fabric) }] : []),
        nicSelection: "static",
    },
};

/** A pod toleration (core/v1 Toleration shape; same as components/spoke/GpuNodePool `Toleration`). */
export interface Toleration {
    key: string;
    operator: "Equal" | "Exists";
    value?: string;
    effect: string;
}

/** Node pool facts a DGD needs. */
export interface PoolPlacement {
    name: string;
    nodeSelector: Record<string, string>;
    tolerations: Toleration[];
    /** Nodes set LimitMEMLOCK=infinity for containerd and kubelet. */
    memlockUnlimited: boolean;
    fabric: KvFabric;
    /**
     * 2 MiB huge pages each node reserves (EFA pools: `platform:nodeGroups.gpu[].hugepages2Mi`, 5,128 by default);
     * EFA workers request their GPU share as `hugepages-2Mi` (lib/efa.ts `efaWorkerHugepages`). Unset or 0: none.
     */
    hugepages2MiPerNode?: number;
    /** The nodes' local NVMe filesystem (node profile `localNvme`): KVBM disk tier and model cache live there. */
    localNvme?: LocalNvme;
}

/** Everything {@link buildDgd} needs besides the endpoint. */
export interface DgdArgs {
    endpoint: Endpoint;
    namespace: string;
    pool: PoolPlacement;
    /** `image:tag` of the engine runtime (Frontend; workers on InfiniBand pools) and of the dedicated planner image. */
    runtimeImage: string;
    /**
     * `image:tag` of the engine's `-efa` runtime variant, which carries the EFA installer (libfabric, `fi_info`) and
     * aws-ofi-nccl (upstream/images.ts); workers and their preflight on EFA pools run it. Default: the pinned variant
     * of {@link versions.dynamoRuntime} ({@link efaRuntimeImage}).
     */
    efaRuntimeImage?: string;
    plannerImage: string;
    prometheusEndpoint: string;
    /** Minimum rail port rate in Gb/s the preflight enforces. */
    minLinkRateGbps: number;
    /**
     * The spoke's HF token Secret (`platform:serving.hfTokenSecret`): the frontend and workers of an endpoint whose model
     * is gated (`gatedModel`) read its `HF_TOKEN` key (lib/faststart.ts `hfTokenEnv`); a public model references none.
     */
    hfTokenSecret?: string;
    /** Mooncake master `host:port` and the ConfigMap carrying the client JSON, when the endpoint has a KV pool. */
    mooncake?: { master: string; configMap: string; kvEventsEndpoint?: string };
    /**
     * Node selector of the CPU nodes the Frontend and Planner run on (EKS: the CPU node group). Unset or empty: no
     * selector, so they land on any untainted node (GPU nodes carry the GPU taint).
     */
    systemNodeSelector?: Record<string, string>;
}

/** Where the Mooncake client JSON is mounted (`MOONCAKE_CONFIG_PATH`, read by vLLM's MooncakeStoreConnector). */
export const MOONCAKE_CONFIG_DIR = "/etc/mooncake";
/** Key of the Mooncake client ConfigMap: the file name under {@link MOONCAKE_CONFIG_DIR}. */
export const MOONCAKE_CONFIG_KEY = "mooncake.json";

/**
 * The Mooncake KV-event endpoint the frontend's shared KV cache subscribes to, or undefined when the shared cache is
 * off. On only for SGLang endpoints with a Mooncake pool and KV routing, and only when the pool's master publishes KV
 * events (`DgdArgs.mooncake.kvEventsEndpoint`, set from lib/mooncake.ts `mooncakeKvEventsEndpoint`, which needs a
 * Mooncake master proven to carry `--enable_kv_events`): without that the shared cache is a no-op
 * (upstream/activation.ts `shared-kv-cache`).
 */
export function sharedKvCache(e: Endpoint, mooncake: DgdArgs["mooncake"]): string | undefined {
    if (e.engine !== "sglang" || e.kvPool.kind !== "mooncake" || e.router.mode !== "kv") return undefined;
    return mooncake?.kvEventsEndpoint;
}

/** True when the endpoint's workers move KV between pods (P/D over NIXL, or a shared Mooncake pool). */
export function needsRdma(e: Endpoint): boolean {
    return e.topology.mode === "disaggregated" || e.kvPool.kind === "mooncake";
}

/**
 * Dynamo Planner config (`--config`, PlannerConfig in ai-dynamo/dynamo components/src/dynamo/planner/config):
 * load-based scaling on KV-cache utilisation (decode) and queued prefill tokens (prefill), never on GPU
 * utilisation. `min_endpoint` (at least 1) keeps the model listed (scale-to-zero
 * removes it from /v1/models) and is the warm reserve of workers the planner never scales below. The pinned planner has
 * no scale-down window: PlannerConfig has no such key (upstream/planner.ts) and load scaling decides every
 * `load_adjustment_interval_seconds`, damped only by `load_scaling_down_sensitivity`. Thresholds are passed only for `optimization_target: load`; `throughput` uses the
 * planner's fixed queue/KV thresholds. No pre-deployment sweep: nothing here needs an AIC profile.
 */
export function plannerConfig(e: Endpoint): Record<string, unknown> {
    const p = e.planner;
    const disagg = e.topology.mode === "disaggregated";
    const cfg: Record<string, unknown> = {
        environment: "kubernetes",
        backend: e.engine,
        mode: disagg ? "disagg" : "agg",
        optimization_target: p.optimizationTarget,
        enable_load_scaling: true,
        enable_throughput_scaling: false,
        pre_deployment_sweeping_mode: "none",
        load_adjustment_interval_seconds: p.loadAdjustmentIntervalSeconds,
        // The warm reserve (config/endpoint.ts `planner.minReplicas`); in disagg mode it applies to prefill and decode.
        min_endpoint: p.minReplicas,
        max_gpu_budget: p.maxGpuBudget,
    };
    if (p.optimizationTarget === "load") {
        if (disagg) {
            cfg.prefill_scale_up_queue_tokens = p.prefillScaleUpQueueTokens;
            cfg.prefill_scale_down_queue_tokens = p.prefillScaleDownQueueTokens;
        }
        cfg.decode_scale_up_kv_rate = p.decodeScaleUpKvRate;
        cfg.decode_scale_down_kv_rate = p.decodeScaleDownKvRate;
    }
    return cfg;
}

/** A DGD v1beta1 component (the fields generated here). */
export interface DgdComponent {
    name: string;
    type: "frontend" | "planner" | "prefill" | "decode" | "worker";
    replicas: number;
    scalingAdapter?: Record<string, never>;
    sharedMemorySize?: string;
    podTemplate: { metadata?: { labels: Record<string, string> }; spec: Record<string, unknown> };
}

/** The generated custom resource. */
export interface DgdManifest {
    apiVersion: "nvidia.com/v1beta1";
    kind: "DynamoGraphDeployment";
    metadata: { name: string; namespace: string; labels: Record<string, string>; annotations?: Record<string, string> };
    spec: { backendFramework: EngineName; components: DgdComponent[] };
}

/** Pod label naming the endpoint (selectors, dashboards): upstream/labels.ts, read by the version-pair rules. */
export { ENDPOINT_LABEL };

/**
 * Builds the DGD of one endpoint placed on one pool. DGD name = endpoint name.
 *
 * @throws Error when a worker needs more GPUs than a node of the pool has (workers never span nodes here), or
 *   the endpoint has a Mooncake pool but no master was given, or the engine cannot use the pool (TRT-LLM has no
 *   Mooncake store integration in Dynamo's offloading matrix)
 */
export function buildDgd(a: DgdArgs): DgdManifest {
    const e = a.endpoint;
    const eng = ENGINES[e.engine];
    const t = e.topology;
    const disaggregated = t.mode === "disaggregated";
    const groups: Array<[WorkerRole, WorkerGroup]> =
        t.mode === "disaggregated"
            ? [
                  ["prefill", t.prefill],
                  ["decode", t.decode],
              ]
            : [["worker", t.workers]];
    for (const [role, g] of groups) {
        if (g.gpusPerWorker > a.pool.fabric.gpusPerNode) {
            throw new Error(
                `endpoint ${e.name}: ${role} workers need ${g.gpusPerWorker} GPUs but a node of pool ${a.pool.name} (${a.pool.fabric.profile}) has ${a.pool.fabric.gpusPerNode}; workers never span nodes`,
            );
        }
    }
    if (e.kvPool.kind === "mooncake" && !a.mooncake)
        throw new Error(`endpoint ${e.name}: kvPool mooncake needs the Mooncake master address`);
    if (e.kvPool.kind === "mooncake" && e.engine === "trtllm") {
        throw new Error(
            `endpoint ${e.name}: engine trtllm has no Mooncake shared-pool integration in Dynamo (offloading support matrix); use kvPool kind none or engine vllm/sglang`,
        );
    }
    const rdma = needsRdma(e);
    const mooncakeCfg = e.kvPool.kind === "mooncake" ? sglangMooncakeExtraConfig(a.pool.fabric, a.mooncake!.master) : undefined;
    // EFA workers need the image with libfabric and aws-ofi-nccl; the Frontend needs neither.
    const workerImage = a.pool.fabric.kind === "efa" ? (a.efaRuntimeImage ?? efaRuntimeImage(e.engine)) : a.runtimeImage;
    const kvEvents = e.router.mode === "kv";
    const labels = { [ENDPOINT_LABEL]: e.name, "app.kubernetes.io/part-of": "inference-platform" };
    // One visible variable from the Secret, never `envFrom` of the whole Secret: the pack must see every variable a
    // KV-moving container gets (policies: guarded-settings-visible, upstream-rules).
    const tokenEnv = hfTokenEnv(e, a.hfTokenSecret);

    const frontendArgs = ["--http-port", String(FRONTEND_PORT), "--router-mode", e.router.mode];
    const frontendEnv: EnvVar[] = [{ name: "DYN_ROUTER_MODE", value: e.router.mode }];
    // The KV router queues, and so orders by the request's strict tier and priority, only with a threshold set
    // (upstream/activation.ts `router-priority`).
    if (e.router.mode === "kv" && e.router.queueThreshold !== undefined)
        frontendArgs.push("--router-queue-threshold", String(e.router.queueThreshold));
    const sharedCache = sharedKvCache(e, a.mooncake);
    if (sharedCache) {
        // Tier-aware routing over the shared HiCache/Mooncake pool: the frontend subscribes to the master's KV events
        // (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/discovery/model_manager.rs
        // `hicache_cache_for`, env DYN_MOONCAKE_KV_EVENTS_ENDPOINT; upstream/activation.ts `shared-kv-cache`).
        frontendArgs.push("--shared-cache-type", "hicache", "--shared-cache-multiplier", "0.5");
        frontendEnv.push({ name: "DYN_MOONCAKE_KV_EVENTS_ENDPOINT", value: sharedCache });
    }
    // CPU components (Frontend, Planner) on the system nodes when the spoke names them.
    const systemSpec =
        a.systemNodeSelector && Object.keys(a.systemNodeSelector).length ? { nodeSelector: { ...a.systemNodeSelector } } : {};
    const components: DgdComponent[] = [
        {
            name: COMPONENT.frontend,
            type: "frontend",
            replicas: 1,
            podTemplate: {
                metadata: { labels: { ...labels, [ROLE_LABEL]: "frontend" } },
                spec: {
                    ...systemSpec,
                    containers: [
                        stripUndefined({
                            name: "main",
                            image: a.runtimeImage,
                            command: ["python3", "-m", "dynamo.frontend"],
                            args: frontendArgs,
                            env: [...frontendEnv, ...tokenEnv],
                        }),
                    ],
                },
            },
        },
    ];
    if (e.planner.enabled) {
        components.push({
            name: COMPONENT.planner,
            type: "planner",
            replicas: 1,
            podTemplate: {
                metadata: { labels: { ...labels, [ROLE_LABEL]: "planner" } },
                spec: {
                    ...systemSpec,
                    containers: [
                        {
                            name: "main",
                            image: a.plannerImage,
                            command: ["python3", "-m", "dynamo.planner"],
                            args: ["--config", json(plannerConfig(e))],
                            env: [{ name: "PROMETHEUS_ENDPOINT", value: a.prometheusEndpoint }],
                        },
                    ],
                },
            },
        });
    }

    const memlock = memlockPath(a.pool.fabric, a.pool.memlockUnlimited);
    for (const [role, group] of groups) {
        // A P/D decode worker's KV events are subscribed to only under conditional disaggregation, which no frontend of
        // the product turns on (upstream/dynamo.ts kvRouterNeedsWorkerEvents, upstream/activation.ts `kv-events`):
        // rendered there they would be read and inert, so decode workers get none (TRT-LLM keeps its switch for the
        // metrics it also gates, see its args).
        const events =
            kvEvents &&
            kvRouterNeedsWorkerEvents(role, frontendArgs, frontendEnv.find((x) => x.name === "DYN_ROUTER_CONDITIONAL_DISAGG")?.value);
        const ctx: RoleContext = {
            endpoint: e,
            role,
            group,
            disaggregated,
            kvEvents: events,
            fabric: a.pool.fabric,
            mooncake: mooncakeCfg,
        };
        const resources: Record<string, string> = {
            [GPU_RESOURCE]: String(group.gpusPerWorker),
            ...(rdma ? rdmaResources(a.pool.fabric, group.gpusPerWorker) : {}),
        };
        // EFA: the worker's share of the node's 2 MiB huge pages, on the engine container only
        // (the preflight opens no EFA endpoint; it gets the GPU and EFA devices).
        const hugepages =
            rdma && a.pool.fabric.kind === "efa"
                ? efaWorkerHugepages(a.pool.hugepages2MiPerNode ?? 0, a.pool.fabric.gpusPerNode, group.gpusPerWorker)
                : { requests: {}, limits: {} };
        const env: EnvVar[] = [];
        // UCX only where NIXL runs (P/D): an aggregated Mooncake-only worker loads no UCX.
        if (rdma) env.push(...kvTransportEnv(a.pool.fabric, eng.nicSelection, { nixl: disaggregated }));
        env.push(...eng.transferEnv(ctx));
        // vLLM's MooncakeStoreConnector reads its client settings from the MOONCAKE_CONFIG_PATH file only
        // (upstream/vllm.ts vllmMooncakeStoreConfig); the MOONCAKE_* variables would be read by nothing there, so a vLLM
        // worker gets the file plus the transfer engine's MC_* knobs. SGLang's HiCache backend takes the extra-config
        // flag and the MOONCAKE_* environment (upstream/mooncake.ts mooncakeClient).
        const mooncakeFile = !!mooncakeCfg && e.engine === "vllm";
        if (mooncakeCfg) {
            if (mooncakeFile) {
                env.push(...mooncakeTransferEngineEnv(a.pool.fabric));
                env.push({ name: "MOONCAKE_CONFIG_PATH", value: `${MOONCAKE_CONFIG_DIR}/${MOONCAKE_CONFIG_KEY}` });
            } else {
                // SGLang takes its whole Mooncake config from the extra-config flag (sglangHicacheExtraConfig): the
                // MOONCAKE_* variables would be read by nothing, so only the transfer engine's MC_* knobs and POD_IP.
                env.push(...mooncakeTransferEngineEnv(a.pool.fabric), POD_IP_ENV);
                if (sharedCache) env.push({ name: "DYN_MOONCAKE_KV_EVENTS_ENDPOINT", value: sharedCache });
            }
            // Same block hashes in every engine process, so prefixes stored by one worker hit in another
            // (kvcache-ai/Mooncake vllm-mooncakestoreconnector.md; read by CPython, python/cpython Python/initconfig.c).
            env.push({ name: "PYTHONHASHSEED", value: "0" });
        }
        // KVBM tiers and the per-node model cache (lib/faststart.ts).
        const fast = workerFastStart(e, a.pool.localNvme);
        env.push(...fast.env, ...tokenEnv);
        const memory: Record<string, string> = fast.memoryRequestGiB ? { memory: `${fast.memoryRequestGiB}Gi` } : {};
        const argv = ["python3", "-m", eng.module];
        const main: ContainerSpec = stripUndefined({
            name: "main",
            image: workerImage,
            // The memlock prelude (RDMA) and the KVBM disk tier's start-up sweep (lib/faststart.ts), in that order.
            command: (() => {
                const prelude = [...(rdma ? [memlock.prelude] : []), ...(fast.prelude ? [fast.prelude] : [])].join(" && ");
                return prelude ? wrappedCommand(prelude, argv) : argv;
            })(),
            args: eng.args(ctx),
            env,
            resources: { requests: { ...resources, ...hugepages.requests, ...memory }, limits: { ...resources, ...hugepages.limits } },
            securityContext: rdma ? memlock.securityContext : undefined,
            volumeMounts: [
                ...(mooncakeFile ? [{ name: "mooncake-config", mountPath: MOONCAKE_CONFIG_DIR, readOnly: true }] : []),
                ...fast.volumeMounts,
            ],
        });
        if (!main.volumeMounts?.length) delete main.volumeMounts;
        const volumes: unknown[] = [];
        const spec: Record<string, unknown> = {
            nodeSelector: { ...a.pool.nodeSelector },
            tolerations: a.pool.tolerations.map((x) => ({ ...x })),
        };
        // The model-cache / KVBM-disk hostPath folders handed to the image user first (lib/faststart.ts).
        const owners = hostPathOwnerInitContainers(workerImage, fast.volumeMounts);
        if (owners.length) spec.initContainers = owners;
        if (rdma) {
            spec.initContainers = [
                ...owners,
                preflightInitContainer({
                    image: workerImage,
                    fabric: a.pool.fabric,
                    memlock,
                    minLinkRateGbps: a.minLinkRateGbps,
                    gpus: group.gpusPerWorker,
                    resources,
                    securityContext: memlock.securityContext,
                }),
            ];
            volumes.push(preflightVolume());
        }
        if (mooncakeFile) volumes.push({ name: "mooncake-config", configMap: { name: a.mooncake!.configMap } });
        volumes.push(...fast.volumes);
        if (disaggregated && a.pool.fabric.kind === "efa") {
            // EFA: prefill and decode on the same node make fi_read retry EAGAIN; keep them apart by the
            // operator's component label (Dynamo disagg-communication guide).
            const other = role === "prefill" ? COMPONENT.decode : COMPONENT.prefill;
            spec.affinity = {
                podAntiAffinity: {
                    requiredDuringSchedulingIgnoredDuringExecution: [
                        {
                            topologyKey: "kubernetes.io/hostname",
                            labelSelector: {
                                matchLabels: { "nvidia.com/dynamo-component": other, "nvidia.com/dynamo-graph-deployment-name": e.name },
                            },
                        },
                    ],
                },
            };
        }
        spec.containers = [main];
        if (volumes.length) spec.volumes = volumes;
        components.push({
            name: COMPONENT[role],
            type: role,
            replicas: group.replicas,
            ...(e.planner.enabled ? { scalingAdapter: {} } : {}),
            sharedMemorySize: eng.sharedMemory,
            podTemplate: { metadata: { labels: { ...labels, [ROLE_LABEL]: role } }, spec },
        });
    }
    // Reviewed KV-transport exceptions from the stack file (upstream/check/kv-closed-world.ts), and how many KV cache
    // scopes the hub says call the model (upstream/check/activation.ts `cacheSaltRule`): both read by the pack.
    const annotations: Record<string, string> = {};
    if (e.kvExceptions?.length) annotations[KV_EXCEPTIONS_ANNOTATION] = json(e.kvExceptions);
    if (e.cacheScopes !== undefined) annotations[CACHE_SCOPES_ANNOTATION] = String(e.cacheScopes);
    return {
        apiVersion: "nvidia.com/v1beta1",
        kind: "DynamoGraphDeployment",
        metadata: {
            name: e.name,
            namespace: a.namespace,
            labels,
            ...(Object.keys(annotations).length ? { annotations } : {}),
        },
        spec: { backendFramework: eng.framework, components },
    };
}

/** The Mooncake client ConfigMap data of an endpoint (`MOONCAKE_CONFIG_PATH` file read by vLLM's MooncakeStoreConnector). */
export function mooncakeClientConfigMapData(fabric: KvFabric, master: string): Record<string, string> {
    return { [MOONCAKE_CONFIG_KEY]: json(vllmMooncakeStoreConfig(fabric, master)) };
}

/** `image:tag` of an engine's pinned `-efa` runtime variant (config/versions.ts `dynamoRuntime.<engine>.efaVersion`). */
export function efaRuntimeImage(engine: EngineName): string {
    const rt = versions.dynamoRuntime[engine];
    return `${rt.image}:${rt.efaVersion}`;
}

function stripUndefined<T extends object>(o: T): T {
    return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
