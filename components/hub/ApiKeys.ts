import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { createHash } from "node:crypto";
import type { TenantKeysConfig } from "../../config/tenant-keys";
import { KEY_ADMIN_ACTIONS } from "../../lib/kms";

export interface ApiKeysArgs {
    /** API keys from `platform:apiKeys[]` (id and owning tenant). */
    keys: Array<{ id: string; tenant: string }>;
    /** `platform:tenantKeys`: each tenant's readers. */
    delivery: TenantKeysConfig;
    /** `platform:hubDeployers`: write the secrets and read them back. */
    hubDeployers: string[];
    /**
     * Other principals that read secrets under this key through Secrets Manager (the on-prem spokes' deployer
     * roles, components/hub/SpokeIdentity.ts): a cross-account reader cannot use the default `aws/secretsmanager`
     * key, whose policy admits only its own account.
     */
    otherKeyUsers?: pulumi.Input<string>[];
    /** The hub's region (KMS is used only through Secrets Manager there). */
    region: string;
    /** The hub's account id. */
    accountId: pulumi.Input<string>;
}

/** Prefix of every platform API key, so leaked keys are recognisable by secret scanners (policies/aws.ts knows it). */
export const API_KEY_PREFIX = "sk-h200-";
/** Random characters after the prefix (alphanumeric, ~285 bits). */
export const API_KEY_RANDOM_LENGTH = 48;

/** Hex SHA-256 of an API key: the only form of a key that leaves the hub. */
export function hashApiKey(key: string): string {
    return createHash("sha256").update(key, "utf8").digest("hex");
}

/** Name of a tenant's key secret. Fixed, so nothing in the program ever replaces it by renaming. */
export function tenantKeySecretName(tenant: string): string {
    return `platform/tenants/${tenant}/api-keys`;
}

/**
 * Pure: policy of the hub's credential KMS key. The account administers it (no cryptographic use through IAM
 * policies); the named principals use it only through Secrets Manager in the hub's region. Which secret each may
 * read is the secret's own policy ({@link tenantKeySecretPolicy}, SpokeIdentity's `keySecretPolicy`); test/aws-simulate
 * evaluates both together. (A per-secret `kms:EncryptionContext:SecretARN` condition would be tighter still, but the
 * simulator the tests run cannot evaluate colon-suffixed condition keys, and what it cannot evaluate is not added.)
 */
export function credentialKeyPolicy(x: {
    accountId: string;
    region: string;
    partition?: string;
    users: string[];
}): Record<string, unknown> {
    const partition = x.partition ?? "aws";
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "KeyAdministration",
                Effect: "Allow",
                Principal: { AWS: `arn:${partition}:iam::${x.accountId}:root` },
                Action: KEY_ADMIN_ACTIONS,
                Resource: "*",
            },
            {
                Sid: "UseThroughSecretsManager",
                Effect: "Allow",
                Principal: { AWS: [...new Set(x.users)].sort() },
                Action: ["kms:Decrypt", "kms:GenerateDataKey"],
                Resource: "*",
                Condition: { StringEquals: { "kms:ViaService": `secretsmanager.${x.region}.amazonaws.com` } },
            },
        ],
    };
}

/**
 * Pure: resource policy of one tenant's key secret. Its readers may read it; everyone else is denied reading it,
 * except the hub's deployer roles named in the hub file (they write it and read it back on refresh).
 */
export function tenantKeySecretPolicy(readers: string[], hubDeployers: string[]): Record<string, unknown> {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "TenantReadersAndHubDeployers",
                Effect: "Allow",
                Principal: { AWS: [...new Set([...readers, ...hubDeployers])].sort() },
                Action: ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                Resource: "*",
            },
            {
                Sid: "NobodyElseReads",
                Effect: "Deny",
                Principal: "*",
                Action: ["secretsmanager:GetSecretValue"],
                Resource: "*",
                Condition: { ArnNotEquals: { "aws:PrincipalArn": [...new Set([...readers, ...hubDeployers])].sort() } },
            },
        ],
    };
}

/**
 * Mints one API key per id with `@pulumi/random` and delivers each tenant's keys to one Secrets Manager secret
 * ({@link tenantKeySecretName}, JSON key id -> key) encrypted with a hub KMS key and readable only by the roles the
 * hub file names for that tenant ({@link tenantKeySecretPolicy}). No stack output carries a key: {@link keyHashes}
 * (not secret) goes into the signed policy bundle, {@link secretArns} tells operators where to look.
 */
export class ApiKeys extends pulumi.ComponentResource {
    /** Key id -> API key (secret). Internal: never export it (policies/aws.ts refuses a key in an output). */
    public readonly keys: pulumi.Output<Record<string, string>>;
    /** Key id -> hex SHA-256 of the key (not secret; goes into the signed policy bundle). */
    public readonly keyHashes: pulumi.Output<Record<string, string>>;
    /** Tenant -> ARN of its key secret (not secret). */
    public readonly secretArns: pulumi.Output<Record<string, string>>;
    /** The KMS key of every credential secret the hub writes (tenants' keys, spokes' source keys). */
    public readonly kmsKeyArn: pulumi.Output<string>;

    constructor(name: string, args: ApiKeysArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:ApiKeys", name, {}, opts);
        const entries = args.keys.map(({ id }) => {
            const pw = new random.RandomPassword(`${name}-${id}`, { length: API_KEY_RANDOM_LENGTH, special: false }, { parent: this });
            return [id, pulumi.secret(pw.result.apply((r) => `${API_KEY_PREFIX}${r}`))] as const;
        });
        this.keys = pulumi.secret(pulumi.all(Object.fromEntries(entries)) as pulumi.Output<Record<string, string>>);
        this.keyHashes = pulumi.unsecret(
            this.keys.apply((ks) => Object.fromEntries(Object.entries(ks).map(([id, k]) => [id, hashApiKey(k)]))),
        );

        const tenants = [...new Set(args.keys.map((k) => k.tenant))].sort();
        const readersOf = (t: string) => {
            const r = args.delivery.readers[t];
            if (!r?.length) throw new Error(`ApiKeys: tenant "${t}" has keys but platform:tenantKeys.readers names no reader`);
            return r;
        };
        // Decrypts every tenant's keys: protected and retained like the other hub keys.
        const key = new aws.kms.Key(
            `${name}-key`,
            {
                description: "Credential secrets the hub writes: tenants' API keys, on-prem spokes' source keys (Secrets Manager)",
                enableKeyRotation: true,
                deletionWindowInDays: 30,
                policy: pulumi.all([args.accountId, pulumi.all(args.otherKeyUsers ?? [])]).apply(([accountId, others]) =>
                    JSON.stringify(
                        credentialKeyPolicy({
                            accountId,
                            region: args.region,
                            users: [...args.hubDeployers, ...tenants.flatMap(readersOf), ...others],
                        }),
                    ),
                ),
            },
            { parent: this, protect: true, retainOnDelete: true },
        );
        const arns: Record<string, pulumi.Output<string>> = {};
        for (const t of tenants) {
            const secret = new aws.secretsmanager.Secret(
                `${name}-${t}`,
                {
                    name: tenantKeySecretName(t),
                    description: `API keys of tenant ${t} (key id -> key); readable only by platform:tenantKeys.readers.${t}`,
                    kmsKeyId: key.arn,
                    recoveryWindowInDays: 7,
                    tags: { "platform:tenant": t },
                },
                { parent: this },
            );
            const policy = new aws.secretsmanager.SecretPolicy(
                `${name}-${t}-policy`,
                {
                    secretArn: secret.arn,
                    policy: JSON.stringify(tenantKeySecretPolicy(readersOf(t), args.hubDeployers)),
                    blockPublicPolicy: true,
                },
                { parent: this },
            );
            const own = args.keys
                .filter((k) => k.tenant === t)
                .map((k) => k.id)
                .sort();
            new aws.secretsmanager.SecretVersion(
                `${name}-${t}`,
                {
                    secretId: secret.id,
                    secretString: pulumi.secret(this.keys.apply((ks) => JSON.stringify(Object.fromEntries(own.map((id) => [id, ks[id]]))))),
                    // The policy first: the value never exists under a secret anyone else could read.
                },
                { parent: this, dependsOn: [policy] },
            );
            arns[t] = secret.arn;
        }
        this.secretArns = pulumi.all(arns);
        this.kmsKeyArn = key.arn;
        this.registerOutputs({ keyHashes: this.keyHashes, secretArns: this.secretArns });
    }
}
