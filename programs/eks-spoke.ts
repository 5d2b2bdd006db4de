import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { CpuNodeGroup } from "../components/spoke/CpuNodeGroup";
import { EfaDevicePlugin } from "../components/spoke/EfaDevicePlugin";
import { EfaNodeGroup } from "../components/spoke/EfaNodeGroup";
import { EksCluster } from "../components/spoke/EksCluster";
import { GpuOperator } from "../components/spoke/GpuOperator";
import type { SpokeContract } from "../config/contract";
import type { EksSpokeConfig } from "../config/stack";
import { INFERENCE_NAMESPACE, PLATFORM_NAMESPACE } from "../lib/labels";
import { deployGateway, GatewayHandles } from "./gateway";
import { deployMetering } from "./metering";

/** The EKS cluster name of a spoke (`platform-<spoke>`). */
export function eksClusterName(cfg: EksSpokeConfig): string {
    return `platform-${cfg.spoke.name}`;
}

/**
 * Builds an EKS spoke: one `aws.Provider` for the cluster's region, the EKS cluster with its VPC and
 * add-ons, the Kubernetes provider built from the cluster, the CPU node group, one EFA node group per GPU
 * group, the EFA device plugin with an allowlist of exactly those instance types, and the GPU Operator set
 * up for the EKS AL2023 NVIDIA AMI. Returns the stack outputs.
 */
export async function buildEksSpoke(cfg: EksSpokeConfig, contract: SpokeContract, stackFile: string) {
    const awsProvider = new aws.Provider("aws", { region: cfg.cluster.region as aws.Region });
    const awsOpts: pulumi.ComponentResourceOptions = { providers: [awsProvider] };

    const eks = new EksCluster("eks", {
        clusterName: eksClusterName(cfg),
        region: cfg.cluster.region,
        kubernetesVersion: cfg.cluster.kubernetesVersion,
        serviceCidr: cfg.cluster.serviceCidr,
        endpointPublicAccess: cfg.cluster.endpointPublicAccess,
        publicAccessCidrs: cfg.cluster.publicAccessCidrs,
        vpc: cfg.cluster.vpc,
    }, awsOpts);

    const cpu = new CpuNodeGroup(`nodes-${cfg.nodeGroups.cpu.name}`, {
        clusterName: eks.clusterName,
        nodeRoleArn: eks.nodeRoleArn,
        subnetIds: eks.privateSubnets.map((s) => s.id),
        group: cfg.nodeGroups.cpu,
    }, awsOpts);
    const gpuGroups = cfg.nodeGroups.gpu.map((g, i) => {
        const subnet = eks.privateSubnets.find((s) => s.availabilityZone === g.availabilityZone);
        // resolveEks already checked the AZ against the VPC; this guards a future caller.
        if (!subnet) throw new Error(`node group ${g.name}: no private subnet in ${g.availabilityZone}`);
        return new EfaNodeGroup(`nodes-${g.name}`, {
            clusterName: eks.clusterName,
            nodeRoleArn: eks.nodeRoleArn,
            subnetId: subnet.id,
            securityGroupIds: [eks.clusterSecurityGroupId, eks.efaSecurityGroupId],
            group: g,
            pool: cfg.nodePools[i],
        }, awsOpts);
    });
    // CoreDNS needs schedulable nodes; add it once the CPU group exists.
    eks.addon("coredns", [cpu]);

    const provider = new k8s.Provider("k8s", { kubeconfig: eks.kubeconfig, enableServerSideApply: true }, { dependsOn: [cpu] });
    const opts: pulumi.ComponentResourceOptions = { providers: [provider] };
    const platformNs = new k8s.core.v1.Namespace("platform-ns", { metadata: { name: PLATFORM_NAMESPACE } }, { provider });
    const inferenceNs = new k8s.core.v1.Namespace("inference-ns", { metadata: { name: INFERENCE_NAMESPACE } }, { provider });

    new EfaDevicePlugin("efa-device-plugin", { instanceTypes: cfg.nodeGroups.gpu.map((g) => g.instanceType) }, opts);
    new GpuOperator("gpu-operator", { gpuDirectRdma: "dmabuf", useHostMofed: false, eksEfaAmi: true }, opts);

    // Agent Router + auth service and usage metering: the same deployments as on-prem spokes (programs/gateway.ts,
    // programs/metering.ts). Dynamo serving on the EFA pools is not wired yet (see programs/serving.ts).
    const handles: GatewayHandles = {};
    const gateway = await deployGateway({ spoke: cfg.spoke.name, hubStack: cfg.spoke.hubStack, stackFile, contract, gateway: cfg.gateway, handles }, { ...opts, dependsOn: [inferenceNs] });
    const metering = deployMetering({ spoke: cfg.spoke.name, contract, metering: cfg.metering, gateway: handles }, { ...opts, dependsOn: [platformNs] });

    return {
        spoke: cfg.spoke.name,
        placementRevision: contract.placementRevision,
        endpoints: contract.endpoints.map((e) => e.name),
        cluster: {
            name: eks.clusterName,
            endpoint: eks.endpoint,
            oidcIssuer: eks.oidcIssuer,
            kubernetesVersion: cfg.cluster.kubernetesVersion,
            vpcId: eks.vpcId,
        },
        nodeSelectors: Object.fromEntries(gpuGroups.map((g, i) => [cfg.nodeGroups.gpu[i].name, g.nodeSelector])),
        efaDevicesPerNode: Object.fromEntries(gpuGroups.map((g, i) => [cfg.nodeGroups.gpu[i].name, g.efaDevicesPerNode])),
        systemNodeSelector: cpu.nodeSelector,
        gateway,
        metering,
    };
}
