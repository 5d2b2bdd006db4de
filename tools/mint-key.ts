import { IAMClient } from "@aws-sdk/client-iam";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { apiKeyHashes, mintApiKey, retireApiKey } from "../services/keys/mint";
import { mintSpokeAccessKey, retireSpokeAccessKey } from "../services/keys/spoke-key";
import { installSourceKey, kubectlApply } from "../services/keys/source-key-install";
import { installSpokeSecrets, kubectlSecretExists, SPOKE_SECRETS, type SpokeSecretKind } from "../services/keys/spoke-secrets-install";
import { keySecretName, SOURCE_KEY_SECRET } from "../services/shared/spoke-key-slot";
import { tenantKeySecretName } from "../services/shared/api-key";
import { exitOnHelp } from "./cli";
import { STACKS_DIR } from "../lib/stackfiles";

const HELP = `
usage: npm run mint-key -- --hub STACK --tenant TENANT (--key ID | --retire ID | --list)
       npm run mint-key -- spoke-access-key --hub STACK --spoke SPOKE --slot ID [--retire]
       npm run mint-key -- install-source-key --hub STACK --spoke SPOKE [--slot ID] [--context CTX] [--kubeconfig FILE]
       npm run mint-key -- install-spoke-secrets --spoke SPOKE [--context CTX] [--kubeconfig FILE] [--rotate KIND]

Mints a tenant's API key outside Pulumi: the key is generated here and written only to the tenant's Secrets Manager
secret (platform/tenants/<tenant>/api-keys, JSON key id -> key, created empty by the hub's \`up\`). Prints only the
key's SHA-256, for the hub file's platform:apiKeys[].sha256; a hub \`up\` then puts it into the signed bundle. No key
is ever printed, logged, or held in Pulumi state. Run it as one of the hub file's platform:hubDeployers (only they may
write the secret). The tenant's readers (platform:tenantKeys.readers) read the key from the secret and hand it out.

Options:
  --hub STACK       the hub stack (stacks/Pulumi.<STACK>.yaml: aws:region, the tenant's readers)
  --tenant TENANT   the tenant (must have readers in platform:tenantKeys, so its secret exists)
  --key ID          mint a key for ID (refused when the secret already holds ID: to rotate, mint a new ID)
  --retire ID       remove ID from the secret (after the hub file no longer lists it and the hub was applied)
  --list            print the id and SHA-256 of every key in the secret (audit; adopting keys minted earlier)
  -h, --help        this text

spoke-access-key: an on-prem spoke's AWS source key (platform:spokeIdentities.<spoke>, mode access-key), minted
outside Pulumi: IAM CreateAccessKey for the slot's user (<namePrefix>-spoke-<spoke>-<slot>, created by the hub's \`up\`),
the pair written only to the slot's secret (<namePrefix>/spokes/<spoke>/source-key/<slot>, which only the spoke's deployer
reads). Prints only the access key id. A slot holds one key. --retire deletes the slot's key(s) (refused for the
slot the spoke runs on, platform:spokeIdentities.<spoke>.activeKey: move it and roll the spoke first).

install-source-key: puts an on-prem spoke's source key into its cluster, outside Pulumi: reads the slot's secret
(default: platform:spokeIdentities.<spoke>.activeKey) as the spoke's deployer and applies the Kubernetes Secret
${SOURCE_KEY_SECRET.name} (key ${SOURCE_KEY_SECRET.key}) in ${SOURCE_KEY_SECRET.namespaces.join(" and ")} with
\`kubectl apply --server-side\` (the manifest on stdin only). The spoke's auth and metering pods mount it; the spoke's
\`pulumi up\` never reads the key, so no Pulumi state or preview holds it. Prints only the access key id. Run it after
the spoke's first \`up\` created the namespaces (its pods wait for the Secret) and after each rotation step.

install-spoke-secrets: generates a spoke's own secrets with node:crypto and applies them to its cluster with
\`kubectl apply --server-side\` (the manifest on stdin only; no value is printed, written to disk or put in argv):
the counter store's password (Secret ${SPOKE_SECRETS["counter-password"].name} in ${SPOKE_SECRETS["counter-password"].namespaces.join(" and ")}: Valkey, the auth
service and metering) and the auth service's cache-salt key (Secret ${SPOKE_SECRETS["cache-salt-key"].name} in
${SPOKE_SECRETS["cache-salt-key"].namespaces.join(" and ")}). Creates only the Secrets that are missing; --rotate KIND (counter-password or
cache-salt-key) replaces that one (then restart its readers). The spoke's \`pulumi up\` never sees them. Run it after
the spoke's first \`up\` created the namespaces (its pods wait for the Secrets), for every spoke, EKS ones too.
--context defaults to the spoke file's platform:cluster.kubeconfigContext; without one, give --context or
--kubeconfig (kubectl's current context is never assumed).

Environment: the AWS SDK's (credentials of a hub deployer, or for install-source-key of the spoke's deployer; AWS_ENDPOINT_URL_SECRETS_MANAGER and AWS_ENDPOINT_URL_IAM
for local stand-ins).

Examples:
  npm run mint-key -- --hub hub-prod --tenant acme --key acme-search-2027
  npm run mint-key -- --hub hub-prod --tenant acme --retire acme-search-prod
  npm run mint-key -- --hub hub-prod --tenant acme --list
  npm run mint-key -- spoke-access-key --hub hub-prod --spoke hn1 --slot 2027-02
  npm run mint-key -- spoke-access-key --hub hub-prod --spoke hn1 --slot 2026-11 --retire
  npm run mint-key -- install-source-key --hub hub-prod --spoke hn1 --context hn1-admin
  npm run mint-key -- install-spoke-secrets --spoke hn1
  npm run mint-key -- install-spoke-secrets --spoke sg1 --kubeconfig ~/.kube/sg1 --rotate counter-password
`;

/** The hub file's config. @throws Error naming the file when it cannot be read or is not a hub */
function hubConfig(hub: string): { file: string; config: Record<string, any>; region: string } {
    const file = path.join(STACKS_DIR, `Pulumi.${hub}.yaml`);
    let config: Record<string, any>;
    try {
        config = YAML.parse(fs.readFileSync(file, "utf8")).config;
    } catch (e) {
        throw new Error(`${file}: cannot read the hub file: ${(e as Error).message}`);
    }
    if (config?.["platform:role"] !== "hub") throw new Error(`${file}: platform:role is not hub`);
    const region = config["aws:region"];
    if (typeof region !== "string") throw new Error(`${file}: aws:region is missing`);
    return { file, config, region };
}

/** `spoke-access-key`: mint or retire an on-prem spoke's source key (services/keys/spoke-key.ts). */
async function spokeAccessKey(argv: string[]): Promise<void> {
    const opt: Record<string, string | true> = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === "--retire") opt.retire = true;
        else if (["--hub", "--spoke", "--slot"].includes(a) && argv[i + 1] && !argv[i + 1].startsWith("--")) opt[a.slice(2)] = argv[++i];
        else throw new Error(`unknown or incomplete argument ${a} (npm run mint-key -- --help)`);
    }
    if (typeof opt.hub !== "string" || typeof opt.spoke !== "string" || typeof opt.slot !== "string")
        throw new Error("spoke-access-key needs --hub, --spoke and --slot (npm run mint-key -- --help)");
    const { file, config, region } = hubConfig(opt.hub);
    const key = `platform:spokeIdentities.${opt.spoke}`;
    const id = config["platform:spokeIdentities"]?.[opt.spoke];
    if (id?.mode !== "access-key") throw new Error(`${file}: ${key}.mode is not access-key (only those spokes have source keys)`);
    const slots: string[] = (id.keys ?? []).map((k: { id: string }) => k.id);
    if (!slots.includes(opt.slot)) throw new Error(`${file}: ${key}.keys has no slot "${opt.slot}" (known: ${slots.join(", ")})`);
    const active = id.activeKey ?? slots[0];
    if (opt.retire && opt.slot === active)
        throw new Error(
            `${file}: ${key}.activeKey is "${active}": the spoke runs on it; point activeKey at another slot and roll the spoke before retiring it`,
        );
    // The hub's name prefix (platform:namePrefix): a second hub in the account has its own slot users and secrets.
    const prefix: string | undefined = config["platform:namePrefix"] ?? undefined;
    const iam = new IAMClient({ region });
    const sm = new SecretsManagerClient({ region });
    try {
        if (opt.retire) {
            const deleted = await retireSpokeAccessKey(iam, opt.spoke, opt.slot, prefix);
            process.stdout.write(`retired slot "${opt.slot}" of ${opt.spoke}: deleted access key ${deleted.join(", ")}\n`);
        } else {
            const m = await mintSpokeAccessKey(iam, sm, opt.spoke, opt.slot, prefix);
            process.stdout.write(
                `minted access key ${m.accessKeyId} for slot "${opt.slot}" of ${opt.spoke} into ${keySecretName(opt.spoke, opt.slot, prefix)} (version ${m.versionId ?? "?"}); the secret key is only there\n`,
            );
        }
    } finally {
        iam.destroy();
        sm.destroy();
    }
}

/**
 * `install-source-key`: apply an on-prem spoke's source key to its cluster (services/keys/source-key-install.ts).
 * @param kubectl the kubectl binary (tests put a stand-in first on PATH)
 */
export async function installSourceKeyCommand(argv: string[], kubectl = "kubectl"): Promise<string> {
    const opt: Record<string, string> = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (["--hub", "--spoke", "--slot", "--context", "--kubeconfig"].includes(a) && argv[i + 1] && !argv[i + 1].startsWith("--"))
            opt[a.slice(2)] = argv[++i];
        else throw new Error(`unknown or incomplete argument ${a} (npm run mint-key -- --help)`);
    }
    if (!opt.hub || !opt.spoke) throw new Error("install-source-key needs --hub and --spoke (npm run mint-key -- --help)");
    const { file, config, region } = hubConfig(opt.hub);
    const key = `platform:spokeIdentities.${opt.spoke}`;
    const id = config["platform:spokeIdentities"]?.[opt.spoke];
    if (id?.mode !== "access-key") throw new Error(`${file}: ${key}.mode is not access-key (only those spokes have source keys)`);
    const slots: string[] = (id.keys ?? []).map((k: { id: string }) => k.id);
    const slot = opt.slot ?? id.activeKey ?? slots[0];
    if (!slots.includes(slot)) throw new Error(`${file}: ${key}.keys has no slot "${slot}" (known: ${slots.join(", ")})`);
    const kubeArgs = [...(opt.kubeconfig ? [`--kubeconfig=${opt.kubeconfig}`] : []), ...(opt.context ? [`--context=${opt.context}`] : [])];
    const sm = new SecretsManagerClient({ region });
    try {
        const prefix: string | undefined = config["platform:namePrefix"] ?? undefined;
        const r = await installSourceKey(sm, opt.spoke, slot, kubectlApply(kubeArgs, kubectl), prefix);
        return `installed access key ${r.accessKeyId} (slot "${slot}" of ${opt.spoke}) as Secret ${SOURCE_KEY_SECRET.name} in ${r.namespaces.join(", ")}; restart auth and metering to pick it up if they already run\n`;
    } finally {
        sm.destroy();
    }
}

/**
 * `install-spoke-secrets`: create a spoke's missing generated secrets in its cluster (services/keys/spoke-secrets-install.ts).
 * @param kubectl the kubectl binary (tests put a stand-in first on PATH)
 * @throws Error naming the stacks directory when no spoke file names `--spoke`
 */
export async function installSpokeSecretsCommand(argv: string[], kubectl = "kubectl", stacksDir = STACKS_DIR): Promise<string> {
    const opt: Record<string, string> = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (["--spoke", "--context", "--kubeconfig", "--rotate"].includes(a) && argv[i + 1] && !argv[i + 1].startsWith("--"))
            opt[a.slice(2)] = argv[++i];
        else throw new Error(`unknown or incomplete argument ${a} (npm run mint-key -- --help)`);
    }
    if (!opt.spoke) throw new Error("install-spoke-secrets needs --spoke (npm run mint-key -- --help)");
    if (opt.rotate !== undefined && !(opt.rotate in SPOKE_SECRETS))
        throw new Error(`--rotate ${opt.rotate}: one of ${Object.keys(SPOKE_SECRETS).join(", ")}`);
    const files = fs.readdirSync(stacksDir).filter((f) => /^Pulumi\..+\.yaml$/.test(f));
    let context: string | undefined;
    let found = false;
    for (const f of files) {
        const config = YAML.parse(fs.readFileSync(path.join(stacksDir, f), "utf8"))?.config;
        if (config?.["platform:role"] === "spoke" && config["platform:spoke"]?.name === opt.spoke) {
            found = true;
            context = config["platform:cluster"]?.kubeconfigContext;
        }
    }
    if (!found) throw new Error(`${stacksDir}: no spoke file has platform:spoke.name ${opt.spoke}`);
    const ctx = opt.context ?? context;
    // Never kubectl's current context: the Secrets go to the cluster the operator named.
    if (!ctx && !opt.kubeconfig)
        throw new Error(
            `spoke ${opt.spoke}: its file names no platform:cluster.kubeconfigContext; give --context or --kubeconfig (kubectl's current context is never assumed)`,
        );
    const kubeArgs = [...(opt.kubeconfig ? [`--kubeconfig=${opt.kubeconfig}`] : []), ...(ctx ? [`--context=${ctx}`] : [])];
    const r = await installSpokeSecrets(
        opt.spoke,
        kubectlSecretExists(kubeArgs, kubectl),
        kubectlApply(kubeArgs, kubectl),
        opt.rotate as SpokeSecretKind | undefined,
    );
    const line = (x: { kind: string; secret: string; namespaces: readonly string[] }) =>
        `${x.kind} (Secret ${x.secret} in ${x.namespaces.join(", ")})`;
    return [
        ...r.written.map((x) => `installed ${line(x)}${x.kind === opt.rotate ? "; restart its readers to pick it up" : ""}`),
        ...r.kept.map((x) => `kept ${line(x)}: it exists (--rotate ${x.kind} to replace it)`),
        "",
    ].join("\n");
}

async function main(argv: string[]): Promise<void> {
    exitOnHelp(argv, HELP);
    if (argv[0] === "install-spoke-secrets") {
        process.stdout.write(await installSpokeSecretsCommand(argv.slice(1)));
        return;
    }
    if (argv[0] === "spoke-access-key") return spokeAccessKey(argv.slice(1));
    if (argv[0] === "install-source-key") {
        process.stdout.write(await installSourceKeyCommand(argv.slice(1)));
        return;
    }
    const opt: Record<string, string | true> = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === "--list") opt.list = true;
        else if (["--hub", "--tenant", "--key", "--retire"].includes(a) && argv[i + 1] && !argv[i + 1].startsWith("--"))
            opt[a.slice(2)] = argv[++i];
        else throw new Error(`unknown or incomplete argument ${a} (npm run mint-key -- --help)`);
    }
    const actions = ["key", "retire", "list"].filter((k) => opt[k] !== undefined);
    if (typeof opt.hub !== "string" || typeof opt.tenant !== "string" || actions.length !== 1)
        throw new Error("give --hub, --tenant and exactly one of --key, --retire, --list (npm run mint-key -- --help)");
    const { file, config, region } = hubConfig(opt.hub);
    const readers = config["platform:tenantKeys"]?.readers ?? {};
    if (!readers[opt.tenant])
        throw new Error(
            `${file}: platform:tenantKeys.readers names no reader for tenant "${opt.tenant}" (known: ${Object.keys(readers).join(", ")})`,
        );
    // The hub's own name prefix (config/hub.ts platform:namePrefix): a second hub in the account has its own secrets.
    const prefix: string | undefined = config["platform:namePrefix"];
    const secretName = tenantKeySecretName(opt.tenant, prefix);
    const sm = new SecretsManagerClient({ region });
    try {
        if (typeof opt.key === "string") {
            const m = await mintApiKey(sm, opt.tenant, opt.key, prefix);
            process.stdout.write(
                `minted "${m.keyId}" into ${secretName} (version ${m.versionId ?? "?"}); the key itself is only there\n` +
                    `set in ${file}: platform:apiKeys[id=${m.keyId}].sha256: ${m.sha256}\n`,
            );
        } else if (typeof opt.retire === "string") {
            await retireApiKey(sm, opt.tenant, opt.retire, prefix);
            process.stdout.write(`retired "${opt.retire}" from ${secretName}\n`);
        } else {
            for (const k of await apiKeyHashes(sm, opt.tenant, prefix)) process.stdout.write(`${k.keyId} sha256: ${k.sha256}\n`);
        }
    } finally {
        sm.destroy();
    }
}

if (require.main === module) {
    main(process.argv.slice(2)).catch((e) => {
        process.stderr.write(`mint-key: ${(e as Error).message}\n`);
        process.exit(1);
    });
}
