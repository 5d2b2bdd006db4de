import { execFile } from "node:child_process";
import * as esbuild from "esbuild";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as ts from "typescript";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { REGISTRY, versions } from "../config/versions";
import { affectedImages, dockerignorePatterns, type ImageBuild, imageMatrix, inContext, registryHost } from "../tools/images";
import { inputs, runHubAndSpoke, ROOT, STACKS, testTempDir } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

const run = promisify(execFile);
const WORKFLOW = path.join(ROOT, ".github", "workflows", "images.yml");
const matrix = imageMatrix();
const nameOf = (image: string) => matrix.find((b) => b.image === image)!.name;

/** Every string in the versions table that names a repository under REGISTRY, and the entry holding it. */
function oursInVersions(): { image: string; entry: Record<string, unknown> }[] {
    const found: { image: string; entry: Record<string, unknown> }[] = [];
    const walk = (node: unknown) => {
        if (!node || typeof node !== "object") return;
        for (const v of Object.values(node)) {
            if (typeof v === "string" && v.startsWith(`${REGISTRY}/`)) found.push({ image: v, entry: node as Record<string, unknown> });
            else walk(v);
        }
    };
    walk(versions);
    return found;
}

// ---------------------------------------------------------------------------------------------------------------
// A small Dockerfile reader: enough of the syntax to follow what the build reads from the context.

interface Instruction {
    op: string;
    rest: string;
}
interface Stage {
    name?: string;
    from: string;
    instructions: Instruction[];
}

function parseDockerfile(text: string): Stage[] {
    const logical: string[] = [];
    let cur = "";
    for (const raw of text.split("\n")) {
        const t = raw.trim();
        if (t.startsWith("#") || t === "") continue; // comments and blank lines, also inside a continued instruction
        if (t.endsWith("\\")) {
            cur += `${t.slice(0, -1)} `;
            continue;
        }
        logical.push(cur + t);
        cur = "";
    }
    if (cur) logical.push(cur);
    const globalArgs: Record<string, string> = {};
    const stages: Stage[] = [];
    for (const line of logical) {
        const m = /^(\w+)\s+([\s\S]*)$/.exec(line);
        if (!m) throw new Error(`cannot parse Dockerfile line: ${line}`);
        const op = m[1].toUpperCase();
        const rest = m[2].trim();
        if (op === "ARG" && stages.length === 0) {
            const [k, v] = rest.split("=", 2);
            if (v !== undefined) globalArgs[k] = v;
            continue;
        }
        if (op === "FROM") {
            const words = rest.split(/\s+/).filter((w) => !w.startsWith("--"));
            const from = words[0].replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => globalArgs[a ?? b] ?? `$${a ?? b}`);
            stages.push({ from, name: /^as$/i.test(words[1] ?? "") ? words[2] : undefined, instructions: [] });
            continue;
        }
        const stage = stages[stages.length - 1];
        if (!stage) throw new Error(`${op} before FROM`);
        stage.instructions.push({ op, rest });
    }
    return stages;
}

/** WORKDIR in effect at instruction i of a stage. */
function workdirAt(stage: Stage, i: number): string {
    let wd = "/";
    for (let j = 0; j <= i; j++) if (stage.instructions[j].op === "WORKDIR") wd = path.posix.resolve(wd, stage.instructions[j].rest);
    return wd;
}

interface Copy {
    from?: string;
    sources: string[];
    dest: string;
}

function parseCopy(stage: Stage, i: number): Copy {
    const rest = stage.instructions[i].rest;
    let words = rest.startsWith("[") ? (JSON.parse(rest) as string[]) : rest.split(/\s+/);
    const from = words.find((w) => w.startsWith("--from="))?.slice("--from=".length);
    words = words.filter((w) => !w.startsWith("--"));
    return {
        from,
        sources: words.slice(0, -1),
        dest: path.posix.resolve(workdirAt(stage, i), words[words.length - 1]) + (words[words.length - 1].endsWith("/") ? "/" : ""),
    };
}

/** Repository path of a path inside a stage, following that stage's COPY instructions from the build context. */
function repoPathOf(stage: Stage, inStage: string): string | undefined {
    let found: string | undefined;
    stage.instructions.forEach((ins, i) => {
        if (ins.op !== "COPY") return;
        const c = parseCopy(stage, i);
        if (c.from) return;
        for (const src of c.sources) {
            const isDir = fs.statSync(path.join(ROOT, src)).isDirectory();
            const target = c.dest.endsWith("/") && !isDir ? path.posix.join(c.dest, path.posix.basename(src)) : c.dest.replace(/\/$/, "");
            const rel = path.posix.relative(target, inStage);
            if (rel === "" || (isDir && !rel.startsWith(".."))) found = path.posix.join(src.replace(/\/$/, ""), rel);
        }
    });
    return found;
}

/** Repo files under a repo directory (node_modules skipped). */
function filesUnder(dir: string): string[] {
    return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
        if (e.name === "node_modules") return [];
        const p = path.posix.join(dir, e.name);
        return e.isDirectory() ? filesUnder(p) : [p];
    });
}

/**
 * The source files the final stage's program is built from: the final ENTRYPOINT/CMD script, traced through
 * `COPY --from=<stage>` to either a RUN that writes it by name (a bundler's outfile, whose `.ts` entry points the
 * RUN names) or the outDir of a `tsc -p <tsconfig>` RUN (its `.ts` source under the tsconfig's rootDir).
 */
function entryFiles(stages: Stage[]): { entries: string[]; script: string } {
    const final = stages[stages.length - 1];
    const cmdAt = final.instructions.map((x, i) => [x, i] as const).filter(([x]) => x.op === "ENTRYPOINT" || x.op === "CMD");
    const scriptArg = cmdAt.flatMap(([x]) => JSON.parse(x.rest) as string[]).find((a) => a.endsWith(".js"));
    if (!scriptArg) throw new Error("the final stage's ENTRYPOINT/CMD names no .js script");
    const script = path.posix.resolve(workdirAt(final, cmdAt[cmdAt.length - 1][1]), scriptArg);
    for (let i = 0; i < final.instructions.length; i++) {
        if (final.instructions[i].op !== "COPY") continue;
        const c = parseCopy(final, i);
        const dest = c.dest.replace(/\/$/, "");
        if (!c.from || !(script === dest || script.startsWith(`${dest}/`))) continue;
        const build = stages.find((s) => s.name === c.from)!;
        const produced = path.posix.resolve("/", c.sources[0]) + script.slice(dest.length);
        const runs = build.instructions.map((x, j) => [x, j] as const).filter(([x]) => x.op === "RUN");
        const writer = runs.find(([x]) => x.rest.includes(produced));
        if (writer) return { script, entries: [...writer[0].rest.matchAll(/services\/[\w./-]+\.ts\b/g)].map((m) => m[0]) };
        for (const [x, j] of runs) {
            const p = /\btsc\s+-p\s+(\S+)/.exec(x.rest)?.[1];
            if (!p) continue;
            const cfgRepo = repoPathOf(build, path.posix.resolve(workdirAt(build, j), p));
            if (!cfgRepo) throw new Error(`tsc -p ${p}: the tsconfig is not copied into stage ${build.name}`);
            const cfgFile = path.join(ROOT, cfgRepo);
            const read = ts.readConfigFile(cfgFile, ts.sys.readFile);
            const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, path.dirname(cfgFile));
            const outDirRepo = path.relative(ROOT, parsed.options.outDir!).split(path.sep).join("/");
            const outDirStage = path.posix.resolve(workdirAt(build, j), outDirRepo);
            if (!produced.startsWith(`${outDirStage}/`)) continue;
            const rel = produced.slice(outDirStage.length + 1).replace(/\.js$/, ".ts");
            const source = path.relative(ROOT, path.join(parsed.options.rootDir!, rel)).split(path.sep).join("/");
            const compiled = parsed.fileNames.map((f) => path.relative(ROOT, f).split(path.sep).join("/"));
            if (!compiled.includes(source)) throw new Error(`${source} (source of ${script}) is not compiled by ${cfgRepo}`);
            return { script, entries: [source] };
        }
    }
    throw new Error(`cannot trace ${script} to a build step`);
}

describe("npm run images: the images of ours, from config/versions.ts", () => {
    it("the matrix is exactly the images under REGISTRY in versions.ts, each with the tag versions.ts pins", () => {
        const ours = oursInVersions();
        expect(ours.map((o) => o.image)).toContain(versions.authService.image);
        expect(ours.map((o) => o.image)).toContain(versions.meteringService.image);
        expect(matrix.map((b) => b.image).sort()).toEqual(ours.map((o) => o.image).sort());
        for (const b of matrix) {
            const entry = ours.find((o) => o.image === b.image)!.entry;
            expect(b).toEqual({
                name: b.image.slice(b.image.lastIndexOf("/") + 1),
                dockerfile: entry.dockerfile,
                image: entry.image,
                tag: entry.version,
            });
        }
        expect(new Set(matrix.map((b) => b.name)).size).toBe(matrix.length);
    });

    it("pushes exactly the image:tag references the Pulumi program deploys (hub and every spoke)", async () => {
        const spokes = fs
            .readdirSync(STACKS)
            .map((f) => /^Pulumi\.(.+)\.ya?ml$/.exec(f)?.[1])
            .filter((n): n is string => !!n)
            .filter((n) => YAML.parse(fs.readFileSync(path.join(STACKS, `Pulumi.${n}.yaml`), "utf8")).config["platform:role"] !== "hub");
        expect(spokes.length).toBeGreaterThan(0);
        const deployed = new Set<string>();
        const escaped = REGISTRY.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        for (const s of spokes) {
            const { hub, spoke } = await runHubAndSpoke(s);
            for (const r of [...hub.resources, ...spoke.resources]) {
                for (const m of JSON.stringify(inputs(r)).matchAll(new RegExp(`${escaped}/[^"\\s]+`, "g"))) deployed.add(m[0]);
            }
        }
        expect([...deployed].sort()).toEqual(matrix.map((b) => `${b.image}:${b.tag}`).sort());
    });

    it("refuses an image of ours without a Dockerfile, a Dockerfile on someone else's image, and a bad tag", () => {
        const auth = "services/auth/Dockerfile";
        expect(() => imageMatrix({ a: { image: "registry.example.com/team/svc", version: "1.0.0" } }, "registry.example.com/team")).toThrow(
            /versions\.a: .* must name its Dockerfile/,
        );
        expect(() =>
            imageMatrix({ a: { image: "docker.io/library/redis", version: "7", dockerfile: auth } }, "registry.example.com/team"),
        ).toThrow(/names a dockerfile but its image docker.io\/library\/redis is not under/);
        expect(() =>
            imageMatrix(
                { a: { image: "registry.example.com/team/svc", version: "1.0.0", dockerfile: "services/nope/Dockerfile" } },
                "registry.example.com/team",
            ),
        ).toThrow(/does not exist/);
        expect(() =>
            imageMatrix(
                { a: { image: "registry.example.com/team/svc", version: "1.0 beta", dockerfile: auth } },
                "registry.example.com/team",
            ),
        ).toThrow(/not a valid image tag/);
        expect(() =>
            imageMatrix(
                {
                    a: { image: "r.example.com/x/svc", version: "1", dockerfile: auth },
                    b: { image: "r.example.com/y/svc", version: "1", dockerfile: auth },
                },
                "r.example.com",
            ),
        ).toThrow(/share the name svc/);
    });

    it("follows the registry prefix: another REGISTRY, nested entries and repository + image entries", () => {
        const table = {
            upstream: { image: "ghcr.io/mellanox/plugin", version: "v1" },
            nested: {
                svc: {
                    repository: "registry.example.com/team",
                    image: "svc",
                    version: "2.0.0",
                    dockerfile: "services/metering/Dockerfile",
                },
            },
            other: { image: "registry.example.com/team/auth", version: "1.0.0", dockerfile: "services/auth/Dockerfile" },
        };
        expect(imageMatrix(table, "registry.example.com/team/")).toEqual([
            { name: "auth", dockerfile: "services/auth/Dockerfile", image: "registry.example.com/team/auth", tag: "1.0.0" },
            { name: "svc", dockerfile: "services/metering/Dockerfile", image: "registry.example.com/team/svc", tag: "2.0.0" },
        ]);
        expect(imageMatrix({ upstream: table.upstream }, "registry.example.com/team")).toEqual([]);
        expect(() => imageMatrix(table, "registry.example.com/other")).toThrow(/versions\.nested\.svc: names a dockerfile/);
        expect(registryHost(REGISTRY)).toBe(REGISTRY.split("/")[0]);
        expect(registryHost("localhost:5000/team")).toBe("localhost:5000");
        expect(() => registryHost("inference-platform")).toThrow(/must start with a registry host/);
    });

    it("the CLI prints the matrix and writes images, registry and changed for GitHub Actions", async () => {
        const cli = async (args: string[]) => {
            const out = path.join(testTempDir("gh-"), "output");
            const r = await run(process.execPath, ["-r", ESBUILD_LOADER, "tools/images.ts", ...args], {
                cwd: ROOT,
                env: { ...process.env, GITHUB_OUTPUT: out },
            });
            const lines = Object.fromEntries(
                fs
                    .readFileSync(out, "utf8")
                    .trim()
                    .split("\n")
                    .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
            );
            return {
                stdout: JSON.parse(r.stdout),
                stderr: r.stderr,
                images: JSON.parse(lines.images),
                registry: lines.registry,
                changed: JSON.parse(lines.changed),
            };
        };
        const all = matrix.map((b) => b.name);
        const head = await cli(["--base", "HEAD"]);
        expect(head.stdout).toEqual(matrix);
        expect(head.images).toEqual(matrix);
        expect(head.registry).toBe(registryHost(REGISTRY));
        expect(head.changed).toEqual([]);
        expect((await cli([])).changed).toEqual([]);
        expect((await cli(["--base", "0".repeat(40)])).changed).toEqual(all);
        const gone = await cli(["--base", "no-such-ref-for-images-test"]);
        expect(gone.changed).toEqual(all);
        expect(gone.stderr).toMatch(/cannot diff against no-such-ref-for-images-test.*every image as changed/);
    });
});

describe("the build context (<Dockerfile>.dockerignore, BuildKit)", () => {
    const auth = dockerignorePatterns(versions.authService.dockerfile);

    it("follows the .dockerignore rules: last match wins, ! re-includes, a matched directory covers its files", () => {
        expect(auth[0]).toBe("*");
        for (const f of [
            "package.json",
            "package-lock.json",
            "tsconfig.json",
            "services/auth/main.ts",
            "services/auth/tsconfig.build.json",
            "services/shared/bundle.ts",
        ])
            expect(inContext(f, auth), f).toBe(true);
        for (const f of [
            "README.md",
            "services/auth/README.md",
            "services/auth/policy.test.ts",
            "services/auth/test/client.ts",
            "services/auth/bench.ts",
            "services/ledger/ledger.ts",
            "stacks/Pulumi.hub-prod.yaml",
            "node_modules/zod/package.json",
        ])
            expect(inContext(f, auth), f).toBe(false);
        expect(inContext("a/b/c.txt", [])).toBe(true);
        expect(inContext("a/b/c.txt", ["a"])).toBe(false);
        expect(inContext("a/b/c.txt", ["a", "!a/b"])).toBe(true);
        expect(inContext("a/b/c.md", ["**/*.md"])).toBe(false);
        expect(inContext("x/a?c", ["x/a?c"])).toBe(false);
        expect(inContext("x/abc", ["/x/a?c/"])).toBe(false);
        expect(inContext("x/a/b.ts", ["x/*.ts"])).toBe(true);
    });

    it("a change modifies the images whose Dockerfile, ignore file or context it touches", () => {
        const a = nameOf(versions.authService.image);
        const m = nameOf(versions.meteringService.image);
        expect(affectedImages(["services/auth/server.ts"], matrix)).toEqual([a]);
        expect(affectedImages(["services/auth/Dockerfile"], matrix)).toEqual([a]);
        expect(affectedImages(["services/metering/Dockerfile.dockerignore"], matrix)).toEqual([m]);
        expect(affectedImages(["services/shared/identity.ts"], matrix).sort()).toEqual([a, m].sort());
        expect(affectedImages(["package-lock.json"], matrix).sort()).toEqual([a, m].sort());
        expect(
            affectedImages(
                [
                    "services/auth/service.test.ts",
                    "services/auth/README.md",
                    "README.md",
                    "config/versions.ts",
                    "stacks/Pulumi.hub-prod.yaml",
                    "services/ledger/ledger.ts",
                ],
                matrix,
            ),
        ).toEqual([]);
    });
});

describe.each(matrix)("Dockerfile of $name", (b: ImageBuild) => {
    const text = fs.readFileSync(path.join(ROOT, b.dockerfile), "utf8");
    const stages = parseDockerfile(text);
    const patterns = dockerignorePatterns(b.dockerfile);

    it("has its own .dockerignore and a build from the repository root", () => {
        expect(fs.existsSync(path.join(ROOT, `${b.dockerfile}.dockerignore`))).toBe(true);
        expect(text).toContain(`docker build -f ${b.dockerfile} `);
    });

    it("FROM names pinned images or earlier stages; COPY --from names an earlier stage", () => {
        expect(stages.length).toBeGreaterThan(1);
        stages.forEach((s, i) => {
            const earlier = stages.slice(0, i).map((x) => x.name);
            if (earlier.includes(s.from)) return;
            expect(s.from, `FROM ${s.from}`).toMatch(/^[a-z0-9][\w./-]*(:[\w][\w.-]*|@sha256:[0-9a-f]{64})$/);
            expect(s.from).not.toMatch(/:latest$/);
            s.instructions.forEach((x, j) => {
                if (x.op !== "COPY") return;
                const c = parseCopy(s, j);
                if (c.from) expect(earlier, `COPY --from=${c.from}`).toContain(c.from);
            });
        });
    });

    it("builds and runs on the Node.js major the repository runs (package.json engines), at an exact version", () => {
        const engines = (JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines
            .node;
        const major = /^>=(\d+) <(\d+)$/.exec(engines);
        expect(major, `engines.node ${engines}`).not.toBeNull();
        const nodeImages = stages
            .map((s) => s.from)
            .flatMap((from) => {
                const m = /^node:(\d+)(\.\d+\.\d+)?-|^gcr\.io\/distroless\/nodejs(\d+)-/.exec(from);
                return m ? [{ from, major: Number(m[1] ?? m[3]), exact: m[1] === undefined || m[2] !== undefined }] : [];
            });
        expect(nodeImages.length, "a Node.js base image").toBeGreaterThan(0);
        for (const i of nodeImages) {
            expect(i.major, i.from).toBe(Number(major![1]));
            expect(i.exact, `${i.from}: the node image names its exact version`).toBe(true);
        }
    });

    it("every COPY source exists in the repository and reaches the build context", () => {
        let copied = 0;
        for (const s of stages)
            s.instructions.forEach((x, j) => {
                if (x.op !== "COPY") return;
                const c = parseCopy(s, j);
                if (c.from) return;
                for (const src of c.sources) {
                    copied++;
                    const clean = src.replace(/\/$/, "");
                    expect(fs.existsSync(path.join(ROOT, clean)), `COPY ${src}: not in the repository`).toBe(true);
                    expect(inContext(clean, patterns), `COPY ${src}: excluded by the .dockerignore`).toBe(true);
                    if (fs.statSync(path.join(ROOT, clean)).isDirectory())
                        expect(
                            filesUnder(clean).some((f) => inContext(f, patterns)),
                            `COPY ${src}: no file of it reaches the context`,
                        ).toBe(true);
                }
            });
        expect(copied).toBeGreaterThan(0);
    });

    it("the build stage's entry file exists, is the service's own, and everything it imports reaches the context", async () => {
        const { entries } = entryFiles(stages);
        expect(entries.length).toBeGreaterThan(0);
        const serviceDir = path.posix.dirname(b.dockerfile);
        for (const e of entries) {
            expect(fs.existsSync(path.join(ROOT, e)), e).toBe(true);
            expect(e.startsWith(`${serviceDir}/`), `${e} is under ${serviceDir}`).toBe(true);
            expect(inContext(e, patterns), e).toBe(true);
        }
        const result = await esbuild.build({
            entryPoints: entries.map((e) => path.join(ROOT, e)),
            absWorkingDir: ROOT,
            bundle: true,
            platform: "node",
            packages: "external",
            write: false,
            metafile: true,
            logLevel: "silent",
            outdir: path.join(os.tmpdir(), "images-test-out"),
        });
        const local = Object.keys(result.metafile.inputs).filter((f) => !f.startsWith("node_modules/"));
        expect(local).toEqual(expect.arrayContaining(entries));
        for (const f of local)
            expect(inContext(f, patterns), `${f} (imported by ${entries.join(", ")}) is not in the build context`).toBe(true);
    });
});

describe("images.yml", () => {
    const text = fs.readFileSync(WORKFLOW, "utf8");
    const wf = YAML.parse(text);
    const steps = (job: string) => wf.jobs[job].steps as Record<string, any>[];
    /** Whether a step runs the action `owner/repo`, whatever commit it is pinned to. */
    const runsAction = (step: Record<string, any>, action: string) => String(step.uses ?? "").startsWith(`${action}@`);

    it("names no image, Dockerfile, tag or registry: everything comes from npm run images", () => {
        expect(text).not.toContain(REGISTRY);
        for (const b of matrix) {
            for (const literal of [b.name, b.image, b.dockerfile, path.posix.dirname(b.dockerfile), `:${b.tag}`])
                expect(text, `images.yml names ${literal}`).not.toContain(literal);
        }
        expect(steps("plan").find((s) => s.id === "images")!.run).toMatch(/npm run --silent images -- --base "origin\/\$BASE_REF"/);
        expect(wf.jobs.plan.outputs).toEqual({
            images: "${{ steps.images.outputs.images }}",
            changed: "${{ steps.images.outputs.changed }}",
            registry: "${{ steps.images.outputs.registry }}",
        });
        for (const j of ["build", "publish"]) {
            expect(wf.jobs[j].needs).toBe("plan");
            expect(wf.jobs[j].strategy.matrix).toEqual({ include: "${{ fromJSON(needs.plan.outputs.images) }}" });
            const bp = steps(j).find((s) => runsAction(s, "docker/build-push-action"))!;
            expect(bp.with).toMatchObject({ context: ".", file: "${{ matrix.dockerfile }}" });
        }
    });

    it("builds on pull requests touching the images' inputs, pushes on main and v* tags", () => {
        expect(wf.on.pull_request.branches).toEqual(["main"]);
        expect(wf.on.push.branches).toEqual(["main"]);
        expect(wf.on.push.tags).toEqual(["v*"]);
        for (const ev of ["pull_request", "push"]) {
            for (const p of [
                "services/**",
                "package.json",
                "package-lock.json",
                "tsconfig.json",
                "config/versions.ts",
                ".github/workflows/images.yml",
                "tools/images.ts",
                "tools/image-guard.sh",
            ])
                expect(wf.on[ev].paths, `${ev} ${p}`).toContain(p);
        }
        expect(wf.jobs.build.if).toMatch(/github\.event_name == 'pull_request'/);
        expect(wf.jobs.publish.if).toMatch(/github\.event_name == 'push'/);
        expect(steps("build").find((s) => runsAction(s, "docker/build-push-action"))!.with.push).toBe(false);
        const push = steps("publish").find((s) => runsAction(s, "docker/build-push-action"))!;
        expect(push.with.push).toBe(true);
        expect(push.with.tags.trim().split("\n")).toEqual([
            "${{ matrix.image }}:${{ matrix.tag }}",
            "${{ matrix.image }}:sha-${{ steps.commit.outputs.short }}",
        ]);
        expect(steps("publish").find((s) => s.id === "commit")!.run).toContain("git rev-parse --short=7 HEAD");
    });

    it("packages: write only on the push job, which logs in with GITHUB_TOKEN; actions pinned to a commit", () => {
        expect(wf.permissions).toEqual({ contents: "read" });
        for (const [name, job] of Object.entries<any>(wf.jobs)) {
            expect(job.permissions?.packages === "write", name).toBe(name === "publish");
        }
        const login = steps("publish").find((s) => runsAction(s, "docker/login-action"))!;
        expect(login.with).toEqual({
            registry: "${{ needs.plan.outputs.registry }}",
            username: "${{ github.actor }}",
            password: "${{ secrets.GITHUB_TOKEN }}",
        });
        for (const j of ["build", "publish"])
            expect(
                steps(j)
                    .map((s) => s.uses)
                    .filter(Boolean)
                    .map((u) => String(u).split("@")[0]),
            ).toEqual(expect.arrayContaining(["docker/setup-buildx-action", "docker/build-push-action"]));
        // Each pinned to a release's commit, the tag as the line's comment (test/ci.test.ts checks the comment).
        for (const s of Object.values<any>(wf.jobs).flatMap((j) => j.steps))
            if (s.uses) expect(s.uses).toMatch(/^[\w-]+\/[\w-]+@[0-9a-f]{40}$/);
    });

    it("the push job checks the tag first and builds only when the guard says publish", () => {
        for (const j of ["build", "publish"]) {
            const i = steps(j).findIndex((s) => /bash tools\/image-guard\.sh "\$REF" "\$CHANGED"/.test(s.run ?? ""));
            expect(i, j).toBeGreaterThan(-1);
            expect(steps(j)[i].env).toEqual({
                REF: "${{ matrix.image }}:${{ matrix.tag }}",
                CHANGED: "${{ contains(fromJSON(needs.plan.outputs.changed), matrix.name) }}",
            });
            expect(steps(j).findIndex((s) => runsAction(s, "docker/build-push-action"))).toBeGreaterThan(i);
        }
        const guard = steps("publish").find((s) => s.id === "guard")!;
        expect(guard).toBeDefined();
        expect(steps("publish").find((s) => runsAction(s, "docker/build-push-action"))!.if).toBe("steps.guard.outputs.publish == 'true'");
    });

    it("passes GitHub's workflow parser", async () => {
        const r = await run(process.execPath, ["tools/lint-workflows.mjs", ".github/workflows/images.yml"], { cwd: ROOT });
        expect(r.stdout).toBe(".github/workflows/images.yml: ok\n");
    });
});

describe("tools/image-guard.sh: published tags are immutable", () => {
    /** Runs the guard with a fake `docker` whose `buildx imagetools inspect` exits `rc` printing `say`. */
    async function guard(rc: number, say: string, changed: boolean) {
        const dir = testTempDir("guard-");
        fs.writeFileSync(
            path.join(dir, "docker"),
            `#!/bin/sh\n[ "$1 $2 $3" = "buildx imagetools inspect" ] || exit 99\necho "$FAKE_SAY" >&2\nexit ${rc}\n`,
            { mode: 0o755 },
        );
        const out = path.join(dir, "output");
        const env = { ...process.env, PATH: `${dir}:${process.env.PATH}`, GITHUB_OUTPUT: out, FAKE_SAY: say };
        try {
            const r = await run("bash", ["tools/image-guard.sh", "registry.example.com/team/svc:1.0.0", String(changed)], {
                cwd: ROOT,
                env,
            });
            return { code: 0, stdout: r.stdout, output: fs.readFileSync(out, "utf8") };
        } catch (e) {
            const x = e as { code: number; stdout: string };
            return { code: x.code, stdout: x.stdout, output: fs.existsSync(out) ? fs.readFileSync(out, "utf8") : "" };
        }
    }

    it("a tag not published yet is pushed (not found, or GHCR's denial for a package that does not exist)", async () => {
        for (const say of [
            "ERROR: registry.example.com/team/svc:1.0.0: not found",
            "ERROR: manifest unknown",
            "ERROR: denied: denied",
            "ERROR: unauthorized: authentication required",
        ]) {
            for (const changed of [true, false])
                expect(await guard(1, say, changed), say).toMatchObject({ code: 0, output: "publish=true\n" });
        }
    });

    it("a published tag is never pushed again; a change to its inputs fails and asks for a bump in config/versions.ts", async () => {
        expect(await guard(0, "Name: registry.example.com/team/svc:1.0.0", false)).toMatchObject({ code: 0, output: "publish=false\n" });
        const changed = await guard(0, "Name: registry.example.com/team/svc:1.0.0", true);
        expect(changed.code).toBe(1);
        expect(changed.output).toBe("");
        expect(changed.stdout).toMatch(
            /::error title=Image tag registry\.example\.com\/team\/svc:1\.0\.0 is already published::.*Bump the image's version in config\/versions\.ts/,
        );
    });

    it("an unclear registry answer fails the job instead of guessing", async () => {
        const r = await guard(1, "ERROR: dial tcp: i/o timeout", false);
        expect(r.code).toBe(1);
        expect(r.output).toBe("");
        expect(r.stdout).toMatch(/::error title=Cannot tell whether .* is published::.*i\/o timeout/);
    });
});
