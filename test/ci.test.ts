import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { affectedStacks, isDocumentation } from "../tools/ci-stacks";
import { discoverStacks } from "../lib/stackfiles";
import { ROOT, STACKS, testTempDir } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

const run = promisify(execFile);
const WORKFLOWS = path.join(ROOT, ".github", "workflows");
const workflow = (f: string) => YAML.parse(fs.readFileSync(path.join(WORKFLOWS, f), "utf8"));

/** Stack names from the file names under stacks/, hubs first (what a preview of shared code must cover). */
function stacksUnderStacksDir(): string[] {
    const names = fs
        .readdirSync(STACKS)
        .map((f) => /^Pulumi\.(.+)\.ya?ml$/.exec(f)?.[1])
        .filter((x): x is string => !!x);
    const isHub = (n: string) =>
        YAML.parse(fs.readFileSync(path.join(STACKS, `Pulumi.${n}.yaml`), "utf8")).config["platform:role"] === "hub";
    return [...names.filter(isHub).sort(), ...names.filter((n) => !isHub(n)).sort()];
}

const CI_RUN = fs.readFileSync(path.join(ROOT, ".ci", "run"), "utf8");

/** A gate is the command up to its arguments: `npm run render -- --diff X` and `npm run render` are one gate. */
function gates(text: string): string[] {
    return text
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => /^(npm|npx) /.test(l) && l !== "npm --version")
        .map((l) => l.replace(/\s+--(\s.*)?$/, "").replace(/\s+--(no-audit|no-fund|ignore-scripts|silent)\b/g, ""));
}

/**
 * The static checks CI runs, by the gate .ci/run and the workflows write, and the tool command each must come to (an
 * `npm run` gate through package.json's script): the type-checkers over the program and the pack, Biome's linter and
 * formatter over the whole repository (biome.jsonc), GitHub's workflow parser. Exact, so `"lint": "true"` or a
 * narrowed target is told apart.
 */
const STATIC_CHECKS: Record<string, string> = {
    "npm run typecheck": "tsc --noEmit -p .",
    "npx tsc -p policies --noEmit": "tsc -p policies --noEmit",
    "npm run lint": "biome lint .",
    "npm run format:check": "biome format .",
    "npm run lint:workflows": "node tools/lint-workflows.mjs",
};

const SCRIPTS: Record<string, string> = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts;

/** What a gate runs: an `npm run X` gate is package.json's script X, an `npx` gate its command; undefined for others. */
function toolCommand(gate: string, scripts: Record<string, string>): string | undefined {
    const npmRun = /^npm run (\S+)$/.exec(gate);
    if (npmRun) return scripts[npmRun[1]];
    return /^npx (.+)$/.exec(gate)?.[1];
}

/** Each static check a script (.ci/run, a workflow job's runs) lacks or that comes to another command, in words. */
function staticCheckFaults(runs: string, scripts: Record<string, string>): string[] {
    const present = gates(runs);
    return Object.entries(STATIC_CHECKS).flatMap(([gate, command]) => {
        if (!present.includes(gate)) return [`${gate}: not run`];
        const actual = toolCommand(gate, scripts);
        return actual === command ? [] : [`${gate}: runs ${JSON.stringify(actual)}, expected ${JSON.stringify(command)}`];
    });
}

/**
 * The OS packages a script installs with apt-get, sorted: the arguments of every `apt-get install` (flags dropped), where
 * `"${need[@]}"` stands for every `need+=(...)` of the script (.ci/run installs only what the machine lacks).
 */
function aptPackages(text: string): string[] {
    const need = [...text.matchAll(/\bneed\+=\(([^)]*)\)/g)].flatMap((m) => m[1].trim().split(/\s+/));
    const out = new Set<string>();
    for (const m of text.matchAll(/\bapt-get\s+install\b([^\n;&|`)]*)/g))
        for (const t of m[1].trim().split(/\s+/).filter(Boolean)) {
            if (t === '"${need[@]}"') for (const n of need) out.add(n);
            else if (!t.startsWith("-")) out.add(t);
        }
    return [...out].sort();
}

/** Every job of every workflow whose steps run `npm test`, with its steps and their run scripts joined. */
function testJobs(): Array<{ where: string; steps: any[]; runs: string }> {
    const out: Array<{ where: string; steps: any[]; runs: string }> = [];
    for (const f of fs
        .readdirSync(WORKFLOWS)
        .filter((x) => /\.ya?ml$/.test(x))
        .sort())
        for (const [name, job] of Object.entries<any>(workflow(f).jobs ?? {})) {
            const steps: any[] = job.steps ?? [];
            const runs = steps.map((s) => s.run ?? "").join("\n");
            if (/(^|\s)npm test\b/m.test(runs)) out.push({ where: `${f} ${name}`, steps, runs });
        }
    return out;
}

/** Whether a step runs the action `owner/repo` (any ref: the workflows pin a commit, `# vX.Y.Z` beside it). */
const runsAction = (step: any, action: string) => String(step?.uses ?? "").startsWith(`${action}@`);

/**
 * A remote action or reusable workflow pinned to the full commit SHA of a release, the release tag as the line's comment
 * (`owner/repo[/path]@<40 hex> # vX.Y.Z`): a tag or branch can be moved to other code, a commit cannot ("Using
 * third-party actions", github/docs@main:content/actions/security-for-github-actions/security-guides/security-hardening-for-github-actions.md).
 */
const PINNED_USES = /^([\w.-]+\/[\w.-]+)((?:\/[\w.-]+)*)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$/;

/**
 * A workflow text's `uses:` references, read from its raw lines (YAML.parse drops the comment that names the release):
 * `pins`, the pinned ones (PINNED_USES); `faults`, in words, each that is neither pinned nor a local action (`./...`),
 * and each `uses` YAML sees that no plain `uses:` line holds (a flow mapping, a quoted key): it escaped the line check.
 */
function usesPins(text: string): { pins: Array<{ action: string; sha: string; tag: string }>; faults: string[] } {
    const pins: Array<{ action: string; sha: string; tag: string }> = [];
    const faults: string[] = [];
    const checked: string[] = [];
    for (const m of text.matchAll(/^\s*(?:-\s+)?uses:\s*(.*?)\s*$/gm)) {
        const value = m[1];
        const pin = PINNED_USES.exec(value);
        if (!pin) {
            if (!value.startsWith("./")) faults.push(`${value}: not owner/repo@<40-hex commit> # vX.Y.Z`);
            checked.push(value.replace(/\s+#.*$/, ""));
            continue;
        }
        pins.push({ action: `${pin[1]}${pin[2]}`, sha: pin[3], tag: pin[4] });
        checked.push(`${pin[1]}${pin[2]}@${pin[3]}`);
    }
    const wf = YAML.parse(text) ?? {};
    const parsed = Object.values<any>(wf.jobs ?? {})
        .flatMap((j) => [j?.uses, ...(j?.steps ?? []).map((s: any) => s?.uses)])
        .filter((u) => u !== undefined);
    for (const u of parsed) {
        const i = checked.indexOf(String(u));
        if (i >= 0) checked.splice(i, 1);
        else faults.push(`${String(u)}: a uses the line check did not see (write it as a plain \`uses:\` line)`);
    }
    return { pins, faults };
}

async function lint(files: string[]): Promise<{ code: number; out: string }> {
    try {
        const r = await run(process.execPath, ["tools/lint-workflows.mjs", ...files], { cwd: ROOT });
        return { code: 0, out: r.stdout };
    } catch (e) {
        const x = e as { code: number; stdout: string };
        return { code: x.code, out: x.stdout };
    }
}

describe("GitHub Actions workflows", () => {
    it("pass GitHub's workflow parser (@actions/workflow-parser), which rejects a broken workflow", async () => {
        const ok = await lint([]);
        expect(ok).toEqual({
            code: 0,
            out: ".github/workflows/images.yml: ok\n.github/workflows/pins.yml: ok\n.github/workflows/preview.yml: ok\n.github/workflows/up.yml: ok\n",
        });
        const bad = path.join(testTempDir("wf-"), "bad.yml");
        fs.writeFileSync(
            bad,
            [
                "on: pull_request",
                "permissions: { pull-requests: writ }",
                "jobs:",
                "  a:",
                "    runs-on: ubuntu-latest",
                "    steps:",
                "      - run: echo ${{ secretz.X }}",
                "        timeout: 3",
            ].join("\n"),
        );
        const r = await lint([bad]);
        expect(r.code).toBe(1);
        expect(r.out).toMatch(/Unexpected value 'writ'/);
        expect(r.out).toMatch(/Unexpected value 'timeout'/);
        expect(r.out).toMatch(/Unrecognized named-value: 'secretz'/);
    });

    it("every remote action of every workflow is pinned to a release's commit, the tag as its comment, one pin per action", () => {
        const files = fs
            .readdirSync(WORKFLOWS)
            .filter((x) => /\.ya?ml$/.test(x))
            .sort();
        const byAction = new Map<string, Set<string>>();
        let remote = 0;
        for (const f of files) {
            const { pins, faults } = usesPins(fs.readFileSync(path.join(WORKFLOWS, f), "utf8"));
            expect(faults, f).toEqual([]);
            remote += pins.length;
            for (const p of pins) {
                const seen = byAction.get(p.action.toLowerCase()) ?? new Set<string>();
                byAction.set(p.action.toLowerCase(), seen.add(`${p.sha} # ${p.tag}`));
            }
        }
        expect(remote).toBeGreaterThan(0);
        // One action, one pin: a bump changes every workflow, never one step on an older commit.
        for (const [action, seen] of byAction) expect([...seen], action).toHaveLength(1);
        // Planted: a major tag, a bare commit, a commit with a major or a branch as comment, a short SHA, a branch, a
        // reusable workflow by branch, a docker image by tag, and a flow mapping the line check cannot read.
        const sha = "11d5960a326750d5838078e36cf38b85af677262";
        const planted = (uses: string) =>
            usesPins(`on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: ${uses}\n`);
        for (const bad of [
            "actions/checkout@v4",
            `actions/checkout@${sha}`,
            `actions/checkout@${sha} # v4`,
            `actions/checkout@${sha} # main`,
            `actions/checkout@${sha.slice(0, 12)} # v4.4.0`,
            `actions/checkout@${sha.toUpperCase()} # v4.4.0`,
            "actions/checkout@main # v4.4.0",
            "docker://alpine:3.22",
        ])
            expect(planted(bad).faults, bad).toHaveLength(1);
        expect(planted(`actions/checkout@${sha} # v4.4.0`)).toEqual({
            pins: [{ action: "actions/checkout", sha, tag: "v4.4.0" }],
            faults: [],
        });
        expect(planted("./.github/actions/local # ours").faults).toEqual([]);
        expect(usesPins("on: push\njobs:\n  r:\n    uses: org/repo/.github/workflows/x.yml@main\n").faults).toHaveLength(1);
        expect(
            usesPins(`on: push\njobs:\n  r:\n    uses: org/repo/.github/workflows/x.yml@${sha} # v1.0.0\n`).pins.map((p) => p.action),
        ).toEqual(["org/repo/.github/workflows/x.yml"]);
        expect(
            usesPins("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - { uses: actions/checkout@v4 }\n").faults,
        ).toEqual(["actions/checkout@v4: a uses the line check did not see (write it as a plain `uses:` line)"]);
    });

    it("preview.yml previews, with the policy pack, exactly the stacks ci-stacks derives from stacks/ (none hard-coded)", () => {
        const wf = workflow("preview.yml");
        expect(Object.keys(wf.on)).toEqual(["pull_request"]);
        expect(wf.jobs.check.steps.find((s: any) => s.id === "stacks").run).toMatch(
            /npm run --silent ci-stacks -- --base "origin\/\$\{\{ github.base_ref \}\}"/,
        );
        expect(wf.jobs.check.outputs.stacks).toBe("${{ steps.stacks.outputs.stacks }}");
        // Of those, the spokes: a hub is never previewed with a pull request's code (test/ci-preview-secrets.test.ts).
        expect(wf.jobs.check.outputs.spokes).toBe("${{ steps.stacks.outputs.spokes }}");
        expect(wf.jobs.preview.strategy.matrix).toEqual({ stack: "${{ fromJSON(needs.check.outputs.spokes) }}" });
        expect(wf.jobs.preview.permissions["pull-requests"]).toBe("write");
        const step = wf.jobs.preview.steps.find((s: any) => runsAction(s, "pulumi/actions"));
        expect(step.with).toMatchObject({
            command: "preview",
            policyPacks: "policies",
            "comment-on-pr": true,
            "stack-name": "${{ vars.PULUMI_ORG || 'organization' }}/platform/${{ matrix.stack }}",
        });
        expect(wf.env.PULUMI_NODEJS_TRANSPILE_ONLY).toBe("true");
        const runs = wf.jobs.check.steps.map((s: any) => s.run ?? "").join("\n");
        for (const gate of [
            "npm ci --no-audit",
            "npm ci --prefix policies",
            "npm run typecheck",
            "npx tsc -p policies --noEmit",
            "npm test",
            "npm run render",
            "npm run validate",
            "npm run lint:workflows",
        ])
            expect(runs).toContain(gate);
        for (const f of ["preview.yml", "up.yml"]) {
            const text = fs.readFileSync(path.join(WORKFLOWS, f), "utf8");
            for (const s of stacksUnderStacksDir()) expect(text, `${f} names stack ${s}`).not.toContain(s);
        }
    });

    it(".ci/run runs the gates of every workflow job that runs npm test, each once (the render runs the upstream check)", () => {
        const jobs = testJobs();
        expect(jobs.map((j) => j.where)).toEqual(["preview.yml check"]);
        const ciRun = gates(CI_RUN);
        for (const j of jobs) {
            // PR-only steps: which stacks to preview, and the render comment; neither applies to a clone of main.
            const prOnly = (g: string) => g.startsWith("npm run ci-stacks") || g.startsWith("npm run --silent ci-stacks");
            expect(new Set(ciRun), j.where).toEqual(new Set(gates(j.runs).filter((g) => !prOnly(g))));
        }
        expect(ciRun.length, `.ci/run runs a gate twice: ${ciRun.join(", ")}`).toBe(new Set(ciRun).size);
        expect(ciRun).toEqual(expect.arrayContaining(["npm run lint", "npm run format:check", "npm run lint:workflows"]));
        expect(ciRun).not.toContain("npm run upstream-check");
    });

    it("lint, format and type checks run the Biome and tsc commands over the repository, in .ci/run and every job that runs npm test", () => {
        expect(staticCheckFaults(CI_RUN, SCRIPTS), ".ci/run").toEqual([]);
        expect(CI_RUN, ".ci/run stops at the first failing gate").toMatch(/^set -euo pipefail$/m);
        for (const j of testJobs()) {
            expect(staticCheckFaults(j.runs, SCRIPTS), j.where).toEqual([]);
            const tolerated = j.steps.filter((s: any) => s["continue-on-error"] !== undefined).map((s: any) => s.name ?? s.run);
            expect(tolerated, `${j.where}: steps whose failure is ignored`).toEqual([]);
        }
        // Planted: a script that always passes, a narrowed target, a gate whose failure is swallowed, a gate dropped.
        expect(staticCheckFaults(CI_RUN, { ...SCRIPTS, "format:check": "true" })).toEqual([
            'npm run format:check: runs "true", expected "biome format ."',
        ]);
        expect(staticCheckFaults(CI_RUN, { ...SCRIPTS, lint: "biome lint lib" })).toEqual([
            'npm run lint: runs "biome lint lib", expected "biome lint ."',
        ]);
        expect(staticCheckFaults(CI_RUN.replace(/^npm run typecheck$/m, "npm run typecheck || true"), SCRIPTS)).toEqual([
            "npm run typecheck: not run",
        ]);
        expect(staticCheckFaults(CI_RUN.replace(/^npx tsc -p policies --noEmit$/m, ""), SCRIPTS)).toEqual([
            "npx tsc -p policies --noEmit: not run",
        ]);
    });

    it("every workflow job that runs npm test installs the OS packages .ci/run installs, on the Node .ci/run fetches", () => {
        const ciPackages = aptPackages(CI_RUN);
        expect(ciPackages).toEqual(["postgresql", "prometheus", "redis-server"]);
        expect(aptPackages(fs.readFileSync(path.join(ROOT, "README.md"), "utf8")), "README's prerequisites").toEqual(ciPackages);
        const nodeVersion = /^NODE_VERSION=(\d+\.\d+\.\d+)$/m.exec(CI_RUN)?.[1];
        expect(nodeVersion).toBeDefined();
        // The exact release: setup-node reads .nvmrc, and a bare major would take whichever 24.x the runner finds first
        expect(fs.readFileSync(path.join(ROOT, ".nvmrc"), "utf8").trim(), ".nvmrc is .ci/run's Node release").toBe(nodeVersion);
        for (const j of testJobs()) {
            expect(aptPackages(j.runs), `${j.where}: apt-get install`).toEqual(ciPackages);
            const node = j.steps.filter((s: any) => String(s.uses ?? "").startsWith("actions/setup-node@"));
            expect(
                node.map((s: any) => s.with?.["node-version-file"]),
                `${j.where}: setup-node from .nvmrc`,
            ).toEqual([".nvmrc"]);
        }
        // A job installing less than .ci/run (no prometheus: promtool tests fail, never skip) is told apart.
        const planted = "sudo apt-get update -qq && sudo apt-get install -y -qq redis-server postgresql\nnpm test";
        expect(aptPackages(planted)).not.toEqual(ciPackages);
        expect(aptPackages('need+=(a)\nneed+=(b)\napt-get install -y -qq "${need[@]}" c; echo')).toEqual(["a", "b", "c"]);
    });

    it("up.yml applies on push to main only, hubs before spokes, each job gated by the production environment", () => {
        const wf = workflow("up.yml");
        expect(wf.on.push).toEqual({ branches: ["main"] });
        expect(wf.on.pull_request).toBeUndefined();
        expect(wf.jobs["up-hubs"].environment).toBe("production");
        expect(wf.jobs["up-spokes"].environment).toBe("production");
        expect(wf.jobs["up-spokes"].needs).toEqual(["plan", "up-hubs"]);
        expect(wf.jobs["up-hubs"].strategy.matrix.stack).toBe("${{ fromJSON(needs.plan.outputs.hubs) }}");
        expect(wf.jobs["up-spokes"].strategy.matrix.stack).toBe("${{ fromJSON(needs.plan.outputs.spokes) }}");
        for (const j of ["up-hubs", "up-spokes"])
            expect(wf.jobs[j].steps.find((s: any) => runsAction(s, "pulumi/actions")).with).toMatchObject({
                command: "up",
                policyPacks: "policies",
            });
    });

    it("every npm ci of CI (the workflows, whose deploy and preview jobs hold an OIDC token, and .ci/run) runs no install script", () => {
        const lines = [
            ...fs.readdirSync(WORKFLOWS).map((f) => fs.readFileSync(path.join(WORKFLOWS, f), "utf8")),
            fs.readFileSync(path.join(ROOT, ".ci", "run"), "utf8"),
        ]
            .flatMap((t) => t.split("\n"))
            .filter((l) => /(^|[\s;&|(])npm ci\b/.test(l) && !/^\s*(#|step |- name:|name:)/.test(l));
        expect(lines.length).toBeGreaterThanOrEqual(10);
        expect(lines.filter((l) => !l.includes("--ignore-scripts"))).toEqual([]);
    });

    it("every pulumi/actions step installs the Pulumi CLI release of the pinned SDK, not the action's default (^3)", () => {
        // The CLI and the Node.js SDK are released together under one version number (pulumi/pulumi CHANGELOG.md).
        const sdk = (JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> })
            .dependencies["@pulumi/pulumi"];
        expect(sdk).toMatch(/^\d+\.\d+\.\d+$/);
        let steps = 0;
        for (const f of ["preview.yml", "up.yml"]) {
            const wf = YAML.parse(fs.readFileSync(path.join(ROOT, ".github", "workflows", f), "utf8"));
            for (const job of Object.values(wf.jobs) as any[])
                for (const step of job.steps ?? [])
                    if (String(step.uses ?? "").startsWith("pulumi/actions@")) {
                        steps++;
                        expect(String(step.with?.["pulumi-version"]), `${f}: ${step.uses}`).toBe(sdk);
                    }
        }
        expect(steps).toBe(3);
    });
});

describe("ci-stacks: which stacks a change previews", () => {
    const stacks = discoverStacks(STACKS);
    it("shared code previews exactly the stacks under stacks/", () => {
        expect(affectedStacks(["config/cidr.ts"], stacks)).toEqual(stacksUnderStacksDir());
        expect(affectedStacks(["package-lock.json", "README.md"], stacks)).toEqual(stacksUnderStacksDir());
    });
    it("a spoke file previews the spoke and its hub; the hub file previews the hub and all its spokes", () => {
        expect(affectedStacks(["stacks/Pulumi.spoke-sg1.yaml"], stacks)).toEqual(["hub-prod", "spoke-sg1"]);
        expect(affectedStacks(["stacks/Pulumi.hub-prod.yaml"], stacks)).toEqual(stacksUnderStacksDir());
    });
    it("documentation and deleted stack files preview nothing", () => {
        expect(isDocumentation("docs/x.md") && isDocumentation("README.md") && !isDocumentation("tools/render.ts")).toBe(true);
        expect(affectedStacks(["README.md", "docs/ci.md", "stacks/Pulumi.spoke-gone.yaml"], stacks)).toEqual([]);
    });
    it("the CLI (--all) prints the stacks under stacks/ and writes hubs/spokes for GitHub Actions", async () => {
        const out = path.join(testTempDir("gh-"), "output");
        const r = await run(process.execPath, ["-r", ESBUILD_LOADER, "tools/ci-stacks.ts", "--all"], {
            cwd: ROOT,
            env: { ...process.env, GITHUB_OUTPUT: out },
        });
        expect(JSON.parse(r.stdout)).toEqual(stacksUnderStacksDir());
        const lines = Object.fromEntries(
            fs
                .readFileSync(out, "utf8")
                .trim()
                .split("\n")
                .map((l) => [l.slice(0, l.indexOf("=")), JSON.parse(l.slice(l.indexOf("=") + 1))]),
        );
        expect(lines.stacks).toEqual(stacksUnderStacksDir());
        expect([...lines.hubs, ...lines.spokes]).toEqual(stacksUnderStacksDir());
        expect(lines.hubs).toEqual(["hub-prod"]);
    });
});
