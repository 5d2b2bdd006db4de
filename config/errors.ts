import { z } from "zod";

/** One problem in a stack file: `key` is the full config key path, e.g. `platform:nodePools[0].profile`. */
export interface ConfigIssue {
    key: string;
    message: string;
}

/**
 * Thrown when a stack file is invalid. The message names the stack file and every offending key,
 * one per line, so `render` and `pulumi up` print something a user can act on without a stack trace.
 */
export class ConfigError extends Error {
    readonly stackFile: string;
    readonly issues: ConfigIssue[];

    constructor(stackFile: string, issues: ConfigIssue[]) {
        super(`${stackFile}: invalid stack configuration\n` + issues.map((i) => `  - ${i.key}: ${i.message}`).join("\n"));
        this.name = "ConfigError";
        this.stackFile = stackFile;
        this.issues = issues;
    }
}

/** Formats a zod issue path (`["nodePools", 0, "profile"]`) as `nodePools[0].profile`. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
    let out = "";
    for (const p of path) {
        if (typeof p === "number") out += `[${p}]`;
        else out += out === "" ? String(p) : `.${String(p)}`;
    }
    return out;
}

/**
 * Converts zod issues into {@link ConfigIssue}s. `prefix` is prepended to each path: `platform:` for
 * top-level stack keys, or `platform:nodePools[0].profile` for a nested document such as an inline node profile.
 */
export function zodIssues(error: z.ZodError, prefix: string): ConfigIssue[] {
    return error.issues.flatMap((i) => {
        // An unknown key is reported on its parent; name the key itself (`platform:frontnd`), it is what to fix.
        if (i.code === "unrecognized_keys") {
            return i.keys.map((k) => ({ key: joinKey(prefix, [...(i.path as PropertyKey[]), k]), message: "unknown key (a typo? remove it or fix its name)" }));
        }
        return [{ key: joinKey(prefix, i.path as PropertyKey[]), message: i.message }];
    });
}

/** `prefix` + formatted path: `platform:` + `nodePools[0]` or `hub output x` + `.endpoints[0]`. */
function joinKey(prefix: string, path: PropertyKey[]): string {
    const p = formatPath(path);
    if (!p) return prefix.endsWith(":") ? `${prefix}(top level)` : prefix;
    if (prefix.endsWith(":")) return prefix + p;
    return p.startsWith("[") ? `${prefix}${p}` : `${prefix}.${p}`;
}
