import { type NodeProfile, type Rail, railsInOrder } from "../config/nodeProfile";

/**
 * Extended-resource prefix of the RDMA shared device plugin (`resourcePrefix`, default `rdma`;
 * Mellanox/k8s-rdma-shared-dev-plugin pkg/types/types.go).
 */
export const RDMA_RESOURCE_PREFIX = "rdma";

/** PCI vendor ID of NVIDIA/Mellanox NICs (`15b3`). */
export const MELLANOX_VENDOR_ID = "15b3";

/** Plugin resource name for rail `rail` (`rail_0`); must match `^[a-zA-Z0-9_]+$`. */
export function railResourceName(rail: number): string {
    return `rail_${rail}`;
}

/** Full extended resource a pod requests for rail `rail`, e.g. `rdma/rail_3`. */
export function railResource(rail: number): string {
    return `${RDMA_RESOURCE_PREFIX}/${railResourceName(rail)}`;
}

/**
 * The plugin's `linkTypes` value per rail link layer: the netdev's netlink encapsulation type as the plugin compares
 * it (`ether`, `infiniband`; netlink `EncapType` of the device's netdev). The plugin filters by
 * vendors, deviceIDs, drivers, ifNames, then linkTypes in turn, i.e. it ANDs them
 * (Mellanox/k8s-rdma-shared-dev-plugin@410b0f32:pkg/resources/resources_manager.go#GetFilteredDevices, v1.5.3), so a netdev whose name or link layer disagrees with this leaves the
 * rail resource at capacity 0.
 */
export const PLUGIN_LINK_TYPE = { InfiniBand: "infiniband", Ethernet: "ether" } as const;

/** One `configList[]` entry of the RDMA shared device plugin (field names from pkg/types/types.go). */
export interface RdmaResourceConfig {
    resourceName: string;
    resourcePrefix: string;
    rdmaHcaMax: number;
    selectors: { vendors: string[]; linkTypes: string[]; ifNames: string[] };
}

/** The plugin's config file (`/k8s-rdma-shared-dev-plugin/config.json`), embedded as a string in NicClusterPolicy. */
export interface RdmaSharedDevicePluginConfig {
    /** Seconds between device rescans; > 0 so HCAs that come up after the plugin are picked up. */
    periodicUpdateInterval: number;
    configList: RdmaResourceConfig[];
}

/**
 * Generates one RDMA resource per rail from the rail tables of every InfiniBand node pool.
 * Rail i's resource selects rail i's netdev of every profile (`ifNames`, OR-ed by the plugin), the NVIDIA
 * vendor and the rail's link type ({@link PLUGIN_LINK_TYPE}: `infiniband` for IB rails, so a port flipped to
 * Ethernet drops out instead of being served, ; `ether` for RoCE rails). There is no PCI-address selector in the plugin, hence netdev names.
 *
 * @param profiles the node profiles of the spoke's IB pools (deduplicated by the caller or not; order is irrelevant)
 * @param rdmaHcaMax pods that may share one rail resource on a node
 * @throws Error when two profiles disagree on the rail count (a rail would be missing on some nodes) or on rail i's
 *   link layer (one resource cannot select both)
 */
export function rdmaSharedDevicePluginConfig(profiles: NodeProfile[], rdmaHcaMax: number): RdmaSharedDevicePluginConfig {
    if (profiles.length === 0) return { periodicUpdateInterval: 300, configList: [] };
    const railCount = profiles[0].rails.length;
    for (const p of profiles) {
        if (p.rails.length !== railCount)
            throw new Error(`node profiles disagree on rail count: ${profiles[0].name} has ${railCount}, ${p.name} has ${p.rails.length}`);
    }
    const configList: RdmaResourceConfig[] = [];
    for (let rail = 0; rail < railCount; rail++) {
        const rails = profiles.map((p) => p.rails.find((r) => r.rail === rail)!);
        const ifNames = [...new Set(rails.map((r) => r.netdev))].sort();
        const layers = [...new Set(rails.map((r) => r.linkLayer))];
        if (layers.length > 1)
            throw new Error(
                `node profiles disagree on rail ${rail}'s link layer: ${profiles.map((p, i) => `${p.name} ${rails[i].linkLayer}`).join(", ")}`,
            );
        configList.push({
            resourceName: railResourceName(rail),
            resourcePrefix: RDMA_RESOURCE_PREFIX,
            rdmaHcaMax,
            selectors: { vendors: [MELLANOX_VENDOR_ID], linkTypes: [PLUGIN_LINK_TYPE[layers[0]]], ifNames },
        });
    }
    return { periodicUpdateInterval: 300, configList };
}

/**
 * Name of the IPoIBNetwork (and of the NetworkAttachmentDefinition the operator renders from it) on rail `rail` of node
 * pool `pool`: `h200-rail-3`. Rail i of every node of the pool, so GPU i's pod interface sits on leaf i.
 */
export function railNetworkName(pool: string, rail: number): string {
    return `${pool}-rail-${rail}`;
}

/** Rails serving the given GPU indices, in GPU order. @throws Error if a GPU has no rail in the profile. */
export function railsForGpus(profile: NodeProfile, gpus: number[]): Rail[] {
    return gpus.map((g) => {
        const r = profile.rails.find((x) => x.gpu === g);
        if (!r) throw new Error(`node profile ${profile.name} has no rail for GPU ${g}`);
        return r;
    });
}

/** `UCX_NET_DEVICES` value pinning UCX to the given rails' HCAs, port 1: `mlx5_0:1,mlx5_3:1`. */
export function ucxNetDevices(rails: Rail[]): string {
    return rails.map((r) => `${r.hca}:1`).join(",");
}

/**
 * `NCCL_IB_HCA` value for the given rails with exact matching (`=` prefix): without it `mlx5_1` would
 * also match `mlx5_10`/`mlx5_11` (NVIDIA/nccl src/misc/utils.cc prefix matching).
 */
export function ncclIbHca(rails: Rail[]): string {
    return `=${rails.map((r) => `${r.hca}:1`).join(",")}`;
}

/**
 * `VLLM_GPU_NIC_PCIE_MAPPING` value (`<gpu_bdf>=<nic_bdf>,...`, vllm-project/vllm PR #42083): each TP rank
 * uses its PCIe-affine rail NIC. Must be paired with `VLLM_NIC_SELECTION_VARS`.
 */
export function gpuNicPcieMapping(rails: Rail[]): string {
    return rails.map((r) => `${r.gpuPciAddress}=${r.pciAddress}`).join(",");
}

/** All rails of a profile in rail order. */
export function allRails(profile: NodeProfile): Rail[] {
    return railsInOrder(profile);
}
