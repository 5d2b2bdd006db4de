import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { parseFlatStackConfig } from "../config/stack";
import { MOCK_ACCOUNT_ID } from "../tools/mock-outputs";
import { flatConfig, runRepoStack, stackConfigDoc } from "./helpers";

const NOW = new Date("2026-12-01T00:00:00Z");
function hubIssues(mutate: (d: Record<string, any>) => void): string[] {
    const doc = structuredClone(stackConfigDoc("hub-prod"));
    mutate(doc);
    try {
        parseFlatStackConfig(flatConfig(doc), "stacks/Pulumi.hub-prod.yaml", [], { now: NOW });
    } catch (e) {
        if (e instanceof ConfigError) return e.issues.map((i) => `${i.key}: ${i.message}`);
        throw e;
    }
    return [];
}

describe("hub file: AWS identities and key delivery are named, never assumed", () => {
    it("the repo's hub file passes", () => {
        expect(hubIssues(() => undefined)).toEqual([]);
    });

    it("an access-key slot without egress ranges, or with a range that is not a CIDR, is refused (main accepted both)", () => {
        expect(
            hubIssues((d) => {
                delete d["platform:spokeIdentities"].hcm1.egressCidrs;
            }),
        ).toEqual([expect.stringMatching(/^platform:spokeIdentities\.hcm1\.egressCidrs: /)]);
        expect(
            hubIssues((d) => {
                d["platform:spokeIdentities"].hn1.egressCidrs = ["198.51.100.0/33"];
            }),
        ).toEqual(["platform:spokeIdentities.hn1.egressCidrs[0]: must be an IPv4 CIDR like 198.51.100.0/28"]);
    });

    it("one spoke's credentials never serve another: a shared deployer role, or a shared CN under one CA, is refused", () => {
        // hcm1 naming hn1's deployer role (explicit ARN), or the role hn1 gets by default (same role name)
        const shared =
            "platform:spokeIdentities.hcm1.deployerRoleArn: role platform-spoke-deployer-hn1 is also spoke \"hn1\"'s deployer role: it could read both spokes' key secrets and act as either; give each spoke its own";
        expect(
            hubIssues((d) => {
                d["platform:spokeIdentities"].hcm1.deployerRoleArn = d["platform:spokeIdentities"].hn1.deployerRoleArn;
            }),
        ).toEqual([shared]);
        expect(
            hubIssues((d) => {
                delete d["platform:spokeIdentities"].hn1.deployerRoleArn;
                d["platform:spokeIdentities"].hcm1.deployerRoleArn = "arn:aws:iam::111122223333:role/platform-spoke-deployer-hn1";
            }),
        ).toEqual([shared]);
        const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        const ra = (cn?: string, bundle = ca) => ({ mode: "roles-anywhere", caBundle: bundle, ...(cn ? { certificateCn: cn } : {}) });
        expect(
            hubIssues((d) => {
                d["platform:spokeIdentities"].hn1 = ra("site-a");
                d["platform:spokeIdentities"].hcm1 = ra("site-a");
            }),
        ).toEqual([
            'platform:spokeIdentities.hcm1.certificateCn: "site-a" under the same CA bundle is also spoke "hn1"\'s certificate CN: one site\'s certificate would pass the other\'s trust anchor; give each spoke its own CN',
        ]);
        // distinct CNs (the defaults name the spoke), or the same CN under different CAs, are fine
        expect(
            hubIssues((d) => {
                d["platform:spokeIdentities"].hn1 = ra();
                d["platform:spokeIdentities"].hcm1 = ra();
            }),
        ).toEqual([]);
        expect(
            hubIssues((d) => {
                d["platform:spokeIdentities"].hn1 = ra("site-a");
                d["platform:spokeIdentities"].hcm1 = ra("site-a", ca.replace("MIIB", "MIIC"));
            }),
        ).toEqual([]);
    });

    it("the hub deployers and every tenant's key readers are named (no 'whoever ran the last up', no key in an output)", () => {
        expect(
            hubIssues((d) => {
                delete d["platform:hubDeployers"];
            }),
        ).toEqual([expect.stringMatching(/^platform:hubDeployers: /)]);
        expect(
            hubIssues((d) => {
                delete d["platform:tenantKeys"].readers.globex;
            }),
        ).toEqual([
            'platform:tenantKeys.readers: tenant "globex" has API keys but no readers: name the roles that may read platform/tenants/globex/api-keys',
        ]);
        expect(
            hubIssues((d) => {
                d["platform:tenantKeys"].readers.initech = ["arn:aws:iam::111122223333:role/x"];
            }),
        ).toEqual([expect.stringMatching(/^platform:tenantKeys\.readers\.initech: unknown tenant "initech"/)]);
    });
});

describe("hub: an EKS spoke's Pod Identity account", () => {
    it("another account than the hub's is refused before anything is created, naming the file and key (main made the roles in the hub's account)", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:spokeIdentities"] = { ...doc["platform:spokeIdentities"], sg1: { mode: "pod-identity", accountId: "444455556666" } };
        await expect(runRepoStack("hub-prod", { config: flatConfig(doc) })).rejects.toThrow(
            `stacks/Pulumi.hub-prod.yaml: platform:spokeIdentities.sg1.accountId: 444455556666 is not the hub's account ${MOCK_ACCOUNT_ID}`,
        );
    }, 60_000);

    it("the hub's own account, named explicitly, is accepted", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:spokeIdentities"] = { ...doc["platform:spokeIdentities"], sg1: { mode: "pod-identity", accountId: MOCK_ACCOUNT_ID } };
        const hub = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        const trust = JSON.parse(String(hub.resources.find((r) => r.name === "spoke-sg1-auth-role")!.inputs.assumeRolePolicy));
        expect(trust.Statement[0].Condition.StringEquals["aws:SourceAccount"]).toBe(MOCK_ACCOUNT_ID);
    }, 120_000);
});

describe("hub: an on-prem spoke's identity is written down, never defaulted", () => {
    it("an on-prem spoke without platform:spokeIdentities.<spoke> is refused before anything is created (main gave it a key usable from anywhere)", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        delete doc["platform:spokeIdentities"].hcm1;
        // a ConfigError: the render prints it headed by the file, without a stack trace
        await expect(runRepoStack("hub-prod", { config: flatConfig(doc) })).rejects.toMatchObject({
            name: "ConfigError",
            stackFile: "stacks/Pulumi.hub-prod.yaml",
            issues: [
                expect.objectContaining({
                    key: "platform:spokeIdentities.hcm1",
                    message: expect.stringContaining("on-prem spoke hcm1 has no identity"),
                }),
            ],
        });
    }, 60_000);
});
