import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { TenantKeysConfig } from "../../config/tenant-keys";
import { keyAdministration } from "../../lib/kms";
import { tenantKeySecretName } from "../../services/shared/api-key";
import { SECRET_CHANGE_ACTIONS } from "../../lib/secret-policy";

export { API_KEY_PREFIX, API_KEY_RANDOM_LENGTH, hashApiKey, tenantKeySecretName } from "../../services/shared/api-key";

/** Inputs of {@link ApiKeys}. */
export interface ApiKeysArgs {
    /**
     * API keys from `platform:apiKeys[]`: id, owning tenant and the SHA-256 the minting tool printed
     * (`npm run mint-key`, services/keys/mint.ts). The key itself never reaches the program.
     */
    keys: Array<{ id: string; tenant: string; sha256: string }>;
    /** `platform:tenantKeys`: each tenant's readers. Every tenant named there gets its (empty) secret. */
    delivery: TenantKeysConfig;
    /** `platform:hubDeployers`: mint into the secrets (`npm run mint-key`) and read them back. */
    hubDeployers: string[];
    /** The key's administrators: the hub deployers and `platform:keyAdministrators` (lib/kms.ts keyAdministration). */
    keyAdministrators: string[];
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
    /** First word of the tenants' secret names ({@link tenantKeySecretName}, `platform:namePrefix`); default `platform`. */
    namePrefix?: string;
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
    /** Who administers the key: the hub deployers and `platform:keyAdministrators` (lib/kms.ts keyAdministration). */
    administrators: readonly string[];
}): Record<string, unknown> {
    return {
        Version: "2012-10-17",
        Statement: [
            ...keyAdministration(x),
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
 * Pure: resource policy of one tenant's key secret. Its readers may read it; the hub's deployer roles named in the hub
 * file may read it and write new values (minting: `npm run mint-key`, services/keys/mint.ts); everyone else is denied
 * reading it, and nobody but the deployers may write a value (a reader cannot plant a key of its choosing).
 */
export function tenantKeySecretPolicy(readers: string[], hubDeployers: string[]): Record<string, unknown> {
    const deployers = [...new Set(hubDeployers)].sort();
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
                Sid: "HubDeployersMint",
                Effect: "Allow",
                Principal: { AWS: deployers },
                Action: ["secretsmanager:PutSecretValue"],
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
            {
                Sid: "NobodyElseWrites",
                Effect: "Deny",
                Principal: "*",
                // Every way to change the key value, who may read it, or whether it exists (lib/secret-policy.ts).
                Action: [...SECRET_CHANGE_ACTIONS],
                Resource: "*",
                Condition: { ArnNotEquals: { "aws:PrincipalArn": deployers } },
            },
        ],
    };
}

/**
 * Tenants' API key delivery without key material in Pulumi: per tenant one Secrets Manager secret
 * ({@link tenantKeySecretName}, JSON key id -> key) encrypted with a hub KMS key and readable only by the roles the hub
 * file names for that tenant ({@link tenantKeySecretPolicy}). The program creates the secret empty; keys are minted into
 * it by `npm run mint-key` (services/keys/mint.ts), which hands back only each key's SHA-256 for the hub file. So the
 * hub's state, outputs and previews hold hashes and ARNs only: {@link keyHashes} (not secret) goes into the signed
 * policy bundle, {@link secretArns} tells operators where to look. The secrets are protected and retained on delete:
 * removing a tenant from the hub file never destroys keys a tenant still holds.
 *
 * @throws Error from the constructor for a tenant that has keys but no reader in `delivery.readers`
 *   (`platform:tenantKeys.readers`; the hub config's schema refuses this first, naming the key)
 */
export class ApiKeys extends pulumi.ComponentResource {
    /** Key id -> hex SHA-256 of the key (not secret; goes into the signed policy bundle). */
    public readonly keyHashes: pulumi.Output<Record<string, string>>;
    /** Tenant -> ARN of its key secret (not secret). */
    public readonly secretArns: pulumi.Output<Record<string, string>>;
    /** The KMS key of every credential secret the hub writes (tenants' keys, spokes' source keys). */
    public readonly kmsKeyArn: pulumi.Output<string>;

    constructor(name: string, args: ApiKeysArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:ApiKeys", name, {}, opts);
        this.keyHashes = pulumi.output(Object.fromEntries(args.keys.map((k) => [k.id, k.sha256])));

        const tenants = [...new Set([...args.keys.map((k) => k.tenant), ...Object.keys(args.delivery.readers)])].sort();
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
                            administrators: args.keyAdministrators,
                        }),
                    ),
                ),
            },
            { parent: this, protect: true, retainOnDelete: true },
        );
        const arns: Record<string, pulumi.Output<string>> = {};
        for (const t of tenants) {
            // Holds keys tenants use (minted outside Pulumi): never deleted or replaced by an `up`.
            const secret = new aws.secretsmanager.Secret(
                `${name}-${t}`,
                {
                    name: tenantKeySecretName(t, args.namePrefix),
                    description: `API keys of tenant ${t} (key id -> key, minted by npm run mint-key); readable only by platform:tenantKeys.readers.${t}`,
                    kmsKeyId: key.arn,
                    recoveryWindowInDays: 30,
                    tags: { "platform:tenant": t },
                },
                { parent: this, protect: true, retainOnDelete: true },
            );
            new aws.secretsmanager.SecretPolicy(
                `${name}-${t}-policy`,
                {
                    secretArn: secret.arn,
                    policy: JSON.stringify(tenantKeySecretPolicy(readersOf(t), args.hubDeployers)),
                    blockPublicPolicy: true,
                },
                { parent: this },
            );
            arns[t] = secret.arn;
        }
        this.secretArns = pulumi.all(arns);
        this.kmsKeyArn = key.arn;
        this.registerOutputs({ keyHashes: this.keyHashes, secretArns: this.secretArns });
    }
}
