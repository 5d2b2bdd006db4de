import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { Client } from "pg";

/**
 * A throwaway PostgreSQL server for tests and the benchmark: a fresh data directory under the OS temp dir,
 * listening on 127.0.0.1 at a free port (unix socket in the data dir), stopped and deleted by `stop()`.
 *
 * Binaries: `$PG_BIN` if set, else the newest `/usr/lib/postgresql/<major>/bin` (Debian's `postgresql`
 * package), else `initdb`/`postgres` on PATH. PostgreSQL refuses to run as root, so as root the server runs
 * as the `postgres` user the Debian package creates.
 */
export interface TestPostgres {
    /** `postgresql://ledger@127.0.0.1:<port>/ledger` (trust auth, loopback only). */
    url: string;
    port: number;
    /** Opens a connected client; the caller ends it. */
    connect(): Promise<Client>;
    /** Fast shutdown, then removes the data directory. Idempotent. */
    stop(): Promise<void>;
}

export interface StartOptions {
    /**
     * Durability settings. `false` (tests): fsync/synchronous_commit off, so tests measure logic, not the
     * disk. `true` (benchmark): server defaults.
     */
    durable?: boolean;
}

/** Directory with initdb and postgres. @throws Error naming what to install when none is found. */
export function postgresBinDir(): string {
    if (process.env.PG_BIN) return process.env.PG_BIN;
    const base = "/usr/lib/postgresql";
    if (fs.existsSync(base)) {
        const majors = fs
            .readdirSync(base)
            .filter((d) => /^\d+$/.test(d))
            .sort((a, b) => Number(b) - Number(a));
        for (const m of majors) if (fs.existsSync(path.join(base, m, "bin", "postgres"))) return path.join(base, m, "bin");
    }
    const which = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" });
    if (which.status === 0 && which.stdout.trim()) return path.dirname(which.stdout.trim());
    throw new Error(
        "PostgreSQL server binaries not found: install Debian's `postgresql` package (apt-get install -y postgresql) or set PG_BIN",
    );
}

function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => {
            const port = (s.address() as net.AddressInfo).port;
            s.close(() => resolve(port));
        });
    });
}

function runAs(): { uid: number; gid: number } | undefined {
    if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined;
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
}

/**
 * Environment variable naming a folder where a test run keeps one initialised data directory (test/global-setup.ts
 * sets it, in the run's folder): each server of the run starts from a copy of it (`cp -a`, ownership and modes kept)
 * instead of running `initdb` again (most of a start). Unset (the benchmark, a script): every server runs `initdb`.
 */
export const PG_TEMPLATE_ENV = "PLATFORM_PG_TEMPLATE";

/** The `initdb` this module runs: a data directory at `data`, run as `user` in `cwd`. @throws Error when it fails */
function initdb(bin: string, data: string, user: { uid: number; gid: number } | undefined, cwd: string): void {
    const init = spawnSync(
        path.join(bin, "initdb"),
        ["-D", data, "-U", "ledger", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
        {
            encoding: "utf8",
            uid: user?.uid,
            gid: user?.gid,
            cwd,
        },
    );
    if (init.status !== 0) throw new Error(`initdb failed (${init.status}): ${init.stderr || init.stdout}`);
}

/**
 * The data directory of the run's template (see {@link PG_TEMPLATE_ENV}) for these binaries, made by the first process
 * that asks (others wait for it, or make it themselves after 60 s); undefined when no template folder is set.
 */
async function templateData(bin: string, user: { uid: number; gid: number } | undefined): Promise<string | undefined> {
    const root = process.env[PG_TEMPLATE_ENV];
    if (!root) return undefined;
    // One per PostgreSQL build: a data directory is only valid for the major version that made it.
    const dir = path.join(root, bin.replace(/[^A-Za-z0-9]+/g, "_"));
    const data = path.join(dir, "data");
    const lock = `${dir}.lock`;
    const deadline = Date.now() + 60_000;
    fs.mkdirSync(root, { recursive: true });
    for (;;) {
        if (fs.existsSync(data)) return data;
        try {
            fs.mkdirSync(lock);
        } catch {
            if (Date.now() > deadline) return undefined;
            await new Promise((r) => setTimeout(r, 50));
            continue;
        }
        // Made beside the servers' folders (the run's folder may be closed to the `postgres` user), then moved in whole.
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ledger-pg-template-"));
        try {
            if (user) fs.chownSync(tmp, user.uid, user.gid);
            initdb(bin, path.join(tmp, "data"), user, tmp);
            fs.mkdirSync(`${dir}.tmp`, { recursive: true });
            const cp = spawnSync("cp", ["-a", path.join(tmp, "data"), `${dir}.tmp`], { encoding: "utf8" });
            if (cp.status !== 0) throw new Error(`copying the template data directory failed (${cp.status}): ${cp.stderr}`);
            fs.renameSync(`${dir}.tmp`, dir);
            return data;
        } finally {
            fs.rmSync(tmp, { recursive: true, force: true });
            fs.rmSync(`${dir}.tmp`, { recursive: true, force: true });
            fs.rmSync(lock, { recursive: true, force: true });
        }
    }
}

/**
 * Initialises and starts a server.
 * @throws Error when the binaries are missing, initdb fails, or the server does not accept connections in 30 s
 */
export async function startPostgres(opts: StartOptions = {}): Promise<TestPostgres> {
    const bin = postgresBinDir();
    const user = runAs();
    const template = await templateData(bin, user);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ledger-pg-"));
    const data = path.join(dir, "data");
    if (user) fs.chownSync(dir, user.uid, user.gid);
    try {
        if (template) {
            const cp = spawnSync("cp", ["-a", template, data], { encoding: "utf8" });
            if (cp.status !== 0) throw new Error(`copying the template data directory failed (${cp.status}): ${cp.stderr}`);
        } else initdb(bin, data, user, dir);
    } catch (e) {
        fs.rmSync(dir, { recursive: true, force: true });
        throw e;
    }
    const port = await freePort();
    const settings = opts.durable ? [] : ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"];
    const proc: ChildProcess = spawn(
        path.join(bin, "postgres"),
        [
            "-D",
            data,
            "-p",
            String(port),
            "-k",
            dir,
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "max_connections=50",
            "-c",
            "shared_buffers=64MB",
            ...settings,
        ],
        { uid: user?.uid, gid: user?.gid, cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    proc.stderr?.on("data", (b) => {
        stderr = (stderr + b.toString()).slice(-4000);
    });
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    const url = `postgresql://ledger@127.0.0.1:${port}/postgres`;

    const deadline = Date.now() + 30_000;
    for (;;) {
        const c = new Client({ connectionString: url });
        try {
            await c.connect();
            await c.query("CREATE DATABASE ledger");
            await c.end();
            break;
        } catch (e) {
            await c.end().catch(() => undefined);
            if (proc.exitCode !== null || Date.now() > deadline) {
                proc.kill("SIGKILL");
                fs.rmSync(dir, { recursive: true, force: true });
                throw new Error(`postgres did not start on port ${port}: ${(e as Error).message}\n${stderr}`);
            }
            await new Promise((r) => setTimeout(r, 100));
        }
    }
    const dbUrl = `postgresql://ledger@127.0.0.1:${port}/ledger`;
    let stopped = false;
    return {
        url: dbUrl,
        port,
        async connect() {
            const c = new Client({ connectionString: dbUrl });
            await c.connect();
            return c;
        },
        async stop() {
            if (stopped) return;
            stopped = true;
            if (proc.exitCode === null) {
                proc.kill("SIGINT"); // fast shutdown
                const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
                await exited;
                clearTimeout(t);
            }
            fs.rmSync(dir, { recursive: true, force: true });
        },
    };
}
