import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { RUN_DIR_ENV } from "./global-setup";
import { ROOT } from "./helpers";
import { ESBUILD_LOADER } from "./loader";
import { sharedInRun } from "./run-share";

const run = promisify(execFile);

export interface CliRender {
    code: number;
    stdout: string;
    stderr: string;
}

/**
 * Runs `npm run render -- <args>` the way a user does (separate process, real CLI), in the repository root unless
 * `cwd` says otherwise (stack file names in out/ are relative to it).
 */
export async function render(args: string[], cwd = ROOT): Promise<CliRender> {
    try {
        const r = await run(process.execPath, ["-r", ESBUILD_LOADER, path.join(ROOT, "tools", "render.ts"), ...args], {
            cwd,
            env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true" },
        });
        return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
        const x = e as { code: number; stdout: string; stderr: string };
        return { code: x.code, stdout: x.stdout, stderr: x.stderr };
    }
}

/** Each shared render once per process too (when no run folder shares it between processes). */
const once = new Map<string, Promise<CliRender & { out: string }>>();
function shared(key: string, compute: () => Promise<CliRender & { out: string }>): Promise<CliRender & { out: string }> {
    let p = once.get(key);
    if (!p) {
        p = sharedInRun(key, compute);
        once.set(key, p);
    }
    return p;
}

/** A folder for a shared render: in the run's folder (removed with it), else a temporary one removed at exit. */
function sharedFolder(name: string): string {
    const runDir = process.env[RUN_DIR_ENV];
    if (runDir && fs.existsSync(runDir)) return fs.mkdtempSync(path.join(runDir, `${name}-`));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
    process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
    return dir;
}

/**
 * `npm run render -- --out <dir>` of every stack under stacks/, over leftovers of an earlier render: a stack whose file
 * is gone (`spoke-gone/resources.json`, to be removed) and a folder that is no render (`notes/todo.txt`, to be kept).
 * Run once per test run and shared by the files that read it (test/run-share.ts): treat `out` as read-only (copy it
 * to change it).
 */
export function renderAllRepoStacks(): Promise<CliRender & { out: string }> {
    return shared("cli-render|all-stacks-over-leftovers", async () => {
        const out = path.join(sharedFolder("cli-render-all"), "all");
        fs.mkdirSync(path.join(out, "spoke-gone"), { recursive: true });
        fs.writeFileSync(path.join(out, "spoke-gone", "resources.json"), "[]");
        fs.mkdirSync(path.join(out, "notes"), { recursive: true });
        fs.writeFileSync(path.join(out, "notes", "todo.txt"), "keep");
        return { out, ...(await render(["--out", out])) };
    });
}

/**
 * `npm run render -- --out <dir> spoke-hn1` (one spoke and the hub it references) into a fresh folder. Run once per
 * test run and shared like {@link renderAllRepoStacks}: treat `out` as read-only.
 */
export function renderSpokeHn1(): Promise<CliRender & { out: string }> {
    return shared("cli-render|spoke-hn1", async () => {
        const out = path.join(sharedFolder("cli-render-one"), "one");
        return { out, ...(await render(["--out", out, "spoke-hn1"])) };
    });
}
