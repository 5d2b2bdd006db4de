import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { defineConfig } from "vitest/config";

// Vitest resolves `include` against its root, the working directory (`npm test` runs in the repository root).
const ROOT = process.cwd();

const INCLUDE = ["test/**/*.test.ts", "services/**/*.test.ts", "policies/**/*.test.ts"];
const EXCLUDE = ["**/node_modules/**", "out/**", "dist/**"];

/**
 * End-to-end test files: those that spawn a TypeScript entry point (a whole-stack render, a tool's CLI, a
 * service's `main.ts`) through the esbuild loader (test/loader.ts, tools/register-esbuild.js), or read a render of the
 * real CLI (test/cli-render.ts). Derived from the
 * sources, so a new file that spawns one is an e2e file without being listed. Everything else is a unit file
 * (in-process: pure functions, Pulumi mocks, and the services against the Redis/PostgreSQL/S3 servers they start).
 */
function e2eFiles(): string[] {
    const out: string[] = [];
    const walk = (dir: string) => {
        for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
            const p = path.join(dir, e.name);
            if (e.isDirectory()) {
                if (e.name !== "node_modules") walk(p);
            } else if (e.name.endsWith(".test.ts") && /ESBUILD_LOADER|register-esbuild\.js|from "\.\/cli-render"/.test(fs.readFileSync(p, "utf8"))) {
                out.push(path.relative(ROOT, p).split(path.sep).join("/"));
            }
        }
    };
    for (const d of ["test", "services", "policies"]) walk(path.join(ROOT, d));
    return out.sort();
}
const E2E = e2eFiles();

// V8's code cache for every Node process of the run (the test workers and every render, tool and service a test
// spawns inherit it): the Pulumi SDKs and the rest of node_modules are compiled once, not once per process. Keyed by
// each file's path and contents (Node's module.enableCompileCache), so a changed file is compiled afresh.
process.env.NODE_COMPILE_CACHE ??= path.join(os.tmpdir(), "platform-node-compile-cache");

/**
 * Vitest's own transform of every test and source file it loads, kept on disk between runs (Vitest's
 * `experimental.fsModuleCache`: keyed by each file's path and contents, the Vite config and the Vitest version, and
 * cleared when the lockfile changes), so a run transforms only the files changed since the last one. Kept beside the
 * other caches in the temporary directory, never in node_modules/ (a shared install).
 */
const MODULE_CACHE = path.join(os.tmpdir(), "platform-vitest-module-cache");

/**
 * Which tests: `PLATFORM_TESTS=unit` (`npm run test:unit`) the unit files, `PLATFORM_TESTS=e2e` (`npm run test:e2e`) the
 * e2e files, unset (`npm test`) both, in one pool of workers. Not two Vitest projects: a worker process only runs files
 * of one project, so two would start (and load the Pulumi SDKs and the program in) four processes instead of two,
 * and run every e2e file before any unit file instead of the longest files first.
 */
const KIND = process.env.PLATFORM_TESTS;
if (KIND !== undefined && KIND !== "unit" && KIND !== "e2e") throw new Error(`PLATFORM_TESTS=${KIND}: expected unit or e2e`);

export default defineConfig({
    test: {
        include: KIND === "e2e" ? E2E : INCLUDE,
        exclude: KIND === "unit" ? [...EXCLUDE, ...E2E] : EXCLUDE,
        experimental: { fsModuleCache: true, fsModuleCachePath: MODULE_CACHE },
        // Pulumi mocks are process-global state: test files run in child processes, one file at a time per process.
        // A process runs file after file (not isolated): the Pulumi SDK, the AWS and Kubernetes providers and the
        // program's modules load once per worker instead of once per file, and the renders of the repository's own
        // stack files (test/helpers.ts runRepoStack) are shared by every file of that worker. Every runStack sets
        // its own mocks and config, test/setup.ts re-arms the tripwire before each file, test/setup-leaks.ts fails a file that
        // leaves process.env or fake timers changed, and no test mocks modules.
        pool: "forks",
        isolate: false,
        // The tripwire and a clean Pulumi config (test/setup.ts); a file that leaves process.env or fake timers changed
        // for the next file fails, and the next file finds them restored (test/setup-leaks.ts).
        setupFiles: ["test/setup.ts", "test/setup-leaks.ts"],
        // A folder for the run that its worker processes share (test/run-share.ts), removed when the run ends.
        globalSetup: ["test/global-setup.ts"],
        testTimeout: 60_000,
        hookTimeout: 60_000,
        // 2-core CI machines: keep parallelism modest so server-backed tests are not starved.
        maxWorkers: 2,
        // A program error is reported by runStack (tools/harness.ts); the SDK re-raises the same error
        // through internal promises as unhandled rejections, which carry this mark. Anything else fails the run.
        onUnhandledError(error) {
            if ((error as unknown as Record<string, unknown>)?.platformHandledByRunStack === true) return false;
            return undefined;
        },
    },
});
