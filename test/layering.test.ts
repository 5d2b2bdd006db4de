import * as fs from "node:fs";
import { builtinModules } from "node:module";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers";

/**
 * The layering of the TypeScript sources, as a test over their import graph (static `import`/`export ... from`,
 * `import()` and `require()` of relative paths and packages):
 *
 *   index.ts -> programs/ -> components/ -> lib/ -> config/ -> upstream/
 *
 * each layer importing only itself and the layers to its right; a component imports another component only for
 * its class or types (composition), never its helpers or constants (those live in lib/). services/ import only
 * services/; from outside, only a service's contract (`services/<name>/config.ts`) and `services/shared/`, and
 * those modules load no package but zod and Node built-ins at run time (no ioredis, pg, AWS SDK in the Pulumi
 * program). policies/ import only policies/ and upstream/. tools/ and test/ may import anything but each other's
 * way up: nothing outside tools/ and test/ imports them.
 */

type Layer = "index" | "programs" | "components" | "lib" | "config" | "upstream" | "services" | "policies" | "tools" | "test";

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

/** Every import of one file (comments stripped first, so an example in TSDoc is not an import). */
function importsOf(file: string, text: string): Edge[] {
    const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
    const edges: Edge[] = [];
    const add = (spec: string, typeOnly: boolean, names?: string[]) => {
        if (spec.startsWith(".")) edges.push({ from: file, to: resolve(file, spec), typeOnly, names });
        else {
            const pkg = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];
            edges.push({ from: file, to: spec, pkg: pkg.replace(/^node:/, ""), typeOnly, names });
        }
    };
    const stmt = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;]*?)\s+from\s+["']([^"']+)["']/g;
    for (const m of code.matchAll(stmt)) {
        const braces = /^\{([\s\S]*)\}$/.exec(m[3].trim());
        const names = braces?.[1]
            .split(",")
            .map((n) => n.trim())
            .filter(Boolean);
        const allTypes = !!m[2] || (!!names && names.length > 0 && names.every((n) => n.startsWith("type ")));
        add(
            m[4],
            allTypes,
            names?.map((n) => n.replace(/^type\s+/, "").split(/\s+as\s+/)[0]),
        );
    }
    for (const m of code.matchAll(/(?:^|\n)\s*import\s+["']([^"']+)["']/g)) add(m[1], false);
    for (const m of code.matchAll(/(?:\bimport|\brequire)\s*\(\s*["']([^"']+)["']\s*\)/g)) add(m[1], false);
    return edges;
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
    const local = edges.filter((e) => !e.pkg);
    for (const e of local) {
        const from = layerOf(e.from, true);
        const to = layerOf(e.to);
        if (!from || !to || (from === to && from !== "components")) continue;
        const key = `${e.from} -> ${e.to}`;
        if (PENDING[key]) continue;
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
        if (from === "policies" && PACK_SHARED_LIB.has(e.to)) continue;
        if (e.from.startsWith("services/shared/") && SERVICE_SHARED_UPSTREAM.has(e.to)) {
            if (importsOf(e.to, read(e.to)).length > 0)
                out.push(`${key}: ${e.to} must import nothing (the services' images copy it alone)`);
            continue;
        }
        if (from === "components" && to === "components") {
            const helpers = e.typeOnly ? [] : (e.names ?? ["*"]).filter((n) => !/^[A-Z][a-z0-9]/.test(n) || n === "*");
            if (helpers.length > 0)
                out.push(
                    `${key}: a component imports another component's class or types only, not ${helpers.join(", ")} (move it to lib/)`,
                );
            continue;
        }
        if (!ALLOWED[from].includes(to)) out.push(`${key}: ${from}/ may not import ${to}/`);
    }
    // Run-time closure of every services/ module the program imports: zod and Node built-ins only.
    const builtins = new Set(builtinModules.map((m) => m.replace(/^node:/, "")));
    const entry = new Set(
        local.filter((e) => layerOf(e.to) === "services" && !["services", "tools", "test"].includes(layerOf(e.from)!)).map((e) => e.to),
    );
    for (const start of entry) {
        const seen = new Set<string>();
        const stack = [start];
        while (stack.length > 0) {
            const f = stack.pop()!;
            if (seen.has(f)) continue;
            seen.add(f);
            for (const d of importsOf(f, read(f)).filter((x) => !x.typeOnly)) {
                if (d.pkg) {
                    if (!CONTRACT_PACKAGES.has(d.pkg) && !builtins.has(d.pkg))
                        out.push(`${start}: imported by the program, loads ${d.pkg} at run time (through ${f})`);
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

    it("reads imports the way TypeScript does (multi-line, type-only, re-exports, comments ignored)", () => {
        const e = importsOf(
            "components/spoke/A.ts",
            'import {\n    B,\n    type C,\n} from "./B";\nimport type { D } from "../../lib/d";\nexport { E } from "../../lib/e";\n// import { F } from "../../tools/f";\n/** `import x from "../../tools/g"` */\nconst h = require("ioredis");',
        );
        expect(e.map((x) => [x.to, x.typeOnly, x.names?.join(",")])).toEqual([
            ["components/spoke/B", false, "B,C"],
            ["lib/d", true, "D"],
            ["lib/e", false, "E"],
            ["ioredis", false, undefined],
        ]);
    });
    it("a service's test harnesses (services/<name>/testing/) never reach its image", () => {
        for (const svc of fs.readdirSync(path.join(ROOT, "services"))) {
            const ignore = path.join(ROOT, "services", svc, "Dockerfile.dockerignore");
            if (!fs.existsSync(path.join(ROOT, "services", svc, "testing")) || !fs.existsSync(ignore)) continue;
            expect(fs.readFileSync(ignore, "utf8").split("\n"), ignore).toContain(`services/${svc}/testing/`);
        }
    });
});
