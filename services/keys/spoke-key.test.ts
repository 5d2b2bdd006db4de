import { IAMClient } from "@aws-sdk/client-iam";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySecretName, sourceUserName } from "../shared/spoke-key-slot";
import { mintSpokeAccessKey, retireSpokeAccessKey } from "./spoke-key";
import { type IamStandIn, startIam } from "./testing/iam";
import { type SecretsManagerStandIn, startSecretsManager } from "./testing/secrets-manager";

/**
 * The on-prem source-key minting path against local IAM and Secrets Manager stand-ins speaking the SDK's wire
 * protocols (services/keys/testing), with the real SDK v3 clients pointed at them.
 */
describe("minting on-prem spokes' source keys outside Pulumi", () => {
    let iam: IamStandIn;
    let sm: SecretsManagerStandIn;
    let iamClient: IAMClient;
    let smClient: SecretsManagerClient;
    const credentials = { accessKeyId: "AKIAHUBDEPLOYER00001", secretAccessKey: "x".repeat(40) };
    beforeAll(async () => {
        iam = await startIam();
        sm = await startSecretsManager();
        iamClient = new IAMClient({ endpoint: iam.endpoint, region: "us-east-1", credentials });
        smClient = new SecretsManagerClient({ endpoint: sm.endpoint, region: "ap-southeast-1", credentials });
    });
    afterAll(async () => {
        iamClient.destroy();
        smClient.destroy();
        await iam.close();
        await sm.close();
    });
    const slot = (spoke: string, id: string) => {
        iam.createUser(sourceUserName(spoke, id));
        sm.createSecret(keySecretName(spoke, id));
    };

    it("creates the slot user's key and writes the pair only to the slot's secret; returns only the key id", async () => {
        slot("hn1", "k1");
        const m = await mintSpokeAccessKey(iamClient, smClient, "hn1", "k1");
        const keys = iam.keys(sourceUserName("hn1", "k1"))!;
        expect([...keys.keys()]).toEqual([m.accessKeyId]);
        const secret = keys.get(m.accessKeyId)!;
        expect(JSON.parse(sm.current(keySecretName("hn1", "k1"))!)).toEqual({ accessKeyId: m.accessKeyId, secretAccessKey: secret });
        expect(JSON.stringify(m)).not.toContain(secret);
        expect(m.versionId).toBeTruthy();
        // The secret access key crossed the wire only from IAM to the tool and from the tool to that secret, signed by the
        // minting principal.
        const carrying = sm.requests.filter((r) => JSON.stringify(r.body).includes(secret));
        expect(carrying.map((r) => [r.operation, r.body.SecretId, r.accessKeyId])).toEqual([
            ["PutSecretValue", keySecretName("hn1", "k1"), credentials.accessKeyId],
        ]);
        expect(iam.requests.filter((r) => r.operation === "CreateAccessKey").map((r) => r.accessKeyId)).toEqual([credentials.accessKeyId]);
    });

    it("a hub with platform:namePrefix mints into its own slot user and secret, never the default hub's of the same spoke and slot", async () => {
        expect(sourceUserName("hn9", "k1")).toBe("platform-spoke-hn9-k1");
        expect(keySecretName("hn9", "k1")).toBe("platform/spokes/hn9/source-key/k1");
        slot("hn9", "k1");
        iam.createUser(sourceUserName("hn9", "k1", "staging"));
        sm.createSecret(keySecretName("hn9", "k1", "staging"));
        const m = await mintSpokeAccessKey(iamClient, smClient, "hn9", "k1", "staging");
        expect([...iam.keys("staging-spoke-hn9-k1")!.keys()]).toEqual([m.accessKeyId]);
        expect(JSON.parse(sm.current("staging/spokes/hn9/source-key/k1")!).accessKeyId).toBe(m.accessKeyId);
        expect(iam.keys(sourceUserName("hn9", "k1"))!.size).toBe(0);
        expect(sm.current(keySecretName("hn9", "k1"))).toBeUndefined();
        expect(await retireSpokeAccessKey(iamClient, "hn9", "k1", "staging")).toEqual([m.accessKeyId]);
    });

    it("a slot holds one key: a second mint is refused until the first is retired; retiring deletes it", async () => {
        slot("hn2", "k1");
        const first = await mintSpokeAccessKey(iamClient, smClient, "hn2", "k1");
        await expect(mintSpokeAccessKey(iamClient, smClient, "hn2", "k1")).rejects.toThrow(
            new RegExp(`already has access key ${first.accessKeyId}.*--retire`),
        );
        expect([...iam.keys(sourceUserName("hn2", "k1"))!.keys()]).toEqual([first.accessKeyId]);
        expect(await retireSpokeAccessKey(iamClient, "hn2", "k1")).toEqual([first.accessKeyId]);
        expect(iam.keys(sourceUserName("hn2", "k1"))!.size).toBe(0);
        await expect(retireSpokeAccessKey(iamClient, "hn2", "k1")).rejects.toThrow(/has no access key to retire/);
        const second = await mintSpokeAccessKey(iamClient, smClient, "hn2", "k1");
        expect(second.accessKeyId).not.toBe(first.accessKeyId);
        expect(JSON.parse(sm.current(keySecretName("hn2", "k1"))!).accessKeyId).toBe(second.accessKeyId);
    });

    it("rotation across slots: the new slot's key works beside the old one until the old is retired", async () => {
        slot("hn3", "k1");
        slot("hn3", "k2");
        const old = await mintSpokeAccessKey(iamClient, smClient, "hn3", "k1");
        const fresh = await mintSpokeAccessKey(iamClient, smClient, "hn3", "k2");
        expect(iam.keys(sourceUserName("hn3", "k1"))!.has(old.accessKeyId)).toBe(true);
        expect(await retireSpokeAccessKey(iamClient, "hn3", "k1")).toEqual([old.accessKeyId]);
        expect([...iam.keys(sourceUserName("hn3", "k2"))!.keys()]).toEqual([fresh.accessKeyId]);
    });

    it("nothing half-applied: when the secret cannot be written the new key is deleted again", async () => {
        slot("hn4", "k1");
        sm.failNext("PutSecretValue");
        await expect(mintSpokeAccessKey(iamClient, smClient, "hn4", "k1")).rejects.toThrow(/cannot write the key.*was deleted again/);
        expect(iam.keys(sourceUserName("hn4", "k1"))!.size).toBe(0);
        expect(sm.current(keySecretName("hn4", "k1"))).toBeUndefined();
    });

    it("a slot the hub has not created: a clear error, no key created", async () => {
        await expect(mintSpokeAccessKey(iamClient, smClient, "nowhere", "k1")).rejects.toThrow(
            /platform\/spokes\/nowhere\/source-key\/k1 does not exist: .*apply the hub first/,
        );
        sm.createSecret(keySecretName("nouser", "k1"));
        await expect(mintSpokeAccessKey(iamClient, smClient, "nouser", "k1")).rejects.toThrow(
            /IAM user platform-spoke-nouser-k1 does not exist/,
        );
        expect(iam.requests.filter((r) => r.operation === "CreateAccessKey" && r.params.UserName.includes("no"))).toEqual([]);
    });
});
