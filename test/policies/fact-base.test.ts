/**
 * One fact base: upstream/ is the only copy of upstream facts; the render, npm run upstream-check and the policy pack
 * all read it; the pack loads with policies/node_modules plus the repository's root install (as the workflows run it);
 * no fact, version, label or header name is written twice.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { builtinModules } from "node:module";
import { describe, expect, it } from "vitest";
import { allPolicies } from "../../policies/policies";
import { ALLOWED_RDMA_IMAGES, allowedRdmaImages } from "../../policies/lib/images";
import { RULES_RUN_BY, upstreamRulesPolicy } from "../../policies/upstream";
import { GUARDED_CHART_KEYS, VERIFIED_CHARTS, verifiedCharts } from "../../policies/visibility";
import { charts, gatewayCompatibleSets, images } from "../../upstream";
import { defaultFacts, type Facts, rules } from "../../upstream/check";
import * as labels from "../../lib/labels";
import * as identity from "../../services/shared/identity";
import { DYNAMO_REQUEST_HEADERS } from "../../upstream/dynamo-headers";
import { REGISTRY, versions } from "../../config/versions";
import { ROOT } from "../helpers";
import { endpoint, stack, violations } from "./rdma-fixtures";

const POLICIES = path.join(ROOT, "policies");

/** Every .ts file of the pack (not node_modules). */
function packFiles(dir = POLICIES): string[] {
    return fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
        const p = path.join(dir, d.name);
        if (d.isDirectory()) return d.name === "node_modules" ? [] : packFiles(p);
        return d.name.endsWith(".ts") ? [p] : [];
    });
}

/** Import specifiers of a TypeScript file (static imports and re-exports; `import type` included). */
function importsOf(file: string): string[] {
    const src = fs.readFileSync(file, "utf8");
    return [...src.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]);
}

function resolveTs(from: string, spec: string): string {
    const base = path.resolve(path.dirname(from), spec);
    for (const c of [`${base}.ts`, path.join(base, "index.ts")]) if (fs.existsSync(c)) return c;
    throw new Error(`${from}: cannot resolve ${spec}`);
}

describe("the pack loads with policies/node_modules and the root install, as the workflows run it", () => {
    /**
     * Packages of policies/package.json no pack file imports, each with the reason the pack still needs it.
     * Pulumi's Node.js policy runtime compiles the pack's TypeScript with ts-node (and its typescript).
     */
    const PACK_TOOLS: Record<string, string> = {
        "ts-node": "Pulumi's Node.js runtime runs the pack's index.ts through it",
        typescript: "ts-node's compiler",
        "@pulumi/pulumi": "peer dependency of @pulumi/policy",
    };
    const packageOf = (spec: string) => (spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]);

    /** Every module the pack loads (from policies/index.ts) with the packages it imports. */
    function packGraph(): { files: string[]; imports: { file: string; pkg: string }[] } {
        const seen = new Set<string>();
        const imports: { file: string; pkg: string }[] = [];
        const queue = [path.join(POLICIES, "index.ts")];
        while (queue.length) {
            const f = queue.pop()!;
            if (seen.has(f)) continue;
            seen.add(f);
            for (const spec of importsOf(f)) {
                if (spec.startsWith(".")) queue.push(resolveTs(f, spec));
                else if (!builtinModules.includes(spec.replace(/^node:/, ""))) imports.push({ file: f, pkg: packageOf(spec) });
            }
        }
        return { files: [...seen], imports };
    }

    it("every package resolves from the install the pack gets: its own files' from policies/, the rest from the root", () => {
        const packDeps: Record<string, string> = JSON.parse(fs.readFileSync(path.join(POLICIES, "package.json"), "utf8")).dependencies;
        const rootDeps: Record<string, string> = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).dependencies;
        const { files, imports } = packGraph();
        const problems: string[] = [];
        for (const { file, pkg } of imports) {
            const rel = path.relative(ROOT, file);
            const inPack = file.startsWith(POLICIES + path.sep);
            // Node resolves a package from the importing file's folder upwards: a file under policies/ finds
            // policies/node_modules (npm ci --prefix policies), any other file the root node_modules (npm ci).
            if (inPack && !packDeps[pkg]) problems.push(`${rel} imports ${pkg}, not a dependency in policies/package.json`);
            if (!inPack && !rootDeps[pkg]) problems.push(`${rel} imports ${pkg}, not a dependency in the root package.json`);
            if (!inPack && !/^\d+\.\d+\.\d+$/.test(rootDeps[pkg] ?? "")) problems.push(`${rel} imports ${pkg}, not pinned exactly`);
        }
        expect(problems).toEqual([]);
        // Files outside policies/ load packages: the pack needs the root install (README "The policy pack is a closed world").
        expect(imports.filter((i) => !i.file.startsWith(POLICIES + path.sep)).map((i) => i.pkg)).toContain("@prometheus-io/lezer-promql");
        const outside = files.filter((f) => !f.startsWith(POLICIES + path.sep)).map((f) => path.relative(ROOT, f));
        expect(outside).toEqual(
            expect.arrayContaining(["upstream/index.ts", "upstream/check/index.ts", "lib/labels.ts", "services/shared/identity.ts"]),
        );
        // ts-node compiles what the pack imports with policies/tsconfig.json: its rootDir must contain them.
        const tsconfig = JSON.parse(fs.readFileSync(path.join(POLICIES, "tsconfig.json"), "utf8"));
        for (const f of outside)
            expect(path.relative(path.resolve(POLICIES, tsconfig.compilerOptions.rootDir), path.join(ROOT, f)).startsWith(".."), f).toBe(
                false,
            );
    });

    it("policies/package.json lists only what the pack's own files import, and the tools that run them", () => {
        const packDeps = Object.keys(JSON.parse(fs.readFileSync(path.join(POLICIES, "package.json"), "utf8")).dependencies);
        const used = new Set(
            packGraph()
                .imports.filter((i) => i.file.startsWith(POLICIES + path.sep))
                .map((i) => i.pkg),
        );
        expect(packDeps.filter((d) => !used.has(d) && !PACK_TOOLS[d])).toEqual([]);
        for (const t of Object.keys(PACK_TOOLS)) expect(packDeps, t).toContain(t);
    });

    it("every workflow that runs the pack installs both, and no document claims the pack needs only its own node_modules", () => {
        const workflows = path.join(ROOT, ".github", "workflows");
        const running = fs
            .readdirSync(workflows)
            .map((f) => fs.readFileSync(path.join(workflows, f), "utf8"))
            .filter((w) => /policyPacks:\s*policies|--policy-pack policies/.test(w));
        expect(running.length).toBeGreaterThan(0);
        for (const w of running) {
            expect(w).toMatch(/npm ci --no-audit/);
            expect(w).toMatch(/npm ci --prefix policies/);
        }
        const claim = /only (its own|`?policies\/node_modules`?) ?node_modules|with only `?policies\/node_modules/;
        const docs = ["README.md", "upstream/check/index.ts", "lib/labels.ts", "policies/lib/resources.ts", "policies/lib/gateway.ts"];
        for (const d of docs) expect(claim.test(fs.readFileSync(path.join(ROOT, d), "utf8")), d).toBe(false);
    });

    it("one @pulumi/policy version for the program's tests and the pack's deploys", () => {
        const root = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
        const pack = JSON.parse(fs.readFileSync(path.join(POLICIES, "package.json"), "utf8"));
        const rootLock = JSON.parse(fs.readFileSync(path.join(ROOT, "package-lock.json"), "utf8"));
        const packLock = JSON.parse(fs.readFileSync(path.join(POLICIES, "package-lock.json"), "utf8"));
        const v = root.dependencies["@pulumi/policy"];
        expect(v).toMatch(/^\d+\.\d+\.\d+$/);
        expect(pack.dependencies["@pulumi/policy"]).toBe(v);
        expect(rootLock.packages["node_modules/@pulumi/policy"].version).toBe(v);
        expect(packLock.packages["node_modules/@pulumi/policy"].version).toBe(v);
        expect(pack.dependencies["@pulumi/pulumi"]).toBe(root.dependencies["@pulumi/pulumi"]);
    });
});

describe("no hand copies of facts in the pack", () => {
    /** Pack sources without comments (comments cite upstream versions and may name a header in backticks). */
    const sources = packFiles().map((f) => ({
        f: path.relative(ROOT, f),
        src: fs
            .readFileSync(f, "utf8")
            .replace(/\/\*[\s\S]*?\*\//g, "")
            .replace(/^\s*\/\/.*$/gm, ""),
    }));
    /** Quoted literals of a source file (`"x"`, `'x'`, `` `x` `` without substitutions). */
    const literals = (src: string) =>
        new Set([...src.matchAll(/"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'|`([^`$\\]*)`/g)].map((m) => m[1] ?? m[2] ?? m[3]));
    const copies = (values: string[]) =>
        sources.flatMap(({ f, src }) => {
            const l = literals(src);
            return values.filter((v) => l.has(v)).map((v) => `${f}: "${v}"`);
        });

    it("no image repository or tag, chart version, label, annotation or header name written as a literal", () => {
        const facts = [
            ...images.flatMap((i) => [i.repository, i.repository.replace(/^docker\.io\//, ""), i.tag]),
            ...charts.map((c) => c.version),
            ...Object.values(versions).flatMap((v: any) => [v.version, v.efaVersion, v.image].filter((x) => typeof x === "string")),
            ...(Object.values(labels) as unknown[]).filter((v): v is string => typeof v === "string" && v.includes("/")),
            identity.IDENTITY_HEADER_PREFIX,
            ...Object.values(identity.IDENTITY_HEADERS),
            identity.AI_GATEWAY_MODEL_HEADER,
            identity.AI_GATEWAY_METADATA_NAMESPACE,
        ];
        expect(copies([...new Set(facts)])).toEqual([]);
    });
    it("no table of compatible gateway sets, allowed images, chart versions or prefill/decode must-match settings", () => {
        const tables = sources
            .filter(({ src }) => /aiGateway:\s*"\d|tags:\s*\[\s*"|versions:\s*\[\s*"|MUST_MATCH|mustMatch/.test(src))
            .map(({ f }) => f);
        expect(tables).toEqual([]);
    });
    /** A string-array literal naming a flag (`["--a", "--b"]`, any element, any quotes, across lines). */
    const FLAG_ARRAY = /\[\s*(?:(["'`])[^"'`\n]*\1\s*,\s*)*(["'`])--[\w.-]+\2\s*(?:,\s*(["'`])[^"'`\n]*\3\s*)*,?\s*\]/;
    it("no list of flags: which flags need what lives in upstream/ with its source", () => {
        expect(sources.filter(({ src }) => FLAG_ARRAY.test(src)).map(({ f }) => f)).toEqual([]);
        // Planted: the lists the pack kept before (policies/dynamo.ts), one line or several, and what is not a list of flags.
        expect(FLAG_ARRAY.test('for (const removed of ["--is-prefill-worker", "--is-decode-worker", "--connector"]) {')).toBe(true);
        expect(FLAG_ARRAY.test('for (const f of [\n    "--router-conditional-disagg",\n    "--serve-indexer",\n]) {')).toBe(true);
        expect(FLAG_ARRAY.test('const roles = ["prefill", "--x"];')).toBe(true);
        expect(FLAG_ARRAY.test('const roles = ["prefill", "decode", "worker"];')).toBe(false);
        expect(FLAG_ARRAY.test('words[i + 1].startsWith("--")')).toBe(false);
    });
    it("the derived tables are the facts", () => {
        expect(ALLOWED_RDMA_IMAGES.length).toBe(images.filter((i) => i.provides.includes("ucx")).length);
        for (const [name, v] of Object.entries(VERIFIED_CHARTS))
            expect(v.versions, name).toEqual(charts.filter((c) => c.chart === name).map((c) => c.version));
        // Every key the pack reads of a guarded chart is one the chart reads at each verified version.
        for (const [name, keys] of Object.entries(GUARDED_CHART_KEYS))
            for (const c of charts.filter((x) => x.chart === name)) {
                // network-operator deployCR: read by charts before 26.1 only; the pack refuses it set (and upstream-rules refuses it as unread).
                for (const k of keys.filter((x) => !(name === "network-operator" && x === "deployCR")))
                    expect(
                        [...c.valuesKeys, ...(c.openSubtrees ?? [])].some((x) => x === k || x.startsWith(`${k}.`) || k.startsWith(`${x}.`)),
                        `${name}@${c.version} ${k}`,
                    ).toBe(true);
            }
        const ai = versions.aiGateway.version.replace(/^v/, "").split(".").slice(0, 2).join(".");
        const eg = versions.envoyGateway.version.replace(/^v/, "").split(".").slice(0, 2).join(".");
        expect(gatewayCompatibleSets.some((s) => s.aiGateway === ai && s.envoyGateway === eg)).toBe(true);
    });
});

describe("no hand copies of facts anywhere in the product's code", () => {
    /** The whole product: entry point, config, program, upstream facts and their checks, tools, the pack, the services. */
    const SCANNED = ["index.ts", "config", "lib", "components", "programs", "upstream", "tools", "policies", "services"];
    /** Each fact's one definition: the only files allowed to write it out. */
    const DEFINING: Record<string, (file: string) => boolean> = {
        // upstream/ imports nothing outside itself: the keys its rules read are defined there, the rest in lib/labels.ts.
        label: (f) => f === "lib/labels.ts" || f === "upstream/labels.ts",
        identityHeader: (f) => f === "services/shared/identity.ts",
        dynamoHeader: (f) => f === "upstream/dynamo-headers.ts",
        // The pins, and the upstream facts keyed by the version they were read at (charts, images, compatibility);
        // never the rules that apply them (upstream/check).
        version: (f) => f === "config/versions.ts" || (f.startsWith("upstream/") && !f.startsWith("upstream/check/")),
    };
    /**
     * Reviewed exceptions, `file: what` -> why. Keep empty unless a copy is unavoidable; an entry that no longer matches
     * fails the test, so the list only shrinks.
     */
    const ALLOWED: Record<string, string> = {};

    /** Source files of a folder (or one file): code, not tests or test harnesses (those pin values deliberately, with their source). */
    const sourceFiles = (dir: string): string[] =>
        fs.statSync(path.join(ROOT, dir)).isFile()
            ? [dir]
            : fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
                  const p = path.posix.join(dir, e.name);
                  if (e.isDirectory()) return ["node_modules", "testing", "test", "fixtures"].includes(e.name) ? [] : sourceFiles(p);
                  return /\.(ts|mts|js|mjs)$/.test(e.name) && !/\.(test|d)\.ts$/.test(e.name) ? [p] : [];
              });
    /** Code without comments (comments cite upstream versions and name headers and labels in prose); lines keep their numbers. */
    const code = (text: string) =>
        text.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, "")).replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
    const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

    /** Every pinned version of config/versions.ts (chart versions, image tags, release-set tags). */
    const pins = new Set<string>();
    /** Every image repository of config/versions.ts and upstream/images.ts (`registry/namespace/name`). */
    const repositories = new Set<string>(images.map((i) => i.repository));
    const walk = (o: object) => {
        for (const v of Object.values(o))
            if (v && typeof v === "object") walk(v);
            else if (typeof v === "string" && /^(network-operator-)?v?\d+\.\d+\.\d+/.test(v) && !ours(o)) pins.add(v);
        const e = o as { repository?: unknown; image?: unknown };
        if (typeof e.image === "string" && !ours(o))
            repositories.add(typeof e.repository === "string" ? `${e.repository}/${e.image}` : e.image);
    };
    /** An image this repository builds (versions.authService, ...): its version is ours, not an upstream pin. */
    const ours = (o: object) => String((o as { image?: unknown }).image).startsWith(`${REGISTRY}/`);
    walk(versions);
    const header = (h: string) => new RegExp(`(?<![\\w-])${esc(h)}(?![\\w-])`, "i");
    /** What may not be written out, and where it may. A version cited as a source (`owner/repo@v1.2.3:path`) is a citation, not a pin. */
    const facts: { what: string; re: RegExp; definedIn?: (file: string) => boolean }[] = [
        ...[...pins].map((v) => ({
            what: `pinned version ${v}`,
            re: new RegExp(`(?<![\\w.@/])v?${esc(v.replace(/^v/, ""))}(?![\\w.])`),
            definedIn: DEFINING.version,
        })),
        ...[...repositories].map((r) => ({
            what: `image repository ${r}`,
            // With or without the docker.io/ a runtime adds; a longer repository under it is another image.
            re: new RegExp(`(?<![\\w./-])${esc(r.replace(/^docker\.io\//, ""))}(?![\\w./-])`),
            definedIn: DEFINING.version,
        })),
        { what: "label or annotation name inference-platform.io/...", re: /inference-platform\.io\//, definedIn: DEFINING.label },
        { what: "label prefix", re: /["'`]inference-platform\.io["'`]/, definedIn: DEFINING.label },
        { what: "label key rebuilt from LABEL_PREFIX", re: /\$\{\s*LABEL_PREFIX\s*\}\//, definedIn: DEFINING.label },
        ...Object.values(DYNAMO_REQUEST_HEADERS).map((h) => ({
            what: `Dynamo header ${h.header}`,
            re: header(h.header),
            definedIn: DEFINING.dynamoHeader,
        })),
        ...[
            ...Object.values(identity.IDENTITY_HEADERS),
            identity.IDENTITY_HEADER_PREFIX,
            identity.DYNAMO_HEADER_PREFIX,
            identity.AI_GATEWAY_MODEL_HEADER,
        ].map((h) => ({ what: `header ${h}`, re: header(h), definedIn: DEFINING.identityHeader })),
    ];
    /** `file:line what` for every copy in one file's text. */
    const copiesIn = (file: string, text: string) =>
        code(text)
            .split("\n")
            .flatMap((line, i) => facts.filter((f) => !f.definedIn?.(file) && f.re.test(line)).map((f) => `${file}:${i + 1} ${f.what}`));

    it("no pinned version, label or annotation name, or header name is written outside its one definition", () => {
        const files = SCANNED.flatMap(sourceFiles);
        expect(files.length).toBeGreaterThan(200);
        expect(pins.size).toBeGreaterThan(10);
        const found = files.flatMap((f) => copiesIn(f, fs.readFileSync(path.join(ROOT, f), "utf8")));
        const allowed = (c: string) =>
            Object.keys(ALLOWED).some((k) => c.startsWith(`${k.split(": ")[0]}:`) && c.endsWith(k.split(": ")[1]));
        expect(found.filter((c) => !allowed(c))).toEqual([]);
        for (const k of Object.keys(ALLOWED))
            expect(
                found.some((c) => allowed(c) && c.includes(k.split(": ")[0])),
                k,
            ).toBe(true);
    });

    it("finds the copies it exists for (planted)", () => {
        const planted = [
            'const l = { key: "inference-platform.io/endpoint", values };',
            `const msg = "pin ${versions.rdmaSharedDevicePlugin.version}";`,
            `message: \`Dynamo ${versions.dynamoPlatform.version} drops it\`,`,
            `const image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:${versions.dynamoRuntime.vllm.efaVersion}";`,
            `fix: "Agent Router ${versions.aiGateway.version} with Envoy Gateway ${versions.envoyGateway.version}",`,
            `const tag = "${versions.multus.version}";`,
            'headers: { "x-dynamo-request-priority": "1" },',
            'remove: ["x-ai-eg-model"],',
            "// a comment may cite inference-platform.io/pool, v1.5.3 and x-tenant-id",
            'source: "ai-dynamo/dynamo@v1.5.0:docs/x.md",',
        ].join("\n");
        // Every planted line but the comment and the citation, the line with two pins twice.
        const lines = copiesIn("lib/planted.ts", planted).map((c) => Number(c.split(" ")[0].split(":")[1]));
        expect([...new Set(lines)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
        expect(lines.filter((l) => l === 5)).toHaveLength(2);
        // The defining module writes its own facts.
        expect(copiesIn("services/shared/identity.ts", 'model: "x-ai-eg-model",')).toEqual([]);
    });

    it("scans the entry point, config/ and all of upstream/, and finds rebuilt keys, any-case headers and image repositories (planted)", () => {
        const files = SCANNED.flatMap(sourceFiles);
        for (const f of ["index.ts", "config/endpoint.ts", "config/stack.ts", "upstream/failover.ts", "upstream/activation.ts"])
            expect(files, f).toContain(f);
        const label = 'const key = "inference-platform.io/endpoint";';
        for (const f of ["config/endpoint.ts", "upstream/failover.ts", "index.ts"]) expect(copiesIn(f, label), f).toHaveLength(1);
        expect(copiesIn("components/spoke/Planted.ts", "const pool = `${LABEL_PREFIX}/pool`;")).toEqual([
            "components/spoke/Planted.ts:1 label key rebuilt from LABEL_PREFIX",
        ]);
        expect(copiesIn("config/stack.ts", `const v = "${versions.certManager.version}";`)).toEqual([
            `config/stack.ts:1 pinned version ${versions.certManager.version}`,
        ]);
        expect(copiesIn("lib/planted.ts", 'headers: { "X-Tenant-Id": salt },')).toEqual([
            `lib/planted.ts:1 Dynamo header ${DYNAMO_REQUEST_HEADERS.cacheSalt.header}`,
        ]);
        expect(copiesIn("lib/planted.ts", 'const h = "X-Platform-Tenant";')).toHaveLength(1);
        const repo = versions.dynamoPlanner.image;
        expect(copiesIn("lib/planted.ts", `const image = "${repo}:" + tag;`)).toEqual([`lib/planted.ts:1 image repository ${repo}`]);
        expect(copiesIn("lib/planted.ts", `const image = "${versions.valkey.image.replace(/^docker\.io\//, "")}";`)).toHaveLength(1);
        // Block comments keep line numbers; the defining modules and the facts keyed by version write their own.
        expect(copiesIn("lib/planted.ts", `/*\n * ${repo}\n */\nconst x = "${repo}";`)).toEqual([
            `lib/planted.ts:4 image repository ${repo}`,
        ]);
        expect(copiesIn("upstream/labels.ts", "export const POOL = `${LABEL_PREFIX}/pool`;")).toEqual([]);
        expect(copiesIn("upstream/charts/planted.ts", `version: "${versions.certManager.version}",`)).toEqual([]);
        expect(copiesIn("upstream/check/planted.ts", `version: "${versions.certManager.version}",`)).toHaveLength(1);
    });
});

describe("config/versions.ts writes every version once", () => {
    const FILE = path.join(ROOT, "config", "versions.ts");
    /**
     * Reviewed coincidences, version -> why: two independent pins that happen to be equal (bumping one never bumps
     * the other). Keep empty unless so; an entry that no longer occurs twice fails the test.
     */
    const COINCIDENT: Record<string, string> = {
        "0.1.0": "authService and meteringService: two images of ours, each bumped with its own service's changes",
    };
    /** Version-shaped string literals of the file's code (comments cite versions in prose), with their counts. */
    const versionLiterals = (text: string) => {
        const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
        const counts = new Map<string, number>();
        for (const m of code.matchAll(/"([^"\n]*)"|`([^`\n]*)`/g)) {
            const lit = m[1] ?? m[2];
            // A version: a (v-prefixed) dotted number, or a release-set tag; a template's literal part counts too.
            for (const v of lit.match(/(?<![\w.])v?\d+\.\d+\.\d+[\w.-]*/g) ?? []) counts.set(v, (counts.get(v) ?? 0) + 1);
        }
        return counts;
    };
    const twice = (text: string) => [...versionLiterals(text)].filter(([v, n]) => n > 1 && !COINCIDENT[v]).map(([v, n]) => `${v} x${n}`);

    it("a release several pins share is one constant, never the same version string twice", () => {
        const text = fs.readFileSync(FILE, "utf8");
        expect(twice(text)).toEqual([]);
        const counts = versionLiterals(text);
        for (const v of Object.keys(COINCIDENT)) expect(counts.get(v), v).toBeGreaterThan(1);
        expect(counts.size).toBeGreaterThan(8);
    });
    it("finds a version written twice (planted)", () => {
        const text = fs.readFileSync(FILE, "utf8");
        const planted = `${text}\nconst again = { a: { version: "${versions.gatewayCrds.version}" }, b: "${versions.gatewayCrds.version}" };\n`;
        expect(twice(planted)).toEqual([`${versions.gatewayCrds.version} x3`]);
        // A comment citing the version is prose, not a pin.
        expect(twice(`${text}\n// cites ${versions.aiGateway.version} and ${versions.aiGateway.version}\n`)).toEqual([]);
    });
});

describe("the pack enforces exactly what upstream-check enforces", () => {
    it("every rule of upstream/check runs in the pack (inside upstream-rules or under the policy named for it)", () => {
        const names = allPolicies.map((p) => p.name);
        expect(names).toContain("upstream-rules");
        for (const r of rules) if (RULES_RUN_BY.has(r)) expect(names).toContain(RULES_RUN_BY.get(r));
    });
    it("a compliant graph passes; a planted change to a fact changes the pack's verdict", async () => {
        // Equal TP: one Mooncake store pool keys blocks by tp_rank, not TP size (upstream/check/endpoint-support.ts).
        const rs = stack([
            endpoint({
                engine: "sglang",
                topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } },
            }),
        ]);
        expect(await violations([upstreamRulesPolicy()], rs)).toEqual([]);
        // sglang 0.5.18 no longer reads --page-size: the pack now refuses the flag.
        const sglang = defaultFacts.components.sglang;
        const { "--page-size": _gone, ...flags } = sglang.flags;
        const planted: Facts = { ...defaultFacts, components: { ...defaultFacts.components, sglang: { ...sglang, flags } } };
        expect((await violations([upstreamRulesPolicy(planted)], rs)).join("\n")).toMatch(
            /field --page-size: flag --page-size is not known to dynamo.sglang/,
        );
        // A runtime image tag without facts: the pack refuses the image.
        const noTag: Facts = {
            ...defaultFacts,
            images: defaultFacts.images.filter(
                (i) => i.tag !== versions.dynamoRuntime.sglang.version || !i.repository.endsWith("sglang-runtime"),
            ),
        };
        expect((await violations([upstreamRulesPolicy(noTag)], rs)).join("\n")).toMatch(
            /no facts for nvcr.io\/nvidia\/ai-dynamo\/sglang-runtime at tag 1\.5\.0/,
        );
        // Derived allow-lists follow the facts too.
        const efa = versions.dynamoRuntime.vllm.efaVersion;
        expect(allowedRdmaImages(images.filter((i) => i.tag !== efa)).some((a) => a.tags.includes(efa))).toBe(false);
        expect(verifiedCharts(charts.filter((c) => c.chart !== "gpu-operator"))["gpu-operator"].versions).toEqual([]);
    });
});
