import type { NodeProfile, Rail } from "../config/nodeProfile";
import { railsInOrder } from "../config/nodeProfile";
import { gpuNicPcieMapping, ncclIbHca, railResource, ucxNetDevices } from "./rails";

/**
 * KV-transfer transport settings generated from a node pool's hardware: UCX / NIXL / NCCL environment, the
 * RDMA extended resources, the memlock path and the Mooncake client settings. One generator shared by every
 * engine (vLLM, SGLang, TRT-LLM): an engine only adds how it *selects* the NIXL backend (lib/dgd.ts).
 *
 * Why each value is set: NIXL over UCX, NIXL over libfabric and Mooncake all fall back to TCP without an
 * error when RDMA is unusable; every setting here
 * removes one silent fallback, and the policy pack (policies/rdma-workloads.ts) rejects manifests without them.
 */

/** A container environment variable (core/v1 EnvVar shape). */
export interface EnvVar {
    name: string;
    value?: string;
    valueFrom?: {
        fieldRef?: { fieldPath: string };
        configMapKeyRef?: { name: string; key: string };
        secretKeyRef?: { name: string; key: string };
    };
}

/** A container securityContext (core/v1 shape, the fields used here). */
export interface SecurityContext {
    runAsUser?: number;
    runAsGroup?: number;
    runAsNonRoot?: boolean;
    allowPrivilegeEscalation?: boolean;
    privileged?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
}

/**
 * The KV fabric of a node pool, derived from its node profile.
 * - `infiniband`: rail-aligned HCAs from the rail table; the RDMA shared device plugin publishes one resource per
 *   rail (`rdma/rail_<i>`, lib/rails.ts).
 * - `efa`: AWS EFA devices handed out by the EFA device plugin as `vpc.amazonaws.com/efa`.
 */
export type KvFabric =
    | { kind: "infiniband"; profile: string; rails: Rail[]; frontendHcas: string[]; gpusPerNode: number }
    | { kind: "efa"; profile: string; devicesPerGpu: number; devicesPerNode: number; gpusPerNode: number };

/** Extended resource of the AWS EFA device plugin (aws/eks-charts aws-efa-k8s-device-plugin). */
export const EFA_RESOURCE = "vpc.amazonaws.com/efa";

/** GPU extended resource of the NVIDIA device plugin. */
export const GPU_RESOURCE = "nvidia.com/gpu";

/**
 * `UCX_TLS` for KV transfer on InfiniBand: accelerated and verbs RC for inter-node RDMA plus `cuda_copy` /
 * `cuda_ipc` for GPU buffers, and no `tcp`, so a missing RDMA device is an error instead of a TCP fallback.
 * Exactly the value of Dynamo's InfiniBand guidance and its H200 recipe (ai-dynamo/dynamo disagg-communication
 * guide; recipes/deepseek-v4/.../disagg-h200-agentic/deploy.yaml).
 */
export const IB_UCX_TLS = "rc_x,rc,cuda_copy,cuda_ipc";

/**
 * The fabric of a node profile.
 *
 * @param frontendHcas north-south HCAs of the pool (never used for KV traffic)
 * @throws Error when the profile has neither rails nor an EFA layout, or a rail HCA is also a frontend HCA
 */
export function kvFabricOf(
    profile: NodeProfile & { efa?: { devicesPerGpu: number; networkCards: number } },
    frontendHcas: string[] = profile.frontend.map((f) => f.hca),
): KvFabric {
    if (profile.efa) {
        return {
            kind: "efa",
            profile: profile.name,
            devicesPerGpu: profile.efa.devicesPerGpu,
            devicesPerNode: profile.efa.networkCards,
            gpusPerNode: profile.gpu.count,
        };
    }
    if (profile.rails.length === 0)
        throw new Error(`node profile ${profile.name} has no InfiniBand rails and no EFA layout: there is no RDMA path for KV transfer`);
    const rails = railsInOrder(profile);
    const clash = rails.filter((r) => frontendHcas.includes(r.hca));
    if (clash.length)
        throw new Error(
            `node profile ${profile.name}: rail HCA(s) ${clash.map((r) => r.hca).join(", ")} are also frontend NICs; KV traffic must never ride the frontend`,
        );
    return { kind: "infiniband", profile: profile.name, rails, frontendHcas: [...frontendHcas], gpusPerNode: profile.gpu.count };
}

/**
 * RDMA extended resources for one pod, identical in requests and limits.
 *
 * InfiniBand: **every** rail of the pool, one device each. With the shared device plugin a rail resource injects
 * that rail's HCA, but which GPUs a pod gets is decided by the NVIDIA device plugin at admission, not by us: a
 * TP=2 worker may get GPUs 5 and 6. Requesting all rails guarantees that whatever GPUs it gets, each one's
 * PCIe-affine NIC is in the pod (>= one RDMA device per GPU); the per-rank map below then makes each rank use
 * its own NIC, and the preflight checks the affinity at start. Shared resources are not exclusive
 * (`rdmaHcaMax` pods per rail), so this costs no capacity.
 *
 * EFA: `devicesPerGpu` devices per GPU (the EKS accelerated AMI aligns them with the GPUs); a pod without GPUs
 * (Mooncake store) gets the devices of one GPU's share.
 *
 * @param gpus GPUs of the pod (0 for a host-RAM store)
 */
export function rdmaResources(fabric: KvFabric, gpus: number): Record<string, string> {
    if (fabric.kind === "efa") return { [EFA_RESOURCE]: String(fabric.devicesPerGpu * Math.max(1, gpus)) };
    return Object.fromEntries(fabric.rails.map((r) => [railResource(r.rail), "1"]));
}

/** HCAs a pod on this fabric may use for KV traffic (rail order); empty on EFA (devices are allocated, not named). */
export function kvHcas(fabric: KvFabric): string[] {
    return fabric.kind === "infiniband" ? fabric.rails.map((r) => r.hca) : [];
}

/**
 * How an engine narrows the KV NIC to each tensor-parallel rank's PCIe-affine HCA.
 * - `vllm-pcie-map`: vLLM's `VLLM_GPU_NIC_PCIE_MAPPING` + `VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1`
 *   (vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_gpu_nic_mapping). Each rank sets
 *   `UCX_NET_DEVICES=<its hca>:1` and *prepends* it to any value already there; UCX reads the list as a set
 *   (order carries no preference, openucx/ucx@v1.21.0:src/ucs/config/parser.c), so a static list of all rails would
 *   leave every rank free to use every rail. With this mode no static `UCX_NET_DEVICES` is rendered.
 * - `static`: engines that do not read the vLLM pair and hand NIXL no device list (TRT-LLM) get the rail set in
 *   `UCX_NET_DEVICES`; NIXL >= 1.3 lets UCX >= 1.21 pick the GPU-local HCA from it (`UCX_MAX_HCA_PER_GPU=auto`).
 * - `nixl-device-list`: the engine hands NIXL's UCX backend a `device_list` (SGLang, {@link sglangNixlBackendParams}),
 *   from which NIXL sets UCX's NET_DEVICES with `config.modifyAlways`, over any `UCX_NET_DEVICES` of the environment
 *   (ai-dynamo/nixl@v1.4.0:src/plugins/ucx/ucx_utils.cpp, src/plugins/ucx/config.cpp): no `UCX_NET_DEVICES` is
 *   rendered, it would be inert (upstream/kv-transport.ts `ucxNetDevicesInertWithDeviceList`).
 */
export type NicSelection = "vllm-pcie-map" | "static" | "nixl-device-list";

/**
 * UCX / NIXL / NCCL environment for a KV-transferring container. The same generator for every engine; only the
 * per-rank NIC selection differs ({@link NicSelection}). The UCX and `VLLM_*` NIC variables are rendered only where
 * a NIXL connector is configured (`transport.nixl`: P/D workers): nothing else in the pod loads UCX. An aggregated
 * worker whose only KV transport is the Mooncake pool gets the NCCL part alone; its RDMA rests on the Mooncake transfer
 * engine's settings (lib/mooncake.ts `mooncakeTransferEngineEnv`, the pack's policies/mooncake.ts).
 *
 * InfiniBand:
 * - `UCX_TLS` = {@link IB_UCX_TLS} (RDMA + CUDA transports, no tcp: the InfiniBand settings of
 *   ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/developer-guide/knowledge-base/kubernetes/kubernetes-operator/disagg-communication.md, where `tcp` is UCX's "Fallback when RDMA unavailable"; ai-dynamo/nixl#1614).
 * - `static`: `UCX_NET_DEVICES` = every rail HCA of the pool, port 1, in rail order: never `all` (NIXL_ERR_BACKEND on
 *   management/DPU NICs, dynamo PR #10852), never a frontend NIC, never a netdev name (tcp).
 * - `nixl-device-list`: no `UCX_NET_DEVICES`; the engine's NIXL `device_list` carries the rail HCAs.
 * - `vllm-pcie-map`: `VLLM_GPU_NIC_PCIE_MAPPING` = the whole rail table as `<gpu_bdf>=<nic_bdf>` plus
 *   `VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1`, set together (one without the other fails EngineCore init;
 *   vllm-project/vllm PR #42083), and **no** static `UCX_NET_DEVICES`: each rank sets it to exactly its own GPU's
 *   rail HCA. All ranks on one NIC measured ~0.76 GB/s vs 15-25 GB/s (dynamo recipes/deepseek-v4 README).
 * - `UCX_IB_IS_GLOBAL=y`: global (GRH) addressing on InfiniBand. At the pinned UCX (openucx/ucx@v1.21.0, NIXL's UCX
 *   in the Dynamo images: ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:container/context.yaml
 *   `nixl_ucx_ref`) it makes every IB interface pack its full GID and put a GRH on every address handle
 *   (openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c, `force_global_addr`); it needs a valid port GID at
 *   `UCX_IB_GID_INDEX` (default auto). `UCX_IB_ADDR_TYPE` is deprecated there ("To force use of global routing use
 *   IS_GLOBAL"): its `ib_global` (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:recipes/deepseek-v4/
 *   deepseek-v4-flash/vllm/disagg-h200-agentic/deploy.yaml) still forces the same, but `auto`, `ib_local` and `eth`
 *   (the value disagg-communication.md calls required on Kubernetes) force nothing on an InfiniBand port, which
 *   stays LID-only with the default link-local subnet prefix (upstream/libraries.ts `ucx`).
 * - No `UCX_RNDV_SCHEME` / `UCX_RNDV_THRESH` (Dynamo's comms guide sets get_zcopy / 0): they choose UCX's rendezvous
 *   protocol for tag and active-message sends, which NIXL's KV path never makes. NIXL moves KV with RMA
 *   (`nixlUcxEp::read`/`write` = `ucp_get_nbx`/`ucp_put_nbx`, ai-dynamo/nixl@v1.3.2 and @v1.4.0:
 *   src/plugins/ucx/ucx_utils.cpp), served by UCX's put/get offload protocols (zero copy from registered GPU memory
 *   above `UCX_ZCOPY_THRESH`, openucx/ucx@v1.21.0:src/ucp/rma/put_offload.c); its only AM send, the notification, passes
 *   `UCP_AM_SEND_FLAG_EAGER` (src/plugins/ucx/ucx_backend.cpp), which rules the `am/rndv` protocol out
 *   (openucx/ucx@v1.21.0:src/ucp/am/rndv.c `ucp_am_rndv_rts_probe`). Both would be read and inert (upstream/kv-transport.ts).
 * - `UCX_PROTO_EMULATION_ENABLE=n`: UCX >= 1.21 errors instead of emulating RMA in software (openucx/ucx PR #11289).
 * - `NCCL_NET=IB`: NCCL fails instead of dropping to sockets; `NCCL_IB_DISABLE=0`; `NCCL_IB_HCA` = the rail HCAs with
 *   `=` exact matching (`mlx5_1` would prefix-match `mlx5_10`, NVIDIA/nccl src/misc/utils.cc).
 *
 * EFA (ai-dynamo/dynamo@v1.5.0:docs/fern/pages/kubernetes/installation/rdma-setup/efa-on-aws.mdx, "Required EFA
 * environment variables"): `FI_PROVIDER=efa` (libfabric returns only EFA, so a missing device is an error, not the
 * sockets provider), `FI_EFA_USE_DEVICE_RDMA=1`, `FI_EFA_ENABLE_SHM_TRANSFER=0` (SHM transfer off; the guide's
 * `FI_EFA_ENABLE_SHM` is not rendered: libfabric's EFA provider reads no such parameter,
 * ofiwg/libfabric@v2.4.0:prov/efa/src/efa_env.c `efa_env_param_get`), `NCCL_NET=Libfabric` (aws-ofi-nccl plugin name; needs the `-efa` image, upstream/images.ts). The EFA libraries
 * go first on `LD_LIBRARY_PATH` in the entrypoint ({@link EFA_LD_LIBRARY_PATH_PRELUDE}): Kubernetes cannot append to
 * an image's variable. NIXL's backend is selected per engine (LIBFABRIC), see lib/dgd.ts.
 *
 * @param nic how ranks pick their NIC (InfiniBand only; ignored on EFA)
 * @param transport `nixl: false` leaves out the UCX variables (InfiniBand; EFA pools carry only P/D workers)
 */
export function kvTransportEnv(fabric: KvFabric, nic: NicSelection = "static", transport: { nixl: boolean } = { nixl: true }): EnvVar[] {
    if (fabric.kind === "efa") {
        return [
            { name: "FI_PROVIDER", value: "efa" },
            { name: "FI_EFA_USE_DEVICE_RDMA", value: "1" },
            { name: "FI_EFA_ENABLE_SHM_TRANSFER", value: "0" },
            { name: "NCCL_NET", value: "Libfabric" },
        ];
    }
    const env: EnvVar[] = transport.nixl ? nixlUcxEnv(fabric, nic) : [];
    env.push(
        { name: "NCCL_NET", value: "IB" },
        { name: "NCCL_IB_DISABLE", value: "0" },
        { name: "NCCL_IB_HCA", value: ncclIbHca(fabric.rails) },
    );
    return env;
}

/** The UCX (and vLLM per-rank NIC) part of {@link kvTransportEnv}: read only by a NIXL UCX agent. */
function nixlUcxEnv(fabric: KvFabric & { kind: "infiniband" }, nic: NicSelection): EnvVar[] {
    const env: EnvVar[] = [{ name: "UCX_TLS", value: IB_UCX_TLS }];
    if (nic === "static") env.push({ name: "UCX_NET_DEVICES", value: ucxNetDevices(fabric.rails) });
    env.push({ name: "UCX_IB_IS_GLOBAL", value: "y" }, { name: "UCX_PROTO_EMULATION_ENABLE", value: "n" });
    if (nic === "vllm-pcie-map") {
        env.push(
            { name: "VLLM_GPU_NIC_PCIE_MAPPING", value: gpuNicPcieMapping(fabric.rails) },
            { name: "VLLM_NIC_SELECTION_VARS", value: "UCX_NET_DEVICES:1" },
        );
    }
    return env;
}

/**
 * NIXL UCX backend parameters for SGLang (`SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS`, a JSON object of string values,
 * sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/nixl/conn.py). `device_list` is the UCX plugin's device
 * restriction: NIXL 1.4.0 (the SGLang image's, config/versions.ts) splits it on the string `", "`
 * (`absl::StrSplit(*opt, ", ")`, ai-dynamo/nixl@v1.4.0:src/plugins/ucx/ucx_backend.cpp `nixlUcxEngine`), appends `:1`
 * to each name and sets UCX's NET_DEVICES with `config.modifyAlways`, which replaces any `UCX_NET_DEVICES` from the
 * environment (src/plugins/ucx/ucx_utils.cpp, config.cpp: `modify` yields to the environment, `modifyAlways` does not).
 * So the list is joined with `", "`: each HCA becomes `<hca>:1`. SGLang ignores the `VLLM_*` NIC variables, so this is
 * how its NIXL agent is kept on the rails, and no `UCX_NET_DEVICES` is rendered beside it (NicSelection
 * `nixl-device-list`); the pack judges the list NIXL hands UCX (policies/rdma-workloads.ts `ucx-net-devices-rail-hcas`).
 *
 * @returns `undefined` on EFA (LIBFABRIC takes no device list)
 */
export function sglangNixlBackendParams(fabric: KvFabric): Record<string, string> | undefined {
    if (fabric.kind !== "infiniband") return undefined;
    return { device_list: kvHcas(fabric).join(", ") };
}

/**
 * How an RDMA container gets an unlimited memlock limit (Kubernetes has no rlimit field,
 * kubernetes/kubernetes#3595): `ulimit -l unlimited` in the entrypoint, as root.
 * - InfiniBand: always root (`runAsUser: 0`) with `IPC_LOCK` and `SYS_RESOURCE`, as Dynamo's RDMA recipes run them.
 *   A non-root `ulimit -l unlimited` fails unless the hard limit is already unlimited, and on-prem
 *   `memlockUnlimited: true` only labels the node (nothing on the node is changed by this program), so the container
 *   must work whatever the node's containerd limit is; the preflight proves the limit in the pod.
 *   `IPC_LOCK` is effective only for root (nvidia-container-toolkit#2037); `SYS_RESOURCE` raises the hard limit.
 * - EFA: `privileged: true` as root, since IPC_LOCK alone is insufficient for `fi_mr_reg` of GPU memory (Dynamo EFA guide).
 */
export interface MemlockPath {
    securityContext: SecurityContext;
    /** True when the preflight must see CAP_IPC_LOCK effective (root path). */
    requireIpcLock: boolean;
    /** Shell prelude the entrypoint runs before exec'ing the engine. */
    prelude: string;
}

/** Shell prelude raising the soft memlock limit. */
export const MEMLOCK_PRELUDE = "ulimit -l unlimited";

/**
 * EFA entrypoint prelude: the Amazon EFA libfabric and aws-ofi-nccl libraries first on `LD_LIBRARY_PATH`, ahead of
 * whatever the image sets (ai-dynamo/dynamo@v1.5.0:docs/fern/pages/kubernetes/installation/rdma-setup/efa-on-aws.mdx).
 * Done in the shell because a Kubernetes `env` entry cannot reference the image's own value.
 */
export const EFA_LD_LIBRARY_PATH_PRELUDE =
    'export LD_LIBRARY_PATH="/opt/amazon/efa/lib:/opt/amazon/efa/lib64:/opt/aws-ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"';

/**
 * The memlock path for a pod of this fabric. The same for every pool: `nodeMemlockUnlimited` no longer relaxes it
 * (see {@link MemlockPath}); it is kept so callers need not change and is recorded only for the preflight.
 */
export function memlockPath(fabric: KvFabric, _nodeMemlockUnlimited: boolean): MemlockPath {
    if (fabric.kind === "efa") {
        return {
            securityContext: { runAsUser: 0, runAsGroup: 0, privileged: true },
            requireIpcLock: true,
            prelude: `${MEMLOCK_PRELUDE} && ${EFA_LD_LIBRARY_PATH_PRELUDE}`,
        };
    }
    return {
        securityContext: { runAsUser: 0, runAsGroup: 0, capabilities: { add: ["IPC_LOCK", "SYS_RESOURCE"] } },
        requireIpcLock: true,
        prelude: MEMLOCK_PRELUDE,
    };
}

/**
 * `command` of a container whose engine must start after the memlock prelude: `sh -c '<prelude> && exec "$@"'`
 * followed by the real argv, so `args` stay the engine's own flags.
 */
export function wrappedCommand(prelude: string, argv: string[]): string[] {
    return ["sh", "-c", `${prelude} && exec "$@"`, "--", ...argv];
}

// ------------------------------------------------------------------ Mooncake

/** Mooncake master RPC port (`mooncake_master --rpc_port`, default 50051; Mooncake store deployment guide). */
export const MOONCAKE_MASTER_PORT = 50051;
/** Mooncake master metrics port (`--metrics_port`, 9003 in Mooncake's Kubernetes guide). */
export const MOONCAKE_METRICS_PORT = 9003;
/** Host-RAM store pods' local buffer: 64 MiB, as Mooncake's production RDMA reference (rbg-integration.md). */
export const MOONCAKE_STORE_LOCAL_BUFFER_BYTES = 64 * 1024 * 1024;

/** What a Mooncake process is: a host-RAM store node contributing memory, or an engine that only reads/writes. */
export type MooncakeRole = { kind: "store"; segmentSizeGiB: number } | { kind: "client" };

/**
 * Mooncake Transfer Engine / store client environment (kvcache-ai/Mooncake store deployment guide, "Client
 * Configuration"; transfer-engine `MC_*` knobs). `MOONCAKE_PROTOCOL` defaults to **tcp** upstream, hence explicit
 * `rdma`; `MOONCAKE_DEVICE` lists the rail HCAs (auto-discovery picks unusable or non-routable HCAs, vllm PR #44919);
 * with both, auto-discovery is off and a missing HCA fails the client (no TCP fallback; `MC_FORCE_HCA` is inert, see
 * {@link mooncakeTransferEngineEnv}); `MC_ENABLE_DEST_DEVICE_AFFINITY=1` keeps a transfer on the same
 * rail at both ends (rail-optimised fabric); `MOONCAKE_LOCAL_HOSTNAME` is the pod IP peers connect to.
 *
 * @param master `host:port` of the Mooncake master Service
 * @throws Error on EFA: Mooncake's EFA transport needs a build with USE_EFA, and a wheel without it silently runs
 *   the verbs transport (kvcache-ai/Mooncake#2070); not supported by this platform
 */
export function mooncakeEnv(fabric: KvFabric, master: string, role: MooncakeRole): EnvVar[] {
    if (fabric.kind !== "infiniband") {
        throw new Error(
            `Mooncake over EFA (profile ${fabric.profile}) is not supported: the pinned Mooncake build is not known to carry the EFA transport (kvcache-ai/Mooncake#2070); use kvPool kind none on EFA pools`,
        );
    }
    const env: EnvVar[] = [
        { name: "MOONCAKE_MASTER", value: master },
        { name: "MOONCAKE_TE_META_DATA_SERVER", value: "P2PHANDSHAKE" },
        { name: "MOONCAKE_PROTOCOL", value: "rdma" },
        { name: "MOONCAKE_DEVICE", value: kvHcas(fabric).join(",") },
        ...mooncakeTransferEngineEnv(fabric),
        { name: "MOONCAKE_LOCAL_HOSTNAME", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    ];
    if (role.kind === "store") {
        env.push(
            { name: "MOONCAKE_GLOBAL_SEGMENT_SIZE", value: `${role.segmentSizeGiB}gb` },
            { name: "MOONCAKE_LOCAL_BUFFER_SIZE", value: String(MOONCAKE_STORE_LOCAL_BUFFER_BYTES) },
        );
    } else {
        // Engines are pure clients of the shared pool: they contribute no segment (Mooncake rbg-integration.md).
        env.push({ name: "MOONCAKE_GLOBAL_SEGMENT_SIZE", value: "0" });
    }
    return env;
}

/**
 * The Mooncake transfer engine's own knobs, read by the C++ library in whatever process loads it (store service, vLLM
 * or SGLang worker): `MC_ENABLE_DEST_DEVICE_AFFINITY=1` (same rail at both ends) (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-transfer-engine/src/config.cpp). `MC_ENABLE_HCA_PEER_AFFINITY`
 * is never set with it: together both are turned off (upstream/refused.ts `mooncake-affinity-conflict`).
 * `MC_FORCE_HCA` is not rendered: with protocol rdma and an explicit device list the store client runs with
 * auto-discovery off, and the transfer engine reads MC_FORCE_HCA only under auto-discovery (upstream/mooncake.ts); the
 * guarantee is protocol rdma + explicit devices (upstream/check/mooncake-devices.ts).
 *
 * @throws Error on EFA (see {@link mooncakeEnv})
 */
export function mooncakeTransferEngineEnv(fabric: KvFabric): EnvVar[] {
    if (fabric.kind !== "infiniband")
        throw new Error(`Mooncake over EFA (profile ${fabric.profile}) is not supported (kvcache-ai/Mooncake#2070)`);
    return [{ name: "MC_ENABLE_DEST_DEVICE_AFFINITY", value: "1" }];
}

/**
 * Mooncake client settings shared by both engines' readers: `master_server_address`, `metadata_server`, `protocol`,
 * `device_name`, `global_segment_size` (kvcache-ai/Mooncake vllm-mooncakestoreconnector.md, Dynamo HiCache guide).
 * Engines are pure clients of the separate store pods, so `global_segment_size` is 0 (SGLang otherwise defaults it to
 * 4gb, sgl-project/sglang@v0.5.18:python/sglang/srt/environ.py `MOONCAKE_GLOBAL_SEGMENT_SIZE`).
 */
function mooncakeClientBase(fabric: KvFabric, master: string): Record<string, string | number> {
    if (fabric.kind !== "infiniband")
        throw new Error(`Mooncake over EFA (profile ${fabric.profile}) is not supported (kvcache-ai/Mooncake#2070)`);
    return {
        master_server_address: master,
        metadata_server: "P2PHANDSHAKE",
        protocol: "rdma",
        device_name: kvHcas(fabric).join(","),
        global_segment_size: 0,
    };
}

/**
 * vLLM `MooncakeStoreConnector` config file (`MOONCAKE_CONFIG_PATH`). `mode: "standalone-store"` because the pool is
 * the separate store pods: `MooncakeStoreConfig` defaults `mode` to `embedded`, and embedded mode refuses
 * `global_segment_size == 0` at start-up ("embedded mode requires global_segment_size > 0"), while standalone-store
 * requires exactly 0 (vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py
 * `MooncakeStoreConfig.__post_init__`).
 */
export function vllmMooncakeStoreConfig(fabric: KvFabric, master: string): Record<string, string | number> {
    return { ...mooncakeClientBase(fabric, master), mode: "standalone-store" };
}

/**
 * SGLang `--hicache-storage-backend-extra-config` for the Mooncake backend. SGLang's reader has no `mode` key (its
 * store shape comes from `MOONCAKE_STANDALONE_STORAGE`), so none is written
 * (sgl-project/sglang@v0.5.18:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py).
 */
export function sglangMooncakeExtraConfig(fabric: KvFabric, master: string): Record<string, string | number> {
    return mooncakeClientBase(fabric, master);
}
