import type { ComponentFacts, EntrypointFacts, Source } from "./types";

/**
 * Libraries inside the engine images whose environment the product sets: UCX (Dynamo 1.5.0 ships UCX 1.21.x,
 * docs.nvidia.com/dynamo/v1.5.0/reference/compatibility; the image build pins NIXL's UCX to v1.21.0,
 * ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:container/context.yaml `nixl_ucx_ref`), NIXL (1.3.2 vLLM / 1.4.0 SGLang), NCCL, libfabric's EFA
 * provider (EFA installer), CPython. Only the variables the product renders plus close neighbours.
 */
const UCP: Source = "openucx/ucx@v1.21.0:src/ucp/core/ucp_context.c#ucp_context_config_table";
const IB_IFACE: Source = "openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c#uct_ib_iface_config_table";

export const ucx: ComponentFacts = {
    component: "ucx",
    version: "v1.21.0",
    flags: {},
    env: {
        UCX_TLS: { default: "all", source: UCP },
        UCX_NET_DEVICES: { default: "all", source: UCP, note: "a set: order carries no preference" },
        UCX_RNDV_SCHEME: {
            default: "auto",
            source: UCP,
            note: "rendezvous of tag/AM sends only: NIXL's KV path is RMA (ucp_get_nbx/ucp_put_nbx) and its notifications are eager AM, so inert for NIXL (upstream/kv-transport.ts)",
        },
        UCX_RNDV_THRESH: {
            default: "auto",
            source: UCP,
            note: "NIXL sets inf when unset (ai-dynamo/nixl@v1.3.2 and @v1.4.0:src/plugins/ucx/ucx_utils.cpp); tag/AM sends only, inert for NIXL",
        },
        UCX_PROTO_EMULATION_ENABLE: { source: UCP },
        UCX_MAX_HCA_PER_GPU: { source: UCP },
        UCX_IB_GPU_DIRECT_RDMA: {
            default: "try",
            source: "openucx/ucx@v1.21.0:src/uct/ib/base/ib_md.c#uct_ib_md_config_table",
            note: "no: GPU memory is not registered with the HCA (KV staged through host memory)",
        },
        UCX_IB_GID_INDEX: {
            default: "auto",
            source: "openucx/ucx@v1.21.0:src/uct/ib/base/ib_md.c#uct_ib_md_config_table",
            note: "an IB memory-domain option (GID_INDEX, ULUNITS), read as md->config.gid_index (src/uct/ib/base/ib_iface.c, ib_device.c)",
        },
        UCX_SOCKADDR_TLS_PRIORITY: {
            default: "rdmacm,tcp,sockcm",
            source: UCP,
            note:
                "connection managers for client/server endpoints only (ucp_fill_sockaddr_prio_list; an endpoint created with " +
                "UCP_EP_PARAM_FIELD_SOCK_ADDR or from a listener): rdmacm (RDMA CM) needs an IP on the rail, i.e. attached rail " +
                "networks (upstream/activation.ts ipoib-rail-networks). NIXL creates its endpoints from worker addresses " +
                "(ai-dynamo/nixl@v1.3.2:src/plugins/ucx/ucx_utils.cpp UCP_EP_PARAM_FIELD_REMOTE_ADDRESS), so a NIXL worker never reads it",
        },
        UCX_IB_IS_GLOBAL: {
            default: "n",
            source: IB_IFACE,
            note:
                "y forces global routing on every IB interface (rc, dc, ud: uct_ib_iface_config_table is their IB_ table): " +
                "UCS_CLASS_INIT_FUNC(uct_ib_iface_t) sets config.force_global_addr, so the worker address carries the full GID " +
                "(subnet prefix + interface id, uct_ib_iface_address_pack_flags) and every address handle has a GRH " +
                "(uct_ib_iface_fill_ah_attr_from_gid_lid: is_global=1, grh.dgid, sgid_index = UCX_IB_GID_INDEX); the DLID is still " +
                "the remote LID (or FLID). Needs a valid port GID at that index. Bool: y/yes (any case), on, 1 (ucs_config_sscanf_bool)",
        },
        UCX_IB_ADDR_TYPE: {
            default: "auto",
            source: IB_IFACE,
            note:
                'Deprecated upstream ("To force use of global routing use IS_GLOBAL") but still parsed (an ENUM, not ' +
                'UCS_CONFIG_TYPE_DEPRECATED): only ib_global and ib_site_local take effect, as IS_GLOBAL=y ("check ADDR_TYPE for ' +
                'backward compatibility" in UCS_CLASS_INIT_FUNC(uct_ib_iface_t)). auto, ib_local and eth force nothing: on an ' +
                "InfiniBand port whose GID has a link-local (fe80::, the SM default) or site-local subnet prefix, without " +
                "IBV_QPF_GRH_REQUIRED and with a LID, the interface stays LID-only " +
                "(no GRH unless the peer's subnet prefix differs); eth is never compared, so it is inert on InfiniBand " +
                "(RoCE is always global, whatever the value)",
        },
        UCX_RCACHE_MAX_UNRELEASED: { source: "openucx/ucx@v1.21.0:src/ucs/memory/rcache.c" },
    },
};

/**
 * A UCX bool as the parser reads it (openucx/ucx@v1.21.0:src/ucs/config/parser.c `ucs_config_sscanf_bool`): y/yes and
 * n/no in any case, on/off and 1/0 exactly. `undefined` for anything else (UCX refuses the variable).
 */
export function ucxBool(value: string): boolean | undefined {
    const v = value.toLowerCase();
    if (v === "y" || v === "yes" || value === "on" || value === "1") return true;
    if (v === "n" || v === "no" || value === "off" || value === "0") return false;
    return undefined;
}

/** `UCX_IB_ADDR_TYPE` values that force global addressing (the rest of the enum forces nothing on InfiniBand). */
export const UCX_IB_ADDR_TYPE_GLOBAL: readonly string[] = ["ib_global", "ib_site_local"];

/**
 * Whether the environment forces global (GRH) addressing on an InfiniBand port at the pinned UCX, whatever the subnet
 * manager configured: `UCX_IB_IS_GLOBAL` true, or the deprecated `UCX_IB_ADDR_TYPE` ib_global / ib_site_local
 * (enum matched case-insensitively, `ucs_config_sscanf_enum`). Source and conditions: {@link ucx} `UCX_IB_IS_GLOBAL`,
 * `UCX_IB_ADDR_TYPE`; openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c `UCS_CLASS_INIT_FUNC(uct_ib_iface_t)`, where
 * either sets `config.force_global_addr`.
 *
 * @param isGlobal the value of `UCX_IB_IS_GLOBAL` (undefined: unset or unreadable)
 * @param addrType the value of `UCX_IB_ADDR_TYPE` (undefined: unset or unreadable)
 */
export function ucxIbForcesGlobal(isGlobal: string | undefined, addrType: string | undefined): boolean {
    if (isGlobal !== undefined && ucxBool(isGlobal) === true) return true;
    return addrType !== undefined && UCX_IB_ADDR_TYPE_GLOBAL.includes(addrType.toLowerCase());
}

export const nixl: ComponentFacts = {
    component: "nixl",
    version: "v1.3.2",
    flags: {},
    env: {},
};

const NCCL_IB: Source = "NVIDIA/nccl@v2.28.3-1:src/transport/net_ib.cc";
export const nccl: ComponentFacts = {
    component: "nccl",
    version: "v2.28.3-1",
    flags: {},
    env: {
        NCCL_NET: {
            source: "NVIDIA/nccl@v2.28.3-1:src/plugin/net.cc",
            note: "IB / Socket / plugin name (Libfabric = aws-ofi-nccl): no fallback when set",
        },
        NCCL_IB_DISABLE: { default: "0", source: NCCL_IB },
        NCCL_NET_GDR_LEVEL: { source: "NVIDIA/nccl@v2.28.3-1:src/graph/paths.cc", note: "LOC disables GPUDirect RDMA" },
        NCCL_IB_HCA: { source: NCCL_IB, note: "`=` prefix: exact names" },
    },
};

const EFA_ENV: Source = "ofiwg/libfabric@v2.4.0:prov/efa/src/efa_env.c#efa_env_param_get";
/** libfabric as shipped by the AWS EFA installer in the `-efa` images. */
export const libfabric: ComponentFacts = {
    component: "libfabric",
    version: "v2.4.0",
    flags: {},
    env: {
        FI_PROVIDER: { source: "ofiwg/libfabric@v2.4.0:src/fabric.c", note: "efa: only the EFA provider, no sockets fallback" },
        FI_EFA_USE_DEVICE_RDMA: { source: EFA_ENV },
        FI_EFA_ENABLE_SHM_TRANSFER: { source: EFA_ENV },
        FI_EFA_USE_HUGE_PAGE: { source: EFA_ENV },
        FI_EFA_FORK_SAFE: { source: EFA_ENV },
    },
};

/** CPython itself. */
export const python: ComponentFacts = {
    component: "python",
    version: "3.12",
    flags: {},
    env: {
        PYTHONHASHSEED: {
            source: "python/cpython@v3.12.3:Python/initconfig.c",
            note: "0 = the same block hashes in every engine process (Mooncake prefix sharing)",
        },
    },
};

/** The platform's own RDMA preflight (lib/preflight.ts), run from a ConfigMap in the engine image before the engine. */
export const platformPreflight: ComponentFacts = {
    component: "platform-preflight",
    version: "0.1.0",
    flags: {},
    env: {
        "PREFLIGHT_*": {
            source: "inference-platform/platform@0.1.0:lib/preflight.ts#preflightEnv",
            note: "written and read by this repository",
        },
    },
};

export const libraryEntrypoints: readonly EntrypointFacts[] = [
    {
        id: "platform-preflight",
        argv: ["sh", "/opt/platform/preflight/preflight.sh"],
        components: ["platform-preflight"],
        source: "inference-platform/platform@0.1.0:lib/preflight.ts#preflightInitContainer",
    },
];
