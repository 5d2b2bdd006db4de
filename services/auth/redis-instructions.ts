import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Redis } from "ioredis";
import { tierIds } from "../shared/identity";
import { AdmissionBatcher, admissionKeys, newLeaseToken, type TierLimit } from "../shared/limits";
import { BENCH_LEASE_TTL_S } from "./bench";
import { freePort } from "./test/harness";

/**
 * Redis instructions per quiet-key admission check (`npm run bench -- auth-redis`): the `counters` store's check script
 * as the service sends it (services/shared/limits.ts `AdmissionBatcher`), run by a redis-server under valgrind's
 * callgrind, which counts the instructions it executes. Unlike CPU time this count does not move with the machine's
 * load, so a change to the script can be judged on a busy machine: the figure moves only when the work does.
 *
 * The mix is the auth bench's quiet-key run (services/auth/bench.ts): {@link KEYS} keys of one model and team, each
 * check the next key, lease TTL `BENCH_LEASE_TTL_S` and no release (so expired buckets are swept, as there), on a
 * simulated clock at {@link RATE} checks a second (each key checked 7.5 times a second) that starts on a second
 * boundary an hour ahead of the wall clock (Redis expires keys by its own clock, which must not overtake the simulated
 * one while valgrind slows it down). Checks go in batches of 1, 6 (what 16 in flight gives in the auth bench) and 16
 * per script call; each batch size runs {@link WARM_S} simulated seconds unmeasured (the first leases' buckets expire
 * after 3 s: TTL rounded up to the second), then {@link MEASURED_S} measured (whole seconds, so every run sweeps each
 * key's buckets the same number of times: once a second, as in steady state). From the 6 and 16 figures it derives the cost per
 * check and per call (`per check + per call / batch`).
 *
 * Diagnostic only, no goal: the goal on Redis is CPU time per check (`npm run bench -- auth`). Needs `valgrind`
 * (Debian package `valgrind`) and `redis-server` on PATH; takes about 3 minutes.
 */

/** Keys of the quiet-key mix (as the auth bench's `spreadKeys`). */
export const KEYS = 1000;
/** Simulated checks per second. */
export const RATE = 7500;
/** Simulated seconds per batch size before the count starts, and counted. */
export const WARM_S = 3;
export const MEASURED_S = 2;
/** Checks per script call measured. */
export const BATCHES = [1, 6, 16] as const;

const UNLIMITED: TierLimit = { requestsPerSecond: 1e6, concurrentRequests: 1e6, tokensPerWindow: 1e12, windowSeconds: 60 };

/** Result of {@link runRedisInstructionsBench}. */
export interface RedisInstructionsResult {
    /** Instructions per check at each batch size. */
    perCheck: Record<number, number>;
    /** Derived from the 6 and 16 figures: instructions per check, and per script call. */
    split: { perCheck: number; perCall: number };
    /** Redis commands the scripts ran per check at 6 checks per call (INFO commandstats). */
    commandsPerCheck: Record<string, number>;
    goalsMissed: string[];
}

function onPath(cmd: string): boolean {
    try {
        execFileSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" });
        return true;
    } catch {
        return false;
    }
}

/** The `summary:` instruction count of the newest callgrind dump in `dir`. */
function lastDump(dir: string, before: ReadonlySet<string>): number {
    const fresh = fs.readdirSync(dir).filter((f) => !before.has(f) && /\.\d+$/.test(f));
    if (fresh.length !== 1) throw new Error(`expected one new callgrind dump in ${dir}, found ${fresh.join(", ") || "none"}`);
    const m = /^summary: (\d+)$/m.exec(fs.readFileSync(path.join(dir, fresh[0]), "utf8"));
    if (!m) throw new Error(`no summary line in ${fresh[0]}`);
    return Number(m[1]);
}

/**
 * Runs the measurement and prints a table.
 * @throws when valgrind, callgrind_control or redis-server is missing, or when a check is refused (the limits are
 *   unlimited, so a refusal is a fault of the script).
 */
export async function runRedisInstructionsBench(): Promise<RedisInstructionsResult> {
    for (const cmd of ["valgrind", "callgrind_control", "redis-server"])
        if (!onPath(cmd)) throw new Error(`${cmd} is not on PATH (Debian: apt-get install valgrind redis-server)`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "auth-redis-cg-"));
    const port = await freePort();
    const server: ChildProcess = spawn(
        "valgrind",
        [
            "--tool=callgrind",
            `--callgrind-out-file=${path.join(dir, "cg.%p")}`,
            "redis-server",
            "--port",
            String(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        { stdio: "ignore" },
    );
    const redis = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
    // Refused connections while valgrind starts redis-server are retried below, not reported.
    redis.on("error", () => undefined);
    try {
        for (let i = 0; ; i++) {
            try {
                await redis.connect();
                await redis.ping();
                break;
            } catch (e) {
                if (i > 100) throw new Error(`redis-server under valgrind did not answer: ${(e as Error).message}`);
                await new Promise((r) => setTimeout(r, 200));
            }
        }
        const batcher = new AdmissionBatcher(redis);
        const keys = Array.from({ length: KEYS }, (_, i) => {
            const ids = tierIds({ model: "bench-model", tenant: "bench", team: "bench", keyId: `spread-${i}` });
            return { ids, fixed: admissionKeys(ids), limits: { model: UNLIMITED, team: UNLIMITED, key: UNLIMITED } };
        });
        const callgrind = (what: "-z" | "-d") => execFileSync("callgrind_control", [what, String(server.pid)], { stdio: "ignore" });
        const perCheck: Record<number, number> = {};
        let commandsPerCheck: Record<string, number> = {};
        for (const batch of BATCHES) {
            await redis.flushall();
            let now = Math.ceil(Date.now() / 1000) * 1000 + 3_600_000;
            let next = 0;
            const run = async (seconds: number) => {
                for (let n = 0; n < seconds * RATE; n += batch) {
                    const pending = [];
                    for (let j = 0; j < batch; j++) {
                        const k = keys[next++ % KEYS];
                        pending.push(
                            batcher.check(
                                k.ids,
                                k.limits,
                                newLeaseToken(),
                                Math.floor(now),
                                BENCH_LEASE_TTL_S * 1000,
                                1,
                                "counters",
                                k.fixed,
                            ),
                        );
                        now += 1000 / RATE;
                    }
                    for (const d of await Promise.all(pending)) if (!d.allowed) throw new Error(`check refused (${d.tier} ${d.dimension})`);
                }
            };
            await run(WARM_S);
            await redis.config("RESETSTAT");
            callgrind("-z");
            await run(MEASURED_S);
            const before = new Set(fs.readdirSync(dir));
            callgrind("-d");
            const checks = MEASURED_S * RATE;
            perCheck[batch] = lastDump(dir, before) / checks;
            if (batch === 6) {
                const info = await redis.info("commandstats");
                commandsPerCheck = Object.fromEntries(
                    [...info.matchAll(/cmdstat_([a-z]+):calls=(\d+)/g)]
                        .filter((m) => !/^(config|info|evalsha|eval|flushall|ping)$/.test(m[1]))
                        .map((m) => [m[1], Number(m[2]) / checks]),
                );
            }
        }
        // perCheck[b] = c + f / b, from b = 6 and b = 16
        const perCall = (perCheck[6] - perCheck[16]) / (1 / 6 - 1 / 16);
        const split = { perCheck: perCheck[16] - perCall / 16, perCall };
        const k = (x: number) => `${(x / 1000).toFixed(1)}k`;
        process.stdout.write(
            `redis-server instructions per quiet-key check (callgrind; ${KEYS} keys, ${RATE} checks/s simulated, lease TTL ${BENCH_LEASE_TTL_S} s)\n` +
                BATCHES.map((b) => `  ${String(b).padStart(2)} checks per call: ${k(perCheck[b])} per check`).join("\n") +
                `\n  that is about ${k(split.perCheck)} per check + ${k(split.perCall)} per script call\n` +
                `  commands per check at 6 per call: ${Object.entries(commandsPerCheck)
                    .map(([c, n]) => `${c} ${n.toFixed(2)}`)
                    .join(", ")}\n`,
        );
        return { perCheck, split, commandsPerCheck, goalsMissed: [] };
    } finally {
        redis.disconnect();
        if (server.exitCode === null && server.signalCode === null) {
            const exited = new Promise((r) => server.once("exit", r));
            server.kill("SIGTERM");
            await exited;
        }
        fs.rmSync(dir, { recursive: true, force: true });
    }
}
