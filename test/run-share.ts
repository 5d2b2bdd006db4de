import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { RUN_DIR_ENV } from "./global-setup";

/** The repository root. */
const ROOT = path.join(__dirname, "..");
/** Folders no render reads (dependencies, outputs, version control). */
const NOT_SOURCES = new Set(["node_modules", ".git", "out", "dist", "bench-out", ".tmp"]);

/**
 * The state of the repository's files, for the key of a value shared in a run: every file's path, size and
 * modification time (node_modules/, out/ and .git/ aside; the lockfile stands for the dependencies). It changes when a
 * file is edited while a run lasts (`vitest --watch` keeps one run folder across reruns), so a value computed from the
 * files as they were is never taken for one of the files as they are. About a thousand `stat` calls.
 */
export function sourcesDigest(): string {
    const h = createHash("sha256");
    const walk = (dir: string) => {
        for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
            if (NOT_SOURCES.has(e.name)) continue;
            const p = path.join(dir, e.name);
            if (e.isDirectory()) walk(p);
            else if (e.isFile()) {
                const st = fs.statSync(p);
                h.update(`${path.relative(ROOT, p)}\0${st.size}\0${st.mtimeMs}\n`);
            }
        }
    };
    walk(ROOT);
    return h.digest("hex");
}

/** How long a process waits for another one computing the same value before computing it itself. */
const WAIT_LIMIT_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `compute()`, done once per `vitest run` for all its worker processes: the first process to ask computes it and
 * writes it as JSON to the run's folder (test/global-setup.ts); a process asking while it is being computed waits for
 * it; the others read it. Outside a run with that folder (the variable unset), `compute()` is just called.
 *
 * Only for values that are plain JSON and the same in every process of the run for the same `key` and the same
 * repository files ({@link sourcesDigest}, part of the key): a render of a stack file as it is, by the same program. A computation that fails is not shared: the error goes
 * to its caller, and a process waiting for it computes the value itself.
 */
export async function sharedInRun<T>(key: string, compute: () => Promise<T>): Promise<T> {
    const dir = process.env[RUN_DIR_ENV];
    if (!dir || !fs.existsSync(dir)) return compute();
    const file = path.join(dir, `${createHash("sha256").update(key).update("\0").update(sourcesDigest()).digest("hex")}.json`);
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
