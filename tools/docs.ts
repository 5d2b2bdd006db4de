/**
 * `npm run docs [-- --check]`: writes docs/stack-file.md, the reference of every stack-file key, generated from the
 * zod schemas the program validates with (config/hub.ts, config/spoke.ts and what they use): each key's type, whether
 * it is required or its default, and the TSDoc comment written above it in config/*.ts. The schemas are the truth;
 * test/docs.test.ts fails when the committed file differs from what this prints (run `npm run docs` after a change).
 *
 * `--check` writes nothing and exits 1 when docs/stack-file.md is stale.
 */
// First: on --help it exits before the imports below load.
import { HELP } from "./help/docs";
import * as fs from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";
import type { z } from "zod";
import * as eks from "../config/eks";
import * as endpoint from "../config/endpoint";
import * as gateway from "../config/gateway";
import * as hub from "../config/hub";
import * as limits from "../config/limits";
import * as metering from "../config/metering";
import * as nodeProfile from "../config/nodeProfile";
import * as observability from "../config/observability";
import * as serving from "../config/serving";
import * as spoke from "../config/spoke";
import * as spokeIdentity from "../config/spoke-identity";
import { exitOnHelp } from "./cli";

/** Modules whose exported `*Schema` consts make up a stack file (a new config module with schemas goes here). */
const SCHEMA_MODULES: Array<Record<string, unknown>> = [
    hub,
    spoke,
    spokeIdentity,
    eks,
    endpoint,
    gateway,
    limits,
    metering,
    nodeProfile,
    observability,
    serving,
];

const ROOT = path.join(__dirname, "..");
export const STACK_FILE_DOC = path.join(ROOT, "docs", "stack-file.md");

interface ZodDef {
    type: string;
    shape?: Record<string, z.ZodType>;
    innerType?: z.ZodType;
    defaultValue?: unknown;
    element?: z.ZodType;
    keyType?: z.ZodType;
    valueType?: z.ZodType;
    options?: z.ZodType[];
    discriminator?: string;
    values?: unknown[];
    entries?: Record<string, unknown>;
    in?: z.ZodType;
    out?: z.ZodType;
    left?: z.ZodType;
    right?: z.ZodType;
}
const defOf = (s: z.ZodType): ZodDef => (s as unknown as { _zod: { def: ZodDef } })._zod.def;

/**
 * TSDoc comments above the keys of `z.object({...})` literals in config/*.ts, by `<exported const>:<key path>`
 * (`SpokeConfigSchema:spoke.hubStack`): the path follows nested object literals through z.array / unions / wrappers.
 */
export function keyComments(dir = path.join(ROOT, "config")): Map<string, string> {
    const out = new Map<string, string>();
    for (const f of fs
        .readdirSync(dir)
        .filter((x) => x.endsWith(".ts"))
        .sort()) {
        const src = ts.createSourceFile(f, fs.readFileSync(path.join(dir, f), "utf8"), ts.ScriptTarget.Latest, true);
        const visit = (node: ts.Node, base: string | undefined, keyPath: string[]) => {
            if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer) {
                // The comment above `export const XSchema = ...` describes every key of that schema's type.
                const stmt = node.parent?.parent;
                const doc =
                    stmt && ts.isVariableStatement(stmt)
                        ? ts
                              .getJSDocCommentsAndTags(stmt)
                              .filter(ts.isJSDoc)
                              .map((d) => ts.getTextOfJSDocComment(d.comment) ?? "")
                              .join(" ")
                              .replace(/\s+/g, " ")
                              .trim()
                        : "";
                if (doc) out.set(`${node.name.text}:`, doc);
                visit(node.initializer, node.name.text, []);
                return;
            }
            if (
                base &&
                ts.isPropertyAssignment(node) &&
                (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name)) &&
                ts.isObjectLiteralExpression(node.parent)
            ) {
                const p = [...keyPath, node.name.text];
                const doc = ts
                    .getJSDocCommentsAndTags(node)
                    .filter(ts.isJSDoc)
                    .map((d) => ts.getTextOfJSDocComment(d.comment) ?? "")
                    .join(" ")
                    .replace(/\s+/g, " ")
                    .trim();
                const key = `${base}:${p.join(".")}`;
                if (doc && !out.has(key)) out.set(key, doc);
                visit(node.initializer, base, p);
                return;
            }
            ts.forEachChild(node, (c) => visit(c, base, keyPath));
        };
        visit(src, undefined, []);
    }
    return out;
}

interface Row {
    key: string;
    type: string;
    need: string;
    doc: string;
}

const code = (s: string) => `\`${s}\``;
const show = (v: unknown) => code(JSON.stringify(v));

/** Exported schema -> its const name, so a nested schema's comments are found where it is declared. */
function schemaNames(mods: Array<Record<string, unknown>>): Map<unknown, string> {
    const m = new Map<unknown, string>();
    for (const mod of mods)
        for (const [k, v] of Object.entries(mod))
            if (k.endsWith("Schema") && v && typeof v === "object" && "_zod" in v && !m.has(v)) m.set(v, k);
    return m;
}

/** Rows of one schema under `key` (`platform:cluster`), recursing into objects, lists, maps and unions. */
function rows(
    schema: z.ZodType,
    key: string,
    names: Map<unknown, string>,
    comments: Map<string, string>,
    at: { base: string; path: string[] },
    need: string,
    depth = 0,
): Row[] {
    if (depth > 30) return [];
    const name = names.get(schema);
    const outer = comments.get(`${at.base}:${at.path.join(".")}`);
    if (name) at = { base: name, path: [] };
    const d = defOf(schema);
    const doc = () => outer ?? comments.get(`${at.base}:${at.path.join(".")}`) ?? "";
    switch (d.type) {
        case "optional":
            return rows(d.innerType!, key, names, comments, at, "optional", depth + 1);
        case "nullable":
        case "readonly":
        case "catch":
        case "nonoptional":
            return rows(d.innerType!, key, names, comments, at, need, depth + 1);
        case "default":
        case "prefault": {
            const v = d.defaultValue;
            const shown = typeof v === "function" ? (v as () => unknown)() : v;
            const isEmptyMap = shown && typeof shown === "object" && !Array.isArray(shown) && Object.keys(shown).length === 0;
            return rows(
                d.innerType!,
                key,
                names,
                comments,
                at,
                isEmptyMap ? "optional (every field defaulted)" : `default ${show(shown)}`,
                depth + 1,
            );
        }
        case "pipe":
            return rows(d.in!, key, names, comments, at, need, depth + 1);
        case "object": {
            const own: Row[] = key && depth > 0 ? [{ key, type: "map", need, doc: doc() }] : [];
            return [
                ...own,
                ...Object.entries(d.shape!).flatMap(([k, v]) =>
                    rows(
                        v,
                        key.endsWith(":") ? `${key}${k}` : `${key}.${k}`,
                        names,
                        comments,
                        { base: at.base, path: [...at.path, k] },
                        "required",
                        depth + 1,
                    ),
                ),
            ];
        }
        case "array": {
            const inner = defOf(d.element!);
            const plain = !["object", "union", "record"].includes(unwrap(d.element!).type);
            if (plain) return [{ key, type: `list of ${typeName(d.element!)}`, need, doc: doc() }];
            const itemDoc = comments.get(`${names.get(unwrapTo(d.element!, "object")) ?? names.get(d.element!) ?? ""}:`) ?? "";
            return [
                { key, type: "list", need, doc: doc() || itemDoc },
                ...rows(d.element!, `${key}[]`, names, comments, at, "required", depth + 1).filter(
                    (r) => r.key !== `${key}[]` || inner.type !== "object",
                ),
            ];
        }
        case "record": {
            const plain = !["object", "union", "record"].includes(unwrap(d.valueType!).type);
            if (plain) return [{ key, type: `map of ${typeName(d.valueType!)}`, need, doc: doc() }];
            const itemDoc = comments.get(`${names.get(d.valueType!) ?? ""}:`) ?? "";
            return [
                { key, type: "map by name", need, doc: doc() || itemDoc },
                ...rows(d.valueType!, `${key}.<name>`, names, comments, at, "required", depth + 1).filter((r) => r.key !== `${key}.<name>`),
            ];
        }
        case "union": {
            const disc = d.discriminator;
            if (!disc) return [{ key, type: d.options!.map(typeName).join(" or "), need, doc: doc() }];
            const own: Row = { key, type: `map, by ${code(disc)}`, need, doc: doc() };
            return [
                own,
                ...d
                    .options!.flatMap((o) => {
                        const lit = defOf(defOf(unwrapTo(o, "object")).shape![disc]);
                        const when = `${code(`${disc}: ${String((lit.values ?? [])[0])}`)}`;
                        return rows(o, key, names, comments, at, "required", depth + 1)
                            .filter((r) => r.key !== key)
                            .map((r) => ({
                                ...r,
                                need: r.key === `${key}.${disc}` ? "required" : r.need,
                                doc: r.key === `${key}.${disc}` ? r.doc : `(${when}) ${r.doc}`.trim(),
                            }));
                    })
                    .filter((r, i, all) => r.key !== `${key}.${disc}` || all.findIndex((x) => x.key === r.key) === i)
                    .map((r) =>
                        r.key === `${key}.${disc}`
                            ? {
                                  ...r,
                                  type: d
                                      .options!.map((o) => show(String((defOf(defOf(unwrapTo(o, "object")).shape![disc]).values ?? [])[0])))
                                      .join(" or "),
                              }
                            : r,
                    ),
            ];
        }
        default:
            return [{ key, type: typeName(schema), need, doc: doc() }];
    }
}

function unwrap(s: z.ZodType): ZodDef {
    let d = defOf(s);
    for (let i = 0; i < 20 && ["optional", "nullable", "default", "prefault", "readonly", "catch", "nonoptional"].includes(d.type); i++)
        d = defOf(d.innerType!);
    if (d.type === "pipe") return unwrap(d.in!);
    return d;
}

function unwrapTo(s: z.ZodType, type: string): z.ZodType {
    let cur = s;
    for (let i = 0; i < 20 && defOf(cur).type !== type; i++) {
        const d = defOf(cur);
        cur = (d.innerType ?? d.in)!;
        if (!cur) break;
    }
    return cur;
}

/** `string`, `integer`, `"a" or "b"`, `list of string`, ... */
function typeName(s: z.ZodType): string {
    const d = unwrap(s);
    const checks =
        (s as unknown as { _zod: { def: { checks?: Array<{ _zod: { def: { check: string; format?: string } } }> } } })._zod.def.checks ??
        [];
    switch (d.type) {
        case "string":
            return "string";
        case "number":
            return checks.some((c) => c._zod.def.format === "safeint" || c._zod.def.check === "number_format") ? "integer" : "number";
        case "int":
            return "integer";
        case "boolean":
            return "boolean";
        case "literal":
            return (d.values ?? []).map((v) => show(v)).join(" or ");
        case "enum":
            return Object.values(d.entries ?? {})
                .map((v) => show(v))
                .join(" or ");
        case "array":
            return `list of ${typeName(d.element!)}`;
        case "record":
            return `map of ${typeName(d.valueType!)}`;
        case "union":
            return (d.options ?? []).map(typeName).join(" or ");
        case "object":
            return "map";
        default:
            return d.type;
    }
}

/** TSDoc `{@link X}` / `{@link X | text}` as Markdown code `X` (the reference is read outside an editor). */
export function plainLinks(doc: string): string {
    return doc.replace(/\{@link(?:code|plain)?\s+([^}|\s]+)(?:\s*\|?\s*[^}]*)?\}/g, (_, x: string) => code(x));
}

/** A key the hub fills in itself (its comment begins "Set by the hub"): not for stack files. */
function setByHub(r: Row): string | undefined {
    return /^Set by the hub\b/.test(r.doc) ? "set by the hub (never in a stack file)" : undefined;
}

function table(rs: Row[]): string[] {
    const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
    return [
        "| key | type | required / default | what it is |",
        "|---|---|---|---|",
        ...rs.map((r) => `| ${code(r.key)} | ${cell(r.type)} | ${cell(setByHub(r) ?? r.need)} | ${cell(plainLinks(r.doc))} |`),
    ];
}

/** The whole docs/stack-file.md text. */
export function stackFileReference(): string {
    const names = schemaNames(SCHEMA_MODULES);
    const comments = keyComments();
    const { HubConfigSchema } = hub;
    const { SpokeConfigSchema } = spoke;
    const section = (title: string, schema: z.ZodType, base: string) => {
        const shape = defOf(unwrapTo(schema, "object")).shape!;
        const out = [`## ${title}`, ""];
        for (const [k, v] of Object.entries(shape)) {
            const rs = rows(v, `platform:${k}`, names, comments, { base, path: [k] }, "required");
            out.push(`### ${code(`platform:${k}`)}`, "", ...table(rs), "");
        }
        return out;
    };
    return `${[
        "# Stack file reference",
        "",
        "<!-- Generated by `npm run docs` (tools/docs.ts) from the zod schemas in config/; do not edit by hand. -->",
        "",
        "Every key a stack file (`stacks/Pulumi.<stack>.yaml`) may set under `config:`, as the program validates it. Keys",
        "are in the `platform` namespace; provider keys (`aws:region`, `kubernetes:*`) are the providers' own. `[]` is an",
        'item of a list, `<name>` a key of a map; "(`fabric: efa`)" marks a key of one variant only. A key that is not',
        "listed here is refused, with the nearest known key named.",
        "",
        "- [Hub stack (`platform:role: hub`)](#hub-stack-platformrole-hub)",
        "- [Spoke stack (`platform:role: spoke`)](#spoke-stack-platformrole-spoke)",
        "",
        ...section("Hub stack (`platform:role: hub`)", HubConfigSchema, "HubConfigSchema"),
        ...section("Spoke stack (`platform:role: spoke`)", SpokeConfigSchema, "SpokeConfigSchema"),
    ]
        .join("\n")
        .replace(/\n{3,}/g, "\n\n")
        .trimEnd()}\n`;
}

if (require.main === module) {
    const argv = process.argv.slice(2);
    exitOnHelp(argv, HELP);
    const text = stackFileReference();
    const current = fs.existsSync(STACK_FILE_DOC) ? fs.readFileSync(STACK_FILE_DOC, "utf8") : "";
    if (argv.includes("--check")) {
        if (current !== text) {
            process.stderr.write("docs/stack-file.md is stale: run npm run docs\n");
            process.exit(1);
        }
        process.exit(0);
    }
    fs.mkdirSync(path.dirname(STACK_FILE_DOC), { recursive: true });
    fs.writeFileSync(STACK_FILE_DOC, text);
    process.stdout.write(`wrote ${path.relative(process.cwd(), STACK_FILE_DOC)}${current === text ? " (unchanged)" : ""}\n`);
}
