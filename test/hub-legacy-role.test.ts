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

async function decide(principal: string, identity: Doc[], action: string, resource: string, resourcePolicy: Doc | undefined, context: Doc) {
    const r: any = await runSimulation(
        {
            identityPolicies: identity.map((policy, i) => ({ name: `p${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            resourcePolicy: resourcePolicy as any,
            request: { action, principal, resource: { accountId: ACCOUNT, resource }, contextVariables: context },
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

    it("its trust and policy are the previous release's", () => {
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
        expect(legacySpokeRolePolicy({ spoke: "x", bucketArn: "arn:aws:s3:::b", kmsKeyArn: "k", region: REGION }).Statement).toHaveLength(
            4,
        );
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
        const s3 = { ...ctx, "s3:TlsVersion": "1.2" };
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
});
