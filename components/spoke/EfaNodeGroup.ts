import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { Capacity, EksGpuNodeGroup } from "../../config/eks";
import type { NodePool } from "../../config/stack";
import { base64, checkInstanceTypeForEfa, efaNetworkInterfaces, nodeBootstrapUserData } from "../../lib/efa";
import {
    EFA_DEVICES_LABEL,
    NODE_GROUP_TAG,
    FABRIC_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_TAINT,
    MEMLOCK_LABEL,
    POOL_LABEL,
    PROFILE_LABEL,
} from "../../lib/labels";
import type { Toleration } from "./GpuNodePool";
import { NODE_METADATA_OPTIONS } from "../../lib/eks";

export { NODE_METADATA_OPTIONS } from "../../lib/eks";

/** Inputs of {@link EfaNodeGroup}. */
export interface EfaNodeGroupArgs {
    /** The EKS cluster the node group joins. */
    clusterName: pulumi.Input<string>;
    /** IAM role of the group's nodes (the cluster's node role). */
    nodeRoleArn: pulumi.Input<string>;
    /** The private subnet in the group's availability zone (only that one: placement group and reservation are per-AZ). */
    subnetId: pulumi.Input<string>;
    /** Every EFA interface joins these: the cluster security group and the EFA self-referencing group. */
    securityGroupIds: pulumi.Input<string>[];
    /** The node group from the stack file. */
    group: EksGpuNodeGroup;
    /** The pool resolved from it (profile with the `efa` layout). */
    pool: NodePool;
}

/** EKS managed node group `capacityType` and launch-template capacity settings for a {@link Capacity}. Pure. */
export function capacitySettings(c: Capacity): {
    capacityType: "ON_DEMAND" | "CAPACITY_BLOCK";
    capacityReservationSpecification?: { capacityReservationTarget: { capacityReservationId: string } };
    instanceMarketOptions?: { marketType: "capacity-block" };
} {
    switch (c.type) {
        case "on-demand":
            return { capacityType: "ON_DEMAND" };
        case "odcr":
            return {
                capacityType: "ON_DEMAND",
                capacityReservationSpecification: { capacityReservationTarget: { capacityReservationId: c.reservationId } },
            };
        case "capacity-block":
            return {
                capacityType: "CAPACITY_BLOCK",
                capacityReservationSpecification: { capacityReservationTarget: { capacityReservationId: c.reservationId } },
                instanceMarketOptions: { marketType: "capacity-block" },
            };
    }
}

/**
 * An EKS managed node group of H200 instances (p5en.48xlarge / p5e.48xlarge) wired for EFA, built from our own
 * launch template rather than pulumi-eks' `enableEfaSupport` (which cannot be combined with a custom template,
 * so it cannot do Capacity Blocks):
 * - network interfaces from the instance type's network cards (`aws.ec2.getInstanceType`, checked against the
 *   node profile): card 0 ENA + EFA-only, every other card EFA-only (lib/efa.ts {@link efaNetworkInterfaces});
 * - a `cluster` placement group in the group's single AZ;
 * - optional On-Demand Capacity Reservation or Capacity Block;
 * - node bootstrap: containerd `LimitMEMLOCK=infinity`, 2 MiB huge pages, instance-store RAID0;
 * - GPU labels (pool, profile, product, fabric=efa, EFA count) and the platform GPU taint.
 *
 * @throws Error from the constructor when the pool's node profile has no `efa` layout, or when lib/efa.ts
 *   {@link efaNetworkInterfaces} refuses its card count (not a positive integer); during preview/up (inside the
 *   `aws.ec2.getInstanceType` output), lib/efa.ts `checkInstanceTypeForEfa`'s Error when the instance type lacks EFA or
 *   its network-card count differs from the profile's
 */
export class EfaNodeGroup extends pulumi.ComponentResource {
    public readonly nodeGroup: aws.eks.NodeGroup;
    public readonly launchTemplate: aws.ec2.LaunchTemplate;
    public readonly placementGroup: aws.ec2.PlacementGroup;
    /** Node selector that pins a workload to this pool. */
    public readonly nodeSelector: Record<string, string>;
    /** Tolerations a workload needs for the pool's GPU taint. */
    public readonly tolerations: Toleration[];
    /** EFA devices per node (= network cards). */
    public readonly efaDevicesPerNode: number;

    constructor(name: string, args: EfaNodeGroupArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:EfaNodeGroup", name, {}, opts);
        const { group, pool } = args;
        const efa = pool.profile.efa;
        if (!efa) throw new Error(`node group ${group.name}: profile ${pool.profile.name} has no EFA layout`);
        this.efaDevicesPerNode = efa.networkCards;
        this.nodeSelector = { [POOL_LABEL]: pool.name };
        this.tolerations = [{ key: GPU_TAINT.key, operator: "Equal", value: GPU_TAINT.value, effect: GPU_TAINT.effect }];
        const tags = { [POOL_LABEL]: pool.name, [NODE_GROUP_TAG]: group.name };

        const info = aws.ec2.getInstanceTypeOutput({ instanceType: group.instanceType }, { parent: this });
        // The live check runs on the invoke (known during preview). The layout is built from the profile's card
        // count, which the check proves equal to maximumNetworkCards, with the security group ids as nested
        // inputs: on a new stack they are unknown in `pulumi preview`, and building the whole list inside an
        // apply on them made networkInterfaces unknown, so the EFA launch-template policy could not decide.
        const checked = info.apply((it) => {
            checkInstanceTypeForEfa(
                {
                    instanceType: group.instanceType,
                    maximumNetworkCards: it.maximumNetworkCards,
                    efaSupported: it.efaSupported,
                    efaMaximumInterfaces: it.efaMaximumInterfaces,
                },
                efa.networkCards,
            );
            return it.maximumNetworkCards;
        });
        const interfaces = efaNetworkInterfaces(efa.networkCards, ["(security groups)"]).map((i) => ({
            ...i,
            securityGroups: args.securityGroupIds,
        }));

        this.placementGroup = new aws.ec2.PlacementGroup(`${name}-pg`, { strategy: "cluster", tags }, { parent: this });
        const cap = capacitySettings(group.capacity);
        this.launchTemplate = new aws.ec2.LaunchTemplate(
            `${name}-lt`,
            {
                description: checked.apply(() => `EFA launch template for ${group.instanceType} node group ${group.name}`),
                networkInterfaces: interfaces,
                placement: { groupName: this.placementGroup.name, availabilityZone: group.availabilityZone },
                capacityReservationSpecification: cap.capacityReservationSpecification,
                instanceMarketOptions: cap.instanceMarketOptions,
                userData: base64(nodeBootstrapUserData({ hugepages2Mi: group.hugepages2Mi, localStorageRaid0: true })),
                blockDeviceMappings: [
                    {
                        deviceName: "/dev/xvda",
                        ebs: { volumeSize: group.rootVolumeGiB, volumeType: "gp3", encrypted: "true", deleteOnTermination: "true" },
                    },
                ],
                metadataOptions: NODE_METADATA_OPTIONS,
                tagSpecifications: [{ resourceType: "instance", tags }],
                tags,
            },
            { parent: this },
        );

        this.nodeGroup = new aws.eks.NodeGroup(
            `${name}-ng`,
            {
                clusterName: args.clusterName,
                // A name prefix, not a fixed name: a replacement (new launch template shape, subnet, AMI type) is created
                // before the old group is deleted, instead of deleting the pool first (fixed names force that order).
                nodeGroupNamePrefix: `${group.name}-`,
                nodeRoleArn: args.nodeRoleArn,
                subnetIds: [args.subnetId],
                instanceTypes: [group.instanceType],
                amiType: "AL2023_x86_64_NVIDIA",
                capacityType: cap.capacityType,
                scalingConfig: { desiredSize: group.scaling.desired, minSize: group.scaling.min, maxSize: group.scaling.max },
                launchTemplate: { id: this.launchTemplate.id, version: this.launchTemplate.latestVersion.apply(String) },
                labels: {
                    [POOL_LABEL]: pool.name,
                    [PROFILE_LABEL]: pool.profile.name,
                    [GPU_PRODUCT_LABEL]: pool.profile.gpu.product,
                    [FABRIC_LABEL]: "efa",
                    [MEMLOCK_LABEL]: "true",
                    [EFA_DEVICES_LABEL]: String(efa.networkCards),
                },
                taints: [{ key: GPU_TAINT.key, value: GPU_TAINT.value, effect: "NO_SCHEDULE" }],
                // Terminate first, one node at a time: p5en capacity is reserved or scarce, so surging an extra GPU node
                // per update fails or waits (EKS managed node groups `updateStrategy: MINIMAL`, for accelerated instances).
                updateConfig: { maxUnavailable: 1, updateStrategy: "MINIMAL" },
                tags,
            },
            { parent: this },
        );

        this.registerOutputs({ nodeSelector: this.nodeSelector, efaDevicesPerNode: this.efaDevicesPerNode });
    }
}
