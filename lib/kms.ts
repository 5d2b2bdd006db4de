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
 * Pure: who administers the hub's KMS keys ({@link keyAdministration}) and the controls of its buckets
 * (lib/policy-document.ts `denyUnlessAdministrators`): the hub deployers (`platform:hubDeployers`) and the
 * break-glass roles of `platform:keyAdministrators`, without duplicates, sorted (IAM role ARNs).
 */
export function hubAdministrators(cfg: { hubDeployers: readonly string[]; keyAdministrators: readonly string[] }): string[] {
    return [...new Set([...cfg.hubDeployers, ...cfg.keyAdministrators])].sort();
}

/** Key metadata every principal of the account may read with an IAM policy that allows it (no change, no use). */
export const KEY_READ_ACTIONS = ["kms:Describe*", "kms:List*", "kms:Get*"];

/**
 * Pure: the administration statements of every hub key. Only `administrators` (the hub deployers, who create and
 * update the keys, and any break-glass role of `platform:keyAdministrators`) may administer the key
 * ({@link KEY_ADMIN_ACTIONS}: change its policy, disable it, schedule its deletion); the account root only lets IAM
 * policies read its metadata, so an account administrator outside them cannot rewrite the policy and then decrypt.
 * Lockout safety (AWS KMS developer guide, "Default key policy" and PutKeyPolicy's `BypassPolicyLockoutSafetyCheck`,
 * which Pulumi leaves false): KMS refuses a key policy that the principal setting it could not change afterwards, so
 * the hub's `up`, run as a hub deployer, keeps itself an administrator; a run by anyone else stops at the first key.
 * @throws Error when `administrators` is empty (the key could never be administered)
 */
export function keyAdministration(x: {
    accountId: string;
    partition?: string;
    administrators: readonly string[];
}): Array<Record<string, unknown>> {
    const admins = [...new Set(x.administrators)].sort();
    if (!admins.length) throw new Error("a hub key needs at least one administrator (platform:hubDeployers)");
    return [
        { Sid: "KeyAdministration", Effect: "Allow", Principal: { AWS: admins }, Action: KEY_ADMIN_ACTIONS, Resource: "*" },
        {
            Sid: "AccountReadsKeyMetadata",
            Effect: "Allow",
            Principal: { AWS: `arn:${x.partition ?? "aws"}:iam::${x.accountId}:root` },
            Action: KEY_READ_ACTIONS,
            Resource: "*",
        },
    ];
}

/**
 * Pure: a key policy that lets the named administrators ({@link keyAdministration}) administer the key, and lets the account's principals (with an IAM policy
 * that allows it) use it only through the named AWS services in the hub's region (`kms:ViaService`) from this account
 * (`kms:CallerAccount`): the default key policy (`kms:*` to the account) would let any principal with a broad IAM
 * policy decrypt directly. `services` are service endpoints' first labels (`s3`, `rds`, `secretsmanager`).
 * Source: AWS KMS developer guide, "kms:ViaService" and "Default key policy".
 * @throws Error when `logGroups` are given and `partition` is not `aws` ({@link logGroupKeyStatement})
 */
export function serviceOnlyKeyPolicy(x: {
    accountId: string;
    region: string;
    services: string[];
    partition?: string;
    /** Who administers the key: the hub deployers and `platform:keyAdministrators`. */
    administrators: readonly string[];
    /**
     * CloudWatch Logs log groups (names, in the hub's account and region) encrypted with the key: CloudWatch Logs
     * uses it as its regional service principal, for exactly these log groups ({@link logGroupKeyStatement}).
     */
    logGroups?: readonly string[];
}): Record<string, unknown> {
    const partition = x.partition ?? "aws";
    const root = `arn:${partition}:iam::${x.accountId}:root`;
    return {
        Version: "2012-10-17",
        Statement: [
            ...keyAdministration(x),
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
            ...(x.logGroups?.length ? [logGroupKeyStatement({ ...x, partition, logGroups: x.logGroups })] : []),
        ],
    };
}

/** ARN of a CloudWatch Logs log group, as CloudWatch Logs puts it in the encryption context (no `:*` suffix). */
export function logGroupArn(x: { partition?: string; region: string; accountId: string; name: string }): string {
    return `arn:${x.partition ?? "aws"}:logs:${x.region}:${x.accountId}:log-group:${x.name}`;
}

/**
 * Pure: CloudWatch Logs' regional service principal in the `aws` partition, `logs.<region>.amazonaws.com` (AWS
 * CloudWatch Logs user guide, "Encrypt log data in CloudWatch Logs using AWS Key Management Service", step 2). Other
 * partitions name their service principals under other domains (`aws-cn`: `amazonaws.com.cn`), which this platform
 * does not render: refused rather than guessed.
 * @throws Error naming the partition when it is not `aws`
 */
export function logsServicePrincipal(partition: string, region: string): string {
    if (partition !== "aws")
        throw new Error(
            `CloudWatch Logs' service principal in partition ${partition} is not logs.${region}.amazonaws.com; the hub's key policies are written for the aws partition only (deploy the hub in an aws-partition region)`,
        );
    return `logs.${region}.amazonaws.com`;
}

/**
 * Pure: the key policy statement that lets CloudWatch Logs encrypt and decrypt the named log groups with the key: the
 * regional service principal `logs.<region>.amazonaws.com`, only with the encryption context
 * `kms:EncryptionContext:aws:logs:arn` of one of those log groups (AWS CloudWatch Logs user guide, "Encrypt log data
 * in CloudWatch Logs using AWS Key Management Service", step 2: its actions and condition). No other log group, in
 * this account or another, can use the key.
 * @throws Error when `partition` is not `aws` ({@link logsServicePrincipal})
 */
export function logGroupKeyStatement(x: { partition?: string; region: string; accountId: string; logGroups: readonly string[] }) {
    return {
        Sid: "CloudWatchLogsLogGroups",
        Effect: "Allow",
        Principal: { Service: logsServicePrincipal(x.partition ?? "aws", x.region) },
        Action: ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
        Resource: "*",
        Condition: {
            ArnEquals: { "kms:EncryptionContext:aws:logs:arn": x.logGroups.map((name) => logGroupArn({ ...x, name })) },
        },
    };
}

/** The KMS actions CloudWatch needs on an SSE-KMS SNS topic's key to publish an alarm to it. */
export const CLOUDWATCH_TOPIC_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey"] as const;

/** Whether an IAM action pattern (`kms:*`, `kms:GenerateDataKey*`) covers `action` (case-insensitive, `*` and `?`). */
function actionCovers(pattern: string, action: string): boolean {
    const re = new RegExp(
        `^${pattern
            .replace(/[.+^${}()|[\]\\]/g, "\\$&")
            .replace(/\*/g, ".*")
            .replace(/\?/g, ".")}$`,
        "i",
    );
    return re.test(action);
}

/**
 * Pure: why CloudWatch could not publish alarms to an SNS topic encrypted under a key with this key policy, or
 * undefined when it can. CloudWatch encrypts the message with the topic's key as the service principal
 * `cloudwatch.amazonaws.com` and needs `kms:Decrypt` and `kms:GenerateDataKey*` from the key policy (AWS CloudWatch user
 * guide, "Using Amazon CloudWatch alarms", SNS topics with server-side encryption; the AWS managed key `aws/sns`
 * does not allow it). Closed world: only an unconditioned Allow to that principal counts; a statement open to every
 * principal, or a Deny that may apply, is refused rather than guessed at.
 */
export function cloudWatchTopicKeyProblem(policy: unknown): string | undefined {
    type Statement = { Sid?: string; Effect?: string; Principal?: unknown; Action?: string | string[]; Condition?: unknown };
    const statements: Statement[] = [(policy as { Statement?: Statement | Statement[] } | undefined)?.Statement ?? []].flat();
    const principals = (p: unknown): string[] => {
        if (p === "*") return ["*"];
        const q = (p ?? {}) as { Service?: string | string[]; AWS?: string | string[] };
        return [q.Service ?? [], q.AWS ?? []].flat().map(String);
    };
    const actions = (s: Statement): string[] => [s.Action ?? []].flat().map(String);
    const toCloudWatch = (s: Statement) => principals(s.Principal).some((p) => p === "cloudwatch.amazonaws.com");
    for (const s of statements) {
        if (s.Effect === "Allow" && principals(s.Principal).includes("*") && !s.Condition)
            return `statement ${s.Sid ?? "(no Sid)"} lets every principal use the key`;
        if (s.Effect === "Deny" && (toCloudWatch(s) || principals(s.Principal).includes("*")))
            if (CLOUDWATCH_TOPIC_KEY_ACTIONS.some((a) => actions(s).some((p) => actionCovers(p, a))))
                return `statement ${s.Sid ?? "(no Sid)"} may deny cloudwatch.amazonaws.com the key`;
    }
    const missing = CLOUDWATCH_TOPIC_KEY_ACTIONS.filter(
        (a) =>
            !statements.some((s) => s.Effect === "Allow" && toCloudWatch(s) && !s.Condition && actions(s).some((p) => actionCovers(p, a))),
    );
    return missing.length
        ? `no unconditioned Allow of ${missing.join(" and ")} to the service principal cloudwatch.amazonaws.com`
        : undefined;
}
