import { runSimulation as simulatorRun } from "@cloud-copilot/iam-simulate";
import { beforeAll, describe, expect, it } from "vitest";
import { AUTH_AWS_CALLS } from "../services/auth/aws-calls";
import { METERING_AWS_CALLS } from "../services/metering/aws-calls";
import { MIGRATOR_AWS_CALLS, RECONCILER_AWS_CALLS } from "../services/reconciler/aws-calls";
import type { AwsCall } from "../services/shared/aws-calls";
import { CONSUMER_AWS_CALLS, REPLAY_AWS_CALLS } from "../services/usage-consumer/aws-calls";
import { MINT_AWS_CALLS, SPOKE_KEY_AWS_CALLS } from "../services/keys/aws-calls";
import { previewGuardPolicy } from "../lib/ci-roles";
import { runStack, type CapturedResource } from "../tools/harness";
import { SpokeIdentity } from "../components/hub/SpokeIdentity";
import { CERT_MANAGER_AWS_CALLS } from "../lib/edge-aws-calls";
import { LBC_AWS_CALLS } from "../lib/aws-load-balancer-controller";
import { GATEWAY_NAMESPACE } from "../lib/gateway";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import { MOCK_ACCOUNT_ID } from "../tools/mock-outputs";
import { unwrapWire } from "../tools/wire";
import { byType, flatConfig, inputs, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";

/**
 * Every AWS policy the hub renders, evaluated by an IAM policy simulator (@cloud-copilot/iam-simulate, test-only)
 * against every call in the services' tables (services/*\/aws-calls.ts), with the request context each call really
 * sends: identity policy + the resource's policy (bucket, key, secret) together, as AWS does.
 */

type Decision = "Allowed" | "ExplicitlyDenied" | "ImplicitlyDenied";

/**
 * The simulator, refusing to evaluate a request whose context it would silently drop (a key the action does not
 * know): a condition on a dropped key evaluates as missing, which would make a test pass for the wrong reason.
 */
async function runSimulation(simulation: any, settings: any): Promise<any> {
    const r: any = await simulatorRun(simulation, settings);
    const ignored: string[] = r.result?.ignoredContextKeys ?? [];
    if (ignored.length) throw new Error(`the simulator ignores context keys ${ignored.join(", ")} for ${simulation.request.action}`);
    return r;
}
type Doc = Record<string, unknown>;

const HUB = stackConfigDoc("hub-prod");
const REGION: string = HUB["aws:region"];
const ACCOUNT = MOCK_ACCOUNT_ID;
const SPOKES: string[] = HUB["platform:spokes"].map((s: { name: string }) => s.name).sort();

/** The key policy AWS creates when none is given (AWS KMS developer guide, "Default key policy"). */
const DEFAULT_KEY_POLICY: Doc = {
    Version: "2012-10-17",
    Statement: [
        {
            Sid: "Enable IAM User Permissions",
            Effect: "Allow",
            Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` },
            Action: "kms:*",
            Resource: "*",
        },
    ],
};

let rs: CapturedResource[];
const out = (r: CapturedResource, k: string) => unwrapWire(r.outputs[k]) as any;
const named = (type: string, name: string) => {
    const r = byType(rs, type).find((x) => x.name === name);
    if (!r) throw new Error(`hub-prod renders no ${type} named ${name}`);
    return r;
};
/** A role's rendered inline policies, by the role's resource name. */
function roleOf(resourceName: string): { arn: string; policies: Doc[] } {
    const role = named("aws:iam/role:Role", resourceName);
    const roleName = out(role, "name");
    const policies = byType(rs, "aws:iam/rolePolicy:RolePolicy")
        .filter((p) => inputs(p).role === roleName)
        .map((p) => JSON.parse(inputs(p).policy));
    if (!policies.length) throw new Error(`role ${resourceName} has no inline policy`);
    return { arn: out(role, "arn"), policies };
}
/** The resource policy that governs `arn` (bucket, KMS key, secret), or undefined. */
function resourcePolicyOf(arn: string): Doc | undefined {
    for (const k of byType(rs, "aws:kms/key:Key"))
        if (out(k, "arn") === arn) return inputs(k).policy ? JSON.parse(inputs(k).policy) : DEFAULT_KEY_POLICY;
    if (arn.startsWith("arn:aws:s3:::")) {
        const bucket = arn.slice("arn:aws:s3:::".length).split("/")[0];
        const bp = byType(rs, "aws:s3/bucketPolicy:BucketPolicy").find((p) => inputs(p).bucket === bucket);
        return bp ? JSON.parse(inputs(bp).policy) : undefined;
    }
    if (arn.includes(":secretsmanager:")) {
        const sp = byType(rs, "aws:secretsmanager/secretPolicy:SecretPolicy").find((p) => inputs(p).secretArn === arn);
        return sp ? JSON.parse(inputs(sp).policy) : undefined;
    }
    return undefined;
}

/** Fills `{name}` placeholders; an unknown one is a test bug, not a pass. */
function fill(s: string, vars: Record<string, string>): string {
    return s.replace(/\{(\w+)\}/g, (_, k: string) => {
        if (!(k in vars)) throw new Error(`no value for placeholder {${k}} in "${s}"`);
        return vars[k];
    });
}

interface Principal {
    arn: string;
    policies: Doc[];
    context?: Record<string, string | string[]>;
}

async function simulate(
    p: Principal,
    action: string,
    resource: string,
    context: Record<string, string | string[]>,
): Promise<{ decision: Decision; detail: string }> {
    const resourcePolicy = resourcePolicyOf(resource);
    const r = await runSimulation(
        {
            identityPolicies: p.policies.map((policy, i) => ({ name: `inline-${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            resourcePolicy: resourcePolicy as any,
            request: {
                action,
                principal: p.arn,
                resource: { accountId: ACCOUNT, resource },
                // What AWS always sets: the principal's ARN, and for KMS the caller's account.
                contextVariables: {
                    "aws:PrincipalArn": p.arn,
                    ...(action.startsWith("kms:") ? { "kms:CallerAccount": p.arn.split(":")[4] } : {}),
                    ...p.context,
                    ...context,
                },
            },
        } as any,
        {},
    );
    if (r.resultType === "error") throw new Error(`simulator rejected ${action} ${resource}: ${JSON.stringify(r.errors)}`);
    return { decision: r.overallResult as Decision, detail: `${p.arn} ${action} ${resource} ${JSON.stringify(context)}` };
}

async function evaluate(
    p: Principal,
    calls: readonly AwsCall[],
    vars: Record<string, string>,
    change: (c: Record<string, string | string[]>) => Record<string, string | string[]> = (c) => c,
) {
    const results = [];
    for (const c of calls) {
        const context = Object.fromEntries(
            Object.entries(c.context).map(([k, v]) => [k, Array.isArray(v) ? v.map((x) => fill(x, vars)) : fill(v, vars)]),
        );
        results.push(await simulate(p, c.action, fill(c.resource, vars), change(context)));
    }
    return results;
}
const notAllowed = (rs: { decision: Decision; detail: string }[]) =>
    rs.filter((r) => r.decision !== "Allowed").map((r) => `${r.decision}: ${r.detail}`);
const allowed = (rs: { decision: Decision; detail: string }[]) => rs.filter((r) => r.decision === "Allowed").map((r) => r.detail);

let vars: Record<string, string>;
/** Per spoke: its role as the spoke's services assume it, and its placeholders. */
let spokes: Record<string, { principal: Principal; vars: Record<string, string> }>;

beforeAll(async () => {
    const hub = await runRepoStack("hub-prod");
    rs = hub.resources;
    const bucket = byType(rs, "aws:s3/bucket:Bucket").find((b) => b.name === "policy-store-bucket")!;
    const cluster = named("aws:rds/cluster:Cluster", "usage-ledger-db");
    vars = {
        partition: "aws",
        region: REGION,
        account: ACCOUNT,
        revision: "7",
        policyBucketArn: out(bucket, "arn"),
        policyKeyArn: out(named("aws:kms/key:Key", "policy-store-key"), "arn"),
        ledgerKeyArn: out(named("aws:kms/key:Key", "usage-ledger-key"), "arn"),
        ingestSecretArn: out(named("aws:secretsmanager/secret:Secret", "usage-ledger-ingest-password"), "arn"),
        reporterSecretArn: out(named("aws:secretsmanager/secret:Secret", "usage-ledger-reporter-password"), "arn"),
        masterSecretArn: out(cluster, "masterUserSecrets")[0].secretArn,
        failureQueueArn: out(named("aws:sqs/queue:Queue", "usage-ledger-failures"), "arn"),
        failedBatchBucketArn: out(named("aws:s3/bucket:Bucket", "usage-ledger-failed-batches"), "arn"),
        ledgerVpcArn: out(named("aws:ec2/vpc:Vpc", "usage-ledger-vpc"), "arn"),
        ledgerSubnetArn: out(named("aws:ec2/subnet:Subnet", "usage-ledger-private-0"), "arn"),
        lambdaSgArn: out(named("aws:ec2/securityGroup:SecurityGroup", "usage-ledger-consumer-sg"), "arn"),
    };
    const identities = HUB["platform:spokeIdentities"] ?? {};
    spokes = Object.fromEntries(
        SPOKES.map((s) => {
            const role = roleOf(`spoke-${s}-role`);
            const egress: string[] = identities[s]?.egressCidrs ?? [];
            const sourceIp = egress.length ? egress[0].replace(/\/\d+$/, "") : "203.0.113.10";
            return [
                s,
                {
                    principal: { ...role, context: { "aws:SourceIp": sourceIp, "aws:ViaAWSService": "false" } },
                    vars: {
                        ...vars,
                        spoke: s,
                        sourceIp,
                        usageStreamArn: out(named("aws:kinesis/stream:Stream", `usage-ledger-${s}`), "arn"),
                    },
                },
            ];
        }),
    );
}, 120_000);

describe("simulated: the spoke roles (auth and metering services)", () => {
    it("every call of the auth and metering tables is allowed for every spoke (the ACK included)", async () => {
        for (const s of SPOKES) {
            const { principal, vars: v } = spokes[s];
            expect(notAllowed(await evaluate(principal, [...AUTH_AWS_CALLS, ...METERING_AWS_CALLS], v)), s).toEqual([]);
        }
    });

    it("a spoke can neither read nor write another spoke's objects, nor put to its stream", async () => {
        for (const s of SPOKES)
            for (const other of SPOKES.filter((o) => o !== s)) {
                const v = { ...spokes[other].vars, sourceIp: spokes[s].vars.sourceIp };
                const direct = [...AUTH_AWS_CALLS, ...METERING_AWS_CALLS].filter((c) => !c.action.startsWith("kms:"));
                expect(allowed(await evaluate(spokes[s].principal, direct, v)), `${s} -> ${other}`).toEqual([]);
            }
    });

    it("plaintext, TLS below 1.2, another KMS key, another algorithm or the AWS managed key: the ACK is denied", async () => {
        const ack = AUTH_AWS_CALLS.filter((c) => c.action === "s3:PutObject");
        const { principal, vars: v } = spokes[SPOKES[0]];
        const foreignKey = `arn:aws:kms:${REGION}:${ACCOUNT}:key/00000000-0000-0000-0000-000000000000`;
        for (const change of [
            (c: any) => ({ ...c, "aws:SecureTransport": "false" }),
            (c: any) => ({ ...c, "s3:TlsVersion": "1.1" }),
            (c: any) => ({
                ...c,
                "s3:x-amz-server-side-encryption": "aws:kms",
                "s3:x-amz-server-side-encryption-aws-kms-key-id": foreignKey,
            }),
            (c: any) => ({ ...c, "s3:x-amz-server-side-encryption": "AES256" }),
            (c: any) => ({ ...c, "s3:x-amz-server-side-encryption": "aws:kms" }),
        ]) {
            const r = await evaluate(principal, ack, v, change);
            expect(r.map((x) => x.decision)).toEqual(["ExplicitlyDenied"]);
        }
        // The bucket's own key named explicitly is fine (what the hub's own writes send).
        const own = await evaluate(principal, ack, v, (c) => ({
            ...c,
            "s3:x-amz-server-side-encryption": "aws:kms",
            "s3:x-amz-server-side-encryption-aws-kms-key-id": v.policyKeyArn,
        }));
        expect(notAllowed(own)).toEqual([]);
    });

    it("the bucket key is usable only through S3 in the hub's region", async () => {
        const { principal, vars: v } = spokes[SPOKES[0]];
        const kms = AUTH_AWS_CALLS.filter((c) => c.action.startsWith("kms:"));
        expect(allowed(await evaluate(principal, kms, v, (c) => ({ ...c, "kms:ViaService": undefined as any })).then((x) => x))).toEqual(
            [],
        );
        expect(allowed(await evaluate(principal, kms, v, (c) => ({ ...c, "kms:ViaService": "s3.us-east-1.amazonaws.com" })))).toEqual([]);
    });

    it("an on-prem spoke with egress ranges is denied from any other source address", async () => {
        const withEgress = SPOKES.filter((s) => (HUB["platform:spokeIdentities"]?.[s]?.egressCidrs ?? []).length);
        expect(withEgress.length).toBeGreaterThan(0);
        for (const s of withEgress) {
            const direct = [...AUTH_AWS_CALLS, ...METERING_AWS_CALLS].filter((c) => !c.action.startsWith("kms:"));
            const r = await evaluate(
                { ...spokes[s].principal, context: { ...spokes[s].principal.context, "aws:SourceIp": "192.0.2.77" } },
                direct,
                spokes[s].vars,
            );
            expect(
                r.every((x) => x.decision === "ExplicitlyDenied"),
                s,
            ).toBe(true);
        }
    });
});

describe("simulated: the ledger Lambdas", () => {
    const lambdas = () => ({
        migrator: { role: roleOf("usage-ledger-migrator-role"), calls: MIGRATOR_AWS_CALLS, logs: "usage-ledger-migrator-logs" },
        reconciler: { role: roleOf("usage-ledger-reconciler-role"), calls: RECONCILER_AWS_CALLS, logs: "usage-ledger-reconciler-logs" },
        consumer: { role: roleOf("usage-ledger-consumer-role"), calls: CONSUMER_AWS_CALLS, logs: "usage-ledger-consumer-logs" },
    });
    const varsFor = (logs: string, spoke = SPOKES[0]) => ({
        ...vars,
        logGroupArn: out(named("aws:cloudwatch/logGroup:LogGroup", logs), "arn"),
        usageStreamArn: out(named("aws:kinesis/stream:Stream", `usage-ledger-${spoke}`), "arn"),
    });

    it("every call of each Lambda's table is allowed (the consumer on every spoke's stream)", async () => {
        for (const [name, l] of Object.entries(lambdas())) {
            for (const spoke of SPOKES)
                expect(notAllowed(await evaluate(l.role, l.calls, varsFor(l.logs, spoke))), `${name} ${spoke}`).toEqual([]);
        }
    });

    it("no managed policy: each Lambda's ENIs only in the ledger's VPC, subnets and security group", async () => {
        const attached = byType(rs, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            .map(inputs)
            .filter((a) => /usage-ledger/.test(String(a.role)) || /LambdaVPCAccess/.test(String(a.policyArn)));
        expect(attached).toEqual([]);
        const other = {
            ...vars,
            ledgerVpcArn: `arn:aws:ec2:${REGION}:${ACCOUNT}:vpc/vpc-0other`,
            ledgerSubnetArn: `arn:aws:ec2:${REGION}:${ACCOUNT}:subnet/subnet-0other`,
            lambdaSgArn: `arn:aws:ec2:${REGION}:${ACCOUNT}:security-group/sg-0other`,
        };
        for (const [name, l] of Object.entries(lambdas())) {
            const eni = l.calls.filter((c) => c.action.startsWith("ec2:") && c.resource !== "*");
            expect(eni.length, name).toBe(6);
            expect(allowed(await evaluate(l.role, eni, { ...other, logGroupArn: "x" })), name).toEqual([]);
        }
    });

    it("each Lambda reads only its own secrets, and the ledger key only through Secrets Manager", async () => {
        const { reconciler, consumer } = lambdas();
        const other = (calls: readonly AwsCall[], from: string, to: string) =>
            calls.filter((c) => c.resource === from).map((c) => ({ ...c, resource: to }));
        expect(
            allowed(
                await evaluate(
                    reconciler.role,
                    other(RECONCILER_AWS_CALLS, "{reporterSecretArn}", "{ingestSecretArn}"),
                    varsFor(reconciler.logs),
                ),
            ),
        ).toEqual([]);
        expect(
            allowed(
                await evaluate(consumer.role, other(CONSUMER_AWS_CALLS, "{ingestSecretArn}", "{masterSecretArn}"), varsFor(consumer.logs)),
            ),
        ).toEqual([]);
        for (const l of [reconciler, consumer]) {
            const kms = l.calls.filter((c) => c.action === "kms:Decrypt");
            expect(
                allowed(await evaluate(l.role, kms, varsFor(l.logs), (c) => ({ ...c, "kms:ViaService": `s3.${REGION}.amazonaws.com` }))),
            ).toEqual([]);
        }
    });
});

describe("simulated: failed usage batches (kept by the consumer, replayed by an operator)", () => {
    const consumer = () => roleOf("usage-ledger-consumer-role");
    const consumerVars = () => ({
        ...vars,
        logGroupArn: out(named("aws:cloudwatch/logGroup:LogGroup", "usage-ledger-consumer-logs"), "arn"),
        usageStreamArn: out(named("aws:kinesis/stream:Stream", `usage-ledger-${SPOKES[0]}`), "arn"),
    });
    const keep = () => CONSUMER_AWS_CALLS.filter((c) => c.source === "services/usage-consumer/failed-batches.ts");

    it("the consumer's upload is denied over plaintext, without the key header, under another key, or outside failed/", async () => {
        const foreignKey = `arn:aws:kms:${REGION}:${ACCOUNT}:key/00000000-0000-0000-0000-000000000000`;
        const put = keep().filter((c) => c.action === "s3:PutObject");
        expect(put).toHaveLength(1);
        for (const change of [
            (c: any) => ({ ...c, "aws:SecureTransport": "false" }),
            (c: any) => {
                const { "s3:x-amz-server-side-encryption-aws-kms-key-id": _, ...rest } = c;
                return rest;
            },
            (c: any) => ({ ...c, "s3:x-amz-server-side-encryption-aws-kms-key-id": foreignKey }),
        ])
            expect((await evaluate(consumer(), put, consumerVars(), change)).map((x) => x.decision)).toEqual(["ExplicitlyDenied"]);
        const elsewhere = put.map((c) => ({ ...c, resource: "{failedBatchBucketArn}/elsewhere.json" }));
        expect(allowed(await evaluate(consumer(), elsewhere, consumerVars()))).toEqual([]);
        // The ledger key only through S3 in the hub's region for the data key.
        const gdk = keep().filter((c) => c.action === "kms:GenerateDataKey");
        expect(
            allowed(
                await evaluate(consumer(), gdk, consumerVars(), (c) => ({
                    ...c,
                    "kms:ViaService": `secretsmanager.${REGION}.amazonaws.com`,
                })),
            ),
        ).toEqual([]);
    });

    it("a hub deployer (administrator in the hub account) can run the replay; the consumer role cannot read or delete batches", async () => {
        // The hub's own account (the sample file's deployer ARN names a documentation account, not the mock's).
        const admin: Principal = {
            arn: `arn:aws:iam::${ACCOUNT}:role/platform-hub-deployer`,
            policies: [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] }],
        };
        expect(notAllowed(await evaluate(admin, REPLAY_AWS_CALLS, vars))).toEqual([]);
        // Plaintext and direct use of the ledger key stay denied even to an administrator.
        expect(
            allowed(
                await evaluate(
                    admin,
                    REPLAY_AWS_CALLS.filter((c) => c.action.startsWith("s3:")),
                    vars,
                    (c) => ({ ...c, "aws:SecureTransport": "false" }),
                ),
            ),
        ).toEqual([]);
        expect(
            allowed(
                await evaluate(
                    admin,
                    REPLAY_AWS_CALLS.filter((c) => c.action.startsWith("kms:")),
                    vars,
                    (c) => {
                        const { "kms:ViaService": _, ...rest } = c;
                        return rest;
                    },
                ),
            ),
        ).toEqual([]);
        expect(allowed(await evaluate(consumer(), REPLAY_AWS_CALLS, vars))).toEqual([]);
    });
});

describe("simulated: who may obtain a spoke role", () => {
    /** Simulates sts:AssumeRole (+ TagSession for Pod Identity) into `roleResource`'s role, trust policy as the resource policy. */
    async function assume(
        roleResourceName: string,
        principal: string,
        identityPolicies: Doc[],
        context: Record<string, string | string[]>,
        actions = ["sts:AssumeRole"],
        resources = rs,
    ) {
        const role = resources.find((r) => r.type === "aws:iam/role:Role" && r.name === roleResourceName)!;
        const decisions: Decision[] = [];
        for (const action of actions) {
            const r = await runSimulation(
                {
                    identityPolicies: identityPolicies.map((policy, i) => ({ name: `p${i}`, policy })),
                    serviceControlPolicies: [],
                    resourceControlPolicies: [],
                    resourcePolicy: JSON.parse(inputs(role).assumeRolePolicy),
                    request: {
                        action,
                        principal,
                        resource: { accountId: ACCOUNT, resource: out(role, "arn") },
                        contextVariables: { "aws:SecureTransport": "true", ...context },
                    },
                } as any,
                {},
            );
            if (r.resultType === "error") throw new Error(JSON.stringify(r.errors));
            decisions.push(r.overallResult as Decision);
        }
        return decisions;
    }
    const podIdentity = (clusterArn: string, namespace: string, serviceAccount: string) => ({
        "aws:SourceAccount": ACCOUNT,
        "aws:RequestTag/eks-cluster-arn": clusterArn,
        "aws:RequestTag/kubernetes-namespace": namespace,
        "aws:RequestTag/kubernetes-service-account": serviceAccount,
        "aws:TagKeys": ["eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account"],
    });

    it("EKS: Pod Identity for the spoke's own cluster (ARN as the rendered spoke has it) and its service accounts only", async () => {
        const eks = SPOKES.filter((s) => HUB["platform:spokes"].find((x: any) => x.name === s).provider === "eks");
        expect(eks.length).toBeGreaterThan(0);
        const { spoke } = await runHubAndSpoke(HUB["platform:spokes"].find((x: any) => x.name === eks[0]).stack);
        const clusterArn = out(spoke.resources.find((r) => r.type === "aws:eks/cluster:Cluster")!, "arn");
        const role = `spoke-${eks[0]}-role`;
        const pods = "pods.eks.amazonaws.com";
        const both = ["sts:AssumeRole", "sts:TagSession"];
        const hub = (await runRepoStack("hub-prod")).resources;
        expect(await assume(role, pods, [], podIdentity(clusterArn, GATEWAY_NAMESPACE, "auth"), both, hub)).toEqual(["Allowed", "Allowed"]);
        expect(await assume(role, pods, [], podIdentity(clusterArn, PLATFORM_NAMESPACE, "metering"), both, hub)).toEqual([
            "Allowed",
            "Allowed",
        ]);
        const other = clusterArn.replace(/cluster\/.*$/, "cluster/platform-elsewhere");
        expect(await assume(role, pods, [], podIdentity(other, GATEWAY_NAMESPACE, "auth"), both, hub)).toEqual([
            "ImplicitlyDenied",
            "ImplicitlyDenied",
        ]);
        expect(await assume(role, pods, [], podIdentity(clusterArn, "default", "default"), both, hub)).toEqual([
            "ImplicitlyDenied",
            "ImplicitlyDenied",
        ]);
        expect(
            await assume(
                role,
                pods,
                [],
                { ...podIdentity(clusterArn, GATEWAY_NAMESPACE, "auth"), "aws:SourceAccount": "999999999999" },
                both,
                hub,
            ),
        ).toEqual(["ImplicitlyDenied", "ImplicitlyDenied"]);
    });

    it("EKS in another region than the hub: the trust names the cluster in its own region", async () => {
        let captured: CapturedResource[] = [];
        const r = await runStack({
            project: "platform",
            stack: "t",
            config: { "aws:region": '"ap-southeast-1"' },
            program: () => {
                new SpokeIdentity("spoke-fra1", {
                    spoke: "fra1",
                    provider: "eks",
                    clusterName: "platform-fra1",
                    clusterRegion: "eu-central-1",
                    bucketArn: "arn:aws:s3:::b",
                    kmsKeyArn: `arn:aws:kms:ap-southeast-1:${ACCOUNT}:key/k`,
                    region: "ap-southeast-1",
                    accountId: ACCOUNT,
                    partition: "aws",
                    hubDeployers: [`arn:aws:iam::${ACCOUNT}:role/hub-deployer`],
                });
                return {};
            },
        });
        captured = r.resources;
        const pods = "pods.eks.amazonaws.com";
        const arnIn = (region: string) => `arn:aws:eks:${region}:${ACCOUNT}:cluster/platform-fra1`;
        expect(
            await assume(
                "spoke-fra1-role",
                pods,
                [],
                podIdentity(arnIn("eu-central-1"), GATEWAY_NAMESPACE, "auth"),
                ["sts:AssumeRole", "sts:TagSession"],
                captured,
            ),
        ).toEqual(["Allowed", "Allowed"]);
        expect(
            await assume(
                "spoke-fra1-role",
                pods,
                [],
                podIdentity(arnIn("ap-southeast-1"), GATEWAY_NAMESPACE, "auth"),
                ["sts:AssumeRole"],
                captured,
            ),
        ).toEqual(["ImplicitlyDenied"]);
    });

    it("on-prem access key: its own source user, from the site's egress, before the slot's maximum age; nothing else", async () => {
        const s = SPOKES.find(
            (x) => HUB["platform:spokeIdentities"]?.[x]?.mode === "access-key" && HUB["platform:spokeIdentities"][x].egressCidrs?.length,
        )!;
        const idc = HUB["platform:spokeIdentities"][s];
        const user = byType(rs, "aws:iam/user:User").find((u) => u.name === `spoke-${s}-source-${idc.keys[0].id}`)!;
        const userPolicy = JSON.parse(
            inputs(byType(rs, "aws:iam/userPolicy:UserPolicy").find((p) => inputs(p).user === out(user, "name"))!).policy,
        );
        const ip = idc.egressCidrs[0].replace(/\/\d+$/, "");
        const created = Date.parse(`${idc.keys[0].createdAt}T00:00:00Z`);
        const at = (days: number) => new Date(created + days * 86_400_000).toISOString();
        const ok = { "aws:SourceIp": ip, "aws:CurrentTime": at(1) };
        expect(await assume(`spoke-${s}-role`, out(user, "arn"), [userPolicy], ok)).toEqual(["Allowed"]);
        expect(await assume(`spoke-${s}-role`, out(user, "arn"), [userPolicy], { ...ok, "aws:SourceIp": "192.0.2.1" })).toEqual([
            "ImplicitlyDenied",
        ]);
        expect(
            await assume(`spoke-${s}-role`, out(user, "arn"), [userPolicy], {
                ...ok,
                "aws:CurrentTime": at((idc.maxKeyAgeDays ?? 90) + 1),
            }),
        ).toEqual(["ImplicitlyDenied"]);
        // Another spoke's source user (with its own policy) cannot assume this spoke's role.
        const other = SPOKES.find((x) => x !== s && HUB["platform:spokeIdentities"]?.[x]?.mode === "access-key");
        if (other) {
            const otherUser = byType(rs, "aws:iam/user:User").find((u) => u.name.startsWith(`spoke-${other}-source-`))!;
            const otherPolicy = JSON.parse(
                inputs(byType(rs, "aws:iam/userPolicy:UserPolicy").find((p) => inputs(p).user === out(otherUser, "name"))!).policy,
            );
            expect(await assume(`spoke-${s}-role`, out(otherUser, "arn"), [otherPolicy], ok)).toEqual(["ImplicitlyDenied"]);
        }
    });
});

describe("simulated: tenants' API key secrets", () => {
    const readers = (): Record<string, string[]> => HUB["platform:tenantKeys"].readers;
    const deployers = (): string[] => HUB["platform:hubDeployers"];
    /** A role principal of another account than the hub's: the readers' roles (sample account) are cross-account. */
    async function read(
        principalArn: string,
        tenant: string,
        context: Record<string, string> = {},
        secretName = `api-keys-${tenant}`,
    ): Promise<Decision[]> {
        const secret = byType(rs, "aws:secretsmanager/secret:Secret").find((x) => x.name === secretName)!;
        expect(inputs(secret).kmsKeyId, secretName).toBe(out(named("aws:kms/key:Key", "api-keys-key"), "arn"));
        const key = named("aws:kms/key:Key", "api-keys-key");
        const ownAccount = principalArn.split(":")[4];
        // The reader's own account lets it call (its identity policy); the hub's resource policies decide.
        const identity: Doc = {
            Version: "2012-10-17",
            Statement: [{ Effect: "Allow", Action: ["secretsmanager:GetSecretValue", "kms:Decrypt"], Resource: "*" }],
        };
        const decisions: Decision[] = [];
        for (const [action, resource, ctx] of [
            ["secretsmanager:GetSecretValue", out(secret, "arn"), {}],
            ["kms:Decrypt", out(key, "arn"), { "kms:ViaService": `secretsmanager.${REGION}.amazonaws.com` }],
        ] as const) {
            const r = await runSimulation(
                {
                    identityPolicies: [{ name: "own", policy: identity }],
                    serviceControlPolicies: [],
                    resourceControlPolicies: [],
                    resourcePolicy: resourcePolicyOf(resource) as any,
                    request: {
                        action,
                        principal: principalArn,
                        resource: { accountId: ACCOUNT, resource },
                        contextVariables: {
                            "aws:SecureTransport": "true",
                            "aws:PrincipalArn": principalArn,
                            "aws:PrincipalAccount": ownAccount,
                            ...ctx,
                            ...(action.startsWith("kms:") ? { "kms:CallerAccount": ownAccount, ...context } : {}),
                        },
                    },
                } as any,
                {},
            );
            if (r.resultType === "error") throw new Error(JSON.stringify(r.errors));
            decisions.push(r.overallResult as Decision);
        }
        return decisions;
    }

    it("each tenant's readers read its secret (and its key through Secrets Manager); the hub deployer too", async () => {
        for (const [tenant, roles] of Object.entries(readers()))
            for (const role of roles) expect(await read(role, tenant), `${tenant} ${role}`).toEqual(["Allowed", "Allowed"]);
        for (const role of deployers()) expect(await read(role, "acme")).toEqual(["Allowed", "Allowed"]);
    });

    it("another tenant's reader, a spoke deployer, a spoke role, a CI preview role: denied", async () => {
        const [a, b] = Object.keys(readers());
        expect((await read(readers()[b][0], a))[0]).not.toBe("Allowed");
        const others = [
            HUB["platform:spokeIdentities"].hn1.deployerRoleArn,
            out(named("aws:iam/role:Role", "spoke-hn1-role"), "arn"),
            "arn:aws:iam::111122223333:role/platform-ci-preview",
        ];
        for (const p of others) expect((await read(p, a))[0], p).toBe("ExplicitlyDenied");
    });

    it("on-prem source keys: each spoke's deployer (another account) reads its own; the hub deployers too; nobody else", async () => {
        const ids = HUB["platform:spokeIdentities"];
        const slotSecret = (s: string) => `spoke-${s}-key-${ids[s].keys[0].id}`;
        const onprem = Object.keys(ids).filter((s) => ids[s].mode === "access-key");
        expect(onprem.length).toBeGreaterThan(1);
        for (const s of onprem) {
            expect(await read(ids[s].deployerRoleArn, "", {}, slotSecret(s)), s).toEqual(["Allowed", "Allowed"]);
            for (const d of deployers()) expect(await read(d, "", {}, slotSecret(s))).toEqual(["Allowed", "Allowed"]);
            for (const o of onprem.filter((x) => x !== s))
                expect((await read(ids[o].deployerRoleArn, "", {}, slotSecret(s)))[0], `${o} -> ${s}`).toBe("ExplicitlyDenied");
            expect((await read("arn:aws:iam::111122223333:role/platform-ci-preview", "", {}, slotSecret(s)))[0]).toBe("ExplicitlyDenied");
        }
    });

    it("minting (npm run mint-key) as a hub deployer: every call allowed; a reader cannot write; the preview role neither reads nor writes", async () => {
        const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
        const credentialKeyArn = out(named("aws:kms/key:Key", "api-keys-key"), "arn");
        for (const t of Object.keys(readers())) {
            const v = {
                ...vars,
                tenantSecretArn: out(named("aws:secretsmanager/secret:Secret", `api-keys-${t}`), "arn"),
                credentialKeyArn,
            };
            for (const d of deployers())
                expect(notAllowed(await evaluate({ arn: d, policies: [allowAll] }, MINT_AWS_CALLS, v)), d).toEqual([]);
            // A reader cannot plant a key of its choosing.
            const put = MINT_AWS_CALLS.filter((c) => c.action === "secretsmanager:PutSecretValue");
            expect((await evaluate({ arn: readers()[t][0], policies: [allowAll] }, put, v)).map((r) => r.decision)).toEqual([
                "ExplicitlyDenied",
            ]);
            // The CI preview role, whatever read-only policy sits beside its guard (lib/ci-roles.ts).
            const preview = {
                arn: "arn:aws:iam::111122223333:role/platform-ci-preview",
                policies: [allowAll, previewGuardPolicy({ region: REGION }) as unknown as Doc],
            };
            const secretCalls = MINT_AWS_CALLS.filter((c) =>
                ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "kms:Decrypt"].includes(c.action),
            );
            expect(secretCalls).toHaveLength(3);
            expect(allowed(await evaluate(preview, secretCalls, v))).toEqual([]);
        }
    });

    it("the key is not usable outside Secrets Manager, even by a reader", async () => {
        const [t] = Object.keys(readers());
        expect(
            (await read(readers()[t][0], t, { "kms:ViaService": "s3.${REGION}.amazonaws.com".replace("${REGION}", REGION) }))[1],
        ).not.toBe("Allowed");
    });
});

describe("simulated: on-prem source keys minted outside Pulumi (npm run mint-key -- spoke-access-key)", () => {
    it("a hub deployer makes every call; the preview role and a spoke deployer can neither mint, retire nor write a key", async () => {
        // IAM calls are same-account only, so the hub deployer here is in the hub's (mock) account, as a real one is;
        // the sample hub file's deployers are in a documentation account. The hub is rendered again with it.
        const deployer = `arn:aws:iam::${ACCOUNT}:role/platform-hub-deployer`;
        const doc = structuredClone(HUB);
        doc["platform:hubDeployers"] = [deployer];
        const hub = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
        const saved = rs;
        rs = hub.resources; // resourcePolicyOf reads the policies of this render
        try {
            const ids = doc["platform:spokeIdentities"];
            const onprem = Object.keys(ids).filter((s) => ids[s].mode === "access-key");
            expect(onprem.length).toBeGreaterThan(0);
            for (const s of onprem) {
                const slot = ids[s].keys[0].id;
                const secret = named("aws:secretsmanager/secret:Secret", `spoke-${s}-key-${slot}`);
                const v = {
                    ...vars,
                    slotSecretArn: out(secret, "arn"),
                    slotUserArn: out(named("aws:iam/user:User", `spoke-${s}-source-${slot}`), "arn"),
                    credentialKeyArn: out(named("aws:kms/key:Key", "api-keys-key"), "arn"),
                };
                expect(inputs(secret).kmsKeyId).toBe(v.credentialKeyArn);
                expect(notAllowed(await evaluate({ arn: deployer, policies: [allowAll] }, SPOKE_KEY_AWS_CALLS, v)), s).toEqual([]);
                // What mints, retires or writes; listing keys and describing the secret are metadata.
                const mutating = SPOKE_KEY_AWS_CALLS.filter(
                    (c) => !["secretsmanager:DescribeSecret", "iam:ListAccessKeys"].includes(c.action),
                );
                expect(mutating.map((c) => c.action).sort()).toEqual([
                    "iam:CreateAccessKey",
                    "iam:DeleteAccessKey",
                    "kms:GenerateDataKey",
                    "secretsmanager:PutSecretValue",
                ]);
                // The CI preview role, in the hub's account, whatever read-only policy sits beside its guard.
                const preview = {
                    arn: `arn:aws:iam::${ACCOUNT}:role/platform-ci-preview`,
                    policies: [allowAll, previewGuardPolicy({ region: REGION }) as unknown as Doc],
                };
                expect(allowed(await evaluate(preview, mutating, v)), s).toEqual([]);
                // Another principal of the hub's account allowed everything by its identity policy (a spoke's
                // deployer): it cannot plant a key of its choosing in the slot's secret.
                const other = { arn: `arn:aws:iam::${ACCOUNT}:role/platform-spoke-deployer-${s}`, policies: [allowAll] };
                const put = SPOKE_KEY_AWS_CALLS.filter((c) => c.action === "secretsmanager:PutSecretValue");
                expect((await evaluate(other, put, v)).map((r) => r.decision)).toEqual(["ExplicitlyDenied"]);
            }
        } finally {
            rs = saved;
        }
    }, 180_000);
});

describe("simulated: cert-manager's DNS-01 role on an EKS spoke", () => {
    it("publishes and cleans the challenge of its own hostname in its own zone, nothing else", async () => {
        const eks = HUB["platform:spokes"].find((x: any) => x.provider === "eks");
        const { spoke } = await runHubAndSpoke(eks.stack);
        const role = spoke.resources.find((r) => r.type === "aws:iam/role:Role" && r.name === "cert-manager-dns01-role")!;
        const policy = JSON.parse(
            inputs(spoke.resources.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "cert-manager-dns01-permissions")!)
                .policy,
        );
        const listener = stackConfigDoc(eks.stack)["platform:gateway"].listener;
        const principal: Principal = { arn: out(role, "arn"), policies: [policy] };
        const v = { hostedZoneId: listener.tls.route53.hostedZoneId, challengeName: `_acme-challenge.${listener.hostname}` };
        expect(notAllowed(await evaluate(principal, CERT_MANAGER_AWS_CALLS, v))).toEqual([]);
        const change = CERT_MANAGER_AWS_CALLS.filter((c) => c.action === "route53:ChangeResourceRecordSets");
        expect(allowed(await evaluate(principal, change, { ...v, hostedZoneId: "Z9999999999OTHER" }))).toEqual([]);
        expect(
            allowed(await evaluate(principal, change, { ...v, challengeName: `www.${listener.hostname.split(".").slice(1).join(".")}` })),
        ).toEqual([]);
        expect(
            allowed(await evaluate(principal, change, v, (c) => ({ ...c, "route53:ChangeResourceRecordSetsRecordTypes": ["A"] }))),
        ).toEqual([]);
    });
});

describe("simulated: the AWS Load Balancer Controller's role on an EKS spoke", () => {
    it("provisions, updates and deletes the gateway's NLB; touches no load balancer, target group or security group it did not create", async () => {
        const eks = HUB["platform:spokes"].find((x: any) => x.provider === "eks");
        const { spoke } = await runHubAndSpoke(eks.stack);
        const role = spoke.resources.find((r) => r.type === "aws:iam/role:Role" && r.name === "aws-load-balancer-controller-role")!;
        const policy = JSON.parse(
            inputs(
                spoke.resources.find(
                    (r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "aws-load-balancer-controller-permissions",
                )!,
            ).policy,
        );
        const principal: Principal = { arn: out(role, "arn"), policies: [policy] };
        const vpcId = inputs(
            spoke.resources.find((r) => r.type === "kubernetes:helm.sh/v3:Release" && r.name === "aws-load-balancer-controller")!,
        ).values.vpcId;
        expect(vpcId).toMatch(/^vpc-|_id$|-id$/);
        const region = stackConfigDoc(eks.stack)["platform:cluster"].region;
        const v = {
            region,
            account: ACCOUNT,
            clusterName: `platform-${eks.name}`,
            vpcArn: `arn:aws:ec2:${region}:${ACCOUNT}:vpc/${vpcId}`,
        };
        expect(notAllowed(await evaluate(principal, LBC_AWS_CALLS, v))).toEqual([]);
        // Upstream's policy opens ingress on any security group of the account; ours only in the spoke's VPC.
        const backend = LBC_AWS_CALLS.filter((c) => "ec2:Vpc" in c.context);
        expect(backend).toHaveLength(2);
        expect(allowed(await evaluate(principal, backend, { ...v, vpcArn: `arn:aws:ec2:${region}:${ACCOUNT}:vpc/vpc-0other` }))).toEqual(
            [],
        );
        // Someone else's load balancer, target group or security group (no elbv2.k8s.aws/cluster tag): no change, no delete.
        const owned = LBC_AWS_CALLS.filter((c) => "aws:ResourceTag/elbv2.k8s.aws/cluster" in c.context);
        expect(owned.length).toBeGreaterThanOrEqual(6);
        expect(
            allowed(
                await evaluate(principal, owned, { ...v, vpcArn: `arn:aws:ec2:${region}:${ACCOUNT}:vpc/vpc-0other` }, (c) => {
                    const { "aws:ResourceTag/elbv2.k8s.aws/cluster": _, ...rest } = c;
                    return rest;
                }),
            ),
        ).toEqual([]);
        // Another cluster's load balancer, target group or security group (its own tag value): no change, no delete.
        expect(
            allowed(await evaluate(principal, owned, v, (c) => ({ ...c, "aws:ResourceTag/elbv2.k8s.aws/cluster": "platform-other" }))),
        ).toEqual([]);
        // Creating under another cluster's name: refused. (ec2:CreateSecurityGroup itself is upstream's unconditioned
        // allow; the tag it is created with is authorized as ec2:CreateTags, which is in this set.)
        const tagged = LBC_AWS_CALLS.filter(
            (c) => "aws:RequestTag/elbv2.k8s.aws/cluster" in c.context && c.action !== "ec2:CreateSecurityGroup",
        );
        expect(tagged.length).toBeGreaterThanOrEqual(3);
        expect(
            allowed(await evaluate(principal, tagged, v, (c) => ({ ...c, "aws:RequestTag/elbv2.k8s.aws/cluster": "platform-other" }))),
        ).toEqual([]);
        // Creating untagged: refused (what it creates must carry the tag that later scopes it).
        const creates = LBC_AWS_CALLS.filter((c) => /:(CreateLoadBalancer|CreateTargetGroup)$/.test(c.action));
        expect(
            allowed(
                await evaluate(principal, creates, v, (c) => {
                    const { "aws:RequestTag/elbv2.k8s.aws/cluster": _, ...rest } = c;
                    return rest;
                }),
            ),
        ).toEqual([]);
        // Another service's linked role: refused.
        const slr = LBC_AWS_CALLS.filter((c) => c.action === "iam:CreateServiceLinkedRole");
        expect(allowed(await evaluate(principal, slr, v, (c) => ({ ...c, "iam:AWSServiceName": "eks.amazonaws.com" })))).toEqual([]);
    });
});

describe("simulated: the hub's own KMS keys are usable only through their services", () => {
    it("a principal whose IAM policy allows kms:* still cannot decrypt directly, only through S3 / RDS / Secrets Manager", async () => {
        const anyKms: Principal = {
            arn: `arn:aws:iam::${ACCOUNT}:role/broad-admin`,
            policies: [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "kms:*", Resource: "*" }] }],
        };
        for (const [key, via] of [
            ["policy-store-key", "s3"],
            ["usage-ledger-key", "secretsmanager"],
            ["usage-ledger-key", "rds"],
        ] as const) {
            const arn = out(named("aws:kms/key:Key", key), "arn");
            expect((await simulate(anyKms, "kms:Decrypt", arn, { "aws:SecureTransport": "true" })).decision, key).toBe("ImplicitlyDenied");
            // Nor grant itself direct use: kms:CreateGrant is allowed only through the services.
            expect((await simulate(anyKms, "kms:CreateGrant", arn, { "aws:SecureTransport": "true" })).decision, key).toBe(
                "ImplicitlyDenied",
            );
            expect(
                (
                    await simulate(anyKms, "kms:Decrypt", arn, {
                        "aws:SecureTransport": "true",
                        "kms:ViaService": `${via}.${REGION}.amazonaws.com`,
                    })
                ).decision,
                `${key} via ${via}`,
            ).toBe("Allowed");
            expect(
                (
                    await simulate(anyKms, "kms:Decrypt", arn, {
                        "aws:SecureTransport": "true",
                        "kms:ViaService": `${via}.us-east-1.amazonaws.com`,
                    })
                ).decision,
            ).toBe("ImplicitlyDenied");
        }
    });
});
