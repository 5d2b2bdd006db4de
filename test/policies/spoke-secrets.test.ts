import { describe, expect, it } from "vitest";
import { allPolicies } from "../../policies/policies";
import { INSTALLED_SPOKE_SECRETS, spokeNoKeyGenerators } from "../../policies/spoke-secrets";
import { generateSpokeSecrets, spokeSecretsManifest } from "../../services/keys/spoke-secrets-install";
import { CACHE_SALT_SECRET, COUNTER_STORE_SECRET } from "../../services/shared/spoke-secrets";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";
import { res } from "./rdma-fixtures";

// Compliant inputs are the repo's own spokes (on-prem and EKS); each violating input is a spoke with one generator, or
// one Pulumi-managed copy of an installed Secret, added.
const messages = async (rs: CapturedResource[]) => (await runPolicies([spokeNoKeyGenerators], rs)).mandatory.map((f) => f.message);
const inSpoke = (r: CapturedResource, qualified: string): CapturedResource => ({
    ...r,
    urn: `urn:pulumi:spoke-hn1::platform::${qualified}::${r.name}`,
});

describe("policy spoke-no-key-generators", () => {
    it("passes every shipped spoke, judges no hub, and is mandatory in the pack", async () => {
        for (const s of ["spoke-hn1", "spoke-hcm1", "spoke-sg1"]) {
            const { hub, spoke } = await runHubAndSpoke(s);
            expect(await messages(spoke.resources), s).toEqual([]);
            // The hub's reviewed generators (ledger passwords, signing seed) are aws-hub-no-key-generators' business.
            expect(await messages(hub.resources)).toEqual([]);
        }
        expect(allPolicies.find((p) => p.name === "spoke-no-key-generators")?.enforcementLevel).toBe("mandatory");
        // The pack protects exactly the Secrets the operator command installs (npm run mint-key -- install-spoke-secrets).
        const installed = (
            JSON.parse(spokeSecretsManifest("spoke-hn1", generateSpokeSecrets())) as { items: { metadata: { name: string } }[] }
        ).items.map((i) => i.metadata.name);
        expect(new Set(INSTALLED_SPOKE_SECRETS)).toEqual(new Set(installed));
    });

    it("refuses the former generators, any random:/tls: resource or AWS key, and a managed copy of an installed Secret", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1");
        const added = [
            inSpoke(
                res("random:index/randomPassword:RandomPassword", "agent-router-counters-password", { length: 40 }),
                "platform:spoke:AgentRouter$platform:spoke:CounterStore$random:index/randomPassword:RandomPassword",
            ),
            inSpoke(
                res("random:index/randomBytes:RandomBytes", "agent-router-auth-cache-salt-key", { length: 32 }),
                "platform:spoke:AuthService$random:index/randomBytes:RandomBytes",
            ),
            inSpoke(res("tls:index/privateKey:PrivateKey", "edge", { algorithm: "ED25519" }), "tls:index/privateKey:PrivateKey"),
            inSpoke(res("aws:iam/accessKey:AccessKey", "k", { user: "u" }), "aws:iam/accessKey:AccessKey"),
            ...[COUNTER_STORE_SECRET.name, CACHE_SALT_SECRET.name].map((name) =>
                inSpoke(
                    res("kubernetes:core/v1:Secret", `copy-${name}`, {
                        apiVersion: "v1",
                        kind: "Secret",
                        metadata: { name, namespace: "llm-gateway" },
                        stringData: { x: "y" },
                    }),
                    "kubernetes:core/v1:Secret",
                ),
            ),
        ];
        const m = await messages([...spoke.resources, ...added]);
        expect(m).toHaveLength(6);
        expect(m.slice(0, 4).map((x) => x.split(" in a spoke stack")[0])).toEqual([
            "random:index/randomPassword:RandomPassword agent-router-counters-password",
            "random:index/randomBytes:RandomBytes agent-router-auth-cache-salt-key",
            "tls:index/privateKey:PrivateKey edge",
            "aws:iam/accessKey:AccessKey k",
        ]);
        expect(m[4]).toMatch(new RegExp(`^Kubernetes Secret ${COUNTER_STORE_SECRET.name} .*install-spoke-secrets`));
        expect(m[5]).toMatch(new RegExp(`^Kubernetes Secret ${CACHE_SALT_SECRET.name} `));
    });
});
