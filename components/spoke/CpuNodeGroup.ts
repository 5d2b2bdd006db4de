import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { EksCpuNodeGroup } from "../../config/eks";
import { POOL_LABEL, SYSTEM_POOL_LABEL } from "../../lib/labels";

export interface CpuNodeGroupArgs {
    clusterName: pulumi.Input<string>;
    nodeRoleArn: pulumi.Input<string>;
    /** Private subnets across AZs (the platform services spread over them). */
    subnetIds: pulumi.Input<string>[];
    group: EksCpuNodeGroup;
}

/**
 * The EKS node group for the platform's CPU services (Agent Router gateway, auth, metering, Mooncake master,
 * CoreDNS): AL2023 standard AMI, untainted, labelled `inference-platform.io/system=true`.
 */
export class CpuNodeGroup extends pulumi.ComponentResource {
    public readonly nodeGroup: aws.eks.NodeGroup;
    /** Node selector for platform services. */
    public readonly nodeSelector: Record<string, string>;

    constructor(name: string, args: CpuNodeGroupArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:CpuNodeGroup", name, {}, opts);
        const g = args.group;
        this.nodeSelector = { [SYSTEM_POOL_LABEL]: "true" };
        this.nodeGroup = new aws.eks.NodeGroup(`${name}-ng`, {
            clusterName: args.clusterName,
            nodeGroupName: g.name,
            nodeRoleArn: args.nodeRoleArn,
            subnetIds: args.subnetIds,
            instanceTypes: g.instanceTypes,
            amiType: "AL2023_x86_64_STANDARD",
            capacityType: "ON_DEMAND",
            diskSize: g.rootVolumeGiB,
            scalingConfig: { desiredSize: g.scaling.desired, minSize: g.scaling.min, maxSize: g.scaling.max },
            labels: { [POOL_LABEL]: g.name, [SYSTEM_POOL_LABEL]: "true" },
            updateConfig: { maxUnavailable: 1 },
            tags: { [POOL_LABEL]: g.name },
        }, { parent: this });
        this.registerOutputs({ nodeSelector: this.nodeSelector });
    }
}
