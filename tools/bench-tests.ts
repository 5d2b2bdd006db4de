/**
 * Test-suite benchmark (`npm run bench -- tests`): runs `npm test` (`vitest run`, unit and e2e files) once as a child
 * process and prints its wall time and CPU time (user + system of vitest and every process it started) next to the
 * recorded baseline below, with the load the machine was under, and the slowest test files. The goal is a wall time of
 * at most half the baseline's on a quiet machine with 2 cores; on a busy machine (1-minute load average above 1 at the
 * start) the wall time is printed but not judged, and CPU time / cores is the comparable number.
 *
 * CPU time of the children is read from `/proc/self/stat` (cutime + cstime: every descendant that was waited for), so
 * it is printed on Linux only.
 *
 * A run reuses what earlier runs left in the temporary directory: V8's code cache (`NODE_COMPILE_CACHE`), the esbuild
 * loader's transpile cache and Vitest's module cache (vitest.config.mts), all keyed by file contents. The line printed
 * says whether they were there; `PLATFORM_BENCH_COLD=1` runs the suite with a fresh temporary directory (all three
 * cold), as on a fresh CI machine.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const ROOT = path.join(__dirname, "..");

/**
 * `npm test` where the goal was set (commit 0b74689) and just before the suite was made faster (commit 7a56587),
 * both on this repository's 2-core development machine, quiet (1-minute load below 1), run as `.ci/run` runs it.
 */
export const TEST_BASELINES = [
    { commit: "0b74689", files: 65, tests: 841, wallS: 204 },
    { commit: "7a56587", files: 90, tests: 1123, wallS: 196 },
] as const;
/** The goal: at most half the wall time of the first baseline. */
export const TEST_GOAL_WALL_S = TEST_BASELINES[0].wallS / 2;

/** user + system CPU seconds of this process's waited-for descendants (Linux), else undefined. */
function childCpuS(): number | undefined {
    try {
        // Fields after the command name (which may hold spaces, so split after its closing parenthesis).
        const f = fs.readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
        // cutime and cstime are fields 16 and 17 of stat(5), in clock ticks (USER_HZ, 100 on Linux).
        return (Number(f[13]) + Number(f[14])) / 100;
    } catch {
        return undefined;
    }
}

interface VitestJson {
    numTotalTests: number;
    numPassedTests: number;
    numFailedTests: number;
    testResults: Array<{ name: string; startTime: number; endTime: number; status: string }>;
}

/** The caches a run reuses (see above), each with whether it holds anything now. */
function cacheState(tmpdir: string, env: NodeJS.ProcessEnv): string {
    const full = (dir: string) => fs.existsSync(dir) && fs.readdirSync(dir).length > 0;
    const esbuildCache = path.join(tmpdir, `platform-esbuild-${require("esbuild").version}`);
    const v8Cache = env.NODE_COMPILE_CACHE ?? path.join(tmpdir, "platform-node-compile-cache");
    const vitestCache = path.join(tmpdir, "platform-vitest-module-cache");
    return [
        `V8 code cache ${full(v8Cache) ? "warm" : "cold"}`,
        `esbuild transpile cache ${full(esbuildCache) ? "warm" : "cold"}`,
        `Vitest module cache ${full(vitestCache) ? "warm" : "cold"}`,
    ].join(", ");
}

/**
 * Runs the test suite once (`vitest run` in a child process, dot and JSON reporters) and prints the table described in
 * this module's comment: files, tests, wall time in seconds and children's CPU seconds (user + system) against
 * {@link TEST_BASELINES} and {@link TEST_GOAL_WALL_S}, the 1/5/15-minute load averages, the caches' state and the
 * eight slowest files (wall seconds).
 * @param args extra `vitest run` arguments (test files, filters); with any, the wall-time goal is not judged
 * @returns `goalsMissed`: one line per missed goal (a failed test or non-zero exit; the wall time over the goal, judged
 *   only for a full run started with a 1-minute load average of at most 1); empty when every goal holds
 * @throws Error when the child cannot be started (spawn's `error`), or when Vitest wrote no readable JSON report (the
 *   file system's error, or SyntaxError)
 */
export async function runTestsBench(args: string[] = []): Promise<{ goalsMissed: string[] }> {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "bench-tests-"));
    const json = path.join(tmp, "vitest.json");
    // Cold: a fresh temporary directory for the suite (os.tmpdir() follows TMPDIR), so no cache of an earlier run.
    const cold = process.env.PLATFORM_BENCH_COLD === "1";
    const env: NodeJS.ProcessEnv = { ...process.env };
    const suiteTmp = cold ? fs.mkdtempSync(path.join(tmp, "tmpdir-")) : os.tmpdir();
    if (cold) {
        env.TMPDIR = suiteTmp;
        delete env.NODE_COMPILE_CACHE;
    }
    const caches = cacheState(suiteTmp, env);
    const load0 = os.loadavg();
    const cpu0 = childCpuS();
    const t0 = performance.now();
    const code = await new Promise<number>((resolve, reject) => {
        const child = spawn(
            process.execPath,
            [
                path.join(ROOT, "node_modules", "vitest", "vitest.mjs"),
                "run",
                "--reporter=dot",
                "--reporter=json",
                `--outputFile.json=${json}`,
                ...args,
            ],
            { cwd: ROOT, env, stdio: ["ignore", "inherit", "inherit"] },
        );
        child.on("error", reject);
        child.on("exit", (c, sig) => resolve(c ?? (sig ? 128 : 1)));
    });
    const wallS = (performance.now() - t0) / 1000;
    const cpu1 = childCpuS();
    const load1 = os.loadavg();
    const report = JSON.parse(fs.readFileSync(json, "utf8")) as VitestJson;
    fs.rmSync(tmp, { recursive: true, force: true });

    const cores = os.availableParallelism();
    const cpuS = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined;
    const fmt = (n: number) => n.toFixed(1);
    const rows: string[][] = [["run", "files", "tests", "wall s", "CPU s (user+sys)", "vs goal"]];
    for (const b of TEST_BASELINES) rows.push([`baseline ${b.commit}`, `${b.files}`, `${b.tests}`, `${b.wallS}`, "", ""]);
    rows.push([
        `this run${args.length ? ` (${args.join(" ")})` : ""}${cold ? " (cold caches)" : ""}`,
        `${report.testResults.length}`,
        `${report.numTotalTests}`,
        fmt(wallS),
        cpuS === undefined ? "n/a" : fmt(cpuS),
        `${fmt(wallS / TEST_GOAL_WALL_S)}x of ${TEST_GOAL_WALL_S} s`,
    ]);
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    process.stdout.write(`\n${rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("  ")).join("\n")}\n`);
    process.stdout.write(
        `load average (1/5/15 min) ${load0.map(fmt).join("/")} at the start, ${load1.map(fmt).join("/")} at the end; ${cores} core(s)` +
            (cpuS === undefined
                ? "\n"
                : `; CPU s / cores = ${fmt(cpuS / cores)} s (the wall time can be no lower on this many idle cores)\n`) +
            `caches at the start: ${caches}\n`,
    );
    const slowest = [...report.testResults].sort((a, b) => b.endTime - b.startTime - (a.endTime - a.startTime)).slice(0, 8);
    process.stdout.write(
        `slowest files (wall, including their wait for a core):\n${slowest
            .map((r) => `  ${fmt((r.endTime - r.startTime) / 1000).padStart(6)} s  ${path.relative(ROOT, r.name)}`)
            .join("\n")}\n`,
    );

    const goalsMissed: string[] = [];
    if (code !== 0 || report.numFailedTests > 0)
        goalsMissed.push(`npm test failed (exit ${code}, ${report.numFailedTests} failed test(s))`);
    if (args.length === 0 && load0[0] <= 1 && wallS > TEST_GOAL_WALL_S)
        goalsMissed.push(`npm test took ${fmt(wallS)} s on a quiet machine, over the goal of ${TEST_GOAL_WALL_S} s`);
    if (load0[0] > 1) process.stdout.write(`the machine was busy (load ${fmt(load0[0])} at the start): wall time not judged\n`);
    return { goalsMissed };
}
