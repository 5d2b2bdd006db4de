import { keyAdministration } from "./kms";

/**
 * The two AWS roles CI assumes through GitHub OIDC, and the KMS key that encrypts the hub's Pulumi state.
 *
 * - **preview** (`vars.AWS_PREVIEW_ROLE_ARN`, .github/workflows/preview.yml): runs a pull request's own code, so it
 *   can read nothing secret: no Secrets Manager value, no KMS decryption except S3 reading its (SSE-KMS) state
 *   objects, no role hopping, no key-policy changes ({@link previewGuardPolicy}, explicit denies that win over any
 *   read-only policy attached beside it). Trusted only by jobs of the `preview-<stack>` environments.
 * - **deploy** (`vars.AWS_DEPLOY_ROLE_ARN`, .github/workflows/up.yml): applies stacks after merge; trusted only by jobs
 *   of the protected `production` environment. It is one of the hub file's `platform:hubDeployers`.
 * - **hub state key** ({@link hubStateKeyPolicy}): the hub stack's Pulumi secrets provider
 *   (`awskms://alias/platform-hub-state?region=<region>`); only the hub deployers may decrypt, so nobody holding a
 *   stack passphrase or the preview role can read a secret of the hub's state.
 *
 * They exist before the program's first run (CI needs them to run it), so the program does not create them;
 * `npm run ci-roles` prints these documents for the operator (README "What the operator provides").
 *
 * Sources: GitHub docs "Configuring OpenID Connect in Amazon Web Services" (provider host, `aud` sts.amazonaws.com,
 * `sub` condition) and "OpenID Connect reference" (a job with an `environment` gets
 * `sub` = `repo:<owner>/<repo>:environment:<name>`); IAM user guide "Available keys for OIDC federation"
 * (`<provider>:aud`, `<provider>:sub`); Pulumi docs "Secrets: Available Encryption Providers" (`awskms://`).
 */

/** An IAM or KMS policy document (the subset written here). */
export interface CiPolicyDocument {
    Version: "2012-10-17";
    Statement: Array<{
        Sid: string;
        Effect: "Allow" | "Deny";
        Action: string[];
        Resource?: string | string[];
        Principal?: Record<string, string | string[]>;
        Condition?: Record<string, Record<string, string | string[]>>;
    }>;
}

/** Host of GitHub Actions' OIDC token issuer (the IAM OIDC provider's URL without https://). */
export const GITHUB_OIDC_HOST = "token.actions.githubusercontent.com";
/** Audience configure-aws-credentials requests (aws-actions/configure-aws-credentials@v4: `audience` default). */
export const GITHUB_OIDC_AUDIENCE = "sts.amazonaws.com";
/** GitHub environment of the deploy jobs (up.yml); protected: required reviewers, deployments from `main` only. */
export const DEPLOY_ENVIRONMENT = "production";
/** Prefix of the preview jobs' environments (preview.yml: `preview-<stack>`). */
export const PREVIEW_ENVIRONMENT_PREFIX = "preview-";
/** Repository variables naming each role (never one shared variable). */
export const CI_ROLE_VARIABLES = { preview: "AWS_PREVIEW_ROLE_ARN", deploy: "AWS_DEPLOY_ROLE_ARN" } as const;
/** Alias of the hub state key (the hub's `secretsprovider: awskms://alias/platform-hub-state?region=<region>`). */
export const HUB_STATE_KEY_ALIAS = "alias/platform-hub-state";

/** Set to `1` by tools/harness.ts while it runs a program under Pulumi mocks (an offline render or a test). */
export const OFFLINE_RENDER_ENV = "PLATFORM_OFFLINE_RENDER";

/**
 * Pure: the CI role names and the hub state key alias for a hub's `platform:namePrefix` (default `platform`:
 * `platform-ci-preview`, `platform-ci-deploy`, {@link HUB_STATE_KEY_ALIAS}), so two hubs in one account do not share them.
 */
export function ciNames(namePrefix = "platform"): { previewRole: string; deployRole: string; stateKeyAlias: string } {
    return {
        previewRole: `${namePrefix}-ci-preview`,
        deployRole: `${namePrefix}-ci-deploy`,
        stateKeyAlias: `alias/${namePrefix}-hub-state`,
    };
}

export type CiRole = keyof typeof CI_ROLE_VARIABLES;

/** The `sub` claim each role accepts: the preview environments (pattern) or exactly the production environment. */
export function githubSubjects(repo: string, role: CiRole): { operator: "StringLike" | "StringEquals"; values: string[] } {
    if (!/^[\w.-]+\/[\w.-]+$/.test(repo)) throw new Error(`githubSubjects: "${repo}" is not owner/name`);
    return role === "preview"
        ? { operator: "StringLike", values: [`repo:${repo}:environment:${PREVIEW_ENVIRONMENT_PREFIX}*`] }
        : { operator: "StringEquals", values: [`repo:${repo}:environment:${DEPLOY_ENVIRONMENT}`] };
}

/**
 * Pure: trust policy of a CI role: GitHub's OIDC provider in this account, `aud` = sts.amazonaws.com and `sub` pinned
 * to the role's environments ({@link githubSubjects}). A pull request cannot obtain the deploy role: its jobs run in
 * `preview-*` environments, and the `production` environment admits only deployments from `main`.
 */
export function githubOidcTrustPolicy(x: { partition?: string; accountId: string; repo: string; role: CiRole }): CiPolicyDocument {
    const sub = githubSubjects(x.repo, x.role);
    const aud = { [`${GITHUB_OIDC_HOST}:aud`]: GITHUB_OIDC_AUDIENCE };
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: x.role === "preview" ? "GitHubPreviewEnvironmentsOnly" : "GitHubProductionEnvironmentOnly",
                Effect: "Allow",
                Principal: { Federated: `arn:${x.partition ?? "aws"}:iam::${x.accountId}:oidc-provider/${GITHUB_OIDC_HOST}` },
                Action: ["sts:AssumeRoleWithWebIdentity"],
                Condition:
                    sub.operator === "StringEquals"
                        ? { StringEquals: { ...aud, [`${GITHUB_OIDC_HOST}:sub`]: sub.values } }
                        : { StringEquals: aud, StringLike: { [`${GITHUB_OIDC_HOST}:sub`]: sub.values } },
            },
        ],
    };
}

/**
 * Pure: the preview role's guard, an inline policy of explicit denies attached beside whatever read-only policy the
 * previews need (AWS managed `ReadOnlyAccess`, or narrower): no secret value, no parameter, no KMS use except S3
 * decrypting the state bucket's objects in the state's region, no role assumption, no key-policy or grant changes, no
 * access key or password created, changed or deleted.
 * @param region region of the state bucket (S3 may use KMS there on the role's behalf)
 */
export function previewGuardPolicy(x: { region: string }): CiPolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "NoSecretValues",
                Effect: "Deny",
                Action: [
                    "secretsmanager:GetSecretValue",
                    "secretsmanager:BatchGetSecretValue",
                    "ssm:GetParameter",
                    "ssm:GetParameters",
                    "ssm:GetParametersByPath",
                ],
                Resource: "*",
            },
            {
                Sid: "NoKeyUseButStateObjects",
                Effect: "Deny",
                Action: [
                    "kms:Decrypt",
                    "kms:ReEncryptFrom",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:CreateGrant",
                ],
                Resource: "*",
                Condition: { StringNotEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
            },
            { Sid: "NoKeyPolicyChanges", Effect: "Deny", Action: ["kms:PutKeyPolicy", "kms:CreateGrant"], Resource: "*" },
            { Sid: "NoRoleHopping", Effect: "Deny", Action: ["sts:AssumeRole", "sts:AssumeRoleWithWebIdentity"], Resource: "*" },
            // A preview invokes nothing: the hub's ledger Lambda reads and writes the usage ledger for the operator
            // (services/reconciler/ops.ts); `aws.lambda.Invocation` runs on `up` only.
            { Sid: "NoInvocations", Effect: "Deny", Action: ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"], Resource: "*" },
            {
                // A preview never mints a credential whose secret it would then hold (services/keys/spoke-key.ts
                // mints on-prem source keys as a hub deployer), nor retires one a site runs on.
                Sid: "NoCredentialMinting",
                Effect: "Deny",
                Action: [
                    "iam:CreateAccessKey",
                    "iam:UpdateAccessKey",
                    "iam:DeleteAccessKey",
                    "iam:CreateLoginProfile",
                    "iam:UpdateLoginProfile",
                    "iam:CreateServiceSpecificCredential",
                    "iam:ResetServiceSpecificCredential",
                ],
                Resource: "*",
            },
        ],
    };
}

/**
 * Pure: key policy of the hub state key. The account administers it (no use through IAM policies); only the hub
 * deployers (`platform:hubDeployers`: the deploy role, the operators) encrypt and decrypt with it, directly (Pulumi's
 * awskms secrets provider calls KMS itself). Nobody else can, whatever their IAM policy says.
 */
export function hubStateKeyPolicy(x: {
    partition?: string;
    accountId: string;
    deployers: string[];
    /** Break-glass administrators besides the deployers (`platform:keyAdministrators`). */
    administrators?: string[];
}): CiPolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            // Only the deployers (and break-glass roles) administer it: an account admin cannot rewrite it to decrypt.
            ...(keyAdministration({
                ...x,
                administrators: [...x.deployers, ...(x.administrators ?? [])],
            }) as CiPolicyDocument["Statement"]),
            {
                Sid: "HubDeployersOnly",
                Effect: "Allow",
                Principal: { AWS: [...new Set(x.deployers)].sort() },
                Action: ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                Resource: "*",
            },
        ],
    };
}

/**
 * Pure: why a hub stack file's secrets provider is refused, or undefined. The hub's state must be encrypted by its own
 * KMS key, `awskms://` on the alias {@link HUB_STATE_KEY_ALIAS} (or that alias's ARN), the key whose policy admits only
 * the hub deployers ({@link hubStateKeyPolicy}); any other KMS key is one this product cannot show is closed. A
 * passphrase (`encryptionsalt`, the DIY backend's default) is shared with the spoke previews that hold it, and Pulumi
 * Cloud's default provider (`secretsprovider` and `encryptedkey` absent) lets every member of the stack read its
 * secrets. A file with neither key is also what a fresh clone holds before `pulumi stack init`: accepted only for an
 * offline render (`offline`: the program runs under mocks, tools/harness.ts), refused for a real `pulumi up` or
 * `preview`, where it means Pulumi Cloud's default provider.
 */
export function hubSecretsProviderIssue(doc: Record<string, unknown>, offline = false): string | undefined {
    const provider = doc.secretsprovider;
    // The hub's own alias: `alias/<platform:namePrefix>-hub-state` ({@link ciNames}; default HUB_STATE_KEY_ALIAS).
    const prefix = (doc.config as Record<string, unknown> | undefined)?.["platform:namePrefix"];
    const alias = ciNames(typeof prefix === "string" ? prefix : undefined).stateKeyAlias;
    const fix = `run \`pulumi stack change-secrets-provider "awskms://${alias}?region=<region>"\` (README "Deploy for real")`;
    if (typeof provider === "string") {
        if (!provider.startsWith("awskms://"))
            return `the hub's state must be encrypted with its KMS key, not ${provider.split(":")[0]}: ${fix}`;
        const key = provider.slice("awskms://".length).split("?")[0];
        if (key !== alias && !new RegExp(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:\\d{12}:${alias}$`).test(key))
            return `the hub's state is encrypted with ${key}, not the hub state key ${alias} (whose policy admits only platform:hubDeployers; npm run ci-roles): ${fix}`;
        return undefined;
    }
    if ("encryptionsalt" in doc) return `the hub's state is encrypted with a passphrase (encryptionsalt), which previews hold: ${fix}`;
    if (!offline)
        return `the hub stack file names no secrets provider, so a real run uses the backend's default (on Pulumi Cloud, readable by every member of the stack): ${fix}`;
    return undefined;
}
