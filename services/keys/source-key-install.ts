import { GetSecretValueCommand, type SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { spawn } from "node:child_process";
import { awsCredentialsFile, keySecretName, SOURCE_KEY_SECRET, SOURCE_KEY_SLOT_ANNOTATION } from "../shared/spoke-key-slot";

/**
 * Installing an on-prem spoke's AWS source key into its cluster outside Pulumi (`npm run mint-key --
 * install-source-key`): the key is read from the active key slot's Secrets Manager secret (as the spoke's deployer,
 * the only principal besides the hub deployers its policy lets read it) and applied as the Kubernetes Secret
 * services/shared/spoke-key-slot.ts `SOURCE_KEY_SECRET` in each namespace a service runs in. The spoke program only names that
 * Secret, so the key is in no Pulumi state and no preview. Only the access key id is returned. The AWS calls are
 * listed in services/keys/aws-calls.ts `INSTALL_SOURCE_KEY_AWS_CALLS` and simulated.
 */

/** A slot secret's value (services/keys/spoke-key.ts writes it). */
interface SourceKey {
    accessKeyId: string;
    secretAccessKey: string;
}

/** Applies a manifest (JSON, a `v1` `List`) to the spoke's cluster; never sees the manifest on disk or argv. */
export type ApplyManifest = (manifest: string) => Promise<void>;

/** What an install returns: the key's id and where it went, never its secret. */
export interface InstalledSourceKey {
    spoke: string;
    slot: string;
    accessKeyId: string;
    namespaces: readonly string[];
}

/**
 * Pure: the Secrets holding `key` as an AWS shared credentials file
 * (services/shared/spoke-key-slot.ts `awsCredentialsFile`, the format the auth and metering services read), one per namespace
 * of `SOURCE_KEY_SECRET`, labelled with the spoke, slot and access key id (never the secret) for audits.
 */
export function sourceKeyManifest(spoke: string, slot: string, key: SourceKey): string {
    const credentials = awsCredentialsFile(key);
    return JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: SOURCE_KEY_SECRET.namespaces.map((namespace) => ({
            apiVersion: "v1",
            kind: "Secret",
            metadata: {
                name: SOURCE_KEY_SECRET.name,
                namespace,
                labels: { "app.kubernetes.io/managed-by": "platform-mint-key", "platform.io/spoke": spoke },
                annotations: { [SOURCE_KEY_SLOT_ANNOTATION]: slot, "platform.io/access-key-id": key.accessKeyId },
            },
            type: "Opaque",
            data: { [SOURCE_KEY_SECRET.key]: Buffer.from(credentials).toString("base64") },
        })),
    });
}

/**
 * Reads slot `slot` of spoke `spoke` and applies it with `apply`.
 * @throws Error when the slot's secret cannot be read (not this spoke's deployer; the hub not applied), holds no key
 *   yet (mint it first: `npm run mint-key -- spoke-access-key`), or `apply` fails
 */
export async function installSourceKey(
    sm: SecretsManagerClient,
    spoke: string,
    slot: string,
    apply: ApplyManifest,
    prefix?: string,
): Promise<InstalledSourceKey> {
    const secretId = keySecretName(spoke, slot, prefix);
    const out = await sm.send(new GetSecretValueCommand({ SecretId: secretId })).catch((e: Error) => {
        if (e.name === "ResourceNotFoundException")
            throw new Error(
                `${secretId} holds no key (or does not exist): mint it first as a hub deployer (npm run mint-key -- spoke-access-key --spoke ${spoke} --slot ${slot})`,
            );
        throw new Error(`cannot read ${secretId} (run as spoke ${spoke}'s deployer role): ${e.message}`);
    });
    let key: SourceKey | undefined;
    try {
        key = JSON.parse(out.SecretString ?? "");
    } catch {
        key = undefined;
    }
    if (!key || typeof key.accessKeyId !== "string" || typeof key.secretAccessKey !== "string")
        throw new Error(`${secretId} does not hold {accessKeyId, secretAccessKey}`);
    await apply(sourceKeyManifest(spoke, slot, key));
    return { spoke, slot, accessKeyId: key.accessKeyId, namespaces: SOURCE_KEY_SECRET.namespaces };
}

/**
 * An {@link ApplyManifest} through `kubectl apply --server-side` (kubernetes/kubectl@v0.33.0:pkg/cmd/apply/apply.go:
 * server-side apply writes no `last-applied-configuration` annotation, so the key is only in `data`), the manifest on
 * stdin (`-f -`), never on disk or in argv. `kubectl` output is passed on only when it fails (its errors name objects,
 * not their data).
 * @param kubeArgs `--context`/`--kubeconfig` of the spoke's cluster, as the operator gave them
 */
export function kubectlApply(kubeArgs: readonly string[], kubectl = "kubectl"): ApplyManifest {
    return (manifest) =>
        new Promise((resolve, reject) => {
            const child = spawn(
                kubectl,
                [...kubeArgs, "apply", "--server-side", "--field-manager=platform-mint-key", "--force-conflicts", "-f", "-"],
                {
                    stdio: ["pipe", "pipe", "pipe"],
                },
            );
            let output = "";
            child.stdout.on("data", (d) => (output += d));
            child.stderr.on("data", (d) => (output += d));
            child.on("error", (e) => reject(new Error(`cannot run ${kubectl}: ${e.message}`)));
            child.on("close", (code) =>
                code === 0
                    ? resolve()
                    : reject(
                          new Error(
                              `${kubectl} apply failed (${code}): ${output.trim()}${/namespaces? .* not found/i.test(output) ? " (the namespaces come with the spoke's first `up`: run it, then this)" : ""}`,
                          ),
                      ),
            );
            child.stdin.end(manifest);
        });
}
