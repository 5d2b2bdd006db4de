import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { CpuNodeGroup } from "../components/spoke/CpuNodeGroup";
import { EfaDevicePlugin } from "../components/spoke/EfaDevicePlugin";
import { EfaNodeGroup } from "../components/spoke/EfaNodeGroup";
import { addonPodIdentityTrust, EksCluster } from "../components/spoke/EksCluster";
import { LBC_NAMESPACE, LBC_SERVICE_ACCOUNT, lbcPolicy, lbcValues } from "../lib/aws-load-balancer-controller";
import { CERT_MANAGER_NAMESPACE, CERT_MANAGER_SERVICE_ACCOUNT, certManagerRoute53Policy } from "../lib/edge";
import { versions } from "../config/versions";
import { GpuOperator } from "../components/spoke/GpuOperator";
import { prometheusOf } from "../config/observability";
import type { SpokeContract } from "../config/contract";
import type { EksSpokeConfig } from "../config/stack";
import { eksClusterNameOf } from "../lib/eks";
import { INFERENCE_NAMESPACE, PLATFORM_NAMESPACE } from "../lib/labels";
import { EFA_RESOURCE } from "../lib/nixl";
import { placementPools, type SpokeInfra } from "./spoke-infra";

/** Annotation that makes a StorageClass the cluster default (kubernetes/kubernetes pkg/volume/util `IsDefaultAnnotation`). */
export const DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class";

/**
 * Pure: the spoke's default StorageClass body: EBS CSI (`ebs.csi.aws.com`), gp3, encrypted, bound where the pod
 * lands (`WaitForFirstConsumer`: EBS volumes are per-AZ), expandable, and `Retain` (a spool or collector queue
 * may hold unshipped usage: a deleted PVC must not delete it). Parameters from kubernetes-sigs/aws-ebs-csi-driver
 * docs/parameters.md (`type`, `encrypted`).
 */
export function gp3StorageClass() {
    return {
        provisioner: "ebs.csi.aws.com",
        parameters: { type: "gp3", encrypted: "true", "csi.storage.k8s.io/fstype": "ext4" },
        volumeBindingMode: "WaitForFirstConsumer",
        reclaimPolicy: "Retain",
        allowVolumeExpansion: true,
    };
}

/** The EKS cluster name of a spoke (`platform-<spoke>`). */
export function eksClusterName(cfg: EksSpokeConfig): string {
    return eksClusterNameOf(cfg.spoke.name);
}

/**
 * The infrastructure of an EKS spoke: one `aws.Provider` for the cluster's region, the EKS cluster with its VPC and
 * add-ons, the Kubernetes provider built from the cluster, the CPU node group, one EFA node group per GPU group, the
 * EFA device plugin with an allowlist of exactly those instance types, and the GPU Operator set up for the EKS AL2023
 * NVIDIA AMI (the AMI provides the driver and GPUDirect). Workloads go on top with programs/workloads.ts
 * `deployWorkloads`; the Dynamo Frontend/Planner run on the CPU node group.
 *
 * @throws Error when a GPU group's availability zone has no private subnet (the config loader checks this first)
 */
export function buildEksInfra(cfg: EksSpokeConfig, contract?: Pick<SpokeContract, "identity" | "policy" | "failover">): SpokeInfra {
    const awsProvider = new aws.Provider("aws", { region: cfg.cluster.region as aws.Region });
    const awsOpts: pulumi.ComponentResourceOptions = { providers: [awsProvider] };

    const eks = new EksCluster(
        "eks",
        {
            clusterName: eksClusterName(cfg),
            region: cfg.cluster.region,
            kubernetesVersion: cfg.cluster.kubernetesVersion,
            serviceCidr: cfg.cluster.serviceCidr,
            endpointPublicAccess: cfg.cluster.endpointPublicAccess,
            publicAccessCidrs: cfg.cluster.publicAccessCidrs,
            vpc: cfg.cluster.vpc,
            access: cfg.cluster.access,
        },
        awsOpts,
    );

    const cpu = new CpuNodeGroup(
        `nodes-${cfg.nodeGroups.cpu.name}`,
        {
            clusterName: eks.clusterName,
            nodeRoleArn: eks.nodeRoleArn,
            subnetIds: eks.privateSubnets.map((s) => s.id),
            group: cfg.nodeGroups.cpu,
        },
        { ...awsOpts, dependsOn: eks.nodeRolePolicies },
    );
    const gpuGroups = cfg.nodeGroups.gpu.map((g, i) => {
        const subnet = eks.privateSubnets.find((s) => s.availabilityZone === g.availabilityZone);
        // resolveEks already checked the AZ against the VPC; this guards a future caller.
        if (!subnet) throw new Error(`node group ${g.name}: no private subnet in ${g.availabilityZone}`);
        return new EfaNodeGroup(
            `nodes-${g.name}`,
            {
                clusterName: eks.clusterName,
                nodeRoleArn: eks.nodeRoleArn,
                subnetId: subnet.id,
                securityGroupIds: [eks.clusterSecurityGroupId, eks.efaSecurityGroupId],
                group: g,
                pool: cfg.nodePools[i],
            },
            { ...awsOpts, dependsOn: eks.nodeRolePolicies },
        );
    });
    // CoreDNS and the EBS CSI controller need schedulable nodes; add them once the CPU group exists.
    eks.addon("coredns", [cpu]);
    const ebsCsi = eks.addEbsCsi([cpu]);

    // Each of the auth and metering service accounts gets its own AWS role (hub SpokeIdentity), by EKS Pod Identity:
    // each role's trust admits exactly this cluster and that one namespace/service account; no key exists anywhere.
    // A hub deployed before per-service roles names one role for both (`policy.roleArn`).
    if (contract?.identity?.mode === "pod-identity") {
        for (const sa of contract.identity.serviceAccounts) {
            new aws.eks.PodIdentityAssociation(
                `pod-identity-${sa.serviceAccount}`,
                {
                    clusterName: eks.clusterName,
                    namespace: sa.namespace,
                    serviceAccount: sa.serviceAccount,
                    roleArn: sa.roleArn ?? contract.policy.roleArn,
                },
                { parent: eks, dependsOn: [eks.podIdentityAgent] },
            );
        }
    }

    // ACME DNS-01 on Route 53 for the tenant edge's certificate: cert-manager's own role through Pod Identity, limited
    // to the challenge record of the listener's hostname in the one zone (lib/edge.ts certManagerRoute53Policy).
    const tls = cfg.gateway.listener.tls;
    if (tls?.source === "acme-dns01") {
        const role = new aws.iam.Role(
            "cert-manager-dns01-role",
            {
                description: `cert-manager (${CERT_MANAGER_NAMESPACE}/${CERT_MANAGER_SERVICE_ACCOUNT}) DNS-01 on ${tls.route53.hostedZoneId} of ${eksClusterName(cfg)}`,
                assumeRolePolicy: pulumi
                    .all([eks.accountId, eks.cluster.arn])
                    .apply(([a, c]) => addonPodIdentityTrust(a, c, CERT_MANAGER_NAMESPACE, CERT_MANAGER_SERVICE_ACCOUNT)),
            },
            { parent: eks },
        );
        const permissions = new aws.iam.RolePolicy(
            "cert-manager-dns01-permissions",
            {
                role: role.name,
                // Behind the global failover hostname also its challenge record, in its zone (checked before anything
                // is declared: programs/spoke.ts requireGlobalDns01).
                policy: JSON.stringify(
                    certManagerRoute53Policy(
                        tls.route53.hostedZoneId,
                        cfg.gateway.listener.hostname!,
                        "aws",
                        contract?.failover?.globalHostname && contract.failover.globalHostedZoneId
                            ? { hostname: contract.failover.globalHostname, hostedZoneId: contract.failover.globalHostedZoneId }
                            : undefined,
                    ),
                ),
            },
            { parent: role },
        );
        new aws.eks.PodIdentityAssociation(
            "pod-identity-cert-manager",
            {
                clusterName: eks.clusterName,
                namespace: CERT_MANAGER_NAMESPACE,
                serviceAccount: CERT_MANAGER_SERVICE_ACCOUNT,
                roleArn: role.arn,
            },
            { parent: eks, dependsOn: [eks.podIdentityAgent, permissions] },
        );
    }

    // The AWS Load Balancer Controller provisions the gateway proxy's NLB (lib/edge.ts: `loadBalancerClass:
    // service.k8s.aws/nlb`): its own role through Pod Identity, with the upstream policy of the pinned release
    // (security group ingress limited to this VPC).
    const lbcRole = new aws.iam.Role(
        "aws-load-balancer-controller-role",
        {
            description: `AWS Load Balancer Controller (${LBC_NAMESPACE}/${LBC_SERVICE_ACCOUNT}) of ${eksClusterName(cfg)}`,
            assumeRolePolicy: pulumi
                .all([eks.accountId, eks.cluster.arn])
                .apply(([a, c]) => addonPodIdentityTrust(a, c, LBC_NAMESPACE, LBC_SERVICE_ACCOUNT)),
        },
        { parent: eks },
    );
    const lbcPermissions = new aws.iam.RolePolicy(
        "aws-load-balancer-controller-permissions",
        {
            role: lbcRole.name,
            policy: pulumi
                .all([eks.accountId, eks.vpcId, eks.clusterName])
                .apply(([account, vpcId, clusterName]) =>
                    JSON.stringify(lbcPolicy(`arn:aws:ec2:${cfg.cluster.region}:${account}:vpc/${vpcId}`, clusterName)),
                ),
        },
        { parent: lbcRole },
    );
    const lbcIdentity = new aws.eks.PodIdentityAssociation(
        "pod-identity-aws-load-balancer-controller",
        {
            clusterName: eks.clusterName,
            namespace: LBC_NAMESPACE,
            serviceAccount: LBC_SERVICE_ACCOUNT,
            roleArn: lbcRole.arn,
        },
        { parent: eks, dependsOn: [eks.podIdentityAgent, lbcPermissions] },
    );

    const provider = new k8s.Provider("k8s", { kubeconfig: eks.kubeconfig, enableServerSideApply: true }, { dependsOn: [cpu] });
    const lbc = new k8s.helm.v3.Release(
        "aws-load-balancer-controller",
        {
            name: "aws-load-balancer-controller",
            chart: versions.awsLoadBalancerController.chart,
            version: versions.awsLoadBalancerController.version,
            repositoryOpts: { repo: versions.awsLoadBalancerController.repo },
            namespace: LBC_NAMESPACE,
            values: pulumi
                .all([eks.clusterName, eks.vpcId])
                .apply(([clusterName, vpcId]) =>
                    lbcValues({ clusterName, region: cfg.cluster.region, vpcId, nodeSelector: cpu.nodeSelector }),
                ),
        },
        { provider, dependsOn: [lbcIdentity] },
    );
    const opts: pulumi.ComponentResourceOptions = { providers: [provider] };
    const platformNamespace = new k8s.core.v1.Namespace("platform-ns", { metadata: { name: PLATFORM_NAMESPACE } }, { provider });
    const inferenceNamespace = new k8s.core.v1.Namespace("inference-ns", { metadata: { name: INFERENCE_NAMESPACE } }, { provider });
    const storageClass = new k8s.storage.v1.StorageClass(
        "default-storage-class",
        {
            metadata: { name: cfg.cluster.defaultStorageClass, annotations: { [DEFAULT_STORAGE_CLASS_ANNOTATION]: "true" } },
            ...gp3StorageClass(),
        },
        { provider, dependsOn: [ebsCsi] },
    );

    const efaPlugin = new EfaDevicePlugin("efa-device-plugin", { instanceTypes: cfg.nodeGroups.gpu.map((g) => g.instanceType) }, opts);
    const gpuOperator = new GpuOperator(
        "gpu-operator",
        {
            gpuDirectRdma: "dmabuf",
            useHostMofed: false,
            eksEfaAmi: true,
            ...(cfg.observability.prometheusOperator ? { serviceMonitorLabels: prometheusOf(cfg.observability).selectorLabels } : {}),
        },
        opts,
    );

    const placement = placementPools(cfg);
    return {
        provider,
        platformNamespace,
        inferenceNamespace,
        pools: cfg.nodePools.map((p, i) => ({
            ...placement[i],
            nodeSelector: gpuGroups[i].nodeSelector,
            tolerations: gpuGroups[i].tolerations,
            memlockUnlimited: p.memlockUnlimited,
            fabric: "efa",
            rdmaResources: [EFA_RESOURCE],
            frontendHcas: [],
            hugepages2MiPerNode: cfg.nodeGroups.gpu[i].hugepages2Mi,
        })),
        systemNodeSelector: cpu.nodeSelector,
        storage: { className: cfg.cluster.defaultStorageClass, dependsOn: [storageClass, ebsCsi] },
        loadBalancerProvisioner: [lbc],
        devicePlugins: [efaPlugin],
        gpuDirect: [gpuOperator],
        gpuDirectMode: "dmabuf",
        // EFA has no rail ports the preflight rates (lib/preflight.ts checks devices only); the slowest EFA card.
        minLinkRateGbps: Math.min(...cfg.nodePools.map((p) => p.profile.efa?.cardRateGbps ?? 0)),
        outputs: {
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
        },
    };
}
