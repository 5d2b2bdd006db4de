/**
 * `npm run ci-stacks -- [--base <git ref>] [--all]`: which stacks a change must preview (pull requests) or
 * apply (merge to main). The stack list is derived from `stacks/` only, never written in a workflow.
 *
 * Rules (a stack's preview depends on its file, the shared code, and for hub/spoke pairs on each other):
 * - a change outside `stacks/` that is not documentation (`*.md`, `docs/`) is shared code: every stack;
 * - `stacks/Pulumi.<hub>.yaml`: the hub and every spoke that references it (placement, bundles);
 * - `stacks/Pulumi.<spoke>.yaml`: the spoke and its hub (the hub checks every spoke file for collisions and
 *   records its networks);
 * - a deleted stack file previews nothing (destroying a stack is a deliberate `pulumi destroy`).
 * Output order: hubs first, then spokes, each by name (spokes read the hub's outputs).
 *
 * In GitHub Actions (`GITHUB_OUTPUT` set) it writes `stacks`, `hubs` and `spokes` as JSON arrays there;
 * otherwise it prints `stacks` as JSON.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { exitOnHelp } from "./cli";
import { discoverStacks, type StackFile, STACKS_DIR } from "../lib/stackfiles";

/** True for paths that cannot change what a stack deploys. */
export function isDocumentation(file: string): boolean {
    return /\.md$/i.test(file) || file.startsWith("docs/") || file === "LICENSE";
}

/**
 * Stacks affected by the changed paths (repo-relative, forward slashes), hubs first.
 * @param stacks every stack file under stacks/ (discoverStacks)
 */
export function affectedStacks(changed: string[], stacks: StackFile[]): string[] {
    const byName = new Map(stacks.map((s) => [s.name, s]));
    const picked = new Set<string>();
    for (const file of changed) {
        const m = /^stacks\/Pulumi\.(.+)\.ya?ml$/.exec(file);
        if (!m) {
            if (!isDocumentation(file)) stacks.forEach((s) => picked.add(s.name));
            continue;
        }
        const s = byName.get(m[1]);
        if (!s) continue; // deleted stack file
        picked.add(s.name);
        if (s.role === "hub") stacks.filter((x) => x.hub === s.name).forEach((x) => picked.add(x.name));
        if (s.hub && byName.has(s.hub)) picked.add(s.hub);
    }
    return orderStacks([...picked].map((n) => byName.get(n)!)).map((s) => s.name);
}

/** Hubs first, then spokes, each by name. */
export function orderStacks(stacks: StackFile[]): StackFile[] {
    const rank = (s: StackFile) => (s.role === "hub" ? 0 : 1);
    return [...stacks].sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}

/** Paths changed between `base` and HEAD (merge-base diff, as a pull request shows it). */
export function changedFiles(base: string, cwd = process.cwd()): string[] {
    const out = execFileSync("git", ["diff", "--name-only", `${base}...HEAD`], { cwd, encoding: "utf8" });
    return out
        .split("\n")
        .map((l) => l.trim())
        .filter(Boolean);
}

const HELP = `
usage: npm run ci-stacks [-- --base REF] [--all]

Which stacks a change must preview (pull requests) or apply (merge to main), derived from stacks/ and the
files changed since REF: a stack file changes itself and its hub/spokes; any other non-documentation file is
shared code and selects every stack. Prints the stacks as JSON (hubs first); in GitHub Actions also writes
\`stacks\`, \`hubs\` and \`spokes\` to GITHUB_OUTPUT.

Options:
  --base REF   compare HEAD with REF (without it, or when REF is unknown: every stack)
  --all        every stack
  --hub-of S   print the hub stack of spoke stack S (preview.yml: which hub's published outputs it reads)
  -h, --help   this text

Examples:
  npm run ci-stacks -- --base origin/main
  npm run ci-stacks -- --all
`;

function main() {
    const argv = process.argv.slice(2);
    exitOnHelp(argv, HELP);
    let base: string | undefined;
    let all = false;
    let hubOf: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--base") base = argv[++i];
        else if (argv[i] === "--all") all = true;
        else if (argv[i] === "--hub-of") hubOf = argv[++i];
        else throw new Error(`unknown argument ${argv[i]} (usage: ci-stacks [--base <ref>] [--all] [--hub-of <spoke stack>])`);
    }
    const stacks = discoverStacks(STACKS_DIR);
    if (hubOf !== undefined) {
        const s = stacks.find((x) => x.name === hubOf);
        if (!s?.hub) throw new Error(`--hub-of ${hubOf}: no spoke stack file stacks/Pulumi.${hubOf}.yaml with platform:spoke.hubStack`);
        process.stdout.write(`${s.hub}\n`);
        return;
    }
    // No base (first push, manual run) or an unknown one: everything.
    let names: string[];
    if (all || !base || /^0+$/.test(base)) names = orderStacks(stacks).map((s) => s.name);
    else {
        let changed: string[] | undefined;
        try {
            changed = changedFiles(base, path.join(STACKS_DIR, ".."));
        } catch (e) {
            // e.g. the base commit is gone after a force-push: preview/apply everything rather than nothing.
            process.stderr.write(`ci-stacks: cannot diff against ${base} (${(e as Error).message.split("\n")[0]}); listing every stack\n`);
        }
        names = changed ? affectedStacks(changed, stacks) : orderStacks(stacks).map((s) => s.name);
    }
    const role = new Map(stacks.map((s) => [s.name, s.role]));
    const result = { stacks: names, hubs: names.filter((n) => role.get(n) === "hub"), spokes: names.filter((n) => role.get(n) !== "hub") };
    if (process.env.GITHUB_OUTPUT) {
        fs.appendFileSync(
            process.env.GITHUB_OUTPUT,
            Object.entries(result)
                .map(([k, v]) => `${k}=${JSON.stringify(v)}\n`)
                .join(""),
        );
    }
    process.stdout.write(`${JSON.stringify(result.stacks)}\n`);
}

if (require.main === module) {
    try {
        main();
    } catch (e) {
        process.stderr.write(`ci-stacks: ${(e as Error).message}\n`);
        process.exit(1);
    }
}
