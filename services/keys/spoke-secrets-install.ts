import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { CACHE_SALT_KEY_BYTES, CACHE_SALT_SECRET, COUNTER_STORE_SECRET, counterStoreUrl } from "../shared/spoke-secrets";
import type { ApplyManifest } from "./source-key-install";

/**
 * Installing a spoke's generated secrets into its cluster outside Pulumi (`npm run mint-key -- install-spoke-secrets`):
 * the counter store's password and the auth service's cache-salt key (services/shared/spoke-secrets.ts) are generated
 * here with node:crypto and applied with `kubectl apply --server-side`, the manifest on stdin only. The spoke program
 * only names the Secrets, so neither value is in any Pulumi state or preview. Only what is missing is created; an
 * existing value is replaced only on request (`rotate`).
 */

/** A secret this tool installs. */
export type SpokeSecretKind = "counter-password" | "cache-salt-key";

/** Every {@link SpokeSecretKind}, with the Secret that holds it. */
export const SPOKE_SECRETS: Record<SpokeSecretKind, { name: string; namespaces: readonly string[] }> = {
    "counter-password": COUNTER_STORE_SECRET,
    "cache-salt-key": CACHE_SALT_SECRET,
};

/** Whether Secret `name` exists in `namespace` of the spoke's cluster (never reads its data). */
export type SecretExists = (namespace: string, name: string) => Promise<boolean>;

/** What an install did, by secret: the namespaces written, and those that were kept as they were. Never a value. */
export interface InstalledSpokeSecrets {
    spoke: string;
    written: Array<{ kind: SpokeSecretKind; secret: string; namespaces: readonly string[] }>;
    kept: Array<{ kind: SpokeSecretKind; secret: string; namespaces: readonly string[] }>;
}

/** Fresh values (secret content): a 40-character alphanumeric-safe password (240 bits) and a 32-byte key. */
export function generateSpokeSecrets(): { counterPassword: string; cacheSaltKey: string } {
    return {
        // base64url of 30 random bytes: 40 characters of [A-Za-z0-9_-], nothing a URL's userinfo must escape.
        counterPassword: randomBytes(30).toString("base64url"),
        cacheSaltKey: randomBytes(CACHE_SALT_KEY_BYTES).toString("base64"),
    };
}

/**
 * Pure: the Secrets holding the given values (a `v1` `List`, JSON), each in every namespace of its Secret, labelled
 * with the spoke (never a value) for audits.
 */
export function spokeSecretsManifest(spoke: string, values: { counterPassword?: string; cacheSaltKey?: string }): string {
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const secret = (name: string, namespace: string, data: Record<string, string>) => ({
        apiVersion: "v1",
        kind: "Secret",
        metadata: {
            name,
            namespace,
            labels: { "app.kubernetes.io/managed-by": "platform-mint-key", "platform.io/spoke": spoke },
        },
        type: "Opaque",
        data,
    });
    const items = [
        ...(values.counterPassword === undefined
            ? []
            : COUNTER_STORE_SECRET.namespaces.map((ns) =>
                  secret(COUNTER_STORE_SECRET.name, ns, {
                      [COUNTER_STORE_SECRET.keys.password]: b64(values.counterPassword!),
                      [COUNTER_STORE_SECRET.keys.url]: b64(counterStoreUrl(values.counterPassword!)),
                  }),
              )),
        ...(values.cacheSaltKey === undefined
            ? []
            : CACHE_SALT_SECRET.namespaces.map((ns) =>
                  secret(CACHE_SALT_SECRET.name, ns, { [CACHE_SALT_SECRET.key]: b64(values.cacheSaltKey!) }),
              )),
    ];
    return JSON.stringify({ apiVersion: "v1", kind: "List", items });
}

/**
 * Creates the spoke's Secrets that are missing (in every namespace), and replaces `rotate`'s.
 * @throws Error when a Secret exists in some of its namespaces but not all (its copies would disagree: rotate it), or
 *   when `exists` or `apply` fails; nothing is applied then
 */
export async function installSpokeSecrets(
    spoke: string,
    exists: SecretExists,
    apply: ApplyManifest,
    rotate?: SpokeSecretKind,
): Promise<InstalledSpokeSecrets> {
    const fresh = generateSpokeSecrets();
    const values: { counterPassword?: string; cacheSaltKey?: string } = {};
    const result: InstalledSpokeSecrets = { spoke, written: [], kept: [] };
    for (const [kind, s] of Object.entries(SPOKE_SECRETS) as Array<[SpokeSecretKind, (typeof SPOKE_SECRETS)[SpokeSecretKind]]>) {
        const entry = { kind, secret: s.name, namespaces: s.namespaces };
        if (kind !== rotate) {
            const present = await Promise.all(s.namespaces.map((ns) => exists(ns, s.name)));
            if (present.every(Boolean)) {
                result.kept.push(entry);
                continue;
            }
            if (present.some(Boolean))
                throw new Error(
                    `Secret ${s.name} exists in ${s.namespaces.filter((_, i) => present[i]).join(", ")} but not in ${s.namespaces.filter((_, i) => !present[i]).join(", ")}: its copies must hold one value; rerun with --rotate ${kind}`,
                );
        }
        if (kind === "counter-password") values.counterPassword = fresh.counterPassword;
        else values.cacheSaltKey = fresh.cacheSaltKey;
        result.written.push(entry);
    }
    if (result.written.length > 0) await apply(spokeSecretsManifest(spoke, values));
    return result;
}

/**
 * A {@link SecretExists} through `kubectl get secret --ignore-not-found -o name` (prints the object's name only, never
 * its data).
 * @param kubeArgs `--context`/`--kubeconfig` of the spoke's cluster, as the operator gave them
 */
export function kubectlSecretExists(kubeArgs: readonly string[], kubectl = "kubectl"): SecretExists {
    return (namespace, name) =>
        new Promise((resolve, reject) => {
            const child = spawn(kubectl, [...kubeArgs, "get", "secret", name, "-n", namespace, "--ignore-not-found", "-o", "name"], {
                stdio: ["ignore", "pipe", "pipe"],
            });
            let out = "";
            let err = "";
            child.stdout.on("data", (d) => (out += d));
            child.stderr.on("data", (d) => (err += d));
            child.on("error", (e) => reject(new Error(`cannot run ${kubectl}: ${e.message}`)));
            child.on("close", (code) =>
                code === 0
                    ? resolve(out.trim() !== "")
                    : reject(new Error(`${kubectl} get secret ${name} -n ${namespace} failed (${code}): ${err.trim()}`)),
            );
        });
}
