import { z } from "zod";

/** An IAM role ARN (`arn:<partition>:iam::<account>:role/<path/name>`). */
export const IamRoleArnSchema = z
    .string()
    .regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/, "must be an IAM role ARN like arn:aws:iam::111122223333:role/name");

/**
 * `platform:hubDeployers`: the roles that run the hub's `pulumi up` / `refresh` (the CI deploy role, the operator's
 * role). They write the key secrets (spokes' source keys and tenants' API keys, through `npm run mint-key`), use the hub
 * state KMS key (lib/ci-roles.ts) and read the secrets back on refresh; nobody
 * else but each secret's own reader may read them. Named in the hub file, never taken from whoever ran the last `up`
 * (a human and CI alternating would lock each other out).
 */
export const HubDeployersSchema = z.array(IamRoleArnSchema).min(1);

/**
 * `platform:keyAdministrators` of the hub: roles besides the hub deployers that may administer the hub's KMS keys
 * (policy bundles, usage ledger, credential secrets): typically one break-glass role. Only the hub deployers and these
 * may change a key's policy, disable it or schedule its deletion (lib/kms.ts `keyAdministration`); the account's other
 * principals, administrators included, may only read the keys' metadata.
 */
export const KeyAdministratorsSchema = z.array(IamRoleArnSchema).default([]);

/**
 * `platform:tenantKeys` of the hub: how tenants receive their API keys. The hub creates one Secrets Manager secret per
 * tenant named here (`platform/tenants/<tenant>/api-keys`, JSON key id -> key) that only the roles named here (and
 * the hub deployers) may read; `npm run mint-key` writes the keys into it. No program state or stack output ever
 * carries a key (only their SHA-256, from `platform:apiKeys[].sha256`, reaches the signed bundle).
 */
export const TenantKeysConfigSchema = z
    .object({
        /** Tenant id -> roles that may read that tenant's keys (the tenant's own role, or the team that hands keys out). */
        readers: z.record(z.string(), z.array(IamRoleArnSchema).min(1)),
    })
    .strict();
/** `platform:tenantKeys` of the hub as parsed ({@link TenantKeysConfigSchema}). */
export type TenantKeysConfig = z.infer<typeof TenantKeysConfigSchema>;

/**
 * Pure: cross-checks of `platform:tenantKeys` against the hub's tenants and keys: every tenant with an API key names
 * its readers, and no reader entry names an unknown tenant.
 */
export function tenantKeysIssues(h: {
    tenants: Array<{ id: string }>;
    apiKeys: Array<{ tenant: string }>;
    tenantKeys: TenantKeysConfig;
}): Array<{ path: (string | number)[]; message: string }> {
    const tenants = new Set(h.tenants.map((t) => t.id));
    const issues: Array<{ path: (string | number)[]; message: string }> = [];
    for (const t of Object.keys(h.tenantKeys.readers)) {
        if (!tenants.has(t))
            issues.push({ path: ["tenantKeys", "readers", t], message: `unknown tenant "${t}" (known: ${[...tenants].join(", ")})` });
    }
    for (const t of [...new Set(h.apiKeys.map((k) => k.tenant))].sort()) {
        if (tenants.has(t) && !h.tenantKeys.readers[t]) {
            issues.push({
                path: ["tenantKeys", "readers"],
                message: `tenant "${t}" has API keys but no readers: name the roles that may read platform/tenants/${t}/api-keys`,
            });
        }
    }
    return issues;
}
