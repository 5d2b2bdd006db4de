/**
 * `npm run upstream-check [-- --out DIR]`
 *
 * Reads every rendered stack under DIR (default `out/`: `<stack>/manifests.yaml` and `<stack>/resources.json`) and
 * checks each object against what its pinned upstream actually reads (upstream/): every flag of a known entry point,
 * every env var of a container whose image has facts, every Helm values key of a Release (against upstream/charts),
 * the combinations upstream refuses (upstream/refused.ts) and what an image must provide for the config it is given
 * (upstream/images.ts `imageRequirements`). Schema-valid is not upstream-valid: a flag the engine rejects, a values key
 * the chart never reads or an env var nothing reads all pass a CRD schema.
 *
 * Exits 1 naming stack, object, container and key for every finding; 2 when DIR holds no rendered stack.
 * Containers whose image repository has no facts (our own services, third-party sidecars) are listed as not covered.
 */
import * as fs from "fs";
import * as path from "path";
import YAML from "yaml";
import {
    ChartFacts, charts as chartFacts, ComponentFacts, components as componentFacts, ContainerView, entrypoints as entrypointFacts,
    EntrypointFacts, FlagFact, ImageFacts, ImageRequirementFact, imageRequirements, images as imageFacts, RefusedCombination,
    refusedCombinations, vllmKvTransferConfigKeys,
} from "../upstream";
import { checkSignals, Unproven } from "../upstream/check/signals";

/** One problem: where (stack, object, container) and which key. */
export interface Finding { stack: string; object: string; container?: string; key: string; message: string }

/** The facts the check runs against; tests pass their own fixtures. */
export interface Facts {
    components: Readonly<Record<string, ComponentFacts>>;
    entrypoints: readonly EntrypointFacts[];
    images: readonly ImageFacts[];
    charts: readonly ChartFacts[];
    refused: readonly RefusedCombination[];
    requirements: readonly ImageRequirementFact[];
}

export const defaultFacts: Facts = {
    components: componentFacts, entrypoints: entrypointFacts, images: imageFacts, charts: chartFacts,
    refused: refusedCombinations, requirements: imageRequirements,
};

export interface CheckResult {
    findings: Finding[]; uncovered: string[]; checkedContainers: number; checkedReleases: number;
    /** Version pairs whose releases are not recorded (upstream/check/versions.ts): listed, and findings too. */
    unproven?: Unproven[];
}

type Obj = Record<string, any>;

/** `repo:tag` -> parts (a registry port is not a tag). */
export function splitImage(image: string): { repository: string; tag?: string } {
    const at = image.lastIndexOf(":");
    if (at > image.lastIndexOf("/")) return { repository: image.slice(0, at), tag: image.slice(at + 1) };
    return { repository: image };
}

/** The real argv of a container: command + args, with a `sh -c '<prelude> && exec "$@"' --` wrapper removed. */
export function effectiveArgv(c: Obj): string[] {
    const cmd: string[] = [...(c.command ?? [])], args: string[] = [...(c.args ?? [])];
    const all = [...cmd, ...args];
    if (all[0] === "sh" && all[1] === "-c" && typeof all[2] === "string" && /exec "\$@"/.test(all[2]) && all[3] === "--") return all.slice(4);
    return all;
}

/** Pod specs of an object, with a label for the object and per-component prefix (DGD). */
function podSpecs(o: Obj): Array<{ label: string; spec: Obj }> {
    const kind = o.kind;
    if (kind === "DynamoGraphDeployment") return (o.spec?.components ?? []).map((c: Obj) => ({ label: `component ${c.name}`, spec: c.podTemplate?.spec ?? {} }));
    if (["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"].includes(kind)) return [{ label: "", spec: o.spec?.template?.spec ?? {} }];
    if (kind === "CronJob") return [{ label: "", spec: o.spec?.jobTemplate?.spec?.template?.spec ?? {} }];
    if (kind === "Pod") return [{ label: "", spec: o.spec ?? {} }];
    return [];
}

function objectName(o: Obj): string {
    return `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`;
}

/** Flag lookup of an entry point's components: canonical names and aliases. */
function flagTable(ep: EntrypointFacts, facts: Facts): Map<string, { canonical: string; fact: FlagFact }> {
    const t = new Map<string, { canonical: string; fact: FlagFact }>();
    for (const id of ep.components) {
        for (const [name, fact] of Object.entries(facts.components[id]?.flags ?? {})) {
            t.set(name, { canonical: name, fact });
            for (const a of fact.aliases ?? []) t.set(a, { canonical: name, fact });
        }
    }
    return t;
}

function envKnown(name: string, comps: ComponentFacts[]): boolean {
    return comps.some((c) => Object.keys(c.env).some((k) => (k.endsWith("*") ? name.startsWith(k.slice(0, -1)) : k === name)));
}

/** Files a container reads from ConfigMap mounts: `<mountPath>/<key>` -> content. */
function mountedFiles(c: Obj, spec: Obj, configMaps: Map<string, Obj>, ns: string | undefined): Record<string, string> {
    const files: Record<string, string> = {};
    for (const m of c.volumeMounts ?? []) {
        const vol = (spec.volumes ?? []).find((v: Obj) => v.name === m.name);
        const cmName = vol?.configMap?.name;
        if (!cmName) continue;
        const cm = configMaps.get(`${ns ?? ""}/${cmName}`) ?? configMaps.get(`/${cmName}`);
        for (const [k, v] of Object.entries(cm?.data ?? {})) files[m.subPath ? m.mountPath : `${String(m.mountPath).replace(/\/$/, "")}/${k}`] = String(v);
    }
    return files;
}

function findEntrypoint(argv: string[], facts: Facts): EntrypointFacts | undefined {
    let best: EntrypointFacts | undefined;
    for (const ep of facts.entrypoints) {
        if (ep.argv.length <= argv.length && ep.argv.every((a, i) => argv[i] === a) && (!best || ep.argv.length > best.argv.length)) best = ep;
    }
    return best;
}

/** Checks one container; pushes findings. */
function checkContainer(stack: string, object: string, cname: string, c: Obj, spec: Obj, ns: string | undefined, configMaps: Map<string, Obj>, facts: Facts, out: CheckResult): void {
    const { repository, tag } = splitImage(String(c.image ?? ""));
    const known = facts.images.filter((i) => i.repository === repository);
    if (known.length === 0) { out.uncovered.push(`${stack} ${object} ${cname}: ${c.image}`); return; }
    out.checkedContainers++;
    const f = (key: string, message: string) => out.findings.push({ stack, object, container: cname, key, message });
    const image = known.find((i) => i.tag === tag);
    if (!image) { f("image", `${c.image}: no facts for ${repository} at tag ${tag ?? "(none)"} (known: ${known.map((i) => i.tag).join(", ")})`); return; }

    const argv = effectiveArgv(c);
    const ep = argv.length ? findEntrypoint(argv, facts) : undefined;
    const flags: Record<string, string | true> = {};
    if (argv.length && !ep) f("command", `entry point ${JSON.stringify(argv.slice(0, 3).join(" "))} is not known for ${c.image}`);
    if (ep) {
        const table = flagTable(ep, facts);
        const rest = argv.slice(ep.argv.length);
        for (let i = 0; i < rest.length; i++) {
            const tok = rest[i];
            if (!tok.startsWith("-")) { f(`arg[${i}]`, `unexpected positional argument ${JSON.stringify(tok)} for ${ep.id}`); continue; }
            const eq = tok.indexOf("=");
            const name = eq > 0 ? tok.slice(0, eq) : tok;
            const hit = table.get(name);
            if (!hit) { f(name, `flag ${name} is not known to ${ep.id} (${ep.components.map((x) => `${x}@${facts.components[x]?.version}`).join(", ")})`); continue; }
            let value: string | true = true;
            if (hit.fact.takesValue) {
                if (eq > 0) value = tok.slice(eq + 1);
                else if (i + 1 < rest.length) value = rest[++i];
                else { f(name, `flag ${name} takes a value`); continue; }
                if (hit.fact.choices && !hit.fact.choices.includes(value)) f(name, `${name}=${value} is not one of ${hit.fact.choices.join(", ")}`);
            } else if (eq > 0) {
                f(name, `flag ${name} is a switch and takes no value`);
            }
            flags[hit.canonical] = value;
        }
    }

    const comps = [...new Set([...image.components, ...(ep?.components ?? [])])].map((id) => facts.components[id]).filter((x): x is ComponentFacts => !!x);
    const referenced = new Set([...(c.command ?? []), ...(c.args ?? [])].flatMap((s: string) => [...String(s).matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)].map((m) => m[1])));
    const env: Record<string, string | { from: string }> = {};
    for (const e of c.env ?? []) {
        env[e.name] = e.value !== undefined ? String(e.value) : { from: e.valueFrom?.fieldRef?.fieldPath ?? JSON.stringify(e.valueFrom ?? {}) };
        if (!envKnown(e.name, comps) && !referenced.has(e.name)) {
            f(`env.${e.name}`, `env var ${e.name} is read by nothing known in ${c.image} (${comps.map((x) => `${x.component}@${x.version}`).join(", ")})`);
        }
    }

    // vLLM KVTransferConfig keys.
    const kvt = typeof flags["--kv-transfer-config"] === "string" ? safeJson(flags["--kv-transfer-config"] as string) : undefined;
    if (flags["--kv-transfer-config"] !== undefined && ep?.components.includes("vllm")) {
        if (!kvt || typeof kvt !== "object") f("--kv-transfer-config", "is not a JSON object");
        else {
            const allowed = new Set<string>(vllmKvTransferConfigKeys.keys);
            const walk = (o: Obj, at: string) => {
                for (const k of Object.keys(o)) if (!allowed.has(k)) f(`--kv-transfer-config${at}.${k}`, `KVTransferConfig has no field ${k} (${vllmKvTransferConfigKeys.source})`);
                for (const [i, inner] of (o.kv_connector_extra_config?.connectors ?? []).entries()) walk(inner, `${at}.kv_connector_extra_config.connectors[${i}]`);
            };
            walk(kvt, "");
        }
    }

    const view: ContainerView = { entrypoint: ep?.id, flags, env, files: mountedFiles(c, spec, configMaps, ns) };
    for (const r of facts.refused) {
        const hit = r.check(view);
        if (hit) f(hit.key, `${r.id} (${r.component}, ${r.effect === "startup" ? "refused at start-up" : "silently degraded"}): ${hit.message} [${r.source}]`);
    }

    const connectors = kvt ? [kvt.kv_connector, ...((kvt.kv_connector_extra_config?.connectors ?? []).map((x: Obj) => x?.kv_connector))].filter(Boolean) : [];
    const nixlBackends: string[] = kvt ? [kvt, ...(kvt.kv_connector_extra_config?.connectors ?? [])].flatMap((x: Obj) => x?.kv_connector_extra_config?.backends ?? []) : [];
    for (const req of facts.requirements) {
        const w = req.when;
        const applies = (w.env && env[w.env[0]] === w.env[1]) || (w.flag && flags[w.flag[0]] === w.flag[1])
            || (w.kvConnector && connectors.includes(w.kvConnector)) || (w.nixlBackend && nixlBackends.includes(w.nixlBackend));
        if (!applies) continue;
        const missing = req.needs.filter((n) => !image.provides.includes(n));
        const what = w.env ? `env.${w.env[0]}` : w.flag ? w.flag[0] : w.kvConnector ? "--kv-transfer-config" : "--kv-transfer-config.backends";
        if (missing.length) f(what, `${req.id}: ${c.image} lacks ${missing.join(", ")} (provides ${image.provides.join(", ") || "nothing listed"}) [${req.source}]`);
    }
}

function safeJson(s: string): any { try { return JSON.parse(s); } catch { return undefined; } }

/** Dotted leaf paths of a values object (arrays and scalars are leaves). */
export function valuesPaths(v: unknown, at = ""): string[] {
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) {
        return Object.entries(v as Obj).flatMap(([k, x]) => valuesPaths(x, at ? `${at}.${k}` : k));
    }
    return at ? [at] : [];
}

const segMatch = (pattern: string[], p: string[]) => pattern.length === p.length && pattern.every((s, i) => s === "*" || s === p[i]);
const prefixMatch = (pattern: string[], p: string[]) => pattern.length <= p.length && pattern.every((s, i) => s === "*" || s === p[i]);

/**
 * The Helm values keys of one Release that its chart's facts do not list (upstream/charts, ChartFacts). This is where
 * chart facts are read: a Release whose chart@version has no facts entry is one finding ("no facts for chart X@v").
 */
export function checkHelmValues(release: { chart: string; version: string; repo?: string; values?: unknown }, charts: readonly ChartFacts[]): Array<{ key: string; message: string }> {
    const facts = charts.find((c) => c.version === release.version && (c.chart === release.chart || c.repository === release.chart
        || release.chart.endsWith(`/${c.chart}`)));
    if (!facts) return [{ key: "chart", message: `no facts for chart ${release.chart}@${release.version}` }];
    const keys = facts.valuesKeys.map((k) => k.split("."));
    const open = (facts.openSubtrees ?? []).map((k) => k.split("."));
    const out: Array<{ key: string; message: string }> = [];
    for (const p of valuesPaths(release.values ?? {})) {
        const parts = p.split(".");
        if (keys.some((k) => segMatch(k, parts)) || open.some((o) => prefixMatch(o, parts))) continue;
        out.push({ key: `values.${p}`, message: `values key ${p} is not read by ${facts.chart}@${facts.version} (${facts.source})` });
    }
    return out;
}

/** Checks one rendered stack. */
export function checkStack(stack: string, manifests: Obj[], resources: Obj[], facts: Facts = defaultFacts, out: CheckResult = { findings: [], uncovered: [], checkedContainers: 0, checkedReleases: 0 }): CheckResult {
    const configMaps = new Map<string, Obj>();
    for (const m of manifests) if (m?.kind === "ConfigMap") configMaps.set(`${m.metadata?.namespace ?? ""}/${m.metadata?.name}`, m);
    for (const m of manifests) {
        if (!m || typeof m !== "object") continue;
        for (const { label, spec } of podSpecs(m)) {
            const object = objectName(m) + (label ? ` ${label}` : "");
            for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
                checkContainer(stack, object, c.name, c, spec, m.metadata?.namespace, configMaps, facts, out);
            }
        }
    }
    const releases: Array<{ name: string; chart: string; version: string; values?: unknown }> = [];
    for (const r of resources) {
        if (r?.type !== "kubernetes:helm.sh/v3:Release" && r?.type !== "kubernetes:helm.sh/v4:Chart") continue;
        const i = r.inputs ?? {};
        releases.push({ name: String(r.name), chart: String(i.chart), version: String(i.version), values: i.values });
        out.checkedReleases++;
        for (const x of checkHelmValues({ chart: String(i.chart), version: String(i.version), repo: i.repositoryOpts?.repo, values: i.values }, facts.charts)) {
            out.findings.push({ stack, object: `helm Release ${r.name} (${i.chart}@${i.version})`, key: x.key, message: x.message });
        }
    }
    // Features that would be inert or refused, version pairs, the observability chain (upstream/check/signals.ts).
    const sig = checkSignals({ stack, objects: manifests.filter((m) => m && typeof m === "object"), releases });
    out.findings.push(...sig.findings);
    out.unproven = [...(out.unproven ?? []), ...sig.unproven];
    return out;
}

/** Checks every stack rendered under `outDir` (a folder with manifests.yaml). */
export function checkOutDir(outDir: string, facts: Facts = defaultFacts, stacks?: string[]): CheckResult & { stacks: string[] } {
    const out: CheckResult = { findings: [], uncovered: [], checkedContainers: 0, checkedReleases: 0 };
    const names = (stacks ?? (fs.existsSync(outDir) ? fs.readdirSync(outDir) : []))
        .filter((n) => fs.existsSync(path.join(outDir, n, "manifests.yaml"))).sort();
    for (const n of names) {
        const manifests = YAML.parseAllDocuments(fs.readFileSync(path.join(outDir, n, "manifests.yaml"), "utf8")).map((d) => d.toJS()).filter(Boolean);
        const rp = path.join(outDir, n, "resources.json");
        const resources = fs.existsSync(rp) ? JSON.parse(fs.readFileSync(rp, "utf8")) : [];
        checkStack(n, manifests, resources, facts, out);
    }
    return { ...out, stacks: names };
}

/** Human-readable report. */
export function formatFindings(r: CheckResult & { stacks: string[] }): string {
    const lines = r.findings.map((f) => `${f.stack}: ${f.object}${f.container ? ` container ${f.container}` : ""}: ${f.key}: ${f.message}`);
    for (const u of r.unproven ?? []) lines.push(`unproven version pair ${u.pair} on ${u.stack}: ${u.ends}: ${u.why}`);
    lines.push(`upstream-check: ${r.stacks.length} stack(s), ${r.checkedContainers} container(s) and ${r.checkedReleases} Helm release(s) checked, ${r.findings.length} finding(s), ${r.uncovered.length} container(s) without image facts, ${(r.unproven ?? []).length} unproven version pair(s)`);
    return lines.join("\n");
}

function main() {
    const argv = process.argv.slice(2);
    let outDir = path.join(process.cwd(), "out");
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--out") outDir = path.resolve(argv[++i]);
        else if (argv[i] === "--help" || argv[i] === "-h") { process.stdout.write("usage: npm run upstream-check [-- --out DIR]\n"); process.exit(0); }
        else { process.stderr.write(`upstream-check: unknown option ${argv[i]}\n`); process.exit(2); }
    }
    const r = checkOutDir(outDir);
    if (r.stacks.length === 0) { process.stderr.write(`upstream-check: no rendered stack under ${outDir} (run npm run render first)\n`); process.exit(2); }
    process.stdout.write(formatFindings(r) + "\n");
    process.exit(r.findings.length ? 1 : 0);
}

if (require.main === module) main();
