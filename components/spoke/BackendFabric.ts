import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { NodePool, RailPool } from "../../config/stack";
import { versions } from "../../config/versions";
import { FABRIC_LABEL } from "../../lib/labels";
import { railNetworkName, rdmaSharedDevicePluginConfig, railResource } from "../../lib/rails";

/** Inputs of {@link BackendFabric}. */
export interface BackendFabricArgs {
    /** InfiniBand node pools whose rails this fabric serves. */
    pools: NodePool[];
    /** One IP pool per rail (rail i of every node on leaf i shares one subnet). */
    railPools: RailPool[];
    /** Pods that may share one rail HCA (`rdmaHcaMax`). */
    rdmaHcaMax: number;
    /** Addresses nv-ipam hands each node per rail. */
    perNodeBlockSize: number;
    /**
     * Render the rail IP networks (`platform:backend.railNetworks`): NicClusterPolicy `secondaryNetwork` and `nvIpam`,
     * the IPPools and the IPoIBNetworks. Off, none of them exists: nothing in the platform's own pods reads an IP on a
     * rail, and a NetworkAttachmentDefinition no pod annotation names is inert (upstream/activation.ts
     * `ipoib-rail-networks`).
     */
    railNetworks: boolean;
    /** Namespace whose pods attach the rail networks (the NetworkAttachmentDefinitions are created there). */
    workloadNamespace: string;
    /** Namespace for the Network Operator and its IP pools. */
    namespace?: string;
}

/**
 * Helm values of the pinned network-operator chart. Pure. The chart installs the operator, its CRDs and NFD; the
 * SR-IOV network operator stays off (rails use the RDMA shared device plugin). The NIC configuration operator is not a
 * chart value (network-operator 26.1.2 templates read no `nicConfigurationOperator`): it is off because our
 * NicClusterPolicy has no `spec.nicConfigurationOperator` (Mellanox/network-operator@v26.1.2:deployment/network-operator/values.yaml,
 * upstream/charts/network-operator.ts).
 */
export function networkOperatorValues(): Record<string, unknown> {
    return { nfd: { enabled: true }, sriovNetworkOperator: { enabled: false } };
}

/** Name the Network Operator requires for its singleton NicClusterPolicy. */
export const NIC_CLUSTER_POLICY_NAME = "nic-cluster-policy";

/**
 * The rail-aligned InfiniBand backend: NVIDIA Network Operator (pinned chart) and a NicClusterPolicy whose RDMA shared
 * device plugin publishes one resource per rail (`rdma/rail_<i>`, selected by the rail's netdev from the rail table).
 *
 * With `railNetworks` only: nv-ipam, Multus and IPoIB CNI (`secondaryNetwork`), one nv-ipam IPPool per rail and one
 * IPoIBNetwork per (pool, rail), so a pod that needs an IP on its rails (RDMA CM) can attach the rail-i interface of
 * its node with an address from rail i's subnet. The operator renders each IPoIBNetwork as a
 * NetworkAttachmentDefinition of the same name in `spec.networkNamespace` (Mellanox/network-operator@v26.1.2:
 * manifests/state-ipoib-network/0010-ipoib-net-cr.yaml); Multus attaches it only to a pod whose
 * `k8s.v1.cni.cncf.io/networks` annotation names it, as `<workloadNamespace>/<pool>-rail-<i>`
 * (upstream/activation.ts `ipoib-rail-networks`, upstream/network-attachment.ts).
 *
 * @throws Error from the constructor when the pools' node profiles disagree on the rail count or on a rail's link
 *   layer (lib/rails.ts `rdmaSharedDevicePluginConfig`: one resource per rail must select the same HCAs on every node)
 */
export class BackendFabric extends pulumi.ComponentResource {
    /** Extended resources in rail order (`rdma/rail_0` ... `rdma/rail_7`). */
    public readonly railResources: string[];
    /**
     * Per node pool, the IPoIB network (NetworkAttachmentDefinition) names in rail order, all in the workload
     * namespace; empty without `railNetworks`.
     */
    public readonly railNetworks: Record<string, string[]>;
    /** The NicClusterPolicy (exported so workloads can depend on it). */
    public readonly nicClusterPolicy: k8s.apiextensions.CustomResource;

    constructor(name: string, args: BackendFabricArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:BackendFabric", name, {}, opts);
        const ns = args.namespace ?? "nvidia-network-operator";
        const pluginConfig = rdmaSharedDevicePluginConfig(
            args.pools.map((p) => p.profile),
            args.rdmaHcaMax,
        );
        this.railResources = pluginConfig.configList.map((_c, i) => railResource(i));

        const namespace = new k8s.core.v1.Namespace(`${name}-ns`, { metadata: { name: ns } }, { parent: this });
        const v = versions.networkOperator;
        const release = new k8s.helm.v3.Release(
            `${name}-network-operator`,
            {
                name: "network-operator",
                chart: v.chart,
                version: v.version,
                repositoryOpts: { repo: v.repo },
                namespace: ns,
                // The chart installs the operator, its CRDs and NFD; the NicClusterPolicy is ours (below).
                values: networkOperatorValues(),
                skipAwait: false,
            },
            { parent: this, dependsOn: [namespace] },
        );

        const img = (x: { repository: string; image: string; version: string }) => ({
            repository: x.repository,
            image: x.image,
            version: x.version,
        });
        this.nicClusterPolicy = new k8s.apiextensions.CustomResource(
            `${name}-nic-cluster-policy`,
            {
                apiVersion: "mellanox.com/v1alpha1",
                kind: "NicClusterPolicy",
                metadata: { name: NIC_CLUSTER_POLICY_NAME },
                spec: {
                    rdmaSharedDevicePlugin: { ...img(versions.rdmaSharedDevicePlugin), config: JSON.stringify(pluginConfig) },
                    ...(args.railNetworks
                        ? {
                              nvIpam: { ...img(versions.nvIpam), enableWebhook: false },
                              secondaryNetwork: {
                                  cniPlugins: img(versions.cniPlugins),
                                  multus: img(versions.multus),
                                  ipoib: img(versions.ipoibCni),
                              },
                          }
                        : {}),
                },
            },
            { parent: this, dependsOn: [release] },
        );

        const ibNodes = { nodeSelectorTerms: [{ matchExpressions: [{ key: FABRIC_LABEL, operator: "In", values: ["infiniband"] }] }] };
        this.railNetworks = {};
        if (!args.railNetworks) {
            this.registerOutputs({ railResources: this.railResources });
            return;
        }
        const ipPools = args.railPools.map(
            (rp) =>
                new k8s.apiextensions.CustomResource(
                    `${name}-ippool-rail-${rp.rail}`,
                    {
                        apiVersion: "nv-ipam.nvidia.com/v1alpha1",
                        kind: "IPPool",
                        metadata: { name: `rail-${rp.rail}`, namespace: ns },
                        spec: { subnet: rp.subnet, perNodeBlockSize: args.perNodeBlockSize, nodeSelector: ibNodes },
                    },
                    { parent: this, dependsOn: [this.nicClusterPolicy] },
                ),
        );

        for (const pool of args.pools) {
            this.railNetworks[pool.name] = [];
            for (const rail of [...pool.profile.rails].sort((a, b) => a.rail - b.rail)) {
                const netName = railNetworkName(pool.name, rail.rail);
                this.railNetworks[pool.name].push(netName);
                new k8s.apiextensions.CustomResource(
                    `${name}-ipoib-${netName}`,
                    {
                        apiVersion: "mellanox.com/v1alpha1",
                        kind: "IPoIBNetwork",
                        metadata: { name: netName },
                        spec: {
                            networkNamespace: args.workloadNamespace,
                            master: rail.netdev,
                            ipam: JSON.stringify({ type: "nv-ipam", poolName: `rail-${rail.rail}` }),
                        },
                    },
                    { parent: this, dependsOn: ipPools },
                );
            }
        }
        this.registerOutputs({ railResources: this.railResources, railNetworks: this.railNetworks });
    }
}
