// `npm run lint:workflows [-- file.yml ...]`: validates GitHub Actions workflows with GitHub's own workflow
// parser (@actions/workflow-parser, from github.com/actions/languageservices: the schema and expression checks
// the Actions VS Code extension uses), then checks the separation of CI credentials (credentialErrors below).
// Default: every .github/workflows/*.yml. Exit 1 on any error.
//
// The parser's ESM build imports its JSON schema without an import attribute, which Node (20 and later) refuses; a loader
// hook (registered below, before the parser is imported) supplies `type: "json"` for .json modules.
import { register } from "node:module";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parse as parseYaml } from "yaml";

if (process.argv.includes("--help") || process.argv.includes("-h")) {
    process.stdout.write(`usage: npm run lint:workflows [-- file.yml ...]

Validates GitHub Actions workflows with GitHub's own workflow parser (@actions/workflow-parser): schema,
expressions, job graph; then the separation of CI credentials: a pull request's jobs assume only the preview role
(vars.AWS_PREVIEW_ROLE_ARN) in preview-<stack> environments and preview spokes only; the deploy role
(vars.AWS_DEPLOY_ROLE_ARN) only in jobs of the production environment, outside pull-request workflows; no shared
vars.AWS_ROLE_ARN; hub jobs get no stack passphrase; a pull request's jobs get no secret but GITHUB_TOKEN (and, in
a preview-<stack> environment's spoke preview job, that environment's PULUMI_CONFIG_PASSPHRASE, PULUMI_ACCESS_TOKEN,
KUBECONFIG); every
spoke job (preview or up) reads its hub from the published outputs (PLATFORM_HUB_OUTPUTS). Default: every .github/workflows/*.yml. Exit 1 on any error.

Examples:
  npm run lint:workflows
  npm run lint:workflows -- .github/workflows/preview.yml
`);
    process.exit(0);
}

const hook = `export async function load(url, context, next) {
  if (url.endsWith(".json") && !context.importAttributes?.type) {
    return next(url, { ...context, importAttributes: { ...context.importAttributes, type: "json" } });
  }
  return next(url, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hook)}`);
const { parseWorkflow, convertWorkflowTemplate, NoOperationTraceWriter } = await import("@actions/workflow-parser");

/** Errors of one workflow file (schema, expressions, job graph), as `file (Line: n, Col: m): message`. */
export async function lintWorkflow(name, content) {
    const parsed = parseWorkflow({ name, content }, new NoOperationTraceWriter());
    const errors = parsed.context.errors.getErrors().map((e) => e.message);
    if (errors.length === 0 && parsed.value) {
        const template = await convertWorkflowTemplate(parsed.context, parsed.value);
        for (const e of template.errors ?? []) errors.push(e.Message);
    }
    return [...new Set(errors)];
}

/** The role variables (lib/ci-roles.ts CI_ROLE_VARIABLES) and environments each may be used in. */
const PREVIEW_ROLE = "${{ vars.AWS_PREVIEW_ROLE_ARN }}";
const DEPLOY_ROLE = "${{ vars.AWS_DEPLOY_ROLE_ARN }}";

/**
 * Secrets a preview-<stack> environment holds for its one stack (.github/workflows/preview.yml header): the spoke
 * stacks' passphrase, the Pulumi Cloud token, and that site's view-only kubeconfig. Nothing else reaches a job that
 * runs a pull request's code.
 */
const PREVIEW_ENVIRONMENT_SECRETS = ["PULUMI_CONFIG_PASSPHRASE", "PULUMI_ACCESS_TOKEN", "KUBECONFIG"];

/**
 * Names of the secrets a job (or any workflow fragment) can expand: `secrets.NAME`, `secrets['NAME']`; the whole
 * context (`toJSON(secrets)`, `secrets[format(...)]`, a reusable workflow's `secrets: inherit`) reads as `*`.
 */
function secretsUsed(fragment) {
    const text = JSON.stringify(fragment ?? {});
    const names = new Set();
    for (const m of text.matchAll(
        /\bsecrets\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_-]*)|\[\s*'([A-Za-z_][A-Za-z0-9_-]*)'\s*\]|\[|\s*}})|\(\s*secrets\s*\)/g,
    ))
        names.add(m[1] ?? m[2] ?? "*");
    if (fragment?.secrets === "inherit") names.add("*");
    return [...names].sort();
}

/**
 * Credential separation of one workflow (lib/ci-roles.ts: the preview role reads no secret and cannot decrypt the
 * hub's state; the deploy role is trusted only by the production environment). Errors as `file: job: message`.
 */
export function credentialErrors(name, content) {
    const errors = [];
    let wf;
    try {
        wf = parseYaml(content);
    } catch {
        return errors; // the parser above reports it
    }
    if (!wf || typeof wf !== "object") return errors;
    const on = typeof wf.on === "string" ? [wf.on] : Array.isArray(wf.on) ? wf.on : Object.keys(wf.on ?? {});
    const fromPullRequest = on.some((t) => t === "pull_request" || t === "pull_request_target");
    if (content.includes("vars.AWS_ROLE_ARN"))
        errors.push(
            `${name}: vars.AWS_ROLE_ARN: one role per environment: vars.AWS_PREVIEW_ROLE_ARN (pull requests) or vars.AWS_DEPLOY_ROLE_ARN (production)`,
        );
    if (fromPullRequest)
        for (const s of secretsUsed({ env: wf.env, defaults: wf.defaults }))
            errors.push(
                `${name}: workflow-level secrets.${s} reaches every job of a pull-request workflow, which runs the pull request's code`,
            );
    if (on.includes("pull_request_target"))
        errors.push(`${name}: pull_request_target runs with the base repository's secrets and a writable token; previews use pull_request`);
    for (const [id, job] of Object.entries(wf.jobs ?? {})) {
        const at = `${name}: ${id}`;
        const env = typeof job.environment === "string" ? job.environment : job.environment?.name;
        const steps = job.steps ?? [];
        const text = JSON.stringify(job);
        const assumes = steps.filter((st) => typeof st.uses === "string" && st.uses.startsWith("aws-actions/configure-aws-credentials@"));
        for (const st of assumes) {
            const role = st.with?.["role-to-assume"];
            if (role === PREVIEW_ROLE) {
                if (!fromPullRequest) errors.push(`${at}: the preview role is for pull-request workflows only`);
                if (typeof env !== "string" || !env.startsWith("preview-"))
                    errors.push(`${at}: the preview role is trusted only in preview-<stack> environments (environment: ${env ?? "none"})`);
            } else if (role === DEPLOY_ROLE) {
                if (fromPullRequest) errors.push(`${at}: a pull-request workflow must never assume the deploy role`);
                if (env !== "production")
                    errors.push(`${at}: the deploy role is trusted only in the production environment (environment: ${env ?? "none"})`);
            } else errors.push(`${at}: role-to-assume must be ${PREVIEW_ROLE} or ${DEPLOY_ROLE}, not ${JSON.stringify(role)}`);
        }
        if (job.permissions?.["id-token"] === "write" && assumes.length === 0)
            errors.push(`${at}: id-token: write without an AWS role to assume (an OIDC token for nothing)`);
        if (fromPullRequest && (env === "production" || text.includes("AWS_DEPLOY_ROLE_ARN")))
            errors.push(`${at}: a pull-request workflow must not reach the production environment or the deploy role`);
        const pulumiSteps = steps.filter((st) => typeof st.uses === "string" && st.uses.startsWith("pulumi/actions@"));
        if (fromPullRequest && pulumiSteps.length) {
            for (const st of pulumiSteps)
                if (st.with?.command !== "preview")
                    errors.push(`${at}: a pull request's pulumi command must be preview, not ${st.with?.command}`);
            const matrix = JSON.stringify(job.strategy?.matrix ?? "");
            if (!/outputs\.spokes\b/.test(matrix) || /outputs\.(hubs|stacks)\b/.test(matrix))
                errors.push(
                    `${at}: a pull request previews spokes only (matrix from the check job's spokes output): a hub's state is for its deployers`,
                );
            if (!text.includes("PLATFORM_HUB_OUTPUTS"))
                errors.push(`${at}: a spoke preview reads its hub from the published outputs (PLATFORM_HUB_OUTPUTS), not a StackReference`);
        }
        if (fromPullRequest) {
            // A pull request's job runs the pull request's code (npm ci runs its install scripts, its tests, its program):
            // whatever secret the job can expand, that code can print or send away. Closed world: only the token GitHub
            // scopes to the workflow's permissions, and in a preview-<stack> environment that environment's own secrets.
            const allowed = new Set([
                "GITHUB_TOKEN",
                ...(typeof env === "string" && env.startsWith("preview-") ? PREVIEW_ENVIRONMENT_SECRETS : []),
            ]);
            const used = secretsUsed(job);
            // The environment's secrets (the spoke passphrase above all) only in the job that runs the spoke preview, which
            // needs them to open the spoke's state (a state with no key material: test/spoke-secrets.test.ts); any other
            // job of a preview-<stack> environment gets none.
            if (!pulumiSteps.some((st) => st.with?.command === "preview"))
                for (const s of used.filter((x) => PREVIEW_ENVIRONMENT_SECRETS.includes(x)))
                    errors.push(
                        `${at}: secrets.${s} in a pull-request job that runs no spoke preview: only the preview job (pulumi/actions, command: preview) may open a spoke's state`,
                    );
            for (const s of used.filter((x) => !allowed.has(x)))
                errors.push(
                    `${at}: secrets.${s} in a job that runs the pull request's code (a pull-request workflow); only GITHUB_TOKEN${
                        typeof env === "string" && env.startsWith("preview-")
                            ? ` and the preview environment's ${PREVIEW_ENVIRONMENT_SECRETS.join(", ")}`
                            : ""
                    } may reach it: move the step to a workflow or job pull requests do not trigger`,
                );
        }
        const matrix = JSON.stringify(job.strategy?.matrix ?? "");
        if (!fromPullRequest && pulumiSteps.length && /outputs\.spokes\b/.test(matrix) && !text.includes("PLATFORM_HUB_OUTPUTS"))
            errors.push(
                `${at}: a spoke run reads its hub from the signed published outputs (PLATFORM_HUB_OUTPUTS, lib/hub-publication.ts), never its state`,
            );
        if (pulumiSteps.length && /outputs\.hubs\b/.test(matrix) && JSON.stringify(job.env ?? {}).includes("PULUMI_CONFIG_PASSPHRASE"))
            errors.push(`${at}: a hub job gets no PULUMI_CONFIG_PASSPHRASE: the hub's state is encrypted with the hub state KMS key`);
    }
    return errors;
}

const dir = ".github/workflows";
const files = process.argv.slice(2).length
    ? process.argv.slice(2)
    : readdirSync(dir)
          .filter((f) => /\.ya?ml$/.test(f))
          .sort()
          .map((f) => join(dir, f));
let failed = 0;
for (const f of files) {
    const content = readFileSync(f, "utf8");
    const errors = [...(await lintWorkflow(relative(process.cwd(), f), content)), ...credentialErrors(relative(process.cwd(), f), content)];
    if (errors.length) {
        failed++;
        for (const e of errors) process.stdout.write(`${e}\n`);
    } else process.stdout.write(`${relative(process.cwd(), f)}: ok\n`);
}
process.exit(failed ? 1 : 0);
