import { createPublicKey, sign, verify } from "node:crypto";
import { canonicalJson, contentHash } from "../services/shared/canonical";
import { keyIdOf, privateKeyFromSeed, publicKeyFromSeed } from "../services/shared/bundle";

/**
 * The hub's published outputs (hub -> spoke): what every spoke program reads of its hub, signed by the hub.
 *
 * After each hub `up`, .github/workflows/up.yml saves `pulumi stack output --json` of the hub (no secret output) to
 * `vars.HUB_OUTPUTS_S3_URI` + `<hub>.json`; spoke previews and spoke `up`s read that file (`PLATFORM_HUB_OUTPUTS`,
 * programs/spoke.ts) instead of a StackReference, which would open the hub's state, readable only by the hub deployers
 * (lib/ci-roles.ts). The hub signs {@link PUBLISHED_OUTPUTS} with its Ed25519 policy signing key
 * (components/hub/PolicyStore.ts, the key spokes already verify every bundle with) and exports the signature as its
 * `publication` output, so a spoke refuses a file that was edited, truncated, mixed from two hubs or signed by another
 * key than the one its stack file pins (`platform:spoke.hubKeyId`).
 */
export const PUBLISHED_OUTPUTS = ["spokeContracts", "spokeNetworks"] as const;
/** The hub output carrying the {@link HubPublication}. */
export const PUBLICATION_OUTPUT = "publication";

/** The `publication` output of a hub. */
export interface HubPublication {
    schemaVersion: 1;
    /** The hub's stack name (`hub-prod`). */
    hub: string;
    /** Raw Ed25519 public key, base64 (the policy signing key). */
    publicKey: string;
    /** `keyIdOf(publicKey)`: what a spoke file pins. */
    keyId: string;
    /** Hex SHA-256 of the canonical JSON of the signed body ({@link publicationBody}). */
    sha256: string;
    /** Base64 Ed25519 signature over the canonical JSON of the signed body. */
    signature: string;
}

/** Pure: the signed body: the hub's name and exactly {@link PUBLISHED_OUTPUTS}, as JSON round-trips them. */
export function publicationBody(hub: string, outputs: Record<string, unknown>): unknown {
    const picked = Object.fromEntries(PUBLISHED_OUTPUTS.map((k) => [k, outputs[k] ?? null]));
    // Normalised as `pulumi stack output --json` prints it (undefined members dropped).
    return JSON.parse(canonicalJson({ hub, outputs: picked }));
}

/** Pure and deterministic (Ed25519, RFC 8032): the publication for `outputs`, signed with the hub's 32-byte seed. */
export function signHubPublication(seed: Buffer, hub: string, outputs: Record<string, unknown>): HubPublication {
    const body = publicationBody(hub, outputs);
    const publicKey = publicKeyFromSeed(seed);
    return {
        schemaVersion: 1,
        hub,
        publicKey,
        keyId: keyIdOf(publicKey),
        sha256: contentHash(body),
        signature: sign(null, Buffer.from(canonicalJson(body)), privateKeyFromSeed(seed)).toString("base64"),
    };
}

const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

/**
 * Verifies a published outputs file (`pulumi stack output --json` of the hub) and returns its outputs.
 * @param expectedHub the hub stack the spoke names (`platform:spoke.hubStack`'s last segment)
 * @param pinnedKeyId the key id the spoke file pins, when it does
 * @throws Error saying what does not hold: no `publication`, another hub, another key than the pinned one, a digest
 * or signature that does not match the published outputs
 */
export function verifyHubPublication(doc: unknown, expectedHub: string, pinnedKeyId?: string): Record<string, unknown> {
    if (!doc || typeof doc !== "object" || Array.isArray(doc)) throw new Error("is not a JSON object of hub outputs");
    const outputs = doc as Record<string, unknown>;
    const p = outputs[PUBLICATION_OUTPUT] as Partial<HubPublication> | undefined;
    if (!p || typeof p !== "object")
        throw new Error(
            `has no "${PUBLICATION_OUTPUT}" output: it was not published by a hub that signs its outputs (run the hub's up first)`,
        );
    if (p.schemaVersion !== 1 || typeof p.publicKey !== "string" || typeof p.signature !== "string" || typeof p.sha256 !== "string")
        throw new Error(`its "${PUBLICATION_OUTPUT}" output is malformed`);
    if (p.hub !== expectedHub) throw new Error(`is hub "${p.hub}"'s publication, not "${expectedHub}"'s`);
    const raw = Buffer.from(p.publicKey, "base64");
    if (raw.length !== 32) throw new Error("its publication key is not an Ed25519 public key");
    if (keyIdOf(p.publicKey) !== p.keyId) throw new Error(`its publication key id ${p.keyId} is not its key's (${keyIdOf(p.publicKey)})`);
    if (pinnedKeyId !== undefined && p.keyId !== pinnedKeyId)
        throw new Error(`is signed by key ${p.keyId}, not the hub key ${pinnedKeyId} the stack file pins (platform:spoke.hubKeyId)`);
    const body = publicationBody(expectedHub, outputs);
    if (contentHash(body) !== p.sha256)
        throw new Error("does not match its digest: the published outputs were changed after the hub signed them");
    const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: "der", type: "spki" });
    if (!verify(null, Buffer.from(canonicalJson(body)), key, Buffer.from(p.signature, "base64")))
        throw new Error(`its signature does not verify with key ${p.keyId}`);
    return outputs;
}
