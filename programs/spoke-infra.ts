import type * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import type { Toleration } from "../lib/dgd";
import type { GpuDirectMode } from "../lib/preflight";
import { isEksSpoke, type SpokeConfig } from "../config/stack";
import type { PlacementPool } from "../lib/serving";

/**
 * A spoke = provider-specific infrastructure + shared workloads. The infrastructure builders
 * (programs/onprem-spoke.ts `buildOnPremInfra`, programs/eks-spoke.ts `buildEksInfra`) each return a
 * {@link SpokeInfra}; programs/workloads.ts `deployWorkloads` deploys the gateway, serving and metering on it the same
 * way for every provider. Nothing here creates resources.
 */

/** One GPU node pool as the shared workloads see it (on-prem GpuNodePool, EKS EfaNodeGroup). */
export interface SpokePool extends PlacementPool {
    /** Pool name (`platform:nodePools[].name` / `platform:nodeGroups.gpu[].name`). */
    name: string;
    /** On-prem: the named hosts; EKS: the node group's desired size. */
    nodeCount: number;
    /** Node selector that pins a workload to the pool (`inference-platform.io/pool: <name>`). */
    nodeSelector: Record<string, string>;
    /** Tolerations for the pool's GPU taint. */
    tolerations: Toleration[];
    /** Nodes run containerd and kubelet with `LimitMEMLOCK=infinity` (always true on EKS: the launch template sets it). */
    memlockUnlimited: boolean;
    /** Backend fabric: rail-aligned InfiniBand (on-prem) or EFA (EKS). */
    fabric: "infiniband" | "efa";
    /**
     * Extended resources the stack's device plugin advertises on the pool's nodes: `rdma/rail_<i>` from the
     * NicClusterPolicy (on-prem), `vpc.amazonaws.com/efa` from the EFA device plugin (EKS).
     */
    rdmaResources: string[];
    /** North-south HCAs of the pool, never used for KV traffic; empty on EKS (the VPC is the frontend). */
    frontendHcas: string[];
    /** 2 MiB huge pages each node reserves for the EFA provider; 0 on InfiniBand pools. */
    hugepages2MiPerNode: number;
}

/** What a spoke's infrastructure hands to the shared workloads. */
export interface SpokeInfra {
    /** The stack's one Kubernetes provider; every workload gets it through `providers`. */
    provider: k8s.Provider;
    /** `platform-system`: gateway, auth, metering. */
    platformNamespace: k8s.core.v1.Namespace;
    /** `inference`: DynamoGraphDeployments, Mooncake, the preflight script. */
    inferenceNamespace: k8s.core.v1.Namespace;
    /** GPU pools in stack-file order. */
    pools: SpokePool[];
    /**
     * Node selector of the CPU nodes for the Dynamo Frontend and Planner and the Mooncake master: the CPU node group's
     * on EKS, `platform:serving.systemNodeSelector` on-prem. Empty: no selector (any untainted node).
     */
    systemNodeSelector: Record<string, string>;
    /** What advertises the pools' RDMA resources (BackendFabric, EfaDevicePlugin); RDMA workloads depend on it. */
    devicePlugins: pulumi.Resource[];
    /** What provides GPUDirect RDMA (GpuOperator); RDMA workloads and the preflight depend on it. */
    gpuDirect: pulumi.Resource[];
    /** The GPUDirect RDMA mode it provides; the RDMA preflight proves it on every GPU pod (lib/preflight.ts). */
    gpuDirectMode: GpuDirectMode;
    /** Minimum backend port rate in Gb/s (gigabits) the preflight enforces (InfiniBand rails; informational on EFA). */
    minLinkRateGbps: number;
    /** Provider-specific stack outputs (rail resources, cluster, node selectors, ...), merged into the spoke's outputs. */
    outputs: Record<string, unknown>;
    /**
     * EKS: the default StorageClass this stack creates and what provisions it (EBS CSI add-on); the metering spool
     * and collector queue PVCs use it (unless `platform:metering.storageClassName` names another) and wait for it.
     * Undefined on-prem: the cluster's own default class.
     */
    storage?: { className: string; dependsOn: pulumi.Resource[] };
    /**
     * EKS: what provisions the gateway proxy's load balancer (the AWS Load Balancer Controller release). The objects that
     * make Envoy Gateway create the LoadBalancer Service depend on it, so a destroy deletes them, and with them the NLB,
     * while the controller is still there to delete it (it holds a finalizer on the Service). Undefined on-prem.
     */
    loadBalancerProvisioner?: pulumi.Resource[];
}

/**
 * The GPU pools as placement sees them, straight from the validated config (no resources): name, node profile and
 * node count (on-prem: its named hosts; EKS: the node group's desired size). Both infra builders start their
 * {@link SpokePool}s from it, and programs/spoke.ts checks placement with it before any resource is declared.
 */
export function placementPools(cfg: SpokeConfig): PlacementPool[] {
    return cfg.nodePools.map((p, i) => ({
        name: p.name,
        profile: p.profile,
        nodeCount: isEksSpoke(cfg) ? cfg.nodeGroups.gpu[i].scaling.desired : p.nodes.length,
    }));
}
