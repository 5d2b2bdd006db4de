import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { EksCpuNodeGroup } from "../../config/eks";
import { POOL_LABEL, SYSTEM_POOL_LABEL } from "../../lib/labels";
import { NODE_METADATA_OPTIONS } from "../../lib/eks";

/** Inputs of {@link CpuNodeGroup}. */
export interface CpuNodeGroupArgs {
    /** The EKS cluster the node group joins. */
    clusterName: pulumi.Input<string>;
    /** IAM role of the group's nodes (the cluster's node role). */
    nodeRoleArn: pulumi.Input<string>;
    /** Private subnets across AZs (the platform services spread over them). */
    subnetIds: pulumi.Input<string>[];
    /** `platform:nodeGroups.cpu` of the spoke file (config/eks.ts `EksCpuNodeGroupSchema`): name, instance types, scaling, root
     *  volume GiB. */
    group: EksCpuNodeGroup;
}

/**
 * The EKS node group for the platform's CPU services (Agent Router gateway, auth, metering, Mooncake master,
 * CoreDNS): AL2023 standard AMI, untainted, labelled `inference-platform.io/system=true`. Its launch template sets
 * IMDSv2 with hop limit 1 ({@link NODE_METADATA_OPTIONS}) and the encrypted gp3 root volume.
 */
export class CpuNodeGroup extends pulumi.ComponentResource {
    public readonly nodeGroup: aws.eks.NodeGroup;
    public readonly launchTemplate: aws.ec2.LaunchTemplate;
    /** Node selector for platform services. */
    public readonly nodeSelector: Record<string, string>;

    constructor(name: string, args: CpuNodeGroupArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:CpuNodeGroup", name, {}, opts);
        const g = args.group;
        this.nodeSelector = { [SYSTEM_POOL_LABEL]: "true" };
        const tags = { [POOL_LABEL]: g.name };
        this.launchTemplate = new aws.ec2.LaunchTemplate(
            `${name}-lt`,
            {
                description: `System node group ${g.name}`,
                metadataOptions: NODE_METADATA_OPTIONS,
                blockDeviceMappings: [
                    {
                        deviceName: "/dev/xvda",
                        ebs: { volumeSize: g.rootVolumeGiB, volumeType: "gp3", encrypted: "true", deleteOnTermination: "true" },
                    },
                ],
                tagSpecifications: [{ resourceType: "instance", tags }],
                tags,
            },
            { parent: this },
        );
        this.nodeGroup = new aws.eks.NodeGroup(
            `${name}-ng`,
            {
                clusterName: args.clusterName,
                // A name prefix: a replacement exists before the old group (which carries the gateway, auth and metering) goes.
                nodeGroupNamePrefix: `${g.name}-`,
                nodeRoleArn: args.nodeRoleArn,
                subnetIds: args.subnetIds,
                instanceTypes: g.instanceTypes,
                amiType: "AL2023_x86_64_STANDARD",
                capacityType: "ON_DEMAND",
                // Root volume size lives in the launch template (EKS refuses diskSize together with a launch template).
                launchTemplate: { id: this.launchTemplate.id, version: this.launchTemplate.latestVersion.apply(String) },
                scalingConfig: { desiredSize: g.scaling.desired, minSize: g.scaling.min, maxSize: g.scaling.max },
                labels: { [POOL_LABEL]: g.name, [SYSTEM_POOL_LABEL]: "true" },
                updateConfig: { maxUnavailable: 1 },
                tags: { [POOL_LABEL]: g.name },
            },
            { parent: this },
        );
        this.registerOutputs({ nodeSelector: this.nodeSelector });
    }
}
