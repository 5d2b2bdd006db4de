import { beforeAll, describe, expect, it } from "vitest";
import { API_KEY_PREFIX, API_KEY_RANDOM_LENGTH, hashApiKey } from "../../components/hub/ApiKeys";
import {
    awsEksNoAccessKeys,
    awsHubNoKeyGenerators,
    awsImdsHopLimit,
    awsNoCredentialOutputs,
    awsPolicies,
    awsRdsForceSsl,
    awsStatefulProtected,
    findCredentials,
    HUB_REVIEWED_KEY_GENERATORS,
} from "../../policies/aws";
import { allPolicies } from "../../policies/policies";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";
import { res } from "./rdma-fixtures";

// The AWS side of the pack. Compliant inputs are the repo's own hub and EKS spoke; each violating input is
// that graph with exactly one thing undone.
let hub: CapturedResource[];
let sg1: CapturedResource[];
beforeAll(async () => {
    ({
        hub: { resources: hub },
        spoke: { resources: sg1 },
    } = await runHubAndSpoke("spoke-sg1"));
});

const messages = async (policy: Parameters<typeof runPolicies>[0], rs: CapturedResource[]) =>
    (await runPolicies(policy, rs)).mandatory.map((f) => f.message);
function edit(rs: CapturedResource[], match: (r: CapturedResource) => boolean, fn: (r: CapturedResource) => void): CapturedResource[] {
    let hit = 0;
    const out = rs.map((r) => {
        if (!match(r)) return r;
        hit++;
        const c = structuredClone(r);
        fn(c);
        return c;
    });
    expect(hit, "the edit matched nothing").toBeGreaterThan(0);
    return out;
}
const both = (r: CapturedResource, fn: (o: Record<string, any>) => void) => {
    fn(r.inputs as Record<string, any>);
    fn(r.outputs as Record<string, any>);
};

describe("AWS policies on the repo's stacks (compliant)", () => {
    it("hub-prod and spoke-sg1 have no AWS finding; the whole pack still passes both", async () => {
        expect((await runPolicies(awsPolicies, hub)).findings).toEqual([]);
        expect((await runPolicies(awsPolicies, sg1)).findings).toEqual([]);
        expect((await runPolicies(allPolicies, hub)).mandatory).toEqual([]);
        expect((await runPolicies(allPolicies, sg1)).mandatory).toEqual([]);
    });
});

describe("policy aws-hub-no-key-generators", () => {
    const inHub = (r: CapturedResource, qualified: string): CapturedResource => ({
        ...r,
        urn: `urn:pulumi:hub-prod::platform::${qualified}::${r.name}`,
    });
    it("refuses an access key, a password outside the reviewed ledger ones, or a renamed ledger password, in the hub", async () => {
        const key = inHub(
            res("aws:iam/accessKey:AccessKey", "spoke-hn1-key-2026-11", { user: "platform-spoke-hn1-2026-11" }),
            "platform:hub:SpokeIdentity$aws:iam/accessKey:AccessKey",
        );
        const password = inHub(
            res("random:index/randomPassword:RandomPassword", "api-keys-acme", { length: 48 }),
            "platform:hub:ApiKeys$random:index/randomPassword:RandomPassword",
        );
        const moved = inHub(
            res("random:index/randomPassword:RandomPassword", "usage-ledger-ingest-password", { length: 32 }),
            "platform:hub:ApiKeys$random:index/randomPassword:RandomPassword",
        );
        const privateKey = inHub(
            res("tls:index/privateKey:PrivateKey", "edge", { algorithm: "ED25519" }),
            "platform:hub:ApiKeys$tls:index/privateKey:PrivateKey",
        );
        expect(await messages([awsHubNoKeyGenerators], [...hub, key, password, moved, privateKey])).toEqual([
            "aws:iam/accessKey:AccessKey spoke-hn1-key-2026-11 in the hub stack generates key material into its state (readable by any .apply of the hub's program); it is not a reviewed generator.",
            "random:index/randomPassword:RandomPassword api-keys-acme in the hub stack generates key material into its state (readable by any .apply of the hub's program); it is not a reviewed generator.",
            "random:index/randomPassword:RandomPassword usage-ledger-ingest-password in the hub stack generates key material into its state (readable by any .apply of the hub's program); it is not a reviewed generator.",
            "tls:index/privateKey:PrivateKey edge in the hub stack generates key material into its state (readable by any .apply of the hub's program); it is not a reviewed generator.",
        ]);
    });

    it("the repo's hub holds exactly the reviewed generators, and the rule is mandatory in the pack", async () => {
        const generators = hub
            .filter((r) => /^random:|^tls:|^aws:iam\/accessKey:/.test(r.type))
            .map((r) => r.urn.split("::").slice(2).join("::"));
        expect(generators.sort()).toEqual([...HUB_REVIEWED_KEY_GENERATORS].sort());
        expect(allPolicies.find((p) => p.name === "aws-hub-no-key-generators")?.enforcementLevel).toBe("mandatory");
        // A spoke stack is not the hub: the rule does not judge it (other rules do).
        expect(await messages([awsHubNoKeyGenerators], sg1)).toEqual([]);
    });
});

describe("policy aws-eks-spoke-no-access-keys", () => {
    it("fails on an IAM access key or a credentials-file Secret in an EKS spoke", async () => {
        const withKey = [...sg1, res("aws:iam/accessKey:AccessKey", "legacy-key", { user: "u" })];
        expect(await messages([awsEksNoAccessKeys], withKey)).toEqual([
            "IAM access key legacy-key in an EKS spoke stack: EKS workloads get their role from EKS Pod Identity or IRSA, never a long-lived key.",
        ]);
        const withSecret = [
            ...sg1,
            res("kubernetes:core/v1:Secret", "auth-aws", {
                apiVersion: "v1",
                kind: "Secret",
                metadata: { name: "auth-aws" },
                stringData: { credentials: "[p]\naws_secret_access_key = x\n" },
            }),
        ];
        expect((await messages([awsEksNoAccessKeys], withSecret)).join("\n")).toMatch(
            /Secret auth-aws carries an AWS secret access key in an EKS spoke/,
        );
    });
    it("fails on the hub when an EKS spoke (role trusted by Pod Identity) also has an IAM user", async () => {
        const rs = [
            ...hub,
            res("aws:iam/user:User", "spoke-sg1-source", { name: "platform-spoke-sg1", tags: { "platform:spoke": "sg1" } }),
        ];
        expect(await messages([awsEksNoAccessKeys], rs)).toEqual([
            "IAM user spoke-sg1-source for EKS spoke sg1, whose role is trusted by EKS Pod Identity: an EKS spoke needs no user and no key.",
        ]);
    });
});

describe("policy aws-no-credentials-in-outputs", () => {
    it("fails when the hub exports spoke keys (what main did: spokeCredentials)", async () => {
        const rs = edit(
            hub,
            (r) => r.type === "pulumi:pulumi:Stack",
            (r) => {
                r.outputs = {
                    ...r.outputs,
                    spokeCredentials: { hn1: { accessKeyId: "AKIAABCDEFGHIJKLMNOP", secretAccessKey: "x".repeat(40) } },
                };
            },
        );
        expect(await messages([awsNoCredentialOutputs], rs)).toEqual([
            "stack output spokeCredentials.hn1.accessKeyId: an AWS access key id: outputs are readable by every StackReference; deliver credentials per consumer instead.",
            "stack output spokeCredentials.hn1.secretAccessKey: a credential field: outputs are readable by every StackReference; deliver credentials per consumer instead.",
        ]);
    });
    it("fails when the hub exports tenants' API keys (what main did: apiKeys), and knows the key format", async () => {
        const key = `${API_KEY_PREFIX}${"a1B2".repeat(API_KEY_RANDOM_LENGTH / 4)}`;
        const rs = edit(
            hub,
            (r) => r.type === "pulumi:pulumi:Stack",
            (r) => {
                r.outputs = { ...r.outputs, apiKeys: { "acme-search-prod": key } };
            },
        );
        expect(await messages([awsNoCredentialOutputs], rs)).toEqual([
            "stack output apiKeys.acme-search-prod: a platform API key: outputs are readable by every StackReference; deliver credentials per consumer instead.",
        ]);
        expect(findCredentials({ sha256: hashApiKey(key), note: `${API_KEY_PREFIX}short` })).toEqual([]);
    });
    it("finds private keys and session tokens anywhere, and nothing in ARNs or hashes", () => {
        expect(findCredentials({ a: [{ pem: "-----BEGIN PRIVATE KEY-----\nMII" }], sessionToken: "t" })).toEqual([
            "a[0].pem: a private key",
            "sessionToken: a credential field",
        ]);
        expect(findCredentials({ roleArn: "arn:aws:iam::123456789012:role/x", sha256: "0".repeat(64) })).toEqual([]);
    });
});

describe("policy aws-stateful-protected", () => {
    it("fails for each stateful resource without protect (the ledger cluster, a KMS key, the EKS cluster)", async () => {
        const unprotect = (rs: CapturedResource[], type: string) =>
            edit(
                rs,
                (r) => r.type === type,
                (r) => {
                    r.options = { protect: false, retainOnDelete: false, deleteBeforeReplace: false };
                },
            );
        expect((await messages([awsStatefulProtected], unprotect(hub, "aws:rds/cluster:Cluster"))).join("\n")).toMatch(
            /^aws:rds\/cluster:Cluster usage-ledger-db is not protected/,
        );
        expect(await messages([awsStatefulProtected], unprotect(hub, "aws:kms/key:Key"))).toHaveLength(3);
        expect(await messages([awsStatefulProtected], unprotect(sg1, "aws:eks/cluster:Cluster"))).toEqual([
            "aws:eks/cluster:Cluster eks-cluster is not protected: an ordinary `pulumi up` may delete or replace it (set protect: true and retainOnDelete: true).",
        ]);
    });
});

describe("policy aws-gpu-nodes-imds-hop-limit", () => {
    it("fails on hop limit 2 (main's value) or IMDSv1 on the GPU launch template, and on a GPU group without one", async () => {
        const hop2 = edit(
            sg1,
            (r) => r.name === "nodes-h200-lt",
            (r) =>
                both(r, (o) => {
                    o.metadataOptions.httpPutResponseHopLimit = 2;
                }),
        );
        expect(await messages([awsImdsHopLimit], hop2)).toEqual([
            "launch template nodes-h200-lt of GPU node group nodes-h200-ng: metadataOptions httpTokens=required, httpPutResponseHopLimit=2; need required and 1, or pods reach the node role through IMDS.",
        ]);
        const v1 = edit(
            sg1,
            (r) => r.name === "nodes-h200-lt",
            (r) =>
                both(r, (o) => {
                    o.metadataOptions.httpTokens = "optional";
                }),
        );
        expect((await messages([awsImdsHopLimit], v1)).join("\n")).toMatch(/httpTokens=optional/);
        const noLt = edit(
            sg1,
            (r) => r.name === "nodes-h200-ng",
            (r) =>
                both(r, (o) => {
                    delete o.launchTemplate;
                }),
        );
        expect(await messages([awsImdsHopLimit], noLt)).toEqual([
            "GPU node group nodes-h200-ng has no launch template: EKS's default sets IMDS hop limit 2, so pods can take the node role.",
        ]);
    });
});

describe("policy aws-rds-force-ssl", () => {
    it("fails without rds.force_ssl=1 or with a master password in the program", async () => {
        const off = edit(
            hub,
            (r) => r.type === "aws:rds/clusterParameterGroup:ClusterParameterGroup",
            (r) =>
                both(r, (o) => {
                    o.parameters = [{ name: "rds.force_ssl", value: "0" }];
                }),
        );
        expect(await messages([awsRdsForceSsl], off)).toEqual([
            "Aurora cluster usage-ledger-db: parameter group usage-ledger-db-params does not set rds.force_ssl=1; plaintext connections are accepted.",
        ]);
        const noGroup = edit(
            hub,
            (r) => r.type === "aws:rds/cluster:Cluster",
            (r) =>
                both(r, (o) => {
                    delete o.dbClusterParameterGroupName;
                }),
        );
        expect((await messages([awsRdsForceSsl], noGroup)).join("\n")).toMatch(/no cluster parameter group of this stack is attached/);
        const password = edit(
            hub,
            (r) => r.type === "aws:rds/cluster:Cluster",
            (r) =>
                both(r, (o) => {
                    o.masterPassword = "p";
                    delete o.manageMasterUserPassword;
                }),
        );
        expect(await messages([awsRdsForceSsl], password)).toEqual([
            "Aurora cluster usage-ledger-db: the master password is not managed by RDS (set manageMasterUserPassword: true, no masterPassword).",
        ]);
    });
});
