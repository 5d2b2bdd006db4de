import { defineConfig } from "vitest/config";

export default defineConfig({
    test: {
        include: ["test/**/*.test.ts", "services/**/*.test.ts", "policies/**/*.test.ts"],
        exclude: ["**/node_modules/**", "out/**", "dist/**"],
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
    },
});
