import * as fs from "node:fs";
import * as path from "node:path";
import { defineConfig } from "vitest/config";

// Vitest resolves `include` against its root, the working directory (`npm test` runs in the repository root).
const ROOT = process.cwd();

const INCLUDE = ["test/**/*.test.ts", "services/**/*.test.ts", "policies/**/*.test.ts"];
const EXCLUDE = ["**/node_modules/**", "out/**", "dist/**"];

/**
 * End-to-end test files: those that spawn a TypeScript entry point (a whole-stack render, a tool's CLI, a
 * service's `main.ts`) through the esbuild loader (test/loader.ts, tools/register-esbuild.js). Derived from the
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
            } else if (e.name.endsWith(".test.ts") && /ESBUILD_LOADER|register-esbuild\.js/.test(fs.readFileSync(p, "utf8"))) {
                out.push(path.relative(ROOT, p).split(path.sep).join("/"));
            }
        }
    };
    for (const d of ["test", "services", "policies"]) walk(path.join(ROOT, d));
    return out.sort();
}
const E2E = e2eFiles();

export default defineConfig({
    test: {
        exclude: EXCLUDE,
        // Pulumi mocks are process-global state: one process per test file.
        pool: "forks",
        isolate: true,
        setupFiles: ["test/setup.ts"],
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
        // `npm test` runs both; `npm run test:unit` / `npm run test:e2e` one each.
        projects: [
            { extends: true, test: { name: "unit", include: INCLUDE, exclude: [...EXCLUDE, ...E2E] } },
            { extends: true, test: { name: "e2e", include: E2E } },
        ],
    },
});
