import { KVBM_AGG_EXAMPLE, KVBM_BLOCK_MANAGER, KVBM_DISK, KVBM_LEADER, KVBM_VLLM_CONNECTOR } from "./kvbm";
import type { Source } from "./types";

/**
 * Closed world for KV transport (upstream rule upstream/check/kv-closed-world.ts, run by npm run upstream-check and
 * by the policy pack). On every container that moves KV (prefill, decode and aggregated workers, Mooncake store and
 * master), every env var, flag and JSON key of a family that can change KV transport or GPU-memory registration is
 * either listed here with the values that keep KV on RDMA with GPUDirect, or the deployment is refused ("the pack
 * cannot prove `<name>=<value>` keeps KV on RDMA"). A knob added upstream is in its family by prefix (or because the
 * engine's own settings module is the family: every `VLLM_*` of vllm/envs.py, every `SGLANG_*` of
 * sglang/srt/environ.py) and is refused until someone reads its effect and records it here.
 *
 * A reviewed way out: a stack file declares an exception (name, value, where it applies, why, until when) on the
 * endpoint (config/endpoint.ts `kvExceptions`); the render annotates the graph with it, the render report lists it,
 * and the rule accepts exactly that name and value on that component until the date, never after.
 */

/** A family of KV-transport settings. */
export type KvFamily = "ucx" | "nixl" | "libfabric" | "nccl" | "mooncake" | "vllm" | "sglang" | "trtllm" | "kvbm" | "cuda";

/** Env var families, recognised by prefix (or exact name). */
export const kvEnvFamilies: ReadonlyArray<{ family: KvFamily; match: RegExp; source: Source }> = [
    { family: "ucx", match: /^UCX_/, source: "openucx/ucx@v1.21.0:src/ucs/config/parser.c" },
    { family: "nixl", match: /^NIXL_/, source: "ai-dynamo/nixl@v1.3.2:src/plugins/ucx/ucx_backend.cpp" },
    { family: "libfabric", match: /^FI_/, source: "ofiwg/libfabric@v2.4.0:src/fabric.c" },
    { family: "nccl", match: /^NCCL_/, source: "NVIDIA/nccl@v2.28.3-1:src/misc/param.cc" },
    { family: "mooncake", match: /^(MC_|MOONCAKE_)/, source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-transfer-engine/src/config.cpp" },
    { family: "vllm", match: /^VLLM_/, source: "vllm-project/vllm@v0.28.0:vllm/envs.py" },
    { family: "sglang", match: /^SGLANG_|^HOST_IP$/, source: "sgl-project/sglang@v0.5.18:python/sglang/srt/environ.py" },
    {
        family: "trtllm",
        match: /^(TRTLLM_|TLLM_)/,
        source: "NVIDIA/TensorRT-LLM@v1.3.0rc25:tensorrt_llm/_torch/pyexecutor/kv_cache_transceiver.py",
    },
    {
        family: "kvbm",
        match: /^(DYN_KVBM_|KVBM_)/,
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/block_manager/distributed/utils.rs",
    },
    {
        family: "cuda",
        match: /^(CUDA_|PYTORCH_CUDA_ALLOC_CONF$|NVIDIA_VISIBLE_DEVICES$)/,
        source: "vllm-project/vllm@v0.28.0:vllm/envs.py#CUDA_VISIBLE_DEVICES",
    },
];

/** Flags of KV-moving entry points in a family: KV transfer, disaggregation, cache storage, hierarchical cache. */
export const kvFlagFamily: { match: RegExp; source: Source } = {
    match: /^--(kv-|disaggregation-|hicache-|enable-hierarchical-cache|enable-lmcache|cache-transceiver|mooncake|nixl|protocol$|device_name$|global_segment_size$|local_buffer_size$|metadata_server$|master_server_address$)/,
    source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/vllm/backend_args.py",
};

/** Which values keep KV on RDMA: a list, a pattern, or any value (with why the value cannot move KV off RDMA). */
export interface KvSafe {
    readonly values?: readonly string[];
    readonly pattern?: RegExp;
    /** Any value is safe; says why (an address, a port, a size, a path whose content is checked itself). */
    readonly any?: string;
    /**
     * `values` compare case-insensitively, as the reader does (UCX bool, ternary and enum options:
     * openucx/ucx@v1.21.0:src/ucs/config/parser.c `ucs_config_sscanf_bool`/`_ternary` use strcasecmp for y/yes/n/no/
     * try/maybe, strcmp for 1/0; `ucs_config_sscanf_enum` finds the value with strcasecmp).
     */
    readonly caseInsensitive?: true;
}

/** One known setting: env var, flag, or JSON key (`<flag or env or file>.<dotted key>`). */
export interface KvSetting {
    readonly name: string;
    readonly safe: KvSafe;
    readonly source: Source;
    readonly note?: string;
}

const UCX: Source = "openucx/ucx@v1.21.0:src/ucp/core/ucp_context.c";
const EFA: Source = "ofiwg/libfabric@v2.4.0:prov/efa/src/efa_env.c#efa_env_param_get";
const NCCL_IB: Source = "NVIDIA/nccl@v2.28.3-1:src/transport/net_ib.cc";
const MC_CFG: Source = "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/mooncake/mooncake_config.py#MooncakeConfig.load_from_env";
const MC_TE: Source = "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-transfer-engine/src/config.cpp";
const VLLM_KVT: Source = "vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py";
const VLLM_NIXL: Source = "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py";
const SGL_ENV: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/environ.py";
const SGL_SA: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py";
const MC_STORE_CFG: Source =
    "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py#MooncakeStoreConfig";

/** A comma-separated list of HCA names (`mlx5_0`, optional `:port`) or IB/EFA netdev names (`ibp9s0f0`, `rdmap16s27`). */
const DEVICE_LIST = /^[A-Za-z][A-Za-z0-9_]*(:\d+)?(,[A-Za-z][A-Za-z0-9_]*(:\d+)?)*$/;
/** NIXL's UCX `device_list`: device names without a port (NIXL appends `:1`), separated by `", "` as NIXL splits them. */
const NIXL_DEVICE_LIST = /^[A-Za-z][A-Za-z0-9_]*(, [A-Za-z][A-Za-z0-9_]*)*$/;
const PCI = "[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]";
const UINT = /^\d+$/;
const TRT_ARGS: Source = "NVIDIA/TensorRT-LLM@v1.3.0rc25:tensorrt_llm/llmapi/llm_args.py#TorchLlmArgs";
const SIZE = /^\d+(\.\d+)?\s*([kKmMgGtT][bB]?|[kKmMgGtT]i[bB]?)?$/;
/** UCX transports that are RDMA or GPU-local copies; at least one RDMA transport, never tcp/sockets. */
const UCX_TLS_RDMA =
    /^(?=.*\b(rc|rc_x|rc_v|rc_mlx5|dc|dc_x|dc_mlx5)\b)(\^?)?(rc|rc_x|rc_v|rc_mlx5|dc|dc_x|dc_mlx5|ud|ud_x|ud_v|ud_mlx5|cuda_copy|cuda_ipc|gdr_copy|self|sm|shm|cma|knem|xpmem|sysv|posix)(,(rc|rc_x|rc_v|rc_mlx5|dc|dc_x|dc_mlx5|ud|ud_x|ud_v|ud_mlx5|cuda_copy|cuda_ipc|gdr_copy|self|sm|shm|cma|knem|xpmem|sysv|posix))*$/;

/**
 * `UCX_NET_DEVICES` is inert on a container whose NIXL UCX backend is given a `device_list` (SGLang's
 * `SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS.device_list` with the UCX backend): NIXL builds `<dev>:1,...` from the
 * list and sets UCX's NET_DEVICES with `config.modifyAlways` (ai-dynamo/nixl@v1.4.0:src/plugins/ucx/ucx_utils.cpp
 * `nixlUcxContext`), which calls `ucp_config_modify` without looking at the environment, unlike `config.modify`, which
 * yields to a `UCX_*` variable already set (src/plugins/ucx/config.cpp). So the list NIXL hands UCX is the device
 * restriction, and a `UCX_NET_DEVICES` beside it only misleads a reader: the KV closed world refuses it there
 * (upstream/check/kv-closed-world.ts), and the product does not render it (lib/nixl.ts `nixl-device-list`).
 */
export const ucxNetDevicesInertWithDeviceList: { readonly source: Source; readonly carrier: string; readonly key: string } = {
    source: "ai-dynamo/nixl@v1.4.0:src/plugins/ucx/ucx_utils.cpp",
    carrier: "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS",
    key: "device_list",
};

/** The known-safe settings. Keys are exact names; JSON keys are `<carrier>.<dotted path>` (arrays of connectors by `[]`). */
export const kvKnownSettings: readonly KvSetting[] = [
    // UCX (NIXL's UCX backend, NCCL's UCX plugin).
    {
        name: "UCX_TLS",
        safe: { pattern: UCX_TLS_RDMA },
        source: UCX,
        note: "an RDMA transport (rc/dc) and GPU copies; tcp or a list without rc/dc moves KV over sockets",
    },
    {
        name: "UCX_NET_DEVICES",
        safe: { pattern: DEVICE_LIST },
        source: UCX,
        note: "the NIC list; which NICs is checked against the rail table by the pack's rail rules. Inert where the NIXL agent is given a UCX device_list (ucxNetDevicesInertWithDeviceList): refused there",
    },
    // Rendezvous: which protocol (and from which size) UCX uses for tag and active-message sends. NIXL moves KV by RMA
    // (nixlUcxEp::read/write = ucp_get_nbx/ucp_put_nbx, ai-dynamo/nixl@v1.3.2 and @v1.4.0:src/plugins/ucx/ucx_utils.cpp),
    // which UCX serves with its put/get offload protocols (zero copy above UCX_ZCOPY_THRESH, src/ucp/rma/put_offload.c);
    // NIXL's only AM send (notifications, src/plugins/ucx/ucx_backend.cpp) passes UCP_AM_SEND_FLAG_EAGER, which rules
    // rendezvous out (src/ucp/am/rndv.c ucp_am_rndv_rts_probe). So no value of these moves KV off RDMA; they are inert for
    // NIXL and the product renders neither. Values UCX rejects at ucp_config_read stay unproven.
    {
        name: "UCX_RNDV_SCHEME",
        safe: { values: ["auto", "get_zcopy", "put_zcopy", "get_ppln", "put_ppln", "am", "rkey_ptr"], caseInsensitive: true },
        source: `${UCX}#ucp_rndv_modes`,
        note: "rendezvous scheme of tag/AM sends; not NIXL's KV path (RMA put/get) nor its notifications (eager AM): inert for NIXL, not rendered",
    },
    {
        name: "UCX_RNDV_THRESH",
        safe: { pattern: /^(\d+[kKmMgG]?[bB]?|auto|inf)$/ },
        source: UCX,
        note: "eager-to-rendezvous switch of tag/AM sends; inert for NIXL (RMA KV path, eager-forced notifications); NIXL sets inf itself when unset (src/plugins/ucx/ucx_utils.cpp config.modify); not rendered",
    },
    {
        name: "UCX_PROTO_EMULATION_ENABLE",
        safe: { values: ["n", "no", "0", "off", "false"] },
        source: "openucx/ucx@v1.21.0:src/ucp/proto/proto_init.c",
        note: "emulation makes RDMA protocols out of copies through host memory",
    },
    {
        name: "UCX_IB_IS_GLOBAL",
        safe: { pattern: /^([yY]|[yY][eE][sS]|on|1)$/ },
        source: "openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c#uct_ib_iface_config_table",
        note: "the true spellings of ucs_config_sscanf_bool (y/yes in any case, on, 1): global (GRH) addressing on InfiniBand; n (the default) leaves an IB port with a link-local or site-local subnet prefix LID-only (upstream/libraries.ts ucx)",
    },
    {
        name: "UCX_IB_ADDR_TYPE",
        safe: { values: ["ib_global", "ib_site_local"], caseInsensitive: true },
        source: "openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c#uct_ib_iface_config_table",
        note: "deprecated spelling of UCX_IB_IS_GLOBAL=y: only these two values force global addressing; auto, ib_local and eth force nothing on InfiniBand (LID-only with a link-local subnet prefix), so they are not proven (upstream/libraries.ts ucx)",
    },
    {
        name: "UCX_IB_GPU_DIRECT_RDMA",
        safe: { values: ["yes", "y", "1", "try", "maybe"], caseInsensitive: true },
        source: "openucx/ucx@v1.21.0:src/uct/ib/base/ib_md.c",
        note: "UCS_CONFIG_TYPE_TERNARY (ucs/config/parser.c ucs_config_sscanf_ternary: try/maybe in any case, else the bool parser, ucxBool in upstream/libraries.ts): no turns GPUDirect off (KV staged through host memory); the bool parser takes on and 1 only in lower case, so this list keeps to the case-free spellings and on is refused though UCX reads it as yes",
    },
    {
        name: "UCX_IB_GID_INDEX",
        safe: { pattern: UINT },
        source: "openucx/ucx@v1.21.0:src/uct/ib/base/ib_md.c#uct_ib_md_config_table",
        note: "RoCE GID selection",
    },
    {
        name: "UCX_SOCKADDR_TLS_PRIORITY",
        safe: { values: ["rdmacm"] },
        source: "openucx/ucx@v1.21.0:src/ucp/core/ucp_context.c",
        note: "connection setup over RDMA CM for client/server endpoints (NIXL's worker-address endpoints never read it, upstream/libraries.ts ucx); rdma-cm-rail-networks checks the rail networks it needs",
    },
    { name: "UCX_MAX_HCA_PER_GPU", safe: { pattern: /^[1-9]\d*$/ }, source: UCX },
    {
        name: "UCX_RCACHE_MAX_UNRELEASED",
        safe: { pattern: /^(\d+[kKmMgG]?[bB]?|inf|auto)$/ },
        source: "openucx/ucx@v1.21.0:src/ucs/memory/rcache.c",
    },
    // libfabric / EFA.
    {
        name: "FI_PROVIDER",
        safe: { values: ["efa"] },
        source: "ofiwg/libfabric@v2.4.0:src/fabric.c",
        note: "only the EFA provider; tcp/sockets/shm are not RDMA",
    },
    {
        name: "FI_EFA_USE_DEVICE_RDMA",
        safe: { values: ["1", "true", "yes"] },
        source: EFA,
        note: "0 disables device RDMA reads (KV copied through host memory)",
    },
    {
        name: "FI_EFA_ENABLE_SHM_TRANSFER",
        safe: { values: ["0", "false", "no"] },
        source: EFA,
        note: "the shm provider moves intra-node traffic through host memory",
    },
    { name: "FI_EFA_USE_HUGE_PAGE", safe: { values: ["0", "1", "true", "false", "yes", "no"] }, source: EFA, note: "bounce buffers only" },
    { name: "FI_EFA_FORK_SAFE", safe: { values: ["0", "1", "true", "false", "yes", "no"] }, source: EFA },
    // NCCL (collectives inside a worker's TP group).
    {
        name: "NCCL_NET",
        safe: { values: ["IB", "Libfabric", "AWS Libfabric", "aws-ofi-nccl"] },
        source: "NVIDIA/nccl@v2.28.3-1:src/plugin/net.cc",
        note: "Socket is TCP",
    },
    { name: "NCCL_IB_DISABLE", safe: { values: ["0"] }, source: NCCL_IB },
    { name: "NCCL_IB_HCA", safe: { pattern: /^[=^]?[A-Za-z][A-Za-z0-9_]*(:\d+)?(,[A-Za-z][A-Za-z0-9_]*(:\d+)?)*$/ }, source: NCCL_IB },
    {
        name: "NCCL_NET_GDR_LEVEL",
        safe: { values: ["SYS", "PHB", "PXB", "PIX", "NODE", "5", "4", "3", "2", "1"] },
        source: "NVIDIA/nccl@v2.28.3-1:src/graph/paths.cc",
        note: "LOC (0) disables GPUDirect RDMA",
    },
    // Mooncake transfer engine and store.
    {
        name: "MC_FORCE_HCA",
        safe: { values: ["1", "true"] },
        source: `${MC_TE}`,
        note: "installs RDMA even where topology discovery found no HCA, instead of TCP",
    },
    { name: "MC_ENABLE_DEST_DEVICE_AFFINITY", safe: { values: ["0", "1", "true", "false"] }, source: MC_TE },
    { name: "MC_GID_INDEX", safe: { pattern: UINT }, source: MC_TE },
    { name: "MC_LOG_LEVEL", safe: { any: "log verbosity only" }, source: MC_TE },
    { name: "MOONCAKE_PROTOCOL", safe: { values: ["rdma", "efa"] }, source: MC_CFG, note: "tcp is the default: a silent TCP pool" },
    { name: "MOONCAKE_DEVICE", safe: { pattern: DEVICE_LIST }, source: MC_CFG },
    { name: "MOONCAKE_CONFIG_PATH", safe: { any: "a path; the JSON file it names is checked key by key (mooncake.json)" }, source: MC_CFG },
    { name: "MOONCAKE_MASTER", safe: { any: "the master's address (control plane)" }, source: MC_CFG },
    {
        name: "MOONCAKE_LOCAL_HOSTNAME",
        safe: { any: "the address peers are told; routability is checked by pd-kv-load-fails-loudly" },
        source: MC_CFG,
    },
    { name: "MOONCAKE_TE_META_DATA_SERVER", safe: { any: "metadata exchange endpoint (control plane)" }, source: MC_CFG },
    { name: "MOONCAKE_GLOBAL_SEGMENT_SIZE", safe: { pattern: SIZE }, source: MC_CFG },
    { name: "MOONCAKE_LOCAL_BUFFER_SIZE", safe: { pattern: SIZE }, source: MC_CFG },
    { name: "MOONCAKE_TENANT_ID", safe: { any: "a namespace for keys" }, source: MC_CFG },
    // vLLM.
    {
        name: "VLLM_NIXL_SIDE_CHANNEL_HOST",
        safe: { any: "the handshake address; routability is checked by pd-kv-load-fails-loudly" },
        source: `vllm-project/vllm@v0.28.0:vllm/envs.py#VLLM_NIXL_SIDE_CHANNEL_HOST`,
    },
    {
        name: "VLLM_NIXL_SIDE_CHANNEL_PORT",
        safe: { pattern: UINT },
        source: `vllm-project/vllm@v0.28.0:vllm/envs.py#VLLM_NIXL_SIDE_CHANNEL_PORT`,
    },
    {
        name: "VLLM_GPU_NIC_PCIE_MAPPING",
        safe: { pattern: new RegExp(`^${PCI}=${PCI}(,${PCI}=${PCI})*$`) },
        source: "vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_net_device",
    },
    {
        name: "VLLM_NIC_SELECTION_VARS",
        safe: { pattern: /^(UCX_NET_DEVICES|NCCL_IB_HCA|MOONCAKE_DEVICE)(:\d+)?(,(UCX_NET_DEVICES|NCCL_IB_HCA|MOONCAKE_DEVICE)(:\d+)?)*$/ },
        source: "vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_gpu_nic_mapping",
    },
    // TensorRT-LLM.
    {
        name: "TRTLLM_NIXL_KVCACHE_BACKEND",
        safe: { values: ["UCX", "LIBFABRIC"] },
        source: "NVIDIA/TensorRT-LLM@v1.3.0rc25:tensorrt_llm/_torch/pyexecutor/kv_cache_transceiver.py",
    },
    // TensorRT-LLM LLM-API overrides (`--override-engine-args` JSON, Dynamo `python3 -m dynamo.trtllm`): only the
    // KV keys are in the closed world (kvScopedJsonCarriers); each must be recorded here.
    {
        name: "--override-engine-args.cache_transceiver_config",
        safe: { any: "object, checked key by key" },
        source: TRT_ARGS,
    },
    {
        name: "--override-engine-args.cache_transceiver_config.backend",
        safe: { values: ["NIXL", "UCX"] },
        source: TRT_ARGS,
        note: "what lib/dgd.ts renders (NIXL; UCX is the transceiver's other UCX path, UCX_* checked as env); MPI and MOONCAKE move KV on other transports, DEFAULT leaves the choice to the build",
    },
    { name: "--override-engine-args.kv_cache_config", safe: { any: "object, checked key by key" }, source: TRT_ARGS },
    {
        name: "--override-engine-args.kv_cache_config.enable_block_reuse",
        safe: { values: ["true", "false"] },
        source: TRT_ARGS,
        note: "prefix reuse in GPU memory; does not move KV",
    },
    {
        name: "--override-engine-args.kv_cache_config.dtype",
        safe: { any: "KV element type; compared between prefill and decode (upstream/pairs.ts)" },
        source: TRT_ARGS,
    },
    // SGLang.
    {
        name: "SGLANG_DISAGGREGATION_NIXL_BACKEND",
        safe: { values: ["UCX", "LIBFABRIC"] },
        source: `${SGL_ENV}#Envs.SGLANG_DISAGGREGATION_NIXL_BACKEND`,
    },
    {
        name: "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS",
        safe: { any: "JSON, checked key by key" },
        source: `${SGL_ENV}#Envs.SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS`,
    },
    {
        name: "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS.device_list",
        safe: { pattern: NIXL_DEVICE_LIST },
        source: "ai-dynamo/nixl@v1.4.0:src/plugins/ucx/ucx_backend.cpp#nixlUcxEngine",
        note: 'NIXL 1.4.0 (the SGLang image\'s) splits it on ", ", appends :1 to each name and sets UCX NET_DEVICES with config.modifyAlways, replacing UCX_NET_DEVICES, which is then inert and refused (src/plugins/ucx/ucx_utils.cpp, config.cpp); HCA names without a port, ", "-separated; the pack\'s ucx-net-devices-rail-hcas judges the resulting list against the rail table',
    },
    {
        name: "SGLANG_HOST_IP",
        safe: { any: "the bootstrap address; routability is checked by pd-kv-load-fails-loudly" },
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/utils/common.py#get_local_ip_auto",
    },
    // Flags.
    { name: "--kv-transfer-config", safe: { any: "JSON, checked key by key" }, source: VLLM_KVT },
    {
        name: "--kv-transfer-config.kv_connector",
        safe: { values: ["NixlConnector", "MultiConnector", "MooncakeStoreConnector", "DynamoConnector"] },
        source: VLLM_KVT,
        note: "DynamoConnector is KVBM (upstream/kvbm.ts): pod-local tiers (CUDA copies, NIXL POSIX file I/O), no KV on the network",
    },
    {
        name: "--kv-transfer-config.kv_connector_module_path",
        safe: { values: [KVBM_VLLM_CONNECTOR.kv_connector_module_path] },
        source: KVBM_AGG_EXAMPLE,
        note: "the module vLLM imports the connector class from: only KVBM's own, any other module is code the pack has not read",
    },
    // Dynamo KVBM (upstream/kvbm.ts): tier sizes, the disk tier's directory and its offload filter. Every other DYN_KVBM_* (NIXL backend
    // switches, leader ZMQ address, object storage) stays refused.
    {
        name: "DYN_KVBM_CPU_CACHE_GB",
        safe: { pattern: /^[1-9]\d*$/ },
        source: KVBM_LEADER,
        note: "a size: pinned host memory in the worker's own process (G2), filled by CUDA copies",
    },
    {
        name: "DYN_KVBM_DISK_CACHE_GB",
        safe: { pattern: /^[1-9]\d*$/ },
        source: KVBM_LEADER,
        note: "a size: files on the worker's local disk (G3), written by NIXL's POSIX backend",
    },
    {
        name: "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER",
        safe: { values: ["true", "false"] },
        source: KVBM_BLOCK_MANAGER,
        note: "which blocks go host -> disk (all, or those reused twice): no transport, no address",
    },
    {
        name: "DYN_KVBM_DISK_CACHE_DIR",
        safe: { pattern: /^\/[A-Za-z0-9._/-]+$/ },
        source: KVBM_DISK,
        note: "a local directory (a path, never a URL): where the disk tier's files are created",
    },
    { name: "--kv-transfer-config.kv_role", safe: { values: ["kv_both", "kv_producer", "kv_consumer"] }, source: VLLM_KVT },
    {
        name: "--kv-transfer-config.kv_load_failure_policy",
        safe: { values: ["fail"] },
        source: VLLM_KVT,
        note: "recompute hides a failed transfer",
    },
    {
        name: "--kv-transfer-config.kv_buffer_device",
        safe: { values: ["cuda"] },
        source: VLLM_NIXL,
        note: "cpu stages KV through host memory",
    },
    { name: "--kv-transfer-config.kv_connector_extra_config", safe: { any: "object, checked key by key" }, source: VLLM_KVT },
    {
        name: "--kv-transfer-config.kv_connector_extra_config.connectors",
        safe: { any: "each connector checked as a kv_transfer_config" },
        source: "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py",
    },
    {
        name: "--kv-transfer-config.kv_connector_extra_config.backends",
        safe: { pattern: /^(UCX|LIBFABRIC)(,(UCX|LIBFABRIC))*$/ },
        source: VLLM_NIXL,
        note: "NIXL backends that move GPU memory over RDMA; POSIX/GDS/OBJ are storage",
    },
    {
        name: "--kv-events-config",
        safe: { any: "KV events go to the router over ZMQ (control plane), not KV data" },
        source: "vllm-project/vllm@v0.28.0:vllm/config/kv_events.py",
    },
    { name: "--kv-cache-dtype", safe: { any: "the KV element type; both sides compared by the pair rule" }, source: SGL_SA },
    { name: "--disaggregation-mode", safe: { values: ["prefill", "decode", "agg", "null", "prefill_and_decode"] }, source: SGL_SA },
    {
        name: "--disaggregation-transfer-backend",
        safe: { values: ["nixl", "mooncake"] },
        source: SGL_SA,
        note: "fake and ascend move no KV over RDMA",
    },
    { name: "--disaggregation-bootstrap-port", safe: { pattern: UINT }, source: SGL_SA },
    {
        name: "--disaggregation-ib-device",
        safe: { pattern: DEVICE_LIST },
        source: SGL_SA,
        note: "a comma list of device names; that they are the node pool's rail HCAs is checked by the pack's mooncake-rdma-devices rule (policies/mooncake.ts)",
    },
    { name: "--disaggregation-decode-enable-radix-cache", safe: { any: "decode-side cache reuse" }, source: SGL_SA },
    { name: "--enable-hierarchical-cache", safe: { any: "turns on HiCache; its storage backend is checked" }, source: SGL_SA },
    { name: "--hicache-ratio", safe: { pattern: /^\d+(\.\d+)?$/ }, source: SGL_SA },
    { name: "--hicache-write-policy", safe: { values: ["write_through", "write_through_selective", "write_back"] }, source: SGL_SA },
    {
        name: "--hicache-storage-backend",
        safe: { values: ["mooncake"] },
        source: SGL_SA,
        note: "file/nixl-file/hf3fs keep KV on disks, not the RDMA pool",
    },
    {
        name: "--hicache-storage-backend-extra-config",
        safe: { any: "JSON, checked key by key" },
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py",
    },
    // Mooncake config JSON (vLLM's mooncake.json file and SGLang's HiCache extra config).
    ...["--hicache-storage-backend-extra-config", "mooncake.json"].flatMap((c): KvSetting[] => [
        { name: `${c}.master_server_address`, safe: { any: "the master's address (control plane)" }, source: MC_STORE_CFG },
        { name: `${c}.metadata_server`, safe: { any: "metadata exchange endpoint (control plane)" }, source: MC_STORE_CFG },
        { name: `${c}.protocol`, safe: { values: ["rdma", "efa"] }, source: MC_STORE_CFG, note: "tcp is a silent TCP pool" },
        { name: `${c}.device_name`, safe: { pattern: DEVICE_LIST }, source: MC_STORE_CFG },
        { name: `${c}.global_segment_size`, safe: { pattern: SIZE }, source: MC_STORE_CFG },
        { name: `${c}.local_buffer_size`, safe: { pattern: SIZE }, source: MC_STORE_CFG },
        { name: `${c}.mode`, safe: { values: ["standalone-store"] }, source: MC_STORE_CFG },
        { name: `${c}.tenant_id`, safe: { any: "a namespace for keys" }, source: MC_STORE_CFG },
    ]),
    // SGLang's HiCache takes the transfer engine's registered address from the extra config (MOONCAKE_LOCAL_HOSTNAME is
    // not read on that path); the pod IP is what peers can reach. The RDMA data path is `protocol` + `device_name`.
    {
        name: "--hicache-storage-backend-extra-config.local_hostname",
        safe: { values: ["$(POD_IP)"] },
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py",
        note: "localhost registers an address no peer reaches: the store refuses the handshake",
    },
];

/**
 * JSON carriers of which only some top-level keys carry KV settings: those keys are checked one by one, the rest of
 * the JSON (sequence length, speculation) is not KV transport. TRT-LLM's `--override-engine-args` overrides `LlmArgs`
 * fields (upstream/trtllm.ts `trtllmEngineArgKeys`): `cache_transceiver_config` picks how KV moves between prefill and
 * decode, `kv_cache_config` where KV lives (`host_cache_size` offloads it to host memory).
 */
export const kvScopedJsonCarriers: Readonly<Record<string, readonly string[]>> = {
    "--override-engine-args": ["cache_transceiver_config", "kv_cache_config"],
};

/**
 * Flags naming a file of further engine arguments the pack does not read: refused on a KV container unless covered by
 * a reviewed exception (Dynamo `python3 -m dynamo.trtllm --extra-engine-args` YAML; upstream/dynamo.ts).
 */
export const kvOpaqueArgFiles: readonly string[] = ["--extra-engine-args"];

/** JSON carriers whose keys are checked one by one: flag or env name, or a mounted file's base name. */
export const kvJsonCarriers: readonly string[] = [
    "--kv-transfer-config",
    "--hicache-storage-backend-extra-config",
    "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS",
    "mooncake.json",
];

/** Entry points whose containers move KV (upstream EntrypointFacts.id). */
export const kvMovingEntrypoints: readonly string[] = [
    "dynamo.vllm",
    "dynamo.sglang",
    "dynamo.trtllm",
    "mooncake.mooncake_store_service",
    "mooncake_master",
];

/** Workload annotation carrying a graph's reviewed exceptions as JSON (defined in upstream/labels.ts). */
export { KV_EXCEPTIONS_ANNOTATION } from "./labels";

/** What the pack says about a setting it cannot prove safe (one wording everywhere). */
export function cannotProve(name: string, value: string): string {
    return `the pack cannot prove \`${name}=${value}\` keeps KV on RDMA`;
}
