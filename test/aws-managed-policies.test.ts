/**
 * The AWS managed policies the EKS spoke attaches (components/spoke/EksCluster.ts), evaluated by the IAM simulator
 * (@cloud-copilot/iam-simulate, test-only) from the documents committed in test/fixtures/aws-managed-policies/ (each
 * with its AWS managed policy reference page, version id and where it was read): every managed policy the program
 * attaches must have a fixture, the calls each role's software makes are allowed, and what the split of roles
 * promises is denied (a pod that reaches the node's credentials gets no ENI, volume, bucket or secret rights).
 */
import { runSimulation } from "@cloud-copilot/iam-simulate";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { CapturedResource } from "../tools/harness";
import { unwrapWire } from "../tools/wire";
import { byType, inputs, runHubAndSpoke, stackConfigDoc } from "./helpers";

type Doc = Record<string, unknown>;
interface ManagedPolicyFixture {
    policyArn: string;
    source: string;
    versionId: string;
    readFrom: string;
    document: Doc;
}
const FIXTURES = path.join(__dirname, "fixtures", "aws-managed-policies");
const MANAGED: ManagedPolicyFixture[] = fs
    .readdirSync(FIXTURES)
    .filter((f) => f.endsWith(".json"))
    .map((f) => JSON.parse(fs.readFileSync(path.join(FIXTURES, f), "utf8")));

const HUB = stackConfigDoc("hub-prod");
const EKS_SPOKE: string = HUB["platform:spokes"].find((s: { provider: string }) => s.provider === "eks").stack;
const ACCOUNT = "123456789012";

let rs: CapturedResource[] = [];
beforeAll(async () => {
    rs = (await runHubAndSpoke(EKS_SPOKE)).spoke.resources;
}, 240_000);

const out = (r: CapturedResource, k: string) => unwrapWire(r.outputs[k]) as any;
/** `arn:aws:iam::aws:policy/<path>` of a managed policy attachment (the partition as the mocks report it). */
const managedArnOf = (a: CapturedResource): string | undefined => {
    const arn = String(inputs(a).policyArn ?? "");
    return /^arn:aws[a-z-]*:iam::aws:policy\//.test(arn) ? arn.replace(/^arn:aws[a-z-]*:/, "arn:aws:") : undefined;
};
/** A role (by resource name suffix) with the managed policies attached to it, from the fixtures. */
function roleWithManaged(nameSuffix: string): { arn: string; policies: Doc[]; attached: string[] } {
    const role = byType(rs, "aws:iam/role:Role").find((r) => r.name.endsWith(nameSuffix));
    if (!role) throw new Error(`${EKS_SPOKE} renders no role *${nameSuffix}`);
    const attached = byType(rs, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        .filter((a) => inputs(a).role === out(role, "name"))
        .map(managedArnOf)
        .filter((x): x is string => !!x);
    const policies = attached.map((arn) => {
        const f = MANAGED.find((m) => m.policyArn === arn);
        if (!f) throw new Error(`no fixture for ${arn}`);
        return f.document;
    });
    return { arn: out(role, "arn"), policies, attached };
}

type Decision = "Allowed" | "ExplicitlyDenied" | "ImplicitlyDenied";
async function decide(p: { arn: string; policies: Doc[] }, action: string, resource: string, context: Doc = {}): Promise<Decision> {
    const r: any = await runSimulation(
        {
            identityPolicies: p.policies.map((policy, i) => ({ name: `managed-${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            request: {
                action,
                principal: p.arn,
                resource: { accountId: ACCOUNT, resource },
                contextVariables: {
                    "aws:PrincipalArn": p.arn,
                    "aws:PrincipalAccount": p.arn.split(":")[4],
                    "aws:ViaAWSService": "false",
                    "aws:SecureTransport": "true",
                    ...context,
                },
            },
        } as any,
        {},
    );
    if (r.resultType === "error") throw new Error(`simulator rejected ${action} ${resource}: ${JSON.stringify(r.errors)}`);
    const ignored: string[] = r.result?.ignoredContextKeys ?? [];
    if (ignored.length) throw new Error(`the simulator ignores context keys ${ignored.join(", ")} for ${action}`);
    return r.overallResult as Decision;
}

const EC2 = (what: string) => `arn:aws:ec2:ap-southeast-1:${ACCOUNT}:${what}`;

describe("simulated: the AWS managed policies the EKS spoke attaches", () => {
    it("every managed policy attached has a committed fixture with its source and version, and every fixture is attached", () => {
        const attached = [...new Set(byType(rs, "aws:iam/rolePolicyAttachment:RolePolicyAttachment").map(managedArnOf))].filter(
            (x): x is string => !!x,
        );
        expect(attached.length).toBeGreaterThanOrEqual(6);
        expect(attached.sort()).toEqual(MANAGED.map((m) => m.policyArn).sort());
        for (const m of MANAGED) {
            expect(m.source).toMatch(/^https:\/\/docs\.aws\.amazon\.com\/aws-managed-policy\/latest\/reference\/\w+\.html$/);
            expect(m.versionId).toMatch(/^v\d+$/);
            expect(m.readFrom).toMatch(/@[0-9a-f]{40}:/);
        }
    });

    it("the node role: what kubelet, nodeadm, the Pod Identity agent and the SSM agent call is allowed", async () => {
        const node = roleWithManaged("-node-role");
        expect(node.attached.map((a) => a.split("/").pop()).sort()).toEqual([
            "AmazonEC2ContainerRegistryReadOnly",
            "AmazonEKSWorkerNodePolicy",
            "AmazonSSMManagedInstanceCore",
        ]);
        const repo = `arn:aws:ecr:ap-southeast-1:${ACCOUNT}:repository/platform/auth`;
        for (const [action, resource] of [
            ["ecr:GetAuthorizationToken", "*"],
            ["ecr:BatchGetImage", repo],
            ["ecr:GetDownloadUrlForLayer", repo],
            ["eks:DescribeCluster", `arn:aws:eks:ap-southeast-1:${ACCOUNT}:cluster/platform-sg1`],
            ["eks-auth:AssumeRoleForPodIdentity", `arn:aws:eks:ap-southeast-1:${ACCOUNT}:cluster/platform-sg1`],
            ["ec2:DescribeInstances", "*"],
            ["ssm:UpdateInstanceInformation", EC2("instance/i-0123456789abcdef0")],
            ["ssmmessages:CreateControlChannel", "*"],
        ])
            expect([action, await decide(node, action, resource)]).toEqual([action, "Allowed"]);
    });

    it("the node role: no ENI, volume, bucket, stream or secret rights (those are the CNI's, the EBS CSI's and the spoke services' own roles)", async () => {
        const node = roleWithManaged("-node-role");
        for (const [action, resource] of [
            ["ec2:CreateNetworkInterface", EC2("network-interface/*")],
            ["ec2:AssignPrivateIpAddresses", EC2("network-interface/eni-0123456789abcdef0")],
            ["ec2:CreateVolume", EC2("volume/*")],
            ["ec2:AttachVolume", EC2("volume/vol-0123456789abcdef0")],
            ["s3:GetObject", `arn:aws:s3:::platform-policy-bundles-${ACCOUNT}-ap-southeast-1/spokes/sg1/current.json`],
            ["kinesis:PutRecords", `arn:aws:kinesis:ap-southeast-1:${ACCOUNT}:stream/platform-usage-sg1`],
            [
                "secretsmanager:GetSecretValue",
                `arn:aws:secretsmanager:ap-southeast-1:${ACCOUNT}:secret:platform/tenants/acme/api-keys-AbCdEf`,
            ],
        ])
            expect([action, await decide(node, action, resource)]).toEqual([action, "ImplicitlyDenied"]);
    });

    it("the VPC CNI role manages ENIs and tags only ENIs", async () => {
        const cni = roleWithManaged("-vpc-cni-role");
        expect(await decide(cni, "ec2:CreateNetworkInterface", EC2("network-interface/*"))).toBe("Allowed");
        expect(await decide(cni, "ec2:AssignPrivateIpAddresses", EC2("network-interface/eni-0123456789abcdef0"))).toBe("Allowed");
        expect(await decide(cni, "ec2:CreateTags", EC2("network-interface/eni-0123456789abcdef0"))).toBe("Allowed");
        expect(await decide(cni, "ec2:CreateTags", EC2("volume/vol-0123456789abcdef0"))).toBe("ImplicitlyDenied");
        expect(await decide(cni, "ec2:CreateVolume", EC2("volume/*"))).toBe("ImplicitlyDenied");
    });

    it("the EBS CSI role creates and deletes only volumes tagged as the driver's", async () => {
        const csi = roleWithManaged("-ebs-csi-role");
        const tagged = { "aws:RequestTag/ebs.csi.aws.com/cluster": "true", "aws:TagKeys": ["ebs.csi.aws.com/cluster"] };
        expect(await decide(csi, "ec2:CreateVolume", EC2("volume/*"), tagged)).toBe("Allowed");
        expect(await decide(csi, "ec2:CreateVolume", EC2("volume/*"), { "aws:TagKeys": [] })).toBe("ImplicitlyDenied");
        expect(await decide(csi, "ec2:DeleteVolume", EC2("volume/vol-1"), { "ec2:ResourceTag/ebs.csi.aws.com/cluster": "true" })).toBe(
            "Allowed",
        );
        expect(await decide(csi, "ec2:DeleteVolume", EC2("volume/vol-1"), { "ec2:ResourceTag/Name": "someone-elses" })).toBe(
            "ImplicitlyDenied",
        );
    });

    it("the cluster role: load balancers yes, a service-linked role of another service no", async () => {
        const cluster = roleWithManaged("-cluster-role");
        expect(await decide(cluster, "elasticloadbalancing:CreateLoadBalancer", "*")).toBe("Allowed");
        expect(
            await decide(cluster, "iam:CreateServiceLinkedRole", `arn:aws:iam::${ACCOUNT}:role/aws-service-role/*`, {
                "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com",
            }),
        ).toBe("Allowed");
        expect(
            await decide(cluster, "iam:CreateServiceLinkedRole", `arn:aws:iam::${ACCOUNT}:role/aws-service-role/*`, {
                "iam:AWSServiceName": "rds.amazonaws.com",
            }),
        ).toBe("ImplicitlyDenied");
    });
});
