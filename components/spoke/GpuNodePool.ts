import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { NodePool } from "../../config/stack";
import {
    FABRIC_LABEL,
    FRONTEND_NICS_ANNOTATION,
    GPU_PRODUCT_LABEL,
    GPU_TAINT,
    MEMLOCK_LABEL,
    POOL_LABEL,
    PROFILE_LABEL,
    RAIL_TABLE_ANNOTATION,
    RAIL_TOPOLOGY_LABEL,
} from "../../lib/labels";
import { railsInOrder } from "../../config/nodeProfile";

/** Inputs of {@link GpuNodePool}. */
export interface GpuNodePoolArgs {
    /** The validated pool (profile resolved) from the stack config. */
    pool: NodePool;
    /** Backend fabric of this pool's rails. */
    fabric: "infiniband";
}

/** A pod toleration (core/v1 Toleration shape). */
export interface Toleration {
    key: string;
    operator: "Equal" | "Exists";
    value?: string;
    effect: string;
}

/**
 * An on-prem pool of HGX H200 nodes that already run Kubernetes. Labels and taints the named nodes with
 * server-side-apply patches (`NodePatch`, so fields owned by other managers are left alone) and publishes
 * the pool's rail table on each node as an annotation, which the policy pack reads.
 *
 * Workloads use {@link nodeSelector} and {@link tolerations} to land on the pool.
 */
export class GpuNodePool extends pulumi.ComponentResource {
    /** Node selector that pins a workload to this pool. */
    public readonly nodeSelector: Record<string, string>;
    /** Tolerations a workload needs for the pool's GPU taint. */
    public readonly tolerations: Toleration[];
    /** The Node patches, one per node. */
    public readonly patches: k8s.core.v1.NodePatch[];

    constructor(name: string, args: GpuNodePoolArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:GpuNodePool", name, {}, opts);
        const { pool } = args;
        const profile = pool.profile;
        this.nodeSelector = { [POOL_LABEL]: pool.name };
        this.tolerations = [{ key: GPU_TAINT.key, operator: "Equal", value: GPU_TAINT.value, effect: GPU_TAINT.effect }];

        const railTable = railsInOrder(profile).map((r) => ({
            rail: r.rail,
            gpu: r.gpu,
            gpuPciAddress: r.gpuPciAddress,
            hca: r.hca,
            netdev: r.netdev,
            pciAddress: r.pciAddress,
            numa: r.numa,
            linkLayer: r.linkLayer,
            linkRateGbps: r.linkRateGbps,
        }));
        const labels = {
            [POOL_LABEL]: pool.name,
            [PROFILE_LABEL]: profile.name,
            [GPU_PRODUCT_LABEL]: profile.gpu.product,
            [FABRIC_LABEL]: args.fabric,
            [RAIL_TOPOLOGY_LABEL]: `rail-optimized-${profile.rails.length}`,
            [MEMLOCK_LABEL]: String(pool.memlockUnlimited),
        };
        this.patches = pool.nodes.map(
            (node) =>
                new k8s.core.v1.NodePatch(
                    `${name}-${node}`,
                    {
                        metadata: {
                            name: node,
                            labels,
                            annotations: {
                                [RAIL_TABLE_ANNOTATION]: JSON.stringify(railTable),
                                [FRONTEND_NICS_ANNOTATION]: JSON.stringify(profile.frontend),
                            },
                        },
                        spec: { taints: [{ key: GPU_TAINT.key, value: GPU_TAINT.value, effect: GPU_TAINT.effect }] },
                    },
                    { parent: this },
                ),
        );

        this.registerOutputs({ nodeSelector: this.nodeSelector, tolerations: this.tolerations });
    }
}
