/**
 * What one test file leaves behind in its worker process for the next file (Vitest runs files one after another in a
 * process, `isolate: false` in vitest.config.mts): `process.env` and fake timers. test/setup-leaks.ts snapshots the
 * environment before each file is imported and, after the file's own hooks, restores it and fails the file naming the
 * keys it changed. A file that needs a variable sets it and puts the previous value back itself (`afterAll`/`finally`).
 */

/** A copy of `process.env` (or `env`). */
export function snapshotEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string | undefined> {
    return { ...env };
}

/**
 * Puts `env` back to `before`: deletes what was added, restores what was changed or deleted. Returns the keys that
 * differed, sorted (empty when the file left the environment as it found it).
 */
export function restoreEnv(before: Record<string, string | undefined>, env: NodeJS.ProcessEnv = process.env): string[] {
    const changed: string[] = [];
    for (const k of Object.keys(env))
        if (!(k in before)) {
            changed.push(k);
            delete env[k];
        }
    for (const [k, v] of Object.entries(before))
        if (env[k] !== v) {
            changed.push(k);
            env[k] = v;
        }
    return changed.sort();
}

/** Why a file that left the environment changed fails, naming the keys. */
export function envLeakMessage(keys: string[]): string {
    return (
        `left process.env changed (${keys.join(", ")}), which the next test file of this worker would see: restore each ` +
        "variable the file sets in its own afterAll/afterEach or finally (test/env-guard.ts)"
    );
}
