/**
 * `npm run render [-- <stack>...] [--config path/to/Pulumi.x.yaml] [--preview] [--out dir] [--diff <git-ref>]`
 *
 * Offline preview of stacks: each stack file is run through the Pulumi SDK with the engine
 * mocked (no cloud credentials, no Pulumi CLI), hubs before the spokes that reference them, and written to
 * `out/<stack>/` (manifests.yaml, resources.json, policy.json, outputs.json, report.md and its pictures,
 * tools/report/). Exits non-zero on a config error, a mandatory policy violation or an upstream-check finding
 * (tools/upstream-check.ts, run on every stack that produced output); a stack that fails config validation gets no
 * output directory. `--diff <ref>` also renders `ref` and writes `out/diff.md` (tools/diff.ts).
 * Progress and timings go to stderr on a terminal (tools/report/progress.ts), never into `out/`.
 */
// First: on --help it exits before the imports below load.
import { HELP } from "./help/render";
import * as fs from "node:fs";
import * as path from "node:path";
import { allPolicies } from "../policies/policies";
import { ConfigError } from "../config/errors";
import { isHandled, loadProgram, runStack, type RunStackResult, type StackOutputs } from "./harness";
import { isManifest, manifestsYaml, resourcesJson } from "./outputs";
import { type PolicyReport, runPolicies } from "./policy-runner";
import { dependencyOrder, discoverStacks, readStackFile, type StackFile, STACKS_DIR } from "../lib/stackfiles";
import { containsSecret, maskWire, referenceableOutputs } from "./wire";
import { checkOutDir, formatFindings } from "./upstream-check";
import { reportFiles, reportInput } from "./report";
import { warningsOf } from "./report/markdown";
import { buildView } from "./report/model";
import { RenderProgress } from "./report/progress";
import { startDiff, stackFileNames } from "./diff";
import { exitOnHelp } from "./cli";
import { setAsideSpokesForRender, SpokeFilesError } from "../programs/spoke-registry";

export interface RenderOptions {
    outDir: string;
    preview: boolean;
    quiet?: boolean;
    /** Progress and timings per stack and phase (stderr on a TTY). */
    progress?: RenderProgress;
    /** Directory of the real stack files (default `stacks/`): only a file there owns `out/<name>/`. */
    stacksDir?: string;
}

export interface StackRenderResult {
    stack: string;
    ok: boolean;
    error?: string;
    result?: RunStackResult;
    policy?: PolicyReport;
}

const PROJECT = "platform";

function log(opts: RenderOptions, s: string) {
    if (!opts.quiet) process.stdout.write(`${s}\n`);
}

/** `aws:s3/bucket:Bucket` -> `aws:Bucket`, `kubernetes:apps/v1:Deployment` -> `k8s:Deployment` (full types in resources.json). */
function shortType(t: string): string {
    const parts = t.split(":");
    const pkg = parts[0] === "kubernetes" ? "k8s" : parts[0];
    return `${pkg}:${parts[parts.length - 1]}`;
}

/** Comma-joined items wrapped to ~110 columns, continuation lines indented under the first item. */
function wrap(head: string, items: string[], width = 110): string[] {
    const lines: string[] = [];
    let line = head;
    for (const [i, it] of items.entries()) {
        const piece = it + (i < items.length - 1 ? "," : "");
        if (line.length + piece.length + 1 > width && line.trim() !== head.trim()) {
            lines.push(line.trimEnd());
            line = " ".repeat(head.length);
        }
        line += `${piece} `;
    }
    lines.push(line.trimEnd());
    return lines;
}

function summarise(s: StackFile, r: RunStackResult, policy: PolicyReport, outDir: string, warnings: string[]): string {
    const byType = new Map<string, number>();
    for (const x of r.resources) if (x.type !== "pulumi:pulumi:Stack") byType.set(x.type, (byType.get(x.type) ?? 0) + 1);
    const manifests = r.resources.filter(isManifest).length;
    const kinds = [...byType.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([t, n]) => `${shortType(t)} ${n}`);
    const helm = r.resources.filter((x) => x.type === "kubernetes:helm.sh/v3:Release").map((x) => `${x.inputs.chart}@${x.inputs.version}`);
    const lines = [
        `${s.name} (${s.role}) ${s.file}: ${r.resources.length - 1} resources, ${manifests} Kubernetes objects -> ${path.relative(process.cwd(), outDir) || outDir}`,
        ...wrap("  kinds: ", kinds),
    ];
    if (helm.length) lines.push(...wrap("  helm: ", helm));
    const adv = policy.findings.filter((f) => f.enforcementLevel !== "mandatory").length;
    lines.push(
        `  policy: ${policy.mandatory.length} mandatory violation(s), ${adv} advisory, ${policy.policiesRun} policies on ${policy.resourcesChecked} resources`,
    );
    for (const f of policy.findings)
        lines.push(
            `    [${f.enforcementLevel}] ${f.policyName}: ${f.message}${f.resourceName ? ` (${f.resourceType} ${f.resourceName})` : ""}`,
        );
    for (const w of warnings) lines.push(`  warning: ${w}`);
    return lines.join("\n");
}

function writeAtomically(dir: string, files: Record<string, string | Uint8Array>) {
    const tmp = `${dir}.tmp-${process.pid}`;
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(tmp, { recursive: true });
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(tmp, name), text);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
}

/**
 * True when `s` may replace or remove `out/<name>/`: it is the real stack's file (`stacks/Pulumi.<name>.yaml`), or no
 * real stack has that name. A failing file given with `--config` that is merely named like a real stack leaves the
 * real stack's output alone.
 */
export function ownsOutDir(s: StackFile, stacksDir = STACKS_DIR): boolean {
    const real = [".yaml", ".yml"].map((x) => path.resolve(stacksDir, `Pulumi.${s.name}${x}`)).find((f) => fs.existsSync(f));
    return real === undefined || path.resolve(s.file) === real;
}

/**
 * Renders stacks in dependency order. Returns one result per stack; never throws for a bad stack.
 *
 * A bad stack file fails itself and the stacks that depend on what it would change, never another stack's output:
 * - a spoke file that is wrong on its own (it does not parse as a spoke file, or collides with another spoke) fails
 *   with its own error, headed by that file; its hub, which checks every spoke file, is not rendered (its `out/` is
 *   left as it was), and the hub's other spokes render against the hub's outputs computed without the bad file;
 * - a hub that fails on its own file fails its spokes too (skipped), whose `out/` folders are left as they were;
 * - the bad stack's own `out/` is removed, and the error says so, so an old report is never taken for current.
 */
export async function renderStacks(stacks: StackFile[], opts: RenderOptions): Promise<StackRenderResult[]> {
    const results: StackRenderResult[] = [];
    const rendered: Record<string, StackOutputs> = {};
    const failedHubs = new Set<string>();
    /** Spoke stack -> its own error, found by its hub's check of the spoke files. */
    const badSpokes = new Map<string, string>();
    const progress = opts.progress;
    const owns = (s: StackFile) => ownsOutDir(s, opts.stacksDir);
    const ordered = dependencyOrder(stacks);
    for (const s of ordered) {
        const outDir = path.join(opts.outDir, s.name);
        progress?.stack(s.name);
        const fail = (error: string, removeOut: boolean, spokesFail = s.role === "hub") => {
            // The bad stack's own out/ goes, so no report of a plan that no longer renders is taken for current.
            if (removeOut && owns(s) && fs.existsSync(outDir)) {
                fs.rmSync(outDir, { recursive: true, force: true });
                error += `\n  (out/${s.name} removed: its last report no longer matches its stack file)`;
            }
            results.push({ stack: s.name, ok: false, error });
            if (spokesFail) failedHubs.add(s.name);
            progress?.end(false);
            log(opts, error);
        };
        if (badSpokes.has(s.name)) {
            fail(badSpokes.get(s.name)!, true);
            continue;
        }
        if (s.hub && failedHubs.has(s.hub)) {
            fail(
                `${s.file}: skipped: its hub stack "${s.hub}" failed to render${fs.existsSync(outDir) ? `; ${path.relative(process.cwd(), outDir) || outDir} left as it was` : ""}`,
                false,
            );
            continue;
        }
        const prevStackFile = process.env.PLATFORM_STACK_FILE;
        process.env.PLATFORM_STACK_FILE = s.file;
        const run = (preview: boolean) =>
            runStack({
                project: PROJECT,
                stack: s.name,
                config: s.config,
                secretKeys: s.secretKeys,
                preview,
                stackOutputs: rendered,
                program: () => loadProgram()(),
            });
        try {
            let result: RunStackResult;
            // The program's warnings (`pulumi.log.warn`, printed by the SDK as `warning: ...` when no engine runs) go
            // into the report and the summary, where a reviewer reads them, instead of scrolling past on stderr.
            const warnings: string[] = [];
            const consoleWarn = console.warn;
            console.warn = (...a: unknown[]) => {
                const m = /^warning: (?:\[runtime\] )?([\s\S]*)$/.exec(a.map(String).join(" "));
                if (m) warnings.push(m[1].trim());
                else consoleWarn(...a);
            };
            try {
                result = await run(opts.preview);
            } catch (e) {
                if (e instanceof SpokeFilesError) for (const [stack, err] of e.spokeErrors) badSpokes.set(stack, err.message);
                if (!(e instanceof SpokeFilesError) || e.issues.length > 0 || s.role !== "hub") throw e;
                // Only spoke files are wrong: they fail themselves; the hub (which would gate them) is not rendered,
                // and its outputs for the other spokes are computed with the bad files set aside.
                const inRun = new Set(ordered.map((x) => x.name));
                setAsideSpokesForRender(e.spokeErrors.keys());
                try {
                    const aside = await run(false);
                    rendered[s.name] = {
                        outputs: referenceableOutputs(aside.outputs),
                        secretOutputNames: Object.keys(aside.outputs).filter((k) => containsSecret(aside.outputs[k])),
                    };
                } catch {
                    failedHubs.add(s.name);
                } finally {
                    setAsideSpokesForRender();
                }
                const files = [...e.spokeErrors.keys()].map((k) => `Pulumi.${k}.yaml`).join(", ");
                const elsewhere = [...e.spokeErrors].filter(([k]) => !inRun.has(k)).map(([, err]) => err.message);
                fail(
                    [
                        `${s.file}: not rendered: it checks every spoke file and ${files} ${e.spokeErrors.size === 1 ? "is" : "are"} wrong; ${path.relative(process.cwd(), outDir) || outDir} left as it was`,
                        ...elsewhere,
                    ].join("\n"),
                    false,
                    failedHubs.has(s.name),
                );
                continue;
            } finally {
                console.warn = consoleWarn;
            }
            progress?.phase("policy");
            const policy = await runPolicies(allPolicies, result.resources);
            progress?.phase("report");
            const outputs = maskWire(result.outputs) as Record<string, unknown>;
            const secretOutputNames = Object.keys(result.outputs).filter((k) => containsSecret(result.outputs[k]));
            const resources = resourcesJson(result.resources);
            const input = reportInput(s, resources, outputs, policy, s.hub ? rendered[s.hub]?.outputs : undefined, warnings);
            const report = await reportFiles(input, { previousDir: outDir });
            progress?.phase("write");
            // A failing file that is not the stack's own (named like it, given with --config) leaves out/<stack> alone.
            if (policy.mandatory.length === 0 || owns(s))
                writeAtomically(outDir, {
                    "manifests.yaml": manifestsYaml(result.resources),
                    "resources.json": `${JSON.stringify(resources, null, 2)}\n`,
                    "policy.json": `${JSON.stringify(policy, null, 2)}\n`,
                    "outputs.json": `${JSON.stringify({ outputs, secretOutputNames }, null, 2)}\n`,
                    ...report,
                });
            // A spoke's `pulumi preview` reads its hub's deployed state, never the hub's own preview (whose contract
            // holds unknown ARNs and keys): in preview mode, stacks referencing a hub see it rendered normally.
            const referenced = opts.preview && s.role === "hub" ? (await run(false)).outputs : result.outputs;
            rendered[s.name] = { outputs: referenceableOutputs(referenced), secretOutputNames };
            const ok = policy.mandatory.length === 0;
            results.push({
                stack: s.name,
                ok,
                result,
                policy,
                error: ok ? undefined : `${policy.mandatory.length} mandatory policy violation(s)`,
            });
            progress?.end(ok);
            log(opts, summarise(s, result, policy, outDir, warningsOf(buildView(input))));
            if (!ok && s.role === "hub") failedHubs.add(s.name);
        } catch (e) {
            fail(e instanceof ConfigError ? e.message : `${s.file}: ${(e as Error)?.stack ?? e}`, true);
        } finally {
            if (prevStackFile === undefined) delete process.env.PLATFORM_STACK_FILE;
            else process.env.PLATFORM_STACK_FILE = prevStackFile;
        }
    }
    return results;
}

interface Cli {
    names: string[];
    configs: string[];
    preview: boolean;
    outDir: string;
    stacksDir: string;
    diff?: string;
}

function parseArgs(argv: string[]): Cli {
    exitOnHelp(argv, HELP);
    const cli: Cli = { names: [], configs: [], preview: false, outDir: path.join(process.cwd(), "out"), stacksDir: STACKS_DIR };
    let outGiven = false;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === "--config") cli.configs.push(argv[++i]);
        else if (a === "--preview") cli.preview = true;
        else if (a === "--out") {
            cli.outDir = path.resolve(argv[++i]);
            outGiven = true;
        } else if (a === "--stacks") cli.stacksDir = path.resolve(argv[++i]);
        else if (a === "--diff") {
            cli.diff = argv[++i];
            if (!cli.diff || cli.diff.startsWith("--")) throw new Error("--diff needs a git ref, e.g. --diff origin/main");
        } else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
        else cli.names.push(a);
    }
    // A copy of the stack files renders beside itself (<DIR>/../out), never over the repository's own out/.
    if (cli.stacksDir !== STACKS_DIR && !outGiven) cli.outDir = path.join(path.dirname(cli.stacksDir), "out");
    return cli;
}

/** Picks the stacks to render: the named ones / given files, plus every hub they reference. */
export function selectStacks(all: StackFile[], names: string[], extra: StackFile[]): StackFile[] {
    if (names.length === 0 && extra.length === 0) return all;
    const byName = new Map(all.map((s) => [s.name, s]));
    const picked = new Map<string, StackFile>();
    for (const n of names) {
        const s = byName.get(n);
        if (!s) throw new Error(`no stack "${n}" under stacks/ (have: ${[...byName.keys()].join(", ")})`);
        picked.set(n, s);
    }
    for (const s of extra) picked.set(s.name, s);
    for (const s of [...picked.values()]) {
        if (s.hub && !picked.has(s.hub)) {
            const hub = byName.get(s.hub);
            if (hub) picked.set(hub.name, hub);
        }
    }
    return [...picked.values()];
}

/**
 * Removes `out/<name>/` folders of stacks that no longer exist: folders holding a render (`resources.json` or
 * `manifests.yaml`) whose name is neither a stack file under `stacks/` (by file name, parsed or not: the folder
 * of a stack whose file exists but fails to parse is never removed here) nor a stack of this run. Returns the
 * names removed.
 */
export function removeStaleOutDirs(outDir: string, keep: Set<string>): string[] {
    if (!fs.existsSync(outDir)) return [];
    const removed: string[] = [];
    for (const d of fs.readdirSync(outDir, { withFileTypes: true })) {
        if (!d.isDirectory() || keep.has(d.name) || d.name.includes(".tmp-")) continue;
        const dir = path.join(outDir, d.name);
        if (!fs.existsSync(path.join(dir, "resources.json")) && !fs.existsSync(path.join(dir, "manifests.yaml"))) continue;
        fs.rmSync(dir, { recursive: true, force: true });
        removed.push(d.name);
    }
    return removed.sort();
}

async function main() {
    const cli = parseArgs(process.argv.slice(2));
    const all = discoverStacks(cli.stacksDir);
    const extra = cli.configs.map((f) => readStackFile(path.resolve(f), f));
    const stacks = selectStacks(all, cli.names, extra);
    const progress = new RenderProgress(stacks.length);
    const root = path.join(__dirname, "..");
    const selected = cli.names.length || extra.length ? stacks.map((s) => s.name) : undefined;
    // --diff: the base renders in its own worktree and process while this one renders the working tree.
    if (cli.diff) progress.note(`diff: checking out ${cli.diff}`);
    const diff = cli.diff ? startDiff(root, cli.diff, selected, (m) => process.stderr.write(`${m}\n`), cli.stacksDir) : undefined;
    try {
        const results = await renderStacks(stacks, { outDir: cli.outDir, preview: cli.preview, progress, stacksDir: cli.stacksDir });
        const stackFiles = new Set([...stackFileNames(cli.stacksDir), ...stacks.map((s) => s.name)]);
        const removed = removeStaleOutDirs(cli.outDir, stackFiles);
        if (removed.length) process.stdout.write(`removed out/ of stacks that no longer exist: ${removed.join(", ")}\n`);
        const extraTimings: Array<[string, number]> = [];
        if (diff) {
            progress.note(`diff: waiting for the render of ${cli.diff}`);
            const changed = await diff.finish(cli.outDir, stackFiles);
            const file = path.relative(process.cwd(), path.join(cli.outDir, "diff.md"));
            if (changed)
                process.stdout.write(
                    `\ndiff against ${cli.diff}: ${changed.length ? `changes in ${changed.join(", ")}` : "no changes"} -> ${file}\n`,
                );
            extraTimings.push([`diff base ${cli.diff}`, diff.elapsedMs()]);
        } else {
            fs.rmSync(path.join(cli.outDir, "diff.md"), { force: true }); // a diff of an earlier run would describe other renders
        }
        progress.summary(extraTimings);
        const failed = results.filter((r) => !r.ok);
        process.stdout.write(
            `\nrendered ${results.length - failed.length}/${results.length} stack(s)${cli.preview ? " (preview mode)" : ""}${failed.length ? `; failed: ${failed.map((f) => f.stack).join(", ")}` : ""}\n`,
        );
        // What each pinned upstream actually reads (tools/upstream-check.ts): flags, env, Helm values keys, refused
        // combinations, image variants. Run on every stack that produced output.
        const written = results.filter((r) => r.result).map((r) => r.stack);
        const check = checkOutDir(cli.outDir, undefined, written);
        process.stdout.write(`\n${formatFindings(check)}\n`);
        process.exitCode = failed.length || check.findings.length ? 1 : 0;
    } finally {
        diff?.dispose();
    }
    process.exit(process.exitCode ?? 0);
}

if (require.main === module) {
    // The SDK re-raises a program's error through internal promises; runStack already reported it.
    process.on("unhandledRejection", (reason) => {
        if (isHandled(reason)) return;
        process.stderr.write(`render: unexpected error: ${(reason as Error)?.stack ?? reason}\n`);
        process.exit(2);
    });
    main().catch((e) => {
        process.stderr.write(`render: ${(e as Error).message}\n`);
        process.exit(2);
    });
}
