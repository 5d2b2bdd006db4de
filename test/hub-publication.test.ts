/**
 * The hub's signed publication (lib/hub-publication.ts), by running its signer and verifier: the signed bytes carry a
 * domain tag and a serial, so neither a signature made for something else with the same key nor an older
 * publication passes where the spoke knows a newer one.
 */
import { randomBytes, sign } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
    nextPublicationSerial,
    PUBLICATION_DOMAIN,
    publicationBody,
    signHubPublication,
    verifyHubPublication,
} from "../lib/hub-publication";
import { canonicalJson } from "../services/shared/canonical";
import { privateKeyFromSeed } from "../services/shared/bundle";

const OUT = { spokeContracts: { sg1: { hub: "hub-prod" } }, spokeNetworks: {} };

describe("hub publication", () => {
    it("verifies only under a pinned key; two pins (a rotation) take either", () => {
        const seed = randomBytes(32);
        const doc = { ...OUT, publication: signHubPublication(seed, "hub-prod", OUT, 3) };
        const keyId = doc.publication.keyId;
        expect(verifyHubPublication(doc, "hub-prod", [keyId])).toEqual({ outputs: doc, serial: 3 });
        expect(verifyHubPublication(doc, "hub-prod", ["0123456789abcdef", keyId]).serial).toBe(3);
        expect(() => verifyHubPublication(doc, "hub-prod", ["0123456789abcdef"])).toThrow(/not a hub key the stack file pins/);
    });

    it("the signature covers the domain tag: the same key's signature over the bare body does not verify", () => {
        const seed = randomBytes(32);
        const pub = signHubPublication(seed, "hub-prod", OUT, 1);
        const bare = sign(null, Buffer.from(canonicalJson(publicationBody("hub-prod", 1, OUT))), privateKeyFromSeed(seed)).toString(
            "base64",
        );
        expect(PUBLICATION_DOMAIN).toBe("hub-publication/v1\n");
        expect(() => verifyHubPublication({ ...OUT, publication: { ...pub, signature: bare } }, "hub-prod", [pub.keyId])).toThrow(
            /signature does not verify/,
        );
    });

    it("the serial is signed and checked against the spoke's last one", () => {
        const seed = randomBytes(32);
        const pub = signHubPublication(seed, "hub-prod", OUT, 2);
        const doc = { ...OUT, publication: pub };
        expect(verifyHubPublication(doc, "hub-prod", [pub.keyId], 2).serial).toBe(2);
        expect(() => verifyHubPublication(doc, "hub-prod", [pub.keyId], 3)).toThrow(/is publication 2, older than publication 3/);
        // A serial raised without re-signing.
        expect(() => verifyHubPublication({ ...OUT, publication: { ...pub, serial: 9 } }, "hub-prod", [pub.keyId], 3)).toThrow(
            /does not match its digest/,
        );
        // An older release's publication (no serial, no domain tag).
        expect(() => verifyHubPublication({ ...OUT, publication: { ...pub, schemaVersion: 1 } }, "hub-prod", [pub.keyId])).toThrow(
            /older hub release/,
        );
    });

    it("the hub's next serial: 1 first, the same while the outputs are unchanged, one more when they change", () => {
        const seed = randomBytes(32);
        expect(nextPublicationSerial(undefined, "hub-prod", OUT)).toBe(1);
        const p = signHubPublication(seed, "hub-prod", OUT, 4);
        expect(nextPublicationSerial(p, "hub-prod", OUT)).toBe(4);
        expect(nextPublicationSerial(p, "hub-prod", { ...OUT, spokeNetworks: { sg1: [] } })).toBe(5);
    });
});
