/**
 * EKS networking and access as pure functions: the subnet plan of a VPC the spoke creates, and the
 * kubeconfig the spoke's Kubernetes provider uses. No Pulumi resources here.
 */
import { type Cidr, parseCidr, subnet } from "../config/cidr";

/** The EKS cluster name of spoke `spoke` (`platform-<spoke>`): the hub's Pod Identity trust names it too. */
export function eksClusterNameOf(spoke: string): string {
    return `platform-${spoke}`;
}

/** One subnet of the plan. */
export interface PlannedSubnet {
    availabilityZone: string;
    cidr: string;
    /** `private`: nodes and pods (NAT egress); `public`: NAT gateway and internet-facing load balancers. */
    tier: "private" | "public";
}

/**
 * Subnet plan of a new VPC: private subnet i = the i-th quarter of the VPC CIDR (pods take VPC addresses
 * under the VPC CNI, so private subnets get the space; EFA-only interfaces take none),
 * public subnet i = the i-th 1/16 of the last quarter. A /16 gives /18 private and /22 public subnets.
 *
 * @param vpcCidr e.g. `10.80.0.0/16` (/16 to /20)
 * @param availabilityZones two or three AZs
 * @param given the stack file's `vpc.subnets` (AZ -> private/public CIDR): used as they are when present
 * @throws Error for more than three AZs or a CIDR too small to split, or an AZ without given subnets
 */
export function vpcSubnetPlan(
    vpcCidr: string,
    availabilityZones: string[],
    given?: Record<string, { private: string; public: string }>,
): PlannedSubnet[] {
    if (given) {
        // CIDRs from the stack file, by AZ name: independent of the list's order (config/eks.ts validated them).
        return (["private", "public"] as const).flatMap((tier) =>
            availabilityZones.map((az): PlannedSubnet => {
                const s = given[az];
                if (!s) throw new Error(`no subnets given for ${az}`);
                return { availabilityZone: az, cidr: s[tier], tier };
            }),
        );
    }
    if (availabilityZones.length < 1 || availabilityZones.length > 3)
        throw new Error(`a VPC plan covers 1 to 3 availability zones, got ${availabilityZones.length}`);
    const vpc: Cidr = parseCidr(vpcCidr);
    if (vpc.prefix > 24) throw new Error(`${vpcCidr} is too small to split into subnets`);
    const lastQuarter = subnet(vpc, vpc.prefix + 2, 3);
    return [
        ...availabilityZones.map(
            (az, i): PlannedSubnet => ({ availabilityZone: az, cidr: subnet(vpc, vpc.prefix + 2, i).text, tier: "private" }),
        ),
        ...availabilityZones.map(
            (az, i): PlannedSubnet => ({ availabilityZone: az, cidr: subnet(lastQuarter, lastQuarter.prefix + 4, i).text, tier: "public" }),
        ),
    ];
}

/**
 * A kubeconfig (as an object; JSON-serialise it for `k8s.Provider.kubeconfig`) that authenticates with
 * `aws eks get-token`, so no long-lived credential is stored in state.
 *
 * @param caData base64 certificate authority data of the cluster (`certificateAuthority.data`)
 */
export function eksKubeconfig(clusterName: string, endpoint: string, caData: string, region: string): Record<string, unknown> {
    const name = `eks-${clusterName}`;
    return {
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name, cluster: { server: endpoint, "certificate-authority-data": caData } }],
        contexts: [{ name, context: { cluster: name, user: name } }],
        "current-context": name,
        users: [
            {
                name,
                user: {
                    exec: {
                        apiVersion: "client.authentication.k8s.io/v1beta1",
                        command: "aws",
                        args: ["eks", "get-token", "--cluster-name", clusterName, "--region", region, "--output", "json"],
                        interactiveMode: "Never",
                    },
                },
            },
        ],
    };
}

/**
 * Instance metadata of every node: IMDSv2 only (`httpTokens: required`) and a response hop limit of 1, so a
 * pod on the pod network (one hop further than the node) cannot reach IMDS and take the node role's
 * credentials; host-network pods (VPC CNI, EFA device plugin) still can. Pods get AWS access from their own
 * roles (EKS Pod Identity / IRSA). Source: docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html
 * ("Restrict access to the instance profile assigned to the worker node").
 */
export const NODE_METADATA_OPTIONS = { httpTokens: "required", httpPutResponseHopLimit: 1, httpEndpoint: "enabled" } as const;
