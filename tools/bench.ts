/**
 * `npm run bench [-- <name>...]`: every benchmark of the repo, each printing its numbers side by side with
 * its floor (the cheapest thing doing the same job on this machine) and the ratio. Speed and memory goals
 * live here, never in timed tests. Loopback only, bounded in time.
 *
 * Names: auth (ext_authz checks/s vs a no-op HTTP server), tests (`npm test` time vs its baseline), plus those
 * registered below by other areas.
 */
import { exitOnHelp } from "./cli";

/** `named`: a diagnostic run only when named (`npm run bench -- <name>`), never by a bare `npm run bench`. */
type Bench = { name: string; what: string; run: () => Promise<unknown>; named?: true };

/** A benchmark's result may list the goals it missed; any missed goal makes `npm run bench` exit 1. */
function goalsMissed(result: unknown): string[] {
    const m = (result as { goalsMissed?: unknown } | undefined)?.goalsMissed;
    return Array.isArray(m) ? m.map(String) : [];
}

const benches: Bench[] = [
    {
        name: "render",
        what: "offline render time of 1 hub + N spokes x M endpoints (N = 5, 50) vs the same stacks with no endpoints (floor)",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("./bench-render").runRenderBench(),
    },
    {
        name: "auth",
        what: "auth service ext_authz checks/s at 16 and 64 in flight on a busy key and over 1000 quiet keys, Redis CPU per quiet-key check, and p99 paced at a tenth of the floor rate, vs a no-op Node HTTP server (floor)",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("../services/auth/bench").runAuthBench(),
    },
    {
        name: "auth-redis",
        what: "redis-server instructions per quiet-key admission check (callgrind: independent of the machine's load) at 1, 6 and 16 checks per script call, and the per-check / per-call split; diagnostic, no goal; needs valgrind",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("../services/auth/redis-instructions").runRedisInstructionsBench(),
        named: true,
    },
    {
        name: "auth-cost",
        what: "where a quiet-key check's CPU goes: load generator, service and redis-server CPU per check of the floor, the Redis floor, a busy key and quiet keys, all paced at 6000 checks/s, and the differences; diagnostic, no goal",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("../services/auth/bench").runAuthBench({ costRate: 6000 }),
        named: true,
    },
    {
        name: "auth-bound",
        what: "the bound on the quiet-key ratio: checks/s over 1000 quiet keys of floors that each do less than the auth service (a script that only answers; the shipped admission script; that script less the lease marker and the shared tiers; the service's own batcher and script) vs the no-op floor; diagnostic, no goal",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("../services/auth/bench").runAuthBench({ bound: true }),
        named: true,
    },
    {
        name: "entitlement",
        what: "the auth decision's hint clamp and Dynamo header values per check (and the cache salt's HMAC per key/model) vs the same check body step without them (floor)",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("../services/auth/entitlement-bench").runEntitlementBench(),
    },
    {
        name: "ledger",
        what: "hub ledger ingestion events/s with idempotency vs raw INSERT of the same rows (floor), and spool append throughput",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("../services/ledger/bench").runMeteringBench(),
    },
    {
        name: "tests",
        what: "`npm test` wall and CPU time (unit and e2e files, every test) vs the recorded baseline; goal: half the baseline's wall time on a quiet 2-core machine",
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        run: async () => require("./bench-tests").runTestsBench(),
    },
];

const HELP = `
usage: npm run bench [-- <name>...]

Every benchmark of the repository, each printed side by side with its floor (the cheapest thing doing the same
job on this machine) and the ratio. Speed and memory goals live here, never in timed tests. Loopback only.

Benchmarks:
  render   offline render of 1 hub + N spokes x M endpoints vs the same stacks with no endpoints
  auth     auth service ext_authz checks/s and p99 with Redis vs a no-op HTTP server
  auth-redis   redis-server instructions per quiet-key check under callgrind (load-independent; needs valgrind;
               run only when named)
  auth-cost    where a quiet-key check's CPU goes (service, redis-server, load generator), every target paced at
               6000 checks/s; run only when named
  auth-bound   the bound on the quiet-key ratio: floors that each do less than the auth service (the shipped admission
               script alone, that script less what a data-layout change could remove, the service's batcher and
               script) over 1000 quiet keys vs the no-op floor; run only when named
  entitlement  the decision's priority clamp + Dynamo headers per check vs the body step without them
  ledger   hub ledger ingestion events/s with idempotency vs raw INSERT of the same rows
  tests    npm test wall and CPU time vs the recorded baseline (the load it ran under is printed)

A bare \`npm run bench\` runs every benchmark but the named-only ones, one after the other: about 11 minutes on the
2-core development VM (auth alone about 5); run on a quiet machine, or the figures measure the other load.
\`PLATFORM_BENCH_COLD=1 npm run bench -- tests\` runs the test suite with its caches cold, as on a fresh CI machine.

Examples:
  npm run bench
  npm run bench -- render
  npm run bench -- tests
`;

async function main() {
    const wanted = process.argv.slice(2);
    exitOnHelp(wanted, HELP);
    const unknown = wanted.filter((w) => !benches.some((b) => b.name === w));
    if (unknown.length) throw new Error(`unknown benchmark(s) ${unknown.join(", ")}; have: ${benches.map((b) => b.name).join(", ")}`);
    const missed: string[] = [];
    for (const b of benches.filter((x) => (wanted.length === 0 ? !x.named : wanted.includes(x.name)))) {
        process.stdout.write(`\n### ${b.name}: ${b.what}\n`);
        missed.push(...goalsMissed(await b.run()).map((g) => `${b.name}: ${g}`));
    }
    if (missed.length) process.stdout.write(`\nbench: ${missed.length} goal(s) missed:\n${missed.map((g) => `  ${g}`).join("\n")}\n`);
    return missed.length ? 1 : 0;
}

main().then(
    (code) => process.exit(code),
    (e) => {
        process.stderr.write(`bench: ${(e as Error).stack ?? e}\n`);
        process.exit(1);
    },
);
