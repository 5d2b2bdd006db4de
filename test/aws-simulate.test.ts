import { runSimulation as simulatorRun } from "@cloud-copilot/iam-simulate";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { AUTH_AWS_CALLS } from "../services/auth/aws-calls";
import { METERING_AWS_CALLS } from "../services/metering/aws-calls";
import { LEDGER_OPS_AWS_CALLS, MIGRATOR_AWS_CALLS, RECONCILER_AWS_CALLS } from "../services/reconciler/aws-calls";
import { REPLAY_TOOL_AWS_CALLS, STATUS_AWS_CALLS } from "../tools/aws-calls";
import { S3_TRANSPORT, type AwsCall } from "../services/shared/aws-calls";
import { CONSUMER_AWS_CALLS, REPLAY_AWS_CALLS, RESCUE_AWS_CALLS } from "../services/usage-consumer/aws-calls";
import { INSTALL_SOURCE_KEY_AWS_CALLS, MINT_AWS_CALLS, SPOKE_KEY_AWS_CALLS } from "../services/keys/aws-calls";
import { previewGuardPolicy } from "../lib/ci-roles";
import { runStack, type CapturedResource } from "../tools/harness";
import { SpokeIdentity } from "../components/hub/SpokeIdentity";
import { CERT_MANAGER_AWS_CALLS } from "../lib/edge-aws-calls";
import { signHubPublication } from "../lib/hub-publication";
import { HUB_OUTPUTS_ENV } from "../programs/spoke";
import { CLOUDWATCH_TOPIC_KEY_ACTIONS, cloudWatchTopicKeyProblem, logGroupKeyStatement } from "../lib/kms";
import { LOG_BUCKET_CONTROL_ACTIONS } from "../components/hub/AccessLogs";
import { LBC_AWS_CALLS } from "../lib/aws-load-balancer-controller";
import { GATEWAY_NAMESPACE } from "../lib/gateway";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import { MOCK_ACCOUNT_ID } from "../tools/mock-outputs";
import { unwrapWire } from "../tools/wire";
import { byType, flatConfig, inputs, runHubAndSpoke, runRepoStack, spokeConfigPinning, stackConfigDoc, testTempDir } from "./helpers";

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
    const missing = missingAwsContext(simulation.request);
    if (missing.length) throw new Error(`a request to ${simulation.request.action} lacks context AWS always sends: ${missing.join(", ")}`);
    const r: any = await simulatorRun(simulation, settings);
    const ignored: string[] = r.result?.ignoredContextKeys ?? [];
    if (ignored.length) throw new Error(`the simulator ignores context keys ${ignored.join(", ")} for ${simulation.request.action}`);
    return r;
}
type Doc = Record<string, unknown>;

/**
 * Context keys AWS puts in every request of the kind (IAM user guide, "AWS global condition context keys"): an IAM
 * principal's ARN and account, whether an AWS service made the call with the principal's credentials
 * (`aws:ViaAWSService`, true on forward access sessions such as S3 asking KMS for a data key), the transport, and for
 * KMS the caller's account; a service principal's name. A key left out would evaluate as missing, which can make a
 * condition pass (an `...IfExists` or a negated operator) for the wrong reason.
 */
function missingAwsContext(request: { principal: string; action: string; contextVariables: Record<string, unknown> }): string[] {
    const need = ["aws:SecureTransport"];
    if (request.principal.startsWith("arn:")) need.push("aws:PrincipalArn", "aws:PrincipalAccount", "aws:ViaAWSService");
    else need.push("aws:PrincipalServiceName", "aws:PrincipalServiceNamesList");
    if (request.action.startsWith("kms:") && request.principal.startsWith("arn:")) need.push("kms:CallerAccount");
    // S3 sets the bucket owner's account on every request (IAM user guide, "Amazon S3 condition keys").
    if (request.action.startsWith("s3:")) need.push("s3:ResourceAccount");
    return need.filter((k) => request.contextVariables[k] === undefined);
}

/**
 * Source address of a call an AWS service makes with the principal's credentials (a forward access session): the
 * service's own, never the site's (IAM user guide, "Forward access sessions" and `aws:SourceIp`). Such calls carry
 * `aws:ViaAWSService` true and no `aws:CalledVia`, which only the services the IAM reference lists for that key add
 * (S3, Secrets Manager, SQS and Kinesis are not among them).
 */
const AWS_SERVICE_SOURCE_IP = "52.94.133.131";

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
/**
 * A ledger Lambda's role: it runs in the ledger's VPC, so its S3, Secrets Manager and CloudWatch calls pass the
 * endpoints' policies (the S3 gateway endpoint, the two interface endpoints).
 */
function ledgerRole(resourceName: string): Principal {
    // The mocks' id of a resource is `<name>-id` (tools/harness.ts).
    const endpoint = (resource: string) => {
        const id = `${named("aws:ec2/vpcEndpoint:VpcEndpoint", resource).name}-id`;
        const policy = byType(rs, "aws:ec2/vpcEndpointPolicy:VpcEndpointPolicy").find((p) => inputs(p).vpcEndpointId === id);
        if (!policy) throw new Error(`the ledger's endpoint ${resource} has no policy`);
        return { id, policy: JSON.parse(inputs(policy).policy) as Doc };
    };
    return {
        ...roleOf(resourceName),
        s3Endpoint: endpoint("usage-ledger-s3"),
        vpcEndpoints: { secretsmanager: endpoint("usage-ledger-secretsmanager"), cloudwatch: endpoint("usage-ledger-monitoring") },
    };
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
    if (arn.includes(":kinesis:")) {
        const kp = byType(rs, "aws:kinesis/resourcePolicy:ResourcePolicy").find((p) => inputs(p).resourceArn === arn);
        return kp ? JSON.parse(inputs(kp).policy) : undefined;
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
    /** In the ledger's VPC: its S3 calls go through the gateway endpoint, whose policy takes part. */
    s3Endpoint?: { id: string; policy: Doc };
    /** In the ledger's VPC: its calls to these services (action prefix) go through their interface endpoints. */
    vpcEndpoints?: Record<string, { id: string; policy: Doc }>;
}

async function simulate(
    p: Principal,
    action: string,
    resource: string,
    context: Record<string, string | string[]>,
): Promise<{ decision: Decision; detail: string }> {
    const resourcePolicy = resourcePolicyOf(resource);
    const direct = context["aws:ViaAWSService"] !== "true";
    const endpoint = !direct ? undefined : action.startsWith("s3:") ? p.s3Endpoint : p.vpcEndpoints?.[action.split(":")[0]];
    const viaEndpoint = !!endpoint;
    const r = await runSimulation(
        {
            identityPolicies: p.policies.map((policy, i) => ({ name: `inline-${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            resourcePolicy: resourcePolicy as any,
            vpcEndpointPolicies: endpoint ? [{ name: endpoint.id, policy: endpoint.policy }] : undefined,
            request: {
                action,
                principal: p.arn,
                resource: { accountId: ACCOUNT, resource },
                // What AWS always sets: the principal's ARN and account, direct or via a service, and for KMS the caller's
                // account; then the session's own (tags, source address) and the call's.
                contextVariables: {
                    "aws:PrincipalArn": p.arn,
                    "aws:PrincipalAccount": p.arn.split(":")[4],
                    "aws:ViaAWSService": "false",
                    ...(action.startsWith("kms:") ? { "kms:CallerAccount": p.arn.split(":")[4] } : {}),
                    // Every hub bucket is the hub account's.
                    ...(action.startsWith("s3:") ? { "s3:ResourceAccount": ACCOUNT } : {}),
                    ...p.context,
                    ...(viaEndpoint ? { "aws:SourceVpce": endpoint!.id, "aws:SourceVpc": vars.ledgerVpcId } : {}),
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
        results.push(await simulate(p, c.action, fill(c.resource, vars), change({ ...forwardAccess(c), ...context })));
    }
    return results;
}
/**
 * A call a service makes with the principal's credentials (its table row names `kms:ViaService`: S3, Secrets Manager
 * or SQS asking KMS): the context AWS gives such a forward access session instead of the principal's own.
 */
function forwardAccess(c: AwsCall): Record<string, string> {
    return "kms:ViaService" in c.context ? { "aws:ViaAWSService": "true", "aws:SourceIp": AWS_SERVICE_SOURCE_IP } : {};
}
const notAllowed = (rs: { decision: Decision; detail: string }[]) =>
    rs.filter((r) => r.decision !== "Allowed").map((r) => `${r.decision}: ${r.detail}`);
const allowed = (rs: { decision: Decision; detail: string }[]) => rs.filter((r) => r.decision === "Allowed").map((r) => r.detail);

let vars: Record<string, string>;
/** Per spoke and service: its own role as the service's sessions use it, and the spoke's placeholders. */
let spokes: Record<string, { auth: Principal; metering: Principal; vars: Record<string, string> }>;

/**
 * The context a session of a spoke role carries: Pod Identity sessions carry the session tags the trust required
 * (`aws:PrincipalTag/...`, docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html), plus `eks-cluster-name` and
 * the pod's name and uid; every session the site's (or the cluster's NAT) source address.
 */
function sessionContext(trust: Doc, sourceIp: string): Record<string, string> {
    const eq = ((trust as any).Statement[0].Condition?.StringEquals ?? {}) as Record<string, string>;
    const tags = Object.fromEntries(
        Object.entries(eq)
            .filter(([k]) => k.startsWith("aws:RequestTag/"))
            .map(([k, v]) => [k.replace("aws:RequestTag/", "aws:PrincipalTag/"), v]),
    );
    if (Object.keys(tags).length) {
        const clusterArn = tags["aws:PrincipalTag/eks-cluster-arn"];
        Object.assign(tags, {
            "aws:PrincipalTag/eks-cluster-name": clusterArn.split("/").pop()!,
            "aws:PrincipalTag/kubernetes-pod-name": `${tags["aws:PrincipalTag/kubernetes-service-account"]}-0`,
            "aws:PrincipalTag/kubernetes-pod-uid": "0b6a6c2e-0000-4000-8000-000000000000",
        });
    }
    return { ...tags, "aws:SourceIp": sourceIp };
}

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
        accessLogBucketArn: out(named("aws:s3/bucket:Bucket", "access-logs-bucket"), "arn"),
        ledgerVpcArn: out(named("aws:ec2/vpc:Vpc", "usage-ledger-vpc"), "arn"),
        ledgerVpcId: "usage-ledger-vpc-id",
        ledgerOpsFunctionArn: out(named("aws:lambda/function:Function", "usage-ledger-ops"), "arn"),
        ledgerSubnetArn: out(named("aws:ec2/subnet:Subnet", "usage-ledger-private-0"), "arn"),
        lambdaSgArn: out(named("aws:ec2/securityGroup:SecurityGroup", "usage-ledger-consumer-sg"), "arn"),
    };
    const identities = HUB["platform:spokeIdentities"] ?? {};
    spokes = Object.fromEntries(
        SPOKES.map((s) => {
            const egress: string[] = identities[s]?.egressCidrs ?? [];
            const sourceIp = egress.length ? egress[0].replace(/\/\d+$/, "") : "203.0.113.10";
            const principal = (service: string): Principal => {
                const role = roleOf(`spoke-${s}-${service}-role`);
                const trust = JSON.parse(inputs(named("aws:iam/role:Role", `spoke-${s}-${service}-role`)).assumeRolePolicy);
                return { ...role, context: sessionContext(trust, sourceIp) };
            };
            return [
                s,
                {
                    auth: principal("auth"),
                    metering: principal("metering"),
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

describe("simulated: the spoke roles, one per service (auth and metering)", () => {
    const direct = (calls: readonly AwsCall[]) => calls.filter((c) => !c.action.startsWith("kms:"));

    it("every call of each service's table is allowed to its own role, for every spoke (the ACK included)", async () => {
        for (const s of SPOKES) {
            const { auth, metering, vars: v } = spokes[s];
            expect(notAllowed(await evaluate(auth, AUTH_AWS_CALLS, v)), `${s} auth`).toEqual([]);
            expect(notAllowed(await evaluate(metering, METERING_AWS_CALLS, v)), `${s} metering`).toEqual([]);
        }
    });

    it("the same S3 calls against a bucket of another account are denied (s3:ResourceAccount), for every spoke", async () => {
        const foreign = (c: Record<string, string | string[]>) => ({ ...c, "s3:ResourceAccount": "999999999999" });
        for (const s of SPOKES) {
            const { auth, metering, vars: v } = spokes[s];
            for (const [p, calls] of [
                [auth, AUTH_AWS_CALLS],
                [metering, METERING_AWS_CALLS],
            ] as const) {
                const s3 = calls.filter((c) => c.action.startsWith("s3:"));
                expect(s3.length).toBeGreaterThan(0);
                expect(allowed(await evaluate(p, s3, v, foreign)), s).toEqual([]);
            }
        }
    });

    it("auth cannot put usage records; metering cannot write or read ACKs, list, or encrypt under the bucket key", async () => {
        for (const s of SPOKES) {
            const { auth, vars: v } = spokes[s];
            const put = METERING_AWS_CALLS.filter((c) => c.action.startsWith("kinesis:"));
            expect(put.length).toBeGreaterThan(0);
            const alsoSingle = [...put, ...put.map((c) => ({ ...c, action: "kinesis:PutRecord" }))];
            expect(allowed(await evaluate(auth, alsoSingle, v)), `${s} auth -> stream`).toEqual([]);
            const ackCalls: AwsCall[] = [
                ...AUTH_AWS_CALLS.filter((c) => c.action === "s3:PutObject" || c.action === "kms:GenerateDataKey"),
                ...AUTH_AWS_CALLS.filter((c) => c.action === "s3:PutObject").map((c) => ({ ...c, action: "s3:GetObject" })),
                { ...AUTH_AWS_CALLS[0], action: "s3:ListBucket", resource: "{policyBucketArn}", context: { ...AUTH_AWS_CALLS[0].context } },
            ];
            expect(allowed(await evaluate(spokes[s].metering, ackCalls, v)), `${s} metering -> ACKs`).toEqual([]);
        }
    });

    it("a spoke's service can neither read nor write another spoke's objects, nor put to its stream", async () => {
        for (const s of SPOKES)
            for (const other of SPOKES.filter((o) => o !== s)) {
                const v = { ...spokes[other].vars, sourceIp: spokes[s].vars.sourceIp };
                expect(allowed(await evaluate(spokes[s].auth, direct(AUTH_AWS_CALLS), v)), `${s} auth -> ${other}`).toEqual([]);
                expect(allowed(await evaluate(spokes[s].metering, direct(METERING_AWS_CALLS), v)), `${s} metering -> ${other}`).toEqual([]);
            }
    });

    it("each usage stream takes records only from its spoke's metering role: an account admin, the auth role or another spoke's metering is denied", async () => {
        const put = METERING_AWS_CALLS.filter((c) => c.action.startsWith("kinesis:Put"));
        expect(put.length).toBeGreaterThan(0);
        const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
        for (const s of SPOKES) {
            const v = spokes[s].vars;
            expect(notAllowed(await evaluate(spokes[s].metering, put, v)), s).toEqual([]);
            const others: Principal[] = [
                { arn: `arn:aws:iam::${ACCOUNT}:role/ops-admin`, policies: [allowAll] },
                { ...spokes[s].auth, policies: [allowAll] },
                ...SPOKES.filter((o) => o !== s).map((o) => ({ ...spokes[o].metering, policies: [allowAll] })),
            ];
            for (const p of others)
                expect(
                    (await evaluate(p, put, v)).map((r) => r.decision),
                    `${p.arn} -> ${s}`,
                ).toEqual(put.map(() => "ExplicitlyDenied"));
        }
    });

    it("plaintext, TLS below 1.2, another KMS key, another algorithm or the AWS managed key: the ACK is denied", async () => {
        const ack = AUTH_AWS_CALLS.filter((c) => c.action === "s3:PutObject");
        const { auth: principal, vars: v } = spokes[SPOKES[0]];
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

    it("the bucket key is usable only through S3 in the hub's region, by either service", async () => {
        for (const service of ["auth", "metering"] as const) {
            const { vars: v } = spokes[SPOKES[0]];
            const principal = spokes[SPOKES[0]][service];
            const kms = [...AUTH_AWS_CALLS, ...METERING_AWS_CALLS].filter((c) => c.action.startsWith("kms:"));
            const { "kms:ViaService": _, ...noVia } = kms[0].context;
            expect(
                allowed(
                    await evaluate(
                        principal,
                        kms.map((c) => ({ ...c, context: noVia })),
                        v,
                    ),
                ),
                service,
            ).toEqual([]);
            expect(allowed(await evaluate(principal, kms, v, (c) => ({ ...c, "kms:ViaService": "s3.us-east-1.amazonaws.com" })))).toEqual(
                [],
            );
        }
    });

    it("an on-prem spoke with egress ranges: each service denied from any other source address, S3's own KMS calls still allowed", async () => {
        const withEgress = SPOKES.filter((s) => (HUB["platform:spokeIdentities"]?.[s]?.egressCidrs ?? []).length);
        expect(withEgress.length).toBeGreaterThan(0);
        for (const s of withEgress)
            for (const [service, calls] of [
                ["auth", AUTH_AWS_CALLS],
                ["metering", METERING_AWS_CALLS],
            ] as const) {
                const p = spokes[s][service];
                const away = { ...p, context: { ...p.context, "aws:SourceIp": "192.0.2.77" } };
                const r = await evaluate(away, direct(calls), spokes[s].vars);
                expect(
                    r.every((x) => x.decision === "ExplicitlyDenied"),
                    `${s} ${service}`,
                ).toBe(true);
                // What S3 asks KMS with the session's credentials comes from S3's address (aws:ViaAWSService true).
                const kms = calls.filter((c) => c.action.startsWith("kms:"));
                expect(notAllowed(await evaluate(p, kms, spokes[s].vars)), `${s} ${service} kms`).toEqual([]);
            }
    });
});

describe("simulated: the evaluator is given what AWS sends", () => {
    it("refuses a request without the principal's account, the via-service flag, the transport, S3's bucket account or KMS's caller account", async () => {
        const { auth } = spokes[SPOKES[0]];
        const request = (ctx: Record<string, string>, action = "s3:GetObject") => ({
            identityPolicies: auth.policies.map((policy, i) => ({ name: `p${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            request: {
                action,
                principal: auth.arn,
                resource: { accountId: ACCOUNT, resource: `${vars.policyBucketArn}/x` },
                contextVariables: ctx,
            },
        });
        const full = {
            "aws:PrincipalArn": auth.arn,
            "aws:PrincipalAccount": ACCOUNT,
            "aws:ViaAWSService": "false",
            "aws:SecureTransport": "true",
            "s3:ResourceAccount": ACCOUNT,
        };
        await expect(runSimulation(request(full), {})).resolves.toBeDefined();
        for (const k of Object.keys(full)) {
            const { [k]: _, ...less } = full as Record<string, string>;
            await expect(runSimulation(request(less), {}), k).rejects.toThrow(k);
        }
        await expect(runSimulation(request(full, "kms:Decrypt"), {})).rejects.toThrow("kms:CallerAccount");
    });

    it("Pod Identity sessions carry their session tags; service-made KMS calls carry aws:ViaAWSService and S3's address", () => {
        const eks = SPOKES.filter((s) => HUB["platform:spokes"].find((x: any) => x.name === s).provider === "eks");
        expect(eks.length).toBeGreaterThan(0);
        for (const s of eks) {
            expect(spokes[s].auth.context).toMatchObject({
                "aws:PrincipalTag/kubernetes-namespace": GATEWAY_NAMESPACE,
                "aws:PrincipalTag/kubernetes-service-account": "auth",
            });
            expect(spokes[s].metering.context).toMatchObject({
                "aws:PrincipalTag/kubernetes-namespace": PLATFORM_NAMESPACE,
                "aws:PrincipalTag/kubernetes-service-account": "metering",
            });
            expect(spokes[s].auth.context!["aws:PrincipalTag/eks-cluster-arn"]).toMatch(/^arn:aws:eks:[a-z0-9-]+:\d{12}:cluster\//);
        }
        const kms = AUTH_AWS_CALLS.filter((c) => c.action.startsWith("kms:"));
        expect(kms.length).toBeGreaterThan(0);
        for (const c of kms) expect(forwardAccess(c)).toEqual({ "aws:ViaAWSService": "true", "aws:SourceIp": AWS_SERVICE_SOURCE_IP });
        for (const c of AUTH_AWS_CALLS.filter((x) => x.command)) expect(forwardAccess(c)).toEqual({});
    });
});

describe("simulated: the ledger Lambdas", () => {
    const lambdas = () => ({
        migrator: { role: ledgerRole("usage-ledger-migrator-role"), calls: MIGRATOR_AWS_CALLS, logs: "usage-ledger-migrator-logs" },
        reconciler: { role: ledgerRole("usage-ledger-reconciler-role"), calls: RECONCILER_AWS_CALLS, logs: "usage-ledger-reconciler-logs" },
        consumer: { role: ledgerRole("usage-ledger-consumer-role"), calls: CONSUMER_AWS_CALLS, logs: "usage-ledger-consumer-logs" },
        ops: { role: ledgerRole("usage-ledger-ops-role"), calls: LEDGER_OPS_AWS_CALLS, logs: "usage-ledger-ops-logs" },
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

    it("the consumer's and the ops Lambda's S3 calls against a bucket of another account are denied (s3:ResourceAccount)", async () => {
        const foreign = (c: Record<string, string | string[]>) => ({ ...c, "s3:ResourceAccount": "999999999999" });
        for (const [name, l] of Object.entries(lambdas())) {
            const s3 = l.calls.filter((c) => c.action.startsWith("s3:"));
            if (name === "consumer" || name === "ops") expect(s3.length, name).toBeGreaterThan(0);
            expect(allowed(await evaluate(l.role, s3, varsFor(l.logs), foreign)), name).toEqual([]);
        }
    });

    it("the ops Lambda reads failed batches under failed/ only (a replay names a key; it reads the records itself)", async () => {
        const ops = ledgerRole("usage-ledger-ops-role");
        const read = LEDGER_OPS_AWS_CALLS.filter((c) => c.action === "s3:GetObject");
        expect(read).toHaveLength(1);
        const v = varsFor("usage-ledger-ops-logs");
        expect(notAllowed(await evaluate(ops, read, v))).toEqual([]);
        const elsewhere = [
            { ...read[0], resource: "{failedBatchBucketArn}/other/x.json" },
            { ...read[0], resource: "{policyBucketArn}/spokes/hn1/current.json" },
            { ...read[0], action: "s3:PutObject" },
            { ...read[0], action: "s3:DeleteObject" },
        ];
        expect(allowed(await evaluate(ops, elsewhere, v))).toEqual([]);
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

    it("the ledger VPC's Secrets Manager and CloudWatch endpoints: only the ledger's secrets and the reconciliation's metric, by the hub's account", async () => {
        // A principal allowed everything by its own policy, inside the VPC.
        const inVpc: Principal = {
            ...ledgerRole("usage-ledger-consumer-role"),
            arn: `arn:aws:iam::${ACCOUNT}:role/broad-admin`,
            policies: [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] }],
        };
        const v = varsFor("usage-ledger-consumer-logs");
        const needed = [...MIGRATOR_AWS_CALLS, ...RECONCILER_AWS_CALLS].filter((c) => /^(secretsmanager|cloudwatch):/.test(c.action));
        expect(needed.length).toBeGreaterThanOrEqual(4);
        expect(notAllowed(await evaluate(inVpc, needed, v))).toEqual([]);
        const t = { "aws:SecureTransport": "true" };
        const other: AwsCall[] = [
            {
                source: "x",
                action: "secretsmanager:GetSecretValue",
                resource: `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:someone-else-AbCdEf`,
                context: t,
                purpose: "another secret",
            },
            {
                source: "x",
                action: "secretsmanager:PutSecretValue",
                resource: "{ingestSecretArn}",
                context: t,
                purpose: "writing a ledger secret",
            },
            {
                source: "x",
                action: "cloudwatch:PutMetricData",
                resource: "*",
                context: { ...t, "cloudwatch:namespace": "Exfil/Data" },
                purpose: "another namespace",
            },
        ];
        expect(allowed(await evaluate(inVpc, other, v))).toEqual([]);
        // Another account's principal, allowed by its own policy: refused by the endpoints.
        expect(allowed(await evaluate({ ...inVpc, arn: "arn:aws:iam::999999999999:role/x" }, needed, v))).toEqual([]);
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
    const consumer = () => ledgerRole("usage-ledger-consumer-role");
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

    it("the ledger VPC's S3 endpoint: only putting failed batches, by principals of the hub's account", async () => {
        const put = keep().filter((c) => c.action === "s3:PutObject");
        expect(notAllowed(await evaluate(consumer(), put, consumerVars()))).toEqual([]);
        // Even a principal allowed everything by its own policy, inside the VPC: no other bucket, nothing but a put.
        const inVpc: Principal = {
            ...consumer(),
            arn: `arn:aws:iam::${ACCOUNT}:role/broad-admin`,
            policies: [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] }],
        };
        expect(notAllowed(await evaluate(inVpc, put, consumerVars()))).toEqual([]);
        const elsewhere = [
            ...put.map((c) => ({ ...c, resource: "arn:aws:s3:::someone-elses-bucket/failed/x.json", context: { ...S3_TRANSPORT } })),
            ...put.map((c) => ({ ...c, resource: "{policyBucketArn}/spokes/hn1/acks/1.json", context: { ...S3_TRANSPORT } })),
            ...REPLAY_AWS_CALLS.filter((c) => c.action.startsWith("s3:")),
        ];
        expect(elsewhere.length).toBeGreaterThanOrEqual(5);
        expect(allowed(await evaluate(inVpc, elsewhere, consumerVars()))).toEqual([]);
        // A principal of another account, allowed by its own policy: refused by the endpoint.
        const foreign = { ...inVpc, arn: "arn:aws:iam::999999999999:role/x" };
        expect(allowed(await evaluate(foreign, put, consumerVars()))).toEqual([]);
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

    it("a hub deployer can rescue what is still in a spoke's stream into the failure bucket, under the ledger key only", async () => {
        const admin: Principal = {
            arn: `arn:aws:iam::${ACCOUNT}:role/platform-hub-deployer`,
            policies: [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] }],
        };
        for (const spoke of SPOKES) {
            const v = { ...vars, usageStreamArn: out(named("aws:kinesis/stream:Stream", `usage-ledger-${spoke}`), "arn") };
            expect(notAllowed(await evaluate(admin, RESCUE_AWS_CALLS, v)), spoke).toEqual([]);
        }
        // The bucket still refuses a rescued batch under another key, or without naming one.
        const put = RESCUE_AWS_CALLS.filter((c) => c.action === "s3:PutObject");
        expect(
            allowed(
                await evaluate(admin, put, vars, (c) => ({
                    ...c,
                    "s3:x-amz-server-side-encryption-aws-kms-key-id": `arn:aws:kms:${REGION}:${ACCOUNT}:key/other`,
                })),
            ),
        ).toEqual([]);
    });
});

describe("simulated: the operator's path to the ledger (npm run status / replay-usage through the ledger Lambda)", () => {
    const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
    const operator = (): Principal => ({ arn: `arn:aws:iam::${ACCOUNT}:role/platform-hub-deployer`, policies: [allowAll] });
    const invoke = () => [...STATUS_AWS_CALLS, ...REPLAY_TOOL_AWS_CALLS].filter((c) => c.action === "lambda:InvokeFunction");

    it("the database stays private: no public endpoint, its security group admits only the Lambdas", () => {
        const instances = byType(rs, "aws:rds/clusterInstance:ClusterInstance");
        expect(instances.length).toBeGreaterThan(0);
        for (const i of instances) expect(inputs(i).publiclyAccessible ?? false).toBe(false);
        expect(out(named("aws:lambda/function:Function", "usage-ledger-ops"), "vpcConfig")).toBeTruthy();
        // The cluster sits in the database security group alone, whose one way in is PostgreSQL from the Lambdas' group.
        // The mocks give a resource the id `<name>-id` (tools/harness.ts); inputs naming another resource's id carry it.
        const dbSg = `${named("aws:ec2/securityGroup:SecurityGroup", "usage-ledger-db-sg").name}-id`;
        const lambdaSg = `${named("aws:ec2/securityGroup:SecurityGroup", "usage-ledger-consumer-sg").name}-id`;
        const clusters = byType(rs, "aws:rds/cluster:Cluster");
        expect(clusters.map((c) => inputs(c).vpcSecurityGroupIds)).toEqual([[dbSg]]);
        expect(inputs(named("aws:ec2/securityGroup:SecurityGroup", "usage-ledger-db-sg")).ingress ?? []).toEqual([]);
        const ingress = byType(rs, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule").filter(
            (r) => inputs(r).securityGroupId === dbSg,
        );
        expect(
            ingress.map((r) => {
                const i = inputs(r);
                return [i.ipProtocol, i.fromPort, i.toPort, i.referencedSecurityGroupId, i.cidrIpv4, i.cidrIpv6, i.prefixListId];
            }),
        ).toEqual([["tcp", 5432, 5432, lambdaSg, undefined, undefined, undefined]]);
        expect(byType(rs, "aws:ec2/securityGroupRule:SecurityGroupRule").filter((r) => inputs(r).securityGroupId === dbSg)).toEqual([]);
    });

    it("a hub deployer runs every call of both tools (the ledger Lambda included), for every spoke", async () => {
        expect(invoke()).toHaveLength(2);
        for (const spoke of SPOKES) {
            const v = { ...vars, spoke };
            expect(notAllowed(await evaluate(operator(), [...STATUS_AWS_CALLS, ...REPLAY_TOOL_AWS_CALLS], v)), spoke).toEqual([]);
        }
    });

    it("status's ListBuckets (the log bucket's creation date) is s3:ListAllMyBuckets on * only: a hub deployer's, not a spoke role's", async () => {
        const list = STATUS_AWS_CALLS.filter((c) => c.command === "ListBucketsCommand");
        expect(list.map((c) => [c.action, c.resource])).toEqual([["s3:ListAllMyBuckets", "*"]]);
        expect(notAllowed(await evaluate(operator(), list, vars))).toEqual([]);
        for (const p of [spokes[SPOKES[0]].auth, spokes[SPOKES[0]].metering])
            expect(allowed(await evaluate(p, list, vars)), p.arn).toEqual([]);
    });

    it("status's GetBucketLogging (the policy bucket's logging, before it reports waiting) is a hub deployer's on the policy bucket, not a spoke role's", async () => {
        const get = STATUS_AWS_CALLS.filter((c) => c.command === "GetBucketLoggingCommand");
        expect(get.map((c) => [c.action, c.resource])).toEqual([["s3:GetBucketLogging", "{policyBucketArn}"]]);
        expect(notAllowed(await evaluate(operator(), get, vars))).toEqual([]);
        for (const p of [spokes[SPOKES[0]].auth, spokes[SPOKES[0]].metering])
            expect(allowed(await evaluate(p, get, vars)), p.arn).toEqual([]);
    });

    it("nobody else invokes it: spoke roles, the other ledger Lambdas, a CI preview role allowed everything else", async () => {
        const preview: Principal = {
            arn: `arn:aws:iam::${ACCOUNT}:role/platform-ci-preview`,
            policies: [allowAll, previewGuardPolicy({ region: REGION }) as unknown as Doc],
        };
        const others: Principal[] = [
            spokes[SPOKES[0]].auth,
            spokes[SPOKES[0]].metering,
            ledgerRole("usage-ledger-consumer-role"),
            ledgerRole("usage-ledger-reconciler-role"),
            ledgerRole("usage-ledger-migrator-role"),
            ledgerRole("usage-ledger-ops-role"),
        ];
        for (const p of others) expect(allowed(await evaluate(p, invoke(), vars)), p.arn).toEqual([]);
        expect((await evaluate(preview, invoke(), vars)).map((r) => r.decision)).toEqual(["ExplicitlyDenied", "ExplicitlyDenied"]);
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
                        contextVariables: {
                            "aws:SecureTransport": "true",
                            ...(principal.startsWith("arn:")
                                ? {
                                      "aws:PrincipalArn": principal,
                                      "aws:PrincipalAccount": principal.split(":")[4],
                                      "aws:ViaAWSService": "false",
                                  }
                                : { "aws:PrincipalServiceName": principal, "aws:PrincipalServiceNamesList": [principal] }),
                            ...context,
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
    const podIdentity = (clusterArn: string, namespace: string, serviceAccount: string) => ({
        "aws:SourceAccount": ACCOUNT,
        "aws:RequestTag/eks-cluster-arn": clusterArn,
        "aws:RequestTag/kubernetes-namespace": namespace,
        "aws:RequestTag/kubernetes-service-account": serviceAccount,
        "aws:TagKeys": ["eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account"],
    });

    it("EKS: each role by Pod Identity for the spoke's own cluster and exactly its own namespace/service-account pair", async () => {
        const eks = SPOKES.filter((s) => HUB["platform:spokes"].find((x: any) => x.name === s).provider === "eks");
        expect(eks.length).toBeGreaterThan(0);
        const { spoke } = await runHubAndSpoke(HUB["platform:spokes"].find((x: any) => x.name === eks[0]).stack);
        const clusterArn = out(spoke.resources.find((r) => r.type === "aws:eks/cluster:Cluster")!, "arn");
        const pods = "pods.eks.amazonaws.com";
        const both = ["sts:AssumeRole", "sts:TagSession"];
        const denied = ["ImplicitlyDenied", "ImplicitlyDenied"];
        const hub = (await runRepoStack("hub-prod")).resources;
        const pairs = { auth: [GATEWAY_NAMESPACE, "auth"], metering: [PLATFORM_NAMESPACE, "metering"] } as const;
        for (const [service, [ns, sa]] of Object.entries(pairs)) {
            const role = `spoke-${eks[0]}-${service}-role`;
            expect(await assume(role, pods, [], podIdentity(clusterArn, ns, sa), both, hub), role).toEqual(["Allowed", "Allowed"]);
            // The other service's pair, and each half of it crossed with this one's: denied (not any ns x any SA).
            const [ons, osa] = service === "auth" ? pairs.metering : pairs.auth;
            for (const [n, a] of [
                [ons, osa],
                [ns, osa],
                [ons, sa],
                ["default", "default"],
                ["default", sa],
            ])
                expect(await assume(role, pods, [], podIdentity(clusterArn, n, a), both, hub), `${role} ${n}/${a}`).toEqual(denied);
            const other = clusterArn.replace(/cluster\/.*$/, "cluster/platform-elsewhere");
            expect(await assume(role, pods, [], podIdentity(other, ns, sa), both, hub)).toEqual(denied);
            expect(
                await assume(role, pods, [], { ...podIdentity(clusterArn, ns, sa), "aws:SourceAccount": "999999999999" }, both, hub),
            ).toEqual(denied);
        }
        // The spoke associates each service account with its own role, the one the hub's contract names for it.
        const associations = spoke.resources.filter((r) => r.type === "aws:eks/podIdentityAssociation:PodIdentityAssociation");
        for (const [service, [ns, sa]] of Object.entries(pairs)) {
            const assoc = associations.find((r) => inputs(r).namespace === ns && inputs(r).serviceAccount === sa)!;
            expect(inputs(assoc).roleArn, service).toBe(out(hub.find((r) => r.name === `spoke-${eks[0]}-${service}-role`)!, "arn"));
        }
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
                    hub: "hub-t",
                });
                return {};
            },
        });
        captured = r.resources;
        const pods = "pods.eks.amazonaws.com";
        const arnIn = (region: string) => `arn:aws:eks:${region}:${ACCOUNT}:cluster/platform-fra1`;
        expect(
            await assume(
                "spoke-fra1-auth-role",
                pods,
                [],
                podIdentity(arnIn("eu-central-1"), GATEWAY_NAMESPACE, "auth"),
                ["sts:AssumeRole", "sts:TagSession"],
                captured,
            ),
        ).toEqual(["Allowed", "Allowed"]);
        expect(
            await assume(
                "spoke-fra1-auth-role",
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
        const ok = { "aws:SourceIp": ip, "aws:CurrentTime": at(1), "sts:RoleSessionName": "platform-auth" };
        expect(await assume(`spoke-${s}-auth-role`, out(user, "arn"), [userPolicy], ok)).toEqual(["Allowed"]);
        expect(
            await assume(`spoke-${s}-metering-role`, out(user, "arn"), [userPolicy], { ...ok, "sts:RoleSessionName": "platform-metering" }),
        ).toEqual(["Allowed"]);
        // Each role only under its own service's session name (the other's, or none, is refused).
        expect(
            await assume(`spoke-${s}-auth-role`, out(user, "arn"), [userPolicy], { ...ok, "sts:RoleSessionName": "platform-metering" }),
        ).toEqual(["ImplicitlyDenied"]);
        expect(await assume(`spoke-${s}-metering-role`, out(user, "arn"), [userPolicy], ok)).toEqual(["ImplicitlyDenied"]);
        expect(await assume(`spoke-${s}-auth-role`, out(user, "arn"), [userPolicy], { ...ok, "aws:SourceIp": "192.0.2.1" })).toEqual([
            "ImplicitlyDenied",
        ]);
        expect(
            await assume(`spoke-${s}-auth-role`, out(user, "arn"), [userPolicy], {
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
            expect(await assume(`spoke-${s}-auth-role`, out(otherUser, "arn"), [otherPolicy], ok)).toEqual(["ImplicitlyDenied"]);
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
                            // Secrets Manager asks KMS with the reader's credentials (a forward access session).
                            "aws:ViaAWSService": action.startsWith("kms:") ? "true" : "false",
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
            out(named("aws:iam/role:Role", "spoke-hn1-auth-role"), "arn"),
            out(named("aws:iam/role:Role", "spoke-hn1-metering-role"), "arn"),
            "arn:aws:iam::111122223333:role/platform-ci-preview",
        ];
        for (const p of others) expect((await read(p, a))[0], p).toBe("ExplicitlyDenied");
    });

    it("on-prem source keys: each spoke's deployer (another account) reads its own; the hub deployers too; nobody else", async () => {
        // `read` evaluates exactly the calls of `npm run mint-key -- install-source-key` (the spoke program reads none).
        expect(INSTALL_SOURCE_KEY_AWS_CALLS.map((c) => [c.action, c.context["kms:ViaService"]])).toEqual([
            ["secretsmanager:GetSecretValue", undefined],
            ["kms:Decrypt", "secretsmanager.{region}.amazonaws.com"],
        ]);
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
            // Nor change the value another way, or who may read it.
            const otherWrites = [
                "secretsmanager:UpdateSecret",
                "secretsmanager:PutResourcePolicy",
                "secretsmanager:DeleteResourcePolicy",
            ].map((action) => ({ ...put[0], action }));
            expect((await evaluate({ arn: readers()[t][0], policies: [allowAll] }, otherWrites, v)).map((r) => r.decision)).toEqual([
                "ExplicitlyDenied",
                "ExplicitlyDenied",
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

describe("simulated: key secrets' lifecycle (tenants' API keys, on-prem source keys)", () => {
    const LIFECYCLE = [
        "secretsmanager:DeleteSecret",
        "secretsmanager:RestoreSecret",
        "secretsmanager:RotateSecret",
        "secretsmanager:CancelRotateSecret",
        "secretsmanager:ReplicateSecretToRegions",
        "secretsmanager:RemoveRegionsFromReplication",
        "secretsmanager:StopReplicationToReplica",
        "secretsmanager:TagResource",
        "secretsmanager:UntagResource",
    ];
    const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
    const secrets = () => {
        const ids = HUB["platform:spokeIdentities"];
        const slots = Object.keys(ids)
            .filter((s) => ids[s].mode === "access-key")
            .map((s) => `spoke-${s}-key-${ids[s].keys[0].id}`);
        expect(slots.length).toBeGreaterThan(0);
        return [...Object.keys(HUB["platform:tenantKeys"].readers).map((t) => `api-keys-${t}`), ...slots].map((n) =>
            out(named("aws:secretsmanager/secret:Secret", n), "arn"),
        );
    };
    const ctx = (action: string) => ({
        "aws:SecureTransport": "true",
        ...(action === "secretsmanager:DeleteSecret" ? { "secretsmanager:ForceDeleteWithoutRecovery": "true" } : {}),
    });

    it("an administrator of the hub account who is not a hub deployer can neither delete, restore, rotate, replicate nor retag a key secret", async () => {
        const admin: Principal = { arn: `arn:aws:iam::${ACCOUNT}:role/ops-admin`, policies: [allowAll] };
        for (const secret of secrets())
            for (const action of LIFECYCLE)
                expect((await simulate(admin, action, secret, ctx(action))).decision, `${action} ${secret}`).toBe("ExplicitlyDenied");
    });

    it("the deny exempts the hub deployers (Pulumi manages the secrets and their tags; removing a spoke or tenant is theirs)", async () => {
        // The sample file's deployers are in another (documentation) account: their own account's policy decides the
        // rest; here only that the secret's Deny does not apply to them.
        for (const d of HUB["platform:hubDeployers"] as string[])
            for (const secret of secrets())
                for (const action of LIFECYCLE)
                    expect(
                        (await simulate({ arn: d, policies: [allowAll] }, action, secret, ctx(action))).decision,
                        `${d} ${action}`,
                    ).not.toBe("ExplicitlyDenied");
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

describe("EKS + ACME DNS-01 behind the global failover hostname (the hub's zone answers the global name's challenge)", () => {
    /**
     * hub-prod's published outputs with the EKS spoke put behind the global hostname (its contract's failover block, as
     * buildFailoverContracts writes it), re-signed with the hub's (mock) signing seed so the spoke accepts the file.
     */
    async function publishedWithEksBehindGlobal(edit: (contract: any) => void = () => {}) {
        const eks = HUB["platform:spokes"].find((x: any) => x.provider === "eks");
        const hub = await runRepoStack("hub-prod");
        const published = unwrapWire(hub.outputs) as Record<string, any>;
        const failover = HUB["platform:failover"];
        const contract = published.spokeContracts[eks.name];
        contract.failover = { globalHostname: failover.hostname, globalHostedZoneId: failover.hostedZoneId, peers: [] };
        edit(contract);
        const seed = Buffer.from(out(hub.resources.find((r) => r.name === "policy-store-signing-seed")!, "base64"), "base64");
        published.publication = signHubPublication(seed, "hub-prod", published);
        const file = path.join(testTempDir("global-dns01-"), "hub-prod.json");
        fs.writeFileSync(file, JSON.stringify(published));
        return { eks, file, failover };
    }
    async function renderSpoke(file: string, stack: string) {
        process.env[HUB_OUTPUTS_ENV] = file;
        try {
            const keyId: string = JSON.parse(fs.readFileSync(file, "utf8")).publication.keyId;
            return await runRepoStack(stack, { stackOutputs: {}, config: spokeConfigPinning(stack, keyId) });
        } finally {
            delete process.env[HUB_OUTPUTS_ENV];
        }
    }

    it("the Issuer answers the global name in its zone, the Certificate names it, and cert-manager's role may write exactly that challenge (simulated)", async () => {
        const { eks, file, failover } = await publishedWithEksBehindGlobal();
        const spoke = await renderSpoke(file, eks.stack);
        const issuer = spoke.resources.find((r) => r.type === "kubernetes:cert-manager.io/v1:Issuer")!;
        const listener = stackConfigDoc(eks.stack)["platform:gateway"].listener;
        expect(inputs(issuer).spec.acme.solvers).toEqual([
            {
                selector: { dnsNames: [failover.hostname] },
                dns01: { route53: { region: listener.tls.route53.region, hostedZoneID: failover.hostedZoneId } },
            },
            { dns01: { route53: { region: listener.tls.route53.region, hostedZoneID: listener.tls.route53.hostedZoneId } } },
        ]);
        const cert = spoke.resources.find((r) => r.type === "kubernetes:cert-manager.io/v1:Certificate")!;
        expect(inputs(cert).spec.dnsNames).toEqual([listener.hostname, failover.hostname]);
        const role = spoke.resources.find((r) => r.type === "aws:iam/role:Role" && r.name === "cert-manager-dns01-role")!;
        const policy = JSON.parse(
            inputs(spoke.resources.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "cert-manager-dns01-permissions")!)
                .policy,
        );
        const principal: Principal = { arn: out(role, "arn"), policies: [policy] };
        const global = { hostedZoneId: failover.hostedZoneId, challengeName: `_acme-challenge.${failover.hostname}` };
        const own = { hostedZoneId: listener.tls.route53.hostedZoneId, challengeName: `_acme-challenge.${listener.hostname}` };
        expect(notAllowed(await evaluate(principal, CERT_MANAGER_AWS_CALLS, global))).toEqual([]);
        expect(notAllowed(await evaluate(principal, CERT_MANAGER_AWS_CALLS, own))).toEqual([]);
        const change = CERT_MANAGER_AWS_CALLS.filter((c) => c.action === "route53:ChangeResourceRecordSets");
        // Nothing else in the global zone (its A/alias records are the failover itself), nor the global name in the spoke's zone.
        expect(allowed(await evaluate(principal, change, { ...global, challengeName: failover.hostname }))).toEqual([]);
        expect(allowed(await evaluate(principal, change, { ...global, challengeName: `_acme-challenge.${listener.hostname}` }))).toEqual(
            [],
        );
        expect(
            allowed(await evaluate(principal, change, global, (c) => ({ ...c, "route53:ChangeResourceRecordSetsRecordTypes": ["A"] }))),
        ).toEqual([]);
        expect(allowed(await evaluate(principal, change, { ...own, challengeName: `_acme-challenge.${failover.hostname}` }))).toEqual([]);
    }, 240_000);

    it("refused, naming the spoke file and key, when the spoke runs in another account than the hub's zone, or the hub publishes no zone", async () => {
        const other = await publishedWithEksBehindGlobal((c) => {
            c.policy.roleArn = c.policy.roleArn.replace(/:\d{12}:/, ":999999999999:");
        });
        await expect(renderSpoke(other.file, other.eks.stack)).rejects.toThrow(
            /Pulumi\.spoke-sg1\.yaml[\s\S]*platform:gateway\.listener\.tls: this spoke is behind the global hostname .* in the hub's account 999999999999; cert-manager's DNS-01 role here \(account \d{12}\) cannot answer its challenge/,
        );
        const old = await publishedWithEksBehindGlobal((c) => {
            delete c.failover.globalHostedZoneId;
        });
        await expect(renderSpoke(old.file, old.eks.stack)).rejects.toThrow(
            /platform:gateway\.listener\.tls: the hub publishes no zone for the global hostname/,
        );
    }, 240_000);
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
        // Another workload's listener and target group (upstream allows these on `*` untagged): untagged, or tagged by
        // another cluster, in this region or another: no register, modify, delete or certificate change.
        const foreign = [
            "elasticloadbalancing:RegisterTargets",
            "elasticloadbalancing:DeregisterTargets",
            "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:DeleteListener",
        ];
        const targets = LBC_AWS_CALLS.filter((c) => foreign.includes(c.action));
        expect(targets.map((c) => c.action).sort()).toEqual([...foreign].sort());
        const certs = targets
            .filter((c) => c.action === "elasticloadbalancing:ModifyListener")
            .flatMap((c) =>
                ["AddListenerCertificates", "RemoveListenerCertificates"].map((x) => ({ ...c, action: `elasticloadbalancing:${x}` })),
            );
        const payments = {
            ...v,
            region: "us-east-1",
        };
        for (const vars of [v, payments]) {
            expect(
                allowed(
                    await evaluate(principal, [...targets, ...certs], vars, (c) => {
                        const { "aws:ResourceTag/elbv2.k8s.aws/cluster": _, ...rest } = c;
                        return { ...rest, "aws:ResourceTag/app": "payments" };
                    }),
                ),
            ).toEqual([]);
            expect(
                allowed(
                    await evaluate(principal, [...targets, ...certs], vars, (c) => ({
                        ...c,
                        "aws:ResourceTag/elbv2.k8s.aws/cluster": "platform-other",
                    })),
                ),
            ).toEqual([]);
        }
        // Its own resources, but in another region (the role is the spoke's): no mutation there either.
        const mutations = LBC_AWS_CALLS.filter(
            (c) => !/:(Describe|Get)/.test(c.action) && !c.action.startsWith("iam:") && c.action !== "ec2:CreateSecurityGroup",
        );
        expect(mutations.length).toBeGreaterThanOrEqual(15);
        expect(allowed(await evaluate(principal, mutations, { ...payments, vpcArn: v.vpcArn }))).toEqual([]);
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

describe("simulated: CloudWatch Logs encrypts the ledger database's and the Lambdas' log groups with the ledger key", () => {
    /**
     * What CloudWatch Logs asks KMS for a log group: its regional service principal, the group's ARN as encryption
     * context (`kms:EncryptionContext:aws:logs:arn`). The simulator evaluates context keys with a variable part only
     * after a `/` (`aws:PrincipalTag/...`), so it cannot evaluate that condition (asserted below, so a simulator that
     * learns it fails here and the condition gets simulated); the principal and actions are simulated with the statement's
     * condition set aside, and the condition's value is the log group's own ARN (test/hub-ledger.test.ts).
     */
    async function asLogs(action: string, policy: Doc, region = REGION, context: Record<string, string> = {}) {
        const principal = `logs.${region}.amazonaws.com`;
        const r = await simulatorRun(
            {
                identityPolicies: [],
                serviceControlPolicies: [],
                resourceControlPolicies: [],
                resourcePolicy: policy as any,
                request: {
                    action,
                    principal,
                    resource: { accountId: ACCOUNT, resource: vars.ledgerKeyArn },
                    contextVariables: { "aws:SecureTransport": "true", "aws:PrincipalServiceName": principal, ...context },
                },
            } as any,
            {},
        );
        if (r.resultType === "error") throw new Error(JSON.stringify(r.errors));
        return { decision: r.overallResult as Decision, ignored: ((r as any).result?.ignoredContextKeys ?? []) as string[] };
    }

    it("the ledger key's policy lets CloudWatch Logs of the hub's region use it (for the log groups named in its condition), no other region's", async () => {
        // The database's exported log and every Lambda's log group: each encrypted with the ledger key.
        const groups = [
            named("aws:cloudwatch/logGroup:LogGroup", "usage-ledger-db-postgresql-logs"),
            ...["migrator", "consumer", "reconciler", "ops"].map((id) =>
                named("aws:cloudwatch/logGroup:LogGroup", `usage-ledger-${id}-logs`),
            ),
        ];
        const lambdaGroups = byType(rs, "aws:cloudwatch/logGroup:LogGroup").filter((r) =>
            String(inputs(r).name).startsWith("/aws/lambda/"),
        );
        expect(
            groups
                .slice(1)
                .map((g) => g.urn)
                .sort(),
        ).toEqual(lambdaGroups.map((g) => g.urn).sort());
        const names = groups.map((g) => `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${inputs(g).name}`);
        for (const g of groups) expect(inputs(g).kmsKeyId, inputs(g).name).toBe(vars.ledgerKeyArn);
        const policy = resourcePolicyOf(vars.ledgerKeyArn) as { Statement: any[] };
        const logs = policy.Statement.filter((s) => s.Sid === "CloudWatchLogsLogGroups");
        expect(logs).toHaveLength(1);
        expect(Object.keys(logs[0].Condition)).toEqual(["ArnEquals"]);
        expect(Object.keys(logs[0].Condition.ArnEquals)).toEqual(["kms:EncryptionContext:aws:logs:arn"]);
        expect([...logs[0].Condition.ArnEquals["kms:EncryptionContext:aws:logs:arn"]].sort()).toEqual([...names].sort());
        // The simulator cannot evaluate the encryption context condition (see above), for any of the groups.
        for (const name of names)
            expect(
                (await asLogs("kms:GenerateDataKey", policy, REGION, { "kms:EncryptionContext:aws:logs:arn": name })).ignored,
                name,
            ).toEqual(["kms:EncryptionContext:aws:logs:arn"]);
        const unconditioned = {
            ...policy,
            Statement: policy.Statement.map((s) => {
                if (s.Sid !== "CloudWatchLogsLogGroups") return s;
                const { Condition: _, ...rest } = s;
                return rest;
            }),
        };
        for (const action of ["kms:GenerateDataKey", "kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:DescribeKey"])
            expect((await asLogs(action, unconditioned)).decision, action).toBe("Allowed");
        expect((await asLogs("kms:Decrypt", unconditioned, "us-east-1")).decision).not.toBe("Allowed");
        // Another partition's service principal is not logs.<region>.amazonaws.com: refused, not rendered wrong.
        const groupsIn = (partition: string) => ({ partition, region: REGION, accountId: ACCOUNT, logGroups: ["/g"] });
        expect(logGroupKeyStatement(groupsIn("aws")).Principal).toEqual({ Service: `logs.${REGION}.amazonaws.com` });
        for (const partition of ["aws-cn", "aws-us-gov"])
            expect(() => logGroupKeyStatement(groupsIn(partition)), partition).toThrow(
                new RegExp(`service principal in partition ${partition} is not logs\\.${REGION}\\.amazonaws\\.com`),
            );
        // Without the statement (the key policy before this change), CloudWatch Logs cannot use the key at all.
        const without = { ...policy, Statement: policy.Statement.filter((s) => s.Sid !== "CloudWatchLogsLogGroups") };
        expect((await asLogs("kms:GenerateDataKey", without)).decision).not.toBe("Allowed");
    });
});

describe("simulated: the S3 access log bucket takes log objects only from S3's logging service, for the hub's two data buckets", () => {
    const LOGGING = "logging.s3.amazonaws.com";
    /** One request to the log bucket, with the log bucket's policy and (for an IAM principal) its identity policies. */
    async function toLogBucket(
        principal: string,
        action: string,
        key: string,
        context: Record<string, string | string[] | null> = {},
        identityPolicies: Doc[] = [],
        bucketLevel = false,
    ): Promise<Decision> {
        const logBucketArn = out(named("aws:s3/bucket:Bucket", "access-logs-bucket"), "arn");
        const resource = bucketLevel ? logBucketArn : `${logBucketArn}/${key}`;
        const iam = principal.startsWith("arn:");
        // A key given as null is left out of the request: a request AWS would not send, evaluated as such (the guard
        // of runSimulation refuses it, so the simulator is called directly).
        const dropped = Object.keys(context).filter((k) => context[k] === null);
        const run = dropped.length ? simulatorRun : runSimulation;
        const contextVariables: Record<string, unknown> = {
            "aws:SecureTransport": "true",
            "s3:ResourceAccount": ACCOUNT,
            ...(iam
                ? { "aws:PrincipalArn": principal, "aws:PrincipalAccount": ACCOUNT, "aws:ViaAWSService": "false" }
                : { "aws:PrincipalServiceName": principal, "aws:PrincipalServiceNamesList": [principal] }),
            ...context,
        };
        for (const k of dropped) delete contextVariables[k];
        const r = await run(
            {
                identityPolicies: identityPolicies.map((policy, i) => ({ name: `inline-${i}`, policy })),
                serviceControlPolicies: [],
                resourceControlPolicies: [],
                resourcePolicy: resourcePolicyOf(resource) as any,
                request: {
                    action,
                    principal,
                    resource: { accountId: ACCOUNT, resource },
                    contextVariables,
                },
            } as any,
            {},
        );
        if (r.resultType === "error") throw new Error(JSON.stringify(r.errors));
        return r.overallResult as Decision;
    }
    const from = (sourceArn: string, account = ACCOUNT) => ({ "aws:SourceArn": sourceArn, "aws:SourceAccount": account });

    it("each data bucket's logs, under its own prefix, from this account only", async () => {
        const sources = [
            [vars.policyBucketArn, "policy-bundles/"],
            [vars.failedBatchBucketArn, "usage-failed-batches/"],
        ];
        const key = (prefix: string) => `${prefix}${ACCOUNT}/${REGION}/b/2026/12/02/2026-12-02-05-00-00-0123456789ABCDEF`;
        for (const [arn, prefix] of sources) {
            expect(await toLogBucket(LOGGING, "s3:PutObject", key(prefix), from(arn)), prefix).toBe("Allowed");
            // The same bucket name in another account (confused deputy), or a log of the other bucket under this prefix.
            expect(await toLogBucket(LOGGING, "s3:PutObject", key(prefix), from(arn, "999999999999"))).not.toBe("Allowed");
            const other = sources.find(([a]) => a !== arn)![0];
            expect(await toLogBucket(LOGGING, "s3:PutObject", key(prefix), from(other))).not.toBe("Allowed");
        }
        expect(await toLogBucket(LOGGING, "s3:PutObject", key("elsewhere/"), from(vars.policyBucketArn))).not.toBe("Allowed");
        expect(await toLogBucket(LOGGING, "s3:PutObject", key("policy-bundles/"), from("arn:aws:s3:::someone-elses-bucket"))).not.toBe(
            "Allowed",
        );
        // The logging service may do nothing else, and no other service may deliver.
        expect(await toLogBucket(LOGGING, "s3:GetObject", key("policy-bundles/"), from(vars.policyBucketArn))).not.toBe("Allowed");
        expect(await toLogBucket("cloudtrail.amazonaws.com", "s3:PutObject", key("policy-bundles/"), from(vars.policyBucketArn))).not.toBe(
            "Allowed",
        );
    });

    it("the writer Deny is AWS's documented one (aws:PrincipalServiceNamesList): the logging service passes; an admin with s3:*, CloudTrail, a request without the key are denied", async () => {
        const policy = resourcePolicyOf(out(named("aws:s3/bucket:Bucket", "access-logs-bucket"), "arn")) as { Statement: any[] };
        const deny = policy.Statement.find((s) => s.Sid === "DenyOtherWriters");
        expect(deny.Condition).toEqual({ "ForAllValues:StringNotEquals": { "aws:PrincipalServiceNamesList": LOGGING } });
        const k = `policy-bundles/${ACCOUNT}/${REGION}/b/2026/12/02/x`;
        const ok = from(vars.policyBucketArn);
        expect(await toLogBucket(LOGGING, "s3:PutObject", k, ok)).toBe("Allowed");
        const all: Doc[] = [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "s3:*", Resource: "*" }] }];
        expect(await toLogBucket(`arn:aws:iam::${ACCOUNT}:role/ops-admin`, "s3:PutObject", k, {}, all)).toBe("ExplicitlyDenied");
        expect(await toLogBucket("cloudtrail.amazonaws.com", "s3:PutObject", k, ok)).toBe("ExplicitlyDenied");
        // The logging service's own name, but a request carrying no service list: the Deny applies.
        expect(await toLogBucket(LOGGING, "s3:PutObject", k, { ...ok, "aws:PrincipalServiceNamesList": null })).toBe("ExplicitlyDenied");
    });

    it("no IAM principal puts or deletes a log object: an account administrator (s3:* by IAM) cannot (the root user can still delete the bucket policy; lifecycle expiry is not a request)", async () => {
        const admin = `arn:aws:iam::${ACCOUNT}:role/hub-deployer`;
        const all: Doc[] = [{ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "s3:*", Resource: "*" }] }];
        const key = "policy-bundles/x";
        expect(await toLogBucket(admin, "s3:GetObject", key, {}, all)).toBe("Allowed");
        for (const action of ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"])
            expect(await toLogBucket(admin, action, key, {}, all), action).toBe("ExplicitlyDenied");
        expect(await toLogBucket(admin, "s3:GetObject", key, { "aws:SecureTransport": "false" }, all)).toBe("ExplicitlyDenied");
    });
});

describe("simulated: only the hub's administrators change the log bucket's controls and the data buckets' logging", () => {
    const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "s3:*", Resource: "*" }] };
    const ctx = { "aws:SecureTransport": "true" };
    const admin: Principal = { arn: `arn:aws:iam::${ACCOUNT}:role/ops-admin`, policies: [allowAll] };
    /**
     * The hub file's deployers. hub-prod's sample deployer is in account 111122223333, the mocks' buckets in
     * MOCK_ACCOUNT_ID, so S3 denies it implicitly there (cross-account, no grant); what is checked is that the Deny
     * does not apply to it (not ExplicitlyDenied), while it does to anyone else.
     */
    const deployers = () => (HUB["platform:hubDeployers"] as string[]).map((arn): Principal => ({ arn, policies: [allowAll] }));

    it("an administrator of the hub account outside the hub deployers cannot change the log bucket's policy, expiry, encryption, ownership or versioning; the Deny spares the hub deployers", async () => {
        const logBucketArn = out(named("aws:s3/bucket:Bucket", "access-logs-bucket"), "arn");
        for (const action of LOG_BUCKET_CONTROL_ACTIONS) {
            expect((await simulate(admin, action, logBucketArn, ctx)).decision, action).toBe("ExplicitlyDenied");
            for (const d of deployers())
                expect((await simulate(d, action, logBucketArn, ctx)).decision, `${d.arn} ${action}`).not.toBe("ExplicitlyDenied");
        }
        // Reading the controls stays open to the account's administrators.
        expect((await simulate(admin, "s3:GetBucketPolicy", logBucketArn, ctx)).decision).toBe("Allowed");
    });

    it("a hub deployer of the hub's own account may change each of them (the Deny spares it and its IAM policy allows)", async () => {
        const deployer = `arn:aws:iam::${ACCOUNT}:role/platform-hub-deployer`;
        const doc = structuredClone(HUB);
        doc["platform:hubDeployers"] = [deployer];
        const hub = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        const cases = [
            ["access-logs-bucket", LOG_BUCKET_CONTROL_ACTIONS],
            ["policy-store-bucket", ["s3:PutBucketLogging"]],
            ["usage-ledger-failed-batches", ["s3:PutBucketLogging"]],
        ] as const;
        for (const [name, actions] of cases) {
            const bucket = hub.resources.find((r) => r.type === "aws:s3/bucket:Bucket" && r.name === name)!;
            const policy = hub.resources.find(
                (r) => r.type === "aws:s3/bucketPolicy:BucketPolicy" && inputs(r).bucket === out(bucket, "bucket"),
            )!;
            for (const action of actions) {
                const r = await runSimulation(
                    {
                        identityPolicies: [{ name: "admin", policy: allowAll }],
                        serviceControlPolicies: [],
                        resourceControlPolicies: [],
                        resourcePolicy: JSON.parse(inputs(policy).policy),
                        request: {
                            action,
                            principal: deployer,
                            resource: { accountId: ACCOUNT, resource: out(bucket, "arn") },
                            contextVariables: {
                                ...ctx,
                                "aws:PrincipalArn": deployer,
                                "aws:PrincipalAccount": ACCOUNT,
                                "aws:ViaAWSService": "false",
                                "s3:ResourceAccount": ACCOUNT,
                            },
                        },
                    },
                    {},
                );
                expect(r.overallResult, `${name} ${action}`).toBe("Allowed");
            }
        }
    }, 120_000);

    it("nobody outside the hub deployers turns the policy bucket's or the failure bucket's access logging off", async () => {
        for (const bucket of [vars.policyBucketArn, vars.failedBatchBucketArn]) {
            expect((await simulate(admin, "s3:PutBucketLogging", bucket, ctx)).decision, bucket).toBe("ExplicitlyDenied");
            for (const d of deployers())
                expect((await simulate(d, "s3:PutBucketLogging", bucket, ctx)).decision, `${d.arn} ${bucket}`).not.toBe("ExplicitlyDenied");
        }
    });
});

describe("simulated: who administers the hub's KMS keys", () => {
    const allowAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
    const KEYS = ["policy-store-key", "usage-ledger-key", "api-keys-key"];
    const ADMIN_ONLY = ["kms:PutKeyPolicy", "kms:ScheduleKeyDeletion", "kms:DisableKey"];
    const ctx = { "aws:SecureTransport": "true" };

    it("an administrator of the hub account outside the hub deployers can neither rewrite a key's policy, disable it, nor schedule its deletion", async () => {
        const admin: Principal = { arn: `arn:aws:iam::${ACCOUNT}:role/ops-admin`, policies: [allowAll] };
        for (const key of KEYS) {
            const arn = out(named("aws:kms/key:Key", key), "arn");
            for (const a of ADMIN_ONLY) expect((await simulate(admin, a, arn, ctx)).decision, `${key} ${a}`).not.toBe("Allowed");
            expect((await simulate(admin, "kms:DescribeKey", arn, ctx)).decision, key).toBe("Allowed");
        }
    });

    it("the hub deployers can (lockout safety: the up that sets the policy keeps the right to set it); so can a break-glass role of platform:keyAdministrators", async () => {
        for (const key of KEYS) {
            const arn = out(named("aws:kms/key:Key", key), "arn");
            for (const d of HUB["platform:hubDeployers"] as string[])
                for (const a of ADMIN_ONLY)
                    expect((await simulate({ arn: d, policies: [allowAll] }, a, arn, ctx)).decision, `${d} ${a}`).toBe("Allowed");
        }
        const breakGlass = `arn:aws:iam::${ACCOUNT}:role/platform-break-glass`;
        const doc = structuredClone(HUB);
        doc["platform:keyAdministrators"] = [breakGlass];
        const hub = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        for (const key of KEYS) {
            const k = hub.resources.find((r) => r.type === "aws:kms/key:Key" && r.name === key)!;
            const r = await runSimulation(
                {
                    identityPolicies: [{ name: "admin", policy: allowAll }],
                    serviceControlPolicies: [],
                    resourceControlPolicies: [],
                    resourcePolicy: JSON.parse(inputs(k).policy),
                    request: {
                        action: "kms:PutKeyPolicy",
                        principal: breakGlass,
                        resource: { accountId: ACCOUNT, resource: out(k, "arn") },
                        contextVariables: {
                            ...ctx,
                            "aws:PrincipalArn": breakGlass,
                            "aws:PrincipalAccount": ACCOUNT,
                            "aws:ViaAWSService": "false",
                            "kms:CallerAccount": ACCOUNT,
                        },
                    },
                },
                {},
            );
            expect(r.overallResult, key).toBe("Allowed");
        }
    }, 120_000);
});

describe("simulated: the alarm topic's key check agrees with IAM's evaluation", () => {
    it("the hub's check accepts a topic key policy exactly when CloudWatch may use the key (never when it may not)", async () => {
        const keyArn = `arn:aws:kms:${REGION}:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`;
        const admin = { Sid: "Admin", Effect: "Allow", Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` }, Action: "kms:*", Resource: "*" };
        const cw = (extra: Record<string, unknown> = {}) => ({
            Sid: "CloudWatch",
            Effect: "Allow",
            Principal: { Service: "cloudwatch.amazonaws.com" },
            Action: ["kms:Decrypt", "kms:GenerateDataKey*"],
            Resource: "*",
            ...extra,
        });
        const samples: Array<[string, Doc, boolean]> = [
            ["CloudWatch allowed", { Version: "2012-10-17", Statement: [admin, cw()] }, true],
            ["kms:* to CloudWatch", { Version: "2012-10-17", Statement: [admin, cw({ Action: "kms:*" })] }, true],
            ["account only", { Version: "2012-10-17", Statement: [admin] }, false],
            ["decrypt only", { Version: "2012-10-17", Statement: [admin, cw({ Action: "kms:Decrypt" })] }, false],
            [
                "another service",
                { Version: "2012-10-17", Statement: [admin, cw({ Principal: { Service: "events.amazonaws.com" } })] },
                false,
            ],
            [
                "CloudWatch denied",
                { Version: "2012-10-17", Statement: [admin, cw(), cw({ Sid: "No", Effect: "Deny", Action: "kms:GenerateDataKey*" })] },
                false,
            ],
        ];
        for (const [label, policy, usable] of samples) {
            const decisions: Decision[] = [];
            for (const action of CLOUDWATCH_TOPIC_KEY_ACTIONS) {
                const r = await runSimulation(
                    {
                        identityPolicies: [],
                        serviceControlPolicies: [],
                        resourceControlPolicies: [],
                        resourcePolicy: policy,
                        request: {
                            action,
                            principal: "cloudwatch.amazonaws.com",
                            resource: { accountId: ACCOUNT, resource: keyArn },
                            contextVariables: {
                                "aws:SecureTransport": "true",
                                "aws:PrincipalServiceName": "cloudwatch.amazonaws.com",
                                "aws:PrincipalServiceNamesList": ["cloudwatch.amazonaws.com"],
                            },
                        },
                    } as any,
                    {},
                );
                decisions.push(r.overallResult);
            }
            expect(
                decisions.every((d) => d === "Allowed"),
                `${label}: simulator`,
            ).toBe(usable);
            expect(cloudWatchTopicKeyProblem(policy) === undefined, `${label}: the hub's check`).toBe(usable);
        }
    });
});
