import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";

/** A stack file on disk and what the renderer needs to order it. */
export interface StackFile {
    /** Stack name (`hub-prod`), from `Pulumi.<name>.yaml`. */
    name: string;
    /** Path as given / relative to the repo, shown in messages. */
    file: string;
    role: string;
    /** Stack name of the hub a spoke references (last path segment of `platform:spoke.hubStack`). */
    hub?: string;
    /** Flat config map (`pulumi.runtime.allConfig()` shape). */
    config: Record<string, string>;
    /** Keys whose values are `secure:` in the file. */
    secretKeys: string[];
}

/** The repository's `stacks/` directory (absolute; Pulumi.yaml `stackConfigDir: stacks`), wherever the tool runs from. */
export const STACKS_DIR = path.join(__dirname, "..", "stacks");

/**
 * Pure: stack name from a stack file path: `stacks/Pulumi.spoke-hn1.yaml` -> `spoke-hn1` (`.yml` too).
 * @throws Error naming the file when its base name is not `Pulumi.<stack>.yaml` / `.yml`
 */
export function stackNameOf(file: string): string {
    const m = /^Pulumi\.(.+)\.ya?ml$/.exec(path.basename(file));
    if (!m) throw new Error(`${file}: a stack file must be named Pulumi.<stack>.yaml`);
    return m[1];
}

/**
 * Reads a Pulumi stack file into the flat config map the SDK uses (`project:key` -> string, objects as JSON).
 * `secure:` values cannot be decrypted offline; they become the placeholder `offline-secret` and are marked secret.
 * @throws Error naming the file when the YAML does not parse or has no `config:` map
 */
export function readStackFile(file: string, display = file): StackFile {
    let doc: unknown;
    let text: string;
    try {
        text = fs.readFileSync(file, "utf8");
    } catch (e) {
        throw new Error(`${display}: cannot read the stack file: ${(e as Error).message}`);
    }
    try {
        doc = YAML.parse(text);
    } catch (e) {
        throw new Error(`${display}: not valid YAML: ${yamlErrorText(text, e as Error)}`);
    }
    const stackConfig = doc && typeof doc === "object" ? (doc as { config?: unknown }).config : undefined;
    if (!stackConfig || typeof stackConfig !== "object") {
        throw new Error(`${display}: no "config:" map; a stack file looks like "config:\\n  platform:role: spoke"`);
    }
    const config: Record<string, string> = {};
    const secretKeys: string[] = [];
    for (const [k, v] of Object.entries(stackConfig as Record<string, unknown>)) {
        if (v && typeof v === "object" && !Array.isArray(v) && "secure" in (v as object)) {
            config[k] = "offline-secret";
            secretKeys.push(k);
        } else {
            config[k] = typeof v === "string" ? v : JSON.stringify(v);
        }
    }
    const role = config["platform:role"] ?? "";
    let hub: string | undefined;
    if (role === "spoke") {
        try {
            hub =
                String(JSON.parse(config["platform:spoke"] ?? "{}").hubStack ?? "")
                    .split("/")
                    .pop() || undefined;
        } catch {
            hub = undefined;
        }
    }
    return { name: stackNameOf(file), file: display, role, hub, config, secretKeys };
}

/**
 * Where a scalar may start: after a key's `: `, a list's `- `, `[`, `{`, `,`, or indentation. A quote elsewhere
 * (`don't`) is part of a plain scalar.
 */
const SCALAR_START = /(^|[\s[{,:-])$/;

/**
 * The `[`, `{` or quote left open before `pos` (outside comments), as 1-based line and column; undefined when all
 * are closed. The YAML parser reports an unclosed flow collection or quote where it gave up (the next line, or
 * the end of the file); the person's mistake is where it was opened.
 */
export function unclosedBefore(text: string, pos: number): { line: number; col: number } | undefined {
    const opened: number[] = [];
    let quote: { ch: string; at: number } | undefined;
    let comment = false;
    for (let i = 0; i < pos && i < text.length; i++) {
        const c = text[i];
        if (c === "\n") {
            comment = false;
            continue;
        }
        if (comment) continue;
        if (quote) {
            if (c === "\\" && quote.ch === '"') {
                i++;
                continue;
            }
            if (c === quote.ch) {
                if (quote.ch === "'" && text[i + 1] === "'") {
                    i++;
                    continue;
                }
                quote = undefined;
            }
            continue;
        }
        if (c === "#" && (i === 0 || /\s/.test(text[i - 1]))) {
            comment = true;
            continue;
        }
        if ((c === '"' || c === "'") && SCALAR_START.test(text.slice(Math.max(0, i - 1), i))) {
            quote = { ch: c, at: i };
            continue;
        }
        if (c === "[" || c === "{") opened.push(i);
        if ((c === "]" || c === "}") && opened.length) opened.pop();
    }
    const at = quote?.at ?? opened[opened.length - 1];
    if (at === undefined) return undefined;
    const before = text.slice(0, at).split("\n");
    return { line: before.length, col: before[before.length - 1].length + 1 };
}

/** A YAML parse error as `line L, column C: what` with the line itself, at the line the person has to fix. */
export function yamlErrorText(text: string, e: Error): string {
    const err = e as Error & { pos?: [number, number]; linePos?: Array<{ line: number; col: number }> };
    const what = err.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
    let at = err.linePos?.[0];
    if (err.pos && /Flow (sequence|mapping)|quote|flow collection/i.test(what)) at = unclosedBefore(text, err.pos[0]) ?? at;
    if (!at) return err.message;
    const src = text.split("\n")[at.line - 1] ?? "";
    const gutter = `  ${at.line} | `;
    return `line ${at.line}, column ${at.col}: ${what}\n\n${gutter}${src}\n${" ".repeat(gutter.length + at.col - 1)}^`;
}

/**
 * Every stack file (`Pulumi.<stack>.yaml` / `.yml`) in `dir` (default `stacks/`), sorted by file name, each read with
 * {@link readStackFile} and named relative to the working directory.
 * @throws Error naming the file when one cannot be read, is not YAML or has no `config:` map ({@link readStackFile});
 *   the file system's error when `dir` cannot be listed
 */
export function discoverStacks(dir = STACKS_DIR): StackFile[] {
    return fs
        .readdirSync(dir)
        .filter((f) => /^Pulumi\..+\.ya?ml$/.test(f))
        .sort()
        .map((f) => readStackFile(path.join(dir, f), path.relative(process.cwd(), path.join(dir, f)) || f));
}

/** Orders stacks so every hub comes before the spokes that reference it. */
export function dependencyOrder(stacks: StackFile[]): StackFile[] {
    const rank = (s: StackFile) => (s.role === "hub" ? 0 : 1);
    return [...stacks].sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}
