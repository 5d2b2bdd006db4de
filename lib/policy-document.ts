/** An IAM, KMS or resource policy document (the subset the program writes). */
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

/**
 * Pure: the condition every S3 grant of the hub's roles carries: the bucket must belong to `account` (the hub's), so the
 * same call against a bucket of that name in another account is not allowed (`s3:ResourceAccount`, IAM user guide
 * "Amazon S3 condition keys"; the identity-policy side of `ExpectedBucketOwner`, services/shared/bucket-owner.ts).
 */
export function inBucketAccount(account: string): { StringEquals: { "s3:ResourceAccount": string } } {
    return { StringEquals: { "s3:ResourceAccount": account } };
}

/**
 * Pure: a statement denying `actions` on the bucket to every principal whose ARN (`aws:PrincipalArn`: a role's ARN for
 * its sessions) is not one of `administrators` (lib/kms.ts `hubAdministrators`: the hub deployers and
 * `platform:keyAdministrators`), so an account administrator outside them cannot change the bucket's controls. Not
 * covered: the account's root user can always get, put and delete a bucket policy, whatever the policy says (S3 API
 * reference, PutBucketPolicy and DeleteBucketPolicy); lifecycle expiry is not a request, so no bucket policy stops it
 * (S3 user guide, "Managing the lifecycle of objects").
 * @throws Error when `administrators` is empty (the controls could never be changed again)
 */
export function denyUnlessAdministrators(sid: string, actions: readonly string[], bucketArn: string, administrators: readonly string[]) {
    const admins = [...new Set(administrators)].sort();
    if (!admins.length) throw new Error(`${sid}: a bucket needs at least one administrator (platform:hubDeployers)`);
    return {
        Sid: sid,
        Effect: "Deny" as const,
        Principal: "*",
        Action: [...actions],
        Resource: bucketArn,
        Condition: { ArnNotEquals: { "aws:PrincipalArn": admins } },
    };
}

/**
 * The statement every bucket policy of the hub begins with: any request to the bucket or its objects not made over TLS
 * (`aws:SecureTransport` false) is denied, whoever makes it (AWS IAM user guide, "AWS global condition context keys":
 * `aws:SecureTransport`).
 */
export function denyInsecureTransport(bucketArn: string) {
    return {
        Sid: "DenyInsecureTransport",
        Effect: "Deny" as const,
        Principal: "*",
        Action: "s3:*",
        Resource: [bucketArn, `${bucketArn}/*`],
        Condition: { Bool: { "aws:SecureTransport": "false" } },
    };
}
