import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { nextRevision, parsePreviousRevisions, policyBucketPolicy, publishBundle } from "../components/hub/PolicyStore";
import { sourceUserPolicy, spokeServicePolicy, spokeTrustPolicy } from "../components/hub/SpokeIdentity";
import { SpokeContractSchema } from "../config/contract";
import { hubAdministrators } from "../lib/kms";
import { CurrentPointerSchema, publicKeyFromSeed, verifyBundle, type Policy } from "../services/shared/bundle";
import { contentHash } from "../services/shared/canonical";
import type { CapturedResource, RunStackResult } from "../tools/harness";
import { UNKNOWN, unwrapWire } from "../tools/wire";
import { renderSpokeHn1 } from "./cli-render";
import { byType, flatConfig, inputs, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";

/** Spoke names of the repo's hub (`platform:spokes`), sorted. */
const SPOKES: string[] = stackConfigDoc("hub-prod")
    ["platform:spokes"].map((s: { name: string }) => s.name)
    .sort();

const SEED = Buffer.alloc(32, 7);
const LIMITS = { requestsPerSecond: 5, concurrentRequests: 8, tokensPerWindow: 1000, windowSeconds: 60 };
const POLICY: Policy = {
    models: [{ id: "m", limits: LIMITS }],
    tenants: [{ id: "t", displayName: "T", teams: [{ id: "a", limits: LIMITS }] }],
    apiKeys: [
        { id: "k", sha256: "a".repeat(64), tenant: "t", team: "a", models: ["m"], expiresAt: "2027-01-01T00:00:00Z", limits: LIMITS },
    ],
};

describe("bundle revisions (pure)", () => {
    it("first publication is revision 1; the signed bundle verifies with the public key only", () => {
        const p = publishBundle(SEED, "hn1", POLICY, undefined);
        expect(p).toMatchObject({
            revision: 1,
            key: "spokes/hn1/bundles/1.json",
            currentKey: "spokes/hn1/current.json",
            contentHash: contentHash(POLICY),
        });
        const b = verifyBundle(p.bundleJson, publicKeyFromSeed(SEED), "hn1");
        expect(b.revision).toBe(1);
        expect(b.policy).toEqual(POLICY);
        expect(CurrentPointerSchema.parse(JSON.parse(p.currentJson))).toEqual({
            revision: 1,
            key: "spokes/hn1/bundles/1.json",
            contentHash: contentHash(POLICY),
        });
        expect(() => verifyBundle(p.bundleJson, publicKeyFromSeed(Buffer.alloc(32, 8)), "hn1")).toThrow(/signature does not verify/);
    });

    it("unchanged policy and key: same revision and byte-identical objects; changed limit: revision + 1", () => {
        const first = publishBundle(SEED, "hn1", POLICY, undefined);
        const prev = { revision: first.revision, contentHash: first.contentHash, keyId: first.keyId, key: first.key };
        const again = publishBundle(SEED, "hn1", structuredClone(POLICY), { ...prev, revision: 7 });
        expect(again.revision).toBe(7);
        const same = publishBundle(SEED, "hn1", POLICY, prev);
        expect(same.bundleJson).toBe(first.bundleJson);
        expect(same.currentJson).toBe(first.currentJson);
        const changed = structuredClone(POLICY);
        changed.apiKeys[0].limits.requestsPerSecond = 6;
        const next = publishBundle(SEED, "hn1", changed, { ...prev, revision: 7 });
        expect(next.revision).toBe(8);
        expect(next.key).toBe("spokes/hn1/bundles/8.json");
        expect(verifyBundle(next.bundleJson, publicKeyFromSeed(SEED), "hn1").policy.apiKeys[0].limits.requestsPerSecond).toBe(6);
    });

    it("a new signing key with the same policy is a new revision (never rewrites an existing revision object)", () => {
        const first = publishBundle(SEED, "hn1", POLICY, undefined);
        expect(
            nextRevision({ revision: 3, contentHash: first.contentHash, keyId: "0".repeat(16), key: "x" }, first.contentHash, first.keyId),
        ).toBe(4);
    });

    it("malformed previous revisions are refused instead of restarting at 1", () => {
        expect(parsePreviousRevisions(undefined)).toEqual({});
        expect(() => parsePreviousRevisions({ hn1: { revision: 0, contentHash: "x", keyId: "y", key: "z" } })).toThrow(
            /previous output policyRevisions is malformed \(hn1\.revision: /,
        );
    });
});

describe("bucket and identity policies (pure)", () => {
    it("bucket policy: deny statements only (what they allow and refuse is evaluated in test/aws-simulate.test.ts)", () => {
        const doc = policyBucketPolicy("arn:aws:s3:::b", "arn:aws:kms:r:1:key/k", ["arn:aws:iam::1:role/d"]) as any;
        expect(doc.Statement.map((s: any) => [s.Sid, s.Effect])).toEqual([
            ["DenyInsecureTransport", "Deny"],
            ["DenyOldTls", "Deny"],
            ["DenyOtherEncryption", "Deny"],
            ["DenyOtherKmsKeys", "Deny"],
            ["DenyAwsManagedKey", "Deny"],
            ["OnlyHubAdministratorsChangeLogging", "Deny"],
        ]);
    });

    it("spoke roles, one per service: named actions only, scoped to the spoke's prefix, KMS only via S3; auth no stream, metering no ACK", () => {
        const input = {
            spoke: "hn1",
            bucketArn: "arn:aws:s3:::b",
            bucketOwner: "123456789012",
            kmsKeyArn: "arn:aws:kms:ap-southeast-1:1:key/k",
            region: "ap-southeast-1",
            usageStreamArn: "arn:aws:kinesis:ap-southeast-1:1:stream/platform-usage-hn1",
        };
        const auth = spokeServicePolicy("auth", input);
        const metering = spokeServicePolicy("metering", input);
        for (const s of [...auth.Statement, ...metering.Statement]) {
            expect(s.Effect).toBe("Allow");
            for (const a of s.Action) expect(a).toMatch(/^[a-z0-9]+:[A-Za-z]+$/);
            for (const r of [s.Resource ?? []].flat())
                expect(r.startsWith("arn:aws:s3:::b/") ? r.startsWith("arn:aws:s3:::b/spokes/hn1/") : true).toBe(true);
        }
        const bundles = ["arn:aws:s3:::b/spokes/hn1/current.json", "arn:aws:s3:::b/spokes/hn1/bundles/*"];
        expect(auth.Statement.map((s) => [s.Sid, s.Action, s.Resource])).toEqual([
            ["ReadOwnBundles", ["s3:GetObject", "s3:GetObjectVersion"], bundles],
            ["ListOwnPrefix", ["s3:ListBucket"], "arn:aws:s3:::b"],
            ["WriteOwnAcks", ["s3:PutObject"], "arn:aws:s3:::b/spokes/hn1/acks/*"],
            ["UseBucketKeyViaS3", ["kms:Decrypt", "kms:GenerateDataKey"], "arn:aws:kms:ap-southeast-1:1:key/k"],
        ]);
        expect(metering.Statement.map((s) => [s.Sid, s.Action, s.Resource])).toEqual([
            ["ReadOwnBundles", ["s3:GetObject", "s3:GetObjectVersion"], bundles],
            ["UseBucketKeyViaS3", ["kms:Decrypt"], "arn:aws:kms:ap-southeast-1:1:key/k"],
            ["PutUsageEvents", ["kinesis:PutRecords"], "arn:aws:kinesis:ap-southeast-1:1:stream/platform-usage-hn1"],
        ]);
        expect(auth.Statement[1].Condition).toEqual({
            StringLike: { "s3:prefix": ["spokes/hn1/*"] },
            StringEquals: { "s3:ResourceAccount": "123456789012" },
        });
        for (const s of [...auth.Statement, ...metering.Statement].filter((s) => s.Action.some((a) => a.startsWith("s3:"))))
            expect(s.Condition?.StringEquals, s.Sid).toEqual({ "s3:ResourceAccount": "123456789012" });
        expect(auth.Statement[3].Condition).toEqual({ StringEquals: { "kms:ViaService": "s3.ap-southeast-1.amazonaws.com" } });
        expect(spokeTrustPolicy([{ arn: "arn:aws:iam::1:user/u" }]).Statement).toEqual([
            { Sid: "SpokeSourceIdentity0", Effect: "Allow", Principal: { AWS: "arn:aws:iam::1:user/u" }, Action: ["sts:AssumeRole"] },
        ]);
        expect(sourceUserPolicy("arn:aws:iam::1:role/r").Statement).toEqual([
            { Sid: "AssumeSpokeRole", Effect: "Allow", Action: ["sts:AssumeRole"], Resource: "arn:aws:iam::1:role/r" },
        ]);
    });
});

const one = (rs: CapturedResource[], type: string) => {
    const x = byType(rs, type);
    expect(x, type).toHaveLength(1);
    return inputs(x[0]);
};
const objects = (r: RunStackResult) =>
    Object.fromEntries(byType(r.resources, "aws:s3/bucketObjectv2:BucketObjectv2").map((o) => [o.name, inputs(o)]));
/** The hub's outputs as its next deployment's self StackReference reads them. */
const asPrevious = (r: RunStackResult) => ({ "hub-prod": { outputs: r.outputs, secretOutputNames: [] } });

describe("PolicyStore under mocks (hub-prod)", () => {
    it("bucket: versioned, SSE-KMS with a rotating key, all public access blocked, ACLs off, TLS-only policy", async () => {
        const hub = await runRepoStack("hub-prod");
        // The policy store's own resources (the usage ledger has its failure bucket).
        const rs = hub.resources.filter((r) => r.urn.includes("platform:hub:PolicyStore$"));
        const bucket = byType(rs, "aws:s3/bucket:Bucket").find((b) => b.name === "policy-store-bucket")!;
        const name = unwrapWire(bucket.outputs.bucket) as string;
        expect(one(rs, "aws:s3/bucketVersioning:BucketVersioning")).toMatchObject({
            bucket: name,
            versioningConfiguration: { status: "Enabled" },
        });
        const enc = one(rs, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration");
        const key = byType(rs, "aws:kms/key:Key").find((k) => k.name === "policy-store-key")!;
        expect(inputs(key).enableKeyRotation).toBe(true);
        expect(enc.rules).toEqual([
            {
                applyServerSideEncryptionByDefault: { sseAlgorithm: "aws:kms", kmsMasterKeyId: unwrapWire(key.outputs.arn) },
                bucketKeyEnabled: true,
            },
        ]);
        expect(one(rs, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")).toEqual({
            bucket: name,
            blockPublicAcls: true,
            blockPublicPolicy: true,
            ignorePublicAcls: true,
            restrictPublicBuckets: true,
        });
        expect(one(rs, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").rule).toEqual({ objectOwnership: "BucketOwnerEnforced" });
        const policy = JSON.parse(one(rs, "aws:s3/bucketPolicy:BucketPolicy").policy);
        expect(policy).toEqual(
            policyBucketPolicy(
                `arn:aws:s3:::${name}`,
                unwrapWire(key.outputs.arn) as string,
                hubAdministrators({
                    hubDeployers: stackConfigDoc("hub-prod")["platform:hubDeployers"],
                    keyAdministrators: stackConfigDoc("hub-prod")["platform:keyAdministrators"] ?? [],
                }),
            ),
        );
        // Every AWS resource goes through the hub's explicit provider.
        const [provider] = byType(hub.resources, "pulumi:providers:aws");
        expect(inputs(provider).region).toBe("ap-southeast-1");
        for (const r of hub.resources.filter((x) => x.custom && x.type.startsWith("aws:")))
            expect(r.provider, `${r.type} ${r.name}`).toContain(provider.urn);
    });

    it("per spoke: bundle + current pointer objects that verify with the contract's public key; contract carries the policy block", async () => {
        const hub = await runRepoStack("hub-prod");
        const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, unknown>;
        const objs = objects(hub);
        expect(SPOKES).toEqual(expect.arrayContaining(["hcm1", "hn1"]));
        expect(Object.keys(objs).sort()).toEqual(SPOKES.flatMap((s) => [`policy-store-${s}-bundle`, `policy-store-${s}-current`]));
        const model = unwrapWire(hub.outputs.accessModel);
        for (const spoke of SPOKES) {
            const c = SpokeContractSchema.parse(contracts[spoke]);
            expect(c.policy).toMatchObject({
                prefix: `spokes/${spoke}/`,
                region: "ap-southeast-1",
                revision: 1,
                contentHash: contentHash(model),
            });
            const b = objs[`policy-store-${spoke}-bundle`];
            expect(b).toMatchObject({
                bucket: c.policy.bucket,
                key: `spokes/${spoke}/bundles/1.json`,
                serverSideEncryption: "aws:kms",
                kmsKeyId: c.policy.kmsKeyArn,
                contentType: "application/json",
            });
            const bundle = verifyBundle(b.content, c.policy.publicKey, spoke);
            expect(bundle.policy).toEqual(model);
            expect(JSON.parse(objs[`policy-store-${spoke}-current`].content)).toEqual({
                revision: 1,
                key: `spokes/${spoke}/bundles/1.json`,
                contentHash: c.policy.contentHash,
            });
            expect(c.policy.roleArn).toMatch(
                new RegExp(`^arn:aws:iam::123456789012:role/platform/spokes/hub-prod-${spoke}-auth-[0-9a-f]{26}$`),
            );
            expect(c.usage.roleArn).toMatch(
                new RegExp(`^arn:aws:iam::123456789012:role/platform/spokes/hub-prod-${spoke}-metering-[0-9a-f]{26}$`),
            );
        }
        // Objects are written only once the bucket is versioned, encrypted and TLS-only; the pointer after its bundle.
        const urn = (type: string) => byType(hub.resources, type).find((r) => r.name.startsWith("policy-store-"))!.urn;
        const objRes = (n: string) => byType(hub.resources, "aws:s3/bucketObjectv2:BucketObjectv2").find((o) => o.name === n)!;
        const ready = [
            urn("aws:s3/bucketVersioning:BucketVersioning"),
            urn("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"),
            urn("aws:s3/bucketPolicy:BucketPolicy"),
        ];
        expect(objRes("policy-store-hn1-bundle").dependencies).toEqual(expect.arrayContaining(ready));
        expect(objRes("policy-store-hn1-current").dependencies).toEqual(
            expect.arrayContaining([...ready, objRes("policy-store-hn1-bundle").urn]),
        );
    });

    it("unchanged policy on redeploy: identical revision, hash and object content; a changed limit: revision + 1", async () => {
        const first = await runRepoStack("hub-prod");
        const second = await runRepoStack("hub-prod", { stackOutputs: asPrevious(first) });
        expect(unwrapWire(second.outputs.policyRevisions)).toEqual(unwrapWire(first.outputs.policyRevisions));
        expect(objects(second)).toEqual(objects(first));

        const doc = stackConfigDoc("hub-prod");
        doc["platform:apiKeys"][0].limits.requestsPerSecond = 41;
        const third = await runRepoStack("hub-prod", { config: flatConfig(doc), stackOutputs: asPrevious(second) });
        const revs = unwrapWire(third.outputs.policyRevisions) as Record<string, { revision: number; contentHash: string }>;
        for (const spoke of SPOKES) expect(revs[spoke].revision, spoke).toBe(2);
        expect(revs.hn1.contentHash).not.toBe((unwrapWire(first.outputs.policyRevisions) as any).hn1.contentHash);
        const objs = objects(third);
        expect(objs["policy-store-hn1-bundle"].key).toBe("spokes/hn1/bundles/2.json");
        const c = SpokeContractSchema.parse((unwrapWire(third.outputs.spokeContracts) as any).hn1);
        expect(c.policy.revision).toBe(2);
        expect(
            verifyBundle(objs["policy-store-hn1-bundle"].content, c.policy.publicKey, "hn1").policy.apiKeys.find(
                (k) => k.id === "acme-search-prod",
            )!.limits.requestsPerSecond,
        ).toBe(41);
        // ... and the redeploy after that keeps revision 2.
        const fourth = await runRepoStack("hub-prod", { config: flatConfig(doc), stackOutputs: asPrevious(third) });
        expect((unwrapWire(fourth.outputs.policyRevisions) as any).hn1.revision).toBe(2);
    });

    it("spoke identities: per-service role policies scoped to the spoke prefix, metering's to its own usage stream; source key only as a secret", async () => {
        const hub = await runRepoStack("hub-prod");
        const policies = byType(hub.resources, "aws:iam/rolePolicy:RolePolicy").filter((p) => p.name.startsWith("spoke-"));
        expect(policies.map((p) => p.name).sort()).toEqual(
            SPOKES.flatMap((s) => [`spoke-${s}-auth-permissions`, `spoke-${s}-metering-permissions`]).sort(),
        );
        for (const p of policies) {
            const [, spoke, service] = p.name.match(/^spoke-(.+)-(auth|metering)-permissions$/)!;
            const doc = JSON.parse(inputs(p).policy);
            for (const s of doc.Statement) for (const a of s.Action) expect(a).not.toContain("*");
            // Grants only (the on-prem egress Deny covers every resource on purpose).
            const s3 = doc.Statement.filter(
                (s: any) => s.Effect === "Allow" && s.Action.some((a: string) => a.startsWith("s3:") && a !== "s3:ListBucket"),
            ).flatMap((s: any) => [s.Resource].flat());
            for (const r of s3) expect(r).toMatch(new RegExp(`^arn:aws:s3:::[^/]+/spokes/${spoke}/`));
            const usage = doc.Statement.find((s: any) => s.Sid === "PutUsageEvents");
            if (service === "metering") expect(usage.Resource).toMatch(new RegExp(`:stream/.*${spoke}`));
            else expect(usage).toBeUndefined();
        }
        // Source keys exist only in their per-spoke secrets, minted outside Pulumi (services/keys/spoke-key.ts): the hub
        // creates none and no output names one.
        expect(hub.outputs.spokeCredentials).toBeUndefined();
        expect(byType(hub.resources, "aws:iam/accessKey:AccessKey")).toEqual([]);
        expect(JSON.stringify(unwrapWire(hub.outputs))).not.toMatch(/secretAccessKey|AKIA[0-9A-Z]{16}/);
    });

    it("preview: the contract and revisions are unknown (new keys), never guessed", async () => {
        const hub = await runRepoStack("hub-prod", { preview: true });
        expect(hub.outputs.policyRevisions).toBe(UNKNOWN);
        expect(byType(hub.resources, "aws:s3/bucketObjectv2:BucketObjectv2")).toHaveLength(2 * SPOKES.length);
    });
});

describe("offline render writes no key", () => {
    it("out/ (hub and spoke) never contains an API key or a spoke's AWS secret key, and the spoke generates no secret", async () => {
        // Mock outputs are deterministic, so the secrets computed here are the ones the renderer sees. API keys are
        // never in the program (npm run mint-key writes them to the tenants' secrets): any key-shaped string is a leak.
        const { hub, spoke } = await runHubAndSpoke("spoke-hn1");
        // The on-prem spokes' source keys as their slots' secrets hold them (the mocks' Secrets Manager).
        const { callMocks } = await import("../tools/mock-outputs");
        const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, any>;
        const awsSecrets = Object.values(contracts)
            .filter((c) => c.identity?.mode === "access-key")
            .map(
                (c) =>
                    JSON.parse(
                        String(
                            callMocks["aws:secretsmanager/getSecretVersion:getSecretVersion"](
                                { secretId: c.identity.secretArn },
                                "ap-southeast-1",
                            ).secretString,
                        ),
                    ).secretAccessKey as string,
            );
        expect(awsSecrets).toHaveLength(SPOKES.length - 1); // the EKS spoke (sg1) has no key: EKS Pod Identity
        // The counter-store password and the cache-salt key are generated into the cluster (npm run mint-key --
        // install-spoke-secrets), so the program holds no generator whose value could reach out/.
        expect(spoke.resources.filter((r) => r.type.startsWith("random:"))).toEqual([]);

        // `npm run render -- spoke-hn1` in its own process (test/cli-render.ts: once per test run, shared with
        // test/render.test.ts).
        const { out: dir, ...r } = await renderSpokeHn1();
        expect(r.code, r.stdout + r.stderr).toBe(0);
        const files = ["hub-prod", "spoke-hn1"].flatMap((s) => fs.readdirSync(path.join(dir, s)).map((f) => path.join(dir, s, f)));
        // Every text file of out/, the render report and its SVG pictures included (tools/report/).
        expect(files.map((f) => path.basename(f)).sort()).toEqual([
            "manifests.yaml",
            "manifests.yaml",
            "map.png",
            "map.svg",
            "outputs.json",
            "outputs.json",
            "policy.json",
            "policy.json",
            "rails.png",
            "rails.svg",
            "report.md",
            "report.md",
            "resources.json",
            "resources.json",
        ]);
        const text = files.map((f) => fs.readFileSync(f, "utf8")).join("\n");
        expect(text).toContain("policy-store-hn1-bundle");
        expect(text).not.toContain("sk-h200-");
        for (const secret of awsSecrets) expect(text.includes(secret)).toBe(false);
    });
});
