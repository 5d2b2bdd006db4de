import { createHash, randomInt } from "node:crypto";

/** Prefix of every platform API key, so leaked keys are recognisable by secret scanners (policies/aws.ts knows it). */
export const API_KEY_PREFIX = "sk-h200-";
/** Random characters after the prefix (alphanumeric, ~285 bits). */
export const API_KEY_RANDOM_LENGTH = 48;
/** The full form of a platform API key: what scanners and the policy pack look for. */
export const API_KEY_PATTERN = /sk-h200-[0-9A-Za-z]{48}/;

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/**
 * A fresh API key: {@link API_KEY_PREFIX} + {@link API_KEY_RANDOM_LENGTH} alphanumerics, each drawn uniformly by
 * `crypto.randomInt` (CSPRNG, no modulo bias). Only the minting path (services/keys/mint.ts) calls it; the key
 * goes to its tenant's secret and nowhere else.
 */
export function newApiKey(): string {
    let s = API_KEY_PREFIX;
    for (let i = 0; i < API_KEY_RANDOM_LENGTH; i++) s += ALPHABET[randomInt(ALPHABET.length)];
    return s;
}

/** Hex SHA-256 of an API key (UTF-8): the only form of a key that leaves the tenant's secret. */
export function hashApiKey(key: string): string {
    return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * Name of a tenant's key secret (JSON: key id -> key) on a hub whose names begin with `prefix` (the hub file's
 * `platform:namePrefix`, default `platform`). Fixed, so nothing in the program ever replaces it by renaming.
 */
export function tenantKeySecretName(tenant: string, prefix = "platform"): string {
    return `${prefix}/tenants/${tenant}/api-keys`;
}
