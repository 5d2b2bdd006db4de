import { type HubPublication, nextPublicationSerial, signHubPublication } from "../../lib/hub-publication";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { z } from "zod";
import { canonicalJson, contentHash } from "../../services/shared/canonical";
import { serviceOnlyKeyPolicy } from "../../lib/kms";
import { denyInsecureTransport, denyUnlessAdministrators } from "../../lib/policy-document";
import {
    bundlePaths,
    type CurrentPointer,
    keyIdOf,
    type Policy,
    PolicySchema,
    publicKeyFromSeed,
    signBundle,
} from "../../services/shared/bundle";

/** Bytes of the Ed25519 seed (RFC 8032 private key length). */
export const SIGNING_SEED_BYTES = 32;

/**
 * What the hub remembers about a spoke's live bundle between deployments (stack output `policyRevisions`,
 * read back through a self StackReference): enough to decide "same policy, same revision" or "next revision".
 */
export const BundleRevisionSchema = z
    .object({
        revision: z.number().int().min(1),
        contentHash: z.string().regex(/^[0-9a-f]{64}$/),
        /** Key id of the signing key (`keyIdOf`); a new key with the same policy still needs a new revision. */
        keyId: z.string().regex(/^[0-9a-f]{16}$/),
        /** S3 key of the bundle object. */
        key: z.string(),
    })
    .strict();

/** A spoke's live bundle revision (see {@link BundleRevisionSchema}). */
export type BundleRevision = z.infer<typeof BundleRevisionSchema>;

/** The `policyRevisions` output: spoke name -> its live revision. */
export const PolicyRevisionsSchema = z.record(z.string(), BundleRevisionSchema);

/**
 * Pure: parses the previous `policyRevisions` output read from the hub's own last deployment. Absent
 * (first deployment) is an empty map.
 *
 * @throws Error when the value is present but malformed: silently restarting at revision 1 would make every
 * spoke ignore the new bundle (a spoke never goes back to a lower revision, services/shared/bundle.ts).
 */
export function parsePreviousRevisions(raw: unknown): Record<string, BundleRevision> {
    if (raw === undefined || raw === null) return {};
    const parsed = PolicyRevisionsSchema.safeParse(raw);
    if (!parsed.success) {
        throw new Error(
            `the hub's previous output policyRevisions is malformed (${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}); refusing to guess a revision`,
        );
    }
    return parsed.data;
}

/**
 * Pure: the revision for a policy given the spoke's previous one. Same content and signing key: the same
 * revision (nothing is rewritten). Anything else: previous + 1. No previous: 1. Revisions never decrease.
 */
export function nextRevision(previous: BundleRevision | undefined, hash: string, keyId: string): number {
    if (!previous) return 1;
    return previous.contentHash === hash && previous.keyId === keyId ? previous.revision : previous.revision + 1;
}

/** The two S3 objects that publish one spoke's bundle. */
export interface BundlePublication extends BundleRevision {
    /** Signed bundle JSON (canonical), written to {@link BundleRevision.key}. */
    bundleJson: string;
    /** `spokes/<spoke>/current.json`. */
    currentKey: string;
    /** {@link CurrentPointer} JSON (canonical). */
    currentJson: string;
}

/**
 * Pure and deterministic: the signed bundle and current pointer for one spoke. Ed25519 signatures and
 * canonical JSON carry no timestamp or nonce, so an unchanged policy yields byte-identical objects and
 * `pulumi preview` shows no change.
 *
 * @param seed 32-byte Ed25519 seed (the hub's signing key)
 * @throws Error when the seed is not 32 bytes or `policy` does not match the bundle's PolicySchema
 */
export function publishBundle(seed: Buffer, spoke: string, policy: Policy, previous: BundleRevision | undefined): BundlePublication {
    const checked = PolicySchema.parse(policy);
    const hash = contentHash(checked);
    const keyId = keyIdOf(publicKeyFromSeed(seed));
    const revision = nextRevision(previous, hash, keyId);
    const signed = signBundle(seed, spoke, revision, checked);
    const key = bundlePaths.bundle(spoke, revision);
    const pointer: CurrentPointer = { revision, key, contentHash: hash };
    return {
        revision,
        contentHash: hash,
        keyId,
        key,
        bundleJson: canonicalJson(signed),
        currentKey: bundlePaths.current(spoke),
        currentJson: canonicalJson(pointer),
    };
}

/** S3 condition keys of an upload's server-side encryption request headers (IAM service authorization reference, Amazon S3). */
const SSE_ALGORITHM = "s3:x-amz-server-side-encryption";
const SSE_KMS_KEY = "s3:x-amz-server-side-encryption-aws-kms-key-id";

/**
 * Pure: the bucket policy. Denies any request not over TLS (`aws:SecureTransport`) or below TLS 1.2
 * (`s3:TlsVersion`), and any upload that asks for an encryption other than the bucket's KMS key: another
 * algorithm (`AES256`, `aws:kms:dsse`), another KMS key, or `aws:kms` without a key id (which S3 answers with
 * the AWS managed `aws/s3` key). An upload that sends no encryption header at all gets the bucket's default
 * encryption (SSE-KMS with this key, bucket key on), so it is allowed: that is what the spokes' ACK writes send
 * (services/auth/aws-calls.ts). Each Deny applies only when its header is present (`Null: false`): a negated
 * operator such as `StringNotEquals`, `...IfExists` included, is true when the key is absent, which would deny
 * every plain upload. Only `administrators` (lib/kms.ts `hubAdministrators`) may change where the bucket's access logs go
 * (`s3:PutBucketLogging`: components/hub/AccessLogs.ts). Deny statements only; grants live on each SpokeIdentity role.
 * @throws Error when `administrators` is empty (lib/policy-document.ts `denyUnlessAdministrators`)
 */
export function policyBucketPolicy(bucketArn: string, kmsKeyArn: string, administrators: readonly string[]): Record<string, unknown> {
    const all = [bucketArn, `${bucketArn}/*`];
    const objects = `${bucketArn}/*`;
    return {
        Version: "2012-10-17",
        Statement: [
            denyInsecureTransport(bucketArn),
            {
                Sid: "DenyOldTls",
                Effect: "Deny",
                Principal: "*",
                Action: "s3:*",
                Resource: all,
                Condition: { NumericLessThan: { "s3:TlsVersion": "1.2" } },
            },
            {
                Sid: "DenyOtherEncryption",
                Effect: "Deny",
                Principal: "*",
                Action: "s3:PutObject",
                Resource: objects,
                Condition: { StringNotEquals: { [SSE_ALGORITHM]: "aws:kms" }, Null: { [SSE_ALGORITHM]: "false" } },
            },
            {
                Sid: "DenyOtherKmsKeys",
                Effect: "Deny",
                Principal: "*",
                Action: "s3:PutObject",
                Resource: objects,
                Condition: { StringNotEquals: { [SSE_KMS_KEY]: kmsKeyArn }, Null: { [SSE_KMS_KEY]: "false" } },
            },
            {
                Sid: "DenyAwsManagedKey",
                Effect: "Deny",
                Principal: "*",
                Action: "s3:PutObject",
                Resource: objects,
                Condition: { StringEquals: { [SSE_ALGORITHM]: "aws:kms" }, Null: { [SSE_KMS_KEY]: "true" } },
            },
            denyUnlessAdministrators("OnlyHubAdministratorsChangeLogging", ["s3:PutBucketLogging"], bucketArn, administrators),
        ],
    };
}

/** Inputs of {@link PolicyStore}. */
export interface PolicyStoreArgs {
    /** The bucket key's administrators: the hub deployers and `platform:keyAdministrators` (lib/kms.ts keyAdministration). */
    keyAdministrators: string[];
    /** Spoke names (`platform:spokes[].name`); each gets `spokes/<spoke>/bundles/<rev>.json` and `current.json`. */
    spokes: string[];
    /** The access model every spoke receives (tenants, teams, key hashes, model access, limits). */
    policy: pulumi.Input<Policy>;
    /**
     * The hub's previous `policyRevisions` output (from a StackReference to this same stack); undefined on the
     * first deployment. Decides whether a spoke's revision stays or moves on.
     */
    previous: pulumi.Input<unknown>;
    /** Fixed bucket name (default: auto-named from the resource name). */
    bucketName?: pulumi.Input<string>;
    /** The hub's account and region: the bucket key is usable only through S3 there (components/hub/kms.ts). */
    accountId: pulumi.Input<string>;
    region: string;
    /** First word of the bucket key's alias `alias/<prefix>-policy-bundles` (`platform:namePrefix`); default `platform`. */
    namePrefix?: string;
}

/**
 * The hub's PolicyStore: a versioned, SSE-KMS, TLS-only, non-public S3 bucket holding one signed
 * policy bundle revision per spoke, and the Ed25519 signing key (a `random.RandomBytes` seed kept only as a
 * Pulumi secret in the hub's state; spokes get the public key). Write access to the bucket alone cannot
 * inject an API key: spokes verify every bundle against the public key.
 *
 * Revisions: each deployment computes, per spoke, the policy's content hash; same hash and key as the
 * previous deployment keeps the revision (byte-identical objects, no change), otherwise revision + 1.
 * Objects: `bundles/<rev>.json` is written once per revision and kept when superseded (`retainOnDelete`,
 * so the object a spoke just read from `current.json` never disappears under it, and every revision stays
 * readable by key for audit); `current.json` is overwritten in place, and bucket versioning keeps every
 * pointer it ever held.
 *
 * @throws Error during the deployment (inside the revisions and publication outputs), from {@link publishBundle} when a
 *   spoke's policy does not match the bundle schema, and from {@link PolicyStore.signPublication}
 *   (lib/hub-publication.ts `signHubPublication`) when the seed is not 32 bytes
 */
export class PolicyStore extends pulumi.ComponentResource {
    /** Bucket name. */
    public readonly bucket: pulumi.Output<string>;
    public readonly bucketArn: pulumi.Output<string>;
    /** KMS key that encrypts every object (SSE-KMS, bucket key on). */
    public readonly kmsKeyArn: pulumi.Output<string>;
    /** Raw Ed25519 public key, base64 (not secret). */
    public readonly publicKey: pulumi.Output<string>;
    /** `keyIdOf(publicKey)`. */
    public readonly keyId: pulumi.Output<string>;
    /** Spoke -> live revision (what the next deployment compares against). */
    public readonly revisions: pulumi.Output<Record<string, BundleRevision>>;
    /** The signing seed (secret); only {@link PolicyStore.signPublication} and the bundles use it. */
    private readonly seed: pulumi.Output<string>;

    constructor(name: string, args: PolicyStoreArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:PolicyStore", name, {}, opts);
        const parent = { parent: this };

        // The key decrypts every retained bundle and ACK, the bucket is the audit trail: protected (no delete or
        // replacement by an ordinary `up`) and retained (dropping them from the program leaves them in AWS).
        const keep: pulumi.CustomResourceOptions = { parent: this, protect: true, retainOnDelete: true };
        const key = new aws.kms.Key(
            `${name}-key`,
            {
                description: "Encrypts the platform policy bundle bucket (SSE-KMS)",
                enableKeyRotation: true,
                deletionWindowInDays: 30,
                policy: pulumi.output(args.accountId).apply((accountId) =>
                    JSON.stringify(
                        serviceOnlyKeyPolicy({
                            accountId,
                            region: args.region,
                            services: ["s3"],
                            administrators: args.keyAdministrators,
                        }),
                    ),
                ),
            },
            keep,
        );
        new aws.kms.Alias(
            `${name}-key-alias`,
            { name: `alias/${args.namePrefix ?? "platform"}-policy-bundles`, targetKeyId: key.keyId },
            parent,
        );
        const bucket = new aws.s3.Bucket(`${name}-bucket`, { bucket: args.bucketName, forceDestroy: false }, keep);
        const ownership = new aws.s3.BucketOwnershipControls(
            `${name}-ownership`,
            {
                bucket: bucket.bucket,
                rule: { objectOwnership: "BucketOwnerEnforced" },
            },
            parent,
        );
        const publicAccess = new aws.s3.BucketPublicAccessBlock(
            `${name}-public-access`,
            {
                bucket: bucket.bucket,
                blockPublicAcls: true,
                blockPublicPolicy: true,
                ignorePublicAcls: true,
                restrictPublicBuckets: true,
            },
            parent,
        );
        const versioning = new aws.s3.BucketVersioning(
            `${name}-versioning`,
            {
                bucket: bucket.bucket,
                versioningConfiguration: { status: "Enabled" },
            },
            parent,
        );
        const encryption = new aws.s3.BucketServerSideEncryptionConfiguration(
            `${name}-encryption`,
            {
                bucket: bucket.bucket,
                rules: [
                    { applyServerSideEncryptionByDefault: { sseAlgorithm: "aws:kms", kmsMasterKeyId: key.arn }, bucketKeyEnabled: true },
                ],
            },
            parent,
        );
        const bucketPolicy = new aws.s3.BucketPolicy(
            `${name}-tls-only`,
            {
                bucket: bucket.bucket,
                policy: pulumi
                    .all([bucket.arn, key.arn])
                    .apply(([b, k]) => JSON.stringify(policyBucketPolicy(b, k, args.keyAdministrators))),
            },
            { parent: this, dependsOn: [publicAccess, ownership] },
        );

        // Key material in the hub's state (readable only by the hub deployers: hub state KMS key, lib/ci-roles.ts):
        // protected, so no `up` replaces the signing key under the spokes' pinned public key.
        const seedBytes = new random.RandomBytes(`${name}-signing-seed`, { length: SIGNING_SEED_BYTES }, { parent: this, protect: true });
        const seed = pulumi.secret(seedBytes.base64);
        this.seed = seed;
        this.publicKey = pulumi.unsecret(seed.apply((s) => publicKeyFromSeed(Buffer.from(s, "base64"))));
        this.keyId = this.publicKey.apply(keyIdOf);

        const previous = (pulumi.output(args.previous) as pulumi.Output<unknown>).apply(parsePreviousRevisions);
        const policy = pulumi.output(args.policy) as pulumi.Output<Policy>;
        const ready = [versioning, encryption, bucketPolicy];
        const revisions: Record<string, pulumi.Output<BundleRevision>> = {};
        for (const spoke of [...args.spokes].sort()) {
            // Signing reads the secret seed; the result (bundle + signature) is not secret.
            const pub = pulumi.unsecret(
                pulumi
                    .all([seed, policy, previous])
                    .apply(([s, p, prev]) => publishBundle(Buffer.from(s, "base64"), spoke, p, prev[spoke])),
            );
            const bundle = new aws.s3.BucketObjectv2(
                `${name}-${spoke}-bundle`,
                {
                    bucket: bucket.bucket,
                    key: pub.key,
                    content: pub.bundleJson,
                    contentType: "application/json",
                    serverSideEncryption: "aws:kms",
                    kmsKeyId: key.arn,
                    bucketKeyEnabled: true,
                },
                { parent: this, dependsOn: ready, retainOnDelete: true },
            );
            new aws.s3.BucketObjectv2(
                `${name}-${spoke}-current`,
                {
                    bucket: bucket.bucket,
                    key: pub.currentKey,
                    content: pub.currentJson,
                    contentType: "application/json",
                    cacheControl: "no-cache",
                    serverSideEncryption: "aws:kms",
                    kmsKeyId: key.arn,
                    bucketKeyEnabled: true,
                },
                { parent: this, dependsOn: [...ready, bundle] },
            );
            revisions[spoke] = pub.apply(({ revision, contentHash: h, keyId, key: k }) => ({ revision, contentHash: h, keyId, key: k }));
        }

        this.bucket = bucket.bucket;
        this.bucketArn = bucket.arn;
        this.kmsKeyArn = key.arn;
        this.revisions = pulumi.all(revisions);
        this.registerOutputs({ bucket: this.bucket, kmsKeyArn: this.kmsKeyArn, publicKey: this.publicKey, revisions: this.revisions });
    }

    /**
     * The hub's `publication` output (lib/hub-publication.ts): its published outputs signed with the bundle signing
     * key, its serial moved on from `previous` (this stack's previous `publication` output) when the outputs changed.
     * Reads the secret seed; the result (digest, signature, public key) is not secret.
     */
    signPublication(hub: string, outputs: pulumi.Input<Record<string, unknown>>, previous?: unknown): pulumi.Output<HubPublication> {
        return pulumi.unsecret(
            pulumi.all([this.seed, pulumi.output(outputs)]).apply(([s, o]) => {
                const published = o as Record<string, unknown>;
                return signHubPublication(Buffer.from(s, "base64"), hub, published, nextPublicationSerial(previous, hub, published));
            }),
        );
    }
}
