import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import { z } from "zod";
import { canonicalJson, contentHash } from "./canonical";

/**
 * The signed, revisioned policy bundle (hub -> spoke)
 *
 * S3 layout under the policy bucket, per spoke (a spoke's identity may read only its own prefix):
 * - `spokes/<spoke>/bundles/<revision>.json`  a {@link SignedBundle}, immutable once written
 * - `spokes/<spoke>/current.json`             a {@link CurrentPointer} naming the live revision
 * - `spokes/<spoke>/acks/<revision>.json`     an {@link Ack} written by the spoke's auth service
 */
export const BUNDLE_SCHEMA_VERSION = 1 as const;

const Limits = z
    .object({
        requestsPerSecond: z.number().positive(),
        concurrentRequests: z.number().int().positive(),
        tokensPerWindow: z.number().int().positive(),
        windowSeconds: z.number().int().positive(),
    })
    .strict();

export const PolicySchema = z
    .object({
        models: z.array(z.object({ id: z.string(), limits: Limits }).strict()),
        tenants: z.array(
            z
                .object({
                    id: z.string(),
                    displayName: z.string(),
                    teams: z.array(z.object({ id: z.string(), limits: Limits }).strict()),
                })
                .strict(),
        ),
        apiKeys: z.array(
            z
                .object({
                    id: z.string(),
                    /** Hex SHA-256 of the API key. */
                    sha256: z.string().regex(/^[0-9a-f]{64}$/),
                    tenant: z.string(),
                    team: z.string(),
                    models: z.array(z.string()),
                    expiresAt: z.string(),
                    limits: Limits,
                    /**
                     * The key's serving entitlement (config/serving-policy.ts `keyServing`): ceilings for Dynamo's
                     * `agent_hints.priority` / `strict_priority` / `osl`, and per model the cache scope its salt is
                     * derived from. Absent: priority 0, tier 0, no output-length hint, salt scope `tenant:<tenant>`.
                     */
                    serving: z
                        .object({
                            priority: z.number().int(),
                            strictPriority: z.number().int().min(0),
                            maxOutputLengthHint: z.number().int().min(0),
                            cacheScopes: z.record(z.string(), z.string().min(1)),
                        })
                        .strict()
                        .optional(),
                })
                .strict(),
        ),
    })
    .strict();

export const BundleSchema = z
    .object({
        schemaVersion: z.literal(BUNDLE_SCHEMA_VERSION),
        /** Monotonically increasing; a spoke never goes back to a lower revision. */
        revision: z.number().int().min(1),
        /** Hex SHA-256 of canonical JSON of `policy`. */
        contentHash: z.string().regex(/^[0-9a-f]{64}$/),
        spoke: z.string(),
        policy: PolicySchema,
    })
    .strict();

export const SignedBundleSchema = z
    .object({
        bundle: BundleSchema,
        /** Base64 Ed25519 signature over canonical JSON of `bundle`. */
        signature: z.string(),
        /** Identifies the signing key: first 16 hex chars of SHA-256 of the raw public key. */
        keyId: z.string(),
    })
    .strict();

export const CurrentPointerSchema = z.object({ revision: z.number().int().min(1), key: z.string(), contentHash: z.string() }).strict();
export const AckSchema = z
    .object({ spoke: z.string(), revision: z.number().int().min(1), contentHash: z.string(), at: z.string() })
    .strict();

export type Policy = z.infer<typeof PolicySchema>;
export type Bundle = z.infer<typeof BundleSchema>;
export type SignedBundle = z.infer<typeof SignedBundleSchema>;
export type CurrentPointer = z.infer<typeof CurrentPointerSchema>;
export type Ack = z.infer<typeof AckSchema>;

export const bundlePaths = {
    bundle: (spoke: string, revision: number) => `spokes/${spoke}/bundles/${revision}.json`,
    current: (spoke: string) => `spokes/${spoke}/current.json`,
    ack: (spoke: string, revision: number) => `spokes/${spoke}/acks/${revision}.json`,
    prefix: (spoke: string) => `spokes/${spoke}/`,
};

// PKCS#8 / SPKI DER prefixes for a raw 32-byte Ed25519 key (RFC 8410).
const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

/**
 * Ed25519 private key from a 32-byte seed (e.g. `random.RandomBytes` kept as a Pulumi secret): the seed behind the
 * fixed PKCS#8 DER prefix of an Ed25519 key (RFC 8410).
 * @throws Error when the seed is not exactly 32 bytes
 */
export function privateKeyFromSeed(seed: Buffer): KeyObject {
    if (seed.length !== 32) throw new Error(`Ed25519 seed must be 32 bytes, got ${seed.length}`);
    return createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, seed]), format: "der", type: "pkcs8" });
}

/** Raw 32-byte public key, base64, for a seed: what spokes are given. */
export function publicKeyFromSeed(seed: Buffer): string {
    const der = createPublicKey(privateKeyFromSeed(seed)).export({ format: "der", type: "spki" }) as Buffer;
    return der.subarray(SPKI_ED25519.length).toString("base64");
}

function publicKeyObject(publicKeyB64: string): KeyObject {
    const raw = Buffer.from(publicKeyB64, "base64");
    if (raw.length !== 32) throw new Error("Ed25519 public key must be 32 bytes (base64)");
    return createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: "der", type: "spki" });
}

/** Key id of a base64 raw public key. */
export function keyIdOf(publicKeyB64: string): string {
    return contentHash(publicKeyB64).slice(0, 16);
}

/** Builds and signs a bundle. Deterministic: Ed25519 signatures (RFC 8032) and canonical JSON, no timestamps. */
export function signBundle(seed: Buffer, spoke: string, revision: number, policy: Policy): SignedBundle {
    const bundle: Bundle = { schemaVersion: BUNDLE_SCHEMA_VERSION, revision, contentHash: contentHash(policy), spoke, policy };
    const signature = sign(null, Buffer.from(canonicalJson(bundle)), privateKeyFromSeed(seed)).toString("base64");
    return { bundle, signature, keyId: keyIdOf(publicKeyFromSeed(seed)) };
}

/**
 * Parses and verifies a signed bundle for `spoke`.
 * @throws Error when the JSON does not parse, the signature does not verify against `publicKeyB64`, the
 * content hash does not match, or the bundle is for another spoke.
 */
export function verifyBundle(raw: string | unknown, publicKeyB64: string, spoke: string): Bundle {
    const doc = typeof raw === "string" ? JSON.parse(raw) : raw;
    const signed = SignedBundleSchema.parse(doc);
    const ok = verify(
        null,
        Buffer.from(canonicalJson(signed.bundle)),
        publicKeyObject(publicKeyB64),
        Buffer.from(signed.signature, "base64"),
    );
    if (!ok)
        throw new Error(`policy bundle revision ${signed.bundle.revision}: signature does not verify with key ${keyIdOf(publicKeyB64)}`);
    if (contentHash(signed.bundle.policy) !== signed.bundle.contentHash)
        throw new Error(`policy bundle revision ${signed.bundle.revision}: content hash mismatch`);
    if (signed.bundle.spoke !== spoke) throw new Error(`policy bundle is for spoke "${signed.bundle.spoke}", not "${spoke}"`);
    return signed.bundle;
}
