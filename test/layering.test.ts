import * as fs from "node:fs";
import { builtinModules } from "node:module";
import * as path from "node:path";
import * as ts from "typescript";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers";

/**
 * The layering of the TypeScript sources, as a test over their import graph (static `import`/`export ... from`,
 * `import x = require()`, `import()` and `require()`, read with the TypeScript parser). The product layers, in the one
 * order docs/architecture.md ("Layers") states:
 *
 *   index.ts -> programs/ -> components/ -> lib/ -> config/ -> upstream/
 *
 * each importing only itself and the layers to its right (so config/ imports upstream/, never lib/). A component
 * imports another component only for an exported class, interface, type alias or enum (composition; resolved in the
 * imported module, not guessed from the name's case), never its helpers or constants (those live in lib/).
 * services/ import only services/ (and services/shared/ the import-free upstream facts in SERVICE_SHARED_UPSTREAM); from outside, only a service's contract (`services/<name>/config.ts`) and
 * `services/shared/`, and those modules load no package but zod and Node built-ins at run time (no ioredis, pg, AWS
 * SDK in the Pulumi program). policies/ import exactly: policies/, upstream/, the lib/ files in PACK_SHARED_LIB and
 * `services/shared/`, the last two loading nothing but Node built-ins (the pack has its own node_modules). tools/
 * and test/ may import anything but each other's way up: nothing outside tools/ and test/ imports them. Product code
 * (index.ts, programs/, components/, lib/, config/, upstream/, services/, policies/) never computes a module path
 * (`require("../tools/" + x)`, ``import(`./${y}`)``) nor reaches Node's loader another way (`const r = require`,
 * `createRequire`, `module.require`; LOADER_USES lists the reviewed exceptions): such an import escapes this test, so it
 * is refused. No module
 * is a re-export shim (a second path to another module) unless its header names it a public entry point.
 */

type Layer = "index" | "programs" | "components" | "lib" | "config" | "upstream" | "services" | "policies" | "tools" | "test";

/** The product's layers, in the order docs/architecture.md states: each imports itself and those after it. */
const ORDER: Layer[] = ["index", "programs", "components", "lib", "config", "upstream"];

/** What each layer may import (besides services' contracts, checked separately). */
const ALLOWED: Record<Layer, Layer[]> = {
    index: ["index", "programs", "components", "lib", "config", "upstream"],
    programs: ["programs", "components", "lib", "config", "upstream"],
    components: ["components", "lib", "config", "upstream"],
    lib: ["lib", "config", "upstream"],
    config: ["config", "upstream"],
    upstream: ["upstream"],
    services: ["services"],
    policies: ["policies", "upstream"],
    tools: ["tools", "programs", "components", "lib", "config", "upstream", "policies", "index"],
    test: ["test", "tools", "programs", "components", "lib", "config", "upstream", "policies", "index"],
};

/**
 * Known edges awaiting a change on another branch, each with its reason. Keep empty; an entry that no longer
 * exists fails the test, so the list only shrinks.
 */
const PENDING: Record<string, string> = {};

/**
 * A component split into parts: the folder (or file) holds modules of one component (its owner), which imports them
 * freely; the parts import each other; no other component may. The previous release's spoke role is a part of
 * SpokeIdentity kept for one release (components/hub/legacy-spoke-role.ts).
 */
const PARTS: Record<string, string> = {
    "components/hub/ledger/": "components/hub/UsageLedger.ts",
    "components/hub/legacy-spoke-role.ts": "components/hub/SpokeIdentity.ts",
};

/**
 * Files of lib/ the policy pack may import: names the program and the pack share, in modules that import nothing
 * (what the pack reaches may load only packages the root package.json pins: test/policies/fact-base.test.ts).
 */
const PACK_SHARED_LIB = new Set(["lib/labels.ts"]);

/** What the policy pack may import from services/: the shared modules (names on the wire), never a service's code. */
const PACK_SHARED_SERVICES = /^services\/shared\/[^/]+\.ts$/;

/** Layers whose code is the product (deployed, or run at `pulumi up`): no computed module paths there. */
const PRODUCT: ReadonlySet<Layer> = new Set(["index", "programs", "components", "lib", "config", "upstream", "services", "policies"]);

/**
 * Upstream facts services/shared/ may import: modules that import nothing, which every service image that compiles
 * services/shared/ copies (its Dockerfile and .dockerignore; test/images.test.ts follows the imports). The header names
 * the auth service sets are an upstream fact with its source (services/shared/identity.ts `DYNAMO_HEADERS`).
 */
const SERVICE_SHARED_UPSTREAM = new Set(["upstream/dynamo-headers.ts"]);

/** A service's test harness folder. */
const TESTING_DIR = /^services\/[^/]+\/testing\//;

/** Packages a module imported into the Pulumi program from services/ may load at run time. */
const CONTRACT_PACKAGES = new Set(["zod"]);

interface Edge {
    from: string;
    to: string;
    /** Bare package name, for non-relative specifiers. */
    pkg?: string;
    typeOnly: boolean;
    /** Names imported (`import { a, b }`), when the statement lists them. */
    names?: string[];
    /** Of those, the ones marked `type` (`import { type C }`). */
    typeNames?: string[];
    /** The module path is computed (`require("../x/" + y)`): `to` is the call's text. */
    computed?: boolean;
}

const SKIP_DIRS = new Set(["node_modules", "out", "dist", ".git", "fixtures"]);

function sources(dir = ROOT): string[] {
    const out: string[] = [];
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        if (e.name.startsWith(".") || SKIP_DIRS.has(e.name)) continue;
        const p = path.join(dir, e.name);
        if (e.isDirectory()) out.push(...sources(p));
        else if (/\.(ts|mts|cts)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(path.relative(ROOT, p).split(path.sep).join("/"));
    }
    return out;
}

function resolve(from: string, spec: string): string {
    const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
    for (const c of [base, `${base}.ts`, `${base}/index.ts`, `${base}.js`])
        if (fs.existsSync(path.join(ROOT, c)) && fs.statSync(path.join(ROOT, c)).isFile()) return c;
    return base;
}

const parse = (file: string, text: string) => ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
const literal = (n: ts.Node | undefined) => (n && (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) ? n.text : undefined);

/**
 * Uses of Node's loader that are not a direct `require("literal")` call, each with its reason: a documented way out
 * for a real need. Keyed by the expression's text.
 */
const LOADER_USES: Record<string, string> = {
    // A service's script (bench, chaos, report) runs its CLI only when started as the main module: Node's documented
    // test (nodejs/node@v24.x:doc/api/modules.md "Accessing the main module"). It reads; it loads nothing.
    "require.main === module": "run as a script",
};

/** Objects whose `require` property is Node's loader (`module.require`, `globalThis.require`, ...), not a method. */
const LOADER_HOLDERS = new Set(["module", "global", "globalThis", "process.mainModule", "require.main"]);

const LOADER_NAMES = new Set(["require", "createRequire"]);

/**
 * Whether a node reaches Node's loader other than by a direct `require("literal")` call (read as an import above):
 * `require` as a value (`const r = require; r("../tools/x")`, `{ require }`, `require.cache`), `createRequire` in any
 * form (`createRequire(__filename)("../tools/x")`, `m.createRequire`, its import), `module.require`, and
 * `x["require"]`. Such a module path escapes the import graph, so it counts as computed. A property or key named
 * `require` on another object (Pulumi's `config.require("key")`) is not the loader; {@link LOADER_USES} are let through.
 */
function isLoaderUse(n: ts.Node): boolean {
    if (ts.isElementAccessExpression(n)) return LOADER_NAMES.has(literal(n.argumentExpression) ?? "");
    if (!ts.isIdentifier(n) || !LOADER_NAMES.has(n.text)) return false;
    const p = n.parent;
    // The direct call: an import edge (literal) or a computed one (anything else), read by importsOf.
    if (n.text === "require" && ts.isCallExpression(p) && p.expression === n) return false;
    if (ts.isPropertyAccessExpression(p) && p.name === n) return n.text === "createRequire" || LOADER_HOLDERS.has(p.expression.getText());
    // A key or member declared with the name (an object's, a type's, a class's): not a reference to the loader.
    if (
        (ts.isPropertyAssignment(p) ||
            ts.isPropertySignature(p) ||
            ts.isPropertyDeclaration(p) ||
            ts.isMethodDeclaration(p) ||
            ts.isMethodSignature(p)) &&
        p.name === n
    )
        return false;
    if (n.text === "require" && ts.isPropertyAccessExpression(p) && p.expression === n) {
        const use = p.parent;
        if (ts.isBinaryExpression(use) && LOADER_USES[use.getText()] !== undefined) return false;
    }
    return true;
}

/** Every import of one file, read by the TypeScript parser (so an example in a comment is not an import). */
function importsOf(file: string, text: string): Edge[] {
    const edges: Edge[] = [];
    const add = (spec: string, typeOnly: boolean, names?: string[], typeNames?: string[]) => {
        if (spec.startsWith(".")) edges.push({ from: file, to: resolve(file, spec), typeOnly, names, typeNames });
        else {
            const pkg = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];
            edges.push({ from: file, to: spec, pkg: pkg.replace(/^node:/, ""), typeOnly, names, typeNames });
        }
    };
    const named = (elements: readonly (ts.ImportSpecifier | ts.ExportSpecifier)[] | undefined, whole: boolean) => {
        const names = elements?.map((e) => (e.propertyName ?? e.name).text);
        const typeNames = elements?.filter((e) => e.isTypeOnly).map((e) => (e.propertyName ?? e.name).text);
        const typeOnly = whole || (!!elements && elements.length > 0 && elements.every((e) => e.isTypeOnly));
        return { names, typeNames, typeOnly };
    };
    const sf = parse(file, text);
    const visit = (n: ts.Node): void => {
        if (ts.isImportDeclaration(n)) {
            const c = n.importClause;
            const b = c?.namedBindings;
            const x = named(b && ts.isNamedImports(b) && !c?.name ? b.elements : undefined, !!c?.isTypeOnly);
            add(literal(n.moduleSpecifier)!, x.typeOnly, x.names, x.typeNames);
        } else if (ts.isExportDeclaration(n) && n.moduleSpecifier) {
            const c = n.exportClause;
            const x = named(c && ts.isNamedExports(c) ? c.elements : undefined, n.isTypeOnly);
            add(literal(n.moduleSpecifier)!, x.typeOnly, x.names, x.typeNames);
        } else if (ts.isImportTypeNode(n)) {
            const spec = ts.isLiteralTypeNode(n.argument) ? literal(n.argument.literal) : undefined;
            if (spec !== undefined) add(spec, true);
        } else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference)) {
            const spec = literal(n.moduleReference.expression);
            if (spec !== undefined) add(spec, n.isTypeOnly);
            else edges.push({ from: file, to: n.getText(sf), typeOnly: false, computed: true });
        } else if (
            ts.isCallExpression(n) &&
            (n.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(n.expression) && n.expression.text === "require"))
        ) {
            const spec = literal(n.arguments[0]);
            if (spec !== undefined) add(spec, false);
            else edges.push({ from: file, to: n.getText(sf), typeOnly: false, computed: true });
        } else if (isLoaderUse(n)) {
            const at = ts.findAncestor(n, ts.isStatement) ?? n;
            edges.push({ from: file, to: at.getText(sf).split("\n")[0], typeOnly: false, computed: true });
        }
        ts.forEachChild(n, visit);
    };
    visit(sf);
    return edges;
}

/**
 * Whether module `file` exports `name` as a class, interface, type alias or enum (what composition needs), followed
 * through `export { x }`, `export { x } from` and `export * from`; a const, function or anything unresolved is not.
 */
function exportsClassOrType(file: string, name: string, read: (f: string) => string, seen = new Set<string>()): boolean {
    if (seen.has(`${file}#${name}`)) return false;
    seen.add(`${file}#${name}`);
    // `file` as resolve() left it: a planted module (in a test) may not exist on disk.
    let text: string | undefined;
    for (const c of [file, `${file}.ts`, `${file}/index.ts`]) {
        try {
            text = read(c);
            file = c;
            break;
        } catch {}
    }
    if (text === undefined) return false;
    const sf = parse(file, text);
    const exported = (n: ts.Node) => ts.canHaveModifiers(n) && !!ts.getModifiers(n)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    const isClassOrType = (n: ts.Node) =>
        ts.isClassDeclaration(n) || ts.isInterfaceDeclaration(n) || ts.isTypeAliasDeclaration(n) || ts.isEnumDeclaration(n);
    /** A top-level declaration of `local` in this file (exported or not), or the module it was imported from. */
    const declared = (local: string): boolean => {
        for (const st of sf.statements) {
            if (isClassOrType(st) && (st as ts.DeclarationStatement).name?.getText(sf) === local) return true;
            if (ts.isImportDeclaration(st) && st.importClause?.namedBindings && ts.isNamedImports(st.importClause.namedBindings)) {
                const e = st.importClause.namedBindings.elements.find((x) => x.name.text === local);
                const spec = literal(st.moduleSpecifier);
                if (e && spec?.startsWith(".")) return exportsClassOrType(resolve(file, spec), (e.propertyName ?? e.name).text, read, seen);
            }
        }
        return false;
    };
    for (const st of sf.statements) {
        if (isClassOrType(st) && exported(st) && (st as ts.DeclarationStatement).name?.getText(sf) === name) return true;
        if (!ts.isExportDeclaration(st)) continue;
        const spec = literal(st.moduleSpecifier);
        if (!st.exportClause) {
            if (spec?.startsWith(".") && exportsClassOrType(resolve(file, spec), name, read, seen)) return true;
        } else if (ts.isNamedExports(st.exportClause)) {
            const e = st.exportClause.elements.find((x) => x.name.text === name);
            if (!e) continue;
            const original = (e.propertyName ?? e.name).text;
            if (!spec) return declared(original);
            return spec.startsWith(".") && exportsClassOrType(resolve(file, spec), original, read, seen);
        }
    }
    return false;
}

/**
 * A re-export shim: a module whose every statement re-exports one and the same other module (a second import path for
 * it). Allowed only where its header names it a public entry point.
 */
function isShim(file: string, text: string): boolean {
    const sf = parse(file, text);
    const targets = new Set<string>();
    for (const st of sf.statements) {
        if (!ts.isExportDeclaration(st) || !st.moduleSpecifier) return false;
        targets.add(literal(st.moduleSpecifier)!);
    }
    return targets.size === 1 && !/public entry point/i.test(text.slice(0, sf.statements[0]?.getStart(sf) ?? 0));
}

function layerOf(file: string, importer = false): Layer | undefined {
    if (file === "index.ts") return "index";
    // A service's test harnesses (services/<name>/testing/) import as tests: never in its image (each
    // Dockerfile.dockerignore excludes them, checked below), so they may drive what lib/ renders (the two-spoke
    // failover rig does). Imported, they stay services/.
    if (importer && TESTING_DIR.test(file)) return "test";
    const top = file.split("/")[0];
    return (["programs", "components", "lib", "config", "upstream", "services", "policies", "tools", "test"] as const).find(
        (l) => l === top,
    );
}

/** Layering violations of a set of edges (see the file's header). */
function violations(edges: Edge[], read: (f: string) => string): string[] {
    const out: string[] = [];
    for (const e of edges.filter((x) => x.computed)) {
        const from = layerOf(e.from, true);
        if (from && PRODUCT.has(from))
            out.push(`${e.from}: ${e.to}: a computed module path escapes the layering check; import a literal path`);
    }
    const local = edges.filter((e) => !e.pkg && !e.computed);
    for (const e of local) {
        const from = layerOf(e.from, true);
        const to = layerOf(e.to);
        if (!from || !to || (from === to && from !== "components")) continue;
        const key = `${e.from} -> ${e.to}`;
        if (PENDING[key]) continue;
        if (from === "policies") {
            if (!ALLOWED.policies.includes(to) && !PACK_SHARED_LIB.has(e.to) && !PACK_SHARED_SERVICES.test(e.to))
                out.push(`${key}: policies/ import only policies/, upstream/, ${[...PACK_SHARED_LIB].join(", ")} and services/shared/`);
            continue;
        }
        if (to === "services" && from !== "services") {
            if (from === "tools" || from === "test") continue;
            if (!/^services\/([^/]+\/config\.ts|shared\/[^/]+\.ts)$/.test(e.to))
                out.push(`${key}: outside services/, import only a service's contract (services/<name>/config.ts) or services/shared/`);
            continue;
        }
        const partsOf = (f: string) => Object.keys(PARTS).find((d) => f.startsWith(d));
        if (
            from === "components" &&
            to === "components" &&
            partsOf(e.to) &&
            (PARTS[partsOf(e.to)!] === e.from || partsOf(e.from) === partsOf(e.to))
        )
            continue;
        if (e.from.startsWith("services/shared/") && SERVICE_SHARED_UPSTREAM.has(e.to)) {
            if (importsOf(e.to, read(e.to)).length > 0)
                out.push(`${key}: ${e.to} must import nothing (the services' images copy it alone)`);
            continue;
        }
        if (from === "components" && to === "components") {
            const helpers = e.typeOnly
                ? []
                : e.names === undefined
                  ? ["*"]
                  : e.names.filter((n) => !e.typeNames?.includes(n) && !exportsClassOrType(e.to, n, read));
            if (helpers.length > 0)
                out.push(
                    `${key}: a component imports another component's class or types only, not ${helpers.join(", ")} (move it to lib/)`,
                );
            continue;
        }
        if (!ALLOWED[from].includes(to)) out.push(`${key}: ${from}/ may not import ${to}/`);
    }
    // Run-time closure of every services/ module the program imports (zod and Node built-ins only), and of every lib/ or
    // services/ module the pack imports (Node built-ins only: the pack loads them with its own node_modules).
    const builtins = new Set(builtinModules.map((m) => m.replace(/^node:/, "")));
    const entries = new Map<string, { packages: ReadonlySet<string>; by: string }>();
    for (const e of local) {
        const from = layerOf(e.from, true)!;
        const to = layerOf(e.to);
        if (from === "policies" && (PACK_SHARED_LIB.has(e.to) || PACK_SHARED_SERVICES.test(e.to)))
            entries.set(e.to, { packages: new Set(), by: "the pack" });
        else if (to === "services" && !["services", "tools", "test"].includes(from) && !entries.has(e.to))
            entries.set(e.to, { packages: CONTRACT_PACKAGES, by: "the program" });
    }
    for (const [start, { packages, by }] of entries) {
        const seen = new Set<string>();
        const stack = [start];
        while (stack.length > 0) {
            const f = stack.pop()!;
            if (seen.has(f)) continue;
            seen.add(f);
            for (const d of importsOf(f, read(f)).filter((x) => !x.typeOnly)) {
                if (d.computed) out.push(`${start}: imported by ${by}, computes a module path (${d.to} in ${f})`);
                else if (d.pkg) {
                    if (!packages.has(d.pkg) && !builtins.has(d.pkg))
                        out.push(`${start}: imported by ${by}, loads ${d.pkg} at run time (through ${f})`);
                } else stack.push(d.to);
            }
        }
    }
    return [...new Set(out)].sort();
}

const read = (f: string) => fs.readFileSync(path.join(ROOT, f), "utf8");

describe("layering (import graph of the TypeScript sources)", () => {
    const files = sources();
    const edges = files.flatMap((f) => importsOf(f, read(f)));

    it("every import points down or sideways", () => {
        expect(files.length).toBeGreaterThan(100);
        expect(violations(edges, read)).toEqual([]);
    });

    it("the pending exceptions still exist (the list only shrinks)", () => {
        const keys = new Set(edges.map((e) => `${e.from} -> ${e.to}`));
        for (const k of Object.keys(PENDING)) expect(keys.has(k), `${k} no longer exists: delete it from PENDING`).toBe(true);
    });

    it("fails on a planted upward import, a tool in a program, a component's helper and a service's internals", () => {
        const planted: Edge[] = [
            { from: "lib/gateway.ts", to: "components/spoke/AuthService.ts", typeOnly: false, names: ["AuthService"] },
            { from: "programs/load.ts", to: "tools/render.ts", typeOnly: false },
            { from: "config/eks.ts", to: "lib/labels.ts", typeOnly: true },
            { from: "components/spoke/Metering.ts", to: "components/spoke/AuthService.ts", typeOnly: false, names: ["awsCredentialsFile"] },
            { from: "components/hub/UsageLedger.ts", to: "services/ledger/ledger.ts", typeOnly: false, names: ["migrate"] },
            { from: "services/auth/config.ts", to: "lib/labels.ts", typeOnly: false },
            { from: "policies/gateway.ts", to: "config/versions.ts", typeOnly: false },
            { from: "services/shared/identity.ts", to: "upstream/dynamo.ts", typeOnly: false },
        ];
        const v = violations(planted, read);
        expect(v).toHaveLength(planted.length);
        // A contract that loads a driver is refused too.
        const fake = (f: string) => (f === "services/x/config.ts" ? 'import { Client } from "pg";\nimport { z } from "zod";' : read(f));
        expect(violations([{ from: "components/spoke/X.ts", to: "services/x/config.ts", typeOnly: false }], fake)).toEqual([
            "services/x/config.ts: imported by the program, loads pg at run time (through services/x/config.ts)",
        ]);
    });

    it("a component's capitalised constant is a helper: what a name is comes from the module that exports it", () => {
        const component = [
            'import { Base } from "./Base";',
            "export const AuthServiceDefaults = { replicas: 2 };",
            "export function AuthServiceEnv() { return {}; }",
            "export class AuthService {}",
            "export interface AuthServiceArgs { replicas: number }",
            "export type AuthServiceMode = 'a' | 'b';",
            "export enum AuthServiceTier { A }",
            "const Hidden = 1;",
            "class Renamed {}",
            "export { Hidden as AuthServiceHidden, Renamed as AuthServiceRenamed, Base };",
            'export { SpokeRoleArgs as AuthRole } from "./Other";',
        ].join("\n");
        const planted: Record<string, string> = {
            "components/spoke/AuthService.ts": component,
            "components/spoke/Base.ts": "export abstract class Base {}",
            "components/spoke/Other.ts": "export const SpokeRoleArgs = {};",
        };
        const fake = (f: string) => planted[f] ?? read(f);
        const edge = (names: string[], typeNames?: string[]): Edge => ({
            from: "components/spoke/Metering.ts",
            to: "components/spoke/AuthService.ts",
            typeOnly: false,
            names,
            typeNames,
        });
        expect(
            violations(
                [edge(["AuthService", "AuthServiceArgs", "AuthServiceMode", "AuthServiceTier", "AuthServiceRenamed", "Base"])],
                fake,
            ),
        ).toEqual([]);
        expect(violations([edge(["AuthService", "AuthServiceDefaults"])], fake)).toEqual([
            "components/spoke/Metering.ts -> components/spoke/AuthService.ts: a component imports another component's class or types only, not AuthServiceDefaults (move it to lib/)",
        ]);
        for (const helper of ["AuthServiceEnv", "AuthServiceHidden", "AuthRole", "NotExported"])
            expect(violations([edge([helper])], fake), helper).toHaveLength(1);
        // Imported with `type`, a constant serves only its type (`typeof`): not a run-time helper.
        expect(violations([edge(["AuthServiceDefaults"], ["AuthServiceDefaults"])], fake)).toEqual([]);
        // Read from source, as written.
        const e = importsOf("components/spoke/Metering.ts", 'import { AuthService, AuthServiceDefaults } from "./AuthService";');
        expect(violations(e, fake)).toHaveLength(1);
    });

    it("refuses a computed module path in product code (it would escape this test), not in tools/ or test/", () => {
        const code = [
            'const t = require("../tools/" + name);',
            "const u = await import(`../tools/${name}`);",
            "import v = require(process.env.X!);",
            'const ok = require("node:fs");',
            "const alsoOk = await import(`node:path`);",
        ].join("\n");
        const product = [
            "index.ts",
            "programs/x.ts",
            "components/spoke/X.ts",
            "lib/x.ts",
            "config/x.ts",
            "upstream/x.ts",
            "services/auth/x.ts",
            "policies/x.ts",
        ];
        for (const f of product) {
            const e = importsOf(f, code);
            expect(e.filter((x) => x.computed).map((x) => x.to)).toEqual([
                'require("../tools/" + name)',
                "import(`../tools/${name}`)",
                "import v = require(process.env.X!);",
            ]);
            expect(violations(e, read), f).toHaveLength(3);
        }
        for (const f of ["tools/x.ts", "test/x.test.ts"]) expect(violations(importsOf(f, code), read), f).toEqual([]);
        // Nor may a service contract the program imports compute one.
        const fake = (f: string) => (f === "services/x/config.ts" ? 'const m = require("./" + "impl");' : read(f));
        expect(violations([{ from: "components/spoke/X.ts", to: "services/x/config.ts", typeOnly: false }], fake)).toEqual([
            'services/x/config.ts: imported by the program, computes a module path (require("./" + "impl") in services/x/config.ts)',
        ]);
    });

    it("refuses the loader reached another way in product code: an aliased require, createRequire, module.require", () => {
        const evasions = [
            'const r = require;\nr("../tools/x");',
            'import { createRequire } from "node:module";\nconst m = createRequire(__filename)("../tools/x");',
            'import * as nodeModule from "node:module";\nconst m = nodeModule.createRequire(__filename)("../tools/x");',
            'const m = module.require("../tools/x");',
            'const m = globalThis["require"]("../tools/x");',
            'const loaders = { require };\nloaders.require("../tools/x");',
            'const m = require.main.require("../tools/x");',
            'const { createRequire: cr } = process.getBuiltinModule("node:module");',
        ];
        for (const code of evasions) {
            const v = violations(importsOf("lib/x.ts", code), read);
            expect(v.length, code).toBeGreaterThan(0);
            for (const m of v)
                expect(m, code).toMatch(/^lib\/x\.ts: .*: a computed module path escapes the layering check; import a literal path$/);
            expect(violations(importsOf("tools/x.ts", code), read), code).toEqual([]);
        }
        expect(violations(importsOf("lib/x.ts", evasions[0]), read)).toEqual([
            "lib/x.ts: const r = require;: a computed module path escapes the layering check; import a literal path",
        ]);
        // Not the loader: a direct call with a literal, Pulumi's config.require, a key named require, LOADER_USES.
        const fine = [
            'const fs = require("node:fs");',
            'const region = new pulumi.Config("aws").require("region");',
            "const o = { require: true };\ninterface I { require: boolean }\nif (o.require) f();",
            "if (require.main === module) main();",
        ].join("\n");
        expect(importsOf("lib/x.ts", fine).filter((e) => e.computed)).toEqual([]);
        // Each reviewed exception is still needed somewhere in product code (the list only shrinks).
        for (const use of Object.keys(LOADER_USES))
            expect(
                files.some((f) => PRODUCT.has(layerOf(f, true)!) && read(f).includes(use)),
                `${use} is no longer used: delete it from LOADER_USES`,
            ).toBe(true);
    });

    it("the policy pack imports exactly policies/, upstream/, PACK_SHARED_LIB and services/shared/, which load no package", () => {
        const pack = (to: string): Edge => ({ from: "policies/gateway/x.ts", to, typeOnly: false });
        expect(
            violations(
                [pack("policies/lib/gateway.ts"), pack("upstream/gateway.ts"), pack("lib/labels.ts"), pack("services/shared/peer.ts")],
                read,
            ),
        ).toEqual([]);
        for (const to of [
            "lib/gateway.ts",
            "services/auth/config.ts",
            "services/shared/testing/silent-proxy.ts",
            "config/versions.ts",
            "components/spoke/AuthService.ts",
        ])
            expect(violations([pack(to)], read), to).toHaveLength(1);
        // A shared module the pack imports may not load zod (allowed for the program's contracts): the pack has none.
        const fake = (f: string) => (f === "services/shared/peer.ts" ? 'import { z } from "zod";' : read(f));
        expect(violations([pack("services/shared/peer.ts")], fake)).toEqual([
            "services/shared/peer.ts: imported by the pack, loads zod at run time (through services/shared/peer.ts)",
        ]);
    });

    it("no module is a re-export shim (a second import path), unless its header names it a public entry point", () => {
        expect(files.filter((f) => isShim(f, read(f)))).toEqual([]);
        expect(isShim("tools/stackfiles.ts", '// Moved to lib/stackfiles.ts.\nexport * from "../lib/stackfiles";')).toBe(true);
        expect(isShim("lib/cidr.ts", 'export * from "../config/cidr";\nexport { x } from "../config/cidr";')).toBe(true);
        expect(isShim("lib/x.ts", '/** The public entry point of x. */\nexport * from "../config/cidr";')).toBe(false);
        expect(isShim("upstream/index.ts", 'export * from "./a";\nexport * from "./b";')).toBe(false);
        expect(isShim("lib/y.ts", 'export * from "../config/cidr";\nexport const y = 1;')).toBe(false);
    });

    it("reads imports the way TypeScript does (multi-line, type-only, re-exports, comments and strings ignored)", () => {
        const e = importsOf(
            "components/spoke/A.ts",
            'import {\n    B,\n    type C,\n} from "./B";\nimport type { D } from "../../lib/d";\nexport { E } from "../../lib/e";\n// import { F } from "../../tools/f";\n/** `import x from "../../tools/g"` */\nconst h = require("ioredis");\nlet t: typeof import("../../lib/t");\nconst s = "import { Q } from \'../../tools/q\'";',
        );
        expect(e.map((x) => [x.to, x.typeOnly, x.names?.join(","), x.typeNames?.join(",")])).toEqual([
            ["components/spoke/B", false, "B,C", "C"],
            ["lib/d", true, "D", ""],
            ["lib/e", false, "E", ""],
            ["ioredis", false, undefined, undefined],
            ["lib/t", true, undefined, undefined],
        ]);
    });

    it("docs/architecture.md states the order this test enforces, once, and exactly what the pack may import", () => {
        for (const [i, l] of ORDER.entries()) expect(ALLOWED[l], l).toEqual(ORDER.slice(i));
        const doc = read("docs/architecture.md");
        const order = ORDER.map((l) => (l === "index" ? "`index.ts`" : `\`${l}/\``)).join(" → ");
        for (const [f, text] of [
            ["docs/architecture.md", doc],
            ["README.md", read("README.md")],
        ])
            expect(text.split(order).length - 1, `${f} states the order ${order}`).toBe(f === "README.md" ? 0 : 1);
        expect(doc).not.toMatch(/uses the ones above it/);
        const pack = doc.split("\n").find((l) => l.startsWith("| guard | `policies/` |"));
        const named = [...(pack ?? "").matchAll(/`((?:policies|upstream|lib|services|config|components|programs|tools)\/[^`]*)`/g)].map(
            (m) => m[1],
        );
        expect(new Set(named)).toEqual(new Set(["policies/", "upstream/", ...PACK_SHARED_LIB, "services/shared/"]));
    });

    it("a service's test harnesses (services/<name>/testing/) never reach its image", () => {
        for (const svc of fs.readdirSync(path.join(ROOT, "services"))) {
            const ignore = path.join(ROOT, "services", svc, "Dockerfile.dockerignore");
            if (!fs.existsSync(path.join(ROOT, "services", svc, "testing")) || !fs.existsSync(ignore)) continue;
            expect(fs.readFileSync(ignore, "utf8").split("\n"), ignore).toContain(`services/${svc}/testing/`);
        }
    });
});
