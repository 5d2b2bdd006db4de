/**
 * Names of an on-prem spoke's key slot (`access-key` mode), shared by the hub (components/hub/SpokeIdentity.ts
 * creates the slot's IAM user and its empty secret) and the minting tool (services/keys/spoke-key.ts writes the
 * key). Fixed names: renaming nothing in the program ever replaces a slot.
 */

/** Path of every spoke source user (and spoke role): `/platform/spokes/`. */
export const SPOKE_IAM_PATH = "/platform/spokes/";

/**
 * IAM user name of a key slot: `<prefix>-spoke-<spoke>-<slot>` (under {@link SPOKE_IAM_PATH}); `prefix` is the hub's
 * `platform:namePrefix` (default `platform`, the names every hub had before prefixes: unchanged, so no slot of an
 * existing hub is replaced), so a second hub in the account never names the first one's users.
 */
export function sourceUserName(spoke: string, slot: string, prefix = "platform"): string {
    return `${prefix}-spoke-${spoke}-${slot}`;
}

/** Name prefix of a spoke's key-slot secrets: `<prefix>/spokes/<spoke>/source-key/` ({@link sourceUserName}'s prefix). */
export function keySecretPrefix(spoke: string, prefix = "platform"): string {
    return `${prefix}/spokes/${spoke}/source-key/`;
}

/** Name of a key slot's secret: JSON `{accessKeyId, secretAccessKey}` once minted, no value before. */
export function keySecretName(spoke: string, slot: string, prefix = "platform"): string {
    return `${keySecretPrefix(spoke, prefix)}${slot}`;
}

/** Credentials-file profile holding the source key that assumes the role. */
export const AWS_SOURCE_PROFILE = "platform-spoke-source";

/**
 * The Kubernetes Secret that holds an on-prem spoke's AWS source key (mode access-key): created outside Pulumi by
 * `npm run mint-key -- install-source-key` (tools/mint-key.ts), read from the active key slot's Secrets Manager secret
 * as the spoke's deployer, so the key is in no Pulumi state (not the hub's, not the spoke's, not a preview's). The
 * spoke program only names it: the auth and metering pods mount its `key` as lib/spoke-services.ts `AWS_FILES_DIR`/credentials
 * (an AWS shared credentials file, {@link awsCredentialsFile}) beside the Pulumi-rendered `config`. One copy per
 * namespace a service runs in (`namespaces`: the auth service's, lib/gateway.ts `GATEWAY_NAMESPACE`, and metering's,
 * lib/labels.ts `PLATFORM_NAMESPACE`; test/source-key.test.ts holds them equal). Until it exists the pods stay in ContainerCreating (FailedMount) and the
 * spoke's `up` waits on them.
 */
export const SOURCE_KEY_SECRET = {
    name: "platform-spoke-source-key",
    key: "credentials",
    namespaces: ["llm-gateway", "platform-system"],
} as const;

/**
 * Annotation naming a key slot: on the installed Secrets (which slot they hold) and on the auth and metering pod
 * templates (which slot the hub's contract names), so a spoke `up` after `activeKey` moved rolls the pods.
 */
export const SOURCE_KEY_SLOT_ANNOTATION = "platform.io/source-key-slot";

/** Pure: AWS shared credentials file with the source key (secret content). */
export function awsCredentialsFile(c: { accessKeyId: string; secretAccessKey: string }): string {
    return [`[${AWS_SOURCE_PROFILE}]`, `aws_access_key_id = ${c.accessKeyId}`, `aws_secret_access_key = ${c.secretAccessKey}`, ""].join(
        "\n",
    );
}
