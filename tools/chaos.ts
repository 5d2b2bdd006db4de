import * as fs from "node:fs";
import * as path from "node:path";
import type { ChaosFigure, ChaosScenario } from "../services/shared/chaos";
import { exitOnHelp } from "./cli";

/**
 * `npm run chaos [-- <filter>...]`: runs every `scenarios` export of services/<svc>/chaos.ts (interface in
 * services/shared/chaos.ts) against real local servers on loopback, one line per scenario: time to recover,
 * events lost, events double-counted. Bounded: each scenario has a time limit (CHAOS_SCENARIO_TIMEOUT_S,
 * default 180 s) and the command stops by itself. Exits 1 when any scenario lost or double-counted an event,
 * failed, or ran out of time.
 */
const ROOT = path.join(__dirname, "..", "services");

function load(): Array<{ service: string; scenario: ChaosScenario }> {
    const out: Array<{ service: string; scenario: ChaosScenario }> = [];
    for (const svc of fs.readdirSync(ROOT).sort()) {
        const file = path.join(ROOT, svc, "chaos.ts");
        if (svc === "shared" || !fs.existsSync(file)) continue; // shared/chaos.ts is the interface
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const mod = require(file) as { scenarios?: ChaosScenario[] };
        if (!Array.isArray(mod.scenarios)) throw new Error(`${path.relative(process.cwd(), file)}: no \`scenarios\` array exported`);
        for (const scenario of mod.scenarios) out.push({ service: svc, scenario });
    }
    return out;
}

function withTimeout<T>(p: Promise<T>, ms: number, name: string): Promise<T> {
    let t: NodeJS.Timeout;
    return Promise.race([
        p,
        new Promise<T>((_, reject) => {
            t = setTimeout(() => reject(new Error(`${name}: no result after ${ms / 1000} s`)), ms);
        }),
    ]).finally(() => clearTimeout(t));
}

const HELP = `
usage: npm run chaos [-- <filter>...]

Runs the fault scenarios of every services/<svc>/chaos.ts against real local servers on loopback (Redis,
PostgreSQL, S3 and Kinesis stand-ins), one line per scenario: time to recover, events lost, events double-counted.
Each scenario is bounded (CHAOS_SCENARIO_TIMEOUT_S, default 180 s). Exit 1 when a scenario lost or double-counted
an event, failed, or ran out of time.

Options:
  <filter>...   run only scenarios whose name contains one of these
  -h, --help    this text

Examples:
  npm run chaos
  npm run chaos -- redis
  CHAOS_SCENARIO_TIMEOUT_S=60 npm run chaos -- ledger
`;

async function main(): Promise<number> {
    const filters = process.argv.slice(2);
    exitOnHelp(filters, HELP);
    const all = load().filter(({ scenario }) => filters.length === 0 || filters.some((f) => scenario.name.includes(f)));
    if (all.length === 0) throw new Error(`no chaos scenario matches ${filters.join(", ")}`);
    const limit = Number(process.env.CHAOS_SCENARIO_TIMEOUT_S ?? 180) * 1000;
    const w = Math.max(...all.map((s) => s.scenario.name.length));
    process.stdout.write(`${"scenario".padEnd(w)}  recovery_s  lost  double_counted  detail\n`);
    let bad = 0;
    for (const { scenario } of all) {
        let f: ChaosFigure;
        try {
            f = await withTimeout(scenario.run(), limit, scenario.name);
        } catch (e) {
            bad++;
            process.stdout.write(`${scenario.name.padEnd(w)}  FAILED: ${(e as Error).message}\n`);
            continue;
        }
        if (f.lost !== 0 || f.doubleCounted !== 0) bad++;
        const rec = f.recoverySeconds === null ? "-" : f.recoverySeconds.toFixed(2);
        process.stdout.write(
            `${scenario.name.padEnd(w)}  ${rec.padStart(10)}  ${String(f.lost).padStart(4)}  ${String(f.doubleCounted).padStart(14)}  ${f.detail ?? ""}\n`,
        );
    }
    process.stdout.write(
        bad
            ? `\nchaos: ${bad} of ${all.length} scenario(s) lost, double-counted or failed\n`
            : `\nchaos: ${all.length} scenario(s), 0 lost, 0 double-counted\n`,
    );
    return bad ? 1 : 0;
}

main().then(
    (code) => process.exit(code),
    (e) => {
        process.stderr.write(`chaos: ${(e as Error).stack ?? e}\n`);
        process.exit(1);
    },
);
