import { z } from "zod";
import { OptionalEgressCidrsSchema, RequiredEgressCidrsSchema } from "./identity";

const AccountId = z.string().regex(/^\d{12}$/, "must be a 12-digit AWS account id");
const IamRoleArn = z
    .string()
    .regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/, "must be an IAM role ARN like arn:aws:iam::111122223333:role/spoke-deployer");
const DateOnly = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date like 2026-11-30");

/** One IAM access key slot of an on-prem spoke without a CA (see {@link SpokeIdentityConfigSchema}). */
export const AccessKeySlotSchema = z
    .object({
        /** Slot id, part of the IAM user and secret names (`platform-spoke-<spoke>-<id>`); e.g. the month it was issued. */
        id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,15}$/, "must be a short lower-case id like 2026-11"),
        /** Day the slot was added (UTC). The key stops assuming the spoke role `maxKeyAgeDays` later (IAM `aws:CurrentTime`). */
        createdAt: DateOnly.optional(),
    })
    .strict();

/**
 * `platform:spokeIdentities.<spoke>` of the hub: how a spoke obtains its AWS identity (components/hub/SpokeIdentity.ts).
 * - `pod-identity` (EKS default): EKS Pod Identity, trust limited by `aws:SourceAccount` / `aws:SourceArn` to the
 *   spoke's cluster; no key exists.
 * - `roles-anywhere` (on-prem with a CA): IAM Roles Anywhere trust anchor (the site's CA bundle) and profile; the
 *   spoke's workloads present a certificate whose CN is `certificateCn`.
 * - `access-key` (on-prem without a CA, the default there): an IAM user per key slot whose only right is assuming the
 *   spoke role, and a Secrets Manager secret only `deployerRoleArn` may read, into which `npm run mint-key --
 *   spoke-access-key` writes the key (never the hub's state); rotated in two phases (add a slot and mint its key,
 *   point `activeKey` at it and roll the spoke, retire the old key, remove the old slot).
 */
export const SpokeIdentityConfigSchema = z.discriminatedUnion("mode", [
    z
        .object({
            mode: z.literal("pod-identity"),
            /**
             * Account of the spoke's EKS cluster; default the hub's account. Only the hub's own account is accepted
             * (the hub's `up` refuses another): the spoke's roles are created in the hub's account, and EKS Pod Identity
             * associates only roles of the cluster's account.
             */
            accountId: AccountId.optional(),
        })
        .strict(),
    z
        .object({
            mode: z.literal("roles-anywhere"),
            /** PEM bundle of the site CA that issues the spoke's workload certificates. */
            caBundle: z.string().includes("-----BEGIN CERTIFICATE-----", { message: "must be a PEM certificate bundle" }),
            /** Subject CN the spoke's certificate must carry; default `platform-spoke-<spoke>`. */
            certificateCn: z.string().min(1).optional(),
            /** The site's egress ranges; when set, the role can be used only from them (`aws:SourceIp`). */
            egressCidrs: OptionalEgressCidrsSchema,
        })
        .strict(),
    z
        .object({
            mode: z.literal("access-key"),
            /** The spoke's deployer role: the only principal that may read the key's secret. Default `role/platform-spoke-deployer-<spoke>` in the hub account. */
            deployerRoleArn: IamRoleArn.optional(),
            /** One or two slots (two only while rotating). */
            keys: z
                .array(AccessKeySlotSchema)
                .min(1)
                .max(2)
                .default([{ id: "k1" }]),
            /** Slot id the spoke uses (its secret is named in the contract); default the first slot. */
            activeKey: z.string().optional(),
            /** Maximum key age in days from the slot's `createdAt`. */
            maxKeyAgeDays: z.number().int().min(1).max(365).default(90),
            /** The site's egress ranges (config/identity.ts): required, the key works only from them. */
            egressCidrs: RequiredEgressCidrsSchema,
        })
        .strict()
        .superRefine((c, ctx) => {
            const ids = c.keys.map((k) => k.id);
            if (new Set(ids).size !== ids.length) ctx.addIssue({ code: "custom", path: ["keys"], message: "duplicate key slot id" });
            if (c.activeKey !== undefined && !ids.includes(c.activeKey))
                ctx.addIssue({
                    code: "custom",
                    path: ["activeKey"],
                    message: `"${c.activeKey}" is not one of the key slots (${ids.join(", ")})`,
                });
        }),
]);
/** `platform:spokeIdentities.<spoke>` of the hub as parsed ({@link SpokeIdentityConfigSchema}). */
export type SpokeIdentityConfig = z.infer<typeof SpokeIdentityConfigSchema>;
