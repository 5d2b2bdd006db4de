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
 * `publication` output, so a spoke refuses a file that was edited, truncated, mixed from two hubs, signed by another
 * key than one its stack file pins (`platform:spoke.hubKeyIds`), or older than the one it last deployed from (the
 * signed `serial`).
 */
export const PUBLISHED_OUTPUTS = ["spokeContracts", "spokeNetworks"] as const;
/** The hub output carrying the {@link HubPublication}. */
export const PUBLICATION_OUTPUT = "publication";

/**
 * Domain tag prefixed to the signed bytes: a publication signature can never be taken for a bundle signature made with
 * the same key (services/shared/bundle.ts signs bundles' canonical JSON), nor for another version of this format.
 */
export const PUBLICATION_DOMAIN = "hub-publication/v1\n";

/** The `publication` output of a hub. */
export interface HubPublication {
    schemaVersion: 2;
    /** The hub's stack name (`hub-prod`). */
    hub: string;
    /**
     * Monotonic publication serial, signed: the hub's previous `publication.serial` plus one whenever the published
     * outputs change (the same serial while they do not), 1 for a hub's first. A spoke refuses a serial lower than the
     * one it last deployed from (its `hubPublicationSerial` output), so an older, validly signed file cannot be replayed.
     */
    serial: number;
    /** Raw Ed25519 public key, base64 (the policy signing key). */
    publicKey: string;
    /** `keyIdOf(publicKey)`: what a spoke file pins (`platform:spoke.hubKeyIds`). */
    keyId: string;
    /** Hex SHA-256 of the canonical JSON of the published outputs alone ({@link outputsDigest}): decides the serial. */
    outputsSha256: string;
    /** Hex SHA-256 of the canonical JSON of the signed body ({@link publicationBody}). */
    sha256: string;
    /** Base64 Ed25519 signature over {@link PUBLICATION_DOMAIN} followed by the canonical JSON of the signed body. */
    signature: string;
}

const pick = (outputs: Record<string, unknown>) => Object.fromEntries(PUBLISHED_OUTPUTS.map((k) => [k, outputs[k] ?? null]));

/** Pure: the signed body: the hub's name, the serial and exactly {@link PUBLISHED_OUTPUTS}, as JSON round-trips them. */
export function publicationBody(hub: string, serial: number, outputs: Record<string, unknown>): unknown {
    // Normalised as `pulumi stack output --json` prints it (undefined members dropped).
    return JSON.parse(canonicalJson({ hub, serial, outputs: pick(outputs) }));
}

/** Pure: hex SHA-256 of the hub's name and its published outputs (no serial): what decides whether the serial moves. */
export function outputsDigest(hub: string, outputs: Record<string, unknown>): string {
    return contentHash(JSON.parse(canonicalJson({ hub, outputs: pick(outputs) })));
}

/**
 * Pure: the serial of this publication given the hub's previous `publication` output (undefined for a first `up`, or
 * one of an older format): the same when the published outputs did not change, else one more.
 */
export function nextPublicationSerial(previous: unknown, hub: string, outputs: Record<string, unknown>): number {
    const p = previous as Partial<HubPublication> | undefined;
    const prevSerial = p && Number.isSafeInteger(p.serial) && (p.serial as number) > 0 ? (p.serial as number) : 0;
    if (prevSerial && p?.outputsSha256 === outputsDigest(hub, outputs)) return prevSerial;
    return prevSerial + 1;
}

/**
 * Pure and deterministic (Ed25519, RFC 8032): the publication for `outputs`, signed with the hub's 32-byte seed.
 * @param serial the publication serial ({@link nextPublicationSerial}), a positive safe integer
 * @throws Error when `serial` is not a positive safe integer, or the seed is not 32 bytes
 *   (services/shared/bundle.ts `privateKeyFromSeed`)
 */
export function signHubPublication(seed: Buffer, hub: string, outputs: Record<string, unknown>, serial = 1): HubPublication {
    if (!Number.isSafeInteger(serial) || serial < 1) throw new Error(`publication serial ${serial} is not a positive integer`);
    const body = publicationBody(hub, serial, outputs);
    const publicKey = publicKeyFromSeed(seed);
    return {
        schemaVersion: 2,
        hub,
        serial,
        publicKey,
        keyId: keyIdOf(publicKey),
        outputsSha256: outputsDigest(hub, outputs),
        sha256: contentHash(body),
        signature: sign(null, Buffer.from(PUBLICATION_DOMAIN + canonicalJson(body)), privateKeyFromSeed(seed)).toString("base64"),
    };
}

const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

/**
 * Verifies a published outputs file (`pulumi stack output --json` of the hub) and returns its outputs and serial.
 * @param expectedHub the hub stack the spoke names (`platform:spoke.hubStack`'s last segment)
 * @param pinnedKeyIds the key ids the spoke file pins (`platform:spoke.hubKeyIds`; two during a rotation); undefined
 *   only in an offline render (programs/spoke.ts requires them for every real run)
 * @param minSerial the serial the spoke last deployed from, when known: an older publication is refused
 * @throws Error saying what does not hold: no `publication`, another hub, another key than a pinned one, a digest
 * or signature that does not match the published outputs, a serial older than `minSerial`
 */
export function verifyHubPublication(
    doc: unknown,
    expectedHub: string,
    pinnedKeyIds?: readonly string[],
    minSerial?: number,
): { outputs: Record<string, unknown>; serial: number } {
    if (!doc || typeof doc !== "object" || Array.isArray(doc)) throw new Error("is not a JSON object of hub outputs");
    const outputs = doc as Record<string, unknown>;
    const p = outputs[PUBLICATION_OUTPUT] as Partial<HubPublication> | undefined;
    if (!p || typeof p !== "object")
        throw new Error(
            `has no "${PUBLICATION_OUTPUT}" output: it was not published by a hub that signs its outputs (run the hub's up first)`,
        );
    if ((p.schemaVersion as number) === 1)
        throw new Error(`its "${PUBLICATION_OUTPUT}" output is of an older hub release: run the hub's up first`);
    if (
        p.schemaVersion !== 2 ||
        typeof p.publicKey !== "string" ||
        typeof p.signature !== "string" ||
        typeof p.sha256 !== "string" ||
        !Number.isSafeInteger(p.serial) ||
        (p.serial as number) < 1
    )
        throw new Error(`its "${PUBLICATION_OUTPUT}" output is malformed`);
    const serial = p.serial as number;
    if (p.hub !== expectedHub) throw new Error(`is hub "${p.hub}"'s publication, not "${expectedHub}"'s`);
    const raw = Buffer.from(p.publicKey, "base64");
    if (raw.length !== 32) throw new Error("its publication key is not an Ed25519 public key");
    if (keyIdOf(p.publicKey) !== p.keyId) throw new Error(`its publication key id ${p.keyId} is not its key's (${keyIdOf(p.publicKey)})`);
    if (pinnedKeyIds !== undefined && !pinnedKeyIds.includes(p.keyId))
        throw new Error(
            `is signed by key ${p.keyId}, not a hub key the stack file pins (platform:spoke.hubKeyIds: ${pinnedKeyIds.join(", ")})`,
        );
    const body = publicationBody(expectedHub, serial, outputs);
    if (contentHash(body) !== p.sha256 || p.outputsSha256 !== outputsDigest(expectedHub, outputs))
        throw new Error("does not match its digest: the published outputs were changed after the hub signed them");
    const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: "der", type: "spki" });
    if (!verify(null, Buffer.from(PUBLICATION_DOMAIN + canonicalJson(body)), key, Buffer.from(p.signature, "base64")))
        throw new Error(`its signature does not verify with key ${p.keyId}`);
    if (minSerial !== undefined && serial < minSerial)
        throw new Error(
            `is publication ${serial}, older than publication ${minSerial} this spoke last deployed from (its hubPublicationSerial output): fetch the hub's current outputs`,
        );
    return { outputs, serial };
}
