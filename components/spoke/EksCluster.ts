import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { EksVpc } from "../../config/eks";
import { versions } from "../../config/versions";
import { eksKubeconfig, vpcSubnetPlan } from "../../lib/eks";

export interface EksClusterArgs {
    /** EKS cluster name (also used for tags). */
    clusterName: string;
    region: string;
    /** Pinned Kubernetes version, e.g. `"1.33"`. */
    kubernetesVersion: string;
    /** `kubernetesNetworkConfig.serviceIpv4Cidr`. */
    serviceCidr: string;
    endpointPublicAccess: boolean;
    publicAccessCidrs: string[];
    /** Create a VPC from a CIDR, or use an existing one by id. */
    vpc: EksVpc;
}

/** A private subnet the node groups can use. */
export interface PrivateSubnet { availabilityZone: string; id: pulumi.Output<string> }

function assumeRole(service: string): string {
    return JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow", Principal: { Service: service }, Action: "sts:AssumeRole" }] });
}

/**
 * An EKS cluster at a pinned Kubernetes version with what an EFA GPU spoke needs around it: the VPC and
 * subnets (or existing ones), IAM roles for the control plane and the nodes, an IAM OIDC provider (IRSA), a
 * security group that allows all traffic to and from itself (EFA OS-bypass requirement, reference/rdma.md
 * §6.2), and the managed add-ons (VPC CNI pinned >= 1.18.5 for EFA-only interfaces). Node groups are separate
 * components; {@link addon} adds add-ons that need nodes (CoreDNS) after them.
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
    public readonly vpcId: pulumi.Output<string>;
    public readonly privateSubnets: PrivateSubnet[];
    /** kubeconfig (JSON) using `aws eks get-token`; holds no credential. */
    public readonly kubeconfig: pulumi.Output<string>;
    private readonly baseName: string;

    constructor(name: string, args: EksClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:EksCluster", name, {}, opts);
        this.baseName = name;
        const tags = { "inference-platform.io/cluster": args.clusterName };
        const child = { parent: this };

        let vpcId: pulumi.Output<string>;
        if (args.vpc.mode === "create") {
            const vpc = new aws.ec2.Vpc(`${name}-vpc`, {
                cidrBlock: args.vpc.cidr, enableDnsHostnames: true, enableDnsSupport: true, tags: { ...tags, Name: `${args.clusterName}` },
            }, child);
            vpcId = vpc.id;
            const igw = new aws.ec2.InternetGateway(`${name}-igw`, { vpcId: vpc.id, tags }, { parent: vpc });
            const plan = vpcSubnetPlan(args.vpc.cidr, args.vpc.availabilityZones);
            const subnets = plan.map((p) => ({
                plan: p,
                subnet: new aws.ec2.Subnet(`${name}-${p.tier}-${p.availabilityZone}`, {
                    vpcId: vpc.id, cidrBlock: p.cidr, availabilityZone: p.availabilityZone, mapPublicIpOnLaunch: false,
                    tags: { ...tags, Name: `${args.clusterName}-${p.tier}-${p.availabilityZone}`, [p.tier === "public" ? "kubernetes.io/role/elb" : "kubernetes.io/role/internal-elb"]: "1" },
                }, { parent: vpc }),
            }));
            const publicRt = new aws.ec2.RouteTable(`${name}-public-rt`, { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", gatewayId: igw.id }], tags }, { parent: vpc });
            const firstPublic = subnets.find((s) => s.plan.tier === "public")!.subnet;
            const eip = new aws.ec2.Eip(`${name}-nat-eip`, { domain: "vpc", tags }, { parent: vpc });
            const nat = new aws.ec2.NatGateway(`${name}-nat`, { allocationId: eip.id, subnetId: firstPublic.id, tags }, { parent: vpc, dependsOn: [igw] });
            const privateRt = new aws.ec2.RouteTable(`${name}-private-rt`, { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", natGatewayId: nat.id }], tags }, { parent: vpc });
            for (const s of subnets) {
                new aws.ec2.RouteTableAssociation(`${name}-${s.plan.tier}-${s.plan.availabilityZone}-rta`, {
                    subnetId: s.subnet.id, routeTableId: s.plan.tier === "public" ? publicRt.id : privateRt.id,
                }, { parent: s.subnet });
            }
            this.privateSubnets = subnets.filter((s) => s.plan.tier === "private").map((s) => ({ availabilityZone: s.plan.availabilityZone, id: s.subnet.id }));
        } else {
            vpcId = pulumi.output(args.vpc.vpcId);
            this.privateSubnets = args.vpc.privateSubnets.map((s) => ({ availabilityZone: s.availabilityZone, id: pulumi.output(s.id) }));
        }
        this.vpcId = vpcId;

        const partition = aws.getPartitionOutput({}, { parent: this }).partition;
        const MANAGED_POLICY = (policy: string) => pulumi.interpolate`arn:${partition}:iam::aws:policy/${policy}`;
        const clusterRole = new aws.iam.Role(`${name}-cluster-role`, { assumeRolePolicy: assumeRole("eks.amazonaws.com"), tags }, child);
        const clusterPolicy = new aws.iam.RolePolicyAttachment(`${name}-cluster-policy`, { role: clusterRole.name, policyArn: MANAGED_POLICY("AmazonEKSClusterPolicy") }, { parent: clusterRole });
        const nodeRole = new aws.iam.Role(`${name}-node-role`, { assumeRolePolicy: assumeRole("ec2.amazonaws.com"), tags }, child);
        for (const p of ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"]) {
            new aws.iam.RolePolicyAttachment(`${name}-node-${p}`, { role: nodeRole.name, policyArn: MANAGED_POLICY(p) }, { parent: nodeRole });
        }
        this.nodeRoleArn = nodeRole.arn;

        const efaSg = new aws.ec2.SecurityGroup(`${name}-efa-sg`, {
            vpcId,
            description: "EFA: all traffic to and from itself (OS-bypass requirement)",
            ingress: [{ protocol: "-1", fromPort: 0, toPort: 0, self: true, description: "EFA peers" }],
            egress: [
                { protocol: "-1", fromPort: 0, toPort: 0, self: true, description: "EFA peers" },
                { protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "node egress" },
            ],
            tags: { ...tags, Name: `${args.clusterName}-efa` },
        }, child);
        this.efaSecurityGroupId = efaSg.id;

        this.cluster = new aws.eks.Cluster(`${name}-cluster`, {
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
            accessConfig: { authenticationMode: "API", bootstrapClusterCreatorAdminPermissions: true },
            enabledClusterLogTypes: ["api", "audit", "authenticator"],
            tags,
        }, { parent: this, dependsOn: [clusterPolicy] });

        this.clusterName = this.cluster.name;
        this.endpoint = this.cluster.endpoint;
        this.certificateAuthority = this.cluster.certificateAuthority.data;
        this.oidcIssuer = this.cluster.identities.apply((ids) => ids?.[0]?.oidcs?.[0]?.issuer ?? "");
        this.clusterSecurityGroupId = this.cluster.vpcConfig.clusterSecurityGroupId;
        const oidc = new aws.iam.OpenIdConnectProvider(`${name}-oidc`, { url: this.oidcIssuer, clientIdLists: ["sts.amazonaws.com"], tags }, { parent: this.cluster });
        this.oidcProviderArn = oidc.arn;
        this.kubeconfig = pulumi.all([this.cluster.name, this.endpoint, this.certificateAuthority])
            .apply(([n, e, ca]) => JSON.stringify(eksKubeconfig(n, e, ca, args.region)));

        // Add-ons that must exist before nodes join (networking, kube-proxy, pod identity).
        for (const a of ["vpc-cni", "kube-proxy", "eks-pod-identity-agent"] as const) this.addon(a);
        this.registerOutputs({
            clusterName: this.clusterName, endpoint: this.endpoint, oidcIssuer: this.oidcIssuer, vpcId: this.vpcId,
            clusterSecurityGroupId: this.clusterSecurityGroupId, efaSecurityGroupId: this.efaSecurityGroupId,
        });
    }

    /**
     * Adds an EKS managed add-on at the version pinned in config/versions.ts (`null` there = the EKS default
     * for the cluster's Kubernetes version). Add-ons that need nodes (CoreDNS) go in after the node groups.
     */
    addon(addonName: keyof typeof versions.eksAddons, dependsOn: pulumi.Resource[] = []): aws.eks.Addon {
        const version = versions.eksAddons[addonName];
        const a = new aws.eks.Addon(`${this.baseName}-${addonName}`, {
            clusterName: this.cluster.name,
            addonName,
            addonVersion: version ?? undefined,
            resolveConflictsOnCreate: "OVERWRITE",
            resolveConflictsOnUpdate: "OVERWRITE",
        }, { parent: this, dependsOn });
        return a;
    }
}
