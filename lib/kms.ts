/**
 * Actions that administer a KMS key without using it for data (AWS KMS developer guide, "Key administrators"), with
 * `kms:CreateGrant` left out: a grant gives its grantee direct use of the key, around the `kms:ViaService` condition of
 * {@link serviceOnlyKeyPolicy} (which lets the services create their grants). `kms:PutKeyPolicy` stays: the key's
 * creator must keep it (AWS KMS "default key policy", the lockout safety check).
 */
export const KEY_ADMIN_ACTIONS = [
    "kms:CreateAlias",
    "kms:Describe*",
    "kms:Enable*",
    "kms:List*",
    "kms:Put*",
    "kms:Update*",
    "kms:Revoke*",
    "kms:Disable*",
    "kms:Get*",
    "kms:Delete*",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:ScheduleKeyDeletion",
    "kms:CancelKeyDeletion",
];

/**
 * Pure: a key policy that lets the account administer the key, and lets the account's principals (with an IAM policy
 * that allows it) use it only through the named AWS services in the hub's region (`kms:ViaService`) from this account
 * (`kms:CallerAccount`): the default key policy (`kms:*` to the account) would let any principal with a broad IAM
 * policy decrypt directly. `services` are service endpoints' first labels (`s3`, `rds`, `secretsmanager`).
 * Source: AWS KMS developer guide, "kms:ViaService" and "Default key policy".
 */
export function serviceOnlyKeyPolicy(x: {
    accountId: string;
    region: string;
    services: string[];
    partition?: string;
}): Record<string, unknown> {
    const root = `arn:${x.partition ?? "aws"}:iam::${x.accountId}:root`;
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "KeyAdministration", Effect: "Allow", Principal: { AWS: root }, Action: KEY_ADMIN_ACTIONS, Resource: "*" },
            {
                Sid: "UseOnlyThroughServices",
                Effect: "Allow",
                Principal: { AWS: root },
                Action: [
                    "kms:Decrypt",
                    "kms:Encrypt",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:ReEncryptFrom",
                    "kms:ReEncryptTo",
                    "kms:CreateGrant",
                    "kms:DescribeKey",
                ],
                Resource: "*",
                Condition: {
                    StringEquals: {
                        "kms:ViaService": x.services.map((s) => `${s}.${x.region}.amazonaws.com`),
                        "kms:CallerAccount": x.accountId,
                    },
                },
            },
        ],
    };
}
