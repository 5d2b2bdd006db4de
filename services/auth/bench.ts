import * as http from "http";
import type { AddressInfo } from "net";
import * as path from "path";
import { Worker } from "worker_threads";
import { startAuthService } from "./server";
import { hubKeys, makePolicy, publishBundle, startRedis, startS3, tempDir, testConfig, UNLIMITED } from "./test/harness";

/**
 * Benchmark of the auth service's ext_authz check (valid key, allowed model, all three tiers checked in
 * Redis, a lease taken) against a no-op Node HTTP server that reads the same body and answers 200: the floor
 * any Node ext_authz service has on this machine. Loopback only; bounded by time.
 *
 * The load generator runs in a worker thread (its own event loop), so it does not share the server's.
 * Leases are not released during the run (the metering service would do that); limits are set high enough
 * not to be hit, and every non-200 answer is counted as an error.
 *
 * Standalone: `node -r ts-node/register/transpile-only services/auth/bench.ts`.
 */

/** Tunables; the defaults keep a run under ~15 s on a 2-core machine. */
export interface AuthBenchOptions {
    /** Measured seconds per target. */
    durationS?: number;
    /** Unmeasured warm-up seconds per target (JIT, connections, Redis script cache). */
    warmupS?: number;
    /** Requests in flight (keep-alive connections). */
    concurrency?: number;
    /** Size of the chat message content in the request body, bytes. */
    contentBytes?: number;
}

/** One target's numbers. */
export interface TargetResult {
    checksPerSecond: number;
    p50Ms: number;
    p99Ms: number;
    /** Responses other than 200, plus transport errors. */
    errors: number;
}

/** Result of {@link runAuthBench}. */
export interface AuthBenchResult {
    floor: TargetResult;
    auth: TargetResult;
    /** auth ÷ floor for each figure (throughput < 1 and latency > 1 mean the auth service costs that much). */
    ratio: { checksPerSecond: number; p50Ms: number; p99Ms: number };
    options: Required<AuthBenchOptions>;
}

const MODEL = "meta-llama/Llama-3.3-70B-Instruct";
const SECRET = "sk-bench-0123456789abcdef";

/** Load generator (plain JS, evaluated in a worker thread). */
const LOADGEN = `
const { parentPort, workerData } = require("worker_threads");
const http = require("http");
const { port, path, headers, body, concurrency, durationMs, warmupMs } = workerData;
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
function once() {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const done = (status) => resolve([status, Number(process.hrtime.bigint() - t0) / 1e6]);
    const req = http.request({ host: "127.0.0.1", port, path, method: "POST", headers, agent }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode));
    });
    req.on("error", () => done(0));
    req.end(body);
  });
}
async function phase(ms) {
  const end = Date.now() + ms;
  const latencies = [];
  let errors = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < end) {
      const [status, ms] = await once();
      if (status === 200) latencies.push(ms); else errors++;
    }
  }));
  return { latencies, errors };
}
(async () => {
  await phase(warmupMs);
  const t0 = process.hrtime.bigint();
  const r = await phase(durationMs);
  const elapsedS = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  parentPort.postMessage({ latencies: r.latencies, errors: r.errors, elapsedS });
})();
`;

async function load(port: number, urlPath: string, body: string, o: Required<AuthBenchOptions>): Promise<TargetResult> {
    const headers = { authorization: `Bearer ${SECRET}`, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };
    const worker = new Worker(LOADGEN, {
        eval: true,
        workerData: { port, path: urlPath, headers, body, concurrency: o.concurrency, durationMs: o.durationS * 1000, warmupMs: o.warmupS * 1000 },
    });
    const r = await new Promise<{ latencies: number[]; errors: number; elapsedS: number }>((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
    });
    await worker.terminate();
    const sorted = Float64Array.from(r.latencies).sort();
    const pct = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN);
    return { checksPerSecond: sorted.length / r.elapsedS, p50Ms: pct(0.5), p99Ms: pct(0.99), errors: r.errors };
}

/** The floor: reads the whole body, answers 200 with no body, same keep-alive settings as the service. */
async function startFloor(): Promise<http.Server> {
    const server = http.createServer((req, res) => {
        req.on("data", () => undefined);
        req.on("end", () => res.writeHead(200, { "content-length": "0" }).end());
    });
    server.keepAliveTimeout = 620_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return server;
}

/**
 * Runs both targets one after the other and prints a side-by-side table with the auth/floor ratio.
 * Starts its own redis-server and s3rver on loopback ports and stops them afterwards.
 * @throws when redis-server is not installed, or when either target answered anything but 200.
 */
export async function runAuthBench(options: AuthBenchOptions = {}): Promise<AuthBenchResult> {
    const o: Required<AuthBenchOptions> = { durationS: 5, warmupS: 1, concurrency: 16, contentBytes: 4096, ...options };
    const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: 512, messages: [{ role: "user", content: "x".repeat(o.contentBytes) }] });
    const [redis, s3] = await Promise.all([startRedis(), startS3()]);
    const tmp = tempDir("auth-bench-");
    const floor = await startFloor();
    try {
        const hub = hubKeys();
        const spoke = "bench";
        await publishBundle(s3, hub, spoke, 1, makePolicy({
            models: { [MODEL]: UNLIMITED },
            keys: [{ id: "bench", secret: SECRET, tenant: "bench", team: "bench", models: [MODEL] }],
        }));
        const svc = await startAuthService(
            testConfig({ spoke, publicKey: hub.publicKey, s3Endpoint: s3.endpoint, redisUrl: redis.url, cachePath: path.join(tmp.dir, "bundle.json") }),
            { log: () => undefined },
        );
        let floorResult: TargetResult;
        let authResult: TargetResult;
        try {
            floorResult = await load((floor.address() as AddressInfo).port, "/authz/v1/chat/completions", body, o);
            authResult = await load(svc.port, "/authz/v1/chat/completions", body, o);
        } finally {
            await svc.close();
        }
        const result: AuthBenchResult = {
            floor: floorResult, auth: authResult, options: o,
            ratio: {
                checksPerSecond: authResult.checksPerSecond / floorResult.checksPerSecond,
                p50Ms: authResult.p50Ms / floorResult.p50Ms,
                p99Ms: authResult.p99Ms / floorResult.p99Ms,
            },
        };
        print(result, Buffer.byteLength(body));
        if (floorResult.errors || authResult.errors) {
            throw new Error(`benchmark saw non-200 answers: floor ${floorResult.errors}, auth ${authResult.errors}`);
        }
        return result;
    } finally {
        await new Promise<void>((resolve) => { floor.close(() => resolve()); floor.closeAllConnections(); });
        await Promise.all([redis.stop(), s3.destroy()]);
        tmp.remove();
    }
}

function print(r: AuthBenchResult, bodyBytes: number): void {
    const row = (name: string, a: string, b: string, c: string) => `${name.padEnd(22)}${a.padStart(12)}${b.padStart(10)}${c.padStart(10)}`;
    const f = (t: TargetResult) => [t.checksPerSecond.toFixed(0), t.p50Ms.toFixed(2), t.p99Ms.toFixed(2)] as const;
    const lines = [
        `auth service ext_authz check vs no-op Node HTTP floor (loopback, ${r.options.concurrency} in flight, ` +
        `${r.options.durationS} s each after ${r.options.warmupS} s warm-up, ${bodyBytes} B body, redis-server on loopback)`,
        row("target", "checks/s", "p50 ms", "p99 ms"),
        row("no-op floor", ...f(r.floor)),
        row("auth service", ...f(r.auth)),
        row("auth / floor", `${r.ratio.checksPerSecond.toFixed(2)}x`, `${r.ratio.p50Ms.toFixed(2)}x`, `${r.ratio.p99Ms.toFixed(2)}x`),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
}

if (require.main === module) {
    runAuthBench().then(
        () => process.exit(0),
        (err: unknown) => { process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`); process.exit(1); },
    );
}
