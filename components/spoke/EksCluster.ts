import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { EksVpc } from "../../config/eks";
import { versions } from "../../config/versions";
import { eksKubeconfig, vpcSubnetPlan } from "../../lib/eks";
import { CLUSTER_TAG } from "../../lib/labels";

/** Inputs of {@link EksCluster}. */
export interface EksClusterArgs {
    /** EKS cluster name (also used for tags). */
    clusterName: string;
    /** AWS region of the cluster (`platform:cluster.region`): the kubeconfig's `aws eks get-token --region`. */
    region: string;
    /** Pinned Kubernetes version, e.g. `"1.35"` (config/eks.ts EKS_STANDARD_SUPPORT_VERSIONS). */
    kubernetesVersion: string;
    /** `kubernetesNetworkConfig.serviceIpv4Cidr`. */
    serviceCidr: string;
    /** Public Kubernetes API endpoint (`platform:cluster.endpointPublicAccess`, default true: CI previews from hosted runners). */
    endpointPublicAccess: boolean;
    /**
     * IPv4 CIDRs the public endpoint admits (`vpcConfig.publicAccessCidrs`; ignored without `endpointPublicAccess`);
     * config/eks.ts refuses a public endpoint without them.
     */
    publicAccessCidrs: string[];
    /** Create a VPC from a CIDR, or use an existing one by id. */
    vpc: EksVpc;
    /**
     * IAM roles given cluster access through EKS access entries (`platform:cluster.access`). Without
     * `deployRoleArn` the principal running `pulumi up` (its session's issuer: the role, not the session) gets the
     * admin entry, so the program's Kubernetes provider can apply.
     */
    access?: { deployRoleArn?: string; previewRoleArn?: string };
}

/**
 * EKS access policies of the two CI roles: the deploy role administers the cluster (it applies every object);
 * the preview role runs the pull request's own code, so it reads everything except Secrets
 * (AmazonEKSViewPolicy: the `view` ClusterRole, which excludes Secrets; AmazonEKSAdminViewPolicy would include
 * them). Source: docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html.
 */
export const ACCESS_POLICIES = {
    deploy: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
    preview: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
} as const;

/** Service account of the EBS CSI controller (aws-ebs-csi-driver add-on), the one its Pod Identity association binds. */
export const EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa";

/** Pure: trust policy of a role used through EKS Pod Identity by one add-on service account of `clusterArn`. */
export function addonPodIdentityTrust(accountId: string, clusterArn: string, namespace: string, serviceAccount: string): string {
    return JSON.stringify({
        Version: "2012-10-17",
        Statement: [
            {
                Effect: "Allow",
                Principal: { Service: "pods.eks.amazonaws.com" },
                Action: ["sts:AssumeRole", "sts:TagSession"],
                Condition: {
                    StringEquals: {
                        "aws:SourceAccount": accountId,
                        "aws:RequestTag/eks-cluster-arn": clusterArn,
                        "aws:RequestTag/kubernetes-namespace": namespace,
                        "aws:RequestTag/kubernetes-service-account": serviceAccount,
                    },
                },
            },
        ],
    });
}

/**
 * Pure: IRSA trust policy for one service account (`system:serviceaccount:<ns>:<sa>`) of the cluster's OIDC
 * issuer. Source: docs.aws.amazon.com/eks/latest/userguide/associate-service-account-role.html.
 */
export function irsaTrust(oidcProviderArn: string, issuerUrl: string, namespace: string, serviceAccount: string): string {
    const host = issuerUrl.replace(/^https:\/\//, "");
    return JSON.stringify({
        Version: "2012-10-17",
        Statement: [
            {
                Effect: "Allow",
                Principal: { Federated: oidcProviderArn },
                Action: "sts:AssumeRoleWithWebIdentity",
                Condition: {
                    StringEquals: {
                        [`${host}:sub`]: `system:serviceaccount:${namespace}:${serviceAccount}`,
                        [`${host}:aud`]: "sts.amazonaws.com",
                    },
                },
            },
        ],
    });
}

/** A private subnet the node groups can use. */
export interface PrivateSubnet {
    availabilityZone: string;
    id: pulumi.Output<string>;
}

function assumeRole(service: string): string {
    return JSON.stringify({
        Version: "2012-10-17",
        Statement: [{ Effect: "Allow", Principal: { Service: service }, Action: "sts:AssumeRole" }],
    });
}

/**
 * An EKS cluster at a pinned Kubernetes version with what an EFA GPU spoke needs around it: the VPC and
 * subnets (or existing ones), IAM roles for the control plane and the nodes, an IAM OIDC provider (IRSA), a
 * security group that allows all traffic to and from itself (EFA OS-bypass requirement,
 * EC2 EFA user guide), and the managed add-ons (VPC CNI pinned >= 1.18.5 for EFA-only interfaces). Node groups are separate
 * components; {@link addon} adds add-ons that need nodes (CoreDNS) after them.
 *
 * @throws Error from the constructor for a VPC to create with more than three AZs, a CIDR too small to split, or an AZ
 *   without given subnets (lib/eks.ts `vpcSubnetPlan`)
 */
export class EksCluster extends pulumi.ComponentResource {
    public readonly cluster: aws.eks.Cluster;
    public readonly clusterName: pulumi.Output<string>;
    public readonly endpoint: pulumi.Output<string>;
    /** base64 certificate authority data. */
    public readonly certificateAuthority: pulumi.Output<string>;
    public readonly oidcIssuer: pulumi.Output<string>;
    public readonly oidcProviderArn: pulumi.Output<string>;
    /** Security group EKS creates for the cluster (control plane <-> nodes). */
    public readonly clusterSecurityGroupId: pulumi.Output<string>;
    /** Self-referencing all-traffic group every EFA interface joins. */
    public readonly efaSecurityGroupId: pulumi.Output<string>;
    public readonly nodeRoleArn: pulumi.Output<string>;
    /** The node role's policy attachments: node groups wait for them (a node without them cannot join). */
    public readonly nodeRolePolicies: aws.iam.RolePolicyAttachment[];
    public readonly vpcId: pulumi.Output<string>;
    public readonly privateSubnets: PrivateSubnet[];
    /** kubeconfig (JSON) using `aws eks get-token`; holds no credential. */
    public readonly kubeconfig: pulumi.Output<string>;
    /** Account of the cluster (Pod Identity trust `aws:SourceAccount`). */
    public readonly accountId!: pulumi.Output<string>;
    /** The EKS Pod Identity agent add-on (associations are served once it runs). */
    public readonly podIdentityAgent!: aws.eks.Addon;
    /** Role of the EBS CSI controller; {@link addEbsCsi} binds it by Pod Identity. */
    public readonly ebsCsiRole!: aws.iam.Role;
    private readonly baseName: string;

    constructor(name: string, args: EksClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:EksCluster", name, {}, opts);
        this.baseName = name;
        const tags = { [CLUSTER_TAG]: args.clusterName };
        const child = { parent: this };

        let vpcId: pulumi.Output<string>;
        if (args.vpc.mode === "create") {
            const vpc = new aws.ec2.Vpc(
                `${name}-vpc`,
                {
                    cidrBlock: args.vpc.cidr,
                    enableDnsHostnames: true,
                    enableDnsSupport: true,
                    tags: { ...tags, Name: `${args.clusterName}` },
                },
                child,
            );
            vpcId = vpc.id;
            const igw = new aws.ec2.InternetGateway(`${name}-igw`, { vpcId: vpc.id, tags }, { parent: vpc });
            const plan = vpcSubnetPlan(args.vpc.cidr, args.vpc.availabilityZones, args.vpc.subnets);
            const subnets = plan.map((p) => ({
                plan: p,
                subnet: new aws.ec2.Subnet(
                    `${name}-${p.tier}-${p.availabilityZone}`,
                    {
                        vpcId: vpc.id,
                        cidrBlock: p.cidr,
                        availabilityZone: p.availabilityZone,
                        mapPublicIpOnLaunch: false,
                        tags: {
                            ...tags,
                            Name: `${args.clusterName}-${p.tier}-${p.availabilityZone}`,
                            [p.tier === "public" ? "kubernetes.io/role/elb" : "kubernetes.io/role/internal-elb"]: "1",
                        },
                    },
                    { parent: vpc },
                ),
            }));
            const publicRt = new aws.ec2.RouteTable(
                `${name}-public-rt`,
                { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", gatewayId: igw.id }], tags },
                { parent: vpc },
            );
            const firstPublic = subnets.find((s) => s.plan.tier === "public")!.subnet;
            const eip = new aws.ec2.Eip(`${name}-nat-eip`, { domain: "vpc", tags }, { parent: vpc });
            const nat = new aws.ec2.NatGateway(
                `${name}-nat`,
                { allocationId: eip.id, subnetId: firstPublic.id, tags },
                { parent: vpc, dependsOn: [igw] },
            );
            const privateRt = new aws.ec2.RouteTable(
                `${name}-private-rt`,
                { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", natGatewayId: nat.id }], tags },
                { parent: vpc },
            );
            for (const s of subnets) {
                new aws.ec2.RouteTableAssociation(
                    `${name}-${s.plan.tier}-${s.plan.availabilityZone}-rta`,
                    {
                        subnetId: s.subnet.id,
                        routeTableId: s.plan.tier === "public" ? publicRt.id : privateRt.id,
                    },
                    { parent: s.subnet },
                );
            }
            this.privateSubnets = subnets
                .filter((s) => s.plan.tier === "private")
                .map((s) => ({ availabilityZone: s.plan.availabilityZone, id: s.subnet.id }));
        } else {
            vpcId = pulumi.output(args.vpc.vpcId);
            this.privateSubnets = args.vpc.privateSubnets.map((s) => ({ availabilityZone: s.availabilityZone, id: pulumi.output(s.id) }));
        }
        this.vpcId = vpcId;

        const partition = aws.getPartitionOutput({}, { parent: this }).partition;
        const MANAGED_POLICY = (policy: string) => pulumi.interpolate`arn:${partition}:iam::aws:policy/${policy}`;
        const clusterRole = new aws.iam.Role(`${name}-cluster-role`, { assumeRolePolicy: assumeRole("eks.amazonaws.com"), tags }, child);
        const clusterPolicy = new aws.iam.RolePolicyAttachment(
            `${name}-cluster-policy`,
            { role: clusterRole.name, policyArn: MANAGED_POLICY("AmazonEKSClusterPolicy") },
            { parent: clusterRole },
        );
        const nodeRole = new aws.iam.Role(`${name}-node-role`, { assumeRolePolicy: assumeRole("ec2.amazonaws.com"), tags }, child);
        // No AmazonEKS_CNI_Policy on the node role: the VPC CNI has its own role (IRSA, below), so a pod reaching
        // the node's credentials gets no ENI / security-group rights.
        this.nodeRolePolicies = ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"].map(
            (p) =>
                new aws.iam.RolePolicyAttachment(
                    `${name}-node-${p}`,
                    { role: nodeRole.name, policyArn: MANAGED_POLICY(p) },
                    { parent: nodeRole },
                ),
        );
        this.nodeRoleArn = nodeRole.arn;

        const efaSg = new aws.ec2.SecurityGroup(
            `${name}-efa-sg`,
            {
                vpcId,
                description: "EFA: all traffic to and from itself (OS-bypass requirement)",
                ingress: [{ protocol: "-1", fromPort: 0, toPort: 0, self: true, description: "EFA peers" }],
                egress: [
                    { protocol: "-1", fromPort: 0, toPort: 0, self: true, description: "EFA peers" },
                    { protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "node egress" },
                ],
                tags: { ...tags, Name: `${args.clusterName}-efa` },
            },
            child,
        );
        this.efaSecurityGroupId = efaSg.id;

        this.cluster = new aws.eks.Cluster(
            `${name}-cluster`,
            {
                name: args.clusterName,
                version: args.kubernetesVersion,
                roleArn: clusterRole.arn,
                vpcConfig: {
                    subnetIds: this.privateSubnets.map((s) => s.id),
                    endpointPrivateAccess: true,
                    endpointPublicAccess: args.endpointPublicAccess,
                    publicAccessCidrs: args.endpointPublicAccess ? args.publicAccessCidrs : undefined,
                },
                kubernetesNetworkConfig: { serviceIpv4Cidr: args.serviceCidr, ipFamily: "ipv4" },
                // No implicit creator entry: it would be created by EKS and again by the deploy entry below (409 on the
                // first `up` from CI), and it can only be removed later by replacing the cluster (the flag is immutable).
                accessConfig: { authenticationMode: "API", bootstrapClusterCreatorAdminPermissions: false },
                enabledClusterLogTypes: ["api", "audit", "authenticator"],
                // Standard support only, explicitly (the EKS default is EXTENDED: a version past its standard support keeps
                // running at the extended-support price). At the end of standard support EKS upgrades the control plane.
                upgradePolicy: { supportType: "STANDARD" },
                tags,
                // The cluster holds every workload and its volumes: never deleted or replaced by an ordinary `up`
                // (a replacement would be a new, empty cluster under the same name). Explicit name: fixed.
            },
            { parent: this, dependsOn: [clusterPolicy], protect: true, retainOnDelete: true },
        );

        this.clusterName = this.cluster.name;
        this.endpoint = this.cluster.endpoint;
        this.certificateAuthority = this.cluster.certificateAuthority.data;
        this.oidcIssuer = this.cluster.identities.apply((ids) => ids?.[0]?.oidcs?.[0]?.issuer ?? "");
        this.clusterSecurityGroupId = this.cluster.vpcConfig.clusterSecurityGroupId;
        const oidc = new aws.iam.OpenIdConnectProvider(
            `${name}-oidc`,
            { url: this.oidcIssuer, clientIdLists: ["sts.amazonaws.com"], tags },
            { parent: this.cluster },
        );
        this.oidcProviderArn = oidc.arn;
        this.kubeconfig = pulumi
            .all([this.cluster.name, this.endpoint, this.certificateAuthority])
            .apply(([n, e, ca]) => JSON.stringify(eksKubeconfig(n, e, ca, args.region)));

        const caller = aws.getCallerIdentityOutput({}, { parent: this });
        const account = caller.accountId;
        this.accountId = account;
        // VPC CNI on its own role through IRSA (aws-node starts before the Pod Identity agent can serve it).
        const cniRole = new aws.iam.Role(
            `${name}-vpc-cni-role`,
            {
                description: `VPC CNI (kube-system/aws-node) of ${args.clusterName}`,
                assumeRolePolicy: pulumi
                    .all([oidc.arn, this.oidcIssuer])
                    .apply(([arn, url]) => irsaTrust(arn, url, "kube-system", "aws-node")),
                tags,
            },
            child,
        );
        const cniPolicy = new aws.iam.RolePolicyAttachment(
            `${name}-vpc-cni-policy`,
            { role: cniRole.name, policyArn: MANAGED_POLICY("AmazonEKS_CNI_Policy") },
            { parent: cniRole },
        );
        // EBS CSI driver on its own role through Pod Identity (the controller is an ordinary Deployment).
        this.ebsCsiRole = new aws.iam.Role(
            `${name}-ebs-csi-role`,
            {
                description: `EBS CSI controller (kube-system/${EBS_CSI_SERVICE_ACCOUNT}) of ${args.clusterName}`,
                assumeRolePolicy: pulumi
                    .all([account, this.cluster.arn])
                    .apply(([a, c]) => addonPodIdentityTrust(a, c, "kube-system", EBS_CSI_SERVICE_ACCOUNT)),
                tags,
            },
            child,
        );
        new aws.iam.RolePolicyAttachment(
            `${name}-ebs-csi-policy`,
            { role: this.ebsCsiRole.name, policyArn: MANAGED_POLICY("service-role/AmazonEBSCSIDriverPolicy") },
            { parent: this.ebsCsiRole },
        );

        // Add-ons that must exist before nodes join (networking, kube-proxy, pod identity).
        this.addon("vpc-cni", [cniPolicy], { serviceAccountRoleArn: cniRole.arn });
        this.addon("kube-proxy");
        this.podIdentityAgent = this.addon("eks-pod-identity-agent");

        // Cluster access for the CI roles named in the stack file (authenticationMode API: nothing else grants it).
        const deployer: pulumi.Input<string> =
            args.access?.deployRoleArn ?? aws.iam.getSessionContextOutput({ arn: caller.arn }, { parent: this }).issuerArn;
        for (const [kind, roleArn] of [
            ["deploy", deployer],
            ["preview", args.access?.previewRoleArn],
        ] as const) {
            if (!roleArn) continue;
            const entry = new aws.eks.AccessEntry(
                `${name}-access-${kind}`,
                { clusterName: this.cluster.name, principalArn: roleArn, type: "STANDARD", tags },
                child,
            );
            new aws.eks.AccessPolicyAssociation(
                `${name}-access-${kind}-policy`,
                {
                    clusterName: this.cluster.name,
                    principalArn: entry.principalArn,
                    policyArn: ACCESS_POLICIES[kind],
                    accessScope: { type: "cluster" },
                },
                { parent: entry },
            );
        }
        this.registerOutputs({
            clusterName: this.clusterName,
            endpoint: this.endpoint,
            oidcIssuer: this.oidcIssuer,
            vpcId: this.vpcId,
            clusterSecurityGroupId: this.clusterSecurityGroupId,
            efaSecurityGroupId: this.efaSecurityGroupId,
        });
    }

    /**
     * Adds the EBS CSI driver add-on (its controller needs nodes: pass the node groups) with its own role bound by
     * EKS Pod Identity, so PVCs (metering spool, collector queue) can be provisioned: EKS has no CSI driver for EBS
     * and no default StorageClass on current versions.
     */
    addEbsCsi(dependsOn: pulumi.Resource[]): aws.eks.Addon {
        return this.addon("aws-ebs-csi-driver", [...dependsOn, this.podIdentityAgent], {
            podIdentityAssociations: [{ roleArn: this.ebsCsiRole.arn, serviceAccount: EBS_CSI_SERVICE_ACCOUNT }],
        });
    }

    /**
     * Adds an EKS managed add-on at the version pinned in config/versions.ts (`null` there = the EKS default
     * for the cluster's Kubernetes version). Add-ons that need nodes (CoreDNS) go in after the node groups.
     */
    addon(
        addonName: keyof typeof versions.eksAddons,
        dependsOn: pulumi.Resource[] = [],
        extra: Pick<aws.eks.AddonArgs, "serviceAccountRoleArn" | "podIdentityAssociations"> = {},
    ): aws.eks.Addon {
        const version = versions.eksAddons[addonName];
        const a = new aws.eks.Addon(
            `${this.baseName}-${addonName}`,
            {
                clusterName: this.cluster.name,
                addonName,
                addonVersion: version ?? undefined,
                resolveConflictsOnCreate: "OVERWRITE",
                resolveConflictsOnUpdate: "OVERWRITE",
                ...extra,
            },
            { parent: this, dependsOn },
        );
        return a;
    }
}
