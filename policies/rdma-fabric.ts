import type { StackValidationPolicy } from "@pulumi/policy";
import { helmReleases, LABELS, nodePools, ofType, TYPES } from "./lib/resources";

/** One entry of the RDMA shared device plugin's `configList` (Mellanox/k8s-rdma-shared-dev-plugin pkg/types/types.go). */
interface PluginResource {
    resourceName?: string;
    resourcePrefix?: string;
    rdmaHcaMax?: number;
    selectors?: { vendors?: string[]; deviceIDs?: string[]; drivers?: string[]; ifNames?: string[]; linkTypes?: string[] };
}

/**
 * Every InfiniBand node pool has exactly one RDMA resource per GPU, each on a distinct HCA from its rail
 * table. Without it a pod's rail HCA is not injected (NCCL logs `NET/IB : No device found` at INFO and runs
 * on sockets, NVIDIA/nccl#451) or two rails collapse onto one resource and a worker gets the wrong NIC.
 */
export const ibRailResources: StackValidationPolicy = {
    name: "ib-pool-one-rdma-resource-per-gpu",
    description:
        "Each InfiniBand node pool must have exactly one RDMA device-plugin resource per GPU, each selecting a distinct rail HCA from the pool's rail table.",
    remediationSteps:
        "Generate NicClusterPolicy.spec.rdmaSharedDevicePlugin.config from the node profile (one configList entry per rail, selectors.ifNames = that rail's netdev); fix the node profile if two rails share an HCA.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const pools = nodePools(args.resources).filter((p) => p.fabric === "infiniband");
        if (pools.length === 0) return;
        const ncps = ofType(args.resources, TYPES.nicClusterPolicy);
        if (ncps.length === 0) {
            report(
                `No NicClusterPolicy in the stack, but node pool(s) ${pools.map((p) => p.name).join(", ")} use InfiniBand: nothing publishes the rail RDMA resources. Deploy BackendFabric in the same stack.`,
            );
            return;
        }
        const ncp = ncps[0];
        const raw = ncp.props.spec?.rdmaSharedDevicePlugin?.config;
        let list: PluginResource[];
        try {
            list = (JSON.parse(String(raw)) as { configList?: PluginResource[] }).configList ?? [];
        } catch {
            report(
                `NicClusterPolicy ${ncp.name}: spec.rdmaSharedDevicePlugin.config is missing or not JSON; the plugin would publish nothing.`,
                ncp.urn,
            );
            return;
        }
        for (const pool of pools) {
            const gpus = new Set(pool.rails.map((r) => r.gpu));
            if (pool.rails.length === 0) {
                report(
                    `Node pool ${pool.name}: its nodes carry no rail table (annotation ${LABELS.railTable}); cannot prove one RDMA resource per GPU.`,
                    pool.urn,
                );
                continue;
            }
            if (gpus.size !== pool.rails.length)
                report(
                    `Node pool ${pool.name}: rail table maps ${pool.rails.length} rails onto ${gpus.size} distinct GPUs; each GPU needs its own rail.`,
                    pool.urn,
                );
            const hcas = new Map<string, number>();
            for (const r of pool.rails) {
                if (hcas.has(r.hca))
                    report(
                        `Node pool ${pool.name}: rails ${hcas.get(r.hca)} and ${r.rail} are both on HCA ${r.hca}; each rail needs a distinct HCA.`,
                        pool.urn,
                    );
                else hcas.set(r.hca, r.rail);
            }
            for (const r of pool.rails) {
                const matching = list.filter((c) => (c.selectors?.ifNames ?? []).includes(r.netdev));
                if (matching.length !== 1) {
                    report(
                        `Node pool ${pool.name}: GPU ${r.gpu} (rail ${r.rail}, HCA ${r.hca}, netdev ${r.netdev}) is selected by ${matching.length} RDMA resources in NicClusterPolicy ${ncp.name} spec.rdmaSharedDevicePlugin.config; it needs exactly one.`,
                        ncp.urn,
                    );
                }
            }
            for (const c of list) {
                const rails = pool.rails.filter((r) => (c.selectors?.ifNames ?? []).includes(r.netdev));
                if (rails.length > 1) {
                    report(
                        `NicClusterPolicy ${ncp.name}: resource ${c.resourcePrefix ?? "rdma"}/${c.resourceName} selects ${rails.length} HCAs (${rails.map((r) => r.hca).join(", ")}) on pool ${pool.name}; one resource must map to one rail.`,
                        ncp.urn,
                    );
                }
            }
        }
    },
};

/**
 * A stack with an InfiniBand pool must deploy the GPU Operator with GPUDirect RDMA: DMA-BUF (open kernel
 * modules) or legacy nvidia-peermem. Without it NCCL/NIXL stage through host memory (NVIDIA/nccl#1676: all-reduce
 * 180 -> 10 GB/s with only an INFO line) and Mooncake GPU-buffer registration fails (kvcache-ai/Mooncake#281).
 */
export const gpuDirectRdma: StackValidationPolicy = {
    name: "gpudirect-rdma-enabled",
    description:
        "A stack with an InfiniBand node pool must deploy the NVIDIA GPU Operator with GPUDirect RDMA enabled (DMA-BUF via open kernel modules, or nvidia-peermem).",
    remediationSteps:
        "Deploy GpuOperator in the same stack with gpuDirectRdma: dmabuf (driver.kernelModuleType=open) or peermem (driver.rdma.enabled=true).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const pools = nodePools(args.resources).filter((p) => p.fabric === "infiniband");
        if (pools.length === 0) return;
        const releases = helmReleases(args.resources, "gpu-operator");
        if (releases.length === 0) {
            report(
                `Node pool(s) ${pools.map((p) => p.name).join(", ")} use InfiniBand but the stack deploys no gpu-operator Helm release: GPUDirect RDMA is not configured.`,
            );
            return;
        }
        for (const rel of releases) {
            const driver = rel.props.values?.driver ?? {};
            if (driver.enabled === false) {
                report(
                    `Helm release ${rel.name} (gpu-operator): values.driver.enabled is false, so the operator cannot configure GPUDirect RDMA on these nodes.`,
                    rel.urn,
                );
                continue;
            }
            const peermem = driver.rdma?.enabled === true;
            const dmabuf = driver.kernelModuleType === "open";
            if (!peermem && !dmabuf) {
                report(
                    `Helm release ${rel.name} (gpu-operator): GPUDirect RDMA is off: set values.driver.kernelModuleType=open (DMA-BUF) or values.driver.rdma.enabled=true (nvidia-peermem).`,
                    rel.urn,
                );
            }
        }
    },
};

/** The RDMA fabric policies of the foundation. */
export const rdmaFabricPolicies = [ibRailResources, gpuDirectRdma];
