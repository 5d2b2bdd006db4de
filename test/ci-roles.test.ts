import { runSimulation, runUnsafeSimulation } from "@cloud-copilot/iam-simulate";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { GITHUB_OIDC_HOST, githubOidcTrustPolicy, hubSecretsProviderIssue, hubStateKeyPolicy, previewGuardPolicy } from "../lib/ci-roles";
import { requireHubSecretsProvider } from "../programs/hub";
import * as YAML from "yaml";
import { STACKS, testTempDir } from "./helpers";

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
    const preview = githubOidcTrustPolicy({ accountId: ACCOUNT, repo: REPO, role: "preview" }) as unknown as Doc;
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

    it("preview role: only the preview-<stack> environments of this repository, audience sts.amazonaws.com", () => {
        expect(assumeWithGitHub(preview, { sub: `repo:${REPO}:environment:preview-spoke-hn1`, aud })).toBe("Allowed");
        for (const sub of [
            `repo:${REPO}:environment:production`,
            `repo:${REPO}:pull_request`,
            `repo:${REPO}:ref:refs/heads/main`,
            `repo:other-org/h200-platform:environment:preview-spoke-hn1`,
        ])
            expect(assumeWithGitHub(preview, { sub, aud }), sub).toBe("ImplicitlyDenied");
        expect(assumeWithGitHub(preview, { sub: `repo:${REPO}:environment:preview-spoke-hn1`, aud: "api://other" })).toBe(
            "ImplicitlyDenied",
        );
        expect(assumeWithGitHub(preview, { aud })).toBe("ImplicitlyDenied");
    });

    it("deploy role: exactly the production environment; never a pull request's preview job, a branch or another provider", () => {
        expect(assumeWithGitHub(deploy, { sub: `repo:${REPO}:environment:production`, aud })).toBe("Allowed");
        for (const sub of [
            `repo:${REPO}:environment:preview-spoke-hn1`,
            `repo:${REPO}:environment:production-copy`,
            `repo:${REPO}:pull_request`,
            `repo:${REPO}:ref:refs/heads/main`,
            `repo:other-org/h200-platform:environment:production`,
        ])
            expect(assumeWithGitHub(deploy, { sub, aud }), sub).toBe("ImplicitlyDenied");
        expect(assumeWithGitHub(deploy, { sub: `repo:${REPO}:environment:production` })).toBe("ImplicitlyDenied");
        expect(
            assumeWithGitHub(
                deploy,
                { sub: `repo:${REPO}:environment:production`, aud },
                `arn:aws:iam::${ACCOUNT}:oidc-provider/gitlab.com`,
            ),
        ).toBe("ImplicitlyDenied");
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
