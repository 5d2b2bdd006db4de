import type { AwsCall } from "../services/shared/aws-calls";
import { keyAdministration } from "./kms";
import type { PolicyDocument } from "./policy-document";

/**
 * The two AWS roles CI assumes through GitHub OIDC, and the KMS key that encrypts the hub's Pulumi state.
 *
 * - **preview** (`vars.AWS_PREVIEW_ROLE_ARN`, .github/workflows/preview.yml): runs a pull request's own code, so it
 *   can read nothing secret. It is allowed exactly the calls a spoke's `pulumi preview` makes ({@link PREVIEW_AWS_CALLS},
 *   {@link previewReadPolicy}: no managed read-only policy, whose reads include Lambda environments, log events and
 *   objects), and the guard's explicit denies ({@link previewGuardPolicy}) stay beside it: no Secrets Manager value, no
 *   KMS decryption except S3 reading the state objects, no role hopping, no key-policy changes. Trusted only by jobs of
 *   the `preview-<stack>` environments on a pull request's ref.
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
 * `sub` = `repo:<owner>/<repo>:environment:<name>`; customised with `include_claim_keys` [repo, context, ref]:
 * `repo:<owner>/<repo>:environment:<name>:ref:<ref>`, {@link GITHUB_SUBJECT_CLAIM_KEYS}); IAM user guide "Available keys for OIDC federation"
 * (`<provider>:aud`, `<provider>:sub`); Pulumi docs "Secrets: Available Encryption Providers" (`awskms://`).
 */

/** An IAM or KMS policy document (the subset written here). */
export type CiPolicyDocument = PolicyDocument;

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
 * Under the mocks only (tools/mock-outputs.ts): the caller ARN `aws.getCallerIdentity` returns. Unset, the mocks'
 * caller is a render user that deploys nothing, and the hub's deployer check (programs/hub.ts) is not made.
 */
export const MOCK_CALLER_ARN_ENV = "PLATFORM_MOCK_CALLER_ARN";

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

/** A CI role: `preview` (pull-request previews) or `deploy` (`up` on `main`). */
export type CiRole = keyof typeof CI_ROLE_VARIABLES;

/**
 * Claims of the repository's customised OIDC subject (GitHub REST "Set the customization template for an OIDC subject
 * claim for a repository", `PUT /repos/{owner}/{repo}/actions/oidc/customization/sub`). With them a job's `sub` is
 * `repo:<owner>/<repo>:environment:<name>:ref:<git ref>` (GitHub docs "OpenID Connect reference", customizing the
 * subject claims: claims joined in this order, `context` being `environment:<name>` for a job with an environment),
 * so the trust pins the ref as well as the environment: a branch that reaches the `production` environment (a
 * misconfigured deployment-branch rule, a `workflow_dispatch` on a branch) still cannot assume the deploy role.
 */
export const GITHUB_SUBJECT_CLAIM_KEYS = ["repo", "context", "ref"] as const;
/** The one git ref the deploy role trusts (up.yml runs on pushes to `main`). */
export const DEPLOY_REF = "refs/heads/main";
/** A `sub` with more than the customised subject's five ':' ({@link GITHUB_SUBJECT_CLAIM_KEYS}): StringNotLike of the preview trust. */
export const SUBJECT_WITH_EXTRA_COLON = "*:*:*:*:*:*:*";
/** The refs a pull request's jobs run on (`pull_request` events: `refs/pull/<number>/merge`). */
export const PREVIEW_REF_PATTERN = "refs/pull/*/merge";

/**
 * The one-time `gh api` call that makes GitHub issue this repository's tokens with {@link GITHUB_SUBJECT_CLAIM_KEYS}
 * (repository admin; `gh api repos/<repo>/actions/oidc/customization/sub` shows it). Until it is made, every CI token
 * carries GitHub's default subject (`repo:<repo>:environment:<name>`), which neither role accepts.
 * @throws Error when `repo` is not `owner/name`
 */
export function githubSubjectCustomizationCommand(repo: string): string {
    if (!/^[\w.-]+\/[\w.-]+$/.test(repo)) throw new Error(`githubSubjectCustomizationCommand: "${repo}" is not owner/name`);
    return `gh api --method PUT repos/${repo}/actions/oidc/customization/sub -F use_default=false ${GITHUB_SUBJECT_CLAIM_KEYS.map((k) => `-f 'include_claim_keys[]=${k}'`).join(" ")}`;
}

/**
 * The `sub` claim each role accepts (the customised subject, {@link GITHUB_SUBJECT_CLAIM_KEYS}): exactly the
 * `preview-<stack>` environment of each stack in `previewStacks`, on a pull request's merge ref (pattern), or exactly
 * the production environment on `main`. Never an environment pattern: a job that names an environment which does not
 * exist yet makes GitHub create it, with no protection rules (GitHub docs, "Deployments and environments"; the
 * behaviour github/docs#3126 asks to document), so `preview-*` would admit a pull request whose workflow names a new
 * `preview-…` environment, past the reviewers the real ones require.
 * @throws Error for a `repo` that is not owner/name, a preview role without stacks, or a stack name that is not a
 *   plain stack name.
 */
export function githubSubjects(
    repo: string,
    role: CiRole,
    previewStacks: readonly string[] = [],
): { operator: "StringLike" | "StringEquals"; values: string[] } {
    if (!/^[\w.-]+\/[\w.-]+$/.test(repo)) throw new Error(`githubSubjects: "${repo}" is not owner/name`);
    if (role === "deploy")
        return { operator: "StringEquals", values: [`repo:${repo}:environment:${DEPLOY_ENVIRONMENT}:ref:${DEPLOY_REF}`] };
    if (!previewStacks.length) throw new Error("githubSubjects: the preview role needs the stacks whose preview environments it trusts");
    const bad = previewStacks.filter((st) => !/^[a-z0-9][a-z0-9-]*$/.test(st));
    if (bad.length) throw new Error(`githubSubjects: ${bad.join(", ")} not a stack name (lowercase letters, digits, '-')`);
    return {
        operator: "StringLike",
        values: [...new Set(previewStacks)]
            .sort()
            .map((st) => `repo:${repo}:environment:${PREVIEW_ENVIRONMENT_PREFIX}${st}:ref:${PREVIEW_REF_PATTERN}`),
    };
}

/**
 * Pure: trust policy of a CI role: GitHub's OIDC provider in this account, `aud` = sts.amazonaws.com and `sub` pinned
 * to the role's environments and refs ({@link githubSubjects}). A pull request cannot obtain the deploy role: its jobs
 * run in `preview-<stack>` environments on `refs/pull/*`, and the deploy role needs the `production` environment on `main`
 * (whatever the environment's branch rules say).
 * @throws Error for a `repo` that is not owner/name, a preview role without stacks, or a stack name that is not a
 *   plain stack name ({@link githubSubjects})
 */
export function githubOidcTrustPolicy(x: {
    partition?: string;
    accountId: string;
    repo: string;
    role: CiRole;
    /** The preview role: the spoke stacks under `stacks/` (hubs are never previewed) (their `preview-<stack>` environments, {@link githubSubjects}). */
    previewStacks?: readonly string[];
}): CiPolicyDocument {
    const sub = githubSubjects(x.repo, x.role, x.previewStacks);
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
                        : {
                              StringEquals: aud,
                              StringLike: { [`${GITHUB_OIDC_HOST}:sub`]: sub.values },
                              // The pattern's `*` (the pull request number) also matches ':'. A subject has exactly five
                              // (repo:R:environment:E:ref:F; owner/name and a pull request ref have none), so one with a
                              // sixth names an environment or ref crafted to reach the pattern (an environment called
                              // `preview-<stack>:ref:refs/pull/1`, created unprotected on first use): refused.
                              StringNotLike: { [`${GITHUB_OIDC_HOST}:sub`]: SUBJECT_WITH_EXTRA_COLON },
                          },
            },
        ],
    };
}

/**
 * One call of a spoke's `pulumi preview` as the CI preview role (an {@link AwsCall}); `invoke` names the Pulumi AWS
 * invoke that makes it (test/ci-roles.test.ts fails when spoke code calls an invoke no row lists).
 *
 * Placeholders: `{partition}`, `{account}`, `{region}` (the hub's), `{previewRole}` (its name), `{stateBucket}`,
 * `{project}` (`platform`, Pulumi.yaml), `{stack}` (a spoke stack), `{hubOutputsPrefix}` (`HUB_OUTPUTS_S3_URI`'s
 * bucket/prefix), `{hub}` (a hub stack).
 */
export interface PreviewAwsCall extends AwsCall {
    invoke?: string;
}

/**
 * Every AWS call a `pulumi preview --policy-pack policies` of a spoke makes with the preview role (preview.yml). A
 * preview does not refresh and reads no resource: besides the invokes below (programs/eks-spoke.ts and
 * components/spoke/), the engine reads the spoke's checkpoint from the S3 state backend and the job fetches the hub's
 * published outputs. Kubernetes is reached through the cluster's access entry (AmazonEKSViewPolicy), not IAM.
 *
 * Sources:
 * - pulumi/pulumi@v3.248.0:pkg/backend/diy/backend.go: the DIY backend reads `.pulumi/meta.yaml` and
 *   `.pulumi/stacks/<project>/<stack>.json` (gocloud.dev blob: GetObject, listing for stack select); `Preview` goes
 *   straight to `apply` with `DryRun: true`, so it takes no lock and writes no history or backup (`Update` locks);
 * - hashicorp/terraform-provider-aws (bridged by pulumi/pulumi-aws@v7.48.0): the provider checks its credentials
 *   with sts:GetCallerIdentity (as `aws.getCallerIdentity` does); `internal/service/iam/session_context_data_source.go`
 *   calls iam:GetRole (`findRoleByName`) for an assumed-role ARN (`aws.iam.getSessionContext`,
 *   components/spoke/EksCluster.ts without `platform:cluster.access.deployRoleArn`); `aws.ec2.getInstanceType` is
 *   EC2 DescribeInstanceTypes (components/spoke/EfaNodeGroup.ts);
 * - AWS S3 user guide "Using server-side encryption with AWS KMS keys": S3 decrypts an SSE-KMS object by calling
 *   kms:Decrypt with the caller's credentials (`kms:ViaService` = `s3.<region>.amazonaws.com`), and only for an object
 *   the caller may read.
 */
export const PREVIEW_AWS_CALLS: readonly PreviewAwsCall[] = [
    {
        source: "components/spoke/EksCluster.ts",
        invoke: "aws.getCallerIdentity",
        action: "sts:GetCallerIdentity",
        resource: "*",
        context: { "aws:SecureTransport": "true" },
        purpose: "the AWS provider's credential check and the spoke's account id",
    },
    {
        source: "components/spoke/EksCluster.ts",
        invoke: "aws.iam.getSessionContext",
        action: "iam:GetRole",
        resource: "arn:{partition}:iam::{account}:role/{previewRole}",
        context: { "aws:SecureTransport": "true" },
        purpose: "the role behind the preview's session (the EKS deploy access entry's default principal)",
    },
    {
        source: "components/spoke/EfaNodeGroup.ts",
        invoke: "aws.ec2.getInstanceType",
        action: "ec2:DescribeInstanceTypes",
        resource: "*",
        context: { "aws:SecureTransport": "true", "aws:RequestedRegion": "{region}" },
        purpose: "GPUs, EFA interfaces and network cards of the node groups' instance type",
    },
    {
        source: "components/spoke/EksCluster.ts",
        invoke: "aws.getPartition",
        action: "sts:GetCallerIdentity",
        resource: "*",
        context: { "aws:SecureTransport": "true" },
        purpose: "the partition (answered by the provider from its configuration; listed so the invoke scan knows it)",
    },
    {
        source: ".github/workflows/preview.yml",
        action: "s3:ListBucket",
        resource: "arn:{partition}:s3:::{stateBucket}",
        context: { "aws:SecureTransport": "true", "s3:prefix": ".pulumi/stacks/{project}/" },
        purpose: "the DIY backend lists the project's stacks (stack select)",
    },
    {
        source: ".github/workflows/preview.yml",
        action: "s3:GetObject",
        resource: "arn:{partition}:s3:::{stateBucket}/.pulumi/meta.yaml",
        context: { "aws:SecureTransport": "true" },
        purpose: "the backend's format version",
    },
    {
        source: ".github/workflows/preview.yml",
        action: "s3:GetObject",
        resource: "arn:{partition}:s3:::{stateBucket}/.pulumi/stacks/{project}/{stack}.json",
        context: { "aws:SecureTransport": "true" },
        purpose: "the spoke's checkpoint (its secrets stay encrypted with the spokes' passphrase)",
    },
    {
        source: ".github/workflows/preview.yml",
        action: "kms:Decrypt",
        resource: "arn:{partition}:kms:{region}:{account}:key/00000000-0000-0000-0000-000000000000",
        context: {
            "aws:SecureTransport": "true",
            "kms:ViaService": "s3.{region}.amazonaws.com",
        },
        purpose: "S3 decrypting the state bucket's SSE-KMS objects (only those: S3 asks KMS for an object the role may GetObject)",
    },
    {
        source: ".github/workflows/preview.yml",
        action: "s3:GetObject",
        resource: "arn:{partition}:s3:::{hubOutputsPrefix}{hub}.json",
        context: { "aws:SecureTransport": "true" },
        purpose: "the hub's published outputs (PLATFORM_HUB_OUTPUTS; aws s3 cp)",
    },
];

/**
 * Secret-bearing reads the preview role must never make, whatever a pull request's code asks: test/ci-roles.test.ts
 * simulates each against {@link previewReadPolicy} and {@link previewGuardPolicy} and expects a deny.
 */
export const PREVIEW_FORBIDDEN_READS: ReadonlyArray<{ action: string; resource: string }> = [
    {
        action: "secretsmanager:GetSecretValue",
        resource: "arn:{partition}:secretsmanager:{region}:{account}:secret:platform/tenants/acme/api-keys-AbCdEf",
    },
    { action: "secretsmanager:BatchGetSecretValue", resource: "*" },
    { action: "ssm:GetParameter", resource: "arn:{partition}:ssm:{region}:{account}:parameter/db/password" },
    { action: "ssm:GetParameters", resource: "arn:{partition}:ssm:{region}:{account}:parameter/db/password" },
    { action: "ssm:GetParametersByPath", resource: "arn:{partition}:ssm:{region}:{account}:parameter/db" },
    { action: "ssm:GetParameterHistory", resource: "arn:{partition}:ssm:{region}:{account}:parameter/db/password" },
    { action: "lambda:GetFunction", resource: "arn:{partition}:lambda:{region}:{account}:function:platform-usage-consumer" },
    { action: "lambda:GetFunctionConfiguration", resource: "arn:{partition}:lambda:{region}:{account}:function:platform-usage-consumer" },
    {
        action: "logs:GetLogEvents",
        resource: "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/platform-usage-consumer:log-stream:x",
    },
    { action: "logs:FilterLogEvents", resource: "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/platform-usage-consumer" },
    { action: "logs:StartQuery", resource: "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/platform-usage-consumer" },
    { action: "s3:GetObject", resource: "arn:{partition}:s3:::{stateBucket}/.pulumi/stacks/{project}/{hub}.json" },
    { action: "s3:GetObject", resource: "arn:{partition}:s3:::{stateBucket}/.pulumi/history/{project}/{stack}/x.checkpoint.json" },
    { action: "s3:GetObject", resource: "arn:{partition}:s3:::platform-usage-failed-batches-{account}-{region}/batch.json" },
    { action: "s3:GetObject", resource: "arn:{partition}:s3:::platform-policy-bundles-{account}-{region}/spokes/sg1/acks/1.json" },
    { action: "s3:GetObjectVersion", resource: "arn:{partition}:s3:::{stateBucket}/.pulumi/stacks/{project}/{stack}.json" },
    { action: "kms:Decrypt", resource: "arn:{partition}:kms:{region}:{account}:key/11111111-2222-3333-4444-555555555555" },
    { action: "kinesis:GetRecords", resource: "arn:{partition}:kinesis:{region}:{account}:stream/platform-usage-sg1" },
    { action: "kinesis:GetShardIterator", resource: "arn:{partition}:kinesis:{region}:{account}:stream/platform-usage-sg1" },
    { action: "sqs:ReceiveMessage", resource: "arn:{partition}:sqs:{region}:{account}:platform-usage-failures" },
    { action: "rds-db:connect", resource: "arn:{partition}:rds-db:{region}:{account}:dbuser:cluster-ABC/ledger_reader" },
    { action: "rds:DownloadDBLogFilePortion", resource: "arn:{partition}:rds:{region}:{account}:db:platform-ledger-1" },
    { action: "dynamodb:GetItem", resource: "arn:{partition}:dynamodb:{region}:{account}:table/any" },
    { action: "ec2:GetPasswordData", resource: "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0" },
    { action: "ec2:DescribeInstanceAttribute", resource: "arn:{partition}:ec2:{region}:{account}:instance/i-0123456789abcdef0" },
    { action: "eks:DescribeCluster", resource: "arn:{partition}:eks:{region}:{account}:cluster/platform-sg1" },
    { action: "iam:GetRole", resource: "arn:{partition}:iam::{account}:role/platform-ci-deploy" },
    { action: "cloudformation:GetTemplate", resource: "arn:{partition}:cloudformation:{region}:{account}:stack/x/1" },
];

/**
 * Pure: fills the `{name}` placeholders of a {@link PREVIEW_AWS_CALLS} or {@link PREVIEW_FORBIDDEN_READS} string from
 * `vars` (`{ partition, region, account, ... }`).
 * @throws Error naming the placeholder and the text when `vars` has no value for one
 */
export function fillPreviewPlaceholders(text: string, vars: Record<string, string>): string {
    return text.replace(/\{(\w+)\}/g, (_m, k: string) => {
        if (!(k in vars)) throw new Error(`fillPreviewPlaceholders: no value for {${k}} in "${text}"`);
        return vars[k];
    });
}

/** Where a preview reads its state and its hub: the S3 state bucket and the published hub outputs. */
export interface PreviewReadScope {
    partition?: string;
    accountId: string;
    /** Region of the state bucket and the hub (its KMS key). */
    region: string;
    /** Name of the role (ciNames().previewRole): its own iam:GetRole. */
    previewRole: string;
    /** S3 state bucket (`PULUMI_BACKEND_URL` s3://<bucket>); absent on Pulumi Cloud (no S3 statements). */
    stateBucket?: string;
    /** `vars.HUB_OUTPUTS_S3_URI` (`s3://<bucket>/<prefix>/`). */
    hubOutputsUri: string;
    /** Pulumi project (Pulumi.yaml `name`). */
    project?: string;
    /** Hub stack names: their checkpoints are refused explicitly even inside the state prefix. */
    hubStacks: string[];
}

/**
 * Pure: the preview role's one allow policy: exactly {@link PREVIEW_AWS_CALLS}, nothing of a managed read-only policy.
 * The spoke checkpoints are every `.pulumi/stacks/<project>/*.json` (a new region's stack file needs no role change)
 * but a hub's, which is also denied by name; no checkpoint history or backup (denied); KMS only through S3 in the
 * state's region for the state bucket.
 * @throws Error when `hubOutputsUri` is not `s3://<bucket>/<prefix>`, or its prefix is empty or under `.pulumi/`
 */
export function previewReadPolicy(x: PreviewReadScope): CiPolicyDocument {
    const p = x.partition ?? "aws";
    const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/(.*)$/.exec(x.hubOutputsUri);
    if (!m) throw new Error(`previewReadPolicy: hubOutputsUri "${x.hubOutputsUri}" is not s3://<bucket>/<prefix>/`);
    // The published outputs' grant is `<prefix>*.json`: an empty prefix, or one that is (or leads into) `.pulumi/`, would
    // open the state's own checkpoints, history and backups in the same bucket (the hub's included).
    if (!m[2] || m[2].startsWith(".pulumi/") || ".pulumi/".startsWith(m[2]))
        throw new Error(
            `previewReadPolicy: hubOutputsUri "${x.hubOutputsUri}" (vars.HUB_OUTPUTS_S3_URI) needs a prefix of its own outside .pulumi/, e.g. s3://${m[1]}/hub-outputs/`,
        );
    const project = x.project ?? "platform";
    const statements: CiPolicyDocument["Statement"] = [
        {
            Sid: "ProviderAndInvokes",
            Effect: "Allow",
            Action: ["sts:GetCallerIdentity", "ec2:DescribeInstanceTypes"],
            Resource: "*",
        },
        {
            Sid: "OwnSessionContext",
            Effect: "Allow",
            Action: ["iam:GetRole"],
            Resource: `arn:${p}:iam::${x.accountId}:role/${x.previewRole}`,
        },
        { Sid: "PublishedHubOutputs", Effect: "Allow", Action: ["s3:GetObject"], Resource: `arn:${p}:s3:::${m[1]}/${m[2]}*.json` },
    ];
    if (x.stateBucket) {
        const bucket = `arn:${p}:s3:::${x.stateBucket}`;
        statements.push(
            {
                Sid: "ListSpokeStacks",
                Effect: "Allow",
                Action: ["s3:ListBucket"],
                Resource: bucket,
                Condition: { StringLike: { "s3:prefix": [".pulumi/", ".pulumi/stacks/", `.pulumi/stacks/${project}/*`] } },
            },
            {
                Sid: "SpokeCheckpoints",
                Effect: "Allow",
                Action: ["s3:GetObject"],
                Resource: [`${bucket}/.pulumi/meta.yaml`, `${bucket}/.pulumi/stacks/${project}/*.json`],
            },
            {
                Sid: "StateObjectsThroughS3",
                Effect: "Allow",
                Action: ["kms:Decrypt"],
                Resource: `arn:${p}:kms:${x.region}:${x.accountId}:key/*`,
                // Only through S3, so only for objects the role may GetObject (the spoke checkpoints). A tighter
                // `kms:EncryptionContext:aws:s3:arn` condition is not added: the simulator the tests run cannot
                // evaluate colon-suffixed condition keys (components/hub/ApiKeys.ts says the same).
                Condition: { StringEquals: { "kms:ViaService": `s3.${x.region}.amazonaws.com` } },
            },
        );
        // Pulumi's DIY backend keeps every stack's past checkpoints under `.pulumi/history/` and `.pulumi/backups/`
        // (pulumi/pulumi@v3.248.0:sdk/go/common/workspace/paths.go HistoryDir, BackupDir): never for a preview.
        statements.push({
            Sid: "NoCheckpointHistoryOrBackups",
            Effect: "Deny",
            Action: ["s3:GetObject", "s3:GetObjectVersion"],
            Resource: [`${bucket}/.pulumi/history/*`, `${bucket}/.pulumi/backups/*`],
        });
        if (x.hubStacks.length)
            statements.push({
                Sid: "NoHubCheckpoint",
                Effect: "Deny",
                Action: ["s3:GetObject", "s3:GetObjectVersion"],
                Resource: [...x.hubStacks].sort().map((h) => `${bucket}/.pulumi/stacks/${project}/${h}.json*`),
            });
    }
    return { Version: "2012-10-17", Statement: statements };
}

/**
 * Pure: the preview role's guard, an inline policy of explicit denies beside {@link previewReadPolicy} (kept so a
 * broader policy attached by mistake still cannot reach these): no secret value, no parameter, no KMS use except S3
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
 * @throws Error when the administrators are empty (lib/kms.ts `keyAdministration`)
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
