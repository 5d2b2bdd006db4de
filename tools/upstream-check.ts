/**
 * `npm run upstream-check [-- --out DIR]`
 *
 * Reads every rendered stack under DIR (default `out/`: `<stack>/manifests.yaml` and `<stack>/resources.json`) and
 * runs every upstream rule (upstream/check/index.ts `rules`) on it: every flag of a known entry point, every env var of
 * a container whose image has facts, every Helm values key of a Release (against upstream/charts), the combinations
 * upstream refuses (upstream/refused.ts) and what an image must provide for the config it is given
 * (upstream/images.ts `imageRequirements`). The same rules run in the policy pack (policies/upstream.ts) at
 * `pulumi preview`/`up`; this file only reads files and prints.
 *
 * Exits 1 naming stack, object, container and key for every finding; 2 when DIR holds no rendered stack.
 * Containers whose image repository has no facts (our own services, third-party sidecars) are listed as not covered.
 */
import * as fs from "node:fs";
import { exitOnHelp } from "./cli";
import * as path from "node:path";
import YAML from "yaml";
import { type CheckResult, checkStack, defaultFacts, emptyResult, type Facts, formatFinding } from "../upstream/check";

export { checkHelmValues, checkStack, defaultFacts, effectiveArgv, splitImage, valuesPaths } from "../upstream/check";
export type { CheckResult, Facts, Finding } from "../upstream/check";

/** Checks every stack rendered under `outDir` (a folder with manifests.yaml). */
export function checkOutDir(outDir: string, facts: Facts = defaultFacts, stacks?: string[]): CheckResult & { stacks: string[] } {
    const out: CheckResult = emptyResult();
    const names = (stacks ?? (fs.existsSync(outDir) ? fs.readdirSync(outDir) : []))
        .filter((n) => fs.existsSync(path.join(outDir, n, "manifests.yaml")))
        .sort();
    for (const n of names) {
        const manifests = YAML.parseAllDocuments(fs.readFileSync(path.join(outDir, n, "manifests.yaml"), "utf8"))
            .map((d) => d.toJS())
            .filter(Boolean);
        const rp = path.join(outDir, n, "resources.json");
        const resources = fs.existsSync(rp) ? JSON.parse(fs.readFileSync(rp, "utf8")) : [];
        checkStack(n, manifests, resources, facts, out);
    }
    return { ...out, stacks: names };
}

/** Human-readable report. */
export function formatFindings(r: CheckResult & { stacks: string[] }): string {
    const lines = r.findings.map(formatFinding);
    lines.push(
        `upstream-check: ${r.stacks.length} stack(s), ${r.checkedContainers} container(s) and ${r.checkedReleases} Helm release(s) checked, ${r.findings.length} finding(s), ${r.uncovered.length} container(s) without image facts`,
    );
    return lines.join("\n");
}

const HELP = `
usage: npm run upstream-check [-- --out DIR]

Checks what the rendered stacks hand to upstream software against what the pinned upstream source reads
(upstream/): every flag, env var and Helm values key, refused combinations, image variants, the closed world of
KV-transport settings, prefill/decode pairs, feature activation, version pairs and the observability chain. Exit 1 on a finding,
2 when nothing is rendered. npm run render runs it too.

Options:
  --out DIR    rendered stacks (default out/)
  -h, --help   this text

Examples:
  npm run render && npm run upstream-check
`;
function main() {
    const argv = process.argv.slice(2);
    exitOnHelp(argv, HELP);
    let outDir = path.join(process.cwd(), "out");
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--out") outDir = path.resolve(argv[++i]);
        else {
            process.stderr.write(`upstream-check: unknown option ${argv[i]}\n`);
            process.exit(2);
        }
    }
    const r = checkOutDir(outDir);
    if (r.stacks.length === 0) {
        process.stderr.write(`upstream-check: no rendered stack under ${outDir} (run npm run render first)\n`);
        process.exit(2);
    }
    process.stdout.write(`${formatFindings(r)}\n`);
    process.exit(r.findings.length ? 1 : 0);
}

if (require.main === module) main();
