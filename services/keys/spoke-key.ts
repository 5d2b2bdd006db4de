import { CreateAccessKeyCommand, DeleteAccessKeyCommand, type IAMClient, ListAccessKeysCommand } from "@aws-sdk/client-iam";
import { DescribeSecretCommand, PutSecretValueCommand, type SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { randomUUID } from "node:crypto";
import { keySecretName, sourceUserName } from "../shared/spoke-key-slot";

/**
 * Minting on-prem spokes' AWS source keys outside Pulumi (`npm run mint-key -- spoke-access-key`): the hub creates each
 * key slot's IAM user and its empty, protected secret (components/hub/SpokeIdentity.ts); this creates the user's access
 * key with IAM and writes the pair only to the slot's secret (JSON `{accessKeyId, secretAccessKey}`, what
 * `npm run mint-key -- install-source-key` reads as the spoke's deployer, services/keys/source-key-install.ts). Only the access key id is returned: the
 * secret access key is never in Pulumi state, a stack output, a preview or a log. Run as a hub deployer (the slot
 * secret's policy lets only `platform:hubDeployers` write it); the calls are listed in services/keys/aws-calls.ts and
 * simulated.
 */

/** What a mint returns: the key's id, never its secret. */
export interface MintedSourceKey {
    spoke: string;
    slot: string;
    accessKeyId: string;
    /** The secret version written (Secrets Manager `VersionId`), for the audit trail (CloudTrail). */
    versionId?: string;
}

/** The slot user's access key ids. @throws Error when the user does not exist (the hub was not applied). */
async function slotKeys(iam: IAMClient, spoke: string, slot: string, prefix?: string): Promise<string[]> {
    const userName = sourceUserName(spoke, slot, prefix);
    const out = await iam.send(new ListAccessKeysCommand({ UserName: userName })).catch((e: Error) => {
        if (e.name === "NoSuchEntityException" || e.name === "NoSuchEntity")
            throw new Error(
                `IAM user ${userName} does not exist: list slot "${slot}" in the hub file's platform:spokeIdentities.${spoke}.keys and apply the hub first`,
            );
        throw e;
    });
    return (out.AccessKeyMetadata ?? []).map((k) => k.AccessKeyId!).sort();
}

/**
 * Creates the access key of `slot` of on-prem spoke `spoke` and writes it to the slot's secret. A slot holds one key:
 * to rotate, add a slot, mint its key, move `activeKey` and roll the spoke, then {@link retireSpokeAccessKey} the old
 * one. When the secret cannot be written the new key is deleted again (nothing half-applied). `prefix` is the hub's
 * `platform:namePrefix` (services/shared/spoke-key-slot.ts; default `platform`).
 * @throws Error when the slot's secret or user does not exist (apply the hub first), the secret is scheduled for
 *   deletion, or the user already has a key (retire it first)
 */
export async function mintSpokeAccessKey(
    iam: IAMClient,
    sm: SecretsManagerClient,
    spoke: string,
    slot: string,
    prefix?: string,
): Promise<MintedSourceKey> {
    const secretId = keySecretName(spoke, slot, prefix);
    const described = await sm.send(new DescribeSecretCommand({ SecretId: secretId })).catch((e: Error) => {
        if (e.name === "ResourceNotFoundException")
            throw new Error(
                `${secretId} does not exist: list slot "${slot}" in the hub file's platform:spokeIdentities.${spoke}.keys and apply the hub first`,
            );
        throw e;
    });
    if (described.DeletedDate) throw new Error(`${secretId} is scheduled for deletion; restore it before minting`);
    const existing = await slotKeys(iam, spoke, slot, prefix);
    if (existing.length)
        throw new Error(
            `slot "${slot}" of spoke ${spoke} already has access key ${existing.join(", ")}: a slot holds one key; to rotate, add a slot (README "Rotating an on-prem key without an outage"), or retire this one first (--retire)`,
        );
    const created = await iam.send(new CreateAccessKeyCommand({ UserName: sourceUserName(spoke, slot, prefix) }));
    const accessKeyId = created.AccessKey?.AccessKeyId;
    const secretAccessKey = created.AccessKey?.SecretAccessKey;
    if (!accessKeyId || !secretAccessKey) throw new Error(`IAM returned no access key for ${sourceUserName(spoke, slot, prefix)}`);
    try {
        const put = await sm.send(
            new PutSecretValueCommand({
                SecretId: secretId,
                SecretString: JSON.stringify({ accessKeyId, secretAccessKey }),
                ClientRequestToken: randomUUID(),
            }),
        );
        return { spoke, slot, accessKeyId, versionId: put.VersionId };
    } catch (e) {
        await iam.send(new DeleteAccessKeyCommand({ UserName: sourceUserName(spoke, slot, prefix), AccessKeyId: accessKeyId }));
        throw new Error(`${secretId}: cannot write the key (${(e as Error).message}); access key ${accessKeyId} was deleted again`);
    }
}

/**
 * Deletes every access key of `slot` of spoke `spoke` (after the spoke runs on another slot): the key stops working at
 * once, before the hub's `up` removes the slot. Returns the deleted access key ids.
 * @throws Error when the slot's user does not exist or has no key
 */
export async function retireSpokeAccessKey(iam: IAMClient, spoke: string, slot: string, prefix?: string): Promise<string[]> {
    const keys = await slotKeys(iam, spoke, slot, prefix);
    if (!keys.length) throw new Error(`slot "${slot}" of spoke ${spoke} has no access key to retire`);
    for (const id of keys) await iam.send(new DeleteAccessKeyCommand({ UserName: sourceUserName(spoke, slot, prefix), AccessKeyId: id }));
    return keys;
}
