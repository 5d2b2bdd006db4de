import { execFile, execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { diffMarkdown, diffStack, fieldChanges, isDerived, objectLabel, placementChanges, stackFileChanges } from "../tools/diff";
import { commentBody, COMMENT_MARKER, demote, MAX_COMMENT_CHARS, pictureLinks } from "../tools/report/comment";
import * as YAML from "yaml";
import { ROOT } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

const run = promisify(execFile);

describe("field changes", () => {
    it("names changed leaves by path; arrays of named items by name; JSON strings by their parsed fields", () => {
        const before = {
            spec: {
                components: [
                    { name: "prefill", replicas: 2 },
                    { name: "decode", replicas: 1 },
                ],
                args: ["--config", '{"max_gpu_budget":12,"mode":"disagg"}'],
            },
            metadata: { labels: { a: "1" } },
        };
        const after = {
            spec: {
                components: [
                    { name: "decode", replicas: 1 },
                    { name: "prefill", replicas: 1 },
                ],
                args: ["--config", '{"max_gpu_budget":16,"mode":"disagg"}'],
            },
            metadata: { labels: { b: "2" } },
        };
        expect(fieldChanges(before, after)).toEqual([
            { path: "metadata.labels.a", before: "1", after: undefined },
            { path: "metadata.labels.b", before: undefined, after: "2" },
            { path: "spec.args[1]{json}.max_gpu_budget", before: 12, after: 16 },
            { path: "spec.components[name=prefill].replicas", before: 2, after: 1 },
        ]);
        // Plain values that gained or lost members compare as sets; same length (an argument changed) by position.
        expect(fieldChanges({ a: [1, 2] }, { a: [1, 3, 4] })).toEqual([
            { path: "a[-]", before: 2, after: undefined },
            { path: "a[+]", before: undefined, after: 3 },
            { path: "a[+]", before: undefined, after: 4 },
        ]);
        expect(fieldChanges({ a: ["--tp", "4"] }, { a: ["--tp", "8"] })).toEqual([{ path: "a[1]", before: "4", after: "8" }]);
        expect(fieldChanges({ a: 1 }, { a: 1 })).toEqual([]);
    });

    it("labels Kubernetes objects by kind, namespace and name, other resources by type and name", () => {
        expect(
            objectLabel({
                urn: "u",
                type: "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment",
                name: "endpoint-x-dgd",
                inputs: { kind: "DynamoGraphDeployment", metadata: { name: "x", namespace: "inference" } },
            }),
        ).toBe("DynamoGraphDeployment inference/x");
        expect(objectLabel({ urn: "u", type: "aws:s3/bucket:Bucket", name: "b" })).toBe("aws:Bucket b");
    });

    it("keeps secrets masked: a masked value compares equal, and no secret text reaches diff.md", () => {
        const row = (data: unknown, replicas: number) => ({
            urn: "urn:s",
            type: "kubernetes:core/v1:Secret",
            name: "s",
            inputs: { kind: "Secret", metadata: { name: "s" }, data, replicas },
        });
        const d = diffStack(
            "spoke-x",
            { resources: [row("[secret]", 1)], outputs: { apiKeys: "[secret]" } },
            { resources: [row("[secret]", 2)], outputs: { apiKeys: "[secret]" } },
        );
        expect(d.changed).toEqual([{ urn: "urn:s", label: "Secret s", fields: [{ path: "replicas", before: 1, after: 2 }] }]);
        expect(d.outputs).toEqual([]);
        const md = diffMarkdown([d], { ref: "origin/main", sha: "0123456789abcdef" });
        expect(md).toContain("- `Secret s`\n  - `replicas`: `1` → `2`");
        expect(md).toContain("| spoke-x | changed | 0 | 0 | 1 | 0 |");
    });
});

describe("a diff for a reviewer: the stack files' own terms first, capacity and placement, derived churn folded", () => {
    let dir: string;
    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "diff-intent-"));
        for (const side of ["base", "head"]) {
            fs.mkdirSync(path.join(dir, side));
            for (const f of fs.readdirSync(path.join(ROOT, "stacks")))
                fs.copyFileSync(path.join(ROOT, "stacks", f), path.join(dir, side, f));
        }
    });
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
    const edit = (name: string, mutate: (c: Record<string, any>) => void) => {
        const file = path.join(dir, "head", `Pulumi.${name}.yaml`);
        const doc = YAML.parse(fs.readFileSync(file, "utf8"));
        mutate(doc.config);
        fs.writeFileSync(file, YAML.stringify(doc));
    };

    it("an added API key reads as one added item (matched by id), not as every later key replaced", () => {
        edit("hub-prod", (c) => c["platform:apiKeys"].splice(1, 0, { ...c["platform:apiKeys"][0], id: "ci-bot", sha256: "c".repeat(64) }));
        const changes = stackFileChanges(path.join(dir, "base"), path.join(dir, "head"));
        expect(changes.map((c) => [c.file, c.status])).toEqual([["stacks/Pulumi.hub-prod.yaml", "changed"]]);
        expect(changes[0].fields.map((f) => f.path)).toEqual(["platform:apiKeys[id=ci-bot]"]);
        expect(changes[0].fields[0].before).toBeUndefined();
        // No endpoint moved: capacity and placement unchanged.
        expect(placementChanges(path.join(dir, "base"), path.join(dir, "head"))).toEqual([]);
        const md = diffMarkdown([], { ref: "main", sha: "0123456789abcdef" }, { files: changes, placement: [] });
        expect(md).toMatch(
            /## What changed in the stack files\n\n\*\*`stacks\/Pulumi.hub-prod.yaml`\*\*\n\n- `platform:apiKeys\[id=ci-bot\]`: `\(none\)` → `\{"id":"ci-bot"/,
        );
        expect(md).toContain("## Effect on capacity and placement\n\nNo spoke's GPUs, placement or planner budgets change.");
    });

    it("an added spoke: the hub's list gains one spoke (by name), its new file, and the GPUs placed on it", () => {
        edit("hub-prod", (c) => {
            c["platform:spokes"].push({ name: "dn1", stack: "spoke-dn1", region: "vn-danang-1", provider: "onprem", gpus: 16 });
            // hn1's Qwen (fixed in hub-prod), with a planner of 4 GPUs + one more 2-GPU worker on the new spoke.
            c["platform:endpoints"].push({
                ...c["platform:endpoints"][1],
                spoke: "dn1",
                planner: { optimizationTarget: "load", maxGpuBudget: 6 },
            });
        });
        const doc = YAML.parse(fs.readFileSync(path.join(dir, "head", "Pulumi.spoke-hn1.yaml"), "utf8"));
        doc.config["platform:spoke"].name = "dn1";
        fs.writeFileSync(path.join(dir, "head", "Pulumi.spoke-dn1.yaml"), YAML.stringify(doc));
        const changes = stackFileChanges(path.join(dir, "base"), path.join(dir, "head"));
        const hub = changes.find((c) => c.file === "stacks/Pulumi.hub-prod.yaml")!;
        expect(hub.fields.map((f) => f.path)).toEqual([
            "platform:apiKeys[id=ci-bot]",
            "platform:endpoints[spoke/name=dn1/qwen3-32b]",
            "platform:spokes[name=dn1]",
        ]);
        expect(changes.find((c) => c.file === "stacks/Pulumi.spoke-dn1.yaml")?.status).toBe("new");
        const placement = placementChanges(path.join(dir, "base"), path.join(dir, "head"));
        expect(placement).toEqual([
            {
                hubFile: "stacks/Pulumi.hub-prod.yaml",
                spoke: "dn1",
                before: undefined,
                after: { capacity: 16, placed: 4, budgets: 6, endpoints: ["qwen3-32b (Qwen/Qwen3-32B, 4 GPUs)"] },
            },
        ]);
        const md = diffMarkdown([], { ref: "main", sha: "0123456789abcdef" }, { files: changes, placement });
        expect(md).toContain("| stacks/Pulumi.hub-prod.yaml | dn1 (new) | - → 4/16 | - → 6/16 | + qwen3-32b (Qwen/Qwen3-32B, 4 GPUs) |");
        expect(md).toContain("**`stacks/Pulumi.spoke-dn1.yaml`** (new file)");
        // The rendered outputs: a list of spoke names gains one member, compared as a set.
        expect(fieldChanges({ spokes: ["hcm1", "hn1", "sg1"] }, { spokes: ["dn1", "hcm1", "hn1", "sg1"] })).toEqual([
            { path: "spokes[+]", before: undefined, after: "dn1" },
        ]);
    });

    it("folds hashes, signatures and revisions below what changed", () => {
        const row = (inputs: Record<string, unknown>) => ({
            urn: "urn:cm",
            type: "kubernetes:core/v1:ConfigMap",
            name: "cm",
            inputs: { kind: "ConfigMap", metadata: { name: "bundle" }, ...inputs },
        });
        const d = diffStack(
            "hub-prod",
            {
                resources: [row({ data: { limit: 1, contentHash: "a".repeat(64) } })],
                outputs: { policyRevisions: { hn1: { revision: 1, signature: "x".repeat(88) } } },
            },
            {
                resources: [row({ data: { limit: 2, contentHash: "b".repeat(64) } })],
                outputs: { policyRevisions: { hn1: { revision: 2, signature: "y".repeat(88) } } },
            },
        );
        expect(d.changed[0].fields.filter(isDerived).map((f) => f.path)).toEqual(["data.contentHash"]);
        const md = diffMarkdown([d], { ref: "main", sha: "0123456789abcdef" });
        const fold = md.indexOf("<details><summary>derived changes (3): hashes, signatures, revisions</summary>");
        expect(fold).toBeGreaterThan(md.indexOf("- `ConfigMap bundle`\n  - `data.limit`: `1` → `2`"));
        expect(md.indexOf("contentHash")).toBeGreaterThan(fold);
        expect(md.indexOf("policyRevisions.hn1.revision")).toBeGreaterThan(fold);
    });
});

describe("PR comment", () => {
    it("starts with the marker, demotes headings outside code, links pictures to the artifact, stays under GitHub's limit", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "comment-"));
        try {
            fs.mkdirSync(path.join(dir, "spoke-a"));
            fs.writeFileSync(
                path.join(dir, "spoke-a", "report.md"),
                `# spoke-a\n\n![rail wiring of a](rails.svg) ([PNG](rails.png))\n\n${"x".repeat(80000)}\n`,
            );
            fs.writeFileSync(path.join(dir, "diff.md"), "# Render diff\n\n```\n# not a heading\n```\n");
            const body = commentBody(dir, "https://example.invalid/artifact/1");
            expect(body.split("\n")[0]).toBe(COMMENT_MARKER);
            expect(body).toContain("## Render diff");
            expect(body).toContain("```\n# not a heading\n```");
            expect(body).toContain("[rail wiring of a: `out/spoke-a/rails.svg`](https://example.invalid/artifact/1)");
            expect(body.length).toBeLessThanOrEqual(MAX_COMMENT_CHARS);
            expect(body).toContain("truncated");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
        expect(demote("# a\n## b")).toBe("## a\n### b");
        expect(pictureLinks("![x](m.svg) ([PNG](m.png))", "hub")).toBe("x: `out/hub/m.svg` (in the render artifact)");
    });
});

describe("preview.yml posts report + diff as one comment", () => {
    const wf = YAML.parse(fs.readFileSync(path.join(ROOT, ".github", "workflows", "preview.yml"), "utf8"));
    const steps: any[] = wf.jobs.check.steps;

    it("renders with --diff against the PR base, uploads out/, composes the comment with tools/report/comment.ts", () => {
        expect(steps.map((x) => x.run ?? "").join("\n")).toContain('npm run render -- --diff "origin/${{ github.base_ref }}"');
        expect(steps.find((x) => String(x.uses).startsWith("actions/upload-artifact@")).with.path).toBe("out/");
        expect(steps.find((x) => String(x.run ?? "").includes("tools/report/comment.ts")).env.ARTIFACT_URL).toBe(
            "${{ steps.artifact.outputs.artifact-url }}",
        );
        expect(wf.jobs.check.permissions).toEqual({ contents: "read", "pull-requests": "write" });
    });

    it("edits the comment that starts with the marker, or creates one; never a second", async () => {
        const post = steps.find((x) => String(x.uses).startsWith("actions/github-script@"));
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gh-script-"));
        fs.writeFileSync(path.join(tmp, "render-comment.md"), `${COMMENT_MARKER}\n# new body\n`);
        const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor;
        const runScript = async (existing: Array<{ id: number; body: string; user: { type: string } }>) => {
            const calls: string[] = [];
            const github = {
                paginate: async () => existing,
                rest: {
                    issues: {
                        listComments: () => undefined,
                        updateComment: async (a: any) => {
                            calls.push(`update ${a.comment_id}`);
                        },
                        createComment: async (a: any) => {
                            calls.push(`create ${a.issue_number}`);
                        },
                    },
                },
            };
            const context = { repo: { owner: "o", repo: "r" }, payload: { pull_request: { number: 7 } } };
            const prev = process.env.RUNNER_TEMP;
            process.env.RUNNER_TEMP = tmp;
            try {
                await new AsyncFunction("require", "github", "context", post.with.script)(require, github, context);
            } finally {
                if (prev === undefined) delete process.env.RUNNER_TEMP;
                else process.env.RUNNER_TEMP = prev;
            }
            return calls;
        };
        try {
            expect(
                await runScript([
                    { id: 1, body: "LGTM", user: { type: "User" } },
                    { id: 2, body: `${COMMENT_MARKER}\nold`, user: { type: "Bot" } },
                ]),
            ).toEqual(["update 2"]);
            expect(await runScript([{ id: 1, body: `${COMMENT_MARKER} quoted by a person`, user: { type: "User" } }])).toEqual([
                "create 7",
            ]);
        } finally {
            fs.rmSync(tmp, { recursive: true, force: true });
        }
    });
});

/** A throwaway git repository holding a copy of this working tree (dependencies symlinked), one commit. */
function fixtureRepo(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "render-diff-repo-"));
    const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], { cwd: ROOT, encoding: "utf8" })
        .split("\0")
        .filter(Boolean);
    for (const f of files) {
        const src = path.join(ROOT, f);
        if (!fs.existsSync(src) || fs.lstatSync(src).isSymbolicLink() || !fs.statSync(src).isFile()) continue;
        fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        fs.copyFileSync(src, path.join(dir, f));
    }
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
    if (fs.existsSync(path.join(ROOT, "policies", "node_modules")))
        fs.symlinkSync(path.join(ROOT, "policies", "node_modules"), path.join(dir, "policies", "node_modules"), "dir");
    const git = (...a: string[]) => execFileSync("git", a, { cwd: dir, stdio: "ignore" });
    git("init", "--quiet", "-b", "main");
    // `node_modules/` in .gitignore does not match a symlink: keep the dependency links out of the commit.
    fs.appendFileSync(path.join(dir, ".git", "info", "exclude"), "/node_modules\n/policies/node_modules\n");
    git("add", "-A");
    git("-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "--quiet", "-m", "base");
    return dir;
}

describe("npm run render -- --diff <ref> (temporary git repository)", () => {
    let repo: string;
    beforeAll(() => {
        repo = fixtureRepo();
    });
    afterAll(() => fs.rmSync(repo, { recursive: true, force: true }));

    const render = async (args: string[]) => {
        try {
            const r = await run(process.execPath, ["-r", ESBUILD_LOADER, "tools/render.ts", ...args], {
                cwd: repo,
                env: { ...process.env, CI: "true", TS_NODE_TRANSPILE_ONLY: "true" },
            });
            return { code: 0, stdout: r.stdout, stderr: r.stderr };
        } catch (e) {
            const x = e as { code: number; stdout: string; stderr: string };
            return { code: x.code, stdout: x.stdout, stderr: x.stderr };
        }
    };

    it("renders the base in a worktree and lists the changed fields per stack; the worktree is removed after", async () => {
        // The change under review: sg1's Qwen prefill goes from 2 to 1 replicas (a hub placement change).
        const hubFile = path.join(repo, "stacks", "Pulumi.hub-prod.yaml");
        const text = fs.readFileSync(hubFile, "utf8");
        const at = text.lastIndexOf("prefill: { replicas: 2, gpusPerWorker: 2 }");
        expect(at).toBeGreaterThan(0);
        fs.writeFileSync(
            hubFile,
            `${text.slice(0, at)}prefill: { replicas: 1, gpusPerWorker: 2 }${text.slice(at + "prefill: { replicas: 2, gpusPerWorker: 2 }".length)}`,
        );
        const out = path.join(repo, "out");
        const r = await render(["--out", out, "--diff", "main", "spoke-sg1"]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(r.stderr).not.toContain("npm ci"); // identical lockfile: the base reuses node_modules
        const md = fs.readFileSync(path.join(out, "diff.md"), "utf8");
        expect(md).toMatch(/^# Render diff against `main` \([0-9a-f]{12}\)/);
        // First what the person changed, in the stack file's own keys, and what it does to the spoke's GPUs.
        expect(md).toContain(
            "## What changed in the stack files\n\n**`stacks/Pulumi.hub-prod.yaml`**\n\n- `platform:endpoints[spoke/name=sg1/qwen3-32b].topology.prefill.replicas`: `2` → `1`\n",
        );
        expect(md).toContain(
            // sg1 also runs llama-70b (aggregated vLLM, 4 GPUs), hence 12 placed before the change; only its planner runs
            // (budget 8), Qwen's is off.
            "| stacks/Pulumi.hub-prod.yaml | sg1 | 12/16 → 10/16 | 8/16 | + qwen3-32b (Qwen/Qwen3-32B, 6 GPUs)<br>− qwen3-32b (Qwen/Qwen3-32B, 8 GPUs) |",
        );
        expect(md.indexOf("## What changed in the stack files")).toBeLessThan(md.indexOf("## Rendered objects"));
        // The DGD's prefill replicas only: the dashboard's tokens/s per GPU counts GPUs from series, not from the placement.
        expect(md).toContain("| spoke-sg1 | changed | 0 | 0 | 1 | 1 |");
        expect(md).not.toContain('`"qwen3-32b (8 GPUs)"`');
        expect(md).toContain("- `DynamoGraphDeployment inference/qwen3-32b`\n  - `spec.components[name=prefill].replicas`: `2` → `1`");
        expect(md).toContain("`spokeContracts.sg1.endpoints[name=qwen3-32b].topology.prefill.replicas`: `2` → `1`");
        expect(md).not.toContain("spoke-hn1"); // not selected
        expect(md).not.toMatch(/sk-h200-[0-9a-z]{48}/);
        expect(r.stdout).toContain("diff against main: changes in hub-prod, spoke-sg1");
        const worktrees = execFileSync("git", ["worktree", "list", "--porcelain"], { cwd: repo, encoding: "utf8" });
        expect(worktrees.match(/^worktree /gm)).toHaveLength(1);
        // A plain render afterwards (of any stack: the hub alone is the cheapest) removes the stale diff.md.
        const again = await render(["--out", out, "hub-prod"]);
        expect(again.code).toBe(0);
        expect(fs.existsSync(path.join(out, "diff.md"))).toBe(false);
    }, 240_000);

    it("still renders the working tree when the base ref does not exist, and says so in diff.md", async () => {
        const out = path.join(repo, "out-noref");
        const r = await render(["--out", out, "--diff", "no-such-ref", "hub-prod"]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(fs.existsSync(path.join(out, "hub-prod", "report.md"))).toBe(true);
        const md = fs.readFileSync(path.join(out, "diff.md"), "utf8");
        expect(md).toContain("The base could not be rendered");
        expect(md).toContain("--diff no-such-ref: not a commit");
    }, 240_000);
});
