import type { z } from "zod";

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
        super(`${stackFile}: invalid stack configuration\n${issues.map((i) => `  - ${i.key}: ${i.message}`).join("\n")}`);
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
export function zodIssues(error: z.ZodError, prefix: string, schema?: z.ZodType): ConfigIssue[] {
    return error.issues.flatMap((i) => {
        // An unknown key is reported on its parent; name the key itself (`platform:frontnd`), it is what to fix,
        // and the nearest known key of that object when `schema` is given.
        if (i.code === "unrecognized_keys") {
            const known = schema ? knownKeysAt(schema, i.path as PropertyKey[]) : [];
            return i.keys.map((k) => ({ key: joinKey(prefix, [...(i.path as PropertyKey[]), k]), message: unknownKeyMessage(k, known) }));
        }
        return [{ key: joinKey(prefix, i.path as PropertyKey[]), message: plainMessage(i, schema) }];
    });
}

/**
 * zod's own wording where it helps a person: a missing key says "required" and what it takes, a choice lists the
 * choices (`"Invalid input: expected string, received undefined"` -> `required (a string)`).
 */
function plainMessage(i: z.core.$ZodIssue, schema?: z.ZodType): string {
    const quote = (v: unknown) => JSON.stringify(v);
    if (i.code === "invalid_type" && /received undefined$/.test(i.message)) {
        const choice = schema ? discriminatorAt(schema, i.path as PropertyKey[]) : undefined;
        if (choice) return `required (a map; ${choice.key}: one of ${choice.values.map(quote).join(", ")})`;
        return `required (${i.expected === "object" ? "a map" : i.expected === "array" ? "a list" : `a ${i.expected}`})`;
    }
    if (i.code === "invalid_value" && i.values.length > 1) return `must be one of ${i.values.map(quote).join(", ")}`;
    const u = i as { code: string; note?: string; options?: unknown[] };
    if (u.code === "invalid_union" && u.note === "No matching discriminator" && u.options)
        return `must be one of ${u.options.map(quote).join(", ")} (required)`;
    return i.message;
}

/** `prefix` + formatted path: `platform:` + `nodePools[0]` or `hub output x` + `.endpoints[0]`. */
function joinKey(prefix: string, path: PropertyKey[]): string {
    const p = formatPath(path);
    if (!p) return prefix.endsWith(":") ? `${prefix}(top level)` : prefix;
    if (prefix.endsWith(":")) return prefix + p;
    return p.startsWith("[") ? `${prefix}${p}` : `${prefix}.${p}`;
}

/** Levenshtein edit distance between two strings (case-insensitive). */
export function editDistance(a: string, b: string): number {
    a = a.toLowerCase();
    b = b.toLowerCase();
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
        const cur = [i];
        for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
    }
    return prev[b.length];
}

/**
 * The known name nearest to `name`, when it is close enough to be a typo: at most a third of the longer name's
 * characters differ (at least 1, at most 3), or the names differ only in case. Undefined when nothing is close.
 */
export function nearest(name: string, known: readonly string[]): string | undefined {
    let best: string | undefined;
    let bestD = Infinity;
    for (const k of known) {
        const d = editDistance(name, k);
        if (d < bestD) {
            best = k;
            bestD = d;
        }
    }
    if (best === undefined) return undefined;
    const limit = Math.min(3, Math.max(1, Math.floor(Math.max(name.length, best.length) / 3)));
    return bestD <= limit ? best : undefined;
}

/** "unknown key", with the nearest known key (a typo) or the list of known keys. */
export function unknownKeyMessage(name: string, known: readonly string[]): string {
    const n = nearest(name, known);
    if (n) return `unknown key; did you mean "${n}"?`;
    return known.length
        ? `unknown key (a typo? known keys here: ${[...known].sort().join(", ")})`
        : "unknown key (a typo? remove it or fix its name)";
}

/** zod 4 schema internals read by {@link knownKeysAt} (`schema._zod.def`). */
interface ZodDef {
    type: string;
    shape?: Record<string, z.ZodType>;
    innerType?: z.ZodType;
    in?: z.ZodType;
    out?: z.ZodType;
    element?: z.ZodType;
    options?: z.ZodType[];
    valueType?: z.ZodType;
    left?: z.ZodType;
    right?: z.ZodType;
}
const defOf = (s: z.ZodType): ZodDef => (s as unknown as { _zod: { def: ZodDef } })._zod.def;

/** The object schemas `schema` may be (wrappers removed, union options expanded). */
function objectsOf(schema: z.ZodType, depth = 0): Array<Record<string, z.ZodType>> {
    if (depth > 20) return [];
    const d = defOf(schema);
    switch (d.type) {
        case "object":
            return [d.shape!];
        case "optional":
        case "nullable":
        case "default":
        case "prefault":
        case "readonly":
        case "catch":
        case "nonoptional":
            return objectsOf(d.innerType!, depth + 1);
        case "pipe":
            return [...objectsOf(d.in!, depth + 1), ...(d.out ? objectsOf(d.out, depth + 1) : [])];
        case "union":
            return d.options!.flatMap((o) => objectsOf(o, depth + 1));
        case "intersection":
            return [...objectsOf(d.left!, depth + 1), ...objectsOf(d.right!, depth + 1)];
        default:
            return [];
    }
}

/** The element/value schemas under one path segment of `schema`. */
function childrenAt(schema: z.ZodType, seg: PropertyKey, depth = 0): z.ZodType[] {
    if (depth > 20) return [];
    const d = defOf(schema);
    switch (d.type) {
        case "object":
            return d.shape![String(seg)] ? [d.shape![String(seg)]] : [];
        case "array":
            return typeof seg === "number" ? [d.element!] : [];
        case "record":
            return [d.valueType!];
        case "optional":
        case "nullable":
        case "default":
        case "prefault":
        case "readonly":
        case "catch":
        case "nonoptional":
            return childrenAt(d.innerType!, seg, depth + 1);
        case "pipe":
            return childrenAt(d.in!, seg, depth + 1);
        case "union":
            return d.options!.flatMap((o) => childrenAt(o, seg, depth + 1));
        case "intersection":
            return [...childrenAt(d.left!, seg, depth + 1), ...childrenAt(d.right!, seg, depth + 1)];
        default:
            return [];
    }
}

/** The discriminator key and its values when the schema at `path` is a discriminated union (`backend` -> `fabric`). */
function discriminatorAt(schema: z.ZodType, path: readonly PropertyKey[]): { key: string; values: unknown[] } | undefined {
    let cur: z.ZodType[] = [schema];
    for (const seg of path) cur = cur.flatMap((c) => childrenAt(c, seg));
    for (let c of cur) {
        for (let d = 0; d < 20 && ["optional", "nullable", "default", "prefault"].includes(defOf(c).type); d++) c = defOf(c).innerType!;
        const def = defOf(c) as ZodDef & { discriminator?: string };
        if (def.type !== "union" || !def.discriminator) continue;
        const values = objectsOf(c).flatMap((o) =>
            o[def.discriminator!] ? ((defOf(o[def.discriminator!]) as { values?: unknown[] }).values ?? []) : [],
        );
        return { key: def.discriminator, values };
    }
    return undefined;
}

/**
 * Keys a (strict) object schema accepts at `path` (`["cluster"]` -> `provider`, `kubeconfigContext`, ...). Union
 * options are merged, so the keys of every variant of a discriminated union are candidates.
 */
export function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
    let cur: z.ZodType[] = [schema];
    for (const seg of path) cur = cur.flatMap((c) => childrenAt(c, seg));
    return [...new Set(cur.flatMap((c) => objectsOf(c)).flatMap((o) => Object.keys(o)))];
}
