/**
 * The activation, version-pair, observability, Prometheus-agreement, Mooncake-device, endpoint-support and
 * Planner-config rules as one entry of the rule registry (upstream/check/index.ts `rules`, run by
 * `npm run upstream-check` and by the policy pack): each is a pure `(stack) => Finding[]` over the rendered objects
 * and releases.
 */
import { kvRouterNeedsWorkerEvents, sglangEmitsKvEvents } from "../dynamo";
import { CACHE_SCOPES_ANNOTATION } from "../labels";
import { checkActivation, speculativeSignature } from "./activation";
import { checkObservability, scrapedSignals } from "./observability";
import { checkEndpointSupport } from "./endpoint-support";
import { checkMooncakeDevices } from "./mooncake-devices";
import { checkPlannerConfig, checkPlannerHeadroom } from "./planner-config";
import { checkPrometheusAgreement } from "./prometheus";
import type { Rule } from "./types";
import { checkVersionPairs, type Unproven } from "./versions";
import { argvOf, type Finding, flagValue, parseJson, type PodView, podsOf, type StackView } from "./view";

export type { Unproven } from "./versions";
export { activationRules, checkActivation } from "./activation";
export { checkObservability, observabilityRule, scrapedSignals } from "./observability";
export { checkVersionPairs, versionRule } from "./versions";
export { checkPrometheusAgreement } from "./prometheus";
export { checkMooncakeDevices } from "./mooncake-devices";
export { checkEndpointSupport } from "./endpoint-support";
export { checkPlannerConfig, checkPlannerHeadroom } from "./planner-config";

/** Runs the activation, version-pair and observability rules on one stack. */
export function checkSignals(s: StackView): { findings: Finding[]; unproven: Unproven[] } {
    const v = checkVersionPairs(s);
    return {
        findings: [
            ...checkActivation(s),
            ...v.findings,
            ...checkObservability(s),
            ...checkPrometheusAgreement(s),
            ...checkMooncakeDevices(s),
            ...checkEndpointSupport(s),
            ...checkPlannerConfig(s),
            ...checkPlannerHeadroom(s),
        ],
        unproven: v.unproven,
    };
}

/**
 * The signals rule of the registry (upstream/check/index.ts `rules`): {@link checkSignals}'s findings on one rendered
 * stack (its unproven version pairs are the render report's, not findings).
 */
export const signalsRule: Rule = (stack) => checkSignals(stack).findings;

/** One endpoint's features as rendered, and the signals its pods export and Prometheus scrapes (for the render report). */
export interface EndpointSignals {
    /** Features that take effect, in words. */
    active: string[];
    /** Features present but not taking effect, or left off on purpose, with why. */
    off: string[];
    /** Per exporter: `name: scraped` / `name: NOT scraped` / `name: exporter off`. */
    signals: string[];
}

/**
 * What each endpoint (DynamoGraphDeployment) of a rendered stack turns on and which of its signals are scraped, with
 * every activation finding on its objects listed as not taking effect.
 */
export function endpointSignals(s: StackView): Map<string, EndpointSignals> {
    const pods = podsOf(s.objects);
    const findings = checkActivation(s);
    const scraped = scrapedSignals(s);
    const out = new Map<string, EndpointSignals>();
    for (const graph of [...new Set(pods.map((p) => p.graph).filter((g): g is string => !!g))].sort()) {
        const g = pods.filter((p) => p.graph === graph);
        const workers = g.filter((p) => ["prefill", "decode", "worker"].includes(p.componentType ?? ""));
        const frontend = g.find((p) => p.componentType === "frontend");
        const active: string[] = [];
        const off: string[] = [];
        const argv = (p: PodView) => argvOf(p.main);
        const env = (p: PodView, n: string) => (p.main.env ?? []).find((e: { name: string }) => e.name === n)?.value as string | undefined;
        if (g.some((p) => p.componentType === "prefill") && g.some((p) => p.componentType === "decode")) {
            const w = workers[0];
            const kvt = parseJson(flagValue(argv(w), "--kv-transfer-config"));
            const backend =
                env(w, "SGLANG_DISAGGREGATION_NIXL_BACKEND") ??
                env(w, "TRTLLM_NIXL_KVCACHE_BACKEND") ??
                [kvt, ...(kvt?.kv_connector_extra_config?.connectors ?? [])].flatMap(
                    (x: any) => x?.kv_connector_extra_config?.backends ?? [],
                )[0];
            active.push(`P/D over NIXL${backend ? ` (${backend})` : ""}`);
        }
        if (frontend && flagValue(argv(frontend), "--router-mode") === "kv") {
            // Decode workers' events only under --router-conditional-disagg; an SGLang decode worker on the chunk cache emits none.
            const events = workers
                .filter((w) =>
                    kvRouterNeedsWorkerEvents(w.componentType ?? "", argv(frontend), env(frontend, "DYN_ROUTER_CONDITIONAL_DISAGG")),
                )
                .every(
                    (w) =>
                        (flagValue(argv(w), "--kv-events-config") !== undefined &&
                            (argv(w)[2] !== "dynamo.sglang" || sglangEmitsKvEvents(argv(w)))) ||
                        argv(w).includes("--publish-kv-events"),
                );
            (events ? active : off).push(
                events ? "KV-aware routing on worker KV events" : "KV-aware routing: a worker publishes no KV events",
            );
        }
        const spec = workers.map((w) => speculativeSignature(w));
        if (spec.some(Boolean)) {
            const roles = workers
                .map((w) => w.componentType)
                .filter((x, i, a) => a.indexOf(x) === i)
                .join(" + ");
            if (new Set(spec).size === 1) active.push(`speculative decoding on ${roles}, identical settings`);
            else off.push(`speculative decoding: ${roles} differ (refused at the NIXL handshake)`);
        }
        if (workers.some((w) => argv(w).some((a) => a.includes("MooncakeStoreConnector"))))
            active.push("Mooncake KV pool (vLLM MooncakeStoreConnector, standalone store)");
        if (workers.some((w) => flagValue(argv(w), "--hicache-storage-backend") === "mooncake")) {
            active.push("SGLang HiCache on the Mooncake pool (registers with the pod IP)");
            if (frontend && flagValue(argv(frontend), "--shared-cache-type") === "hicache")
                active.push("frontend shared KV cache (Mooncake KV events)");
            else
                off.push(
                    "frontend shared KV cache: off, the pool's Mooncake master is not proven to publish KV events (Mooncake >= v0.3.12, upstream/compat.ts)",
                );
        }
        if (g.some((p) => p.componentType === "planner")) active.push("Planner (load-based scaling)");
        // Priority as an entitlement and the tenant-bound cache salt (upstream/activation.ts engine-priority,
        // router-priority, cache-salt): what the platform's headers reach in this graph.
        const engine = g[0]?.backendFramework;
        const prioritised = workers.filter((w) =>
            engine === "vllm"
                ? flagValue(argv(w), "--scheduling-policy") === "priority"
                : engine === "sglang" && argv(w).includes("--enable-priority-scheduling"),
        );
        if (workers.length && prioritised.length === workers.length)
            active.push(
                `request priority in the engine queue (${engine === "vllm" ? "vLLM priority scheduler" : "SGLang priority scheduling"})`,
            );
        const threshold = frontend ? flagValue(argv(frontend), "--router-queue-threshold") : undefined;
        if (threshold !== undefined) active.push(`router queue by latency class, then priority (threshold ${String(threshold)})`);
        const dgd = s.objects.find((o) => o?.kind === "DynamoGraphDeployment" && o.metadata?.name === graph);
        const scopes = dgd?.metadata?.annotations?.[CACHE_SCOPES_ANNOTATION];
        if (engine === "vllm")
            active.push(`tenant-bound KV salt in the router and the engine prefix cache (${scopes ?? "?"} cache scope(s))`);
        else if (scopes === "1") active.push("KV salt in the router only; the engine drops it but serves a single cache scope");
        const objectsOfGraph = new Set(g.map((p) => p.object));
        for (const f of findings.filter((x) => objectsOfGraph.has(x.object))) off.push(`${f.message.split(" ")[0]}: ${f.key}`);
        const signals = (scraped.get(graph) ?? []).map(
            (x) => `${x.exporter}: ${!x.enabled ? "exporter off" : x.scraped ? "scraped" : "NOT scraped"}`,
        );
        out.set(graph, { active, off: [...new Set(off)], signals });
    }
    return out;
}
