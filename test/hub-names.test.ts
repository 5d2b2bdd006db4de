/**
 * Two hubs in one AWS account: the physical names of what the hub's spoke identities create (IAM roles, Roles
 * Anywhere trust anchors and profiles) carry the hub's stack name, so a second hub (staging beside production) never
 * collides with the first. Rendered twice from one hub file under two stack names and compared.
 */
import { describe, expect, it } from "vitest";
import { runStack } from "../tools/harness";
import { unwrapWire } from "../tools/wire";
import { flatConfig, repoProgram, stackConfigDoc } from "./helpers";

/** The hub file rendered as stack `stack` (one of its on-prem spokes on Roles Anywhere, so every identity mode is there). */
async function renderHubAs(stack: string) {
    const doc = structuredClone(stackConfigDoc("hub-prod"));
    doc["platform:spokeIdentities"].hcm1 = {
        mode: "roles-anywhere",
        caBundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        egressCidrs: ["192.0.2.0/28"],
    };
    const prev = process.env.PLATFORM_STACK_FILE;
    process.env.PLATFORM_STACK_FILE = "stacks/Pulumi.hub-prod.yaml";
    try {
        return await runStack({ project: "platform", stack, config: flatConfig(doc), program: repoProgram });
    } finally {
        if (prev === undefined) delete process.env.PLATFORM_STACK_FILE;
        else process.env.PLATFORM_STACK_FILE = prev;
    }
}

const IDENTITY_TYPES = ["aws:iam/role:Role", "aws:rolesanywhere/trustAnchor:TrustAnchor", "aws:rolesanywhere/profile:Profile"];

describe("two hubs in one account", () => {
    it("the spoke identities' roles, trust anchors and profiles have different physical names per hub", async () => {
        const names = async (stack: string) =>
            (await renderHubAs(stack)).resources
                .filter((r) => r.urn.includes("platform:hub:SpokeIdentity$") && IDENTITY_TYPES.includes(r.type))
                .map((r) => `${r.type} ${(unwrapWire(r.outputs) as { name: string }).name}`);
        const prod = await names("hub-prod");
        const staging = await names("hub-staging");
        // Every spoke's two roles, hcm1's trust anchor and profile.
        expect(prod.filter((n) => n.startsWith("aws:iam/role:Role"))).toHaveLength(6);
        expect(prod.filter((n) => n.startsWith("aws:rolesanywhere/"))).toHaveLength(2);
        expect(prod.filter((n) => staging.includes(n))).toEqual([]);
        for (const n of staging) expect(n).toMatch(/ hub-staging-/);
    }, 240_000);
});
