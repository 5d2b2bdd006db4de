import { inBucketAccount } from "../../lib/policy-document";
import { bundlePaths } from "../../services/shared/bundle";
import type { PolicyDocument } from "./SpokeIdentity";

/**
 * MIGRATION, REMOVE IN THE NEXT RELEASE: the previous release's single spoke role, kept for one release.
 *
 * The previous release gave each spoke one role, `platform-spoke-<spoke>` under `/platform/spokes/`, used by both the
 * auth service and metering; this release gives each service its own role ({@link SPOKE_AWS_SERVICES}, named by
 * prefix). A running spoke keeps using the old role's ARN (its Pod Identity associations, the auth and metering
 * configuration) until its own `pulumi up` reads the new contract, so deleting the old role on the hub's `up` would
 * cut every spoke's AWS access (no bundle, no ACK, no usage) until then. The hub therefore keeps the old role, under
 * its old resource name and with the previous release's trust and policy (the functions below, copied from it), until
 * every spoke has run `up` on this release. `LEGACY_SPOKE_ROLE.removeIn` names the release that deletes it; the
 * removal is: delete this file and the `legacy` block of SpokeIdentity.ts (test/hub-legacy-role.test.ts says what
 * it keeps).
 *
 * One change to the copied policy: every S3 grant requires the bucket to be the hub's account's
 * (`s3:ResourceAccount`, as SpokeIdentity.ts `spokeServicePolicy` does). It takes nothing from an old spoke, whose
 * calls (services/auth/aws-calls.ts, services/metering/aws-calls.ts) all go to the hub's own bucket, and stops its
 * credentials reaching a bucket of the same name in another account. The KMS grant already has the current roles'
 * condition (`kms:ViaService`, S3 in the bucket's region) and the key ARN names the hub's key.
 */
export const LEGACY_SPOKE_ROLE = {
    /** The release that removes the old role (every spoke must have run `up` on the release before it). */
    removeIn: "0.3.0",
    path: "/platform/spokes/",
    maxSessionDuration: 3600,
} as const;

/** The previous release's role name of a spoke (fixed, not per hub). */
export function legacySpokeRoleName(spoke: string): string {
    return `platform-spoke-${spoke}`;
}

/** The previous release's role description (kept byte-identical so the role is not updated). */
export function legacySpokeRoleDescription(spoke: string): string {
    return `Policy bundle reader / ACK writer / usage producer for spoke ${spoke}`;
}

/**
 * Pure: the previous release's role permissions (one role for auth and metering): read the spoke's current pointer
 * and bundles, list its prefix, write its ACKs (each only in a bucket of `bucketOwner`, the hub's account:
 * `s3:ResourceAccount`), use the bucket key through S3 in the bucket's region, put usage records on its stream;
 * on-prem with egress ranges, every direct call only from them.
 */
export function legacySpokeRolePolicy(x: {
    spoke: string;
    bucketArn: string;
    /** The hub's account, which owns the bucket: every S3 grant requires it (`s3:ResourceAccount`). */
    bucketOwner: string;
    kmsKeyArn: string;
    region: string;
    usageStreamArn?: string;
    egressCidrs?: string[];
}): PolicyDocument {
    const prefix = bundlePaths.prefix(x.spoke);
    const statements: PolicyDocument["Statement"] = [
        {
            Sid: "ReadOwnBundles",
            Effect: "Allow",
            Action: ["s3:GetObject", "s3:GetObjectVersion"],
            Resource: [`${x.bucketArn}/${bundlePaths.current(x.spoke)}`, `${x.bucketArn}/${prefix}bundles/*`],
            Condition: inBucketAccount(x.bucketOwner),
        },
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
        {
            Sid: "UseBucketKeyViaS3",
            Effect: "Allow",
            Action: ["kms:Decrypt", "kms:GenerateDataKey"],
            Resource: x.kmsKeyArn,
            Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
        },
    ];
    if (x.usageStreamArn)
        statements.push({
            Sid: "PutUsageEvents",
            Effect: "Allow",
            Action: ["kinesis:PutRecord", "kinesis:PutRecords"],
            Resource: x.usageStreamArn,
        });
    if (x.egressCidrs?.length)
        statements.push({
            Sid: "DenyOutsideSiteEgress",
            Effect: "Deny",
            Action: ["s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:PutObject", "kinesis:PutRecord", "kinesis:PutRecords"],
            Resource: "*",
            Condition: { NotIpAddress: { "aws:SourceIp": [...x.egressCidrs] }, Bool: { "aws:ViaAWSService": "false" } },
        });
    return { Version: "2012-10-17", Statement: statements };
}

/**
 * Pure: the previous release's Pod Identity trust: the spoke's cluster, either of the two service accounts that
 * call AWS (auth in the gateway namespace, metering in the platform namespace).
 */
export function legacyPodIdentityTrustPolicy(
    accountId: string,
    clusterArn: string,
    serviceAccounts: ReadonlyArray<{ namespace: string; serviceAccount: string }>,
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
