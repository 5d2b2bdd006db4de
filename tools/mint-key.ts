import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { apiKeyHashes, mintApiKey, retireApiKey } from "../services/keys/mint";
import { tenantKeySecretName } from "../services/shared/api-key";
import { exitOnHelp } from "./cli";
import { STACKS_DIR } from "./stackfiles";

const HELP = `
usage: npm run mint-key -- --hub STACK --tenant TENANT (--key ID | --retire ID | --list)

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

Environment: the AWS SDK's (credentials of a hub deployer; AWS_ENDPOINT_URL_SECRETS_MANAGER for a local stand-in).

Examples:
  npm run mint-key -- --hub hub-prod --tenant acme --key acme-search-2027
  npm run mint-key -- --hub hub-prod --tenant acme --retire acme-search-prod
  npm run mint-key -- --hub hub-prod --tenant acme --list
`;

async function main(argv: string[]): Promise<void> {
    exitOnHelp(argv, HELP);
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
    const file = path.join(STACKS_DIR, `Pulumi.${opt.hub}.yaml`);
    let config: Record<string, any>;
    try {
        config = YAML.parse(fs.readFileSync(file, "utf8")).config;
    } catch (e) {
        throw new Error(`${file}: cannot read the hub file: ${(e as Error).message}`);
    }
    if (config?.["platform:role"] !== "hub") throw new Error(`${file}: platform:role is not hub`);
    const readers = config["platform:tenantKeys"]?.readers ?? {};
    if (!readers[opt.tenant])
        throw new Error(
            `${file}: platform:tenantKeys.readers names no reader for tenant "${opt.tenant}" (known: ${Object.keys(readers).join(", ")})`,
        );
    const region = config["aws:region"];
    if (typeof region !== "string") throw new Error(`${file}: aws:region is missing`);
    const sm = new SecretsManagerClient({ region });
    try {
        if (typeof opt.key === "string") {
            const m = await mintApiKey(sm, opt.tenant, opt.key);
            process.stdout.write(
                `minted "${m.keyId}" into ${tenantKeySecretName(opt.tenant)} (version ${m.versionId ?? "?"}); the key itself is only there\n` +
                    `set in ${file}: platform:apiKeys[id=${m.keyId}].sha256: ${m.sha256}\n`,
            );
        } else if (typeof opt.retire === "string") {
            await retireApiKey(sm, opt.tenant, opt.retire);
            process.stdout.write(`retired "${opt.retire}" from ${tenantKeySecretName(opt.tenant)}\n`);
        } else {
            for (const k of await apiKeyHashes(sm, opt.tenant)) process.stdout.write(`${k.keyId} sha256: ${k.sha256}\n`);
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
