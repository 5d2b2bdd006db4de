import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { SpokeIdentityContract } from "../../config/contract";
import type { SpokeIdentityConfig } from "../../config/stack";
import { GATEWAY_NAMESPACE } from "../../lib/gateway";
import { PLATFORM_NAMESPACE } from "../../lib/labels";
import { bundlePaths } from "../../services/shared/bundle";
import { keySecretName, keySecretPrefix, SPOKE_IAM_PATH, sourceUserName } from "../../services/shared/spoke-key-slot";

export { keySecretName, keySecretPrefix, sourceUserName };

/** An IAM policy document (the subset this module writes). */
export interface PolicyDocument {
    Version: "2012-10-17";
    Statement: Array<{
        Sid: string;
        Effect: "Allow" | "Deny";
        Action: string[];
        /** Absent only in trust policies (the role itself is the resource). */
        Resource?: string | string[];
        Principal?: Record<string, string | string[]>;
        Condition?: Record<string, Record<string, string | string[]>>;
    }>;
}

/** Inputs of {@link spokeRolePolicy} (ARNs as strings, resolved). */
export interface SpokeRolePolicyInput {
    spoke: string;
    bucketArn: string;
    kmsKeyArn: string;
    /** Region of the bucket: KMS use is allowed only through S3 there (`kms:ViaService`). */
    region: string;
    /** Kinesis stream the spoke's metering service writes usage events to (optional until metering exists). */
    usageStreamArn?: string;
    /**
     * The site's egress ranges (on-prem): every call the role makes directly must come from them
     * (`aws:SourceIp`, not applied to calls an AWS service makes on its behalf: `aws:ViaAWSService`).
     */
    egressCidrs?: string[];
}

/**
 * Pure: the spoke role's permissions, least privilege, every action named (no wildcard actions):
 * - read `spokes/<spoke>/current.json` and `spokes/<spoke>/bundles/*` (GetObject, GetObjectVersion);
 * - list only under `spokes/<spoke>/` (ListBucket with an `s3:prefix` condition, so a missing key is a 404
 *   rather than a 403 and nothing else in the bucket is enumerable);
 * - write only `spokes/<spoke>/acks/*` (PutObject);
 * - use the bucket's KMS key only through S3 in the bucket's region (Decrypt to read, GenerateDataKey to write);
 * - optionally PutRecord/PutRecords on exactly the usage stream.
 */
export function spokeRolePolicy(x: SpokeRolePolicyInput): PolicyDocument {
    const prefix = bundlePaths.prefix(x.spoke);
    const statements: PolicyDocument["Statement"] = [
        {
            Sid: "ReadOwnBundles",
            Effect: "Allow",
            Action: ["s3:GetObject", "s3:GetObjectVersion"],
            Resource: [`${x.bucketArn}/${bundlePaths.current(x.spoke)}`, `${x.bucketArn}/${prefix}bundles/*`],
        },
        {
            Sid: "ListOwnPrefix",
            Effect: "Allow",
            Action: ["s3:ListBucket"],
            Resource: x.bucketArn,
            Condition: { StringLike: { "s3:prefix": [`${prefix}*`] } },
        },
        { Sid: "WriteOwnAcks", Effect: "Allow", Action: ["s3:PutObject"], Resource: `${x.bucketArn}/${prefix}acks/*` },
        {
            Sid: "UseBucketKeyViaS3",
            Effect: "Allow",
            Action: ["kms:Decrypt", "kms:GenerateDataKey"],
            Resource: x.kmsKeyArn,
            Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
        },
    ];
    if (x.usageStreamArn) {
        statements.push({
            Sid: "PutUsageEvents",
            Effect: "Allow",
            Action: ["kinesis:PutRecord", "kinesis:PutRecords"],
            Resource: x.usageStreamArn,
        });
    }
    if (x.egressCidrs?.length) {
        statements.push({
            Sid: "DenyOutsideSiteEgress",
            Effect: "Deny",
            Action: ["s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:PutObject", "kinesis:PutRecord", "kinesis:PutRecords"],
            Resource: "*",
            Condition: { NotIpAddress: { "aws:SourceIp": [...x.egressCidrs] }, Bool: { "aws:ViaAWSService": "false" } },
        });
    }
    return { Version: "2012-10-17", Statement: statements };
}

/**
 * The service accounts that call AWS as the spoke (auth service: bundles and ACKs; metering: usage stream).
 * Their names come from components/spoke/AuthService.ts (`auth` in the gateway namespace) and
 * components/spoke/Metering.ts (`metering` in the platform namespace).
 */
export const SPOKE_AWS_SERVICE_ACCOUNTS: ReadonlyArray<{ namespace: string; serviceAccount: string }> = [
    { namespace: GATEWAY_NAMESPACE, serviceAccount: "auth" },
    { namespace: PLATFORM_NAMESPACE, serviceAccount: "metering" },
];

/**
 * Pure: trust policy of an EKS spoke's role for EKS Pod Identity. The service principal
 * `pods.eks.amazonaws.com` with `sts:AssumeRole` + `sts:TagSession`, limited to the spoke's account
 * (`aws:SourceAccount`) and, through the session tags Pod Identity sets, to its cluster (`eks-cluster-arn`, the
 * cluster's ARN: what `aws:SourceArn` would name) and to the platform's service accounts: another spoke's
 * cluster, or another pod in this one, cannot obtain the role even with an association.
 * Source: docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html (trust policy, conditions) and
 * pod-id-abac.html (session tags `eks-cluster-arn`, `kubernetes-namespace`, `kubernetes-service-account`).
 */
export function podIdentityTrustPolicy(
    accountId: string,
    clusterArn: string,
    serviceAccounts = SPOKE_AWS_SERVICE_ACCOUNTS,
): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "EksPodIdentityOfThisSpokeOnly",
                Effect: "Allow",
                Principal: { Service: "pods.eks.amazonaws.com" },
                Action: ["sts:AssumeRole", "sts:TagSession"],
                Condition: {
                    StringEquals: {
                        "aws:SourceAccount": accountId,
                        "aws:RequestTag/eks-cluster-arn": clusterArn,
                        "aws:RequestTag/kubernetes-namespace": [...new Set(serviceAccounts.map((s) => s.namespace))].sort(),
                        "aws:RequestTag/kubernetes-service-account": [...new Set(serviceAccounts.map((s) => s.serviceAccount))].sort(),
                    },
                },
            },
        ],
    };
}

/**
 * Pure: trust policy for IAM Roles Anywhere: the service principal `rolesanywhere.amazonaws.com`
 * (`sts:AssumeRole`, `sts:TagSession`, `sts:SetSourceIdentity`), only through this spoke's trust anchor
 * (`aws:SourceArn`) and only for a certificate whose subject CN is the spoke's (`aws:PrincipalTag/x509Subject/CN`).
 * Source: docs.aws.amazon.com/rolesanywhere/latest/userguide/trust-model.html (role trust policy, conditions).
 */
export function rolesAnywhereTrustPolicy(trustAnchorArn: string, certificateCn: string): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "RolesAnywhereThisSpokeOnly",
                Effect: "Allow",
                Principal: { Service: "rolesanywhere.amazonaws.com" },
                Action: ["sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"],
                Condition: {
                    ArnEquals: { "aws:SourceArn": trustAnchorArn },
                    StringEquals: { "aws:PrincipalTag/x509Subject/CN": certificateCn },
                },
            },
        ],
    };
}

/** One key slot's source user as the role's trust sees it. */
export interface SourcePrincipal {
    arn: string;
    expiresAt?: string;
    egressCidrs?: string[];
}

/**
 * Pure: trust policy letting exactly the spoke's source users (one per key slot) assume the role, each only until its
 * slot's maximum age (`aws:CurrentTime`) and from the site's egress ranges (`aws:SourceIp`) when known. The
 * conditions must be here, not only on the user: in the same account a trust policy that names a user grants the
 * assumption by itself, whatever the user's own policy says (IAM user guide, "Policy evaluation logic":
 * a resource-based policy naming the principal is enough within one account).
 */
export function spokeTrustPolicy(principals: SourcePrincipal[]): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: principals.map((p, i) => ({
            Sid: `SpokeSourceIdentity${i}`,
            Effect: "Allow" as const,
            Principal: { AWS: p.arn },
            Action: ["sts:AssumeRole"],
            ...(sourceConditions(p) ? { Condition: sourceConditions(p) } : {}),
        })),
    };
}

function sourceConditions(x: {
    expiresAt?: string;
    egressCidrs?: string[];
}): NonNullable<PolicyDocument["Statement"][number]["Condition"]> | undefined {
    const condition: NonNullable<PolicyDocument["Statement"][number]["Condition"]> = {};
    if (x.expiresAt) condition.DateLessThan = { "aws:CurrentTime": x.expiresAt };
    if (x.egressCidrs?.length) condition.IpAddress = { "aws:SourceIp": [...x.egressCidrs] };
    return Object.keys(condition).length ? condition : undefined;
}

/** Day `days` after `date` (YYYY-MM-DD), as an ISO-8601 UTC timestamp. */
export function keyExpiry(createdAt: string, days: number): string {
    return new Date(Date.parse(`${createdAt}T00:00:00Z`) + days * 86_400_000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * Pure: a source user's only permission: assume its spoke role, from the site's egress ranges when known, and only
 * until the key slot's maximum age (`aws:CurrentTime`): an old key stops working even if nobody rotates it.
 */
export function sourceUserPolicy(roleArn: string, x: { expiresAt?: string; egressCidrs?: string[] } = {}): PolicyDocument {
    const condition = sourceConditions(x);
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "AssumeSpokeRole",
                Effect: "Allow",
                Action: ["sts:AssumeRole"],
                Resource: roleArn,
                ...(condition ? { Condition: condition } : {}),
            },
        ],
    };
}

/**
 * Pure: resource policy of a key slot's secret. Only the spoke's deployer role may read it; everyone else is
 * denied reading it (other spokes' deployers, CI preview roles), except the hub's own deployers, the only ones who
 * may write it (`npm run mint-key -- spoke-access-key`) and who read it back (`hubDeployers`, `platform:hubDeployers`: named, not whoever ran the last `up`).
 */
export function keySecretPolicy(deployerRoleArn: string, hubDeployers: string[]): Record<string, unknown> {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "SpokeDeployerReads",
                Effect: "Allow",
                Principal: { AWS: deployerRoleArn },
                Action: ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                Resource: "*",
            },
            {
                Sid: "HubDeployersReadBack",
                Effect: "Allow",
                Principal: { AWS: [...hubDeployers].sort() },
                Action: ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                Resource: "*",
            },
            {
                Sid: "NobodyElseReads",
                Effect: "Deny",
                Principal: "*",
                Action: ["secretsmanager:GetSecretValue"],
                Resource: "*",
                Condition: { ArnNotEquals: { "aws:PrincipalArn": [deployerRoleArn, ...hubDeployers] } },
            },
            {
                // Only the minting tool, run as a hub deployer, writes the key (services/keys/spoke-key.ts): nobody
                // else can plant a key of their choosing, whatever their identity policy allows.
                Sid: "OnlyHubDeployersWrite",
                Effect: "Deny",
                Principal: "*",
                Action: ["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"],
                Resource: "*",
                Condition: { ArnNotEquals: { "aws:PrincipalArn": [...hubDeployers].sort() } },
            },
        ],
    };
}

/** Default deployer role of an on-prem spoke in the hub account (README "Deploy for real"). */
export function defaultDeployerRoleArn(partition: string, accountId: string, spoke: string): string {
    return `arn:${partition}:iam::${accountId}:role/platform-spoke-deployer-${spoke}`;
}

/** The deployer role of an access-key spoke (reads its key slot's secret), or undefined for other modes. */
export function spokeDeployerArn(
    spoke: string,
    id: SpokeIdentityConfig,
    partition: pulumi.Input<string>,
    accountId: pulumi.Input<string>,
): pulumi.Output<string> | undefined {
    if (id.mode !== "access-key") return undefined;
    return id.deployerRoleArn
        ? pulumi.output(id.deployerRoleArn)
        : pulumi.all([partition, accountId]).apply(([p, a]) => defaultDeployerRoleArn(p, a, spoke));
}

/**
 * The source key an on-prem spoke without a CA uses to assume its role (JSON in its key slot's secret, written by
 * `npm run mint-key -- spoke-access-key`: services/keys/spoke-key.ts). Secret.
 */
export interface SpokeSourceCredentials {
    accessKeyId: string;
    secretAccessKey: string;
}

/** Inputs of {@link SpokeIdentity}. */
export interface SpokeIdentityArgs {
    /** Spoke name (`platform:spokes[].name`). */
    spoke: string;
    provider: "onprem" | "eks";
    /** `platform:spokeIdentities.<spoke>`; default pod-identity (EKS) or access-key (on-prem). */
    identity?: SpokeIdentityConfig;
    /** EKS: the spoke's cluster name (programs/eks-spoke.ts `eksClusterName`). */
    clusterName?: string;
    /**
     * EKS: the region of the spoke's cluster (`platform:spokes[].region`, which the hub checks against the spoke
     * file's `platform:cluster.region`). Pod Identity names the cluster's own ARN in the session tag, so a trust
     * naming the hub's region would never match a cluster elsewhere.
     */
    clusterRegion?: string;
    bucketArn: pulumi.Input<string>;
    kmsKeyArn: pulumi.Input<string>;
    /** Region of the policy bucket (and of the hub's secrets). */
    region: string;
    /** The hub's account id and partition. */
    accountId: pulumi.Input<string>;
    partition: pulumi.Input<string>;
    /** `platform:hubDeployers`: the roles deploying the hub; they write and read back key secrets. */
    hubDeployers: string[];
    /**
     * KMS key of the source-key secrets (ApiKeys' credential key, whose policy admits the spoke deployers through
     * Secrets Manager): the default `aws/secretsmanager` key cannot be used by a deployer in another account.
     */
    secretsKmsKeyArn?: pulumi.Input<string>;
    /** Usage stream ARN; when set the role may put records on exactly that stream (metering). */
    usageStreamArn?: pulumi.Input<string>;
}

/** The identity config with the provider's default filled in. */
export function effectiveIdentity(provider: "onprem" | "eks", identity: SpokeIdentityConfig | undefined): SpokeIdentityConfig {
    if (identity) return identity;
    return provider === "eks" ? { mode: "pod-identity" } : { mode: "access-key", keys: [{ id: "k1" }], maxKeyAgeDays: 90, egressCidrs: [] };
}

/**
 * The AWS identity of one spoke: one role with least privilege ({@link spokeRolePolicy}) that only this spoke
 * can obtain, and no credential in any stack output.
 * - EKS (`pod-identity`): trusted by EKS Pod Identity for the spoke's cluster and service accounts only
 *   ({@link podIdentityTrustPolicy}); no IAM user, no key.
 * - on-prem with a CA (`roles-anywhere`): a trust anchor on the site's CA bundle and a profile for this role
 *   ({@link rolesAnywhereTrustPolicy}).
 * - on-prem without a CA (`access-key`): per key slot an IAM user whose only right is assuming the role (until the
 *   slot's maximum age, from the site's egress ranges when known) and an empty Secrets Manager secret only the
 *   spoke's deployer role may read ({@link keySecretPolicy}). The key itself is minted outside Pulumi
 *   (`npm run mint-key -- spoke-access-key`, services/keys/spoke-key.ts) straight into that secret: no access key is
 *   in the hub's state. Rotation is two-phase: add a slot and mint its key (both keys work), point `activeKey` at it
 *   and roll the spoke, retire the old slot's key, then remove the old slot.
 */
export class SpokeIdentity extends pulumi.ComponentResource {
    public readonly roleArn: pulumi.Output<string>;
    public readonly roleName: pulumi.Output<string>;
    /** What the spoke's contract says about obtaining the role (no credential). */
    public readonly contract: pulumi.Output<SpokeIdentityContract>;

    constructor(name: string, args: SpokeIdentityArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:SpokeIdentity", name, {}, opts);
        const parent = { parent: this };
        const tags = { "platform:spoke": args.spoke };
        const id = effectiveIdentity(args.provider, args.identity);
        const egressCidrs = id.mode === "pod-identity" ? [] : id.egressCidrs;
        const roleName = `platform-spoke-${args.spoke}`;
        const roleArnOf = pulumi.interpolate`arn:${args.partition}:iam::${args.accountId}:role/platform/spokes/${roleName}`;

        let trust: pulumi.Output<string>;
        // The contract may need resources that name the role (Roles Anywhere profile): built once the role exists.
        let contractOf: (role: aws.iam.Role) => pulumi.Output<SpokeIdentityContract>;
        if (id.mode === "pod-identity") {
            if (!args.clusterName || !args.clusterRegion)
                throw new Error(`SpokeIdentity ${args.spoke}: an EKS spoke needs its cluster name and region`);
            const account = id.accountId ?? args.accountId;
            const clusterArn = pulumi.interpolate`arn:${args.partition}:eks:${args.clusterRegion}:${account}:cluster/${args.clusterName}`;
            trust = pulumi.all([account, clusterArn]).apply(([a, c]) => JSON.stringify(podIdentityTrustPolicy(a, c)));
            contractOf = () =>
                pulumi.output({ mode: "pod-identity" as const, serviceAccounts: SPOKE_AWS_SERVICE_ACCOUNTS.map((s) => ({ ...s })) });
        } else if (id.mode === "roles-anywhere") {
            const cn = id.certificateCn ?? `platform-spoke-${args.spoke}`;
            const anchor = new aws.rolesanywhere.TrustAnchor(
                `${name}-trust-anchor`,
                {
                    name: `platform-spoke-${args.spoke}`,
                    enabled: true,
                    source: { sourceType: "CERTIFICATE_BUNDLE", sourceData: { x509CertificateData: id.caBundle } },
                    tags,
                },
                { parent: this, protect: true },
            );
            trust = anchor.arn.apply((a) => JSON.stringify(rolesAnywhereTrustPolicy(a, cn)));
            contractOf = (role) => {
                const profile = new aws.rolesanywhere.Profile(
                    `${name}-profile`,
                    {
                        name: `platform-spoke-${args.spoke}`,
                        enabled: true,
                        roleArns: [role.arn],
                        durationSeconds: 3600,
                        tags,
                    },
                    parent,
                );
                return pulumi.all([anchor.arn, profile.arn]).apply(([trustAnchorArn, profileArn]) => ({
                    mode: "roles-anywhere" as const,
                    trustAnchorArn,
                    profileArn,
                    certificateCn: cn,
                }));
            };
        } else {
            const slots = id.keys;
            const active = id.activeKey ?? slots[0].id;
            const deployer = spokeDeployerArn(args.spoke, id, args.partition, args.accountId)!;
            const users = slots.map((slot) => ({
                slot,
                // Fixed name: a replacement must delete the old user first (IAM names are unique). Its access key is
                // minted outside Pulumi (services/keys/spoke-key.ts), so removing the slot must delete a user that
                // has keys: `forceDestroy` (pulumi/pulumi-aws, resource aws:iam/user:User, input forceDestroy).
                user: new aws.iam.User(
                    `${name}-source-${slot.id}`,
                    {
                        name: sourceUserName(args.spoke, slot.id),
                        path: SPOKE_IAM_PATH,
                        forceDestroy: true,
                        tags: { ...tags, "platform:key-slot": slot.id },
                    },
                    { parent: this, deleteBeforeReplace: true },
                ),
            }));
            const limitsOf = (slot: (typeof slots)[number]) => ({
                expiresAt: slot.createdAt ? keyExpiry(slot.createdAt, id.maxKeyAgeDays) : undefined,
                egressCidrs,
            });
            trust = pulumi
                .all(users.map((u) => u.user.arn))
                .apply((arns) => JSON.stringify(spokeTrustPolicy(arns.map((arn, i) => ({ arn, ...limitsOf(users[i].slot) })))));
            const secrets = new Map<string, aws.secretsmanager.Secret>();
            for (const { slot, user } of users) {
                new aws.iam.UserPolicy(
                    `${name}-assume-${slot.id}`,
                    {
                        user: user.name,
                        policy: roleArnOf.apply((r) => JSON.stringify(sourceUserPolicy(r, limitsOf(slot)))),
                    },
                    parent,
                );
                if (!slot.createdAt)
                    pulumi.log.warn(
                        `spoke ${args.spoke}: key slot "${slot.id}" has no createdAt, so its key has no maximum age; set platform:spokeIdentities.${args.spoke}.keys[].createdAt`,
                        this,
                    );
                // No key here: the hub creates the slot's secret empty and `npm run mint-key -- spoke-access-key` writes
                // the key into it, so neither the hub's state nor a preview's `.apply` ever holds it. Protected (no `up`
                // deletes the secret a site reads its key from; removing a slot is a reviewed `pulumi state unprotect`,
                // README "Rotating an on-prem key without an outage") and retained (the value Pulumi never saw stays
                // recoverable after the slot leaves the program).
                const secret = new aws.secretsmanager.Secret(
                    `${name}-key-${slot.id}`,
                    {
                        name: keySecretName(args.spoke, slot.id),
                        description: `Source key (slot ${slot.id}) that assumes the role of spoke ${args.spoke}; readable only by its deployer`,
                        kmsKeyId: args.secretsKmsKeyArn,
                        recoveryWindowInDays: 7,
                        tags: { ...tags, "platform:key-slot": slot.id },
                    },
                    { parent: this, protect: true, retainOnDelete: true },
                );
                new aws.secretsmanager.SecretPolicy(
                    `${name}-key-${slot.id}-policy`,
                    {
                        secretArn: secret.arn,
                        policy: pulumi.output(deployer).apply((d) => JSON.stringify(keySecretPolicy(d, args.hubDeployers))),
                        blockPublicPolicy: true,
                    },
                    parent,
                );
                secrets.set(slot.id, secret);
            }
            contractOf = () =>
                secrets
                    .get(active)!
                    .arn.apply((secretArn) => ({ mode: "access-key" as const, secretArn, region: args.region, slot: active }));
        }

        const role = new aws.iam.Role(
            `${name}-role`,
            {
                name: roleName,
                path: "/platform/spokes/",
                description: `Policy bundle reader / ACK writer / usage producer for spoke ${args.spoke}`,
                assumeRolePolicy: trust,
                maxSessionDuration: 3600,
                tags,
                // Fixed name (the secrets, trust anchors and spokes name it): a replacement deletes the old role first.
            },
            { parent: this, deleteBeforeReplace: true },
        );
        const contract = contractOf(role);
        new aws.iam.RolePolicy(
            `${name}-permissions`,
            {
                role: role.name,
                policy: pulumi
                    .all([args.bucketArn, args.kmsKeyArn, args.usageStreamArn])
                    .apply(([bucketArn, kmsKeyArn, usageStreamArn]) =>
                        JSON.stringify(
                            spokeRolePolicy({ spoke: args.spoke, bucketArn, kmsKeyArn, region: args.region, usageStreamArn, egressCidrs }),
                        ),
                    ),
            },
            parent,
        );

        this.roleArn = role.arn;
        this.roleName = role.name;
        this.contract = contract;
        this.registerOutputs({ roleArn: this.roleArn, contract: this.contract });
    }
}
