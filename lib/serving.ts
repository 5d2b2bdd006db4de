import type { Endpoint } from "../config/endpoint";
import { endpointGpus } from "../config/endpoint";
import type { ConfigIssue } from "../config/errors";
import type { NodeProfile } from "../config/nodeProfile";
import type { ServingConfig } from "../config/serving";
import { FRONTEND_PORT } from "./dgd";
import { INFERENCE_NAMESPACE } from "./labels";
import { NODE_HOST_RESERVE_GIB } from "./faststart";
import { type KvFabric, rdmaResources } from "./nixl";

/**
 * The in-cluster Service of an endpoint's Dynamo frontend: the operator names it `<dgd>-<component>` lower-cased,
 * and the DGD is named after the endpoint with a component `Frontend`, so `<endpoint>-frontend` on port 8000 in the
 * inference namespace. ClusterIP only: the gateway's Backend points at it.
 */
export function frontendService(endpointName: string): { name: string; namespace: string; port: number } {
    return { name: `${endpointName}-frontend`, namespace: INFERENCE_NAMESPACE, port: FRONTEND_PORT };
}

/**
 * What placement needs to know of a GPU node pool, whatever built it: its name, node profile (rail table or EFA
 * layout) and node count (on-prem: its named hosts; EKS: the node group's desired size, the figure the hub's
 * capacity check uses too, programs/spoke-registry.ts `spokeGpuCapacity`).
 */
export interface PlacementPool {
    name: string;
    profile: NodeProfile;
    nodeCount: number;
}

/** An endpoint and the node pool it runs on. */
export interface Placement<P extends PlacementPool = PlacementPool> {
    endpoint: Endpoint;
    index: number;
    pool: P;
}

/**
 * Assigns each endpoint the hub placed on this spoke to a node pool and checks it fits: a worker's GPUs within one
 * node (workers never span nodes), the endpoint's GPUs within the pool, one Mooncake store per node, and an RDMA
 * path for KV traffic (rails, or EFA without Mooncake).
 *
 * @param contractKey how errors name the hub's endpoint list, e.g. `hub output spokeContracts.hn1`
 * @returns placements and the problems found (the caller throws one ConfigError with all of them)
 */
export function placeEndpoints<P extends PlacementPool>(
    endpoints: Endpoint[],
    pools: P[],
    serving: ServingConfig,
    contractKey: string,
): { placements: Array<Placement<P>>; issues: ConfigIssue[] } {
    const issues: ConfigIssue[] = [];
    const placements: Array<Placement<P>> = [];
    const byName = new Map(pools.map((p) => [p.name, p]));
    const used = new Map<string, number>();
    endpoints.forEach((e, index) => {
        const key = `${contractKey}.endpoints[${index}]`;
        const wanted = serving.endpointPools[e.name];
        let pool: P | undefined;
        if (wanted !== undefined) {
            pool = byName.get(wanted);
            if (!pool) {
                issues.push({
                    key: `platform:serving.endpointPools.${e.name}`,
                    message: `unknown node pool "${wanted}" (known: ${[...byName.keys()].join(", ")})`,
                });
                return;
            }
        } else if (pools.length === 1) {
            pool = pools[0];
        } else {
            issues.push({
                key: `platform:serving.endpointPools.${e.name}`,
                message: `endpoint "${e.name}" is placed on this spoke but the spoke has ${pools.length} node pools (${[...byName.keys()].join(", ")}); say which one runs it`,
            });
            return;
        }
        const gpusPerNode = pool.profile.gpu.count;
        const groups =
            e.topology.mode === "disaggregated"
                ? [["prefill", e.topology.prefill] as const, ["decode", e.topology.decode] as const]
                : [["workers", e.topology.workers] as const];
        for (const [role, g] of groups) {
            if (g.gpusPerWorker > gpusPerNode) {
                issues.push({
                    key: `${key}.topology.${role}.gpusPerWorker`,
                    message: `${g.gpusPerWorker} GPUs per worker do not fit a node of pool "${pool.name}" (${pool.profile.name}: ${gpusPerNode} GPUs); a worker never spans nodes`,
                });
            }
        }
        if (e.gatedModel && !serving.hfTokenSecret)
            issues.push({
                key: "platform:serving.hfTokenSecret",
                message: `endpoint "${e.name}" serves ${e.model}, a gated Hugging Face model (${key}.gatedModel): its workers and model-cache pre-stage need a token; name the Secret in the inference namespace holding it under key HF_TOKEN`,
            });
        used.set(pool.name, (used.get(pool.name) ?? 0) + endpointGpus(e));
        const hasRails = pool.profile.rails.length > 0;
        const efa = (pool.profile as { efa?: unknown }).efa !== undefined;
        if (!hasRails && !efa)
            issues.push({ key: `${key}`, message: `pool "${pool.name}" has no RDMA fabric (no rails, no EFA) for KV transfer` });
        if (e.kvPool.kind === "mooncake") {
            if (e.kvPool.storeReplicas > pool.nodeCount) {
                issues.push({
                    key: `${key}.kvPool.storeReplicas`,
                    message: `${e.kvPool.storeReplicas} Mooncake stores on pool "${pool.name}" with ${pool.nodeCount} node(s); at most one store per node`,
                });
            }
            if (e.engine === "trtllm")
                issues.push({
                    key: `${key}.kvPool`,
                    message: "engine trtllm has no Mooncake shared-pool integration in Dynamo; use kind none or engine vllm/sglang",
                });
            if (efa)
                issues.push({
                    key: `${key}.kvPool`,
                    message: `pool "${pool.name}" is EFA: Mooncake's EFA transport needs a build with USE_EFA, else it silently runs verbs (kvcache-ai/Mooncake#2070); use kind none`,
                });
        }
        placements.push({ endpoint: e, index, pool });
    });
    issues.push(...nodeHostBudget(placements, contractKey));
    for (const p of pools) {
        const n = used.get(p.name) ?? 0;
        const capacity = p.nodeCount * p.profile.gpu.count;
        if (n > capacity)
            issues.push({
                key: `${contractKey}.endpoints`,
                message: `endpoints on pool "${p.name}" need ${n} GPUs; its ${p.nodeCount} node(s) have ${capacity}`,
            });
    }
    return { placements, issues };
}

/**
 * RDMA resources a pod on this fabric requests (lib/nixl.ts `rdmaResources`) that the spoke's device plugin does not
 * advertise on the pool (`rdma/rail_<i>` from the NicClusterPolicy, `vpc.amazonaws.com/efa` from the EFA device
 * plugin). Non-empty means the pods would stay Pending: the caller refuses to render them.
 *
 * @param published extended resources the pool's device plugin advertises
 */
export function unpublishedRdmaResources(fabric: KvFabric, published: readonly string[]): string[] {
    return Object.keys(rdmaResources(fabric, 1)).filter((r) => !published.includes(r));
}

/**
 * Workers of one role an endpoint may have on ONE node at most: what fits a node by GPUs, capped by how many workers
 * the endpoint can have at all (the planner's GPU budget when it scales, else the configured replicas).
 */
function workersPerNode(e: Endpoint, gpusPerWorker: number, replicas: number, gpusPerNode: number): number {
    const total = e.planner.enabled ? Math.max(replicas, Math.floor(e.planner.maxGpuBudget / gpusPerWorker)) : replicas;
    return Math.min(total, Math.floor(gpusPerNode / gpusPerWorker));
}

/**
 * What the endpoints on each pool need from ONE node's host memory and local NVMe, in the worst packing, against the
 * node profile: KVBM host tiers (`kvTiers.hostGiB` per worker) plus one Mooncake store segment per endpoint with a pool
 * (`kvPool.segmentSizeGiB`; at most one store per node) plus {@link NODE_HOST_RESERVE_GIB} within `hostMemoryGiB`;
 * KVBM NVMe tiers (`kvTiers.nvmeGiB` per worker) within `localNvme.capacityGiB`. A profile without `hostMemoryGiB` or
 * `localNvme` cannot take an endpoint that needs it (nor the model cache, `fastStart.modelCache`).
 *
 * @returns one issue per endpoint key to change, naming the pool, its profile and the figures
 */
export function nodeHostBudget<P extends PlacementPool>(placements: Array<Placement<P>>, contractKey: string): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const byPool = new Map<string, Array<Placement<P>>>();
    for (const p of placements) byPool.set(p.pool.name, [...(byPool.get(p.pool.name) ?? []), p]);
    for (const [poolName, list] of byPool) {
        const profile = list[0].pool.profile;
        const gpn = profile.gpu.count;
        let host = NODE_HOST_RESERVE_GIB;
        let nvme = 0;
        const hostUsers: string[] = [];
        const nvmeUsers: string[] = [];
        for (const { endpoint: e, index } of list) {
            const key = `${contractKey}.endpoints[${index}]`;
            const groups = e.topology.mode === "disaggregated" ? [e.topology.prefill, e.topology.decode] : [e.topology.workers];
            const workers = groups.reduce((n, g) => n + workersPerNode(e, g.gpusPerWorker, g.replicas, gpn), 0);
            if (e.kvPool.kind === "mooncake") {
                host += e.kvPool.segmentSizeGiB;
                hostUsers.push(`${e.name} Mooncake segment ${e.kvPool.segmentSizeGiB} GiB`);
            }
            if (e.kvTiers) {
                if (profile.hostMemoryGiB === undefined)
                    issues.push({
                        key: `${key}.kvTiers.hostGiB`,
                        message: `pool "${poolName}" (profile ${profile.name}) declares no hostMemoryGiB, so a host tier cannot be checked against the node: add hostMemoryGiB to the profile or remove kvTiers`,
                    });
                host += workers * e.kvTiers.hostGiB;
                hostUsers.push(`${e.name} ${workers} worker(s) x ${e.kvTiers.hostGiB} GiB host tier`);
                if (e.kvTiers.nvmeGiB) {
                    nvme += workers * e.kvTiers.nvmeGiB;
                    nvmeUsers.push(`${e.name} ${workers} worker(s) x ${e.kvTiers.nvmeGiB} GiB`);
                    if (!profile.localNvme)
                        issues.push({
                            key: `${key}.kvTiers.nvmeGiB`,
                            message: `pool "${poolName}" (profile ${profile.name}) declares no localNvme: there is no local NVMe for the disk tier; add localNvme to the profile or remove nvmeGiB`,
                        });
                }
            }
            if (e.fastStart?.modelCache && !profile.localNvme)
                issues.push({
                    key: `${key}.fastStart.modelCache`,
                    message: `pool "${poolName}" (profile ${profile.name}) declares no localNvme for the per-node model cache: add localNvme to the profile or set modelCache false`,
                });
        }
        const last = list.filter((p) => p.endpoint.kvTiers).at(-1);
        if (!last) continue;
        const key = `${contractKey}.endpoints[${last.index}].kvTiers`;
        if (profile.hostMemoryGiB !== undefined && host > profile.hostMemoryGiB)
            issues.push({
                key: `${key}.hostGiB`,
                message: `a node of pool "${poolName}" (profile ${profile.name}, ${profile.hostMemoryGiB} GiB host memory) would need ${host} GiB: ${hostUsers.join(" + ")} + ${NODE_HOST_RESERVE_GIB} GiB reserved for the OS, kubelet and other pods; lower the host tier`,
            });
        if (profile.localNvme && nvme > profile.localNvme.capacityGiB)
            issues.push({
                key: `${key}.nvmeGiB`,
                message: `a node of pool "${poolName}" (profile ${profile.name}, ${profile.localNvme.capacityGiB} GiB local NVMe at ${profile.localNvme.mountPath}) would need ${nvme} GiB for NVMe tiers: ${nvmeUsers.join(" + ")}; lower the NVMe tier`,
            });
    }
    return issues;
}
