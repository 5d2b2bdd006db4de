import { runSimulation, runUnsafeSimulation } from "@cloud-copilot/iam-simulate";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
    GITHUB_OIDC_HOST,
    GITHUB_SUBJECT_CLAIM_KEYS,
    githubOidcTrustPolicy,
    githubSubjectCustomizationCommand,
    fillPreviewPlaceholders,
    PREVIEW_AWS_CALLS,
    PREVIEW_FORBIDDEN_READS,
    previewReadPolicy,
    hubSecretsProviderIssue,
    hubStateKeyPolicy,
    previewGuardPolicy,
} from "../lib/ci-roles";
import { requireHubSecretsProvider } from "../programs/hub";
import { ciRoles, parseCiRolesArgs, ROLE_TRUST_POLICY_DEFAULT_CHARS } from "../tools/ci-roles";
import * as YAML from "yaml";
import { ROOT, STACKS, testTempDir } from "./helpers";

/**
 * The CI roles and the hub state key (lib/ci-roles.ts), evaluated by the IAM policy simulator
 * (@cloud-copilot/iam-simulate, test-only) as AWS would: trust policy for the OIDC assumption, identity + key policy
 * for KMS, identity policies for the rest.
 */

type Doc = Record<string, unknown>;
const ACCOUNT = "111122223333";
const REGION = "ap-southeast-1";
const REPO = "example-org/h200-platform";
const PREVIEW_ROLE = `arn:aws:iam::${ACCOUNT}:role/platform-ci-preview`;
const DEPLOY_ROLE = `arn:aws:iam::${ACCOUNT}:role/platform-ci-deploy`;
const OPERATOR = `arn:aws:iam::${ACCOUNT}:role/platform-operator`;
const ADMIN = `arn:aws:iam::${ACCOUNT}:role/account-admin`;
const STATE_KEY = `arn:aws:kms:${REGION}:${ACCOUNT}:key/0f0e0d0c-0b0a-0908-0706-050403020100`;
const STATE_BUCKET = "arn:aws:s3:::platform-pulumi-state-111122223333";
/** What a broad policy beside the guard would grant (worst case for the negatives: everything). */
const ALLOW_ALL: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] };

/**
 * sts:AssumeRoleWithWebIdentity against a role's trust policy with GitHub's claims. The simulator's strict entry
 * point drops condition keys it does not know for the action, and an OIDC provider's keys
 * (`token.actions.githubusercontent.com:sub`) are per provider, not in its action data (checked below), so this one
 * evaluation runs through its unvalidated entry point with exactly the claims given.
 */
function assumeWithGitHub(
    trust: Doc,
    claims: { sub?: string; aud?: string },
    provider = `arn:aws:iam::${ACCOUNT}:oidc-provider/${GITHUB_OIDC_HOST}`,
) {
    return runUnsafeSimulation(
        {
            identityPolicies: [],
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            resourcePolicy: { __validated: true, policyDocument: trust, metadata: { name: "trust" } } as any,
            request: {
                action: "sts:AssumeRoleWithWebIdentity",
                principal: provider,
                resource: { accountId: ACCOUNT, resource: `arn:aws:iam::${ACCOUNT}:role/ci` },
                contextVariables: {
                    ...(claims.aud ? { [`${GITHUB_OIDC_HOST}:aud`]: claims.aud } : {}),
                    ...(claims.sub ? { [`${GITHUB_OIDC_HOST}:sub`]: claims.sub } : {}),
                },
            },
        } as any,
        {},
    );
}

/** A strict simulation (unknown context keys refused, as test/aws-simulate.test.ts does). */
async function simulate(principal: string, identity: Doc[], action: string, resource: string, resourcePolicy?: Doc, context: Doc = {}) {
    const r: any = await runSimulation(
        {
            identityPolicies: identity.map((policy, i) => ({ name: `p${i}`, policy })),
            serviceControlPolicies: [],
            resourceControlPolicies: [],
            resourcePolicy: resourcePolicy as any,
            request: {
                action,
                principal,
                resource: { accountId: ACCOUNT, resource },
                contextVariables: {
                    "aws:PrincipalArn": principal,
                    "aws:SecureTransport": "true",
                    ...(action.startsWith("kms:") ? { "kms:CallerAccount": ACCOUNT } : {}),
                    ...context,
                },
            },
        } as any,
        {},
    );
    if (r.resultType === "error") throw new Error(JSON.stringify(r.errors));
    const ignored: string[] = r.result?.ignoredContextKeys ?? [];
    if (ignored.length) throw new Error(`the simulator ignores ${ignored.join(", ")} for ${action}`);
    return r.overallResult as string;
}

describe("simulated: who obtains each CI role through GitHub OIDC", () => {
    const preview = githubOidcTrustPolicy({
        accountId: ACCOUNT,
        repo: REPO,
        role: "preview",
        previewStacks: ["spoke-hcm1", "spoke-hn1"],
    }) as unknown as Doc;
    const deploy = githubOidcTrustPolicy({ accountId: ACCOUNT, repo: REPO, role: "deploy" }) as unknown as Doc;
    const aud = "sts.amazonaws.com";

    it("the strict simulator would drop GitHub's claims (why the trust runs through the unvalidated entry point)", async () => {
        const r: any = await runSimulation(
            {
                identityPolicies: [],
                serviceControlPolicies: [],
                resourceControlPolicies: [],
                resourcePolicy: deploy as any,
                request: {
                    action: "sts:AssumeRoleWithWebIdentity",
                    principal: `arn:aws:iam::${ACCOUNT}:oidc-provider/${GITHUB_OIDC_HOST}`,
                    resource: { accountId: ACCOUNT, resource: DEPLOY_ROLE },
                    contextVariables: {
                        [`${GITHUB_OIDC_HOST}:sub`]: `repo:${REPO}:environment:production`,
                        [`${GITHUB_OIDC_HOST}:aud`]: aud,
                    },
                },
            } as any,
            {},
        );
        expect([...r.result.ignoredContextKeys].sort()).toEqual([`${GITHUB_OIDC_HOST}:aud`, `${GITHUB_OIDC_HOST}:sub`]);
    });

    // The customised subject (lib/ci-roles.ts GITHUB_SUBJECT_CLAIM_KEYS: repo, context, ref).
    const sub = (env: string, ref: string, repo = REPO) => `repo:${repo}:environment:${env}:ref:${ref}`;

    it("preview role: only the preview-<stack> environments of this repository on a pull request's ref, audience sts.amazonaws.com", () => {
        expect(assumeWithGitHub(preview, { sub: sub("preview-spoke-hn1", "refs/pull/42/merge"), aud })).toBe("Allowed");
        expect(assumeWithGitHub(preview, { sub: sub("preview-spoke-hcm1", "refs/pull/7/merge"), aud })).toBe("Allowed");
        // the trust names each stack's environment, never a pattern; a preview role for no stack is refused
        expect(() => githubOidcTrustPolicy({ accountId: ACCOUNT, repo: REPO, role: "preview" })).toThrow(/needs the stacks/);
        expect(() => githubOidcTrustPolicy({ accountId: ACCOUNT, repo: REPO, role: "preview", previewStacks: ["*"] })).toThrow(
            /\* not a stack name/,
        );
        for (const s of [
            sub("production", "refs/pull/42/merge"),
            sub("preview-spoke-hn1", "refs/heads/main"),
            `repo:${REPO}:environment:preview-spoke-hn1`,
            `repo:${REPO}:pull_request`,
            `repo:${REPO}:ref:refs/heads/main`,
            sub("preview-spoke-hn1", "refs/pull/42/merge", "other-org/h200-platform"),
            // an environment a pull request's workflow names and GitHub creates on the fly, without reviewers
            sub("preview-anything", "refs/pull/42/merge"),
            sub("preview-spoke-hn1-x", "refs/pull/42/merge"),
            sub("preview-spoke-sg1", "refs/pull/42/merge"),
            // hubs are never previewed with a pull request's code: npm run ci-roles names no hub (tested below)
            sub("preview-hub-prod", "refs/pull/42/merge"),
            // the pattern's * also matches ':': an environment named to carry a ref of its own, on a branch ending in /merge
            `repo:${REPO}:environment:preview-spoke-hn1:ref:refs/pull/1:ref:refs/heads/x/merge`,
            `repo:${REPO}:environment:preview-spoke-hn1:ref:refs/pull/1:x/merge`,
        ])
            expect(assumeWithGitHub(preview, { sub: s, aud }), s).toBe("ImplicitlyDenied");
        expect(assumeWithGitHub(preview, { sub: sub("preview-spoke-hn1", "refs/pull/42/merge"), aud: "api://other" })).toBe(
            "ImplicitlyDenied",
        );
        expect(assumeWithGitHub(preview, { aud })).toBe("ImplicitlyDenied");
    });

    it("deploy role: exactly the production environment on main; never a pull request's job, another branch or another provider", () => {
        expect(assumeWithGitHub(deploy, { sub: sub("production", "refs/heads/main"), aud })).toBe("Allowed");
        for (const s of [
            // A pull request's branch that reached the production environment (a loose deployment-branch rule, a
            // workflow_dispatch on the branch): refused by the ref, whatever the environment allows.
            sub("production", "refs/heads/feature-x"),
            sub("production", "refs/pull/42/merge"),
            sub("production", "refs/tags/v1"),
            // GitHub's default subject (the customisation not made yet, or reset): names no ref, so it is refused.
            `repo:${REPO}:environment:production`,
            sub("preview-spoke-hn1", "refs/heads/main"),
            sub("production-copy", "refs/heads/main"),
            `repo:${REPO}:pull_request`,
            `repo:${REPO}:ref:refs/heads/main`,
            sub("production", "refs/heads/main", "other-org/h200-platform"),
        ])
            expect(assumeWithGitHub(deploy, { sub: s, aud }), s).toBe("ImplicitlyDenied");
        expect(assumeWithGitHub(deploy, { sub: sub("production", "refs/heads/main") })).toBe("ImplicitlyDenied");
        expect(
            assumeWithGitHub(
                deploy,
                { sub: sub("production", "refs/heads/main"), aud },
                `arn:aws:iam::${ACCOUNT}:oidc-provider/gitlab.com`,
            ),
        ).toBe("ImplicitlyDenied");
    });

    it("the one-time subject customisation is printed as GitHub's REST call, with the claims the trusts expect", () => {
        expect(githubSubjectCustomizationCommand(REPO)).toBe(
            `gh api --method PUT repos/${REPO}/actions/oidc/customization/sub -F use_default=false -f 'include_claim_keys[]=repo' -f 'include_claim_keys[]=context' -f 'include_claim_keys[]=ref'`,
        );
        expect(GITHUB_SUBJECT_CLAIM_KEYS).toEqual(["repo", "context", "ref"]);
        expect(() => githubSubjectCustomizationCommand("x; rm -rf /")).toThrow(/not owner\/name/);
    });

    it("refuses a repository that is not owner/name", () => {
        expect(() => githubOidcTrustPolicy({ accountId: ACCOUNT, repo: "*", role: "deploy" })).toThrow(/not owner\/name/);
    });
});

describe("simulated: the preview role reads no secret and cannot decrypt the hub's state", () => {
    const guard = previewGuardPolicy({ region: REGION }) as unknown as Doc;
    const stateKey = hubStateKeyPolicy({ accountId: ACCOUNT, deployers: [DEPLOY_ROLE, OPERATOR] }) as unknown as Doc;
    const kmsAll: Doc = { Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "kms:*", Resource: "*" }] };

    it("hub state key: the deployers decrypt and encrypt; the preview role (even allowed everything) and an account admin cannot", async () => {
        for (const d of [DEPLOY_ROLE, OPERATOR])
            for (const a of ["kms:Decrypt", "kms:Encrypt"])
                expect(await simulate(d, [kmsAll], a, STATE_KEY, stateKey), `${d} ${a}`).toBe("Allowed");
        expect(await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "kms:Decrypt", STATE_KEY, stateKey)).toBe("ExplicitlyDenied");
        // Not even through a service, and without the guard the key policy alone still refuses it.
        expect(
            await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "kms:Decrypt", STATE_KEY, stateKey, {
                "kms:ViaService": `secretsmanager.${REGION}.amazonaws.com`,
            }),
        ).toBe("ExplicitlyDenied");
        expect(await simulate(PREVIEW_ROLE, [ALLOW_ALL], "kms:Decrypt", STATE_KEY, stateKey)).toBe("ImplicitlyDenied");
        expect(await simulate(ADMIN, [ALLOW_ALL], "kms:Decrypt", STATE_KEY, stateKey)).toBe("ImplicitlyDenied");
        // Nor can it rewrite the key policy or grant itself use.
        for (const a of ["kms:PutKeyPolicy", "kms:CreateGrant"])
            expect(await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], a, STATE_KEY, stateKey), a).toBe("ExplicitlyDenied");
    });

    it("hub state key: an account admin outside the deployers cannot rewrite its policy, disable it or schedule its deletion; a break-glass role can", async () => {
        const BREAK_GLASS = `arn:aws:iam::${ACCOUNT}:role/platform-break-glass`;
        const withBreakGlass = hubStateKeyPolicy({
            accountId: ACCOUNT,
            deployers: [DEPLOY_ROLE, OPERATOR],
            administrators: [BREAK_GLASS],
        }) as unknown as Doc;
        for (const a of ["kms:PutKeyPolicy", "kms:ScheduleKeyDeletion", "kms:DisableKey"]) {
            expect(await simulate(ADMIN, [ALLOW_ALL], a, STATE_KEY, stateKey), `admin ${a}`).toBe("ImplicitlyDenied");
            expect(await simulate(ADMIN, [ALLOW_ALL], a, STATE_KEY, withBreakGlass), `admin ${a}`).toBe("ImplicitlyDenied");
            for (const d of [DEPLOY_ROLE, OPERATOR])
                expect(await simulate(d, [kmsAll], a, STATE_KEY, stateKey), `${d} ${a}`).toBe("Allowed");
            expect(await simulate(BREAK_GLASS, [kmsAll], a, STATE_KEY, withBreakGlass), `break-glass ${a}`).toBe("Allowed");
        }
        // The account's principals still read its metadata (with an IAM policy that allows it).
        expect(await simulate(ADMIN, [ALLOW_ALL], "kms:DescribeKey", STATE_KEY, stateKey)).toBe("Allowed");
    });

    it("no secret value, parameter or role hop, whatever policy sits beside the guard", async () => {
        const secret = `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:platform/tenants/acme/api-keys-AbCdEf`;
        expect(await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "secretsmanager:GetSecretValue", secret)).toBe("ExplicitlyDenied");
        expect(await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "ssm:GetParameter", `arn:aws:ssm:${REGION}:${ACCOUNT}:parameter/x`)).toBe(
            "ExplicitlyDenied",
        );
        expect(await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "sts:AssumeRole", DEPLOY_ROLE)).toBe("ExplicitlyDenied");
    });

    it("what a preview needs stays allowed: reading the state objects, S3 decrypting them under the bucket's key", async () => {
        expect(
            await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "s3:GetObject", `${STATE_BUCKET}/.pulumi/stacks/platform/spoke-sg1.json`),
        ).toBe("Allowed");
        const bucketKey = `arn:aws:kms:${REGION}:${ACCOUNT}:key/11111111-2222-3333-4444-555555555555`;
        const defaultKeyPolicy: Doc = {
            Version: "2012-10-17",
            Statement: [{ Effect: "Allow", Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` }, Action: "kms:*", Resource: "*" }],
        };
        expect(
            await simulate(PREVIEW_ROLE, [ALLOW_ALL, guard], "kms:Decrypt", bucketKey, defaultKeyPolicy, {
                "kms:ViaService": `s3.${REGION}.amazonaws.com`,
            }),
        ).toBe("Allowed");
    });
});

describe("simulated: the preview role is allowed exactly the calls of a spoke preview (no managed read-only policy)", () => {
    const STATE = "platform-pulumi-state-111122223333";
    const scope = {
        accountId: ACCOUNT,
        region: REGION,
        previewRole: "platform-ci-preview",
        stateBucket: STATE,
        hubOutputsUri: `s3://${STATE}/hub-outputs/`,
        hubStacks: ["hub-prod"],
    };
    const policies = [previewReadPolicy(scope), previewGuardPolicy({ region: REGION })] as unknown as Doc[];
    const vars = {
        partition: "aws",
        account: ACCOUNT,
        region: REGION,
        previewRole: "platform-ci-preview",
        stateBucket: STATE,
        project: "platform",
        stack: "spoke-sg1",
        hub: "hub-prod",
        hubOutputsPrefix: `${STATE}/hub-outputs/`,
    };
    const fill = (x: string) => fillPreviewPlaceholders(x, vars);
    /** The state bucket key's policy: a KMS key's default (the account delegates to IAM policies). */
    const accountKeyPolicy: Doc = {
        Version: "2012-10-17",
        Statement: [{ Effect: "Allow", Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` }, Action: "kms:*", Resource: "*" }],
    };
    const keyPolicyFor = (action: string) => (action.startsWith("kms:") ? accountKeyPolicy : undefined);
    const fillContext = (c: Record<string, string | string[]>) =>
        Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Array.isArray(v) ? v.map(fill) : fill(v)]));

    it("every call in PREVIEW_AWS_CALLS is allowed, with the context it really carries", async () => {
        const refused: string[] = [];
        for (const c of PREVIEW_AWS_CALLS) {
            const d = await simulate(PREVIEW_ROLE, policies, c.action, fill(c.resource), keyPolicyFor(c.action), fillContext(c.context));
            if (d !== "Allowed") refused.push(`${c.action} ${fill(c.resource)}: ${d}`);
        }
        expect(refused).toEqual([]);
    });

    it("every secret-bearing read is denied: secrets, parameters, Lambda environments, log events, the hub's and the ledger's objects, keys, streams, queues", async () => {
        const allowed: string[] = [];
        for (const r of PREVIEW_FORBIDDEN_READS) {
            // kms:Decrypt directly (through S3 it is allowed for the objects the role may read, below).
            const d = await simulate(PREVIEW_ROLE, policies, r.action, fill(r.resource), keyPolicyFor(r.action));
            if (d === "Allowed") allowed.push(`${r.action} ${fill(r.resource)}`);
        }
        expect(allowed).toEqual([]);
        expect(PREVIEW_FORBIDDEN_READS.map((r) => r.action)).toEqual(
            expect.arrayContaining([
                "secretsmanager:GetSecretValue",
                "ssm:GetParameter",
                "lambda:GetFunction",
                "lambda:GetFunctionConfiguration",
                "logs:GetLogEvents",
                "logs:FilterLogEvents",
                "kms:Decrypt",
                "kinesis:GetRecords",
                "sqs:ReceiveMessage",
            ]),
        );
    });

    it("KMS only through S3 (so only for objects it may read: the ledger's and policy bucket's are refused at S3), never directly", async () => {
        const key = `arn:aws:kms:${REGION}:${ACCOUNT}:key/11111111-2222-3333-4444-555555555555`;
        expect(
            await simulate(PREVIEW_ROLE, policies, "kms:Decrypt", key, accountKeyPolicy, {
                "kms:ViaService": `s3.${REGION}.amazonaws.com`,
            }),
        ).toBe("Allowed");
        for (const via of [undefined, `secretsmanager.${REGION}.amazonaws.com`, "s3.us-east-1.amazonaws.com"])
            expect(
                await simulate(PREVIEW_ROLE, policies, "kms:Decrypt", key, accountKeyPolicy, via ? { "kms:ViaService": via } : {}),
                String(via),
            ).not.toBe("Allowed");
        for (const bucket of [`platform-policy-bundles-${ACCOUNT}-${REGION}`, `platform-usage-failed-batches-${ACCOUNT}-${REGION}`])
            expect(await simulate(PREVIEW_ROLE, policies, "s3:GetObject", `arn:aws:s3:::${bucket}/x.json`), bucket).toBe(
                "ImplicitlyDenied",
            );
    });

    it("the published outputs' prefix is never empty nor in .pulumi/; checkpoint history and backups are denied even beside a broader allow", async () => {
        for (const uri of [`s3://${STATE}/`, `s3://${STATE}/.pulumi/`, `s3://${STATE}/.pulumi/hub-outputs/`, `s3://${STATE}/.pul`])
            expect(() => previewReadPolicy({ ...scope, hubOutputsUri: uri }), uri).toThrow(
                /HUB_OUTPUTS_S3_URI\) needs a prefix of its own outside \.pulumi\//,
            );
        const broader: Doc = {
            Version: "2012-10-17",
            Statement: [{ Effect: "Allow", Action: "s3:GetObject", Resource: `arn:aws:s3:::${STATE}/*` }],
        };
        for (const key of [
            ".pulumi/history/platform/hub-prod/hub-prod-1733100000.checkpoint.json",
            ".pulumi/history/platform/spoke-sg1/spoke-sg1-1733100000.checkpoint.json",
            ".pulumi/backups/platform/hub-prod/hub-prod.1733100000.json",
        ])
            for (const action of ["s3:GetObject", "s3:GetObjectVersion"])
                expect(await simulate(PREVIEW_ROLE, [...policies, broader], action, `arn:aws:s3:::${STATE}/${key}`), key).toBe(
                    "ExplicitlyDenied",
                );
    });

    it("on Pulumi Cloud (no state bucket) nothing of S3 but the published hub outputs", async () => {
        const cloud = [previewReadPolicy({ ...scope, stateBucket: undefined })] as unknown as Doc[];
        expect(await simulate(PREVIEW_ROLE, cloud, "s3:GetObject", `arn:aws:s3:::${STATE}/hub-outputs/hub-prod.json`)).toBe("Allowed");
        expect(await simulate(PREVIEW_ROLE, cloud, "s3:GetObject", `arn:aws:s3:::${STATE}/.pulumi/stacks/platform/spoke-sg1.json`)).toBe(
            "ImplicitlyDenied",
        );
        expect(() => previewReadPolicy({ ...scope, hubOutputsUri: "https://example.com/x" })).toThrow(/not s3:\/\/<bucket>\/<prefix>\//);
    });

    it("every Pulumi AWS invoke in the spoke programs is a row of PREVIEW_AWS_CALLS (a new invoke fails here until listed and simulated)", () => {
        const files = (dir: string): string[] =>
            fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
                const p = path.join(dir, e.name);
                return e.isDirectory() ? files(p) : /\.ts$/.test(e.name) ? [p] : [];
            });
        // The hub is never previewed with the preview role (preview.yml previews spokes only).
        const spokeCode = [
            ...files(path.join(ROOT, "programs")),
            ...files(path.join(ROOT, "components", "spoke")),
            ...files(path.join(ROOT, "lib")),
        ].filter((f) => !f.endsWith(`programs${path.sep}hub.ts`));
        const invokes = new Set<string>();
        for (const f of spokeCode)
            for (const m of fs.readFileSync(f, "utf8").matchAll(/\baws\.((?:[a-z0-9]+\.)?get[A-Z]\w*?)(?:Output)?\(/g))
                invokes.add(`aws.${m[1]}`);
        expect(invokes.size).toBeGreaterThan(0);
        const listed = new Set(PREVIEW_AWS_CALLS.map((c) => c.invoke).filter(Boolean));
        expect([...invokes].filter((i) => !listed.has(i)).sort()).toEqual([]);
    });
});

describe("the hub's state must be encrypted with its KMS key", () => {
    it("refuses a passphrase, another provider, another KMS key, and (in a real run) no provider; accepts the hub state key and, offline, an untouched file", () => {
        expect(hubSecretsProviderIssue({ encryptionsalt: "v1:abc", config: {} })).toMatch(
            /passphrase.*change-secrets-provider "awskms:\/\/alias\/platform-hub-state/,
        );
        expect(hubSecretsProviderIssue({ secretsprovider: "passphrase" })).toMatch(/not passphrase/);
        expect(hubSecretsProviderIssue({ secretsprovider: "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k" })).toMatch(
            /not gcpkms/,
        );
        expect(
            hubSecretsProviderIssue({ secretsprovider: "awskms://alias/platform-hub-state?region=ap-southeast-1", encryptedkey: "AQ==" }),
        ).toBeUndefined();
        expect(
            hubSecretsProviderIssue({ secretsprovider: "awskms://arn:aws:kms:ap-southeast-1:123456789012:alias/platform-hub-state" }),
        ).toBeUndefined();
        // Any other KMS key is one the product cannot show is closed to previews.
        expect(hubSecretsProviderIssue({ secretsprovider: "awskms://alias/aws/s3?region=ap-southeast-1" })).toMatch(
            /encrypted with alias\/aws\/s3, not the hub state key alias\/platform-hub-state/,
        );
        expect(hubSecretsProviderIssue({ secretsprovider: "awskms://1234abcd-12ab-34cd-56ef-1234567890ab" })).toMatch(
            /not the hub state key/,
        );
        const shipped = YAML.parse(fs.readFileSync(path.join(STACKS, "Pulumi.hub-prod.yaml"), "utf8"));
        // The shipped file has not met `pulumi stack init`: fine offline, refused for a real run (Pulumi Cloud's
        // default provider, readable by every member of the stack, looks the same).
        expect(hubSecretsProviderIssue(shipped, true)).toBeUndefined();
        expect(hubSecretsProviderIssue(shipped)).toMatch(/names no secrets provider.*Pulumi Cloud/);
    });

    it("the hub program stops on a passphrase-encrypted hub file, naming the file and key", () => {
        const file = path.join(testTempDir("hub-sp-"), "Pulumi.hub-x.yaml");
        fs.writeFileSync(file, "encryptionsalt: v1:abc\nconfig:\n  platform:role: hub\n");
        expect(() => requireHubSecretsProvider(file)).toThrow(
            /Pulumi\.hub-x\.yaml: invalid stack configuration\n {2}- secretsprovider: the hub's state is encrypted with a passphrase/,
        );
    });
});

describe("npm run ci-roles (tools/ci-roles.ts): the printed commands and the written trust", () => {
    const opts = (out: string, update = false) =>
        parseCiRolesArgs([
            "--hub",
            "hub-prod",
            "--repo",
            REPO,
            "--hub-outputs",
            "s3://platform-pulumi-state-111122223333/hub-outputs/",
            "--state-bucket",
            "platform-pulumi-state-111122223333",
            "--out",
            out,
            ...(update ? ["--update"] : []),
        ]);
    /** A copy of stacks/ whose hub file lists the CI deploy role among platform:hubDeployers (README "Deploy for real" step 1). */
    const withDeployRole = (): string => {
        const dir = testTempDir("ci-roles-stacks-");
        for (const f of fs.readdirSync(STACKS)) if (f.endsWith(".yaml")) fs.copyFileSync(path.join(STACKS, f), path.join(dir, f));
        const hub = path.join(dir, "Pulumi.hub-prod.yaml");
        const doc = YAML.parseDocument(fs.readFileSync(hub, "utf8"));
        const deployers = doc.getIn(["config", "platform:hubDeployers"]) as YAML.YAMLSeq;
        deployers.add("arn:aws:iam::111122223333:role/platform-ci-deploy");
        fs.writeFileSync(hub, doc.toString());
        return dir;
    };
    const verbs = (commands: string[]) =>
        commands
            .filter((c) => !c.startsWith("#") && !c.startsWith(" "))
            .map((c) => c.split(" ").slice(0, 3).join(" "))
            .filter((c) => c.startsWith("aws "));

    it("first run creates the roles and the key; --update only replaces trust, inline and key policies in place", () => {
        const out = testTempDir("ci-roles-");
        const first = ciRoles(opts(out));
        expect(verbs(first.commands)).toEqual([
            "aws iam create-open-id-connect-provider",
            "aws iam create-role",
            "aws iam put-role-policy",
            "aws iam put-role-policy",
            "aws iam create-role",
            "aws iam attach-role-policy",
            "aws kms create-key",
            "aws kms create-alias",
        ]);
        // --update refuses a hub file that does not list the CI deploy role: the key policy it writes would lock CI out
        expect(() => ciRoles(opts(out, true))).toThrow(
            /platform:hubDeployers does not list arn:aws:iam::111122223333:role\/platform-ci-deploy/,
        );
        const update = ciRoles({ ...opts(out, true), stacksDir: withDeployRole() });
        // Rerun on existing roles: a second create-role fails, a second create-key makes another key.
        expect(verbs(update.commands)).toEqual([
            "aws iam update-assume-role-policy",
            "aws iam put-role-policy",
            "aws iam put-role-policy",
            "aws iam detach-role-policy",
            "aws iam list-attached-role-policies",
            "aws iam list-role-policies",
            "aws iam update-assume-role-policy",
            "aws kms put-key-policy",
        ]);
        // a role from an earlier release that still holds the managed read-only policy loses it
        expect(update.commands).toContain(
            "aws iam detach-role-policy --role-name platform-ci-preview --policy-arn arn:aws:iam::aws:policy/ReadOnlyAccess 2>/dev/null || true",
        );
        const text = update.commands.join("\n");
        expect(text).not.toMatch(/create-|(?<!de)attach-role/);
        // a repository set up before tokens carried the ref needs the subject customisation: the update prints the same
        // idempotent call the first run does
        expect(update.commands).toContain(first.commands.find((c) => c.startsWith("gh api")));
        expect(text).toMatch(/--role-name platform-ci-preview --policy-document file:\/\/.*preview-trust\.json/);
        expect(text).toMatch(/--role-name platform-ci-deploy --policy-document file:\/\/.*deploy-trust\.json/);
        expect(text).toMatch(/--key-id alias\/platform-hub-state --query KeyMetadata\.KeyId/);
        // both modes say who runs them: KMS refuses a key policy that locks its caller out
        for (const r of [first, update]) expect(r.commands[0]).toMatch(/as a role in .*platform:hubDeployers.*lock out the caller/);
        expect(() => parseCiRolesArgs(["--hub", "hub-prod", "--update", "--repo", REPO])).toThrow(/give --hub, --repo and --hub-outputs/);
    });

    it("the preview role's written trust admits each spoke's preview environment and no hub's (hubs are never previewed)", () => {
        const out = testTempDir("ci-roles-");
        ciRoles({ ...opts(out, true), stacksDir: withDeployRole() });
        const trust = JSON.parse(fs.readFileSync(path.join(out, "preview-trust.json"), "utf8")) as Doc;
        const sub = (env: string) => `repo:${REPO}:environment:${env}:ref:refs/pull/42/merge`;
        const aud = "sts.amazonaws.com";
        const stacks = fs
            .readdirSync(STACKS)
            .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
            .filter((s): s is string => !!s);
        const hubs = stacks.filter(
            (s) => YAML.parse(fs.readFileSync(path.join(STACKS, `Pulumi.${s}.yaml`), "utf8")).config["platform:role"] === "hub",
        );
        expect(hubs).toEqual(["hub-prod"]);
        for (const s of stacks.filter((x) => !hubs.includes(x)))
            expect(assumeWithGitHub(trust, { sub: sub(`preview-${s}`), aud }), s).toBe("Allowed");
        for (const h of hubs) expect(assumeWithGitHub(trust, { sub: sub(`preview-${h}`), aud }), h).toBe("ImplicitlyDenied");
    });

    it("says when the preview trust outgrows IAM's default trust policy length (every spoke is named in it)", () => {
        const few = ciRoles({ ...opts(testTempDir("ci-roles-"), true), stacksDir: withDeployRole() });
        expect(few.commands.join("\n")).not.toMatch(/Role trust policy length/);
        const dir = withDeployRole();
        const spoke = fs.readFileSync(path.join(dir, "Pulumi.spoke-hn1.yaml"), "utf8");
        for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(dir, `Pulumi.spoke-site${String(i).padStart(2, "0")}.yaml`), spoke);
        const out = testTempDir("ci-roles-");
        const many = ciRoles({ ...opts(out, true), stacksDir: dir });
        const chars = JSON.stringify(JSON.parse(fs.readFileSync(path.join(out, "preview-trust.json"), "utf8"))).length;
        expect(chars).toBeGreaterThan(ROLE_TRUST_POLICY_DEFAULT_CHARS);
        expect(many.commands[1]).toBe(
            `# NOTE: preview-trust.json is ${chars} characters, over IAM's default role trust policy length (2048): raise the account's "Role trust policy length" quota (Service Quotas, IAM; at most 4096) before running these, or the preview role's trust is refused`,
        );
    });

    it("refuses a stacks folder holding a stack file that is neither hub nor spoke (it would slip into the preview trust)", () => {
        const dir = withDeployRole();
        fs.writeFileSync(path.join(dir, "Pulumi.odd.yaml"), YAML.stringify({ config: { "platform:role": "Hub" } }));
        expect(() => ciRoles({ ...opts(testTempDir("ci-roles-"), true), stacksDir: dir })).toThrow(
            /Pulumi\.odd\.yaml: platform:role is "Hub": a stack file's platform:role must be hub or spoke/,
        );
    });
});
