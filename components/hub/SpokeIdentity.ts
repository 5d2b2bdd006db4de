import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { bundlePaths } from "../../services/shared/bundle";

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
            Sid: "ReadOwnBundles", Effect: "Allow", Action: ["s3:GetObject", "s3:GetObjectVersion"],
            Resource: [`${x.bucketArn}/${bundlePaths.current(x.spoke)}`, `${x.bucketArn}/${prefix}bundles/*`],
        },
        {
            Sid: "ListOwnPrefix", Effect: "Allow", Action: ["s3:ListBucket"], Resource: x.bucketArn,
            Condition: { StringLike: { "s3:prefix": [`${prefix}*`] } },
        },
        { Sid: "WriteOwnAcks", Effect: "Allow", Action: ["s3:PutObject"], Resource: `${x.bucketArn}/${prefix}acks/*` },
        {
            Sid: "UseBucketKeyViaS3", Effect: "Allow", Action: ["kms:Decrypt", "kms:GenerateDataKey"], Resource: x.kmsKeyArn,
            Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
        },
    ];
    if (x.usageStreamArn) {
        statements.push({ Sid: "PutUsageEvents", Effect: "Allow", Action: ["kinesis:PutRecord", "kinesis:PutRecords"], Resource: x.usageStreamArn });
    }
    return { Version: "2012-10-17", Statement: statements };
}

/** Pure: trust policy letting exactly one IAM principal (the spoke's source user) assume the role. */
export function spokeTrustPolicy(principalArn: string): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [{ Sid: "SpokeSourceIdentity", Effect: "Allow", Principal: { AWS: principalArn }, Action: ["sts:AssumeRole"] }],
    };
}

/** Pure: the source user's only permission: assume its spoke role. */
export function sourceUserPolicy(roleArn: string): PolicyDocument {
    return { Version: "2012-10-17", Statement: [{ Sid: "AssumeSpokeRole", Effect: "Allow", Action: ["sts:AssumeRole"], Resource: roleArn }] };
}

/** Inputs of {@link SpokeIdentity}. */
export interface SpokeIdentityArgs {
    /** Spoke name (`platform:spokes[].name`). */
    spoke: string;
    bucketArn: pulumi.Input<string>;
    kmsKeyArn: pulumi.Input<string>;
    /** Region of the policy bucket. */
    region: string;
    /** Usage stream ARN; when set the role may put records on exactly that stream (metering). */
    usageStreamArn?: pulumi.Input<string>;
}

/** The source credentials an on-prem spoke uses to assume its role. Secret. */
export interface SpokeSourceCredentials { accessKeyId: string; secretAccessKey: string }

/**
 * The AWS identity of one spoke (least privilege, see {@link spokeRolePolicy}).
 *
 * On-prem spokes have no AWS workload identity, so the role is assumed from a per-spoke IAM user whose only
 * permission is `sts:AssumeRole` on this role. Its access key is a Pulumi secret (hub output
 * `spokeCredentials`, read by the spoke's StackReference and written to a Kubernetes Secret); the auth
 * service's AWS SDK uses the shared config file `role_arn` + `source_profile`, so every S3 call runs with
 * the role's short-lived session credentials. Rotate by replacing the access key (`pulumi up --replace`).
 * Upgrade path without a long-lived key: IAM Roles Anywhere with the site's X.509 PKI (trust anchor +
 * profile for this role), which needs a CA this repo does not have yet.
 */
export class SpokeIdentity extends pulumi.ComponentResource {
    public readonly roleArn: pulumi.Output<string>;
    public readonly roleName: pulumi.Output<string>;
    /** Source credentials (secret). */
    public readonly credentials: pulumi.Output<SpokeSourceCredentials>;

    constructor(name: string, args: SpokeIdentityArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:SpokeIdentity", name, {}, opts);
        const parent = { parent: this };
        const tags = { "platform:spoke": args.spoke };
        const user = new aws.iam.User(`${name}-source`, { path: "/platform/spokes/", tags }, parent);
        const role = new aws.iam.Role(`${name}-role`, {
            path: "/platform/spokes/",
            description: `Policy bundle reader / ACK writer for spoke ${args.spoke}`,
            assumeRolePolicy: user.arn.apply((u) => JSON.stringify(spokeTrustPolicy(u))),
            maxSessionDuration: 3600,
            tags,
        }, parent);
        new aws.iam.RolePolicy(`${name}-permissions`, {
            role: role.name,
            policy: pulumi.all([args.bucketArn, args.kmsKeyArn, args.usageStreamArn]).apply(([bucketArn, kmsKeyArn, usageStreamArn]) =>
                JSON.stringify(spokeRolePolicy({ spoke: args.spoke, bucketArn, kmsKeyArn, region: args.region, usageStreamArn }))),
        }, parent);
        new aws.iam.UserPolicy(`${name}-assume`, {
            user: user.name,
            policy: role.arn.apply((r) => JSON.stringify(sourceUserPolicy(r))),
        }, parent);
        const key = new aws.iam.AccessKey(`${name}-key`, { user: user.name }, parent);

        this.roleArn = role.arn;
        this.roleName = role.name;
        this.credentials = pulumi.secret(pulumi.all([key.id, key.secret]).apply(([accessKeyId, secretAccessKey]) => ({ accessKeyId, secretAccessKey })));
        this.registerOutputs({ roleArn: this.roleArn });
    }
}
