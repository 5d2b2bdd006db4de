import { afterAll, vi } from "vitest";
import { envLeakMessage, restoreEnv, snapshotEnv } from "./env-guard";

/**
 * The second setup file (vitest.config.mts `setupFiles`, after test/setup.ts, which also runs outside Vitest:
 * test/harness.test.ts), run before each test file in a worker process that runs file after file (`isolate: false`).
 * The environment as the file found it, before the file is imported (its module-level code runs on import): compared,
 * restored and the file failed after its own hooks (Vitest runs `afterAll` hooks in reverse, so this one runs last).
 */
const envBefore = snapshotEnv();
/** The process's own environment object (Node's, which coerces to strings), as the worker's first file found it. */
const worker = globalThis as { platformProcessEnv?: NodeJS.ProcessEnv };
worker.platformProcessEnv ??= process.env;
const ownEnv = worker.platformProcessEnv;
afterAll(() => {
    const problems: string[] = [];
    if (process.env !== ownEnv) {
        process.env = ownEnv;
        problems.push("replaced process.env with another object (restore variables in place)");
    }
    if (vi.isFakeTimers()) {
        vi.useRealTimers();
        problems.push("left fake timers on (call vi.useRealTimers() in its own afterEach/afterAll)");
    }
    const leaked = restoreEnv(envBefore);
    if (leaked.length > 0) problems.push(envLeakMessage(leaked));
    if (problems.length > 0) throw new Error(`this test file ${problems.join("; ")}`);
});
