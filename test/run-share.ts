import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { RUN_DIR_ENV } from "./global-setup";

/** How long a process waits for another one computing the same value before computing it itself. */
const WAIT_LIMIT_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `compute()`, done once per `vitest run` for all its worker processes: the first process to ask computes it and
 * writes it as JSON to the run's folder (test/global-setup.ts); a process asking while it is being computed waits for
 * it; the others read it. Outside a run with that folder (the variable unset), `compute()` is just called.
 *
 * Only for values that are plain JSON and the same in every process of the run for the same `key` (a render of a
 * stack file as it is: the same program over the same files). A computation that fails is not shared: the error goes
 * to its caller, and a process waiting for it computes the value itself.
 */
export async function sharedInRun<T>(key: string, compute: () => Promise<T>): Promise<T> {
    const dir = process.env[RUN_DIR_ENV];
    if (!dir || !fs.existsSync(dir)) return compute();
    const file = path.join(dir, `${createHash("sha256").update(key).digest("hex")}.json`);
    const lock = `${file}.lock`;
    const read = (): T | undefined => {
        try {
            return JSON.parse(fs.readFileSync(file, "utf8")) as T;
        } catch {
            return undefined;
        }
    };
    const deadline = Date.now() + WAIT_LIMIT_MS;
    for (;;) {
        const done = read();
        if (done !== undefined) return done;
        try {
            fs.mkdirSync(lock);
        } catch {
            // Another process is computing it: wait for its file (or for its lock to go, when it failed).
            if (Date.now() > deadline) return compute();
            await sleep(50);
            continue;
        }
        try {
            const text = JSON.stringify(await compute());
            const tmp = `${file}.${process.pid}.tmp`;
            fs.writeFileSync(tmp, text);
            fs.renameSync(tmp, file);
            // What the other processes read, so every process sees the same value.
            return JSON.parse(text) as T;
        } finally {
            fs.rmSync(lock, { recursive: true, force: true });
        }
    }
}
