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
    return error.issues.map((i) => {
        const path = formatPath(i.path as PropertyKey[]);
        const key = prefix.endsWith(":") ? prefix + path : path ? `${prefix}.${path}`.replace(/\.\[/g, "[") : prefix;
        return { key: key || prefix, message: i.message };
    });
}
