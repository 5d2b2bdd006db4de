import * as fs from "fs";
import * as path from "path";
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

export const STACKS_DIR = path.join(__dirname, "..", "stacks");

/** Stack name from a stack file path: `stacks/Pulumi.spoke-hn1.yaml` -> `spoke-hn1`. */
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
        throw new Error(`${display}: not valid YAML: ${(e as Error).message}`);
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
        try { hub = String(JSON.parse(config["platform:spoke"] ?? "{}").hubStack ?? "").split("/").pop() || undefined; } catch { hub = undefined; }
    }
    return { name: stackNameOf(file), file: display, role, hub, config, secretKeys };
}

/** Every stack file under `stacks/`, sorted by name. */
export function discoverStacks(dir = STACKS_DIR): StackFile[] {
    return fs.readdirSync(dir).filter((f) => /^Pulumi\..+\.ya?ml$/.test(f)).sort()
        .map((f) => readStackFile(path.join(dir, f), path.relative(process.cwd(), path.join(dir, f)) || f));
}

/** Orders stacks so every hub comes before the spokes that reference it. */
export function dependencyOrder(stacks: StackFile[]): StackFile[] {
    const rank = (s: StackFile) => (s.role === "hub" ? 0 : 1);
    return [...stacks].sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}
