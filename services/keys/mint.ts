import {
    DescribeSecretCommand,
    GetSecretValueCommand,
    PutSecretValueCommand,
    type SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { randomUUID } from "node:crypto";
import { hashApiKey, newApiKey, tenantKeySecretName } from "../shared/api-key";

/**
 * Minting tenants' API keys outside Pulumi: the key is generated here, written only to its tenant's Secrets Manager
 * secret (`platform/tenants/<tenant>/api-keys`, JSON key id -> key, created empty by the hub: components/hub/ApiKeys.ts),
 * and only its SHA-256 is returned, for the hub file (`platform:apiKeys[].sha256`) and from there the signed bundle.
 * No Pulumi state, stack output, preview or log ever holds the key. Run as a hub deployer (the secret's policy lets
 * only `platform:hubDeployers` write it); the calls are listed in services/keys/aws-calls.ts and simulated.
 */

/** What a mint or a listing returns: the key id and its hex SHA-256, never the key. */
export interface MintedKey {
    tenant: string;
    keyId: string;
    sha256: string;
    /** The secret version written (Secrets Manager `VersionId`), for the audit trail (CloudTrail). */
    versionId?: string;
}

/** The tenant secret's keys (id -> key); empty when the secret has no value yet. */
async function readKeys(sm: SecretsManagerClient, secretId: string): Promise<Record<string, string>> {
    const described = await sm.send(new DescribeSecretCommand({ SecretId: secretId })).catch((e: Error) => {
        if (e.name === "ResourceNotFoundException")
            throw new Error(
                `${secretId} does not exist: name the tenant in the hub file's platform:tenantKeys.readers and apply the hub first (it creates the secret and its policy)`,
            );
        throw e;
    });
    if (described.DeletedDate) throw new Error(`${secretId} is scheduled for deletion; restore it before minting`);
    const current = Object.values(described.VersionIdsToStages ?? {}).some((stages) => stages.includes("AWSCURRENT"));
    if (!current) return {};
    const value = await sm.send(new GetSecretValueCommand({ SecretId: secretId }));
    let parsed: unknown;
    try {
        parsed = JSON.parse(value.SecretString ?? "");
    } catch {
        parsed = undefined;
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== "string"))
        throw new Error(`${secretId} does not hold a JSON object of key id -> key; fix it by hand before minting`);
    return parsed as Record<string, string>;
}

async function writeKeys(sm: SecretsManagerClient, secretId: string, keys: Record<string, string>): Promise<string | undefined> {
    const sorted = Object.fromEntries(Object.entries(keys).sort(([a], [b]) => a.localeCompare(b)));
    const out = await sm.send(
        new PutSecretValueCommand({ SecretId: secretId, SecretString: JSON.stringify(sorted), ClientRequestToken: randomUUID() }),
    );
    return out.VersionId;
}

/**
 * Mints one API key for `keyId` of `tenant` and adds it to the tenant's secret (the other keys kept). `namePrefix` is
 * the hub's `platform:namePrefix` (services/shared/api-key.ts `tenantKeySecretName`; default `platform`), so a second hub
 * in the account never writes into the first hub's tenant secret.
 * @throws Error when the secret does not exist yet (apply the hub first), already holds `keyId` (mint a new id to
 *   rotate: both keys work until the old entry leaves the hub file), or does not hold a JSON object
 */
export async function mintApiKey(sm: SecretsManagerClient, tenant: string, keyId: string, namePrefix?: string): Promise<MintedKey> {
    const secretId = tenantKeySecretName(tenant, namePrefix);
    const keys = await readKeys(sm, secretId);
    if (keyId in keys)
        throw new Error(
            `${secretId} already holds key "${keyId}": to rotate, mint a new key id, hand it out, then remove the old id from platform:apiKeys and retire it`,
        );
    const key = newApiKey();
    const versionId = await writeKeys(sm, secretId, { ...keys, [keyId]: key });
    return { tenant, keyId, sha256: hashApiKey(key), versionId };
}

/**
 * Removes `keyId` from the tenant's secret (after the hub file no longer lists it and the hub was applied: the
 * bundle already refuses it).
 * @throws Error when the secret does not hold `keyId`
 */
export async function retireApiKey(sm: SecretsManagerClient, tenant: string, keyId: string, namePrefix?: string): Promise<void> {
    const secretId = tenantKeySecretName(tenant, namePrefix);
    const keys = await readKeys(sm, secretId);
    if (!(keyId in keys)) throw new Error(`${secretId} holds no key "${keyId}" (it holds: ${Object.keys(keys).join(", ") || "none"})`);
    const { [keyId]: _, ...rest } = keys;
    await writeKeys(sm, secretId, rest);
}

/** The id and SHA-256 of every key in the tenant's secret (audit; adopting keys minted before this tool). */
export async function apiKeyHashes(sm: SecretsManagerClient, tenant: string, namePrefix?: string): Promise<MintedKey[]> {
    const keys = await readKeys(sm, tenantKeySecretName(tenant, namePrefix));
    return Object.entries(keys)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([keyId, key]) => ({ tenant, keyId, sha256: hashApiKey(key) }));
}
