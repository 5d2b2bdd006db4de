/**
 * `npm run render -- --diff <git-ref>`: what a change does to every rendered stack, even a stack whose
 * `pulumi preview` cannot run yet (a new region). The base ref is checked out in a temporary git worktree and
 * rendered there by its own tools/render.ts (in parallel with the working tree's render); both `out/` trees are
 * compared object by object (`resources.json`, keyed by URN) and output by output, and `out/diff.md` lists per
 * stack the objects added, removed and changed, each change as a field path with its old and new value.
 * Both sides are read from `resources.json` / `outputs.json`, where secrets are already masked (`[secret]`),
 * so a diff never shows a secret (a changed secret value is invisible: both sides read `[secret]`).
 */
import { spawn, execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { endpointGpus } from "../config/endpoint";
import { rolloutSummary } from "../lib/rollout";
import { HubConfigSchema, namespaceConfig } from "../config/stack";
import { readStackFile, stackNameOf } from "../lib/stackfiles";

/** One changed leaf: `path` as `spec.components[name=decode].replicas`; undefined before = added, after = removed. */
export interface FieldChange {
    path: string;
    before?: unknown;
    after?: unknown;
}

export interface ObjectRef {
    urn: string;
    label: string;
}

export interface ObjectChange extends ObjectRef {
    fields: FieldChange[];
}

export interface StackDiff {
    stack: string;
    /** `changed`: rendered on both sides; `new`/`deleted`: the stack file exists on one side only;
     *  `not-rendered-base`/`not-rendered-head`: the file exists but that side did not render (config error, hub failure). */
    status: "changed" | "unchanged" | "new" | "deleted" | "not-rendered-base" | "not-rendered-head";
    added: ObjectRef[];
    removed: ObjectRef[];
    changed: ObjectChange[];
    outputs: FieldChange[];
}

interface Row {
    urn: string;
    type: string;
    name: string;
    inputs?: Record<string, unknown>;
}

/** `Kind namespace/name` for a Kubernetes object, `<short type> <name>` otherwise. */
export function objectLabel(r: Row): string {
    const inp = r.inputs ?? {};
    if (r.type.startsWith("kubernetes:") && typeof inp.kind === "string") {
        const md = (inp.metadata ?? {}) as Record<string, unknown>;
        return `${inp.kind} ${md.namespace ? `${md.namespace}/` : ""}${md.name ?? r.name}`;
    }
    const parts = r.type.split(":");
    return `${parts[0] === "kubernetes" ? "k8s" : parts[0]}:${parts[parts.length - 1]} ${r.name}`;
}

const isObj = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

function jsonContainer(v: unknown): unknown {
    if (typeof v !== "string" || !/^\s*[[{]/.test(v)) return undefined;
    try {
        const p = JSON.parse(v);
        return p && typeof p === "object" ? p : undefined;
    } catch {
        return undefined;
    }
}

/**
 * Keys for array items, so a list is compared item by item whatever its order: the first of `name`, `id`, or
 * `spoke` + `name` (endpoints: one name per spoke) that every item of both lists has, distinct within each list.
 * Returns the label (`name`, `id`, `spoke/name`) and the keys of each list.
 */
function itemKeys(a: unknown[], b: unknown[]): { label: string; ka: string[]; kb: string[] } | undefined {
    const fields: Array<[string, (x: Record<string, unknown>) => unknown]> = [
        ["name", (x) => x.name],
        ["id", (x) => x.id],
        ["spoke/name", (x) => (typeof x.spoke === "string" && typeof x.name === "string" ? `${x.spoke}/${x.name}` : undefined)],
    ];
    for (const [label, f] of fields) {
        const keys = (l: unknown[]) => {
            const k = l.map((x) => (isObj(x) ? f(x) : undefined));
            return k.every((y) => typeof y === "string") && new Set(k).size === k.length ? (k as string[]) : undefined;
        };
        const ka = keys(a);
        const kb = keys(b);
        if (ka && kb && (a.length || b.length)) return { label, ka, kb };
    }
    return undefined;
}

const isPlain = (v: unknown) => v === null || ["string", "number", "boolean"].includes(typeof v);

/**
 * Leaf differences between two JSON values. Objects recurse by key; arrays of items with a name or id
 * (containers, env, components, API keys, spokes) by that (`[name=decode]`, `[id=ci-bot]`); lists of plain values
 * that gained or lost members (spoke names, ARNs) as sets (`[+]` added, `[-]` removed); other arrays by index;
 * strings holding JSON (Helm values, planner config, CNI IPAM) recurse into the parsed document
 * (`args[1]{json}.max_gpu_budget`).
 */
export function fieldChanges(before: unknown, after: unknown, p = ""): FieldChange[] {
    if (JSON.stringify(before) === JSON.stringify(after)) return [];
    const join = (k: string) => (p ? `${p}.${k}` : k);
    if (isObj(before) && isObj(after)) {
        const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
        return keys.flatMap((k) => fieldChanges(before[k], after[k], join(k)));
    }
    if (Array.isArray(before) && Array.isArray(after)) {
        const keyed = itemKeys(before, after);
        if (keyed) {
            const { label, ka: kb, kb: ka } = keyed;
            const mb = new Map(kb.map((k, i) => [k, before[i]]));
            const ma = new Map(ka.map((k, i) => [k, after[i]]));
            const order = [...kb, ...ka.filter((k) => !mb.has(k))];
            const out = order.flatMap((k) => fieldChanges(mb.get(k), ma.get(k), `${p}[${label}=${k}]`));
            if (out.length === 0) out.push({ path: `${p} (order)`, before: kb, after: ka });
            return out;
        }
        if (before.length !== after.length && [...before, ...after].every((x) => isPlain(x) && jsonContainer(x) === undefined)) {
            const sb = new Set(before.map((x) => JSON.stringify(x)));
            const sa = new Set(after.map((x) => JSON.stringify(x)));
            return [
                ...before.filter((x) => !sa.has(JSON.stringify(x))).map((x) => ({ path: `${p}[-]`, before: x, after: undefined })),
                ...after.filter((x) => !sb.has(JSON.stringify(x))).map((x) => ({ path: `${p}[+]`, before: undefined, after: x })),
            ];
        }
        const n = Math.max(before.length, after.length);
        return Array.from({ length: n }, (_, i) => fieldChanges(before[i], after[i], `${p}[${i}]`)).flat();
    }
    const jb = jsonContainer(before);
    const ja = jsonContainer(after);
    if (jb !== undefined && ja !== undefined) return fieldChanges(jb, ja, `${p}{json}`);
    return [{ path: p || "(value)", before, after }];
}

/** Differences between two renders of one stack (rows of `resources.json`, `outputs.json` `outputs`). */
export function diffStack(
    stack: string,
    base: { resources: Row[]; outputs: unknown },
    head: { resources: Row[]; outputs: unknown },
): StackDiff {
    const b = new Map(base.resources.map((r) => [r.urn, r]));
    const h = new Map(head.resources.map((r) => [r.urn, r]));
    const ref = (r: Row): ObjectRef => ({ urn: r.urn, label: objectLabel(r) });
    const byLabel = (x: ObjectRef, y: ObjectRef) => x.label.localeCompare(y.label) || x.urn.localeCompare(y.urn);
    const added = [...h.values()]
        .filter((r) => !b.has(r.urn))
        .map(ref)
        .sort(byLabel);
    const removed = [...b.values()]
        .filter((r) => !h.has(r.urn))
        .map(ref)
        .sort(byLabel);
    const changed: ObjectChange[] = [];
    for (const [urn, r] of h) {
        const old = b.get(urn);
        if (!old) continue;
        const fields = fieldChanges(old.inputs ?? {}, r.inputs ?? {});
        if (fields.length) changed.push({ ...ref(r), fields });
    }
    changed.sort(byLabel);
    const outputs = fieldChanges(base.outputs ?? {}, head.outputs ?? {});
    const status = added.length || removed.length || changed.length || outputs.length ? "changed" : "unchanged";
    return { stack, status, added, removed, changed, outputs };
}

function readRender(dir: string): { resources: Row[]; outputs: unknown } | undefined {
    const rj = path.join(dir, "resources.json");
    if (!fs.existsSync(rj)) return undefined;
    const oj = path.join(dir, "outputs.json");
    return {
        resources: JSON.parse(fs.readFileSync(rj, "utf8")),
        outputs: fs.existsSync(oj) ? JSON.parse(fs.readFileSync(oj, "utf8")).outputs : {},
    };
}

/** Stack names of the `Pulumi.<stack>.yaml` files in a directory (no parsing: a broken file still counts). */
export function stackFileNames(dir: string): Set<string> {
    if (!fs.existsSync(dir)) return new Set();
    return new Set(
        fs
            .readdirSync(dir)
            .filter((f) => /^Pulumi\..+\.ya?ml$/.test(f))
            .map((f) => stackNameOf(f)),
    );
}

/**
 * Compares two `out/` trees.
 * @param stacks stack names to compare (default: every stack rendered or declared on either side)
 * @param files stack names whose file exists on each side (tells a new stack from one that failed to render)
 */
export function diffOutDirs(
    baseOut: string,
    headOut: string,
    files: { base: Set<string>; head: Set<string> },
    stacks?: string[],
): StackDiff[] {
    const dirs = (d: string) => (fs.existsSync(d) ? fs.readdirSync(d).filter((n) => fs.existsSync(path.join(d, n, "resources.json"))) : []);
    const names = stacks ?? [...new Set([...dirs(baseOut), ...dirs(headOut), ...files.base, ...files.head])];
    const empty: StackDiff = { stack: "", status: "unchanged", added: [], removed: [], changed: [], outputs: [] };
    return [...new Set(names)].sort().map((s) => {
        const b = readRender(path.join(baseOut, s));
        const h = readRender(path.join(headOut, s));
        if (b && h) return diffStack(s, b, h);
        if (h) {
            const d = diffStack(s, { resources: [], outputs: {} }, h);
            return { ...d, status: files.base.has(s) ? "not-rendered-base" : "new" } as StackDiff;
        }
        if (b) {
            const d = diffStack(s, b, { resources: [], outputs: {} });
            return { ...d, status: files.head.has(s) ? "not-rendered-head" : "deleted" } as StackDiff;
        }
        return { ...empty, stack: s, status: files.head.has(s) ? "not-rendered-head" : "deleted" } as StackDiff;
    });
}

/** A value for one diff line: JSON, at most `max` characters. */
export function show(v: unknown, max = 100): string {
    if (v === undefined) return "(none)";
    const s = typeof v === "string" ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v));
    return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

const STATUS_TEXT: Record<StackDiff["status"], string> = {
    changed: "changed",
    unchanged: "no change",
    new: "new stack",
    deleted: "stack removed",
    "not-rendered-base": "did not render at the base",
    "not-rendered-head": "does not render any more",
};

/** Field lines shown per changed object before "… and N more". */
export const MAX_FIELDS_PER_OBJECT = 12;

// ---------------------------------------------------------------- what the person changed

/** One stack file's `config:` before and after, in the file's own keys (`platform:apiKeys[id=ci-bot]`). */
export interface StackFileChange {
    file: string;
    status: "changed" | "new" | "deleted" | "unreadable";
    fields: FieldChange[];
    error?: string;
}

/** `secure:` values become `[secret]`: a diff shows that a secret changed, never its ciphertext. */
function maskSecure(v: unknown): unknown {
    if (Array.isArray(v)) return v.map(maskSecure);
    if (isObj(v))
        return "secure" in v && Object.keys(v).length === 1
            ? "[secret]"
            : Object.fromEntries(Object.entries(v).map(([k, x]) => [k, maskSecure(x)]));
    return v;
}

function configOf(file: string): Record<string, unknown> {
    const doc = YAML.parse(fs.readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | null;
    return maskSecure(doc?.config ?? {}) as Record<string, unknown>;
}

/**
 * What changed in the stack files between two `stacks/` folders, key by key as the files spell them: items of a
 * list matched by name or id, lists of plain values compared as sets (see {@link fieldChanges}).
 */
export function stackFileChanges(baseDir: string, headDir: string): StackFileChange[] {
    const names = [...new Set([...stackFileNames(baseDir), ...stackFileNames(headDir)])].sort();
    const fileOf = (dir: string, n: string) =>
        [".yaml", ".yml"].map((x) => path.join(dir, `Pulumi.${n}${x}`)).find((f) => fs.existsSync(f));
    const out: StackFileChange[] = [];
    for (const n of names) {
        const b = fileOf(baseDir, n);
        const h = fileOf(headDir, n);
        const file = path.join("stacks", path.basename(h ?? b!));
        try {
            const fields = fieldChanges(b ? configOf(b) : {}, h ? configOf(h) : {});
            if (fields.length) out.push({ file, status: !b ? "new" : !h ? "deleted" : "changed", fields });
        } catch (e) {
            out.push({ file, status: "unreadable", fields: [], error: (e as Error).message.split("\n")[0] });
        }
    }
    return out;
}

/** One spoke's GPUs as its hub file places them. */
export interface SpokeLoad {
    capacity: number;
    placed: number;
    budgets: number;
    endpoints: string[];
}

/** A spoke whose capacity or placement differs between the two sides (undefined: the spoke is not listed there). */
export interface PlacementChange {
    hubFile: string;
    spoke: string;
    before?: SpokeLoad;
    after?: SpokeLoad;
}

function loadsOf(file: string | undefined): Map<string, SpokeLoad> | undefined {
    if (!file) return new Map();
    let parsed: ReturnType<typeof HubConfigSchema.safeParse>;
    try {
        parsed = HubConfigSchema.safeParse(namespaceConfig(readStackFile(file).config));
    } catch {
        return undefined;
    }
    if (!parsed.success) return undefined;
    const h = parsed.data;
    return new Map(
        h.spokes.map((s) => {
            const eps = h.endpoints.filter((e) => e.spoke === s.name);
            return [
                s.name,
                {
                    capacity: s.gpus,
                    placed: eps.reduce((n, e) => n + endpointGpus(e), 0),
                    budgets: eps.reduce((n, e) => n + (e.planner.enabled ? e.planner.maxGpuBudget : 0), 0),
                    // A rollout's step, weights and last gate verdict change the line, so every step shows in the PR diff.
                    endpoints: eps
                        .map((e) => `${e.name} (${e.model}, ${endpointGpus(e)} GPUs${e.rollout ? `; rollout ${rolloutSummary(e)}` : ""})`)
                        .sort(),
                },
            ];
        }),
    );
}

/**
 * What the change does to capacity and placement, per spoke of every hub file: GPUs the spoke has, GPUs placed on
 * it, planner budgets, and the endpoints placed there. Only spokes that differ; a hub file that does not parse on
 * either side is left out (its error is in the render output).
 */
export function placementChanges(baseDir: string, headDir: string): PlacementChange[] {
    const out: PlacementChange[] = [];
    const names = [...new Set([...stackFileNames(baseDir), ...stackFileNames(headDir)])].sort();
    for (const n of names) {
        const b = path.join(baseDir, `Pulumi.${n}.yaml`);
        const h = path.join(headDir, `Pulumi.${n}.yaml`);
        const role = (f: string) => {
            try {
                return fs.existsSync(f) ? readStackFile(f).role : undefined;
            } catch {
                return undefined;
            }
        };
        if (role(b) !== "hub" && role(h) !== "hub") continue;
        const lb = loadsOf(fs.existsSync(b) ? b : undefined);
        const lh = loadsOf(fs.existsSync(h) ? h : undefined);
        if (!lb || !lh) continue;
        for (const spoke of [...new Set([...lb.keys(), ...lh.keys()])].sort()) {
            const before = lb.get(spoke);
            const after = lh.get(spoke);
            if (JSON.stringify(before) !== JSON.stringify(after))
                out.push({ hubFile: path.join("stacks", `Pulumi.${n}.yaml`), spoke, before, after });
        }
    }
    return out;
}

// ---------------------------------------------------------------- diff.md

/**
 * True for a change that follows from another (content hashes, signatures, revision ids, digests): shown folded,
 * below what the person changed. Judged by the field's name, or by both values being long hex/base64 strings.
 */
export function isDerived(f: FieldChange): boolean {
    const leaf = f.path.split(/[.[{]/).filter(Boolean).pop() ?? "";
    if (/(hash|sha\d*|digest|signature|revision|checksum|etag|fingerprint|resourceVersion)/i.test(leaf)) return true;
    const opaque = (v: unknown) =>
        typeof v === "string" && (/^(sha256:)?[0-9a-f]{16,}$/i.test(v) || /^[A-Za-z0-9+/_-]{40,}={0,2}$/.test(v));
    return opaque(f.before) && opaque(f.after);
}

/** `out/diff.md` text. Deterministic for the same two renders. */
export function diffMarkdown(
    diffs: StackDiff[],
    base: { ref: string; sha: string },
    intent: { files?: StackFileChange[]; placement?: PlacementChange[] } = {},
): string {
    const code = (s: string) => `\`${s.replace(/`/g, "'")}\``;
    const field = (f: FieldChange) => `${code(f.path)}: ${code(show(f.before))} → ${code(show(f.after))}`;
    const lines = [`# Render diff against ${code(base.ref)} (${base.sha.slice(0, 12)})`, ""];
    if (intent.files) {
        lines.push("## What changed in the stack files", "");
        if (intent.files.length === 0) lines.push("No stack file changed.", "");
        for (const f of intent.files) {
            lines.push(
                `**${code(f.file)}**${f.status === "changed" ? "" : ` (${f.status === "unreadable" ? `unreadable: ${f.error}` : f.status === "new" ? "new file" : "removed"})`}`,
                "",
            );
            if (f.status === "changed") lines.push(...f.fields.map((x) => `- ${field(x)}`), "");
            else if (f.status === "new") lines.push(`- keys: ${f.fields.map((x) => code(x.path)).join(", ")}`, "");
        }
    }
    if (intent.placement) {
        lines.push("## Effect on capacity and placement", "");
        if (intent.placement.length === 0) lines.push("No spoke's GPUs, placement or planner budgets change.", "");
        else {
            const gpus = (l: SpokeLoad | undefined, v: (l: SpokeLoad) => number) => (l ? `${v(l)}/${l.capacity}` : "-");
            const cell = (b: string, a: string) => (b === a ? b : `${b} → ${a}`);
            lines.push("| hub file | spoke | GPUs placed / capacity | planner budgets / capacity | endpoints |", "|---|---|---|---|---|");
            for (const p of intent.placement) {
                const eb = new Set(p.before?.endpoints ?? []);
                const ea = new Set(p.after?.endpoints ?? []);
                const eps = [
                    ...[...ea].filter((e) => !eb.has(e)).map((e) => `+ ${e}`),
                    ...[...eb].filter((e) => !ea.has(e)).map((e) => `− ${e}`),
                ];
                const status = !p.before ? " (new)" : !p.after ? " (removed)" : "";
                const over = p.after && (p.after.placed > p.after.capacity || p.after.budgets > p.after.capacity) ? " ⚠" : "";
                lines.push(
                    `| ${p.hubFile} | ${p.spoke}${status} | ${cell(
                        gpus(p.before, (l) => l.placed),
                        gpus(p.after, (l) => l.placed),
                    )}${over} | ${cell(
                        gpus(p.before, (l) => l.budgets),
                        gpus(p.after, (l) => l.budgets),
                    )} | ${eps.join("<br>") || "unchanged"} |`,
                );
            }
            lines.push("");
        }
    }
    lines.push(
        intent.files || intent.placement ? "## Rendered objects" : "",
        "",
        "Offline render of the base and of this change, compared object by object (secrets masked on both sides). Derived changes (hashes, signatures, revisions) are folded below each stack.",
        "",
        "| stack | status | added | removed | changed | outputs changed |",
        "|---|---|---|---|---|---|",
        ...diffs.map(
            (d) =>
                `| ${d.stack} | ${STATUS_TEXT[d.status]} | ${d.added.length} | ${d.removed.length} | ${d.changed.length} | ${d.outputs.length} |`,
        ),
        "",
    );
    const h = intent.files || intent.placement ? "###" : "##";
    for (const d of diffs) {
        if (d.status === "unchanged") continue;
        lines.push(`${h} ${d.stack}: ${STATUS_TEXT[d.status]}`, "");
        if (d.status === "not-rendered-head") {
            lines.push("The stack file exists but did not render here; see the render output.", "");
        }
        if (d.added.length) lines.push(`**Added (${d.added.length})**`, "", ...d.added.map((o) => `- ${code(o.label)}`), "");
        if (d.removed.length) lines.push(`**Removed (${d.removed.length})**`, "", ...d.removed.map((o) => `- ${code(o.label)}`), "");
        const derived: string[] = [];
        const direct = d.changed.map((o) => ({ o, fields: o.fields.filter((f) => !isDerived(f)), rest: o.fields.filter(isDerived) }));
        const shown = direct.filter((x) => x.fields.length);
        if (shown.length) {
            lines.push(`**Changed (${d.changed.length})**`, "");
            for (const { o, fields } of shown) {
                lines.push(`- ${code(o.label)}`);
                for (const f of fields.slice(0, MAX_FIELDS_PER_OBJECT)) lines.push(`  - ${field(f)}`);
                if (fields.length > MAX_FIELDS_PER_OBJECT) lines.push(`  - … and ${fields.length - MAX_FIELDS_PER_OBJECT} more field(s)`);
            }
            lines.push("");
        }
        for (const { o, rest } of direct)
            if (rest.length) derived.push(`- ${code(o.label)}`, ...rest.slice(0, MAX_FIELDS_PER_OBJECT).map((f) => `  - ${field(f)}`));
        if (d.outputs.length && d.status === "changed") {
            const outs = d.outputs.filter((f) => !isDerived(f));
            if (outs.length) {
                lines.push(`**Stack outputs changed (${d.outputs.length})**`, "");
                for (const f of outs.slice(0, MAX_FIELDS_PER_OBJECT * 2)) lines.push(`- ${field(f)}`);
                if (outs.length > MAX_FIELDS_PER_OBJECT * 2) lines.push(`- … and ${outs.length - MAX_FIELDS_PER_OBJECT * 2} more`);
                lines.push("");
            }
            const rest = d.outputs.filter(isDerived);
            if (rest.length) derived.push("- stack outputs", ...rest.slice(0, MAX_FIELDS_PER_OBJECT * 2).map((f) => `  - ${field(f)}`));
        }
        if (derived.length) {
            const n = d.changed.reduce((k, o) => k + o.fields.filter(isDerived).length, 0) + d.outputs.filter(isDerived).length;
            lines.push(
                `<details><summary>derived changes (${n}): hashes, signatures, revisions</summary>`,
                "",
                ...derived,
                "",
                "</details>",
                "",
            );
        }
    }
    if (diffs.every((d) => d.status === "unchanged")) lines.push("No rendered object or output changes.", "");
    return `${lines
        .join("\n")
        .replace(/\n{3,}/g, "\n\n")
        .trimEnd()}\n`;
}

// ---------------------------------------------------------------- the base render

function git(cwd: string, args: string[]): string {
    return execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

/** A checked-out base ref in a temporary worktree; `dispose` removes it. */
export interface BaseCheckout {
    ref: string;
    sha: string;
    dir: string;
    dispose: () => void;
}

function lexists(p: string): boolean {
    try {
        fs.lstatSync(p);
        return true;
    } catch {
        return false;
    }
}

function sameFile(a: string, b: string): boolean {
    return fs.existsSync(a) && fs.existsSync(b) && fs.readFileSync(a).equals(fs.readFileSync(b));
}

/**
 * Checks `ref` out in a temporary git worktree (`git worktree add --detach`) and gives it dependencies: when
 * its `package-lock.json` equals the working tree's, `node_modules` is a symlink to ours (no install, seconds);
 * otherwise `npm ci` runs there. The same for `policies/`.
 * @throws Error naming the ref when it is not a commit of `repo`
 */
export function checkoutBase(repo: string, ref: string, log: (s: string) => void = () => undefined): BaseCheckout {
    let sha: string;
    try {
        sha = git(repo, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`]);
    } catch {
        throw new Error(`--diff ${ref}: not a commit in ${repo} (fetch it first, e.g. git fetch origin main)`);
    }
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "render-base-"));
    const dir = path.join(tmp, "tree");
    git(repo, ["worktree", "add", "--detach", "--quiet", dir, sha]);
    const dispose = () => {
        try {
            git(repo, ["worktree", "remove", "--force", dir]);
        } catch {
            /* removed below */
        }
        fs.rmSync(tmp, { recursive: true, force: true });
        try {
            git(repo, ["worktree", "prune"]);
        } catch {
            /* nothing to prune */
        }
    };
    try {
        for (const sub of [".", "policies"]) {
            const ours = path.join(repo, sub);
            const theirs = path.join(dir, sub);
            if (!fs.existsSync(path.join(theirs, "package.json"))) continue;
            if (lexists(path.join(theirs, "node_modules"))) continue; // committed (a symlink) or already there
            // The render loads the pack with the root node_modules (@pulumi/policy is a root dependency too): the
            // pack's own install is needed only where this checkout has one.
            if (sub === "policies" && !fs.existsSync(path.join(ours, "node_modules"))) continue;
            const sameLock = sameFile(path.join(ours, "package-lock.json"), path.join(theirs, "package-lock.json"));
            if (sameLock && fs.existsSync(path.join(ours, "node_modules"))) {
                fs.symlinkSync(path.join(ours, "node_modules"), path.join(theirs, "node_modules"), "dir");
            } else {
                log(
                    `diff: ${sub === "." ? "" : `${sub}/`}${sameLock ? "node_modules is not installed here" : `package-lock.json differs at ${ref}`}: npm ci in the base worktree`,
                );
                execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], {
                    cwd: theirs,
                    stdio: ["ignore", "ignore", "inherit"],
                });
            }
        }
    } catch (e) {
        dispose();
        throw e;
    }
    return { ref, sha, dir, dispose };
}

/**
 * Runs the base tree's own `tools/render.ts` into `outDir` (quiet, CI=true). Resolves with its exit code
 * (1 = some stack failed there, which the diff reports); rejects when it could not run at all (exit 2 or a signal).
 */
export function renderBase(base: BaseCheckout, outDir: string, stacks: string[]): Promise<{ code: number; output: string }> {
    return new Promise((resolve, reject) => {
        // The base tree's own esbuild loader where it has one (about twice as fast as ts-node), else ts-node.
        const loader = fs.existsSync(path.join(base.dir, "tools", "register-esbuild.js"))
            ? "./tools/register-esbuild.js"
            : "ts-node/register/transpile-only";
        const child = spawn(process.execPath, ["-r", loader, "tools/render.ts", "--out", outDir, ...stacks], {
            cwd: base.dir,
            env: { ...process.env, CI: "true", TS_NODE_TRANSPILE_ONLY: "true" },
            stdio: ["ignore", "pipe", "pipe"],
        });
        let output = "";
        child.stdout.on("data", (b) => {
            output += b;
        });
        child.stderr.on("data", (b) => {
            output += b;
        });
        child.on("error", reject);
        child.on("close", (code, signal) => {
            if (code === 0 || code === 1) resolve({ code, output });
            else
                reject(
                    new Error(
                        `render of ${base.ref} (${base.sha.slice(0, 12)}) failed (${signal ?? `exit ${code}`}):\n${output.slice(-4000)}`,
                    ),
                );
        });
    });
}

// ---------------------------------------------------------------- one --diff run, as tools/render.ts drives it

/** A `--diff` run: the base render goes on in the background while the working tree renders. */
export interface DiffRun {
    /** Waits for the base, compares it with `headOut`, writes `<headOut>/diff.md`; returns the stacks that changed
     *  (undefined when the base could not be rendered: diff.md then says why). */
    finish(headOut: string, headFiles: Set<string>): Promise<string[] | undefined>;
    /** Removes the base worktree. */
    dispose(): void;
    /** Milliseconds from start to the end of the base render. */
    elapsedMs(): number;
}

/**
 * Starts a `--diff <ref>` run from the repository at `root`: checks the ref out and renders it in the background.
 * @param selected stack names to compare (their hubs render with them); undefined = every stack
 * @param headStacks the working tree's stack files, compared with the base's `stacks/` key by key
 * Never throws: a base that cannot be checked out or rendered is reported in diff.md by `finish`.
 */
export function startDiff(
    root: string,
    ref: string,
    selected: string[] | undefined,
    log: (s: string) => void,
    headStacks = path.join(root, "stacks"),
): DiffRun {
    const t0 = Date.now();
    let t1: number | undefined;
    let base: BaseCheckout | undefined;
    let error: string | undefined;
    let done: Promise<unknown> = Promise.resolve();
    let baseOut = "";
    try {
        base = checkoutBase(root, ref, log);
        const baseFiles = stackFileNames(path.join(base.dir, "stacks"));
        baseOut = path.join(path.dirname(base.dir), "out");
        done = renderBase(base, baseOut, selected ? selected.filter((n) => baseFiles.has(n)) : [])
            .catch((e) => {
                error = (e as Error).message;
            })
            .finally(() => {
                t1 = Date.now();
            });
    } catch (e) {
        error = (e as Error).message;
    }
    return {
        async finish(headOut, headFiles) {
            await done;
            const file = path.join(headOut, "diff.md");
            fs.mkdirSync(headOut, { recursive: true });
            if (error || !base) {
                fs.writeFileSync(
                    file,
                    `# Render diff against \`${ref}\`\n\nThe base could not be rendered, so there is no diff:\n\n\`\`\`\n${(error ?? "").slice(-3000)}\n\`\`\`\n`,
                );
                log(`render: --diff ${ref}: ${error}`);
                return undefined;
            }
            const diffs = diffOutDirs(baseOut, headOut, { base: stackFileNames(path.join(base.dir, "stacks")), head: headFiles }, selected);
            const baseStacks = path.join(base.dir, "stacks");
            const intent = { files: stackFileChanges(baseStacks, headStacks), placement: placementChanges(baseStacks, headStacks) };
            fs.writeFileSync(file, diffMarkdown(diffs, { ref: base.ref, sha: base.sha }, intent));
            return diffs.filter((d) => d.status !== "unchanged").map((d) => d.stack);
        },
        dispose() {
            base?.dispose();
        },
        elapsedMs() {
            return (t1 ?? Date.now()) - t0;
        },
    };
}
