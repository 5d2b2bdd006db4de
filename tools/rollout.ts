/**
 * `npm run rollout -- status|advance|promote|hold|resume|abort <[spoke/]endpoint>`: drives a gated canary rollout
 * (config/rollout.ts, lib/rollout.ts, docs/rollout.md) one reviewed step at a time. Reads the spoke's Prometheus,
 * evaluates the gate for the current step only, and writes the next state into the hub stack file (comments kept);
 * the person then previews and applies it with `pulumi up`. Never deploys anything itself.
 */
// First: on --help it exits before the imports below load.
import { HELP } from "./help/rollout";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { ConfigError } from "../config/errors";
import { parseFlatStackConfig } from "../config/stack";
import {
    applyEdit,
    type Decision,
    decideAbort,
    decideAdvance,
    decideHold,
    decidePromote,
    decideResume,
    dgdName,
    dynamoNamespace,
    evaluateGate,
    evaluatePromotion,
    findEndpoint,
    type GateResult,
    promQuery,
    readyQuery,
    revisionsOf,
    stateOf,
    stepWeights,
} from "../lib/rollout";
import { readStackFile } from "../lib/stackfiles";
import { exitOnHelp } from "./cli";

const ms = (x: number | undefined) => (x === undefined ? "none" : `${(x * 1000).toFixed(1)} ms`);
const pct = (x: number | undefined) => (x === undefined ? "none" : `${(x * 100).toFixed(2)}%`);

/** The gate's measurements as the person reads them. */
export function gateReport(g: GateResult): string {
    const soak = g.judged === "soak";
    const row = (role: string, m: GateResult["source"]) =>
        `  ${role.padEnd(7)} ${m.dynamoNamespace.padEnd(34)} requests ${String(Math.round(m.requests ?? 0)).padStart(7)}${m.requests === undefined ? " (no series)" : ""}  errors ${pct(m.errorRate)}  TTFT p95 ${ms(m.ttftP95Seconds)}  ITL p99 ${ms(m.itlP99Seconds)}`;
    return [
        `${soak ? "promotion soak" : "gate"}: ${g.verdict.toUpperCase()} over ${g.range.seconds} s of the step's traffic (${g.range.from} .. ${g.range.to})`,
        `  applied ${g.applied.applied ? `since ${g.applied.from}` : "NOT YET"}: target share ${pct(g.applied.latestShare)} (${g.applied.query})`,
        row("target", g.target),
        soak
            ? `  source  ${g.source.dynamoNamespace.padEnd(34)} requests ${String(Math.round(g.source.requests ?? 0)).padStart(7)} (not judged: no traffic at 100%)`
            : row("source", g.source),
        ...g.reasons.map((r) => `  - ${r}`),
    ].join("\n");
}

function arg(argv: string[], name: string): string | undefined {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
}

/**
 * Pure: the hub stack file `--hub` names: a stack name (`hub-prod` -> `stacks/Pulumi.hub-prod.yaml`, as the other
 * tools take it) or a path (anything with a `/` or ending in `.yaml`/`.yml`); default `stacks/Pulumi.hub-prod.yaml`.
 */
export function hubFileOf(hub: string | undefined): string {
    if (hub === undefined) return path.join("stacks", "Pulumi.hub-prod.yaml");
    if (hub.includes("/") || hub.includes(path.sep) || /\.ya?ml$/.test(hub)) return hub;
    return path.join("stacks", `Pulumi.${hub}.yaml`);
}

/** Runs the command; returns its exit code. Exported for tests. */
export async function main(argv: string[], log: (s: string) => void = console.log): Promise<number> {
    const [cmd, target] = argv.filter((a, i) => !a.startsWith("--") && !(i > 0 && argv[i - 1].startsWith("--")));
    if (!cmd || !["status", "advance", "promote", "hold", "resume", "abort"].includes(cmd) || !target) {
        log(HELP.trim());
        return 1;
    }
    const hubFile = hubFileOf(arg(argv, "--hub"));
    const prometheus = arg(argv, "--prometheus");
    const now = new Date(arg(argv, "--now") ?? Date.now());
    const sf = readStackFile(hubFile);
    let endpoints: import("../config/endpoint").Endpoint[];
    try {
        const cfg = parseFlatStackConfig(sf.config, hubFile, sf.secretKeys, { now });
        if (cfg.role !== "hub") throw new Error(`${hubFile}: not a hub stack (platform:role ${cfg.role})`);
        endpoints = cfg.hub.endpoints;
    } catch (e) {
        log((e as Error).message);
        return 1;
    }
    const found = findEndpoint(endpoints, target);
    if ("error" in found) {
        log(`${hubFile}: ${found.error}`);
        return 1;
    }
    const e = endpoints[found.index];
    const key = `platform:endpoints[${found.index}]`;
    if (!e.rollout) {
        log(`${hubFile}: ${key} (${e.spoke}/${e.name}) has no rollout; add ${key}.rollout (docs/rollout.md)`);
        return 1;
    }
    const st = stateOf(e.rollout);
    const revs = revisionsOf(e);
    const [src, tgt] = revs;
    log(
        `${e.spoke}/${e.name} (${e.model}): ${st.phase}${st.phase === "shifting" ? ` step ${(st.step ?? 0) + 1}/${e.rollout.steps.length}` : ""} since ${st.since ?? "(not yet applied)"}`,
    );
    for (const r of revs)
        log(`  ${r.role.padEnd(7)} ${r.graph.name.padEnd(24)} weight ${String(r.weight).padStart(3)}%  ${r.ready ? "ready" : "not ready"}`);
    if ("held" in st && st.held) log(`  HELD since ${st.held.at}: ${st.held.reason}`);
    if ("lastGate" in st && st.lastGate) log(`  last gate ${st.lastGate.at}: ${st.lastGate.summary}`);

    const needProm = () => {
        if (!prometheus) throw new Error("give --prometheus URL: the spoke's Prometheus HTTP API the gate reads");
        return prometheus;
    };
    /** The judgement of the step being left: the comparison gate below 100%, the promotion soak at 100%. */
    const judge = (url: string) => {
        const k = (st as { step?: number }).step ?? 0;
        const x = {
            prometheusUrl: url,
            gate: e.rollout!.gate,
            sourceDgd: src.graph.name,
            targetDgd: tgt.graph.name,
            since: new Date(st.since!),
            weights: stepWeights(e.rollout!.steps, k),
            now,
        };
        return k + 1 === e.rollout!.steps.length ? evaluatePromotion(x) : evaluateGate(x);
    };
    let d: Decision;
    try {
        if (cmd === "status") {
            if (prometheus && st.phase === "shifting") log(gateReport(await judge(prometheus)));
            return 0;
        }
        if (cmd === "promote") {
            const atLast = st.phase === "shifting" && !st.held && (st.step ?? 0) + 1 === e.rollout.steps.length;
            const g = atLast ? await judge(needProm()) : undefined;
            if (g) log(gateReport(g));
            d = decidePromote(e, now, { gate: g });
        } else if (cmd === "advance") {
            if (st.phase === "warming" && !("held" in st && st.held)) {
                const ns = dynamoNamespace(dgdName(e.name, e.rollout.revision));
                const blocks = await promQuery(needProm(), readyQuery(ns), now);
                log(`health gate: ${readyQuery(ns)} = ${blocks ?? "no series"}`);
                d = decideAdvance(e, now, { targetReady: (blocks ?? 0) > 0 });
            } else if (st.phase === "shifting" && !st.held) {
                const g = await judge(needProm());
                log(gateReport(g));
                d = decideAdvance(e, now, { gate: g });
            } else d = decideAdvance(e, now, {});
        } else if (cmd === "hold") d = decideHold(e, now, arg(argv, "--reason") ?? "held by a person");
        else if (cmd === "resume") d = decideResume(e, now);
        else d = decideAbort(e, now);
    } catch (err) {
        log(`${cmd} ${target}: ${(err as Error).message}`);
        return 1;
    }
    if (d.edit.kind !== "none") {
        const text = fs.readFileSync(hubFile, "utf8");
        const next = applyEdit(text, hubFile, found.index, d.edit);
        // The edited file must still be a valid hub: nothing is written half-right.
        const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "rollout-"));
        const tmp = path.join(tmpDir, path.basename(hubFile));
        fs.writeFileSync(tmp, next);
        try {
            const re = readStackFile(tmp, hubFile);
            parseFlatStackConfig(re.config, hubFile, re.secretKeys, { now });
        } catch (err) {
            const ce = err as ConfigError;
            log(
                `refused to write ${hubFile}: the result would not validate: ${ce.issues ? ce.issues.map((i) => `${i.key}: ${i.message}`).join("; ") : ce.message}`,
            );
            return 1;
        } finally {
            fs.rmSync(tmpDir, { recursive: true, force: true });
        }
        fs.writeFileSync(hubFile, next);
        log(
            `wrote ${hubFile} ${key}${d.edit.kind === "state" ? ".rollout.state" : d.edit.kind === "promote" ? " (promoted)" : ".rollout (removed)"}`,
        );
    }
    log(d.message);
    if (d.edit.kind !== "none") log("next: review the diff, pulumi preview with the policy pack, pulumi up (hub, then the spoke)");
    return d.exitCode;
}

if (require.main === module) {
    exitOnHelp(process.argv.slice(2), HELP);
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (e) => {
            console.error((e as Error).message);
            process.exit(1);
        },
    );
}
