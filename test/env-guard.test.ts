import { execFile } from "node:child_process";
import * as path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { restoreEnv } from "./env-guard";
import { ROOT } from "./helpers";

const run = promisify(execFile);

describe("a test file that leaves process.env or fake timers changed fails (test/setup-leaks.ts), and the next file finds them restored", () => {
    it("restoreEnv puts back what was added, changed and deleted, and names those keys", () => {
        const env: NodeJS.ProcessEnv = { KEPT: "1", CHANGED: "a", DELETED: "x" };
        const before = { ...env };
        env.CHANGED = "b";
        env.ADDED = "y";
        delete env.DELETED;
        expect(restoreEnv(before, env)).toEqual(["ADDED", "CHANGED", "DELETED"]);
        expect(env).toEqual(before);
        expect(restoreEnv(before, env)).toEqual([]);
    });

    it("a planted run (test/fixtures/env-leak): the leaking file fails with the keys, the next one in its process passes", async () => {
        // The child Vitest run gets this worker's environment without Vitest's own per-worker variables.
        const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("VITEST")));
        const r = await run(
            process.execPath,
            [
                path.join(ROOT, "node_modules", "vitest", "vitest.mjs"),
                "run",
                "--config",
                "test/fixtures/env-leak/vitest.config.mts",
                "--reporter=json",
            ],
            { cwd: ROOT, env: { ...env, PLATFORM_PLANTED_DELETED: "kept", PLATFORM_PLANTED_CHANGED: "kept" } },
        ).then(
            () => ({ code: 0, stdout: "" }),
            (e: { code: number; stdout: string }) => e,
        );
        expect(r.code).toBe(1);
        const report = JSON.parse(r.stdout) as { testResults: Array<{ name: string; status: string; message: string }> };
        const byFile = Object.fromEntries(report.testResults.map((t) => [path.basename(t.name), t]));
        expect(Object.keys(byFile).sort()).toEqual(["1-leaks.leak.ts", "2-clean.leak.ts"]);
        expect(byFile["1-leaks.leak.ts"].status).toBe("failed");
        expect(byFile["1-leaks.leak.ts"].message).toContain(
            "left process.env changed (PLATFORM_PLANTED_ADDED, PLATFORM_PLANTED_CHANGED, PLATFORM_PLANTED_DELETED)",
        );
        expect(byFile["1-leaks.leak.ts"].message).toContain("left fake timers on");
        expect(byFile["1-leaks.leak.ts"].message).toContain("replaced process.env with another object");
        expect(byFile["2-clean.leak.ts"]).toMatchObject({ status: "passed" });
    });
});
