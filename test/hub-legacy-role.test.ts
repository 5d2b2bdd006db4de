/**
 * Migration from the previous release: a hub it deployed keeps each spoke's former single role
 * (components/hub/legacy-spoke-role.ts) with the previous trust and policy, so a spoke that has not run `up` on this
 * release keeps reading its bundles, writing its ACKs and putting usage; evaluated by the IAM policy simulator
 * (@cloud-copilot/iam-simulate, test-only) with the rendered bucket and key policies. A hub first deployed on this
 * release never creates those roles.
 */
import { runSimulation } from "@cloud-copilot/iam-simulate";
import { beforeAll, describe, expect, it } from "vitest";
import { legacyPodIdentityTrustPolicy, legacySpokeRolePolicy, LEGACY_SPOKE_ROLE } from "../components/hub/legacy-spoke-role";
import { AUTH_AWS_CALLS } from "../services/auth/aws-calls";
import { METERING_AWS_CALLS } from "../services/metering/aws-calls";
import { GATEWAY_NAMESPACE } from "../lib/gateway";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import { keepLegacySpokeRolesOf } from "../programs/hub";
import type { CapturedResource } from "../tools/harness";
import { MOCK_ACCOUNT_ID } from "../tools/mock-outputs";
import { unwrapWire } from "../tools/wire";
import { byType, inputs, runRepoStack, stackConfigDoc } from "./helpers";

type Doc = Record<string, unknown>;
const HUB = stackConfigDoc("hub-prod");
const REGION: string = HUB["aws:region"];
const ACCOUNT = MOCK_ACCOUNT_ID;
const SPOKES: Array<{ name: string; provider: string; region?: string }> = HUB["platform:spokes"];
const out = (r: CapturedResource, k: string) => unwrapWire(r.outputs[k]) as any;

/** What a hub deployed by the previous release reports as its own previous outputs (bundle revisions, no generation). */
const PREVIOUS_RELEASE = {
    "hub-prod": {
        outputs: {
            policyRevisions: Object.fromEntries(
                SPOKES.map((s) => [
                    s.name,
                    { revision: 3, contentHash: "0".repeat(64), keyId: "0123456789abcdef", key: `spokes/${s.name}/bundles/3.json` },
                ]),
            ),
        },
        secretOutputNames: [],
    },
};

let migrated: CapturedResource[] = [];
let migratedOutputs: Record<string, unknown> = {};
let fresh: CapturedResource[] = [];
beforeAll(async () => {
    const m = await runRepoStack("hub-prod", { stackOutputs: PREVIOUS_RELEASE });
    migrated = m.resources;
    migratedOutputs = unwrapWire(m.outputs) as Record<string, unknown>;
    fresh = (await runRepoStack("hub-prod")).resources;
}, 240_000);

async function decide(
    principal: string,
    identity: Doc[],
    action: string,
    resource: string,
    resourcePolicy: Doc | undefined,
    context: Doc,
    resourceAccount = ACCOUNT,
) {
    const r: any = await runSimulation(
        {
            identityPolicies: identity.map((policy, i) => ({ name: `p${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            resourcePolicy: resourcePolicy as any,
            request: { action, principal, resource: { accountId: resourceAccount, resource }, contextVariables: context },
        } as any,
        {},
    );
    if (r.resultType === "error") throw new Error(JSON.stringify(r.errors));
    return r.overallResult as string;
}

describe("which hub keeps the previous release's spoke roles", () => {
    it("a hub the previous release deployed (revisions, no generation), or one that kept them last time; never a fresh hub", () => {
        expect(keepLegacySpokeRolesOf({ previousRevisions: { sg1: {} } })).toBe(true);
        expect(keepLegacySpokeRolesOf({ previousRevisions: { sg1: {} }, previousGeneration: 2, previousKept: true })).toBe(true);
        expect(keepLegacySpokeRolesOf({ previousRevisions: { sg1: {} }, previousGeneration: 2, previousKept: false })).toBe(false);
        expect(keepLegacySpokeRolesOf({})).toBe(false);
        expect(keepLegacySpokeRolesOf({ previousRevisions: {} })).toBe(false);
    });

    it("a fresh hub renders none (their fixed names would collide with another hub's)", () => {
        expect(byType(fresh, "aws:iam/role:Role").filter((r) => /^spoke-[^-]+-role$/.test(r.name))).toEqual([]);
    });
});

describe("a hub deployed by the previous release keeps each spoke's former role for one release", () => {
    it("under its old resource and physical name (no replacement, no delete), marked for removal, the outputs say so", () => {
        const legacy = byType(migrated, "aws:iam/role:Role").filter((r) => /^spoke-[^-]+-role$/.test(r.name));
        expect(legacy.map((r) => inputs(r).name).sort()).toEqual(SPOKES.map((s) => `platform-spoke-${s.name}`).sort());
        for (const r of legacy) {
            expect(r.urn).toMatch(/::platform:hub:SpokeIdentity\$aws:iam\/role:Role::spoke-[^-]+-role$/);
            expect(inputs(r).path).toBe("/platform/spokes/");
            expect(inputs(r).description).toMatch(/^Policy bundle reader \/ ACK writer \/ usage producer for spoke /);
        }
        // The new auth role no longer claims the old resource (an alias would replace, i.e. delete, it).
        for (const r of byType(migrated, "aws:iam/role:Role").filter((x) => /-(auth|metering)-role$/.test(x.name)))
            expect(JSON.stringify(r), r.name).not.toMatch(/"aliases"/);
        expect(migratedOutputs.legacySpokeRoles).toBe(true);
        expect(migratedOutputs.spokeRoleGeneration).toBe(2);
        expect(LEGACY_SPOKE_ROLE.removeIn).toMatch(/^\d+\.\d+\.\d+$/);
    });

    it("its trust and policy are the previous release's (plus s3:ResourceAccount on each S3 grant)", () => {
        const policyStoreBucket = out(migrated.find((r) => r.type === "aws:s3/bucket:Bucket" && r.name === "policy-store-bucket")!, "arn");
        for (const s of SPOKES) {
            const role = migrated.find((r) => r.name === `spoke-${s.name}-role`)!;
            const policy = migrated.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === `spoke-${s.name}-permissions`)!;
            expect(inputs(policy).role).toBe(out(role, "name"));
            const doc = JSON.parse(inputs(policy).policy);
            expect(doc.Statement.map((x: { Sid: string }) => x.Sid).slice(0, 4)).toEqual([
                "ReadOwnBundles",
                "ListOwnPrefix",
                "WriteOwnAcks",
                "UseBucketKeyViaS3",
            ]);
            expect(doc.Statement[0].Resource[0]).toBe(`${policyStoreBucket}/spokes/${s.name}/current.json`);
            if (s.provider === "eks") {
                const trust = JSON.parse(inputs(role).assumeRolePolicy);
                const clusterArn = trust.Statement[0].Condition.StringEquals["aws:RequestTag/eks-cluster-arn"];
                expect(trust).toEqual(
                    legacyPodIdentityTrustPolicy(ACCOUNT, clusterArn, [
                        { namespace: GATEWAY_NAMESPACE, serviceAccount: "auth" },
                        { namespace: PLATFORM_NAMESPACE, serviceAccount: "metering" },
                    ]),
                );
                expect(clusterArn).toBe(`arn:aws:eks:${s.region ?? REGION}:${ACCOUNT}:cluster/platform-${s.name}`);
            }
        }
        const minimal = legacySpokeRolePolicy({
            spoke: "x",
            bucketArn: "arn:aws:s3:::b",
            bucketOwner: ACCOUNT,
            kmsKeyArn: "k",
            region: REGION,
        });
        expect(minimal.Statement).toHaveLength(4);
        // Every S3 grant names the hub's account as the bucket's; the KMS grant keeps S3-in-the-bucket's-region only.
        for (const st of minimal.Statement.filter((x) => x.Action.some((a) => a.startsWith("s3:"))))
            expect(st.Condition?.StringEquals?.["s3:ResourceAccount"], st.Sid).toBe(ACCOUNT);
        expect(minimal.Statement.find((x) => x.Sid === "UseBucketKeyViaS3")?.Condition).toEqual({
            StringEquals: { "kms:ViaService": `s3.${REGION}.amazonaws.com` },
        });
    });

    it("simulated: an EKS spoke not yet upgraded (auth and metering on the old role) still assumes it, reads its bundle, writes its ACK, puts usage; not another spoke's", async () => {
        const eks = SPOKES.find((s) => s.provider === "eks")!;
        const other = SPOKES.find((s) => s.name !== eks.name)!;
        const role = migrated.find((r) => r.name === `spoke-${eks.name}-role`)!;
        const trust = JSON.parse(inputs(role).assumeRolePolicy);
        const clusterArn = trust.Statement[0].Condition.StringEquals["aws:RequestTag/eks-cluster-arn"];
        for (const [ns, sa] of [
            [GATEWAY_NAMESPACE, "auth"],
            [PLATFORM_NAMESPACE, "metering"],
        ])
            for (const action of ["sts:AssumeRole", "sts:TagSession"])
                expect(
                    await decide("pods.eks.amazonaws.com", [], action, out(role, "arn"), trust, {
                        "aws:SecureTransport": "true",
                        "aws:PrincipalServiceName": "pods.eks.amazonaws.com",
                        "aws:SourceAccount": ACCOUNT,
                        "aws:RequestTag/eks-cluster-arn": clusterArn,
                        "aws:RequestTag/kubernetes-namespace": ns,
                        "aws:RequestTag/kubernetes-service-account": sa,
                        "aws:TagKeys": ["eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account"],
                    }),
                    `${ns}/${sa} ${action}`,
                ).toBe("Allowed");
        const policy = JSON.parse(inputs(migrated.find((r) => r.name === `spoke-${eks.name}-permissions`)!).policy);
        const bucket = migrated.find((r) => r.type === "aws:s3/bucket:Bucket" && r.name === "policy-store-bucket")!;
        const bucketPolicy = JSON.parse(
            inputs(migrated.find((r) => r.type === "aws:s3/bucketPolicy:BucketPolicy" && r.name === "policy-store-tls-only")!).policy,
        );
        const key = migrated.find((r) => r.type === "aws:kms/key:Key" && r.name === "policy-store-key")!;
        const keyPolicy = JSON.parse(inputs(key).policy);
        const stream = out(migrated.find((r) => r.type === "aws:kinesis/stream:Stream" && r.name.endsWith(eks.name))!, "arn");
        const principal = out(role, "arn");
        const ctx = {
            "aws:PrincipalArn": principal,
            "aws:PrincipalAccount": ACCOUNT,
            "aws:SecureTransport": "true",
            "aws:ViaAWSService": "false",
        };
        const s3 = { ...ctx, "s3:TlsVersion": "1.2", "s3:ResourceAccount": ACCOUNT };
        const b = out(bucket, "arn");
        expect(await decide(principal, [policy], "s3:GetObject", `${b}/spokes/${eks.name}/current.json`, bucketPolicy, s3)).toBe("Allowed");
        // The ACK carries no SSE header (the bucket's default encryption applies).
        expect(await decide(principal, [policy], "s3:PutObject", `${b}/spokes/${eks.name}/acks/4.json`, bucketPolicy, s3)).toBe("Allowed");
        for (const a of ["kms:Decrypt", "kms:GenerateDataKey"])
            expect(
                await decide(principal, [policy], a, out(key, "arn"), keyPolicy, {
                    ...ctx,
                    "aws:ViaAWSService": "true",
                    "kms:ViaService": `s3.${REGION}.amazonaws.com`,
                    "kms:CallerAccount": ACCOUNT,
                }),
                a,
            ).toBe("Allowed");
        // With the stream's resource policy (only the spoke's metering role puts records): the kept role is exempt.
        const streamPolicyOf = (rs: CapturedResource[], arn: string) =>
            JSON.parse(inputs(byType(rs, "aws:kinesis/resourcePolicy:ResourcePolicy").find((r) => inputs(r).resourceArn === arn)!).policy);
        const streamPolicy = streamPolicyOf(migrated, stream);
        for (const a of ["kinesis:PutRecord", "kinesis:PutRecords"])
            expect(await decide(principal, [policy], a, stream, streamPolicy, ctx), a).toBe("Allowed");
        // ... and no one else is: an administrator of the account is still refused.
        const admin = `arn:aws:iam::${ACCOUNT}:role/admin`;
        const adminPolicy = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };
        expect(await decide(admin, [adminPolicy], "kinesis:PutRecords", stream, streamPolicy, { ...ctx, "aws:PrincipalArn": admin })).toBe(
            "ExplicitlyDenied",
        );
        // A fresh hub's stream policy does not name the (absent) legacy role.
        const freshStream = out(fresh.find((r) => r.type === "aws:kinesis/stream:Stream" && r.name.endsWith(eks.name))!, "arn");
        expect(JSON.stringify(streamPolicyOf(fresh, freshStream))).not.toContain("platform-spoke-");
        // Still only its own spoke.
        expect(await decide(principal, [policy], "s3:GetObject", `${b}/spokes/${other.name}/current.json`, bucketPolicy, s3)).not.toBe(
            "Allowed",
        );
        expect(await decide(principal, [policy], "s3:PutObject", `${b}/spokes/${other.name}/acks/4.json`, bucketPolicy, s3)).not.toBe(
            "Allowed",
        );
    });

    it("simulated: every spoke's real calls on the old role (auth's and metering's, services/*/aws-calls.ts) are allowed on the hub's bucket, key and stream; the same S3 calls against a same-named bucket of another account are denied, even one whose policy invites them", async () => {
        const identities: Record<string, { egressCidrs?: string[] }> = HUB["platform:spokeIdentities"] ?? {};
        const b = out(migrated.find((r) => r.type === "aws:s3/bucket:Bucket" && r.name === "policy-store-bucket")!, "arn");
        const bucketPolicy = JSON.parse(
            inputs(migrated.find((r) => r.type === "aws:s3/bucketPolicy:BucketPolicy" && r.name === "policy-store-tls-only")!).policy,
        );
        const key = migrated.find((r) => r.type === "aws:kms/key:Key" && r.name === "policy-store-key")!;
        const keyPolicy = JSON.parse(inputs(key).policy);
        // The previous release listed its spoke's prefix too (a missing key is a 404, not a 403): kept, and checked.
        const list = {
            action: "s3:ListBucket",
            resource: "{policyBucketArn}",
            context: { "aws:SecureTransport": "true", "s3:TlsVersion": "1.2", "s3:prefix": "spokes/{spoke}/" },
        };
        const calls = [...AUTH_AWS_CALLS, ...METERING_AWS_CALLS, list];
        expect(calls.filter((c) => c.action.startsWith("s3:")).length).toBeGreaterThan(3);
        for (const s of SPOKES) {
            const role = migrated.find((r) => r.name === `spoke-${s.name}-role`)!;
            const principal = out(role, "arn");
            const policy = JSON.parse(inputs(migrated.find((r) => r.name === `spoke-${s.name}-permissions`)!).policy);
            const stream = out(migrated.find((r) => r.type === "aws:kinesis/stream:Stream" && r.name.endsWith(s.name))!, "arn");
            const streamPolicy = JSON.parse(
                inputs(byType(migrated, "aws:kinesis/resourcePolicy:ResourcePolicy").find((r) => inputs(r).resourceArn === stream)!).policy,
            );
            // On-prem: from the site's egress (the role denies every direct call from elsewhere).
            const egress = identities[s.name]?.egressCidrs ?? [];
            const sourceIp = egress.length ? egress[0].replace(/\/\d+$/, "") : "203.0.113.10";
            const vars: Record<string, string> = {
                policyBucketArn: b,
                policyKeyArn: out(key, "arn"),
                usageStreamArn: stream,
                spoke: s.name,
                revision: "4",
                region: REGION,
            };
            const fill = (t: string) =>
                t.replace(/\{(\w+)\}/g, (_, k: string) => {
                    if (vars[k] === undefined) throw new Error(`no value for {${k}}`);
                    return vars[k];
                });
            for (const c of calls) {
                const viaS3 = c.action.startsWith("kms:");
                const isS3 = c.action.startsWith("s3:");
                const ctx: Doc = {
                    "aws:PrincipalArn": principal,
                    "aws:PrincipalAccount": ACCOUNT,
                    "aws:ViaAWSService": viaS3 ? "true" : "false",
                    "aws:SourceIp": sourceIp,
                    ...(viaS3 ? { "kms:CallerAccount": ACCOUNT } : {}),
                    ...(isS3 ? { "s3:ResourceAccount": ACCOUNT } : {}),
                    ...Object.fromEntries(Object.entries(c.context).map(([k, v]) => [k, Array.isArray(v) ? v.map(fill) : fill(v)])),
                };
                const resource = fill(c.resource);
                const resourcePolicy = isS3 ? bucketPolicy : viaS3 ? keyPolicy : streamPolicy;
                const what = `${s.name} ${c.action} ${resource}`;
                expect(await decide(principal, [policy], c.action, resource, resourcePolicy, ctx), what).toBe("Allowed");
                if (!isS3) continue;
                // A bucket of the same name in another account, whose owner's policy lets the role do anything: the
                // role's own policy must refuse (cross-account needs both), and it is the condition that does.
                const foreign = { ...ctx, "s3:ResourceAccount": OTHER_ACCOUNT };
                const inviting = {
                    Version: "2012-10-17",
                    Statement: [{ Effect: "Allow", Principal: { AWS: principal }, Action: "s3:*", Resource: [b, `${b}/*`] }],
                };
                expect(
                    await decide(principal, [policy], c.action, resource, inviting, foreign, OTHER_ACCOUNT),
                    `${what} (other account)`,
                ).toBe("ImplicitlyDenied");
                expect(
                    await decide(principal, [withoutResourceAccount(policy)], c.action, resource, inviting, foreign, OTHER_ACCOUNT),
                    `${what} (other account, condition removed)`,
                ).toBe("Allowed");
            }
        }
    });
});

const OTHER_ACCOUNT = "999999999999";

/** The policy with its `s3:ResourceAccount` conditions removed (shows the condition is what refuses another account). */
function withoutResourceAccount(policy: { Statement: Array<{ Condition?: Record<string, Record<string, unknown>> }> }): Doc {
    return {
        ...policy,
        Statement: policy.Statement.map((st) => {
            if (!st.Condition) return st;
            const condition = Object.fromEntries(
                Object.entries(st.Condition)
                    .map(
                        ([op, keys]) => [op, Object.fromEntries(Object.entries(keys).filter(([k]) => k !== "s3:ResourceAccount"))] as const,
                    )
                    .filter(([, keys]) => Object.keys(keys).length > 0),
            );
            const { Condition: _, ...rest } = st;
            return Object.keys(condition).length ? { ...rest, Condition: condition } : rest;
        }),
    };
}
