import { z } from "zod";
import { DnsLabel, EndpointSchema } from "./endpoint";
import { FailoverContractSchema } from "./failover";

/**
 * Version of the hub -> spoke deployment declaration. Bump only on purpose: a spoke
 * refuses a contract whose version it does not know instead of guessing.
 */
export const CONTRACT_SCHEMA_VERSION = 1 as const;

/**
 * Where and how a spoke pulls its signed policy bundle. Everything the spoke's
 * auth service needs to find, fetch and verify bundles, and the identity it fetches them with. No secrets:
 * how the spoke obtains the role is `identity` in the contract, and no credential is ever in a hub output.
 */
export const PolicyContractSchema = z
    .object({
        /** S3 bucket holding every spoke's bundles (versioned, SSE-KMS). */
        bucket: z.string().min(3),
        /**
         * The hub's AWS account, which owns `bucket`: the spoke's services send it with every request to the bucket
         * (`ExpectedBucketOwner`), so a bucket of that name in another account is never read or written. Absent only
         * from a hub deployed before it was published; {@link policyBucketOwner} then takes the account of `kmsKeyArn`
         * (the hub creates the bucket and its key in its own account, components/hub/PolicyStore.ts).
         */
        bucketOwner: z
            .string()
            .regex(/^\d{12}$/, "a 12-digit AWS account id")
            .optional(),
        /** AWS region of the bucket. */
        region: z.string().min(1),
        /** Key prefix this spoke may read/write: `spokes/<spoke>/` (services/shared/bundle.ts `bundlePaths`). */
        prefix: z.string().regex(/^spokes\/[a-z0-9-]+\/$/),
        /** Hub signing key: raw 32-byte Ed25519 public key, base64. Spokes verify every bundle with it. */
        publicKey: z.string().regex(/^[A-Za-z0-9+/]{43}=$/),
        /** Key id of `publicKey` (first 16 hex chars of its SHA-256; `keyIdOf` in bundle.ts). */
        keyId: z.string().regex(/^[0-9a-f]{16}$/),
        /** KMS key encrypting the bucket; S3 uses it on the spoke role's behalf (kms:ViaService). */
        kmsKeyArn: z.string().startsWith("arn:"),
        /** IAM role the spoke's auth service assumes (SpokeIdentity): read its bundles, write its ACKs. */
        roleArn: z.string().startsWith("arn:"),
        /** Revision `current.json` names when the hub was last deployed (informational; the spoke follows current.json). */
        revision: z.number().int().min(1),
        /** Hex SHA-256 of the canonical policy of that revision. */
        contentHash: z.string().regex(/^[0-9a-f]{64}$/),
    })
    .strict()
    // The hub creates the bucket and its key in its own account (components/hub/PolicyStore.ts): a block whose two
    // accounts differ was not written by a hub, and trusting either half would be a guess.
    .superRefine((p, ctx) => {
        const keyAccount = p.kmsKeyArn.split(":")[4];
        if (p.bucketOwner !== undefined && keyAccount !== p.bucketOwner)
            ctx.addIssue({
                code: z.ZodIssueCode.custom,
                path: ["bucketOwner"],
                message: `bucketOwner ${p.bucketOwner} is not the account of kmsKeyArn (${keyAccount || "none"}); the hub creates the bucket and its key in one account`,
            });
    });

/** The contract's `policy` block as parsed ({@link PolicyContractSchema}): where the spoke pulls its signed bundles and how it verifies them. */
export type PolicyContract = z.infer<typeof PolicyContractSchema>;

/**
 * Pure: the account that must own the policy bucket: `bucketOwner`, or for a hub that does not publish it yet the
 * account of the bucket's KMS key (same account by construction: components/hub/PolicyStore.ts creates both).
 * @throws Error when neither names a 12-digit account
 */
export function policyBucketOwner(policy: Pick<PolicyContract, "bucketOwner" | "kmsKeyArn">): string {
    const owner = policy.bucketOwner ?? policy.kmsKeyArn.split(":")[4];
    if (!owner || !/^\d{12}$/.test(owner))
        throw new Error(`contract policy block: no bucket owner (bucketOwner unset and ${policy.kmsKeyArn} names no account)`);
    return owner;
}

/**
 * Where a spoke's metering ships usage events: its own Kinesis stream on the hub
 * (components/hub/UsageLedger.ts). The spoke's SpokeIdentity role may only put records to exactly this stream.
 */
export const UsageContractSchema = z
    .object({
        /** Kinesis stream name (`platform-usage-<spoke>`). */
        streamName: z.string().min(1).max(128),
        /** Its ARN (what the metering role's `kinesis:PutRecords` grant names). */
        streamArn: z.string().startsWith("arn:"),
        /** AWS region of the stream. */
        region: z.string().min(1),
        /**
         * IAM role the spoke's metering service assumes (SpokeIdentity, its own role: put usage records, read its
         * bundles). Absent only from a hub deployed before per-service roles, whose single `policy.roleArn` served both.
         */
        roleArn: z.string().startsWith("arn:").optional(),
    })
    .strict();

/** The contract's `usage` block as parsed ({@link UsageContractSchema}): the spoke's Kinesis stream (name, ARN), its region, and
 * metering's role. */
export type UsageContract = z.infer<typeof UsageContractSchema>;

/**
 * How the spoke's workloads obtain the SpokeIdentity role (components/hub/SpokeIdentity.ts). Never a credential:
 * an EKS spoke binds the role to its service accounts with EKS Pod Identity; an on-prem spoke presents a
 * certificate to IAM Roles Anywhere, or reads its source key from the named Secrets Manager secret with its
 * own deployer credentials (no other spoke's deployer may read it).
 */
export const SpokeIdentityContractSchema = z.discriminatedUnion("mode", [
    z
        .object({
            mode: z.literal("pod-identity"),
            /**
             * Service accounts (namespace/name), each with the one role that trusts exactly it; the spoke creates one
             * Pod Identity association each. `roleArn` is absent only from a hub deployed before per-service roles
             * (then `policy.roleArn`).
             */
            serviceAccounts: z.array(
                z.object({ namespace: z.string(), serviceAccount: z.string(), roleArn: z.string().startsWith("arn:").optional() }).strict(),
            ),
        })
        .strict(),
    z
        .object({
            mode: z.literal("roles-anywhere"),
            trustAnchorArn: z.string().startsWith("arn:"),
            profileArn: z.string().startsWith("arn:"),
            /** Base subject CN: each service's certificate carries `<certificateCn>-<service>` (`-auth`, `-metering`). */
            certificateCn: z.string().min(1),
        })
        .strict(),
    z
        .object({
            mode: z.literal("access-key"),
            /** Secrets Manager secret holding the active slot's key (JSON `{accessKeyId, secretAccessKey}`). */
            secretArn: z.string().startsWith("arn:"),
            /** Region of the secret (the hub's). */
            region: z.string().min(1),
            /** Active key slot id (changes when the hub rotates). */
            slot: z.string().min(1),
        })
        .strict(),
]);

/** The contract's `identity` block as parsed ({@link SpokeIdentityContractSchema}): how the spoke's services obtain their roles (no credential). */
export type SpokeIdentityContract = z.infer<typeof SpokeIdentityContractSchema>;

/**
 * What the hub declares for one spoke: the endpoints it must run. The hub
 * exports one of these per spoke under the stack output `spokeContracts`; the spoke reads its own entry
 * through a StackReference and validates it with this schema before creating anything.
 */
export const SpokeContractSchema = z
    .object({
        schemaVersion: z.literal(CONTRACT_SCHEMA_VERSION),
        /** Hub stack name that produced this contract. */
        hub: z.string(),
        spoke: DnsLabel,
        /** SHA-256 (hex) of the canonical JSON of `endpoints`: changes exactly when the placement changes. */
        placementRevision: z.string().regex(/^[0-9a-f]{64}$/),
        endpoints: z.array(EndpointSchema),
        /** Where the spoke's signed policy bundles live and how to verify them. */
        policy: PolicyContractSchema,
        /** Where the spoke's metering ships usage events. */
        usage: UsageContractSchema,
        /** How the spoke obtains `policy.roleArn` (optional only so a spoke can read a hub deployed before it existed). */
        identity: SpokeIdentityContractSchema.optional(),
        /** Peers this spoke's routes fall back to and the global hostname it is behind (config/failover.ts); absent: none. */
        failover: FailoverContractSchema.optional(),
    })
    .strict();

/** One spoke's contract from the hub as parsed ({@link SpokeContractSchema}): placement, policy bundle, usage stream, identity, failover. */
export type SpokeContract = z.infer<typeof SpokeContractSchema>;

export { canonicalJson, contentHash } from "../services/shared/canonical";
