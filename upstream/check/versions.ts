/**
 * Version-pair rules: components that exchange data run releases upstream says work together (upstream/compat.ts):
 * NIXL at both ends of a prefill/decode pair, the Dynamo frontend (router) and its workers and planner, the Mooncake
 * master/store and the Mooncake client in each engine image. A pair is proven when both ends run the same image, or
 * both releases are recorded and satisfy the rule. Closed world: recorded releases that break the rule AND a pair
 * whose releases are not recorded (unproven) are findings; unproven pairs are also returned for the report.
 */
import { type BundledVersionFact, bundledVersions, type VersionPairFact, versionPairs, type WireLibrary } from "../compat";
import { ENDPOINT_LABEL } from "../labels";
import { argvOf, type Finding, type PodView, podsOf, type StackView } from "./view";

/** A pair that could be neither proven nor refused. */
export interface Unproven {
    stack: string;
    pair: string;
    ends: string;
    why: string;
}

function pairFact(id: string, facts: readonly VersionPairFact[]): VersionPairFact {
    const f = facts.find((x) => x.id === id);
    if (!f) throw new Error(`no version-pair fact ${id} (upstream/compat.ts)`);
    return f;
}

function agree(rule: VersionPairFact["rule"], a: string, b: string): boolean {
    if (rule === "same-release") return a === b;
    const mm = (v: string) => v.replace(/^v/, "").split(".").slice(0, 2).join(".");
    return mm(a) === mm(b);
}

/**
 * Judges one pair of ends. `a`, `b`: the pods at each end (their main containers' images).
 * @returns a finding (broken or unproven), the unproven entry too when unproven, or nothing when proven
 */
function judge(
    stack: string,
    fact: VersionPairFact,
    library: WireLibrary,
    a: PodView,
    b: PodView,
    versions: readonly BundledVersionFact[],
): { finding?: Finding; unproven?: Unproven } {
    const ia = String(a.main.image),
        ib = String(b.main.image);
    if (ia === ib) return {};
    const va = versions.find((f) => f.image === ia && f.library === library)?.version;
    const vb = versions.find((f) => f.image === ib && f.library === library)?.version;
    if (va && vb) {
        if (agree(fact.rule, va, vb)) return {};
        return {
            finding: {
                stack,
                object: b.object,
                container: b.main.name,
                key: "image",
                message: `${fact.id}: ${library} ${vb} in ${ib} does not match ${library} ${va} in ${ia} (${a.object}); upstream requires ${fact.rule} (${fact.ends}) [${fact.source}]`,
            },
        };
    }
    const why = `${library} release not recorded for ${[!va ? ia : "", !vb ? ib : ""].filter(Boolean).join(" and ")} (upstream/compat.ts)`;
    return {
        unproven: { stack, pair: fact.id, ends: `${a.object} (${ia}) <-> ${b.object} (${ib})`, why },
        finding: {
            stack,
            object: b.object,
            container: b.main.name,
            key: "image",
            message: `${fact.id}: UNPROVEN: ${ib} against ${ia} (${a.object}): ${why}; upstream requires ${fact.rule} (${fact.ends}), so run both ends from one image or record both releases [${fact.source}]`,
        },
    };
}

/** Checks every data-exchanging pair of one stack. */
export function checkVersionPairs(
    s: StackView,
    versions: readonly BundledVersionFact[] = bundledVersions,
    pairs: readonly VersionPairFact[] = versionPairs,
): { findings: Finding[]; unproven: Unproven[] } {
    const findings: Finding[] = [];
    const unproven: Unproven[] = [];
    const push = (r: { finding?: Finding; unproven?: Unproven }) => {
        if (r.finding) findings.push(r.finding);
        if (r.unproven) unproven.push(r.unproven);
    };
    const pods = podsOf(s.objects);
    const graphs = new Set(pods.map((p) => p.graph).filter((g): g is string => !!g));
    const nixl = pairFact("nixl-prefill-decode", pairs);
    const dyn = pairFact("dynamo-router-workers", pairs);
    const mc = pairFact("mooncake-master-client", pairs);
    for (const g of graphs) {
        const inGraph = pods.filter((p) => p.graph === g);
        const prefill = inGraph.filter((p) => p.componentType === "prefill");
        const decode = inGraph.filter((p) => p.componentType === "decode");
        for (const d of decode) for (const p of prefill) push(judge(s.stack, nixl, "nixl", d, p, versions));
        const frontend = inGraph.find((p) => p.componentType === "frontend");
        if (frontend) for (const w of inGraph.filter((p) => p !== frontend)) push(judge(s.stack, dyn, "dynamo", frontend, w, versions));
    }
    // Mooncake: each endpoint's master and stores against every engine process of the same endpoint that loads a client.
    const isMaster = (p: PodView) => argvOf(p.main)[0] === "mooncake_master";
    const isStore = (p: PodView) => argvOf(p.main).slice(0, 3).join(" ") === "python3 -m mooncake.mooncake_store_service";
    const loadsClient = (p: PodView) => {
        const argv = argvOf(p.main);
        return (
            (argv.includes("mooncake") && argv.includes("--hicache-storage-backend")) ||
            argv.some((a) => a.includes("MooncakeStoreConnector"))
        );
    };
    for (const server of pods.filter((p) => isMaster(p) || isStore(p))) {
        const ep = server.labels[ENDPOINT_LABEL];
        for (const client of pods.filter((p) => p.graph !== undefined && p.labels[ENDPOINT_LABEL] === ep && loadsClient(p)))
            push(judge(s.stack, mc, "mooncake", server, client, versions));
    }
    return { findings, unproven: dedupe(unproven) };
}

function dedupe(u: Unproven[]): Unproven[] {
    const seen = new Set<string>();
    return u.filter((x) => {
        const k = `${x.stack}|${x.pair}|${x.ends}`;
        if (seen.has(k)) return false;
        seen.add(k);
        return true;
    });
}

/** The findings alone (the rule shape). */
export function versionRule(s: StackView): Finding[] {
    return checkVersionPairs(s).findings;
}
