/**
 * Activation rules: a feature the rendered stack turns on must be able to take effect, and its peers must accept it
 * (upstream/activation.ts). Each finding names the feature (its fact id), what is missing, and the fact's source.
 * Pure functions over a rendered stack; see ./view.ts.
 */
import { CACHE_SCOPES_ANNOTATION as CACHE_SCOPES } from "../labels";
import { activationFact, type ActivationFact } from "../activation";
import { type BundledVersionFact, bundledVersions, masterPublishesKvEvents, MOONCAKE_MASTER_KV_EVENTS_SINCE } from "../compat";
import {
    argvOf,
    envOf,
    type Finding,
    flagValue,
    parseJson,
    type PodView,
    podsOf,
    selects as selectsLabels,
    type StackView,
    valueAt,
} from "./view";
import { hostOf, unroutable } from "../address";
import { kvRouterNeedsWorkerEvents, sglangEmitsKvEvents } from "../dynamo";

function finding(
    stack: string,
    object: string,
    container: string | undefined,
    key: string,
    fact: ActivationFact,
    missing: string,
): Finding {
    return {
        stack,
        object,
        ...(container ? { container } : {}),
        key,
        message: `${fact.id} (${fact.feature}) would be ${fact.otherwise}: ${missing} [${fact.source}]`,
    };
}

/** The speculative-decoding settings of a worker, as one comparable string (undefined: none). */
export function speculativeSignature(p: PodView): string | undefined {
    const argv = argvOf(p.main);
    const vllm = flagValue(argv, "--speculative-config");
    if (vllm !== undefined) return `vllm:${JSON.stringify(parseJson(vllm) ?? vllm)}`;
    const sgl = [
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-num-draft-tokens",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
    ]
        .map((f) => [f, flagValue(argv, f)] as const)
        .filter(([, v]) => v !== undefined);
    if (sgl.length) return `sglang:${JSON.stringify(sgl)}`;
    const trt = parseJson(flagValue(argv, "--override-engine-args"))?.speculative_config;
    if (trt) return `trtllm:${JSON.stringify(trt)}`;
    return undefined;
}

/** `speculative-pd-identical`: every prefill of a graph speculates exactly as its decode does. */
export function speculativeRule(s: StackView): Finding[] {
    const fact = activationFact("speculative-pd-identical");
    const out: Finding[] = [];
    const pods = podsOf(s.objects).filter((p) => p.graph);
    for (const graph of new Set(pods.map((p) => p.graph))) {
        const decode = pods.filter((p) => p.graph === graph && p.componentType === "decode");
        const prefill = pods.filter((p) => p.graph === graph && p.componentType === "prefill");
        for (const d of decode) {
            const want = speculativeSignature(d);
            for (const p of prefill) {
                const got = speculativeSignature(p);
                if (got === want) continue;
                out.push(
                    finding(
                        s.stack,
                        p.object,
                        p.main.name,
                        "speculative",
                        fact,
                        want === undefined
                            ? `prefill speculates (${got}) but decode ${d.object} does not`
                            : `prefill ${got === undefined ? "has no speculative config" : `speculates differently (${got})`} while decode ${d.object} runs ${want}; the NIXL handshake refuses the pair`,
                    ),
                );
            }
        }
    }
    return out;
}

/** `mooncake-registration` and `sglang-hicache-mooncake`: SGLang's HiCache Mooncake client registers with a routable address. */
export function hicacheRegistrationRule(s: StackView): Finding[] {
    const reg = activationFact("mooncake-registration");
    const hicache = activationFact("sglang-hicache-mooncake");
    const out: Finding[] = [];
    for (const p of podsOf(s.objects)) {
        const argv = argvOf(p.main);
        if (flagValue(argv, "--hicache-storage-backend") !== "mooncake") continue;
        const extra = parseJson(flagValue(argv, "--hicache-storage-backend-extra-config"));
        if (!extra || (extra.master_server_address === undefined && extra.client_server_address === undefined)) continue;
        const host = extra.local_hostname;
        const ref = typeof host === "string" ? /^\$\(([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(host) : null;
        if (host === undefined) {
            out.push(
                finding(
                    s.stack,
                    p.object,
                    p.main.name,
                    "--hicache-storage-backend-extra-config.local_hostname",
                    reg,
                    "the extra config names the master but no local_hostname, so SGLang registers as localhost (MOONCAKE_LOCAL_HOSTNAME is not read on this path)",
                ),
            );
        } else if (ref) {
            const e = envOf(p.main, ref[1]);
            const fromPodIp = e?.valueFrom?.fieldRef?.fieldPath === "status.podIP";
            if (!e || (!fromPodIp && (typeof e.value !== "string" || unroutable(hostOf(e.value))))) {
                out.push(
                    finding(
                        s.stack,
                        p.object,
                        p.main.name,
                        "--hicache-storage-backend-extra-config.local_hostname",
                        reg,
                        `local_hostname ${host} expands to ${e ? JSON.stringify(e.value) : "nothing (no such env var; the kubelet leaves the text as is)"}, not the pod IP`,
                    ),
                );
            }
        } else if (typeof host !== "string" || unroutable(hostOf(host))) {
            out.push(
                finding(
                    s.stack,
                    p.object,
                    p.main.name,
                    "--hicache-storage-backend-extra-config.local_hostname",
                    reg,
                    `local_hostname ${JSON.stringify(host)} is not routable`,
                ),
            );
        }
        const inert = (p.main.env ?? []).map((e: { name: string }) => e.name).filter((n: string) => n.startsWith("MOONCAKE_"));
        if (inert.length)
            out.push(
                finding(
                    s.stack,
                    p.object,
                    p.main.name,
                    `env.${inert[0]}`,
                    hicache,
                    `${inert.join(", ")} set, but with master_server_address in the extra config SGLang reads its Mooncake config from the extra config only`,
                ),
            );
        // A P/D decode worker without --disaggregation-decode-enable-radix-cache is refused at start-up: upstream/refused.ts.
    }
    return out;
}

/** `host:port` of a `tcp://host:port` endpoint. */
function tcpHostPort(ep: string): { host: string; port: number } | undefined {
    const m = /^tcp:\/\/([^:/]+):(\d+)$/.exec(ep);
    return m ? { host: m[1], port: Number(m[2]) } : undefined;
}

/** `shared-kv-cache`: a frontend with `--shared-cache-type hicache` has a live Mooncake KV-event source and HiCache workers. */
export function sharedCacheRule(s: StackView, versions: readonly BundledVersionFact[] = bundledVersions): Finding[] {
    const fact = activationFact("shared-kv-cache");
    const out: Finding[] = [];
    const pods = podsOf(s.objects);
    for (const f of pods) {
        const argv = argvOf(f.main);
        if (flagValue(argv, "--shared-cache-type") !== "hicache") continue;
        const add = (key: string, missing: string) => out.push(finding(s.stack, f.object, f.main.name, key, fact, missing));
        if (flagValue(argv, "--router-mode") !== "kv") add("--router-mode", "the frontend does not run --router-mode kv");
        const workers = pods.filter(
            (p) => p.graph === f.graph && p.graph !== undefined && ["prefill", "decode", "worker"].includes(p.componentType ?? ""),
        );
        if (!workers.some((w) => flagValue(argvOf(w.main), "--hicache-storage-backend") === "mooncake"))
            add(
                "--shared-cache-type",
                "no worker of the graph runs SGLang HiCache with --hicache-storage-backend mooncake, so none publishes Mooncake metadata",
            );
        const env = envOf(f.main, "DYN_MOONCAKE_KV_EVENTS_ENDPOINT");
        const fallback = workers.map((w) => envOf(w.main, "DYN_MOONCAKE_KV_EVENTS_ENDPOINT")?.value).find(Boolean);
        const ep: string | undefined = env?.value ?? fallback;
        if (!ep) {
            add(
                "env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT",
                "no DYN_MOONCAKE_KV_EVENTS_ENDPOINT on the frontend or its workers: no KV-event source reaches the shared cache",
            );
            continue;
        }
        const hp = tcpHostPort(ep);
        if (!hp) {
            add("env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT", `${ep} is not tcp://host:port`);
            continue;
        }
        const svc = s.objects.find(
            (o) =>
                o?.kind === "Service" &&
                [
                    `${o.metadata?.name}.${o.metadata?.namespace}.svc.cluster.local`,
                    `${o.metadata?.name}.${o.metadata?.namespace}.svc`,
                    `${o.metadata?.name}.${o.metadata?.namespace}`,
                    o.metadata?.name,
                ].includes(hp.host),
        );
        if (!svc) {
            add("env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT", `${ep}: no Service ${hp.host} in the stack`);
            continue;
        }
        const svcPort = (svc.spec?.ports ?? []).find((p: any) => p.port === hp.port);
        if (!svcPort) {
            add("env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT", `${ep}: Service ${svc.metadata.name} exposes no port ${hp.port}`);
            continue;
        }
        const target = Number(svcPort.targetPort ?? svcPort.port);
        const masters = pods.filter(
            (p) =>
                p.namespace === svc.metadata?.namespace &&
                Object.entries(svc.spec?.selector ?? {}).every(([k, v]) => p.labels[k] === v) &&
                argvOf(p.main)[0] === "mooncake_master",
        );
        if (!masters.length) {
            add("env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT", `${ep}: Service ${svc.metadata.name} selects no mooncake_master`);
            continue;
        }
        for (const m of masters) {
            const margv = argvOf(m.main);
            const on = flagValue(margv, "--enable_kv_events");
            const bind = flagValue(margv, "--kv_events_bind_endpoint");
            if (on !== true && on !== "true")
                add(
                    "env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT",
                    `the master ${m.object} runs without --enable_kv_events (default false), so it publishes nothing`,
                );
            else if (typeof bind !== "string" || tcpHostPort(bind.replace("*", "0.0.0.0"))?.port !== target)
                add(
                    "env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT",
                    `the master ${m.object} binds KV events to ${bind === undefined ? "nothing" : bind}, not port ${target}`,
                );
            if (!masterPublishesKvEvents(String(m.main.image), versions)) {
                add(
                    "env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT",
                    `the master image ${m.main.image} is not recorded to carry Mooncake >= ${MOONCAKE_MASTER_KV_EVENTS_SINCE} (upstream/compat.ts), which --enable_kv_events needs`,
                );
            }
        }
    }
    return out;
}

/** `gpu-operator-host-mofed` and `single-nfd`: GPU/Network Operator values that take effect. */
export function operatorValuesRule(s: StackView): Finding[] {
    const out: Finding[] = [];
    const gpu = s.releases.filter((r) => r.chart === "gpu-operator" || r.chart.endsWith("/gpu-operator"));
    const net = s.releases.filter((r) => r.chart === "network-operator" || r.chart.endsWith("/network-operator"));
    const mofed = activationFact("gpu-operator-host-mofed");
    for (const r of gpu) {
        const object = `helm Release ${r.name} (${r.chart}@${r.version})`;
        if (valueAt(r.values, "driver.rdma.useHostMofed") !== undefined && valueAt(r.values, "driver.rdma.enabled") !== true) {
            out.push({
                stack: s.stack,
                object,
                key: "values.driver.rdma.useHostMofed",
                message: `${mofed.id} (${mofed.feature}) would be ${mofed.otherwise}: driver.rdma.enabled is not true [${mofed.source}]`,
            });
        }
    }
    const nfd = activationFact("single-nfd");
    // nfd.enabled defaults to true in both charts (NVIDIA/gpu-operator@v25.10.1 and Mellanox/network-operator@v26.1.2 values.yaml).
    const nfdOn = (r: { values?: unknown }) => valueAt(r.values, "nfd.enabled") !== false;
    if (net.some(nfdOn)) {
        for (const r of gpu.filter(nfdOn)) {
            out.push({
                stack: s.stack,
                object: `helm Release ${r.name} (${r.chart}@${r.version})`,
                key: "values.nfd.enabled",
                message: `${nfd.id} (${nfd.feature}) would be ${nfd.otherwise}: the Network Operator release ${net
                    .filter(nfdOn)
                    .map((x) => x.name)
                    .join(", ")} deploys node-feature-discovery too; set nfd.enabled: false here [${nfd.source}]`,
            });
        }
    }
    return out;
}

/** Does a worker configure a KV event publisher the way its engine reads it (whether or not its cache emits)? */
function configuresKvEvents(argv: readonly string[]): boolean {
    const cfg = flagValue(argv, "--kv-events-config");
    if (argv.includes("--publish-kv-events")) return true;
    if (typeof cfg !== "string") return false;
    const j = parseJson(cfg);
    if (!j?.publisher || j.publisher === "null") return false;
    // vLLM: KVEventsConfig.enable_kv_cache_events defaults to false (the publisher alone publishes nothing).
    const vllm = argv[0] === "python3" && argv[2] === "dynamo.vllm";
    return !vllm || j.enable_kv_cache_events === true;
}

const isSglang = (argv: readonly string[]) => argv[0] === "python3" && argv[2] === "dynamo.sglang";

/** Does a worker publish KV events: a configured publisher and a cache that emits (not SGLang's decode chunk cache)? */
function publishesKvEvents(argv: readonly string[]): boolean {
    return configuresKvEvents(argv) && (!isSglang(argv) || sglangEmitsKvEvents(argv));
}

/**
 * `sglang-decode-kv-events`: an SGLang P/D decode worker with a KV event publisher but the chunk cache (no
 * `--disaggregation-decode-enable-radix-cache`) publishes nothing, while Dynamo advertises it as a publisher.
 */
export function sglangDecodeKvEventsRule(s: StackView): Finding[] {
    const fact = activationFact("sglang-decode-kv-events");
    return podsOf(s.objects)
        .filter((p) => p.componentType === "decode" && isSglang(argvOf(p.main)))
        .filter((p) => configuresKvEvents(argvOf(p.main)) && !sglangEmitsKvEvents(argvOf(p.main)))
        .map((p) =>
            finding(
                s.stack,
                p.object,
                p.main.name,
                "--kv-events-config",
                fact,
                "this SGLang decode worker runs --kv-events-config without --disaggregation-decode-enable-radix-cache: the P/D hook forces the chunk cache, which publishes no KV events",
            ),
        );
}

/**
 * `kv-events`, decode side: a P/D decode worker that publishes KV events while no frontend of its graph turns
 * conditional disaggregation on (`--router-conditional-disagg` / DYN_ROUTER_CONDITIONAL_DISAGG): the router derives
 * NotRequired for decode workers then and subscribes to none of their events (upstream/dynamo.ts
 * kvRouterNeedsWorkerEvents), so the publisher is read and inert. An SGLang decode worker on the chunk cache publishes
 * nothing and is {@link sglangDecodeKvEventsRule}'s; TRT-LLM's `--publish-kv-events` also gates the worker's metrics
 * (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/trtllm/workers/llm_worker.py) and
 * is not judged here.
 */
export function decodeKvEventsRule(s: StackView): Finding[] {
    const fact = activationFact("kv-events");
    const pods = podsOf(s.objects);
    const out: Finding[] = [];
    // TRT-LLM's --publish-kv-events also turns on the worker's metrics (llm_worker.py publish_events_and_metrics), so
    // on a TRT-LLM decode worker it is not inert: only a vLLM/SGLang --kv-events-config is judged.
    for (const w of pods.filter(
        (p) => p.componentType === "decode" && !argvOf(p.main).includes("--publish-kv-events") && publishesKvEvents(argvOf(p.main)),
    )) {
        const consumed = pods.some(
            (f) =>
                f.graph === w.graph &&
                routesOnKvEvents(f) &&
                kvRouterNeedsWorkerEvents("decode", argvOf(f.main), envOf(f.main, "DYN_ROUTER_CONDITIONAL_DISAGG")?.value),
        );
        if (!consumed)
            out.push(
                finding(
                    s.stack,
                    w.object,
                    w.main.name,
                    "--kv-events-config",
                    fact,
                    "this P/D decode worker publishes KV events, but no KV-routing frontend of its graph runs --router-conditional-disagg (or DYN_ROUTER_CONDITIONAL_DISAGG), so the router requires none from decode workers (KvEventSourceRequirement::NotRequired) and never subscribes: drop them from the decode worker",
                ),
            );
    }
    return out;
}

/** A frontend whose KV router routes on its workers' KV events (`--router-mode kv` without `--no-router-kv-events`). */
function routesOnKvEvents(p: PodView): boolean {
    return (
        p.componentType === "frontend" &&
        flagValue(argvOf(p.main), "--router-mode") === "kv" &&
        !argvOf(p.main).includes("--no-router-kv-events")
    );
}

/** `kv-events`: a KV-routing frontend's workers all publish KV events (else the router routes on guesses). */
export function kvEventsRule(s: StackView): Finding[] {
    const fact = activationFact("kv-events");
    const out: Finding[] = [];
    const pods = podsOf(s.objects);
    for (const f of pods.filter(routesOnKvEvents)) {
        const needed = (p: PodView) =>
            ["prefill", "decode", "worker"].includes(p.componentType ?? "") &&
            kvRouterNeedsWorkerEvents(p.componentType ?? "", argvOf(f.main), envOf(f.main, "DYN_ROUTER_CONDITIONAL_DISAGG")?.value);
        for (const w of pods.filter((p) => p.graph === f.graph && needed(p))) {
            if (!publishesKvEvents(argvOf(w.main)))
                out.push(
                    finding(
                        s.stack,
                        w.object,
                        w.main.name,
                        "--kv-events-config",
                        fact,
                        `the frontend routes on KV events (--router-mode kv) but this worker publishes none`,
                    ),
                );
        }
    }
    return out;
}

/** Env var whose presence turns a worker's forward-pass metrics on; the operator injects it (upstream/activation.ts). */
const FPM_PORT_ENV = "DYN_FORWARDPASS_METRIC_PORT";

/**
 * `planner-signals`: a Planner's load scaling reads the workers' forward-pass metrics over the event plane, which the
 * operator turns on (DYN_FORWARDPASS_METRIC_PORT) and a rendered env of that name replaces; its Prometheus must scrape
 * the frontend (router KV hit rate) and vLLM workers with speculative decoding (accept length).
 */
export function plannerSignalsRule(s: StackView): Finding[] {
    const fact = activationFact("planner-signals");
    const out: Finding[] = [];
    const pods = podsOf(s.objects);
    const monitors = s.objects.filter((o) => o?.kind === "PodMonitor");
    const rules = s.objects.filter((o) => o?.kind === "PrometheusRule");
    const release: string | undefined = rules.map((r) => r.metadata?.labels?.release).find(Boolean);
    for (const p of pods.filter((x) => x.componentType === "planner")) {
        if (!envOf(p.main, "PROMETHEUS_ENDPOINT"))
            out.push(
                finding(
                    s.stack,
                    p.object,
                    p.main.name,
                    "env.PROMETHEUS_ENDPOINT",
                    fact,
                    "no PROMETHEUS_ENDPOINT: the Planner falls back to the kube-prometheus-stack default",
                ),
            );
        const workers = pods.filter((x) => x.graph === p.graph && ["prefill", "decode", "worker"].includes(x.componentType ?? ""));
        for (const w of workers) {
            const fpm = envOf(w.main, FPM_PORT_ENV);
            if (fpm)
                out.push(
                    finding(
                        s.stack,
                        w.object,
                        w.main.name,
                        `env.${FPM_PORT_ENV}`,
                        fact,
                        `the worker's podTemplate sets ${FPM_PORT_ENV}${fpm.value === undefined ? " (from a reference)" : `=${JSON.stringify(fpm.value)}`}, replacing the operator's 20380: the Planner's load scaling reads this worker's forward-pass metrics, which that variable switches (empty: none); leave it to the operator`,
                    ),
                );
        }
        if (!rules.length) continue; // no prometheus-operator objects rendered: the scrape is the cluster's own
        const scraped = pods.filter(
            (x) =>
                x.graph === p.graph &&
                (x.componentType === "frontend" ||
                    (["prefill", "decode", "worker"].includes(x.componentType ?? "") &&
                        argvOf(x.main)[2] === "dynamo.vllm" &&
                        flagValue(argvOf(x.main), "--speculative-config") !== undefined)),
        );
        for (const t of scraped) {
            const port = t.componentType === "frontend" ? "http" : "system";
            const covered = monitors.some(
                (m) =>
                    (release === undefined || m.metadata?.labels?.release === release) &&
                    (m.spec?.namespaceSelector?.any === true ||
                        (m.spec?.namespaceSelector?.matchNames ?? [m.metadata?.namespace]).includes(t.namespace)) &&
                    selectsLabels(m.spec?.selector, t.labels) &&
                    (m.spec?.podMetricsEndpoints ?? []).some((e: any) => e.port === port),
            );
            const series = t.componentType === "frontend" ? "dynamo_component_router_kv_hit_rate" : "vllm:spec_decode_*";
            if (!covered)
                out.push(
                    finding(
                        s.stack,
                        p.object,
                        p.main.name,
                        `scrape.${t.componentType}`,
                        fact,
                        `${t.object} (port ${port}) is scraped by no PodMonitor the configured Prometheus selects, so the Planner reads no ${series} and scales without that correction`,
                    ),
                );
        }
    }
    return out;
}

const WORKER_TYPES = ["prefill", "decode", "worker"];

/**
 * `engine-priority`: every vLLM and SGLang worker orders its queue by the request priority the auth decision sets
 * (vLLM `--scheduling-policy priority`; SGLang `--enable-priority-scheduling` under `--schedule-policy fcfs|lof`).
 * TRT-LLM endpoints are refused at the hub (config/serving-policy.ts) once a priority class is above the lowest.
 */
export function enginePriorityRule(s: StackView): Finding[] {
    const fact = activationFact("engine-priority");
    const out: Finding[] = [];
    for (const w of podsOf(s.objects).filter((p) => p.kind === "DynamoGraphDeployment" && WORKER_TYPES.includes(p.componentType ?? ""))) {
        const argv = argvOf(w.main);
        if (w.backendFramework === "vllm" && flagValue(argv, "--scheduling-policy") !== "priority")
            out.push(
                finding(
                    s.stack,
                    w.object,
                    w.main.name,
                    "--scheduling-policy",
                    fact,
                    "a vLLM worker without `--scheduling-policy priority` serves FCFS",
                ),
            );
        if (w.backendFramework === "sglang") {
            const policy = flagValue(argv, "--schedule-policy");
            if (!argv.includes("--enable-priority-scheduling"))
                out.push(
                    finding(
                        s.stack,
                        w.object,
                        w.main.name,
                        "--enable-priority-scheduling",
                        fact,
                        "an SGLang worker without it ignores the priority",
                    ),
                );
            else if (policy !== undefined && policy !== "fcfs" && policy !== "lof")
                out.push(
                    finding(
                        s.stack,
                        w.object,
                        w.main.name,
                        "--schedule-policy",
                        fact,
                        `priority scheduling under --schedule-policy ${String(policy)} fails SGLang's start-up assertion (fcfs or lof only)`,
                    ),
                );
        }
    }
    return out;
}

/**
 * `router-priority`: a KV-routing frontend queues (`--router-queue-threshold`), so latency classes and priorities order
 * it; and where it queues, every SGLang worker of the graph states its prefill window (`--max-prefill-tokens`), the
 * threshold's denominator, which otherwise may fall back to the whole KV pool.
 */
export function routerPriorityRule(s: StackView): Finding[] {
    return [...routerQueueFindings(s), ...sglangPrefillWindowFindings(s)];
}

/** SGLang workers of a graph whose KV router queues, without `--max-prefill-tokens`. */
function sglangPrefillWindowFindings(s: StackView): Finding[] {
    const fact = activationFact("router-priority");
    const pods = podsOf(s.objects).filter((p) => p.kind === "DynamoGraphDeployment");
    const queueing = new Set(
        pods
            .filter(
                (p) =>
                    p.componentType === "frontend" &&
                    flagValue(argvOf(p.main), "--router-mode") === "kv" &&
                    (flagValue(argvOf(p.main), "--router-queue-threshold") !== undefined || !!envOf(p.main, "DYN_ROUTER_QUEUE_THRESHOLD")),
            )
            .map((p) => p.graph),
    );
    return pods
        .filter(
            (p) =>
                queueing.has(p.graph) &&
                p.backendFramework === "sglang" &&
                WORKER_TYPES.includes(p.componentType ?? "") &&
                flagValue(argvOf(p.main), "--max-prefill-tokens") === undefined,
        )
        .map((p) =>
            finding(
                s.stack,
                p.object,
                p.main.name,
                "--max-prefill-tokens",
                fact,
                "an SGLang worker behind a queueing KV router without --max-prefill-tokens publishes the KV pool size as its prefill capacity, so the router queue (and priority) almost never engages",
            ),
        );
}

function routerQueueFindings(s: StackView): Finding[] {
    const fact = activationFact("router-priority");
    return podsOf(s.objects)
        .filter(
            (p) =>
                p.componentType === "frontend" &&
                flagValue(argvOf(p.main), "--router-mode") === "kv" &&
                flagValue(argvOf(p.main), "--router-queue-threshold") === undefined &&
                !envOf(p.main, "DYN_ROUTER_QUEUE_THRESHOLD"),
        )
        .map((p) =>
            finding(
                s.stack,
                p.object,
                p.main.name,
                "--router-queue-threshold",
                fact,
                "the KV router has no queue, so strict priority and priority order nothing",
            ),
        );
}

/** Who drops the cache salt, in a finding: the engine, or what is missing to know it. */
function saltWho(engine: unknown): string {
    return typeof engine === "string" && engine !== ""
        ? `a ${engine} graph drops the cache salt`
        : "a graph without spec.backendFramework is not known to keep the cache salt; set spec.backendFramework to its engine";
}

/**
 * `cache-salt`: a graph whose engine does not keep the cache salt in its prefix hash (SGLang, TRT-LLM under Dynamo
 * 1.5.0) serves exactly one cache scope, as the hub records on the DynamoGraphDeployment; missing the record is
 * refused too (closed world: not proven single-scope).
 *
 * Every DynamoGraphDeployment of the stack whose `spec.backendFramework` is not `vllm` (an unset one included: not
 * known to keep the salt) gets one finding unless its `metadata.annotations` record {@link CACHE_SCOPES}
 * (upstream/labels.ts `CACHE_SCOPES_ANNOTATION`, written by lib/dgd.ts from config/endpoint.ts `cacheScopes`) as an
 * integer of at most 1. The fact and its upstream sources (the Dynamo frontend, KV router, vLLM and SGLang handlers):
 * upstream/activation.ts `cache-salt`.
 * @returns the findings, in object order, keyed `metadata.annotations.<annotation>`; empty when every such graph is
 *   single-scope
 * @throws Error when upstream/activation.ts has no `cache-salt` fact ({@link activationFact})
 */
export function cacheSaltRule(s: StackView): Finding[] {
    const fact = activationFact("cache-salt");
    const out: Finding[] = [];
    for (const o of s.objects.filter((x) => x?.kind === "DynamoGraphDeployment")) {
        const engine = o.spec?.backendFramework;
        if (engine === "vllm") continue;
        const raw = o.metadata?.annotations?.[CACHE_SCOPES];
        const n = raw === undefined ? undefined : Number(raw);
        if (n === undefined || !Number.isInteger(n) || n > 1)
            out.push(
                finding(
                    s.stack,
                    `DynamoGraphDeployment/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`,
                    undefined,
                    `metadata.annotations.${CACHE_SCOPES}`,
                    fact,
                    n === undefined || !Number.isInteger(n)
                        ? `${saltWho(engine)} and the hub recorded no single cache scope for it`
                        : `${saltWho(engine)} but keys of ${n} cache scopes call its model, so they would share its prefix cache`,
                ),
            );
    }
    return out;
}

/** The volume a container path lives on (longest mountPath prefix), or undefined. */
function volumeAt(p: PodView, path: string): any {
    const m = (p.main.volumeMounts ?? [])
        .filter((x: any) => path === x.mountPath || path.startsWith(`${String(x.mountPath).replace(/\/+$/, "")}/`))
        .sort((a: any, b: any) => String(b.mountPath).length - String(a.mountPath).length)[0];
    return m ? (p.spec.volumes ?? []).find((v: any) => v.name === m.name) : undefined;
}

/** Gibibytes of a Kubernetes memory quantity in Gi/Ti/G (enough for what workers request), undefined otherwise. */
function quantityGiB(q: unknown): number | undefined {
    const m = /^(\d+(?:\.\d+)?)(Gi|Ti|G|T)$/.exec(String(q ?? ""));
    if (!m) return undefined;
    const n = Number(m[1]);
    return { Gi: n, Ti: n * 1024, G: (n * 1e9) / 2 ** 30, T: (n * 1e12) / 2 ** 30 }[m[2] as "Gi" | "Ti" | "G" | "T"];
}

/** `kvbm-tiers`: a KVBM worker's disk tier lives on a node volume and its memory request covers the pinned host tier. */
export function kvbmTiersRule(s: StackView): Finding[] {
    const fact = activationFact("kvbm-tiers");
    const out: Finding[] = [];
    for (const p of podsOf(s.objects)) {
        const kvt = parseJson(flagValue(argvOf(p.main), "--kv-transfer-config"));
        const names = [kvt?.kv_connector, ...(kvt?.kv_connector_extra_config?.connectors ?? []).map((x: any) => x?.kv_connector)];
        if (!names.includes("DynamoConnector")) continue;
        const cpu = Number(envOf(p.main, "DYN_KVBM_CPU_CACHE_GB")?.value ?? 0);
        const disk = Number(envOf(p.main, "DYN_KVBM_DISK_CACHE_GB")?.value ?? 0);
        if (disk > 0) {
            const dir = envOf(p.main, "DYN_KVBM_DISK_CACHE_DIR")?.value;
            const vol = dir ? volumeAt(p, String(dir)) : undefined;
            if (!vol || !(vol.hostPath || vol.emptyDir))
                out.push(
                    finding(
                        s.stack,
                        p.object,
                        p.main.name,
                        "env.DYN_KVBM_DISK_CACHE_DIR",
                        fact,
                        `${dir ?? "unset (/tmp/)"} is on no hostPath or emptyDir volume: the disk tier would fill the container's writable layer`,
                    ),
                );
            const filter = String(envOf(p.main, "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER")?.value ?? "").toLowerCase();
            if (!["true", "1"].includes(filter))
                out.push(
                    finding(
                        s.stack,
                        p.object,
                        p.main.name,
                        "env.DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER",
                        fact,
                        "is not true: the disk offload filter sends only blocks reused twice to disk, so a session's KV seen once never reaches NVMe",
                    ),
                );
        }
        const req = quantityGiB(p.main.resources?.requests?.memory);
        const hostGiB = (cpu * 1e9) / 2 ** 30;
        if (cpu > 0 && (req === undefined || req < hostGiB))
            out.push(
                finding(
                    s.stack,
                    p.object,
                    p.main.name,
                    "resources.requests.memory",
                    fact,
                    `requests ${p.main.resources?.requests?.memory ?? "no memory"} for a ${cpu} GB pinned host tier: the scheduler would pack the node past its DRAM`,
                ),
            );
    }
    return out;
}

/** `model-cache`: a worker reading HF_HOME from a host path has a DaemonSet on its nodes filling that path. */
export function modelCacheRule(s: StackView): Finding[] {
    const fact = activationFact("model-cache");
    const out: Finding[] = [];
    const pods = podsOf(s.objects);
    const fillers = pods.filter((p) => p.kind === "DaemonSet");
    for (const p of pods.filter((x) => ["prefill", "decode", "worker"].includes(x.componentType ?? ""))) {
        const home = envOf(p.main, "HF_HOME")?.value;
        const vol = home ? volumeAt(p, String(home)) : undefined;
        if (!vol?.hostPath) continue;
        const filled = fillers.some((d) =>
            [...(d.spec.initContainers ?? []), ...(d.spec.containers ?? [])].some((c: any) => {
                const dh = envOf(c, "HF_HOME")?.value;
                const dv = dh ? volumeAt({ ...d, main: c }, String(dh)) : undefined;
                return (
                    dv?.hostPath?.path === vol.hostPath.path &&
                    Object.entries(d.spec.nodeSelector ?? {}).every(([k, v]) => p.spec.nodeSelector?.[k] === v)
                );
            }),
        );
        if (!filled)
            out.push(
                finding(
                    s.stack,
                    p.object,
                    p.main.name,
                    "env.HF_HOME",
                    fact,
                    `${vol.hostPath.path} is filled by no DaemonSet on this worker's nodes: the worker downloads the weights at start`,
                ),
            );
    }
    return out;
}

/** Every activation rule. */
export const activationRules: ReadonlyArray<(s: StackView) => Finding[]> = [
    speculativeRule,
    hicacheRegistrationRule,
    sharedCacheRule,
    operatorValuesRule,
    kvEventsRule,
    decodeKvEventsRule,
    sglangDecodeKvEventsRule,
    plannerSignalsRule,
    enginePriorityRule,
    routerPriorityRule,
    cacheSaltRule,
    kvbmTiersRule,
    modelCacheRule,
];

/** Runs every activation rule on one stack. */
export function checkActivation(s: StackView): Finding[] {
    return activationRules.flatMap((r) => r(s));
}
