import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import {
    CI_ROLE_VARIABLES,
    ciNames,
    GITHUB_OIDC_AUDIENCE,
    GITHUB_OIDC_HOST,
    githubOidcTrustPolicy,
    githubSubjectCustomizationCommand,
    GITHUB_SUBJECT_CLAIM_KEYS,
    HUB_STATE_KEY_ALIAS,
    hubStateKeyPolicy,
    previewGuardPolicy,
    previewReadPolicy,
} from "../lib/ci-roles";
import { hubRegionIssue } from "../lib/aws-partition";
import { exitOnHelp } from "./cli";
import { discoverStacks, STACKS_DIR } from "../lib/stackfiles";

const HELP = `
usage: npm run ci-roles -- --hub STACK --repo OWNER/NAME --hub-outputs S3URI [--state-bucket NAME] [--account ID] [--out DIR] [--update]

Writes the policy documents of the two CI roles and of the hub state key (lib/ci-roles.ts), and prints the AWS CLI
commands that create them once, before CI's first run (the program cannot create what runs it); with --update, the
commands that update them in place. Run the commands as a role listed in platform:hubDeployers: the state key's policy
admits only those (and platform:keyAdministrators), and KMS refuses a key policy that would lock out its caller:
  subject       the repository's OIDC subject customised to repo, context, ref (the printed \`gh api\` call, once):
                both trusts pin the environment AND the git ref
  preview role  vars.${CI_ROLE_VARIABLES.preview}: GitHub OIDC trust for the preview-<stack> environment of each
                spoke stack under stacks/ (named one by one; hubs are never previewed; rerun with --update
                when a spoke is added), on refs/pull/*/merge only; allowed exactly the calls a spoke preview
                makes (lib/ci-roles.ts PREVIEW_AWS_CALLS: the spoke checkpoints, the published hub outputs, three
                invokes; no managed read-only policy), plus the guard (no secret value, no KMS use but S3's, no
                role hop)
  deploy role   vars.${CI_ROLE_VARIABLES.deploy}: GitHub OIDC trust for the production environment on
                refs/heads/main only; list it in the hub file's platform:hubDeployers before running this
                (the state key's policy names them). It applies the hub and the EKS spokes, which create IAM
                roles and policies, so it is administrator-equivalent in the hub's account: the printed command
                attaches AdministratorAccess (or attach your own policy covering IAM, KMS, Secrets Manager, S3,
                Kinesis, SQS, Lambda, RDS, EC2/VPC, EKS, Route 53, CloudWatch and IAM Roles Anywhere, plus your
                state bucket)
  hub state key ${HUB_STATE_KEY_ALIAS}: only platform:hubDeployers encrypt/decrypt (the hub's secrets provider)

Names follow the hub's platform:namePrefix (default platform: platform-ci-preview, platform-ci-deploy,
${HUB_STATE_KEY_ALIAS}).

Options:
  --hub STACK         the hub stack (stacks/Pulumi.<STACK>.yaml: aws:region, platform:hubDeployers)
  --repo OWNER/NAME   the GitHub repository whose workflows assume the roles
  --hub-outputs URI   vars.HUB_OUTPUTS_S3_URI, where up.yml publishes the hubs' outputs (s3://<bucket>/<prefix>/)
  --state-bucket NAME the S3 state backend's bucket (PULUMI_BACKEND_URL s3://<bucket>); omit on Pulumi Cloud
  --account ID        the AWS account (default: the first platform:hubDeployers entry's)
  --out DIR           where to write the JSON documents (default out/ci-roles)
  --update            the roles and key exist: print only aws iam update-assume-role-policy (both roles),
                      put-role-policy (the preview role's inline policies) and kms put-key-policy (the state key),
                      which replace them in place, and the repository's OIDC subject call again (idempotent);
                      nothing that creates (a second create-role fails, a second create-key makes another key)
  -h, --help          this text

Examples:
  npm run ci-roles -- --hub hub-prod --repo example-org/h200-platform \\
    --hub-outputs s3://platform-pulumi-state-111122223333/hub-outputs/ --state-bucket platform-pulumi-state-111122223333
  npm run ci-roles -- --hub hub-prod --repo example-org/h200-platform \\
    --hub-outputs s3://platform-pulumi-state-111122223333/hub-outputs/ --state-bucket platform-pulumi-state-111122223333 --update
`;

/** IAM's default limit on a role trust policy's length, characters without whitespace (IAM User Guide, "IAM and AWS STS quotas"). */
export const ROLE_TRUST_POLICY_DEFAULT_CHARS = 2048;
/** Parsed `npm run ci-roles` arguments. */
export interface CiRolesOptions {
    hub: string;
    repo: string;
    hubOutputs: string;
    stateBucket?: string;
    account?: string;
    out?: string;
    /** Print only commands that change existing roles and the key's policy (rerun after a stack is added): nothing that creates. */
    update?: boolean;
    /** Stack files' folder (default stacks/). */
    stacksDir?: string;
}

/**
 * Parses the command line ({@link HELP}).
 * @throws Error on an unknown or incomplete argument, or a missing --hub, --repo or --hub-outputs
 */
export function parseCiRolesArgs(argv: string[]): CiRolesOptions {
    const opt: Record<string, string> = {};
    let update = false;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === "--update") {
            update = true;
            continue;
        }
        if (!["--hub", "--repo", "--account", "--out", "--hub-outputs", "--state-bucket"].includes(a) || !argv[i + 1])
            throw new Error(`unknown or incomplete argument ${a} (npm run ci-roles -- --help)`);
        opt[a.slice(2)] = argv[++i];
    }
    if (!opt.hub || !opt.repo || !opt["hub-outputs"]) throw new Error("give --hub, --repo and --hub-outputs (npm run ci-roles -- --help)");
    return {
        hub: opt.hub,
        repo: opt.repo,
        hubOutputs: opt["hub-outputs"],
        stateBucket: opt["state-bucket"],
        account: opt.account,
        out: opt.out,
        update,
    };
}

/**
 * Writes the policy documents to `out` (default out/ci-roles) and returns the commands to print: the first-time
 * commands that create the roles and the hub state key, or with `update` only those that replace the two roles'
 * trust policies, the preview role's inline policies and the state key's policy (IAM `UpdateAssumeRolePolicy`,
 * `PutRolePolicy` and KMS `PutKeyPolicy` replace in place; a second `create-role` fails and a second `create-key`
 * makes another key).
 *
 * The preview role trusts the `preview-<stack>` environment of each SPOKE stack only: hubs are never previewed with a
 * pull request's code (preview.yml, tools/lint-workflows.mjs), so no hub environment may obtain the role.
 * @throws Error when the hub file lacks aws:region or platform:hubDeployers, or its region is not in partition aws
 */
export function ciRoles(o: CiRolesOptions): { docs: string[]; out: string; commands: string[] } {
    const stacksDir = o.stacksDir ?? STACKS_DIR;
    const file = path.join(stacksDir, `Pulumi.${o.hub}.yaml`);
    const config = YAML.parse(fs.readFileSync(file, "utf8"))?.config ?? {};
    const region: string = config["aws:region"];
    const deployers: string[] = config["platform:hubDeployers"] ?? [];
    if (!region || !deployers.length) throw new Error(`${file}: needs aws:region and platform:hubDeployers`);
    // The documents name S3 as s3.<region>.amazonaws.com (kms:ViaService) and ARNs as arn:aws: (lib/aws-partition.ts).
    const unlisted: unknown = config["platform:unlistedAwsRegions"];
    const regionIssue = hubRegionIssue(region, { acknowledged: Array.isArray(unlisted) ? unlisted.map(String) : [] });
    if (regionIssue) throw new Error(`${file}: aws:region: ${regionIssue}`);
    const accountId = o.account ?? deployers[0].split(":")[4];
    const names = ciNames(config["platform:namePrefix"] ?? undefined);
    const alias = names.stateKeyAlias;
    const out = o.out ?? path.join("out", "ci-roles");
    fs.mkdirSync(out, { recursive: true });
    const stacks = discoverStacks(stacksDir);
    // Closed world: a stack file is a hub or a spoke; anything else would slip into (or out of) the preview trust unseen.
    const odd = stacks.filter((st) => st.role !== "hub" && st.role !== "spoke");
    if (odd.length)
        throw new Error(
            `${odd.map((st) => `${st.file}: platform:role is "${st.role}"`).join("; ")}: a stack file's platform:role must be hub or spoke`,
        );
    const docs: Record<string, unknown> = {
        "preview-trust.json": githubOidcTrustPolicy({
            accountId,
            repo: o.repo,
            role: "preview",
            previewStacks: stacks.filter((st) => st.role === "spoke").map((st) => st.name),
        }),
        "preview-read.json": previewReadPolicy({
            accountId,
            region,
            previewRole: names.previewRole,
            stateBucket: o.stateBucket,
            hubOutputsUri: o.hubOutputs,
            hubStacks: stacks.filter((st) => st.role === "hub").map((st) => st.name),
        }),
        "preview-guard.json": previewGuardPolicy({ region }),
        "deploy-trust.json": githubOidcTrustPolicy({ accountId, repo: o.repo, role: "deploy" }),
        "hub-state-key-policy.json": hubStateKeyPolicy({
            accountId,
            deployers,
            administrators: config["platform:keyAdministrators"] ?? [],
        }),
    };
    for (const [name, doc] of Object.entries(docs)) fs.writeFileSync(path.join(out, name), `${JSON.stringify(doc, null, 2)}\n`);
    const deployRole = `arn:aws:iam::${accountId}:role/${names.deployRole}`;
    const asDeployer = `# run these as a role in ${file} platform:hubDeployers: the state key's policy admits only them (and platform:keyAdministrators), and KMS refuses a key policy that would lock out the caller`;
    const notListed = deployers.includes(deployRole)
        ? []
        : [
              `# NOTE: ${deployRole} is not in ${file} platform:hubDeployers yet: add it and rerun (the state key's policy names the hub deployers)`,
          ];
    // IAM counts a role trust policy's characters without whitespace, 2,048 by default (quota "Role trust policy
    // length", raisable to 4,096: IAM User Guide, "IAM and AWS STS quotas"); the preview trust names every spoke.
    const trustLength = JSON.stringify(docs["preview-trust.json"]).length;
    const trustTooLong =
        trustLength > ROLE_TRUST_POLICY_DEFAULT_CHARS
            ? [
                  `# NOTE: preview-trust.json is ${trustLength} characters, over IAM's default role trust policy length (${ROLE_TRUST_POLICY_DEFAULT_CHARS}): raise the account's "Role trust policy length" quota (Service Quotas, IAM; at most 4096) before running these, or the preview role's trust is refused`,
              ]
            : [];
    const putPreviewPolicies = [
        `aws iam put-role-policy --role-name ${names.previewRole} --policy-name preview-read --policy-document file://${out}/preview-read.json`,
        `aws iam put-role-policy --role-name ${names.previewRole} --policy-name preview-guard --policy-document file://${out}/preview-guard.json`,
    ];
    if (o.update && notListed.length)
        throw new Error(
            `${file}: platform:hubDeployers does not list ${deployRole}: an update would write a state key policy without the CI deploy role, and the hub's up in CI would fail to decrypt its state; add it first`,
        );
    const commands = o.update
        ? [
              asDeployer,
              ...trustTooLong,
              "# update the existing CI roles and hub state key in place (after a spoke stack was added, or the hub file's deployers,",
              "# key administrators or --hub-outputs/--state-bucket changed); nothing is created",
              `# the repository's OIDC subject (admin; the same setting again is a no-op): a repository set up before tokens carried the`,
              `# ref (${GITHUB_SUBJECT_CLAIM_KEYS.join(", ")}) gets no token either trust accepts until this has run once`,
              githubSubjectCustomizationCommand(o.repo),
              `aws iam update-assume-role-policy --role-name ${names.previewRole} --policy-document file://${out}/preview-trust.json`,
              ...putPreviewPolicies,
              "# a preview role set up by an earlier release may still hold the managed read-only policy: detach it (no error if absent),",
              "# then check that the role holds no attached policy and exactly the inline policies preview-read and preview-guard",
              `aws iam detach-role-policy --role-name ${names.previewRole} --policy-arn arn:aws:iam::aws:policy/ReadOnlyAccess 2>/dev/null || true`,
              `aws iam list-attached-role-policies --role-name ${names.previewRole} --query AttachedPolicies --output text`,
              `aws iam list-role-policies --role-name ${names.previewRole} --query PolicyNames --output text`,
              `aws iam update-assume-role-policy --role-name ${names.deployRole} --policy-document file://${out}/deploy-trust.json`,
              ...notListed,
              `aws kms put-key-policy --region ${region} --policy-name default --policy file://${out}/hub-state-key-policy.json \\`,
              `    --key-id "$(aws kms describe-key --region ${region} --key-id ${alias} --query KeyMetadata.KeyId --output text)"`,
          ]
        : [
              asDeployer,
              ...trustTooLong,
              `# once per repository (admin): tokens carry the ref in their subject (${GITHUB_SUBJECT_CLAIM_KEYS.join(", ")}), which both trusts require`,
              githubSubjectCustomizationCommand(o.repo),
              "# once per account: GitHub's OIDC provider (IAM fetches its certificate thumbprint itself)",
              `aws iam create-open-id-connect-provider --url https://${GITHUB_OIDC_HOST} --client-id-list ${GITHUB_OIDC_AUDIENCE}`,
              "# the preview role: exactly the reads of a spoke preview, plus the guard (explicit denies); no managed read-only policy",
              "# (an existing role that has one: aws iam detach-role-policy --policy-arn arn:aws:iam::aws:policy/ReadOnlyAccess)",
              `aws iam create-role --role-name ${names.previewRole} --assume-role-policy-document file://${out}/preview-trust.json`,
              ...putPreviewPolicies,
              "# the deploy role: it must be listed in platform:hubDeployers; it creates IAM roles and policies (administrator-",
              "# equivalent): AdministratorAccess, or your own policy for the services the stacks create (npm run ci-roles -- --help)",
              `aws iam create-role --role-name ${names.deployRole} --assume-role-policy-document file://${out}/deploy-trust.json`,
              `aws iam attach-role-policy --role-name ${names.deployRole} --policy-arn arn:aws:iam::aws:policy/AdministratorAccess`,
              ...notListed,
              "# the hub state key and its alias; then create the hub stack on it (commit the secretsprovider/encryptedkey lines)",
              `aws kms create-key --region ${region} --description "Pulumi state of the platform hub" --policy file://${out}/hub-state-key-policy.json`,
              `aws kms create-alias --region ${region} --alias-name ${alias} --target-key-id <KeyId from create-key>`,
              `pulumi stack init ${o.hub} --secrets-provider "awskms://${alias}?region=${region}"   # an existing stack: pulumi stack change-secrets-provider`,
              `# repository settings: vars.${CI_ROLE_VARIABLES.preview}=arn:aws:iam::${accountId}:role/${names.previewRole}, vars.${CI_ROLE_VARIABLES.deploy}=${deployRole}`,
              "# later (a stack added, deployers changed): npm run ci-roles -- ... --update prints the commands that update these in place",
          ];
    return { docs: Object.keys(docs), out, commands };
}

function main(argv: string[]): void {
    exitOnHelp(argv, HELP);
    const r = ciRoles(parseCiRolesArgs(argv));
    process.stdout.write([`wrote ${r.docs.join(", ")} to ${r.out}`, "", ...r.commands, ""].join("\n"));
}

if (require.main === module) {
    try {
        main(process.argv.slice(2));
    } catch (e) {
        process.stderr.write(`ci-roles: ${(e as Error).message}\n`);
        process.exit(1);
    }
}
