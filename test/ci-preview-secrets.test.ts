import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { ACCESS_POLICIES } from "../components/spoke/EksCluster";
import { CI_ROLE_VARIABLES, OFFLINE_RENDER_ENV } from "../lib/ci-roles";
import { HUB_OUTPUTS_ENV, hubOutputs } from "../programs/spoke";
import { unwrapWire } from "../tools/wire";
import { byType, flatConfig, ROOT, runRepoStack, spokeConfigPinning, stackConfigDoc, testTempDir } from "./helpers";

const WORKFLOWS = path.join(ROOT, ".github", "workflows");
const read = (f: string) => fs.readFileSync(path.join(WORKFLOWS, f), "utf8");

/** tools/lint-workflows.mjs on the given files (GitHub's parser, then the credential separation). */
async function lint(files: string[]): Promise<{ code: number; out: string }> {
    try {
        const r = await promisify(execFile)(process.execPath, ["tools/lint-workflows.mjs", ...files], { cwd: ROOT });
        return { code: 0, out: r.stdout };
    } catch (e) {
        const x = e as { code: number; stdout: string };
        return { code: x.code, out: x.stdout };
    }
}

/** Pull-request previews run the pull request's own code: they must reach one site and read no Secret. */
describe("previews cannot read secrets", () => {
    const wf = YAML.parse(read("preview.yml"));
    it("each stack's preview job runs in its own environment, so its KUBECONFIG reaches that one site (main: every site's)", () => {
        const job = wf.jobs.preview;
        expect(job.environment).toBe("preview-${{ matrix.stack }}");
        const text = JSON.stringify(job.steps);
        expect(text).toContain("secrets.KUBECONFIG");
        // No other job holds a kubeconfig.
        for (const [name, j] of Object.entries<any>(wf.jobs)) if (name !== "preview") expect(JSON.stringify(j)).not.toContain("KUBECONFIG");
    });
    it("the EKS preview role's access policy is the view policy (no Secrets), never AdminView", () => {
        expect(ACCESS_POLICIES.preview).toBe("arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy");
    });
});

describe("one AWS role per environment; the hub stays out of pull-request previews", () => {
    it("preview.yml assumes only the preview role and previews only spokes, which read the hub's published outputs", () => {
        const wf = YAML.parse(read("preview.yml"));
        const job = wf.jobs.preview;
        const creds = job.steps.filter((s: any) => String(s.uses).startsWith("aws-actions/configure-aws-credentials@"));
        expect(creds.map((s: any) => s.with["role-to-assume"])).toEqual([`\${{ vars.${CI_ROLE_VARIABLES.preview} }}`]);
        expect(job.strategy.matrix.stack).toBe("${{ fromJSON(needs.check.outputs.spokes) }}");
        expect(JSON.stringify(job.steps)).toContain(HUB_OUTPUTS_ENV);
        expect(read("preview.yml")).not.toContain(CI_ROLE_VARIABLES.deploy);
        // The preview diffs against the checkpoint only (pulumi/actions' `refresh` input, pinned off): the preview
        // role's allow-list has none of a refresh's reads (test/ci-roles.test.ts).
        const previews = job.steps.filter((s: any) => String(s.uses).startsWith("pulumi/actions@") && s.with?.command === "preview");
        expect(previews.length).toBeGreaterThan(0);
        for (const s of previews) expect(s.with.refresh).toBe(false);
    });
    it("up.yml assumes only the deploy role, in the production environment; the hub job holds no passphrase and publishes its outputs", () => {
        const wf = YAML.parse(read("up.yml"));
        for (const j of ["up-hubs", "up-spokes"]) {
            const creds = wf.jobs[j].steps.filter((s: any) => String(s.uses).startsWith("aws-actions/configure-aws-credentials@"));
            expect(creds.map((s: any) => s.with["role-to-assume"])).toEqual([`\${{ vars.${CI_ROLE_VARIABLES.deploy} }}`]);
            expect(wf.jobs[j].environment).toBe("production");
        }
        expect(wf.jobs["up-hubs"].env).not.toHaveProperty("PULUMI_CONFIG_PASSPHRASE");
        expect(wf.jobs["up-hubs"].steps.map((s: any) => s.run ?? "").join("\n")).toMatch(/pulumi stack output --json[\s\S]*aws s3 cp/);
        expect(read("up.yml")).not.toContain(CI_ROLE_VARIABLES.preview);
    });

    it("the workflow lint refuses each way the separation could regress", async () => {
        const dir = testTempDir("wf-sep-");
        const plant = (file: string, name: string, edit: (s: string) => string) => {
            const text = edit(read(file));
            expect(text, `${name}: the edit applies`).not.toBe(read(file));
            const p = path.join(dir, `${name}.yml`);
            fs.writeFileSync(p, text);
            return p;
        };
        const cases: Array<[string, RegExp]> = [
            [
                plant("preview.yml", "shared-role", (s) => s.replaceAll("AWS_PREVIEW_ROLE_ARN", "AWS_ROLE_ARN")),
                /vars\.AWS_ROLE_ARN: one role per environment/,
            ],
            [
                plant("preview.yml", "deploy-in-pr", (s) => s.replaceAll("AWS_PREVIEW_ROLE_ARN", "AWS_DEPLOY_ROLE_ARN")),
                /must never assume the deploy role/,
            ],
            [
                plant("preview.yml", "hubs-in-pr", (s) =>
                    s.replace("fromJSON(needs.check.outputs.spokes)", "fromJSON(needs.check.outputs.stacks)"),
                ),
                /previews spokes only/,
            ],
            [
                plant("preview.yml", "up-in-pr", (s) => s.replace("command: preview", "command: up")),
                /pulumi command must be preview, not up/,
            ],
            [
                plant("preview.yml", "stackref-in-pr", (s) => s.replaceAll("PLATFORM_HUB_OUTPUTS", "X")),
                /published outputs \(PLATFORM_HUB_OUTPUTS\)/,
            ],
            [
                plant("preview.yml", "no-env", (s) => s.replace("    environment: preview-${{ matrix.stack }}\n", "")),
                /trusted only in preview-<stack> environments/,
            ],
            [
                plant("up.yml", "preview-in-up", (s) => s.replaceAll("AWS_DEPLOY_ROLE_ARN", "AWS_PREVIEW_ROLE_ARN")),
                /preview role is for pull-request workflows only/,
            ],
            [
                plant("up.yml", "spoke-up-stackref", (s) =>
                    s.replace('echo "PLATFORM_HUB_OUTPUTS=$RUNNER_TEMP/hub-outputs.json" >> "$GITHUB_ENV"', "true"),
                ),
                /up-spokes: a spoke run reads its hub from the signed published outputs/,
            ],
            [
                plant("up.yml", "unprotected", (s) => s.replaceAll("environment: production", "environment: staging")),
                /deploy role is trusted only in the production environment/,
            ],
            [
                plant("up.yml", "hub-passphrase", (s) =>
                    s.replace(
                        "        stack: ${{ fromJSON(needs.plan.outputs.hubs) }}\n    env:\n",
                        "        stack: ${{ fromJSON(needs.plan.outputs.hubs) }}\n    env:\n      PULUMI_CONFIG_PASSPHRASE: ${{ secrets.PULUMI_CONFIG_PASSPHRASE }}\n",
                    ),
                ),
                /hub job gets no PULUMI_CONFIG_PASSPHRASE/,
            ],
            [
                // The previous pins.yml: a registry key in a job every pull request touching the pins runs.
                plant("pins.yml", "ngc-key-in-pr", (s) =>
                    s.replace(
                        "      - name: Pins\n",
                        "      - name: Log in to nvcr.io\n        env:\n          NGC_API_KEY: ${{ secrets.NGC_API_KEY }}\n        run: printf '%s' \"$NGC_API_KEY\" | docker login nvcr.io --username '$oauthtoken' --password-stdin\n      - name: Pins\n",
                    ),
                ),
                /exist: secrets\.NGC_API_KEY in a job that runs the pull request's code/,
            ],
            [
                // The spoke passphrase opens a spoke's state: only the job that runs the preview may hold it.
                plant("preview.yml", "passphrase-outside-preview", (s) => s.replace("command: preview", "command: about")),
                /secrets\.PULUMI_CONFIG_PASSPHRASE in a pull-request job that runs no spoke preview/,
            ],
            [
                plant("preview.yml", "repo-secret-in-preview", (s) =>
                    s.replace(
                        "PULUMI_ACCESS_TOKEN: ${{ secrets.PULUMI_ACCESS_TOKEN }}",
                        "PULUMI_ACCESS_TOKEN: ${{ secrets['NGC_API_KEY'] }}",
                    ),
                ),
                /preview: secrets\.NGC_API_KEY in a job that runs the pull request's code.*PULUMI_CONFIG_PASSPHRASE, PULUMI_ACCESS_TOKEN, KUBECONFIG/,
            ],
            [
                // The check job has no preview environment: not even the spoke passphrase.
                plant("preview.yml", "passphrase-in-check", (s) =>
                    s.replace(
                        "      - name: Test\n        run: npm test\n",
                        "      - name: Test\n        run: npm test\n        env:\n          P: ${{ secrets.PULUMI_CONFIG_PASSPHRASE }}\n",
                    ),
                ),
                /check: secrets\.PULUMI_CONFIG_PASSPHRASE in a job that runs the pull request's code.*only GITHUB_TOKEN may reach it/,
            ],
            [
                plant("preview.yml", "all-secrets-in-pr", (s) =>
                    s.replace("run: npm test\n", "run: npm test\n        env:\n          ALL: ${{ toJSON(secrets) }}\n"),
                ),
                /check: secrets\.\* in a job that runs the pull request's code/,
            ],
            [
                plant("pins.yml", "workflow-env-secret", (s) =>
                    s.replace(
                        "permissions:\n  contents: read\n",
                        "permissions:\n  contents: read\n\nenv:\n  K: ${{ secrets.NGC_API_KEY }}\n",
                    ),
                ),
                /workflow-level secrets\.NGC_API_KEY reaches every job of a pull-request workflow/,
            ],
        ];
        // One bad file alone fails the lint ...
        const one = await lint([cases[0][0]]);
        expect(one.code).toBe(1);
        expect(one.out).toMatch(cases[0][1]);
        // ... and every bad file of one run fails on its own lines (the lint names each file on each of its lines and
        // prints "<file>: ok" for a file without errors): one process for all of them, not one each.
        const all = await lint(cases.map(([file]) => file));
        expect(all.code).toBe(1);
        const lines = all.out.split("\n").filter((l) => l !== "");
        const names = cases.map(([file]) => path.relative(ROOT, file));
        for (const l of lines)
            expect(
                names.some((n) => l.startsWith(`${n}: `)),
                l,
            ).toBe(true);
        for (const [file, message] of cases) {
            const name = path.relative(ROOT, file);
            const own = lines.filter((l) => l.startsWith(`${name}: `));
            expect(own, path.basename(file)).not.toContain(`${name}: ok`);
            expect(own.length, path.basename(file)).toBeGreaterThan(0);
            expect(own.join("\n"), path.basename(file)).toMatch(message);
        }
        expect(await lint(["pins.yml", "preview.yml", "up.yml"].map((f) => path.join(WORKFLOWS, f)))).toEqual({
            code: 0,
            out: ".github/workflows/pins.yml: ok\n.github/workflows/preview.yml: ok\n.github/workflows/up.yml: ok\n",
        });
    });
});

describe("a spoke reads its hub from the signed published outputs, never the hub's state", () => {
    it("with PLATFORM_HUB_OUTPUTS, in a preview and an up: no StackReference, the same contract; a changed, mixed or foreign-key file is refused", async () => {
        const hub = await runRepoStack("hub-prod");
        const dir = testTempDir("hub-out-");
        const file = path.join(dir, "hub-prod.json");
        // What `pulumi stack output --json` prints: plain values, the publication among them.
        const published = unwrapWire(hub.outputs) as Record<string, any>;
        expect(published.publication).toMatchObject({ schemaVersion: 2, hub: "hub-prod", serial: 1 });
        fs.writeFileSync(file, JSON.stringify(published));
        // The spoke file as shipped, pinning the key this (mock) hub signs with: an operator's stacks/ pins their real
        // hub's key (README "Deploy for real"), which this test must not depend on.
        const keyId: string = published.publication.keyId;
        const sg1Config = spokeConfigPinning("spoke-sg1", keyId);
        const viaRef = await runRepoStack("spoke-sg1", {
            preview: true,
            stackOutputs: { "hub-prod": { outputs: hub.outputs, secretOutputNames: [] } },
            config: sg1Config,
        });
        process.env[HUB_OUTPUTS_ENV] = file;
        try {
            const urns = (r: typeof viaRef) =>
                r.resources
                    .map((x) => x.urn)
                    .filter((u) => !u.includes("StackReference"))
                    .sort();
            for (const preview of [true, false]) {
                const viaFile = await runRepoStack("spoke-sg1", { preview, stackOutputs: {}, config: sg1Config });
                // Only its own previous outputs (the publication serial it last deployed from), never the hub's state.
                expect(byType(viaFile.resources, "pulumi:pulumi:StackReference").map((r) => r.name)).toEqual(["self"]);
                expect(unwrapWire(viaFile.outputs)).toMatchObject({ hubPublicationSerial: published.publication.serial });
                expect(urns(viaFile)).toEqual(urns(viaRef));
            }
            expect(byType(viaRef.resources, "pulumi:pulumi:StackReference").map((r) => r.name)).toEqual(["hub"]);
            const refused = async (doc: unknown, message: RegExp, config: Record<string, string> = sg1Config) => {
                fs.writeFileSync(file, JSON.stringify(doc));
                await expect(runRepoStack("spoke-sg1", { preview: false, stackOutputs: {}, config })).rejects.toThrow(message);
            };
            // A contract edited after the hub signed it (here: pointed at another hub).
            const edited = structuredClone(published);
            for (const c of Object.values<any>(edited.spokeContracts)) c.hub = "hub-other";
            await refused(edited, /PLATFORM_HUB_OUTPUTS \(environment\): .*hub-prod\.json does not match its digest/);
            // Re-digested but not re-signed.
            const { contentHash } = await import("../services/shared/canonical");
            const { outputsDigest, publicationBody } = await import("../lib/hub-publication");
            const redigested = structuredClone(edited);
            redigested.publication.sha256 = contentHash(publicationBody("hub-prod", redigested.publication.serial, redigested));
            redigested.publication.outputsSha256 = outputsDigest("hub-prod", redigested);
            await refused(redigested, /signature does not verify/);
            // Another hub's publication, and one published before hubs signed (no publication output).
            await refused(
                { ...published, publication: { ...published.publication, hub: "hub-other" } },
                /is hub "hub-other"'s publication, not "hub-prod"'s/,
            );
            const { publication: _, ...unsigned } = published;
            await refused(unsigned, /has no "publication" output/);
            // A self-signed forgery: verifies with its own key, which is not the one the stack file pins.
            const { signHubPublication } = await import("../lib/hub-publication");
            const { randomBytes } = await import("node:crypto");
            const forged = { ...published, publication: signHubPublication(randomBytes(32), "hub-prod", published, 7) };
            await refused(
                forged,
                new RegExp(`signed by key [0-9a-f]{16}, not a hub key the stack file pins \\(platform:spoke\\.hubKeyIds: ${keyId}\\)`),
            );
            // A stack file that pins another hub key (the older single key, still read).
            const pinned = structuredClone(stackConfigDoc("spoke-sg1"));
            delete pinned["platform:spoke"].hubKeyIds;
            pinned["platform:spoke"].hubKeyId = "0123456789abcdef";
            await refused(
                published,
                /signed by key [0-9a-f]{16}, not a hub key the stack file pins \(platform:spoke\.hubKeyIds: 0123456789abcdef\)/,
                flatConfig(pinned),
            );
            // A rotation: the old and the new key both pinned.
            delete pinned["platform:spoke"].hubKeyId;
            pinned["platform:spoke"].hubKeyIds = ["0123456789abcdef", published.publication.keyId];
            fs.writeFileSync(file, JSON.stringify(published));
            expect(urns(await runRepoStack("spoke-sg1", { preview: false, stackOutputs: {}, config: flatConfig(pinned) }))).toEqual(
                urns(viaRef),
            );
        } finally {
            delete process.env[HUB_OUTPUTS_ENV];
        }
    });

    it("a real spoke run (not an offline render) without PLATFORM_HUB_OUTPUTS stops before opening the hub's state", () => {
        const saved = process.env[OFFLINE_RENDER_ENV];
        delete process.env[OFFLINE_RENDER_ENV];
        delete process.env[HUB_OUTPUTS_ENV];
        try {
            expect(() =>
                hubOutputs(
                    { spoke: { hubStack: "organization/platform/hub-prod", hubKeyIds: ["1a348afe1583aaff"] } } as any,
                    "stacks/Pulumi.spoke-sg1.yaml",
                ),
            ).toThrow(
                /stacks\/Pulumi\.spoke-sg1\.yaml[\s\S]*PLATFORM_HUB_OUTPUTS \(environment\): a spoke reads hub "hub-prod" from its published outputs, not its state/,
            );
            // Nor without a pinned hub key (a self-signed file would otherwise verify), with or without the file.
            for (const file of [undefined, "hub.json"]) {
                if (file) process.env[HUB_OUTPUTS_ENV] = file;
                expect(() =>
                    hubOutputs({ spoke: { hubStack: "organization/platform/hub-prod" } } as any, "stacks/Pulumi.spoke-sg1.yaml"),
                ).toThrow(
                    /stacks\/Pulumi\.spoke-sg1\.yaml[\s\S]*platform:spoke\.hubKeyIds: a spoke accepts hub "hub-prod"'s published outputs only signed by a key its stack file pins/,
                );
                delete process.env[HUB_OUTPUTS_ENV];
            }
        } finally {
            if (saved !== undefined) process.env[OFFLINE_RENDER_ENV] = saved;
        }
    });

    it("an older publication, validly signed, is refused once the spoke deployed from a newer one (its own hubPublicationSerial)", async () => {
        const hub = await runRepoStack("hub-prod");
        const published = unwrapWire(hub.outputs) as Record<string, any>;
        expect(published.publication.serial).toBe(1);
        const file = path.join(testTempDir("hub-out-"), "hub-prod.json");
        fs.writeFileSync(file, JSON.stringify(published));
        process.env[HUB_OUTPUTS_ENV] = file;
        try {
            const self = (serial: number) => ({ "spoke-sg1": { outputs: { hubPublicationSerial: serial }, secretOutputNames: [] } });
            const config = spokeConfigPinning("spoke-sg1", published.publication.keyId);
            await expect(runRepoStack("spoke-sg1", { preview: false, stackOutputs: self(2), config })).rejects.toThrow(
                /hub-prod\.json is publication 1, older than publication 2 this spoke last deployed from/,
            );
            const same = await runRepoStack("spoke-sg1", { preview: false, stackOutputs: self(1), config });
            expect(unwrapWire(same.outputs)).toMatchObject({ hubPublicationSerial: 1 });
        } finally {
            delete process.env[HUB_OUTPUTS_ENV];
        }
        // The hub's serial: the same while its published outputs are unchanged, one more when they change.
        const again = unwrapWire(
            (await runRepoStack("hub-prod", { stackOutputs: { "hub-prod": { outputs: hub.outputs, secretOutputNames: [] } } })).outputs,
        ) as Record<string, any>;
        expect(again.publication.serial).toBe(1);
        const changed = structuredClone(published);
        changed.publication.outputsSha256 = "0".repeat(64);
        changed.publication.serial = 4;
        const next = unwrapWire(
            (await runRepoStack("hub-prod", { stackOutputs: { "hub-prod": { outputs: changed, secretOutputNames: [] } } })).outputs,
        ) as Record<string, any>;
        expect(next.publication.serial).toBe(5);
    });

    it("up.yml hands every spoke up the hub's published outputs", () => {
        const wf = YAML.parse(read("up.yml"));
        const steps = wf.jobs["up-spokes"].steps;
        const fetch = steps.findIndex((s: any) => String(s.run ?? "").includes("PLATFORM_HUB_OUTPUTS="));
        const up = steps.findIndex((s: any) => s.with?.command === "up");
        expect(fetch).toBeGreaterThanOrEqual(0);
        expect(fetch).toBeLessThan(up);
    });

    it("an on-prem spoke's pull-request preview holds no source key: the auth Secret carries only the shared config", async () => {
        const hub = await runRepoStack("hub-prod");
        const file = path.join(testTempDir("hub-out-"), "hub-prod.json");
        const published = unwrapWire(hub.outputs) as Record<string, any>;
        fs.writeFileSync(file, JSON.stringify(published));
        const authAws = (r: Awaited<ReturnType<typeof runRepoStack>>) =>
            unwrapWire(r.resources.find((x) => x.name === "agent-router-auth-aws")!.inputs.stringData) as Record<string, unknown>;
        process.env[HUB_OUTPUTS_ENV] = file;
        try {
            // The key is installed in the cluster by npm run mint-key -- install-source-key; the program never reads it
            // (test/source-key.test.ts), so there is nothing for a pull request's code to print.
            const pr = await runRepoStack("spoke-hn1", {
                preview: true,
                stackOutputs: {},
                config: spokeConfigPinning("spoke-hn1", published.publication.keyId),
            });
            expect(Object.keys(authAws(pr))).toEqual(["config"]);
            expect(JSON.stringify(pr.resources.map((r) => unwrapWire(r.inputs)))).not.toMatch(/aws_secret_access_key|\bAKIA[A-Z0-9]{16}\b/);
        } finally {
            delete process.env[HUB_OUTPUTS_ENV];
        }
    });
});
