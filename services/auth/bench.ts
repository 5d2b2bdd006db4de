import { spawn } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { Redis } from "ioredis";
import { type TierIds, tierIds } from "../shared/identity";
import { AdmissionBatcher, admissionKeys, CHECK_COUNTERS_BATCH_LUA, newLeaseToken, type TierLimits } from "../shared/limits";
import { startAuthService } from "./server";
import { hubKeys, makePolicy, publishBundle, startRedis, startS3, tempDir, testConfig, UNLIMITED } from "./test/harness";

/**
 * Benchmark of the auth service's ext_authz check (valid key, allowed model, all three tiers checked in
 * Redis, a lease taken) against a no-op Node HTTP server that reads the same body and answers 200: the floor
 * any Node ext_authz service has on this machine. Loopback only; bounded by time.
 *
 * Side-by-side measurements (goals in brackets, {@link GOALS}):
 * - closed loop at 16 and at 64 requests in flight, one API key: checks/s ratio auth ÷ floor [≥ 0.70x]. One
 *   busy key is admitted from grants (services/auth/admission.ts), so this is the cost of a busy key's check;
 * - closed loop at 16 in flight spread over `spreadKeys` keys: each key is too quiet for a grant, so every
 *   check is a Redis check, the cost of a quiet key's check: checks/s ratio [≥ 0.60x] and redis-server CPU per
 *   check [≤ 20 µs];
 * - beside the quiet-key setting, a diagnostic with no goal: the Redis floor ({@link startRedisFloor}), the no-op floor
 *   plus one batched Redis script call per event-loop turn carrying each check's keys and arguments, as the service
 *   sends them, to a script that only answers. It is what any service pays on this machine for a Redis round trip per
 *   quiet check, so the gap between it and the auth service is the limit logic (Redis) and the service's own work;
 * - beside it, the bound (no goal): the script floor, the Redis floor's calls answered by the shipped admission script
 *   (services/shared/limits.ts `CHECK_COUNTERS_BATCH_LUA`), so redis-server does a quiet check's real work and the
 *   server nothing else: an upper estimate of what a Node service making that check per quiet request reaches on the
 *   machine (it runs without the service's batching hold, worth a few hundredths of the ratio). Its row comes from the
 *   round of the median auth/floor pair;
 *   `npm run bench -- auth-bound` ({@link BoundResult}) measures the floors around it;
 * - open loop (paced) at a tenth of the floor's saturated rate (its best closed-loop checks/s): p99 of both,
 *   and the difference auth − floor [≤ 1 ms]. Latency is measured from each request's scheduled send time,
 *   so a stall is not hidden by the generator waiting for it (no coordinated omission).
 * A summary lists every goal with its figure; {@link runAuthBench} reports the missed ones (`npm run bench`
 * then exits non-zero).
 * Floor and auth runs alternate per setting, so a drift in the machine's load hits both alike, and each goal
 * setting runs `rounds` such pairs (the paced one `pacedRounds`: a p99 of a few thousand requests moves with one
 * scheduling stall of a loaded machine, in either target): the figure is the median pair's, and every pair's
 * figure is printed.
 *
 * The load generator runs in a child process, so it shares neither the server's event loop nor its CPU
 * accounting (the table's "server us" is this process's CPU per check; "redis us" is redis-server's).
 * Nothing releases leases during the run (the metering service would, when each request's usage arrives), so
 * the lease TTL is {@link BENCH_LEASE_TTL_S} s: a lease then stops counting as if its request had lasted that
 * long (its bucket is swept, with the markers of its leases), and Redis holds about rate × TTL leases, as in
 * production (the requests in flight), instead of every lease of the run. Redis is emptied between runs, so no
 * run inherits another's state. Limits are set high enough not to be hit, and every non-200 answer is counted
 * as an error. Each auth row also gives the Redis commands run per check (INFO commandstats; the script calls
 * themselves not counted), and the quiet-key run lists them by command.
 *
 * Run with `npm run bench -- auth` (tools/register-esbuild.js: without ts-node, which loads `domain` and
 * slows every EventEmitter of the process; the image runs compiled JavaScript).
 */

/** Tunables; with the defaults a run takes about 5 minutes (3 pairs per closed-loop setting, 5 paced; the quiet setting also runs the Redis floor and the script floor each round). */
export interface AuthBenchOptions {
    /** Measured seconds per target and setting. */
    durationS?: number;
    /** Unmeasured warm-up seconds per target and setting (JIT, connections, Redis script cache). */
    warmupS?: number;
    /** Closed-loop settings: requests in flight (keep-alive connections). */
    concurrencies?: number[];
    /** Paced run's rate as a fraction of the floor's saturated checks/s (0 = skip the paced run). */
    pacedFraction?: number;
    /** Keys of the spread run (16 in flight, each request the next key; 0 = skip). */
    spreadKeys?: number;
    /** Size of the chat message content in the request body, bytes. */
    contentBytes?: number;
    /** Extra auth service environment (e.g. `AUTH_REDIS_AUTO_PIPELINING`), for A/B runs. */
    env?: Record<string, string>;
    /** Run only one target (profiling). */
    only?: "auth" | "floor";
    /**
     * Floor/auth pairs per goal setting (closed loops and paced). The figure is the median pair's; all are
     * printed. One machine-load spike then moves one pair, not the result.
     */
    rounds?: number;
    /** Floor/auth pairs of the paced setting (its p99 difference is the noisiest figure). */
    pacedRounds?: number;
    /**
     * Checks/s of the cost decomposition (`npm run bench -- auth-cost`); 0 (default) = the goal run. When set, only
     * the decomposition runs ({@link CostResult}): no goal setting, no goal.
     */
    costRate?: number;
    /**
     * Run only the bound on the quiet-key ratio (`npm run bench -- auth-bound`, {@link BoundResult}): no goal setting,
     * no goal.
     */
    bound?: boolean;
}

/**
 * The bound on the quiet-key ratio (16 in flight over `spreadKeys` keys, closed loop; each figure the median of `rounds`
 * runs): the no-op floor; the Redis floor (a script that only answers); the script floor, the Redis floor's calls
 * answered by the shipped admission script (services/shared/limits.ts `CHECK_COUNTERS_BATCH_LUA`), so Redis does the
 * quiet check's real work; the stripped floor, the same with that script less the lease marker and the shared tiers
 * ({@link strippedCheckScript}: an optimistic estimate of what a change of the data layout could take out of a quiet
 * check); the limits floor ({@link startLimitsFloor}: the service's own batcher around the shipped script, so the gap
 * to the script floor is that batcher's Node-side cost); the auth service. Each floor does less than the auth service
 * (the stripped one with a script that is no limiter), so the script floor is an upper estimate of what the service
 * reaches with the shipped check, and the stripped floor of what it could reach after such a change. Each figure is
 * the median of its own column over the rounds, so one row's figures may come from different rounds.
 */
export interface BoundResult {
    floor: TargetResult;
    redisFloor: TargetResult;
    scriptFloor: TargetResult;
    strippedFloor: TargetResult;
    limitsFloor: TargetResult;
    auth: TargetResult;
}

/**
 * Where a quiet-key check's CPU goes, measured at one request rate for every target (open loop at `rate`, below each
 * target's saturation), so that no figure moves with how many requests a target handles per wake-up. Each figure is
 * the median of `rounds` runs. Targets: the no-op floor; the Redis floor ({@link startRedisFloor}); the auth service on
 * one busy key (admitted from grants: its HTTP, key, body, model and answer work without a Redis call per check); and
 * the auth service over the quiet keys (one Redis check each).
 */
export interface CostResult {
    ratePerSecond: number;
    floor: TargetResult;
    redisFloor: TargetResult;
    busy: TargetResult;
    quiet: TargetResult;
}

/** One target's numbers. */
export interface TargetResult {
    checksPerSecond: number;
    p50Ms: number;
    p99Ms: number;
    /** Responses other than 200, plus transport errors. */
    errors: number;
    /** Server process CPU (user + sys) per check, µs: the cost of a check, less load-sensitive than checks/s. */
    serverUsPerCheck: number;
    /** The load generator's CPU (user + sys) per check, µs: what sending the request and reading the answer costs it. */
    clientUsPerCheck: number;
    /** redis-server CPU (user + sys) per check, µs; auth only. */
    redisUsPerCheck?: number;
    /** Checks per Redis script call (all scripts: checks, grant returns); auth only. */
    checksPerScriptCall?: number;
    /**
     * Redis commands per check, by command, as INFO commandstats counts them: the commands the scripts run and any
     * sent directly, not the script calls themselves nor the benchmark's own (INFO, FLUSHALL); auth only.
     */
    commandsPerCheck?: Record<string, number>;
}

/** Floor and auth at one setting. */
export interface SettingResult {
    /** e.g. `16 in flight` or `paced 850/s`. */
    setting: string;
    /** The median pair (by the setting's figure), or the only one. */
    floor?: TargetResult;
    auth?: TargetResult;
    /**
     * The quiet-key setting only, a diagnostic with no goal: the Redis floor ({@link startRedisFloor}) of the median
     * pair's round.
     */
    redisFloor?: TargetResult;
    /**
     * The quiet-key setting only, with no goal: the script floor (the Redis floor's calls answered by the shipped
     * admission script) of the median pair's round, the bound on the auth service's quiet-key checks/s.
     */
    scriptFloor?: TargetResult;
    /** The setting's figure of each pair, in run order (checks/s ratio, or p99 difference in ms when paced). */
    figures?: number[];
}

/** Result of {@link runAuthBench}. */
export interface AuthBenchResult {
    closed: SettingResult[];
    /** 16 in flight over `spreadKeys` keys (every check a Redis check). */
    spread?: SettingResult;
    paced?: SettingResult & { ratePerSecond: number };
    /** The bound on the quiet-key ratio, when `bound` was set. */
    bound?: BoundResult;
    /** The cost decomposition, when `costRate` was set. */
    cost?: CostResult;
    options: Required<Omit<AuthBenchOptions, "only">>;
    /** Every goal with its figure ({@link GOALS}). */
    goals: GoalResult[];
    /** Descriptions of the goals missed (empty: all met); `npm run bench` exits non-zero when any is. */
    goalsMissed: string[];
}

/** The goals, each a bound on one figure of the run. */
export const GOALS = {
    /** auth ÷ floor checks/s, one busy key, at each closed-loop concurrency: at least. */
    busyRatio: 0.7,
    /** auth ÷ floor checks/s over `spreadKeys` quiet keys: at least. */
    spreadRatio: 0.6,
    /** redis-server CPU per check on the quiet-key (spread) path, µs: at most. */
    quietRedisUs: 20,
    /** Paced p99 auth − floor, ms: at most. */
    pacedP99DeltaMs: 1,
} as const;

/** One goal's outcome. */
export interface GoalResult {
    goal: string;
    figure: number;
    /** e.g. `>= 0.70x`. */
    bound: string;
    met: boolean;
}

/** The goals of a run with their figures (a setting not run yields no row). */
export function evaluateGoals(r: Omit<AuthBenchResult, "goals" | "goalsMissed">): GoalResult[] {
    const out: GoalResult[] = [];
    for (const s of r.closed) {
        if (s.floor && s.auth) {
            const f = s.auth.checksPerSecond / s.floor.checksPerSecond;
            out.push({
                goal: `checks/s auth / floor, busy key, ${s.setting}`,
                figure: f,
                bound: `>= ${GOALS.busyRatio.toFixed(2)}x`,
                met: f >= GOALS.busyRatio,
            });
        }
    }
    if (r.spread?.floor && r.spread.auth) {
        const f = r.spread.auth.checksPerSecond / r.spread.floor.checksPerSecond;
        out.push({
            goal: `checks/s auth / floor, ${r.spread.setting}`,
            figure: f,
            bound: `>= ${GOALS.spreadRatio.toFixed(2)}x`,
            met: f >= GOALS.spreadRatio,
        });
    }
    if (r.spread?.auth?.redisUsPerCheck !== undefined) {
        const u = r.spread.auth.redisUsPerCheck;
        out.push({
            goal: `redis CPU per check, quiet keys (${r.spread.setting})`,
            figure: u,
            bound: `<= ${GOALS.quietRedisUs} us`,
            met: u <= GOALS.quietRedisUs,
        });
    }
    if (r.paced?.floor && r.paced.auth) {
        const d = r.paced.auth.p99Ms - r.paced.floor.p99Ms;
        out.push({
            goal: `p99 auth - floor, ${r.paced.setting}`,
            figure: d,
            bound: `<= ${GOALS.pacedP99DeltaMs.toFixed(2)} ms`,
            met: d <= GOALS.pacedP99DeltaMs,
        });
    }
    return out;
}

const MODEL = "meta-llama/Llama-3.3-70B-Instruct";
/** Lease TTL of the service under test, s: how long a request "lasts" when nothing releases its lease. */
export const BENCH_LEASE_TTL_S = 2;
const SECRET = "sk-bench-0123456789abcdef";

/**
 * Load generator (plain JS, run as a child process so that the server process's CPU time is the server's
 * alone). rate > 0: open loop at that rate; else closed loop.
 */
const LOADGEN = `
const http = require("http");
const workerData = JSON.parse(process.argv[1]);
const parentPort = { postMessage: (m) => process.send(m) };
const { port, path, headerSets, body, concurrency, durationMs, warmupMs, rate } = workerData;
/** Requests sent so far; request i uses header set i mod n (one API key each). */
let sent = 0;
const agent = new http.Agent({ keepAlive: true, maxSockets: rate > 0 ? 256 : concurrency });
function once(t0) {
  return new Promise((resolve) => {
    const done = (status) => resolve([status, Number(process.hrtime.bigint() - t0) / 1e6]);
    const headers = headerSets[sent++ % headerSets.length];
    const req = http.request({ host: "127.0.0.1", port, path, method: "POST", headers, agent }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode));
    });
    req.on("error", () => done(0));
    req.end(body);
  });
}
async function closed(ms) {
  const end = Date.now() + ms;
  const latencies = [];
  let errors = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < end) {
      const [status, ms] = await once(process.hrtime.bigint());
      if (status === 200) latencies.push(ms); else errors++;
    }
  }));
  return { latencies, errors };
}
async function paced(ms) {
  const latencies = [];
  let errors = 0;
  const pending = [];
  const start = process.hrtime.bigint();
  const intervalNs = 1e9 / rate;
  const total = Math.floor(rate * ms / 1000);
  let scheduledCount = 0;
  await new Promise((resolve) => {
    const tick = () => {
      const now = process.hrtime.bigint();
      while (scheduledCount < total && start + BigInt(Math.round(scheduledCount * intervalNs)) <= now) {
        const scheduled = start + BigInt(Math.round(scheduledCount * intervalNs));
        scheduledCount++;
        pending.push(once(scheduled).then(([status, ms]) => { if (status === 200) latencies.push(ms); else errors++; }));
      }
      if (scheduledCount < total) setTimeout(tick, 0); else resolve();
    };
    tick();
  });
  await Promise.all(pending);
  return { latencies, errors };
}
(async () => {
  const phase = rate > 0 ? paced : closed;
  await phase(warmupMs);
  parentPort.postMessage({ type: "start" });
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  const r = await phase(durationMs);
  const cpu = process.cpuUsage(c0);
  const elapsedS = Number(process.hrtime.bigint() - t0) / 1e9;
  parentPort.postMessage({ type: "end" });
  agent.destroy();
  const cpuUs = cpu.user + cpu.system;
  process.send({ type: "result", latencies: r.latencies, errors: r.errors, elapsedS, cpuUs }, () => process.disconnect());
})();
`;

/** Reads redis-server's own CPU seconds (user + sys) from INFO cpu. */
export type CpuProbe = () => Promise<number>;
/** Reads how many times redis-server has run each command, from INFO commandstats (`evalsha`, `hset`, …). */
export type CallProbe = () => Promise<Record<string, number>>;

/** Commands of the benchmark itself and of the client's connection set-up, left out of the per-check counts. */
const NOT_CHECKS = /^(info|config|flushall|client|hello|select|ping|script|command)(\||$)/;

async function load(
    port: number,
    urlPath: string,
    body: string,
    o: { durationS: number; warmupS: number },
    concurrency: number,
    rate = 0,
    redisCpu?: CpuProbe,
    secrets: readonly string[] = [SECRET],
    scriptCalls?: CallProbe,
): Promise<TargetResult> {
    const headerSets = secrets.map((k) => ({
        authorization: `Bearer ${k}`,
        "content-type": "application/json",
        "content-length": String(Buffer.byteLength(body)),
    }));
    const child = spawn(
        process.execPath,
        [
            "-e",
            LOADGEN,
            JSON.stringify({
                port,
                path: urlPath,
                headerSets,
                body,
                concurrency,
                durationMs: o.durationS * 1000,
                warmupMs: o.warmupS * 1000,
                rate,
            }),
        ],
        { stdio: ["ignore", "inherit", "inherit", "ipc"] },
    );
    // CPU of this process (the server under test; the load generator is another process) and of redis-server
    // during the measured phase: less sensitive to a loaded machine than checks/s and latency.
    let cpu0: NodeJS.CpuUsage | undefined;
    let cpu: NodeJS.CpuUsage | undefined;
    let redis0: Promise<number> | undefined;
    let redis1: Promise<number> | undefined;
    let calls0: Promise<Record<string, number>> | undefined;
    let calls1: Promise<Record<string, number>> | undefined;
    type Result = { latencies: number[]; errors: number; elapsedS: number; cpuUs: number };
    const r = await new Promise<Result>((resolve, reject) => {
        child.on("message", (m: { type: string } & Result) => {
            if (m.type === "start") {
                cpu0 = process.cpuUsage();
                redis0 = redisCpu?.();
                calls0 = scriptCalls?.();
            }
            if (m.type === "end") {
                cpu = process.cpuUsage(cpu0);
                redis1 = redisCpu?.();
                calls1 = scriptCalls?.();
            }
            if (m.type === "result") resolve(m);
        });
        child.once("error", reject);
        // "close" comes after the IPC channel is drained, so a result message has been handled by then.
        child.once("close", (code) => reject(new Error(`load generator exited with ${code} before sending its result`)));
    });
    const redisCpuS = redis0 && redis1 ? (await redis1) - (await redis0) : undefined;
    const perCommand: Record<string, number> = {};
    if (calls0 && calls1) {
        const [a, b] = [await calls0, await calls1];
        for (const [k, v] of Object.entries(b)) if (v - (a[k] ?? 0) > 0 && !NOT_CHECKS.test(k)) perCommand[k] = v - (a[k] ?? 0);
    }
    const calls = calls0 && calls1 ? (perCommand.evalsha ?? 0) + (perCommand.eval ?? 0) : undefined;
    const sorted = Float64Array.from(r.latencies).sort();
    const pct = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN);
    const n = sorted.length + r.errors;
    return {
        checksPerSecond: sorted.length / r.elapsedS,
        p50Ms: pct(0.5),
        p99Ms: pct(0.99),
        errors: r.errors,
        serverUsPerCheck: cpu && n ? (cpu.user + cpu.system) / n : NaN,
        clientUsPerCheck: n ? r.cpuUs / n : NaN,
        redisUsPerCheck: redisCpuS === undefined || !n ? undefined : (redisCpuS * 1e6) / n,
        checksPerScriptCall: calls ? n / calls : undefined,
        commandsPerCheck:
            calls0 && calls1 && n
                ? Object.fromEntries(
                      Object.entries(perCommand)
                          .filter(([k]) => k !== "evalsha" && k !== "eval")
                          .map(([k, v]) => [k, v / n]),
                  )
                : undefined,
    };
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
 * The Redis floor's script: reads nothing, writes nothing, answers one slot per check (as
 * services/shared/limits.ts `CHECK_COUNTERS_BATCH_LUA` answers an admitted check). ARGV begins with the number of
 * limit sets and the sets (4 each), then the number of contexts and their sets (2 each); KEYS begin with 4 keys per
 * context; then 2 keys and 6 arguments per check, the counters check's layout.
 */
const REDIS_FLOOR_LUA = `
local ctxs = 2 + tonumber(ARGV[1]) * 4
local ctxKeys = tonumber(ARGV[ctxs]) * 4
local out = {}
for n = 1, (#KEYS - ctxKeys) / 2 do out[n] = 1 end
return out
`;

/** Listens on a loopback port with the floor's keep-alive; `close` stops the server and drops its Redis connection. */
async function listenFloor(server: http.Server, redis: Redis): Promise<{ server: http.Server; close: () => Promise<void> }> {
    server.keepAliveTimeout = 620_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        server,
        close: async () => {
            await new Promise<void>((resolve) => {
                server.close(() => resolve());
                server.closeAllConnections();
            });
            redis.disconnect();
        },
    };
}

/**
 * services/shared/limits.ts `CHECK_COUNTERS_BATCH_LUA` less the lease marker and the shared tiers, for the bound
 * ({@link BoundResult}; not a limiter: it keeps no lease marker and checks no shared tier). An optimistic estimate of
 * what a change of the data layout could take out of a quiet key's check: a release must still count once somewhere,
 * and the shared tiers out of the check need grants of those tiers; it keeps the key tier's token GET. It takes out:
 * - the lease marker: the admission's field in the key tier's HASH (its two HSET arguments), which lets a release
 *   count once;
 * - the model and team tiers: the per-check work on the HASHes and token counters a check shares with the other
 *   checks of its call (what replicas holding grants of the shared tiers would leave out).
 * What is left is the key tier's rps and concurrency counters and its token counter: one HMGET, one GET, one HSET.
 * @throws Error when the shipped script no longer has the lines this takes out (the bound would measure something
 *   else).
 */
export function strippedCheckScript(script: string = CHECK_COUNTERS_BATCH_LUA): string {
    const edits: [RegExp, string, number][] = [
        // the marker's field and value in the direct key tier's HSETs
        [/, lease, mark\)/g, ")", 4],
        // the model and team tiers: neither checked nor written (a direct key tier's loops run over them only)
        [/for i = 1, last do/g, "for i = 3, last do", 2],
    ];
    let out = script;
    for (const [re, to, count] of edits) {
        const found = out.match(re)?.length ?? 0;
        if (found !== count) throw new Error(`strippedCheckScript: expected ${count} of ${re} in the admission script, found ${found}`);
        out = out.replace(re, to);
    }
    return out;
}

/**
 * The limits floor: the no-op floor ({@link startFloor}) that, before it answers, makes the auth service's own Redis
 * check of the request's API key (tenant and team `bench`, every tier {@link UNLIMITED}): services/shared/limits.ts
 * `AdmissionBatcher` with the service's batching hold, the `counters` store and the lease TTL of the run, so Redis runs
 * the same script on the same data as for the auth service's quiet checks. No policy, no body parse, no identity
 * headers, no metrics, no grants (a quiet key gets none). Against the script floor ({@link BoundResult}), which sends
 * the same script its calls by hand, it measures the batcher's own Node-side cost; the auth service's quiet checks
 * can come near it, never above.
 * @param holdMs the service's `AUTH_REDIS_BATCH_HOLD_MS` (services/auth/config.ts).
 * @param leaseTtlMs the service's lease TTL, ms.
 */
async function startLimitsFloor(
    redisUrl: string,
    holdMs: number,
    leaseTtlMs: number,
): Promise<{ server: http.Server; close: () => Promise<void> }> {
    const redis = new Redis(redisUrl);
    const batcher = new AdmissionBatcher(redis, undefined, undefined, undefined, holdMs);
    const limits: TierLimits = { model: UNLIMITED, team: UNLIMITED, key: UNLIMITED };
    // per API key its tier ids and admission keys, built once, as the service keeps them per (key, model) pair
    const pairs = new Map<string, { ids: TierIds; fixed: readonly string[] }>();
    const server = http.createServer((req, res) => {
        const key = (req.headers.authorization ?? "").slice(-6);
        req.on("data", () => undefined);
        req.on("end", () => {
            let pair = pairs.get(key);
            if (!pair) {
                const ids = tierIds({ model: MODEL, tenant: "bench", team: "bench", keyId: `floor-${key}` });
                pair = { ids, fixed: admissionKeys(ids) };
                pairs.set(key, pair);
            }
            batcher.check(pair.ids, limits, newLeaseToken(), Date.now(), leaseTtlMs, 1, "counters", pair.fixed).then(
                (d) => res.writeHead(d.allowed ? 200 : 429, { "content-length": "0" }).end(),
                (err: unknown) => {
                    res.writeHead(503, { "content-length": "0" }).end();
                    process.stderr.write(`limits floor: ${(err as Error).message}\n`);
                },
            );
        });
    });
    return listenFloor(server, redis);
}

/**
 * The Redis floor: the no-op floor ({@link startFloor}) that, before it answers, makes one Redis script call per
 * event-loop turn for the checks that arrived in it, one call in flight at a time (as services/shared/limits.ts
 * `AdmissionBatcher` batches): per check the two keys and six arguments the counters check sends (a key tier HASH and
 * token counter named after the request's API key, a lease id, now, the expiry bucket), one limit set and one context,
 * answered by `script`: {@link REDIS_FLOOR_LUA} (no limit logic), or an admission script for the script floors
 * ({@link BoundResult}). No policy, no identity headers.
 */
async function startRedisFloor(
    redisUrl: string,
    script: string = REDIS_FLOOR_LUA,
): Promise<{ server: http.Server; close: () => Promise<void> }> {
    const redis = new Redis(redisUrl);
    const sha = String(await redis.script("LOAD", script));
    let queue: { key: string; res: http.ServerResponse }[] = [];
    let scheduled = false;
    let inFlight = false;
    let seq = 0;
    const flush = () => {
        scheduled = false;
        if (inFlight || !queue.length) return;
        const batch = queue;
        queue = [];
        const now = Date.now();
        const bucket = Math.ceil((now + BENCH_LEASE_TTL_S * 1000) / 1000) * 1000;
        const window = Math.floor(now / 60_000) * 60;
        const keys = ["rl:c:model:floor", `rl:tok:model:floor:${window}`, "rl:c:team:floor", `rl:tok:team:floor:${window}`];
        const args: (string | number)[] = [1, 1e9, 1e9, 1e12, 60, 1, 1, 1];
        for (const c of batch) {
            keys.push(`rl:c:key:${c.key}`, `rl:tok:key:${c.key}:${window}`);
            args.push(now, `h.${bucket.toString(36)}.floor${(seq++).toString(36)}`, 1, bucket, 1, 1);
        }
        inFlight = true;
        redis.evalsha(sha, keys.length, ...keys, ...args).then(
            () => {
                inFlight = false;
                for (const c of batch) c.res.writeHead(200, { "content-length": "0" }).end();
                flush();
            },
            (err: unknown) => {
                inFlight = false;
                for (const c of batch) c.res.writeHead(503, { "content-length": "0" }).end();
                process.stderr.write(`redis floor: ${(err as Error).message}\n`);
                flush();
            },
        );
    };
    const server = http.createServer((req, res) => {
        const key = (req.headers.authorization ?? "").slice(-6);
        req.on("data", () => undefined);
        req.on("end", () => {
            queue.push({ key, res });
            if (!scheduled && !inFlight) {
                scheduled = true;
                setImmediate(flush);
            }
        });
    });
    return listenFloor(server, redis);
}

/**
 * Runs floor and auth alternately at each setting and prints a side-by-side table with the auth/floor ratios.
 * Starts its own redis-server and s3rver on loopback ports and stops them afterwards.
 * @throws when redis-server is not installed, or when either target answered anything but 200.
 */
export async function runAuthBench(options: AuthBenchOptions = {}): Promise<AuthBenchResult> {
    const { only, ...rest } = options;
    const o: Required<Omit<AuthBenchOptions, "only">> = {
        durationS: 5,
        warmupS: 1,
        concurrencies: [16, 64],
        pacedFraction: 0.1,
        spreadKeys: 1000,
        rounds: 3,
        pacedRounds: 5,
        contentBytes: 4096,
        env: {},
        costRate: 0,
        bound: false,
        ...rest,
    };
    if (o.costRate > 0 || o.bound) {
        o.concurrencies = [];
        o.pacedFraction = 0;
        o.spreadKeys ||= 1000;
    }
    const body = JSON.stringify({
        model: MODEL,
        stream: true,
        max_tokens: 512,
        messages: [{ role: "user", content: "x".repeat(o.contentBytes) }],
    });
    const [redis, s3] = await Promise.all([startRedis(), startS3()]);
    const tmp = tempDir("auth-bench-");
    const floor = await startFloor();
    const redisFloor = o.spreadKeys > 0 ? await startRedisFloor(redis.url) : undefined;
    const scriptFloor = o.spreadKeys > 0 && !(o.costRate > 0) ? await startRedisFloor(redis.url, CHECK_COUNTERS_BATCH_LUA) : undefined;
    const strippedFloor = o.bound ? await startRedisFloor(redis.url, strippedCheckScript()) : undefined;
    let limitsFloor: Awaited<ReturnType<typeof startLimitsFloor>> | undefined;
    try {
        const hub = hubKeys();
        const spoke = "bench";
        const spreadSecrets = Array.from({ length: o.spreadKeys }, (_, i) => `sk-bench-spread-${String(i).padStart(6, "0")}`);
        await publishBundle(
            s3,
            hub,
            spoke,
            1,
            makePolicy({
                models: { [MODEL]: UNLIMITED },
                keys: [
                    { id: "bench", secret: SECRET, tenant: "bench", team: "bench", models: [MODEL] },
                    ...spreadSecrets.map((secret, i) => ({ id: `spread-${i}`, secret, tenant: "bench", team: "bench", models: [MODEL] })),
                ],
            }),
        );
        const config = testConfig({
            spoke,
            publicKey: hub.publicKey,
            s3Endpoint: s3.endpoint,
            redisUrl: redis.url,
            cachePath: path.join(tmp.dir, "bundle.json"),
            env: { AUTH_LEASE_TTL_SECONDS: String(BENCH_LEASE_TTL_S), ...o.env },
        });
        const svc = await startAuthService(config, { log: () => undefined });
        if (o.bound) limitsFloor = await startLimitsFloor(redis.url, config.redis.batchHoldMs, config.leaseTtlMs);
        const admin = new Redis(redis.url);
        const scriptCalls: CallProbe = async () => {
            const info = await admin.info("commandstats");
            return Object.fromEntries([...info.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)].map((m) => [m[1], Number(m[2])]));
        };
        const redisCpu: CpuProbe = async () => {
            const info = await admin.info("cpu");
            const v = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
            return v("used_cpu_user") + v("used_cpu_sys");
        };
        /** Each auth run starts from an empty Redis (limiter state, ZSETs), not the previous run's. */
        const fresh = async <T>(run: () => Promise<T>): Promise<T> => {
            await admin.flushall();
            return run();
        };
        const urlPath = "/authz/v1/chat/completions";
        const floorPort = (floor.address() as AddressInfo).port;
        const result: AuthBenchResult = { closed: [], options: o, goals: [], goalsMissed: [] };
        /** `rounds` floor/auth pairs, alternating; keeps the median pair by `figure`. */
        const pairs = async (
            setting: string,
            rounds: number,
            runFloor: () => Promise<TargetResult>,
            runAuth: () => Promise<TargetResult>,
            figure: (floor: TargetResult, auth: TargetResult) => number,
            diagnostics: { redisFloor?: () => Promise<TargetResult>; scriptFloor?: () => Promise<TargetResult> } = {},
        ): Promise<SettingResult> => {
            type Round = {
                floor?: TargetResult;
                auth?: TargetResult;
                redisFloor?: TargetResult;
                scriptFloor?: TargetResult;
                figure: number;
            };
            const got: Round[] = [];
            for (let i = 0; i < rounds; i++) {
                const f = only === "auth" ? undefined : await runFloor();
                const a = only === "floor" ? undefined : await runAuth();
                const rf = only || !diagnostics.redisFloor ? undefined : await diagnostics.redisFloor();
                const sf = only || !diagnostics.scriptFloor ? undefined : await diagnostics.scriptFloor();
                got.push({ floor: f, auth: a, redisFloor: rf, scriptFloor: sf, figure: f && a ? figure(f, a) : NaN });
            }
            const median = [...got].sort((x, y) => x.figure - y.figure)[Math.floor(got.length / 2)];
            return {
                setting,
                floor: median.floor,
                auth: median.auth,
                ...(median.redisFloor ? { redisFloor: median.redisFloor } : {}),
                ...(median.scriptFloor ? { scriptFloor: median.scriptFloor } : {}),
                figures: got.map((g) => g.figure),
            };
        };
        const throughput = (f: TargetResult, a: TargetResult) => a.checksPerSecond / f.checksPerSecond;
        try {
            if (o.costRate > 0 && redisFloor) {
                const rate = o.costRate;
                const runs: Record<keyof Omit<CostResult, "ratePerSecond">, TargetResult[]> = {
                    floor: [],
                    redisFloor: [],
                    busy: [],
                    quiet: [],
                };
                const redisFloorPort = (redisFloor.server.address() as AddressInfo).port;
                for (let i = 0; i < o.rounds; i++) {
                    runs.floor.push(await load(floorPort, urlPath, body, o, 0, rate, undefined, spreadSecrets));
                    runs.redisFloor.push(
                        await fresh(() => load(redisFloorPort, urlPath, body, o, 0, rate, redisCpu, spreadSecrets, scriptCalls)),
                    );
                    runs.busy.push(await fresh(() => load(svc.port, urlPath, body, o, 0, rate, redisCpu, undefined, scriptCalls)));
                    runs.quiet.push(await fresh(() => load(svc.port, urlPath, body, o, 0, rate, redisCpu, spreadSecrets, scriptCalls)));
                }
                result.cost = {
                    ratePerSecond: rate,
                    floor: medianTarget(runs.floor),
                    redisFloor: medianTarget(runs.redisFloor),
                    busy: medianTarget(runs.busy),
                    quiet: medianTarget(runs.quiet),
                };
            }
            if (o.bound && redisFloor && scriptFloor && strippedFloor && limitsFloor) {
                const quiet = (port: number) => () =>
                    fresh(() => load(port, urlPath, body, o, 16, 0, redisCpu, spreadSecrets, scriptCalls));
                const targets = {
                    floor: () => load(floorPort, urlPath, body, o, 16, 0, undefined, spreadSecrets),
                    redisFloor: quiet(portOf(redisFloor.server)),
                    scriptFloor: quiet(portOf(scriptFloor.server)),
                    strippedFloor: quiet(portOf(strippedFloor.server)),
                    limitsFloor: quiet(portOf(limitsFloor.server)),
                    auth: quiet(svc.port),
                };
                const runs = Object.fromEntries(Object.keys(targets).map((k) => [k, [] as TargetResult[]])) as Record<
                    keyof BoundResult,
                    TargetResult[]
                >;
                for (let i = 0; i < o.rounds; i++)
                    for (const [k, run] of Object.entries(targets) as [keyof BoundResult, () => Promise<TargetResult>][])
                        runs[k].push(await run());
                result.bound = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, medianTarget(v)])) as unknown as BoundResult;
            }
            for (const c of o.concurrencies) {
                result.closed.push(
                    await pairs(
                        `${c} in flight`,
                        o.rounds,
                        () => load(floorPort, urlPath, body, o, c),
                        () => fresh(() => load(svc.port, urlPath, body, o, c, 0, redisCpu, undefined, scriptCalls)),
                        throughput,
                    ),
                );
            }
            if (o.spreadKeys > 0 && !(o.costRate > 0) && !o.bound) {
                result.spread = await pairs(
                    `16 in flight, ${o.spreadKeys} keys`,
                    o.rounds,
                    () => load(floorPort, urlPath, body, o, 16, 0, undefined, spreadSecrets),
                    () => fresh(() => load(svc.port, urlPath, body, o, 16, 0, redisCpu, spreadSecrets, scriptCalls)),
                    throughput,
                    {
                        redisFloor:
                            redisFloor &&
                            (() =>
                                fresh(() =>
                                    load(portOf(redisFloor.server), urlPath, body, o, 16, 0, redisCpu, spreadSecrets, scriptCalls),
                                )),
                        scriptFloor:
                            scriptFloor &&
                            (() =>
                                fresh(() =>
                                    load(portOf(scriptFloor.server), urlPath, body, o, 16, 0, redisCpu, spreadSecrets, scriptCalls),
                                )),
                    },
                );
            }
            // the quiet setting's last target leaves a thousand keys' limiter state expiring in Redis: not the paced floor's
            await admin.flushall();
            const saturated = Math.max(...result.closed.map((r) => r.floor?.checksPerSecond ?? r.auth?.checksPerSecond ?? 0));
            if (o.pacedFraction > 0 && saturated > 0) {
                const rate = Math.max(1, Math.round(saturated * o.pacedFraction));
                result.paced = {
                    ratePerSecond: rate,
                    ...(await pairs(
                        `paced ${rate}/s`,
                        o.pacedRounds,
                        () => load(floorPort, urlPath, body, o, 0, rate),
                        () => fresh(() => load(svc.port, urlPath, body, o, 0, rate, redisCpu, undefined, scriptCalls)),
                        (f, a) => a.p99Ms - f.p99Ms,
                    )),
                };
            }
        } finally {
            admin.disconnect();
            await svc.close();
        }
        result.goals = evaluateGoals(result);
        result.goalsMissed = result.goals.filter((g) => !g.met).map((g) => `${g.goal}: ${fmt(g.figure)} (goal ${g.bound})`);
        print(result, Buffer.byteLength(body));
        const runs = [...result.closed, ...(result.spread ? [result.spread] : []), ...(result.paced ? [result.paced] : [])]
            .flatMap((r) => [r.floor, r.auth, r.redisFloor, r.scriptFloor])
            .concat(result.cost ? [result.cost.floor, result.cost.redisFloor, result.cost.busy, result.cost.quiet] : [])
            .concat(result.bound ? Object.values(result.bound) : [])
            .filter((t): t is TargetResult => !!t);
        const errors = runs.map((t) => t.errors);
        const answers = runs.reduce((n, t) => n + t.errors + t.checksPerSecond * o.durationS, 0);
        const errorCount = errors.reduce((a, b) => a + b, 0);
        // A few 503s on an overloaded machine are the fail-closed design at work (a Redis command over its
        // 100 ms timeout); more than 0.1 % of answers means the run measured errors, not checks.
        if (errorCount > 0.001 * answers) throw new Error(`benchmark saw non-200 answers (floor, auth per setting): ${errors.join(", ")}`);
        if (errorCount > 0)
            process.stdout.write(
                `note: ${errorCount} non-200 answers (floor, auth per setting: ${errors.join(", ")}), under 0.1 % of ${Math.round(answers)}\n`,
            );
        return result;
    } finally {
        await new Promise<void>((resolve) => {
            floor.close(() => resolve());
            floor.closeAllConnections();
        });
        await redisFloor?.close();
        for (const f of [scriptFloor, strippedFloor, limitsFloor]) await f?.close();
        await Promise.all([redis.stop(), s3.destroy()]);
        tmp.remove();
    }
}

function portOf(server: http.Server): number {
    return (server.address() as AddressInfo).port;
}

/** Each figure's median over `runs` (the figures of one row may then come from different runs). */
function medianTarget(runs: TargetResult[]): TargetResult {
    const med = (f: (t: TargetResult) => number | undefined): number | undefined => {
        const v = runs.map(f).filter((x): x is number => x !== undefined && !Number.isNaN(x));
        if (!v.length) return undefined;
        v.sort((a, b) => a - b);
        return v[Math.floor(v.length / 2)];
    };
    return {
        checksPerSecond: med((t) => t.checksPerSecond) ?? NaN,
        p50Ms: med((t) => t.p50Ms) ?? NaN,
        p99Ms: med((t) => t.p99Ms) ?? NaN,
        errors: runs.reduce((a, t) => a + t.errors, 0),
        serverUsPerCheck: med((t) => t.serverUsPerCheck) ?? NaN,
        clientUsPerCheck: med((t) => t.clientUsPerCheck) ?? NaN,
        redisUsPerCheck: med((t) => t.redisUsPerCheck),
        checksPerScriptCall: med((t) => t.checksPerScriptCall),
    };
}

/** The bound's lines ({@link BoundResult}). */
function boundLines(b: BoundResult, keys: number, row: (name: string, ...cols: string[]) => string): string[] {
    const n = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(1));
    const of = (t: TargetResult) => t.checksPerSecond / b.floor.checksPerSecond;
    const lines = [
        `the bound on the quiet-key ratio, 16 in flight over ${keys} keys (medians; each floor does less than the auth service):`,
    ];
    for (const [name, t] of [
        ["no-op floor", b.floor],
        ["redis floor (script answers only)", b.redisFloor],
        ["script floor (shipped script)", b.scriptFloor],
        ["stripped floor (less marker, shared tiers)", b.strippedFloor],
        ["limits floor (service's batcher + script)", b.limitsFloor],
        ["auth service", b.auth],
    ] as const)
        lines.push(
            row(
                `  ${name}`,
                t.checksPerSecond.toFixed(0),
                `${of(t).toFixed(2)}x`,
                n(t.clientUsPerCheck),
                n(t.serverUsPerCheck),
                n(t.redisUsPerCheck),
                n(t.checksPerScriptCall),
            ),
        );
    const goal = GOALS.spreadRatio;
    const verdict = (t: TargetResult) => `${of(t) >= goal ? "reaches" : "is below"} the ${goal.toFixed(2)}x goal: ${of(t).toFixed(3)}x`;
    lines.push(
        `  the quiet check's Redis work with nothing else (script floor) ${verdict(b.scriptFloor)}`,
        `  less the lease marker and the shared tiers (stripped floor, an optimistic estimate of a data-layout change) it ${verdict(b.strippedFloor)}`,
        `  the service's batcher around the same script (limits floor) costs ${(of(b.scriptFloor) - of(b.limitsFloor)).toFixed(2)}x of the floor against the script floor (medians per target, not paired)`,
        `  the auth service reaches ${(b.auth.checksPerSecond / b.scriptFloor.checksPerSecond).toFixed(2)} of the script floor (${of(b.auth).toFixed(2)}x of the floor)`,
    );
    return lines;
}

/** The cost decomposition's lines ({@link CostResult}). */
function costLines(c: CostResult, row: (name: string, ...cols: string[]) => string): string[] {
    const n = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(1));
    const lines = [`where a quiet-key check's CPU goes, every target paced at ${c.ratePerSecond} checks/s (medians):`];
    for (const [name, t] of [
        ["no-op floor", c.floor],
        ["redis floor", c.redisFloor],
        ["auth, busy key (grants)", c.busy],
        ["auth, quiet keys", c.quiet],
    ] as const)
        lines.push(
            row(
                `  ${name}`,
                t.checksPerSecond.toFixed(0),
                n(t.clientUsPerCheck),
                n(t.serverUsPerCheck),
                n(t.redisUsPerCheck),
                n(t.checksPerScriptCall),
            ),
        );
    const s = (t: TargetResult) => t.serverUsPerCheck;
    const roundTrip = s(c.redisFloor) - s(c.floor);
    const http = s(c.busy) - s(c.floor);
    const own = s(c.quiet) - s(c.busy) - roundTrip;
    const script = (c.quiet.redisUsPerCheck ?? NaN) - (c.redisFloor.redisUsPerCheck ?? NaN);
    lines.push(
        `  service CPU per check over the floor: a Redis round trip with no limit logic (redis floor - floor) ${roundTrip.toFixed(1)} us; ` +
            `key, body, model, grant and answer (busy - floor) ${http.toFixed(1)} us; the quiet check's own work ` +
            `(quiet - busy - round trip: admission, the script's arguments and reply, its client work) ${own.toFixed(1)} us`,
        `  redis-server CPU per check: the limit script's work over a script that only answers (quiet - redis floor) ${script.toFixed(1)} us`,
    );
    return lines;
}

function print(r: AuthBenchResult, bodyBytes: number): void {
    const row = (name: string, ...cols: string[]) => `${name.padEnd(40)}${cols.map((c) => c.padStart(11)).join("")}`;
    const n = (x: number | undefined, d: number) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(d));
    const lines = [
        `auth service ext_authz check vs no-op Node HTTP floor (loopback, ${r.options.durationS} s per run after ` +
            `${r.options.warmupS} s warm-up, ${bodyBytes} B body, redis-server on loopback, ${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)})`,
        row("setting / target", "checks/s", "p50 ms", "p99 ms", "client us", "server us", "redis us", "per call", "redis cmds"),
    ];
    if (r.cost) {
        lines[1] = row("target", "checks/s", "client us", "server us", "redis us", "per call");
        lines.push(...costLines(r.cost, row));
        process.stdout.write(`${lines.join("\n")}\n`);
        return;
    }
    if (r.bound) {
        lines[1] = row("target", "checks/s", "of floor", "client us", "server us", "redis us", "per call");
        lines.push(...boundLines(r.bound, r.options.spreadKeys, row));
        process.stdout.write(`${lines.join("\n")}\n`);
        return;
    }
    const settings = [...r.closed, ...(r.spread ? [r.spread] : []), ...(r.paced ? [r.paced] : [])];
    for (const s of settings) {
        for (const [name, t] of [
            ["no-op floor", s.floor],
            ["auth service", s.auth],
            ["redis floor", s.redisFloor],
            ["script floor", s.scriptFloor],
        ] as const) {
            if (t)
                lines.push(
                    row(
                        `${s.setting}: ${name}`,
                        n(t.checksPerSecond, 0),
                        n(t.p50Ms, 2),
                        n(t.p99Ms, 2),
                        n(t.clientUsPerCheck, 1),
                        n(t.serverUsPerCheck, 1),
                        n(t.redisUsPerCheck, 1),
                        n(t.checksPerScriptCall, 1),
                        n(t.commandsPerCheck && Object.values(t.commandsPerCheck).reduce((a, b) => a + b, 0), 2),
                    ),
                );
        }
    }
    lines.push(
        "(client us: the load generator's CPU per check; server us: server process CPU per check; redis us: redis-server CPU per check;",
    );
    lines.push(
        " all three less sensitive to machine load than checks/s; per call: checks per Redis script call; redis cmds: commands the scripts run per check, script calls not counted)",
    );
    const quiet = r.spread?.auth?.commandsPerCheck;
    if (quiet)
        lines.push(
            `redis commands per quiet-key check (${r.spread!.setting}): ${Object.entries(quiet)
                .sort((a, b) => b[1] - a[1])
                .map(([k, v]) => `${k} ${v.toFixed(2)}`)
                .join(", ")}`,
        );
    lines.push("ratios (goal):");
    const all = (s: SettingResult, unit: string) =>
        s.figures && s.figures.length > 1 ? `; median of ${s.figures.map((f) => `${f.toFixed(2)}${unit}`).join(", ")}` : "";
    for (const s of r.closed) {
        if (s.floor && s.auth)
            lines.push(
                `  ${s.setting}: checks/s auth / floor = ${(s.auth.checksPerSecond / s.floor.checksPerSecond).toFixed(2)}x (goal >= 0.70x${all(s, "x")})`,
            );
    }
    if (r.spread?.floor && r.spread.auth) {
        lines.push(
            `  ${r.spread.setting}: checks/s auth / floor = ${(r.spread.auth.checksPerSecond / r.spread.floor.checksPerSecond).toFixed(2)}x ` +
                `(goal >= ${GOALS.spreadRatio.toFixed(2)}x${all(r.spread, "x")}; each key too quiet for a grant, so one Redis check per request)`,
        );
    }
    if (r.spread?.auth?.redisUsPerCheck !== undefined) {
        lines.push(
            `  ${r.spread.setting}: redis-server CPU per check = ${r.spread.auth.redisUsPerCheck.toFixed(1)} us (goal <= ${GOALS.quietRedisUs} us)`,
        );
    }
    const rf = r.spread?.redisFloor;
    if (rf && r.spread?.floor && r.spread.auth)
        lines.push(
            `  ${r.spread.setting}, diagnostic (no goal): redis floor / floor = ${(rf.checksPerSecond / r.spread.floor.checksPerSecond).toFixed(2)}x, ` +
                `redis-server CPU per check ${n(rf.redisUsPerCheck, 1)} us (a Redis round trip per check carrying the check's keys and ` +
                `arguments, no limit logic: the rest of the gap is the service's and the script's work)`,
        );
    const sf = r.spread?.scriptFloor;
    if (sf && r.spread?.floor && r.spread.auth) {
        const bound = sf.checksPerSecond / r.spread.floor.checksPerSecond;
        lines.push(
            `  ${r.spread.setting}, bound (no goal): script floor / floor = ${bound.toFixed(2)}x, redis-server CPU per check ` +
                `${n(sf.redisUsPerCheck, 1)} us (the Redis floor's calls answered by the shipped admission script: a quiet ` +
                `check's Redis work and no service work, an upper estimate for a Node service making this check per quiet request; ` +
                `the auth service reaches ${(r.spread.auth.checksPerSecond / sf.checksPerSecond).toFixed(2)} of it; npm run bench -- auth-bound measures the floors around it)`,
        );
    }
    const ceiling = r.spread?.auth && r.spread.floor ? cpuCeiling(r.spread.auth, r.spread.floor) : undefined;
    if (ceiling)
        lines.push(
            `  ${r.spread!.setting}, diagnostic (no goal): CPU per quiet check, load generator + service + redis-server = ` +
                `${ceiling.usPerCheck.toFixed(0)} us; the machine's ${os.cpus().length} CPUs allow at most ${ceiling.checksPerSecond.toFixed(0)} checks/s ` +
                `at that cost (${ceiling.ofFloor.toFixed(2)}x of the floor; measured ${ceiling.busy.toFixed(0)} % of it); ` +
                `${GOALS.spreadRatio.toFixed(2)}x needs at most ${ceiling.goalUs.toFixed(0)} us per check in all`,
        );
    if (r.paced?.floor && r.paced.auth) {
        const p = r.paced;
        lines.push(
            `  ${p.setting} (a tenth of the floor's saturated rate): p99 auth / floor = ${(p.auth!.p99Ms / p.floor!.p99Ms).toFixed(2)}x, ` +
                `auth - floor = ${(p.auth!.p99Ms - p.floor!.p99Ms).toFixed(2)} ms (goal <= 1.00 ms${all(p, " ms")})`,
        );
    }
    const missed = r.goals.filter((g) => !g.met).length;
    lines.push(
        `summary: ${r.goals.length - missed} of ${r.goals.length} goals met (machine: ${os.cpus().length} CPUs, load average ${os
            .loadavg()
            .map((x) => x.toFixed(2))
            .join(" ")})`,
    );
    for (const g of r.goals) lines.push(`  ${g.met ? "met   " : "MISSED"} ${g.goal}: ${fmt(g.figure)} (goal ${g.bound})`);
    process.stdout.write(`${lines.join("\n")}\n`);
}

/**
 * The CPU-bound ceiling of a target: the checks/s the machine's CPUs could serve if the load generator, the server
 * and redis-server used them fully at the CPU per check the run measured (µs), as a ratio of the floor's measured
 * checks/s, and the CPU per check (µs, the three together) at which {@link GOALS}.spreadRatio of the floor fits.
 * A diagnostic: the run's own figure can only come near it, never above, while the per-check costs stay as they are.
 */
export function cpuCeiling(
    t: TargetResult,
    floor: TargetResult,
    cpus = os.cpus().length,
): { usPerCheck: number; checksPerSecond: number; ofFloor: number; busy: number; goalUs: number } | undefined {
    const us = t.clientUsPerCheck + t.serverUsPerCheck + (t.redisUsPerCheck ?? 0);
    if (!Number.isFinite(us) || us <= 0 || !(floor.checksPerSecond > 0)) return undefined;
    const checksPerSecond = (cpus * 1e6) / us;
    return {
        usPerCheck: us,
        checksPerSecond,
        ofFloor: checksPerSecond / floor.checksPerSecond,
        busy: (100 * t.checksPerSecond) / checksPerSecond,
        goalUs: (cpus * 1e6) / (GOALS.spreadRatio * floor.checksPerSecond),
    };
}

function fmt(x: number): string {
    return Number.isFinite(x) ? x.toFixed(2) : String(x);
}

if (require.main === module) {
    runAuthBench().then(
        (r) => process.exit(r.goalsMissed.length ? 1 : 0),
        (err: unknown) => {
            process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
            process.exit(1);
        },
    );
}
