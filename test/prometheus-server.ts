import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

/** A Prometheus the test started on loopback, with series backfilled from OpenMetrics text. */
export interface TestPrometheus {
    url: string;
    stop(): Promise<void>;
}

async function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => {
            const port = (s.address() as net.AddressInfo).port;
            s.close(() => resolve(port));
        });
    });
}

/**
 * Backfills `openmetrics` (text ending in `# EOF`) into a fresh data directory with `promtool tsdb
 * create-blocks-from openmetrics`, starts Debian's `prometheus` on a free loopback port over it, and waits until it
 * answers `/-/ready`. FAILS (never skips) when `prometheus` or `promtool` is missing (.ci/run installs the package).
 * @throws Error with promtool's or Prometheus' output when either fails
 */
export async function startPrometheus(openmetrics: string): Promise<TestPrometheus> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "prom-"));
    const data = path.join(dir, "data");
    fs.mkdirSync(data);
    fs.writeFileSync(path.join(dir, "series.om"), openmetrics);
    fs.writeFileSync(path.join(dir, "prometheus.yml"), "global:\n  scrape_interval: 15s\n");
    try {
        execFileSync("promtool", ["tsdb", "create-blocks-from", "openmetrics", path.join(dir, "series.om"), data], {
            stdio: ["ignore", "pipe", "pipe"],
        });
    } catch (e: any) {
        if (e.code === "ENOENT")
            throw new Error("promtool not found: install Debian's `prometheus` package (apt-get install prometheus; .ci/run does)");
        throw new Error(`promtool create-blocks-from failed: ${e.stderr ?? e.message}`);
    }
    const port = await freePort();
    let log = "";
    const child: ChildProcess = spawn(
        "prometheus",
        [
            `--config.file=${path.join(dir, "prometheus.yml")}`,
            `--storage.tsdb.path=${data}`,
            `--web.listen-address=127.0.0.1:${port}`,
            "--storage.tsdb.retention.time=30d",
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
    );
    child.stdout?.on("data", (b) => (log += b));
    child.stderr?.on("data", (b) => (log += b));
    const spawnError = new Promise<never>((_, reject) =>
        child.once("error", (e: any) =>
            reject(e.code === "ENOENT" ? new Error("prometheus not found: install Debian's `prometheus` package (.ci/run does)") : e),
        ),
    );
    const url = `http://127.0.0.1:${port}`;
    const ready = (async () => {
        for (let i = 0; i < 300; i++) {
            if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}: ${log.slice(-2000)}`);
            try {
                if ((await fetch(`${url}/-/ready`)).ok) return;
            } catch {
                /* not listening yet */
            }
            await new Promise((r) => setTimeout(r, 100));
        }
        throw new Error(`prometheus not ready after 30 s: ${log.slice(-2000)}`);
    })();
    await Promise.race([ready, spawnError]);
    return {
        url,
        stop: async () => {
            if (child.exitCode === null) {
                const exited = new Promise((r) => child.once("exit", r));
                child.kill("SIGTERM");
                await exited;
            }
            fs.rmSync(dir, { recursive: true, force: true });
        },
    };
}
