/**
 * Names of an on-prem spoke's key slot (`access-key` mode), shared by the hub (components/hub/SpokeIdentity.ts
 * creates the slot's IAM user and its empty secret) and the minting tool (services/keys/spoke-key.ts writes the
 * key). Fixed names: renaming nothing in the program ever replaces a slot.
 */

/** Path of every spoke source user (and spoke role): `/platform/spokes/`. */
export const SPOKE_IAM_PATH = "/platform/spokes/";

/** IAM user name of a key slot: `platform-spoke-<spoke>-<slot>` (under {@link SPOKE_IAM_PATH}). */
export function sourceUserName(spoke: string, slot: string): string {
    return `platform-spoke-${spoke}-${slot}`;
}

/** Name prefix of a spoke's key-slot secrets. */
export function keySecretPrefix(spoke: string): string {
    return `platform/spokes/${spoke}/source-key/`;
}

/** Name of a key slot's secret: JSON `{accessKeyId, secretAccessKey}` once minted, no value before. */
export function keySecretName(spoke: string, slot: string): string {
    return `${keySecretPrefix(spoke)}${slot}`;
}
