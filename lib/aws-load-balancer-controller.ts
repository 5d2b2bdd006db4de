import type { AwsCall } from "../services/shared/aws-calls";

/**
 * The AWS Load Balancer Controller on an EKS spoke: it provisions the Network Load Balancer of the gateway's proxy
 * Service (`loadBalancerClass: service.k8s.aws/nlb`, lib/edge.ts). Chart `aws-load-balancer-controller` of
 * https://aws.github.io/eks-charts, pinned in config/versions.ts; values keys recorded in
 * upstream/charts/aws-load-balancer-controller.ts. The controller runs on its own IAM role through EKS Pod Identity
 * (programs/eks-spoke.ts) with the upstream policy of the pinned release, security group ingress limited to the
 * spoke's VPC ({@link lbcPolicy}).
 */

/** Namespace and service account of the controller (the chart's `serviceAccount.name`; the Pod Identity association names them). */
export const LBC_NAMESPACE = "kube-system";
export const LBC_SERVICE_ACCOUNT = "aws-load-balancer-controller";

/**
 * Pure: the chart's values. `clusterName`, `region` and `vpcId` are set explicitly: the nodes answer IMDS one hop only
 * (components/spoke/EksCluster.ts), so the controller cannot discover region and VPC itself
 * (kubernetes-sigs/aws-load-balancer-controller@v3.5.0:helm/aws-load-balancer-controller/templates/deployment.yaml
 * `--aws-region`, `--aws-vpc-id`). The Service mutating webhook is off (our one Service names its
 * `loadBalancerClass` itself, and nothing else should become a load balancer silently); no IngressClass (no Ingress
 * is used). Runs on the system node group.
 */
export function lbcValues(x: {
    clusterName: string;
    region: string;
    vpcId: string;
    nodeSelector: Record<string, string>;
}): Record<string, unknown> {
    return {
        clusterName: x.clusterName,
        region: x.region,
        vpcId: x.vpcId,
        replicaCount: 2,
        serviceAccount: { create: true, name: LBC_SERVICE_ACCOUNT },
        enableServiceMutatorWebhook: false,
        createIngressClassResource: false,
        nodeSelector: x.nodeSelector,
    };
}

/**
 * The controller's IAM policy, verbatim from
 * kubernetes-sigs/aws-load-balancer-controller@v3.5.0:docs/install/iam_policy.json (the release the pinned chart
 * 3.5.0 runs, `appVersion: v3.5.0`). Mutations are limited by upstream to resources carrying the
 * `elbv2.k8s.aws/cluster` tag the controller sets on what it creates. Re-read it when the chart pin moves.
 */
export const LBC_IAM_POLICY = {
    Version: "2012-10-17",
    Statement: [
        {
            Effect: "Allow",
            Action: ["iam:CreateServiceLinkedRole"],
            Resource: "*",
            Condition: { StringEquals: { "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" } },
        },
        {
            Effect: "Allow",
            Action: [
                "ec2:DescribeAccountAttributes",
                "ec2:DescribeAddresses",
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeInternetGateways",
                "ec2:DescribeVpcs",
                "ec2:DescribeVpcPeeringConnections",
                "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeInstances",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeTags",
                "ec2:GetCoipPoolUsage",
                "ec2:DescribeCoipPools",
                "ec2:GetSecurityGroupsForVpc",
                "ec2:DescribeIpamPools",
                "ec2:DescribeRouteTables",
                "elasticloadbalancing:DescribeLoadBalancers",
                "elasticloadbalancing:DescribeLoadBalancerAttributes",
                "elasticloadbalancing:DescribeListeners",
                "elasticloadbalancing:DescribeListenerCertificates",
                "elasticloadbalancing:DescribeSSLPolicies",
                "elasticloadbalancing:DescribeRules",
                "elasticloadbalancing:DescribeTargetGroups",
                "elasticloadbalancing:DescribeTargetGroupAttributes",
                "elasticloadbalancing:DescribeTargetHealth",
                "elasticloadbalancing:DescribeTags",
                "elasticloadbalancing:DescribeTrustStores",
                "elasticloadbalancing:DescribeListenerAttributes",
                "elasticloadbalancing:DescribeCapacityReservation",
            ],
            Resource: "*",
        },
        {
            Effect: "Allow",
            Action: [
                "cognito-idp:DescribeUserPoolClient",
                "acm:ListCertificates",
                "acm:DescribeCertificate",
                "iam:ListServerCertificates",
                "iam:GetServerCertificate",
                "waf-regional:GetWebACL",
                "waf-regional:GetWebACLForResource",
                "waf-regional:AssociateWebACL",
                "waf-regional:DisassociateWebACL",
                "wafv2:GetWebACL",
                "wafv2:GetWebACLForResource",
                "wafv2:AssociateWebACL",
                "wafv2:DisassociateWebACL",
                "shield:GetSubscriptionState",
                "shield:DescribeProtection",
                "shield:CreateProtection",
                "shield:DeleteProtection",
            ],
            Resource: "*",
        },
        { Effect: "Allow", Action: ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"], Resource: "*" },
        { Effect: "Allow", Action: ["ec2:CreateSecurityGroup"], Resource: "*" },
        {
            Effect: "Allow",
            Action: ["ec2:CreateTags"],
            Resource: "arn:aws:ec2:*:*:security-group/*",
            Condition: {
                StringEquals: { "ec2:CreateAction": "CreateSecurityGroup" },
                Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "false" },
            },
        },
        {
            Effect: "Allow",
            Action: ["ec2:CreateTags", "ec2:DeleteTags"],
            Resource: "arn:aws:ec2:*:*:security-group/*",
            Condition: { Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "true", "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } },
        },
        {
            Effect: "Allow",
            Action: ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"],
            Resource: "*",
            Condition: { Null: { "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } },
        },
        {
            Effect: "Allow",
            Action: ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
            Resource: "*",
            Condition: { Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "false" } },
        },
        {
            Effect: "Allow",
            Action: [
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:CreateRule",
                "elasticloadbalancing:DeleteRule",
            ],
            Resource: "*",
        },
        {
            Effect: "Allow",
            Action: ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            Resource: [
                "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
                "arn:aws:elasticloadbalancing:*:*:loadbalancer/net/*/*",
                "arn:aws:elasticloadbalancing:*:*:loadbalancer/app/*/*",
            ],
            Condition: { Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "true", "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } },
        },
        {
            Effect: "Allow",
            Action: ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            Resource: [
                "arn:aws:elasticloadbalancing:*:*:listener/net/*/*/*",
                "arn:aws:elasticloadbalancing:*:*:listener/app/*/*/*",
                "arn:aws:elasticloadbalancing:*:*:listener-rule/net/*/*/*",
                "arn:aws:elasticloadbalancing:*:*:listener-rule/app/*/*/*",
            ],
        },
        {
            Effect: "Allow",
            Action: [
                "elasticloadbalancing:ModifyLoadBalancerAttributes",
                "elasticloadbalancing:SetIpAddressType",
                "elasticloadbalancing:SetSecurityGroups",
                "elasticloadbalancing:SetSubnets",
                "elasticloadbalancing:DeleteLoadBalancer",
                "elasticloadbalancing:ModifyTargetGroup",
                "elasticloadbalancing:ModifyTargetGroupAttributes",
                "elasticloadbalancing:DeleteTargetGroup",
                "elasticloadbalancing:ModifyListenerAttributes",
                "elasticloadbalancing:ModifyCapacityReservation",
                "elasticloadbalancing:ModifyIpPools",
            ],
            Resource: "*",
            Condition: { Null: { "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } },
        },
        {
            Effect: "Allow",
            Action: ["elasticloadbalancing:AddTags"],
            Resource: [
                "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
                "arn:aws:elasticloadbalancing:*:*:loadbalancer/net/*/*",
                "arn:aws:elasticloadbalancing:*:*:loadbalancer/app/*/*",
            ],
            Condition: {
                StringEquals: { "elasticloadbalancing:CreateAction": ["CreateTargetGroup", "CreateLoadBalancer"] },
                Null: { "aws:RequestTag/elbv2.k8s.aws/cluster": "false" },
            },
        },
        {
            Effect: "Allow",
            Action: ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
            Resource: "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
        },
        {
            Effect: "Allow",
            Action: [
                "elasticloadbalancing:SetWebAcl",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:AddListenerCertificates",
                "elasticloadbalancing:RemoveListenerCertificates",
                "elasticloadbalancing:ModifyRule",
                "elasticloadbalancing:SetRulePriorities",
            ],
            Resource: "*",
        },
    ],
} as const;

/**
 * Pure: the policy the controller's role gets: {@link LBC_IAM_POLICY}, except that upstream's unconditioned
 * `ec2:AuthorizeSecurityGroupIngress` / `RevokeSecurityGroupIngress` on `*` (the controller adds the NLB's rules to the
 * nodes' and pods' security groups, which it did not create and has not tagged) is limited to security groups of the
 * spoke's own VPC (`ec2:Vpc`, IAM service authorization reference for Amazon EC2): it can no longer open ingress on
 * any security group of the account. And where upstream only requires the `elbv2.k8s.aws/cluster` tag to be present
 * (`Null: false`), the tag must name this cluster (`StringEquals`): one spoke's controller can neither change nor delete
 * another cluster's load balancers, target groups or security groups in the account, nor create them under its name.
 * @param vpcArn `arn:aws:ec2:<region>:<account>:vpc/<id>` of the spoke's VPC
 * @param clusterName the EKS cluster name, the tag value the controller writes (chart value `clusterName`)
 */
export function lbcPolicy(vpcArn: string, clusterName: string) {
    return {
        Version: LBC_IAM_POLICY.Version,
        Statement: LBC_IAM_POLICY.Statement.map((upstream) => {
            const st = ownClusterOnly(upstream, clusterName);
            const a = (st as { Action: readonly string[] }).Action;
            const unscoped =
                !("Condition" in st) &&
                st.Resource === "*" &&
                a.length === 2 &&
                a.includes("ec2:AuthorizeSecurityGroupIngress") &&
                a.includes("ec2:RevokeSecurityGroupIngress");
            return unscoped ? { ...st, Resource: "arn:aws:ec2:*:*:security-group/*", Condition: { ArnEquals: { "ec2:Vpc": vpcArn } } } : st;
        }),
    };
}

/** A statement whose cluster-tag conditions require the tag only to exist, made to require this cluster's value. */
function ownClusterOnly<S extends object>(st: S, clusterName: string): S {
    const cond = (st as { Condition?: Record<string, Record<string, unknown>> }).Condition;
    const present = Object.entries(cond?.Null ?? {})
        .filter(([k, v]) => v === "false" && k.endsWith("/elbv2.k8s.aws/cluster"))
        .map(([k]) => k);
    if (!cond || present.length === 0) return st;
    const equals = { ...(cond.StringEquals ?? {}), ...Object.fromEntries(present.map((k) => [k, clusterName])) };
    return { ...st, Condition: { ...cond, StringEquals: equals } };
}

const T = { "aws:SecureTransport": "true" };
const LB = "arn:aws:elasticloadbalancing:{region}:{account}:loadbalancer/net/k8s-llmgatew-envoy-0123456789/0123456789abcdef";
const TG = "arn:aws:elasticloadbalancing:{region}:{account}:targetgroup/k8s-llmgatew-envoy-0123456789/0123456789abcdef";
const SG = "arn:aws:ec2:{region}:{account}:security-group/sg-0123456789abcdef0";
const OWNED = { "aws:ResourceTag/elbv2.k8s.aws/cluster": "{clusterName}" };
const TAGGING = {
    "aws:RequestTag/elbv2.k8s.aws/cluster": "{clusterName}",
    "aws:TagKeys": ["elbv2.k8s.aws/cluster", "service.k8s.aws/stack", "service.k8s.aws/resource"],
};

/**
 * The calls the controller makes for one NLB Service with IP targets and the frontend/backend security groups
 * (kubernetes-sigs/aws-load-balancer-controller@v3.5.0: pkg/deploy/elbv2 load balancer, target group and listener
 * managers, pkg/deploy/ec2 security group manager, pkg/aws/services discovery): discover, create tagged, modify what it
 * tagged, register targets, delete. test/aws-simulate.test.ts evaluates each against the rendered role.
 */
export const LBC_AWS_CALLS: readonly AwsCall[] = [
    ...[
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeVpcs",
        "ec2:DescribeAvailabilityZones",
        "ec2:DescribeInstances",
        "ec2:DescribeNetworkInterfaces",
        "elasticloadbalancing:DescribeLoadBalancers",
        "elasticloadbalancing:DescribeLoadBalancerAttributes",
        "elasticloadbalancing:DescribeListeners",
        "elasticloadbalancing:DescribeTargetGroups",
        "elasticloadbalancing:DescribeTargetGroupAttributes",
        "elasticloadbalancing:DescribeTargetHealth",
        "elasticloadbalancing:DescribeTags",
    ].map(
        (action): AwsCall => ({ source: "lib/aws-load-balancer-controller.ts", action, resource: "*", context: T, purpose: "discovery" }),
    ),
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "iam:CreateServiceLinkedRole",
        resource: "arn:aws:iam::{account}:role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing",
        context: { ...T, "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" },
        purpose: "ELB's service-linked role on a fresh account",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:CreateSecurityGroup",
        resource: SG,
        context: { ...T, ...TAGGING },
        purpose: "the NLB's frontend security group",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:CreateTags",
        resource: SG,
        context: { ...T, ...TAGGING, "ec2:CreateAction": "CreateSecurityGroup" },
        purpose: "tag it at creation",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:AuthorizeSecurityGroupIngress",
        resource: SG,
        context: { ...T, ...OWNED },
        purpose: "the spoke file's source ranges on the listener port",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:RevokeSecurityGroupIngress",
        resource: SG,
        context: { ...T, ...OWNED },
        purpose: "a range removed from the spoke file",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:AuthorizeSecurityGroupIngress",
        resource: "arn:aws:ec2:{region}:{account}:security-group/sg-0fedcba9876543210",
        context: { ...T, "ec2:Vpc": "{vpcArn}" },
        purpose: "the NLB's traffic into the nodes' / pods' security group (backend rules)",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:RevokeSecurityGroupIngress",
        resource: "arn:aws:ec2:{region}:{account}:security-group/sg-0fedcba9876543210",
        context: { ...T, "ec2:Vpc": "{vpcArn}" },
        purpose: "backend rules removed with the Service",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:CreateLoadBalancer",
        resource: LB,
        context: { ...T, ...TAGGING },
        purpose: "the NLB (scheme from the spoke file)",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:CreateTargetGroup",
        resource: TG,
        context: { ...T, ...TAGGING },
        purpose: "IP target group of the proxy pods",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:AddTags",
        resource: LB,
        context: { ...T, ...TAGGING, "elasticloadbalancing:CreateAction": "CreateLoadBalancer" },
        purpose: "tags at creation",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:CreateListener",
        resource: LB,
        context: T,
        purpose: "the TCP listener",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:ModifyLoadBalancerAttributes",
        resource: LB,
        context: { ...T, ...OWNED },
        purpose: "attributes from the Service annotations",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:SetSecurityGroups",
        resource: LB,
        context: { ...T, ...OWNED },
        purpose: "attach the security groups",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:ModifyTargetGroupAttributes",
        resource: TG,
        context: { ...T, ...OWNED },
        purpose: "target group attributes",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:RegisterTargets",
        resource: TG,
        context: T,
        purpose: "proxy pod IPs",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:DeregisterTargets",
        resource: TG,
        context: T,
        purpose: "pods that went away",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:DeleteLoadBalancer",
        resource: LB,
        context: { ...T, ...OWNED },
        purpose: "the Service deleted",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:DeleteTargetGroup",
        resource: TG,
        context: { ...T, ...OWNED },
        purpose: "the Service deleted",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "ec2:DeleteSecurityGroup",
        resource: SG,
        context: { ...T, ...OWNED },
        purpose: "the Service deleted",
    },
];
