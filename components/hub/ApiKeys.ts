import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { createHash } from "crypto";

export interface ApiKeysArgs {
    /** API key ids from `platform:apiKeys[].id`. */
    keyIds: string[];
}

/** Prefix of every platform API key, so leaked keys are recognisable by secret scanners. */
export const API_KEY_PREFIX = "sk-h200-";

/** Hex SHA-256 of an API key: the only form of a key that leaves the hub. */
export function hashApiKey(key: string): string {
    return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * Mints one API key per id with `@pulumi/random` (48 alphanumeric characters, ~285 bits). The keys exist
 * only in the hub's state, encrypted as Pulumi secrets; {@link keys} is secret, {@link keyHashes} is not.
 */
export class ApiKeys extends pulumi.ComponentResource {
    /** Key id -> API key (secret). Hand these to tenants out of band (`pulumi stack output --show-secrets`). */
    public readonly keys: pulumi.Output<Record<string, string>>;
    /** Key id -> hex SHA-256 of the key (not secret; goes into the signed policy bundle). */
    public readonly keyHashes: pulumi.Output<Record<string, string>>;

    constructor(name: string, args: ApiKeysArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:ApiKeys", name, {}, opts);
        const entries = args.keyIds.map((id) => {
            const pw = new random.RandomPassword(`${name}-${id}`, { length: 48, special: false }, { parent: this });
            return [id, pulumi.secret(pw.result.apply((r) => `${API_KEY_PREFIX}${r}`))] as const;
        });
        this.keys = pulumi.secret(pulumi.all(Object.fromEntries(entries)) as pulumi.Output<Record<string, string>>);
        this.keyHashes = pulumi.unsecret(this.keys.apply((ks) => Object.fromEntries(Object.entries(ks).map(([id, k]) => [id, hashApiKey(k)]))));
        this.registerOutputs({ keyHashes: this.keyHashes });
    }
}
