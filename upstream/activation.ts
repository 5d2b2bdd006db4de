import type { Source } from "./types";
import type { Exporter } from "./metrics";
import { DYNAMO_REQUEST_HEADERS } from "./dynamo-headers";
import { CACHE_SCOPES_ANNOTATION } from "./labels";

const PRIORITY_HEADER = DYNAMO_REQUEST_HEADERS.priority.header;
const SALT_HEADER = DYNAMO_REQUEST_HEADERS.cacheSalt.header;

/**
 * Activation facts: for every feature the product turns on or relies on, what must hold for it to take effect and for
 * its peers to accept it (flags, env and config keys with the code path that reads them, other components, versions).
 * Plain data with sources; the rules that evaluate rendered objects against them live in upstream/check/*.ts and name
 * the fact's `id` and `source` in every finding. Read at the pins of config/versions.ts (Dynamo 1.5.0: vLLM 0.28.0,
 * SGLang 0.5.18; Mooncake v0.3.12.post1; GPU Operator v25.10.1; Network Operator 26.1.2). Dynamo's sources are cited
 * at the public mirror commit of ai-dynamo/dynamo's `main` read here (2a6da14c, 2026-08-21, before the 1.5.0 branch cut;
 * see schemas/dynamo/SOURCE.md); re-read them when the pin moves.
 */

/** One condition a feature needs, and where upstream reads it. */
export interface ActivationRequirement {
    /** What must hold, in words (a flag and value, an env var, a config key, another component). */
    readonly what: string;
    /** The code path that reads it. */
    readonly readBy: Source;
}

/** A feature and everything it needs. */
export interface ActivationFact {
    /** Stable id, named in upstream-check findings. */
    readonly id: string;
    /** The feature, in the field's words. */
    readonly feature: string;
    /** Component whose behaviour it is. */
    readonly component: string;
    /** What must hold for it to take effect. */
    readonly requires: readonly ActivationRequirement[];
    /** What its peers need to accept it (the other end of a handshake, a subscriber). */
    readonly peers?: readonly ActivationRequirement[];
    /** What happens when a requirement is missing. */
    readonly otherwise: "inert" | "refused" | "startup-failure";
    readonly source: Source;
    /** How the fact was read, and what the product does instead. */
    readonly note?: string;
}

const D = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f";
const VLLM = "vllm-project/vllm@v0.28.0";
const SGL = "sgl-project/sglang@v0.5.18";
const MC = "kvcache-ai/Mooncake@v0.3.12.post1";
const GPUOP = "NVIDIA/gpu-operator@v25.10.1";
const NETOP = "Mellanox/network-operator@v26.1.2";

export const activationFacts: readonly ActivationFact[] = [
    {
        id: "speculative-pd-identical",
        feature: "speculative decoding with a model-based drafter (eagle, eagle3, mtp) on a disaggregated endpoint",
        component: "vllm",
        requires: [
            { what: "`--speculative-config` on the decode worker", readBy: `${VLLM}:vllm/engine/arg_utils.py` },
            {
                what: "the IDENTICAL `--speculative-config` (method, drafter model, num_speculative_tokens) on every prefill worker: the prefill computes the drafter's KV that decode reads",
                readBy: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
            },
        ],
        peers: [
            {
                what: "the NIXL handshake hashes the transfer-relevant speculative settings of model-based methods and refuses a prefill/decode pair whose hash differs (vllm-project/vllm PR #49230)",
                readBy: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
            },
        ],
        otherwise: "refused",
        source: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
    },
    {
        id: "nixl-connector",
        feature: "vLLM P/D KV transfer over NIXL (NixlConnector, alone or inside MultiConnector)",
        component: "vllm",
        requires: [
            {
                what: "`--kv-transfer-config` with kv_connector NixlConnector (or MultiConnector listing it) on prefill and decode",
                readBy: `${VLLM}:vllm/config/kv_transfer.py`,
            },
            {
                what: "`--disaggregation-mode prefill|decode` so Dynamo registers the prefill and the router sends it prompts",
                readBy: `${D}:components/src/dynamo/vllm/backend_args.py`,
            },
            {
                what: "VLLM_NIXL_SIDE_CHANNEL_HOST = the pod IP (default localhost; Dynamo sets it only for a top-level NixlConnector/PdConnector)",
                readBy: `${VLLM}:vllm/envs.py`,
            },
        ],
        peers: [
            {
                what: "same vLLM version, NIXL connector version and model/dtype/cache config on both ends (compatibility hash, PR #29503)",
                readBy: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
            },
        ],
        otherwise: "refused",
        source: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
    },
    {
        id: "mooncake-store-equal-tp",
        feature: "one Mooncake store pool shared by every worker of an endpoint (vLLM MooncakeStoreConnector, SGLang HiCache)",
        component: "vllm",
        requires: [
            {
                what: "the same tensor-parallel size on every worker that reads or writes the pool: a pool key carries the writer's tp_rank (and pcp/dcp/pp rank) but not its TP size, so a TP4 reader asks for rank 2/3 shards a TP2 writer never stored and reads rank 0/1 shards of a different head split",
                readBy: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py#PoolKey.build_prefix`,
            },
        ],
        peers: [],
        otherwise: "refused",
        source: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py`,
        note: "read in the stored vllm-project/vllm data.py (commit 015cb3c6): KeyMetadata = model_name, tp_rank, pcp_rank, dcp_rank, pp_rank, group_id, cache_prefix; no TP size. Unequal TP on one pool is not proven supported at v0.28.0, so it is refused (closed world)",
    },
    {
        id: "vllm-disagg-model-speculative",
        feature: "model-based speculative decoding (eagle3, mtp) on a disaggregated vLLM endpoint",
        component: "vllm",
        requires: [
            {
                what: "not proven working: Dynamo lists 'vLLM Disagg Decode + EAGLE3 Speculative Decoding Crashes Silently ... under large KV-transfer volume ... even with an identical --speculative_config on prefill and decode. Workaround: None reliable; EAGLE3 speculative decoding with disaggregated serving is unsupported' (v1.3.0, targeted fix v1.4.0); neither the v1.4.0 nor the v1.5.0 release notes record the fix",
                readBy: "ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx",
            },
        ],
        peers: [],
        otherwise: "refused",
        source: "ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx",
        note: "run EAGLE3 on an aggregated vLLM endpoint (no KV transfer), where it is not affected",
    },
    {
        id: "mooncake-store-connector",
        feature: "vLLM shared host-RAM KV pool (MooncakeStoreConnector)",
        component: "vllm",
        requires: [
            {
                what: "MOONCAKE_CONFIG_PATH naming a mounted JSON file; MOONCAKE_* variables are not read",
                readBy: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py#MooncakeStoreConfig.load_from_config`,
            },
            {
                what: "`mode: standalone-store` with `global_segment_size: 0` (separate store pods)",
                readBy: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py#MooncakeStoreConfig.__post_init__`,
            },
            { what: "a Mooncake master and store reachable at `master_server_address`", readBy: `${MC}:mooncake-store/src/master.cpp` },
        ],
        otherwise: "startup-failure",
        source: `${VLLM}:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py`,
    },
    {
        id: "sglang-hicache-mooncake",
        feature: "SGLang HiCache with the Mooncake storage backend",
        component: "sglang",
        requires: [
            {
                what: "`--enable-hierarchical-cache` with `--hicache-storage-backend mooncake`",
                readBy: `${SGL}:python/sglang/srt/server_args.py`,
            },
            {
                what: "`--disaggregation-decode-enable-radix-cache` on a P/D decode worker (the P/D hook turns the radix cache off, and HiCache without it is refused)",
                readBy: `${SGL}:python/sglang/srt/server_args.py`,
            },
            {
                what: "`--hicache-storage-backend-extra-config` naming `master_server_address`: then the whole Mooncake config comes from it (`load_from_extra_config`) and MOONCAKE_* variables are not read",
                readBy: `${SGL}:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py#MooncakeBaseStore._load_config`,
            },
        ],
        otherwise: "startup-failure",
        source: `${SGL}:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py`,
    },
    {
        id: "mooncake-registration",
        feature: "Mooncake client registration with the master (the address peers and the store connect back to)",
        component: "mooncake-client",
        requires: [
            {
                what: "SGLang extra-config path: `local_hostname` in the extra config = the pod IP (default `localhost`)",
                readBy: `${SGL}:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py#MooncakeStoreConfig.load_from_extra_config`,
            },
            {
                what: "environment path (store service, SGLang without extra config): MOONCAKE_LOCAL_HOSTNAME = the pod IP (default `localhost`)",
                readBy: `${MC}:mooncake-wheel/mooncake/mooncake_config.py#MooncakeConfig.load_from_env`,
            },
        ],
        peers: [
            {
                what: "the master and the store handshake with the advertised address; `localhost` is refused, the warm-up write fails and the worker never starts",
                readBy: `${MC}:mooncake-transfer-engine/src/transfer_engine_impl.cpp`,
            },
        ],
        otherwise: "refused",
        source: `${SGL}:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py`,
    },
    {
        id: "shared-kv-cache",
        feature: "Dynamo frontend shared KV cache (`--shared-cache-type hicache`): routing credit for prefixes in the Mooncake pool",
        component: "dynamo-frontend",
        requires: [
            {
                what: "`--router-mode kv` on the frontend",
                readBy: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            },
            {
                what: "DYN_MOONCAKE_KV_EVENTS_ENDPOINT on the frontend = the master's KV-event PUB endpoint (workers may advertise it as a fallback)",
                readBy: `${D}:lib/llm/src/discovery/model_manager.rs#hicache_cache_for`,
            },
            {
                what: "a Mooncake master running `--enable_kv_events` with `--kv_events_bind_endpoint` on that port",
                readBy: `${MC}:mooncake-store/src/master.cpp`,
            },
            {
                what: "Mooncake >= v0.3.12 in the master's image (the KV-event publisher of kvcache-ai/Mooncake PR #2214; gflags refuses the flag earlier)",
                readBy: `${MC}:mooncake-store/src/master.cpp`,
            },
            {
                what: "SGLang workers with `--hicache-storage-backend mooncake` (they publish `sglang_hicache_mooncake` metadata), SGLang >= 0.5.11",
                readBy: `${D}:components/src/dynamo/sglang/register.py`,
            },
        ],
        otherwise: "inert",
        source: `${D}:docs/fern/pages/developer-guide/knowledge-base/modular-components/backends/sglang/hicache.md`,
    },
    {
        id: "kv-events",
        feature: "KV-aware routing from worker KV events",
        component: "dynamo-frontend",
        requires: [
            {
                what: "`--router-mode kv` on the frontend, KV events on (not `--no-router-kv-events`)",
                readBy: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            },
            {
                what: "vLLM: `--kv-events-config` with `enable_kv_cache_events: true` and a ZMQ publisher",
                readBy: `${VLLM}:vllm/config/kv_events.py`,
            },
            { what: "SGLang: `--kv-events-config` with a ZMQ publisher", readBy: `${SGL}:python/sglang/srt/server_args.py` },
            { what: "TRT-LLM: `--publish-kv-events` (Dynamo >= 1.3.0)", readBy: `${D}:components/src/dynamo/trtllm/backend_args.py` },
            {
                what: "whose events the router needs: prefill and aggregated workers always (KvEventSourceRequirement::CacheAwareRouting); P/D decode workers only under `--router-conditional-disagg` or DYN_ROUTER_CONDITIONAL_DISAGG (ConditionalDisaggDecodeCache), otherwise NotRequired and the router does not subscribe to them",
                readBy: `${D}:lib/llm/src/kv_router.rs#KvEventSourceRequirement.derive`,
            },
        ],
        otherwise: "inert",
        source: `${D}:docs/fern/pages/developer-guide/knowledge-base/modular-components/router/offloading-support-matrix.md`,
        note: "the product renders worker KV events on prefill and aggregated workers only: without conditional disaggregation (no product setting turns it on, no frontend renders --router-conditional-disagg or DYN_ROUTER_CONDITIONAL_DISAGG) the router never subscribes to a decode worker's events, so a vLLM/SGLang `--kv-events-config` there would be read and inert; upstream-check (`decodeKvEventsRule`) and the pack (dgd-kv-router-events) refuse it. TRT-LLM decode workers keep `--publish-kv-events`: the one switch also turns on the worker's metrics (components/src/dynamo/trtllm/workers/llm_worker.py publish_events_and_metrics), so it is not inert there. An SGLang decode worker on the chunk cache publishes none even then (`sglang-decode-kv-events`)",
    },
    {
        id: "sglang-decode-kv-events",
        feature: "KV events from an SGLang P/D decode worker",
        component: "sglang",
        requires: [
            {
                what: '`--disaggregation-decode-enable-radix-cache`: without it SGLang\'s P/D hook sets disable_radix_cache=True ("KV cache is forced as chunk cache for decode server") and the chunk cache publishes no KV events, so `--kv-events-config` is read but inert',
                readBy: `${SGL}:python/sglang/srt/arg_groups/pd_disaggregation_hook.py#handle_pd_disaggregation`,
            },
            {
                what: "Dynamo's SGLang worker derives use_kv_events from `--kv-events-config` alone and advertises kv_event_publishing_enabled in its runtime config whatever the cache, so a KV router that needs the worker's events (`--router-conditional-disagg`) waits for a source that never speaks",
                readBy: `${D}:components/src/dynamo/sglang/register.py#get_runtime_config`,
            },
        ],
        peers: [
            {
                what: "the KV router needs a decode worker's events only under `--router-conditional-disagg` (KvEventSourceRequirement::ConditionalDisaggDecodeCache); then an advertised but silent source is reported PublisherDisabled/missing and the decode cache state stays empty",
                readBy: `${D}:lib/llm/src/kv_router/indexer/recovery/source_health.rs`,
            },
        ],
        otherwise: "inert",
        source: `${SGL}:python/sglang/srt/arg_groups/pd_disaggregation_hook.py`,
        note: "read in the stored sgl-project/sglang pd_disaggregation_hook.py; Dynamo: components/src/dynamo/sglang/args.py (use_kv_events from kv_events_config.publisher). lib/dgd.ts renders no --kv-events-config on an SGLang decode worker without the radix-cache flag; upstream-check (`sglangDecodeKvEventsRule`) and the pack (dgd-kv-router-events) refuse the pairing",
    },
    {
        id: "planner-signals",
        feature: "Dynamo Planner load-based scaling",
        component: "dynamo-planner",
        requires: [
            {
                what: "forward-pass metrics (FPM: per-worker queued prefill tokens, KV usage) from every scaled prefill/decode/aggregated worker, read over the event plane by RuntimeFpmProvider (subscribed per role; not Prometheus)",
                readBy: `${D}:components/src/dynamo/planner/environment/metrics_provider/runtime_provider.py#RuntimeFpmProvider`,
            },
            {
                what: "the worker emits FPM only when DYN_FORWARDPASS_METRIC_PORT is set (or --fpm-trace/DYN_FPM_TRACE): vLLM `envs.is_set`, SGLang a non-empty value",
                readBy: `${D}:components/src/dynamo/vllm/args.py#_forward_pass_metrics_enabled`,
            },
            {
                what: "SGLang workers: the same switch (`_forward_pass_metrics_source`)",
                readBy: `${D}:components/src/dynamo/sglang/args.py#_forward_pass_metrics_source`,
            },
            {
                what: "the operator injects DYN_FORWARDPASS_METRIC_PORT=20380 (DynamoFPMBasePort) into every worker's main container; a podTemplate env of the same name replaces it (empty: no FPM, no load scaling)",
                readBy: `${D}:deploy/operator/internal/dynamo/component_worker.go`,
            },
            {
                what: "PROMETHEUS_ENDPOINT reaching a Prometheus that scrapes the frontend: the KV hit rate `dynamo_component_router_kv_hit_rate` (exposed by a `--router-mode kv` frontend), filtered by `dynamo_namespace` = the Planner's namespace with dashes as underscores, discounts prefill load; no data = no discount",
                readBy: `${D}:components/src/dynamo/planner/monitoring/traffic_metrics.py#get_avg_kv_hit_rate`,
            },
            {
                what: "vLLM workers with speculative decoding scraped: `vllm:spec_decode_num_accepted_tokens_total` / `vllm:spec_decode_num_drafts_total` give the accept length (no data = no discount)",
                readBy: `${D}:components/src/dynamo/planner/monitoring/traffic_metrics.py#get_avg_spec_decode_accept_length`,
            },
        ],
        otherwise: "inert",
        source: `${D}:components/src/dynamo/planner/environment/metrics_provider/runtime_provider.py`,
        note: "load scaling runs on FPM alone; Prometheus only refines it (KV hit rate, spec-decode accept length; the traffic observations of throughput scaling, which lib/dgd.ts plannerConfig turns off). Where the traffic observations are collected: components/src/dynamo/planner/plugins/orchestrator/engine_adapter.py. The product renders no DYN_FORWARDPASS_METRIC_PORT (the operator's value stands); upstream-check and the pack (dgd-planner-scaling) refuse one on a worker of a graph with a Planner",
    },
    {
        id: "planner-scale-up-headroom",
        feature: "Dynamo Planner scale-up (one more prefill, decode or aggregated worker)",
        component: "dynamo-planner",
        requires: [
            {
                what: "`max_gpu_budget` at least the graph's GPUs at its replicas (each pool at least `min_endpoint`) plus the largest pool's GPUs per worker: each pool's scale-up proposes `num_workers + 1` of it (disaggregated: prefill and decode decide independently, and one decision may move both)",
                readBy: `${D}:components/src/dynamo/planner/core/load_scaling.py`,
            },
            {
                what: "the proposal's total GPUs within `max_gpu_budget`, a hard ceiling never relaxed (`proportional_clamp_pair` from both pools' GPUs per worker: prefill scaled down proportionally, decode given the GPUs left, so with both pools asking and room for one, decode grows; `proportional_clamp_single` for agg)",
                readBy: `${D}:components/src/dynamo/planner/core/budget.py`,
            },
        ],
        otherwise: "inert",
        source: `${D}:components/src/dynamo/planner/core/budget.py`,
        note: "below it the scale-up is clamped back every decision (the Planner only scales down); upstream/planner.ts plannerScaleUpNeed; refused at the hub (config/hub-checks.ts) and on the rendered graph (upstream/check/planner-config.ts)",
    },
    {
        id: "gpudirect-dmabuf",
        feature: "GPUDirect RDMA through DMA-BUF",
        component: "gpu-operator",
        requires: [
            {
                what: "`driver.kernelModuleType: open` (open GPU kernel modules); nothing under driver.rdma but `enabled: false`",
                readBy: `${GPUOP}:deployments/gpu-operator/values.yaml`,
            },
        ],
        otherwise: "inert",
        source: `${GPUOP}:deployments/gpu-operator/values.yaml`,
    },
    {
        id: "gpu-operator-host-mofed",
        feature: "GPU Operator `driver.rdma.useHostMofed` (nvidia-peermem against host-installed MOFED)",
        component: "gpu-operator",
        requires: [
            {
                what: "`driver.rdma.enabled: true`: the operator reads useHostMofed only through IsHostMOFED(), which is false unless GPUDirect RDMA (peermem) is enabled",
                readBy: `${GPUOP}:api/nvidia/v1/clusterpolicy_types.go#IsHostMOFED`,
            },
        ],
        otherwise: "inert",
        source: `${GPUOP}:controllers/object_controls.go#transformPeerMemoryContainer`,
    },
    {
        id: "ipoib-rail-networks",
        feature:
            "an IP on an InfiniBand rail inside a pod (IPoIBNetwork + nv-ipam IPPool, Multus and IPoIB CNI from NicClusterPolicy.spec.secondaryNetwork), which only RDMA CM needs",
        component: "network-operator",
        requires: [
            {
                what: "the operator renders each IPoIBNetwork as a NetworkAttachmentDefinition of the same name in `spec.networkNamespace` (`default` when empty), CNI `type: ipoib` on `spec.master` with `spec.ipam`",
                readBy: `${NETOP}:pkg/state/state_ipoib_network.go#getManifestObjects`,
            },
            {
                what: "the pod's `k8s.v1.cni.cncf.io/networks` annotation names that NAD (`<networkNamespace>/<name>`; a bare name is looked up in the pod's own namespace); without the annotation Multus sets up the cluster network only",
                readBy: "k8snetworkplumbingwg/multus-cni@v4.3.0:pkg/k8sclient/k8sclient.go#GetPodNetwork",
            },
            {
                what: "NicClusterPolicy `spec.secondaryNetwork.multus` and `.ipoib` (the Multus thin-plugin and IPoIB CNI DaemonSets) and `spec.nvIpam` for `ipam.type: nv-ipam` with an IPPool of `poolName`",
                readBy: `${NETOP}:manifests/state-multus-cni/0050-multus-ds.yml`,
            },
        ],
        peers: [
            {
                what: "the process uses RDMA CM (rdma_cm resolves the peer's IP to a GID through the netdev's neighbour table); UCX reads UCX_SOCKADDR_TLS_PRIORITY (rdmacm) only for endpoints created from a socket address, and NIXL creates its endpoints from UCX worker addresses (UCP_EP_PARAM_FIELD_REMOTE_ADDRESS), so NIXL over UCX verbs never needs it",
                readBy: "ai-dynamo/nixl@v1.3.2:src/plugins/ucx/ucx_utils.cpp",
            },
            {
                what: "Mooncake's transfer engine needs no rail IP either: RDMA endpoints exchange LID, GID and QP numbers over its TCP handshake to MOONCAKE_LOCAL_HOSTNAME (the pod IP) and connect with verbs (no rdma_cm in the transfer engine)",
                readBy: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-transfer-engine/src/transport/rdma_transport/rdma_endpoint.cpp",
            },
            {
                what: "NCCL's IB transport neither: ncclIbDevInfo (LID, GID, QPN) goes over NCCL's bootstrap socket on the pod network (no rdma_cm in NCCL's sources)",
                readBy: "NVIDIA/nccl@v2.28.3-1:src/transport/net_ib.cc",
            },
        ],
        otherwise: "inert",
        source: `${NETOP}:manifests/state-ipoib-network/0010-ipoib-net-cr.yaml`,
        note: "The platform renders the rail networks only with `platform:backend.railNetworks: true` (components/spoke/BackendFabric.ts); the pack's rdma-cm-rail-networks refuses an RDMA CM workload whose annotation does not attach, in the NAD's namespace, a network on each of its rails' netdevs.",
    },
    {
        id: "single-nfd",
        feature: "node-feature-discovery labelling the GPU and NIC nodes",
        component: "gpu-operator",
        requires: [
            {
                what: "exactly one NFD deployment per cluster: the Network Operator's (`nfd.enabled`, default true) labels PCI classes 0300/0302 by vendor, giving `feature.node.kubernetes.io/pci-10de.present`; the GPU Operator's own (`nfd.enabled`, default true) must then be off",
                readBy: `${NETOP}:deployment/network-operator/values.yaml`,
            },
            {
                what: "the GPU Operator selects GPU nodes by `feature.node.kubernetes.io/pci-10de.present`",
                readBy: `${GPUOP}:controllers/state_manager.go`,
            },
        ],
        otherwise: "refused",
        source: `${GPUOP}:deployments/gpu-operator/values.yaml`,
    },
    {
        id: "kvbm-tiers",
        feature: "KV offload to host memory and local NVMe with Dynamo KVBM (vLLM DynamoConnector)",
        component: "kvbm",
        requires: [
            {
                what: "`--kv-transfer-config` with kv_connector DynamoConnector and kv_connector_module_path kvbm.vllm_integration.connector",
                readBy: `${D}:lib/bindings/kvbm/python/kvbm/vllm_integration/connector/dynamo_connector.py`,
            },
            {
                what: "DYN_KVBM_CPU_CACHE_GB > 0 (the host tier; without any tier the leader refuses)",
                readBy: `${D}:lib/bindings/kvbm/src/block_manager/distributed/leader.rs`,
            },
            {
                what: "with DYN_KVBM_DISK_CACHE_GB: DYN_KVBM_DISK_CACHE_DIR on a volume of the node's local NVMe (default /tmp/ in the container layer)",
                readBy: `${D}:lib/llm/src/block_manager/storage/disk.rs`,
            },
            {
                what: "with DYN_KVBM_DISK_CACHE_GB: DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER=true, else only blocks with frequency >= 2 go host -> disk and a session's KV seen once never reaches NVMe (default false)",
                readBy: `${D}:lib/bindings/kvbm/src/block_manager.rs`,
            },
            {
                what: "a memory request covering the pinned host tier, so the scheduler does not pack the node past its DRAM",
                readBy: `${D}:examples/backends/vllm/deploy/agg_kvbm.yaml`,
            },
        ],
        otherwise: "inert",
        source: `${D}:docs/fern/pages/reference/components/kvbm-configuration.mdx`,
        note: "tiers are per worker pod and pod-local (upstream/kvbm.ts); sizes against the node: lib/serving.ts nodeHostBudget",
    },
    {
        id: "model-cache",
        feature: "per-node model cache on local NVMe (weights outside the worker's lifecycle)",
        component: "huggingface-hub",
        requires: [
            {
                what: "HF_HOME on the worker pointing at a volume of the node's local NVMe that the pre-stage DaemonSet fills",
                readBy: "huggingface/huggingface_hub@03333b689b5a2dee604676791c0792ede6246a31:src/huggingface_hub/constants.py#HF_HOME",
            },
        ],
        peers: [
            {
                what: "a DaemonSet on the same pool writing the same host path with the same HF_HOME (and pulling the worker image)",
                readBy: `${D}:docs/fern/pages/kubernetes/model-deployment/model-loading/model-caching.mdx`,
            },
        ],
        otherwise: "inert",
        source: `${D}:docs/fern/pages/kubernetes/model-deployment/model-loading/model-caching.mdx`,
        note: "a worker whose cache path nobody fills downloads the weights at start: the cold start the cache was for",
    },
    {
        id: "engine-priority",
        feature: `the platform's per-request priority (${PRIORITY_HEADER}, set by the auth decision) ordering each engine's queue`,
        component: "dynamo-frontend",
        requires: [
            {
                what: `the frontend copies \`${PRIORITY_HEADER}\` into \`nvext.agent_hints.priority\` (the header wins over the body), and the preprocessor hands it to the router (\`priority_jump = max(priority, 0)\` seconds) and to the worker as \`routing.priority\``,
                readBy: `${D}:lib/llm/src/protocols/common/extensions.rs`,
            },
            {
                what: "vLLM workers: `--scheduling-policy priority` (the default `fcfs` ignores the request priority); Dynamo's vLLM handler passes `-priority` (vLLM serves lower values first)",
                readBy: `${D}:components/src/dynamo/vllm/handlers.py`,
            },
            {
                what: "SGLang workers: `--enable-priority-scheduling`, accepted only with `--schedule-policy fcfs` or `lof` (asserted at start-up); Dynamo's SGLang handler passes the priority (negated under `--schedule-low-priority-values-first`)",
                readBy: `${D}:components/src/dynamo/sglang/request_handlers/handler_base.py`,
            },
            {
                what: "TRT-LLM workers: none that helps: the handler reads a top-level `priority` the frontend never sets and falls back to 0.5, so priorities are inert there",
                readBy: `${D}:components/src/dynamo/trtllm/request_handlers/handler_base.py`,
            },
        ],
        otherwise: "inert",
        source: `${D}:lib/llm/src/protocols/common/extensions.rs`,
        note: "SGLang flags: sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py (schedule_policy default fcfs, enable_priority_scheduling default false); vLLM: vllm-project/vllm@v0.28.0:vllm/config/scheduler.py (policy: fcfs | priority, default fcfs). The product renders the flags on every vLLM and SGLang worker and refuses TRT-LLM endpoints once a priority class is above the lowest (config/serving-policy.ts).",
    },
    {
        id: "router-priority",
        feature: "the KV router's pending queue ordered by strict tier (latency class) then priority",
        component: "dynamo-frontend",
        requires: [
            {
                what: "`--router-queue-threshold <fraction>` on a `--router-mode kv` frontend: unset (the default since #11599) the router never queues, so `strict_priority` and `priority_jump` order nothing",
                readBy: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
            },
            {
                what: "SGLang workers: `--max-prefill-tokens` (the per-step prefill window; lib/dgd.ts renders SGLang's H200 chunked prefill size, 8192): the threshold is `active prefill tokens > threshold x max_num_batched_tokens`, and Dynamo's SGLang worker publishes max_num_batched_tokens as `server_args.max_prefill_tokens or max_total_num_tokens`, so without it the denominator can be the whole KV pool and the queue (and every priority) almost never engages",
                readBy: `${D}:components/src/dynamo/sglang/capacity.py`,
            },
            {
                what: "the queue key is `(strict_priority, priority_jump - arrival offset)`, higher first (FcfsPolicy, the default `--router-queue-policy fcfs`)",
                readBy: `${D}:lib/kv-router/src/scheduling/policy.rs`,
            },
        ],
        otherwise: "inert",
        source: `${D}:components/src/dynamo/common/configuration/groups/kv_router_args.py`,
        note: "kv_router_args.py `--router-queue-threshold` help (L522-L536) and docs/fern/pages/developer-guide/knowledge-base/modular-components/router/configuration-and-tuning.md (L328-L331) state the SGLang fallback; the check refuses an SGLang worker without --max-prefill-tokens behind a queueing router",
    },
    {
        id: "cache-salt",
        feature: `tenant-bound KV isolation: the platform's cache salt (${SALT_HEADER}, set by the auth decision) in every prefix hash`,
        component: "dynamo-frontend",
        requires: [
            {
                what: `the frontend copies \`${SALT_HEADER}\` into \`nvext.cache_salt\` (the header wins over the body's), which becomes the router's \`cache_namespace\``,
                readBy: `${D}:lib/llm/src/protocols/common/extensions.rs`,
            },
            {
                what: "the KV router mixes `cache_namespace` into its block hashes (`compute_salt_hash`), so it never scores one scope's blocks for another",
                readBy: `${D}:lib/kv-router/src/protocols.rs`,
            },
            {
                what: "vLLM workers: Dynamo's handler sets the prompt's `cache_salt` (`_apply_nvext_cache_salt`), and vLLM adds it to the first block's hash, so every block hash of the chain differs per salt (the engine prefix cache; KV connectors that key by the request's block hashes inherit it)",
                readBy: `${D}:components/src/dynamo/vllm/handlers.py`,
            },
            {
                what: "SGLang workers: Dynamo 1.5.0's SGLang handler never passes the salt to SGLang, so the radix cache and HiCache/Mooncake pages are shared across salts",
                readBy: `${D}:components/src/dynamo/sglang/request_handlers/llm/decode_handler.py`,
            },
        ],
        otherwise: "inert",
        source: `${D}:lib/llm/src/protocols/common/extensions.rs`,
        note: `vLLM: vllm-project/vllm@v0.28.0:vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys (cache_salt on the block at token 0). TRT-LLM's handler reads the salt (request_cache_salt) but that its engine hashes it was not read here, so it is treated like SGLang (closed world). The product refuses an SGLang or TRT-LLM endpoint whose model is called by keys of more than one cache scope (hub: config/serving-policy.ts; render: DGD annotation ${CACHE_SCOPES_ANNOTATION}).`,
    },
];

/** What must hold for an exporter's series to exist, and where its pods are scraped. */
export interface ExporterFact {
    readonly exporter: Exporter;
    /** The pods that export it: the entry point of their main container (upstream/*.ts EntrypointFacts id) or a rendered label. */
    readonly pods: { readonly entrypoint?: string; readonly role?: readonly string[]; readonly labels?: Readonly<Record<string, string>> };
    /** The port is declared by the rendered container itself (our services), not added by an operator (DGD pods). */
    readonly portInSpec?: boolean;
    /** Container port name the series are served on (declared by the operator for DGD pods). */
    readonly port?: string;
    /** A flag without which nothing is exported (`--enable-metrics`), or that turns the export off (`--disable-log-stats`). */
    readonly needsFlag?: string;
    readonly forbidsFlag?: string;
    readonly source: Source;
}

export const exporterActivation: readonly ExporterFact[] = [
    {
        exporter: "dynamo-frontend",
        pods: { entrypoint: "dynamo.frontend", role: ["frontend"] },
        port: "http",
        source: `${D}:deploy/operator/internal/dynamo/component_frontend.go`,
    },
    {
        exporter: "dynamo-worker",
        pods: { role: ["prefill", "decode", "worker"] },
        port: "system",
        source: `${D}:deploy/operator/internal/dynamo/component_worker.go`,
    },
    {
        exporter: "vllm",
        pods: { entrypoint: "dynamo.vllm", role: ["prefill", "decode", "worker"] },
        port: "system",
        forbidsFlag: "--disable-log-stats",
        source: `${D}:components/src/dynamo/vllm/main.py`,
    },
    {
        exporter: "sglang",
        pods: { entrypoint: "dynamo.sglang", role: ["prefill", "decode", "worker"] },
        port: "system",
        needsFlag: "--enable-metrics",
        source: `${D}:components/src/dynamo/sglang/publisher.py`,
    },
    // This repository's services: their metrics are checked against the live registries in test/observability.test.ts.
    {
        exporter: "auth",
        pods: { labels: { "app.kubernetes.io/name": "platform-auth" } },
        port: "ops",
        portInSpec: true,
        source: "inference-platform/platform@0.1.0:services/auth/metrics.ts",
    },
    {
        exporter: "metering",
        pods: { labels: { "app.kubernetes.io/name": "platform-metering" } },
        port: "http",
        portInSpec: true,
        source: "inference-platform/platform@0.1.0:services/metering/service.ts",
    },
    // `--enable_metric_reporting` defaults to true; the port is `--metrics_port` (lib/mooncake.ts names it `metrics`).
    {
        exporter: "mooncake-master",
        pods: { labels: { "app.kubernetes.io/name": "mooncake-master" } },
        port: "metrics",
        portInSpec: true,
        source: `${MC}:mooncake-store/src/master.cpp`,
    },
];

/**
 * The Prometheus the product configures: kube-prometheus-stack's `Prometheus` selects PodMonitors and PrometheusRules
 * by `release: <helm release>` when `*SelectorNilUsesHelmValues` is true (the default), in every namespace
 * (`podMonitorNamespaceSelector: {}`).
 */
export const prometheusSelection = {
    podMonitorSelector: "matchLabels release: <release name> (podMonitorSelectorNilUsesHelmValues: true)",
    ruleSelector: "matchLabels release: <release name> (ruleSelectorNilUsesHelmValues: true)",
    namespaceSelector: "{} (all namespaces)",
    source: "prometheus-community/helm-charts@0027117e971e8694d1b65b205f37d40f2b5b5402:charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml" as Source,
};

/**
 * kube-prometheus-stack's `kube-prometheus-stack.fullname` for a release without name/fullname overrides: the release
 * name when it contains the chart name, else `<release>-kube-prometheus-stack`, truncated to 26 characters and trimmed
 * of a trailing `-`. Its Prometheus is served by the Service `<fullname>-prometheus` (port `prometheus.service.port`,
 * 9090) in the release namespace; a Prometheus that selects `release: A` is not the Prometheus of release B.
 */
export function kubePrometheusStackPrometheus(release: string, namespace: string): { service: string; host: string; port: number } {
    const name = "kube-prometheus-stack";
    const fullname = (release.includes(name) ? release : `${release}-${name}`).slice(0, 26).replace(/-+$/, "");
    return { service: `${fullname}-prometheus`, host: `${fullname}-prometheus.${namespace}.svc.cluster.local`, port: 9090 };
}

/** Where `kubePrometheusStackPrometheus` is read. */
export const kubePrometheusStackServiceSources: readonly Source[] = [
    "prometheus-community/helm-charts@082861babe110452fca71989c1e410bdec966170:charts/kube-prometheus-stack/templates/_helpers.tpl" as Source,
    "prometheus-community/helm-charts@00a2982a4a3e666b1ee06460f154ba08a3c61ec5:charts/kube-prometheus-stack/templates/prometheus/service.yaml" as Source,
];

/** Finds an activation fact by id. @throws Error when there is none (a rule naming a fact that does not exist). */
export function activationFact(id: string): ActivationFact {
    const f = activationFacts.find((x) => x.id === id);
    if (!f) throw new Error(`no activation fact ${id} (upstream/activation.ts)`);
    return f;
}
