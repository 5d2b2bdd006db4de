import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { inBucketAccount, type PolicyDocument } from "../../lib/policy-document";
import type { SpokeIdentityContract } from "../../config/contract";
import type { SpokeIdentityConfig } from "../../config/stack";
import { GATEWAY_NAMESPACE } from "../../lib/gateway";
import { PLATFORM_NAMESPACE } from "../../lib/labels";
import { AWS_ROLE_SESSION_NAMES } from "../../lib/spoke-services";
import { bundlePaths } from "../../services/shared/bundle";
import { keySecretName, keySecretPrefix, SPOKE_IAM_PATH, sourceUserName } from "../../services/shared/spoke-key-slot";
import {
    LEGACY_SPOKE_ROLE,
    legacyPodIdentityTrustPolicy,
    legacySpokeRoleDescription,
    legacySpokeRoleName,
    legacySpokeRolePolicy,
} from "./legacy-spoke-role";
import { SECRET_CHANGE_ACTIONS } from "../../lib/secret-policy";

export { keySecretName, keySecretPrefix, sourceUserName };

export type { PolicyDocument };

/**
 * The spoke services that call AWS, each with a role of its own: one namespace/service-account pair (EKS Pod
 * Identity), one role session name (the shared config files of components/spoke/AuthService.ts `awsConfigFile` and
 * components/spoke/Metering.ts `meteringAwsConfig`) and one certificate CN suffix (IAM Roles Anywhere).
 * - `auth` (`auth` in the gateway namespace, components/spoke/AuthService.ts): reads its bundles, writes its ACKs.
 * - `metering` (`metering` in the platform namespace, components/spoke/Metering.ts): puts usage records, reads its
 *   bundles for the token windows (services/metering/main.ts); no ACK, no listing.
 */
export const SPOKE_AWS_SERVICES = {
    auth: { namespace: GATEWAY_NAMESPACE, serviceAccount: "auth", sessionName: AWS_ROLE_SESSION_NAMES.auth },
    metering: { namespace: PLATFORM_NAMESPACE, serviceAccount: "metering", sessionName: AWS_ROLE_SESSION_NAMES.metering },
} as const;
/** A spoke service with its own AWS role: `auth` or `metering` ({@link SPOKE_AWS_SERVICES}). */
export type SpokeService = keyof typeof SPOKE_AWS_SERVICES;
/** The spoke services that get their own role ({@link SPOKE_AWS_SERVICES}), sorted by name. */
export const SPOKE_SERVICES = Object.keys(SPOKE_AWS_SERVICES).sort() as SpokeService[];

/** Inputs of {@link spokeServicePolicy} (ARNs as strings, resolved). */
export interface SpokeRolePolicyInput {
    spoke: string;
    bucketArn: string;
    /** The hub's account, which owns the bucket: every S3 grant requires it (`s3:ResourceAccount`). */
    bucketOwner: string;
    kmsKeyArn: string;
    /** Region of the bucket: KMS use is allowed only through S3 there (`kms:ViaService`). */
    region: string;
    /** Kinesis stream the spoke's metering service writes usage events to (metering only; optional until it exists). */
    usageStreamArn?: string;
    /**
     * The site's egress ranges (on-prem): every call the role makes directly must come from them
     * (`aws:SourceIp`, not applied to calls an AWS service makes on its behalf: `aws:ViaAWSService`).
     */
    egressCidrs?: string[];
}

/**
 * Pure: one spoke service's permissions, least privilege per its call table (services/auth/aws-calls.ts,
 * services/metering/aws-calls.ts), every action named (no wildcard actions):
 * - both: read `spokes/<spoke>/current.json` and `spokes/<spoke>/bundles/*` (GetObject, GetObjectVersion) and
 *   decrypt them through S3 in the bucket's region (`kms:Decrypt` with `kms:ViaService`);
 * - auth: list only under `spokes/<spoke>/` (ListBucket with an `s3:prefix` condition, so a missing key is a 404
 *   rather than a 403), write only `spokes/<spoke>/acks/*` (PutObject; `kms:GenerateDataKey` through S3);
 * - metering: PutRecords on exactly the spoke's usage stream;
 * - on-prem with egress ranges: every direct call denied from any other source address.
 */
export function spokeServicePolicy(service: SpokeService, x: SpokeRolePolicyInput): PolicyDocument {
    const prefix = bundlePaths.prefix(x.spoke);
    const statements: PolicyDocument["Statement"] = [
        {
            Sid: "ReadOwnBundles",
            Effect: "Allow",
            Action: ["s3:GetObject", "s3:GetObjectVersion"],
            Resource: [`${x.bucketArn}/${bundlePaths.current(x.spoke)}`, `${x.bucketArn}/${prefix}bundles/*`],
            Condition: inBucketAccount(x.bucketOwner),
        },
    ];
    if (service === "auth") {
        statements.push(
            {
                Sid: "ListOwnPrefix",
                Effect: "Allow",
                Action: ["s3:ListBucket"],
                Resource: x.bucketArn,
                Condition: { StringLike: { "s3:prefix": [`${prefix}*`] }, ...inBucketAccount(x.bucketOwner) },
            },
            {
                Sid: "WriteOwnAcks",
                Effect: "Allow",
                Action: ["s3:PutObject"],
                Resource: `${x.bucketArn}/${prefix}acks/*`,
                Condition: inBucketAccount(x.bucketOwner),
            },
        );
    }
    statements.push({
        Sid: "UseBucketKeyViaS3",
        Effect: "Allow",
        Action: service === "auth" ? ["kms:Decrypt", "kms:GenerateDataKey"] : ["kms:Decrypt"],
        Resource: x.kmsKeyArn,
        Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
    });
    if (service === "metering" && x.usageStreamArn) {
        statements.push({ Sid: "PutUsageEvents", Effect: "Allow", Action: ["kinesis:PutRecords"], Resource: x.usageStreamArn });
    }
    if (x.egressCidrs?.length) {
        const direct = statements.flatMap((s) => s.Action).filter((a) => !a.startsWith("kms:"));
        statements.push({
            Sid: "DenyOutsideSiteEgress",
            Effect: "Deny",
            Action: direct,
            Resource: "*",
            Condition: { NotIpAddress: { "aws:SourceIp": [...x.egressCidrs] }, Bool: { "aws:ViaAWSService": "false" } },
        });
    }
    return { Version: "2012-10-17", Statement: statements };
}

/**
 * Pure: trust policy of one spoke service's role for EKS Pod Identity. The service principal
 * `pods.eks.amazonaws.com` with `sts:AssumeRole` + `sts:TagSession`, limited to the spoke's account
 * (`aws:SourceAccount`) and, through the session tags Pod Identity sets, to its cluster (`eks-cluster-arn`, the
 * cluster's ARN: what `aws:SourceArn` would name) and to exactly one namespace/service-account pair: another
 * spoke's cluster, another service account of this one, or the same name in another namespace cannot obtain the
 * role even with an association.
 * Source: docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html (trust policy, conditions) and
 * pod-id-abac.html (session tags `eks-cluster-arn`, `kubernetes-namespace`, `kubernetes-service-account`).
 */
export function podIdentityTrustPolicy(
    accountId: string,
    clusterArn: string,
    serviceAccount: { namespace: string; serviceAccount: string },
): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "EksPodIdentityOfThisServiceOnly",
                Effect: "Allow",
                Principal: { Service: "pods.eks.amazonaws.com" },
                Action: ["sts:AssumeRole", "sts:TagSession"],
                Condition: {
                    StringEquals: {
                        "aws:SourceAccount": accountId,
                        "aws:RequestTag/eks-cluster-arn": clusterArn,
                        "aws:RequestTag/kubernetes-namespace": serviceAccount.namespace,
                        "aws:RequestTag/kubernetes-service-account": serviceAccount.serviceAccount,
                    },
                },
            },
        ],
    };
}

/**
 * Pure: trust policy for IAM Roles Anywhere: the service principal `rolesanywhere.amazonaws.com`
 * (`sts:AssumeRole`, `sts:TagSession`, `sts:SetSourceIdentity`), only through this spoke's trust anchor
 * (`aws:SourceArn`) and only for a certificate whose subject CN is the one given (`aws:PrincipalTag/x509Subject/CN`;
 * {@link SpokeIdentity} gives each service's role its own CN, `<certificateCn>-<service>`).
 * Source: docs.aws.amazon.com/rolesanywhere/latest/userguide/trust-model.html (role trust policy, conditions).
 */
export function rolesAnywhereTrustPolicy(trustAnchorArn: string, certificateCn: string): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "RolesAnywhereThisCertificateOnly",
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
 * With `sessionName`, only a session of that name (`sts:RoleSessionName`, the service's `role_session_name`): the
 * two services' roles cannot be swapped by configuration. It is no boundary between holders of the same source key.
 */
export function spokeTrustPolicy(principals: SourcePrincipal[], sessionName?: string): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: principals.map((p, i) => {
            const condition = { ...sourceConditions(p), ...(sessionName ? { StringEquals: { "sts:RoleSessionName": sessionName } } : {}) };
            return {
                Sid: `SpokeSourceIdentity${i}`,
                Effect: "Allow" as const,
                Principal: { AWS: p.arn },
                Action: ["sts:AssumeRole"],
                ...(Object.keys(condition).length ? { Condition: condition } : {}),
            };
        }),
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
export function sourceUserPolicy(roleArn: string | string[], x: { expiresAt?: string; egressCidrs?: string[] } = {}): PolicyDocument {
    const condition = sourceConditions(x);
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "AssumeSpokeRole",
                Effect: "Allow",
                Action: ["sts:AssumeRole"],
                Resource: Array.isArray(roleArn) ? [...roleArn].sort() : roleArn,
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
                Action: [...SECRET_CHANGE_ACTIONS],
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
    /** Usage stream ARN; when set the metering role may put records on exactly that stream. */
    usageStreamArn?: pulumi.Input<string>;
    /**
     * The hub's stack name: the first part of every physical name here, so a second hub in the same account never
     * collides with this one.
     */
    hub: string;
    /** `platform:namePrefix` of the hub: first word of the key slots' user and secret names (default `platform`). */
    namePrefix?: string;
    /**
     * MIGRATION: keep the previous release's single role of this spoke (components/hub/legacy-spoke-role.ts); set by
     * the hub program for a hub deployed by that release (programs/hub.ts `keepLegacySpokeRolesOf`). Default false.
     */
    keepLegacyRole?: boolean;
}
/** The identity config with the provider's default filled in. */
export function effectiveIdentity(provider: "onprem" | "eks", identity: SpokeIdentityConfig | undefined): SpokeIdentityConfig {
    if (identity) return identity;
    return provider === "eks" ? { mode: "pod-identity" } : { mode: "access-key", keys: [{ id: "k1" }], maxKeyAgeDays: 90, egressCidrs: [] };
}

/**
 * Name prefix of a spoke service's role (IAM `namePrefix`: AWS appends a unique suffix, so a replacement creates the new
 * role before deleting the old one and a second hub never collides). At most 38 characters (64 less the 26 of the suffix).
 */
export function spokeRoleNamePrefix(hub: string, spoke: string, service: SpokeService): string {
    return `${hub}-${spoke}-${service}`.slice(0, 37).replace(/-*$/, "-");
}

/**
 * The AWS identity of one spoke: one role per spoke service ({@link SPOKE_AWS_SERVICES}) with least privilege
 * ({@link spokeServicePolicy}) that only that service of this spoke can obtain, and no credential in any stack output.
 * - EKS (`pod-identity`): each role trusted by EKS Pod Identity for the spoke's cluster and its one
 *   namespace/service-account pair ({@link podIdentityTrustPolicy}); no IAM user, no key.
 * - on-prem with a CA (`roles-anywhere`): a trust anchor on the site's CA bundle and a profile for both roles; each
 *   role trusts only its service's certificate CN, `<certificateCn>-<service>` ({@link rolesAnywhereTrustPolicy}).
 * - on-prem without a CA (`access-key`): per key slot an IAM user whose only right is assuming the roles (until the
 *   slot's maximum age, from the site's egress ranges when known), each role only under its service's session name,
 *   and an empty Secrets Manager secret only the spoke's deployer role may read ({@link keySecretPolicy}). The key
 *   itself is minted outside Pulumi (`npm run mint-key -- spoke-access-key`, services/keys/spoke-key.ts) straight into
 *   that secret: no access key is in the hub's state. Rotation is two-phase: add a slot and mint its key (both keys
 *   work), point `activeKey` at it and roll the spoke, retire the old slot's key, then remove the old slot.
 * Roles are named by prefix ({@link spokeRoleNamePrefix}): a replacement never deletes before it creates.
 *
 * @throws Error from the constructor for a `pod-identity` spoke without `clusterName` and `clusterRegion`, or whose
 *   identity's `accountId` is not the hub's `accountId` (when that is a plain string): EKS Pod Identity associates only a
 *   role of the cluster's own account. programs/hub.ts refuses the second first, naming the hub file's key
 *   (`refuseForeignPodIdentityAccounts`).
 */
export class SpokeIdentity extends pulumi.ComponentResource {
    /** The auth service's role (the contract's `policy.roleArn`). */
    public readonly roleArn: pulumi.Output<string>;
    /** Each service's role ARN. */
    public readonly roleArns: Record<SpokeService, pulumi.Output<string>>;
    /** What the spoke's contract says about obtaining the roles (no credential). */
    public readonly contract: pulumi.Output<SpokeIdentityContract>;
    /**
     * MIGRATION (LEGACY_SPOKE_ROLE.removeIn): the previous release's single role's ARN while the hub keeps it
     * (`keepLegacyRole`), else undefined; a not-yet-upgraded spoke's metering puts usage under it.
     */
    public readonly legacyRoleArn: pulumi.Output<string> | undefined;

    constructor(name: string, args: SpokeIdentityArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:SpokeIdentity", name, {}, opts);
        const parent = { parent: this };
        const tags = { "platform:spoke": args.spoke };
        const id = effectiveIdentity(args.provider, args.identity);
        const egressCidrs = id.mode === "pod-identity" ? [] : id.egressCidrs;

        let trustOf: (service: SpokeService) => pulumi.Output<string>;
        // MIGRATION (LEGACY_SPOKE_ROLE.removeIn): the previous release's single role's trust, and its ARN for the
        // Roles Anywhere profile and the source users' policies.
        let legacyTrust: pulumi.Output<string>;
        let legacyArns: pulumi.Output<string>[] = [];
        // The contract and the source users' policies name the roles: built once the roles exist.
        let contractOf: (roles: Record<SpokeService, aws.iam.Role>) => pulumi.Output<SpokeIdentityContract>;
        if (id.mode === "pod-identity") {
            if (!args.clusterName || !args.clusterRegion)
                throw new Error(`SpokeIdentity ${args.spoke}: an EKS spoke needs its cluster name and region`);
            // The roles below are created in the hub's account; EKS Pod Identity associates only a role of the
            // cluster's own account (programs/hub.ts refuseForeignPodIdentityAccounts names the hub file's key).
            if (id.accountId !== undefined && typeof args.accountId === "string" && id.accountId !== args.accountId)
                throw new Error(
                    `SpokeIdentity ${args.spoke}: pod-identity accountId ${id.accountId} is not the hub's account ${args.accountId}: EKS Pod Identity needs the role in the cluster's account`,
                );
            const account = id.accountId ?? args.accountId;
            const clusterArn = pulumi.interpolate`arn:${args.partition}:eks:${args.clusterRegion}:${account}:cluster/${args.clusterName}`;
            trustOf = (service) =>
                pulumi
                    .all([account, clusterArn])
                    .apply(([a, c]) => JSON.stringify(podIdentityTrustPolicy(a, c, SPOKE_AWS_SERVICES[service])));
            legacyTrust = pulumi.all([account, clusterArn]).apply(([a, c]) =>
                JSON.stringify(
                    legacyPodIdentityTrustPolicy(
                        a,
                        c,
                        SPOKE_SERVICES.map((sv) => SPOKE_AWS_SERVICES[sv]),
                    ),
                ),
            );
            contractOf = (roles) =>
                pulumi.all(SPOKE_SERVICES.map((sv) => roles[sv].arn)).apply((arns) => ({
                    mode: "pod-identity" as const,
                    serviceAccounts: SPOKE_SERVICES.map((sv, i) => ({
                        namespace: SPOKE_AWS_SERVICES[sv].namespace,
                        serviceAccount: SPOKE_AWS_SERVICES[sv].serviceAccount,
                        roleArn: arns[i],
                    })),
                }));
        } else if (id.mode === "roles-anywhere") {
            const cn = id.certificateCn ?? `platform-spoke-${args.spoke}`;
            const anchor = new aws.rolesanywhere.TrustAnchor(
                `${name}-trust-anchor`,
                {
                    name: `${args.hub}-spoke-${args.spoke}`,
                    enabled: true,
                    source: { sourceType: "CERTIFICATE_BUNDLE", sourceData: { x509CertificateData: id.caBundle } },
                    tags,
                },
                { parent: this, protect: true },
            );
            trustOf = (service) => anchor.arn.apply((a) => JSON.stringify(rolesAnywhereTrustPolicy(a, `${cn}-${service}`)));
            legacyTrust = anchor.arn.apply((a) => JSON.stringify(rolesAnywhereTrustPolicy(a, cn)));
            contractOf = (roles) => {
                const profile = new aws.rolesanywhere.Profile(
                    `${name}-profile`,
                    {
                        name: `${args.hub}-spoke-${args.spoke}`,
                        enabled: true,
                        roleArns: [...SPOKE_SERVICES.map((sv) => roles[sv].arn), ...legacyArns],
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
                        name: sourceUserName(args.spoke, slot.id, args.namePrefix),
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
            trustOf = (service) =>
                pulumi.all(users.map((u) => u.user.arn)).apply((arns) =>
                    JSON.stringify(
                        spokeTrustPolicy(
                            arns.map((arn, i) => ({ arn, ...limitsOf(users[i].slot) })),
                            SPOKE_AWS_SERVICES[service].sessionName,
                        ),
                    ),
                );
            legacyTrust = pulumi
                .all(users.map((u) => u.user.arn))
                .apply((arns) => JSON.stringify(spokeTrustPolicy(arns.map((arn, i) => ({ arn, ...limitsOf(users[i].slot) })))));
            // The source users' policies name the roles, which are created below (their trust names the users).
            let rolesCreated!: (arns: pulumi.Output<string[]>) => void;
            const roleArnsOf = pulumi.output(new Promise<pulumi.Output<string[]>>((resolve) => (rolesCreated = resolve)));
            const secrets = new Map<string, aws.secretsmanager.Secret>();
            for (const { slot, user } of users) {
                new aws.iam.UserPolicy(
                    `${name}-assume-${slot.id}`,
                    {
                        user: user.name,
                        policy: roleArnsOf.apply((r) => JSON.stringify(sourceUserPolicy(r, limitsOf(slot)))),
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
                        name: keySecretName(args.spoke, slot.id, args.namePrefix),
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
            contractOf = (roles) => {
                rolesCreated(pulumi.all([...SPOKE_SERVICES.map((sv) => roles[sv].arn), ...legacyArns]));
                return secrets
                    .get(active)!
                    .arn.apply((secretArn) => ({ mode: "access-key" as const, secretArn, region: args.region, slot: active }));
            };
        }

        const purpose: Record<SpokeService, string> = {
            auth: "Policy bundle reader / ACK writer",
            metering: "Usage producer / policy bundle reader",
        };
        const roles = Object.fromEntries(
            SPOKE_SERVICES.map((service) => {
                const sa = SPOKE_AWS_SERVICES[service];
                const role = new aws.iam.Role(
                    `${name}-${service}-role`,
                    {
                        namePrefix: spokeRoleNamePrefix(args.hub, args.spoke, service),
                        path: "/platform/spokes/",
                        description: `${purpose[service]} of spoke ${args.spoke} (${sa.namespace}/${sa.serviceAccount}) of hub ${args.hub}`,
                        assumeRolePolicy: trustOf(service),
                        maxSessionDuration: 3600,
                        tags: { ...tags, "platform:service": service },
                    },
                    // New resources: the previous release's single role keeps its own name (`<name>-role`, below).
                    { parent: this },
                );
                new aws.iam.RolePolicy(
                    `${name}-${service}-permissions`,
                    {
                        role: role.name,
                        policy: pulumi
                            .all([args.bucketArn, args.kmsKeyArn, args.usageStreamArn, args.accountId])
                            .apply(([bucketArn, kmsKeyArn, usageStreamArn, bucketOwner]) =>
                                JSON.stringify(
                                    spokeServicePolicy(service, {
                                        spoke: args.spoke,
                                        bucketArn,
                                        bucketOwner,
                                        kmsKeyArn,
                                        region: args.region,
                                        usageStreamArn,
                                        egressCidrs,
                                    }),
                                ),
                            ),
                    },
                    parent,
                );
                return [service, role];
            }),
        ) as Record<SpokeService, aws.iam.Role>;

        // MIGRATION, REMOVE IN LEGACY_SPOKE_ROLE.removeIn (components/hub/legacy-spoke-role.ts): the previous release's
        // single role, under its old resource and physical name with its old trust and policy, so a spoke that has not
        // run `up` on this release yet keeps its AWS access.
        if (args.keepLegacyRole) {
            const legacy = new aws.iam.Role(
                `${name}-role`,
                {
                    name: legacySpokeRoleName(args.spoke),
                    path: LEGACY_SPOKE_ROLE.path,
                    description: legacySpokeRoleDescription(args.spoke),
                    assumeRolePolicy: legacyTrust,
                    maxSessionDuration: LEGACY_SPOKE_ROLE.maxSessionDuration,
                    tags,
                },
                { parent: this, deleteBeforeReplace: true },
            );
            new aws.iam.RolePolicy(
                `${name}-permissions`,
                {
                    role: legacy.name,
                    policy: pulumi
                        .all([args.bucketArn, args.kmsKeyArn, args.usageStreamArn, args.accountId])
                        .apply(([bucketArn, kmsKeyArn, usageStreamArn, bucketOwner]) =>
                            JSON.stringify(
                                legacySpokeRolePolicy({
                                    spoke: args.spoke,
                                    bucketArn,
                                    bucketOwner,
                                    kmsKeyArn,
                                    region: args.region,
                                    usageStreamArn,
                                    egressCidrs,
                                }),
                            ),
                        ),
                },
                parent,
            );
            legacyArns = [legacy.arn];
        }

        this.legacyRoleArn = legacyArns[0];
        this.contract = contractOf(roles);
        this.roleArns = Object.fromEntries(SPOKE_SERVICES.map((sv) => [sv, roles[sv].arn])) as Record<SpokeService, pulumi.Output<string>>;
        this.roleArn = roles.auth.arn;
        this.registerOutputs({ roleArns: this.roleArns, contract: this.contract });
    }
}
