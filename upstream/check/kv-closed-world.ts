import {
    cannotProve,
    KV_EXCEPTIONS_ANNOTATION,
    kvEnvFamilies,
    kvFlagFamily,
    type KvSafe,
    type KvSetting,
    kvJsonCarriers,
    kvKnownSettings,
    kvMovingEntrypoints,
    kvOpaqueArgFiles,
    kvScopedJsonCarriers,
    ucxNetDevicesInertWithDeviceList,
} from "../kv-transport";
import { parseSide } from "../pairs";
import { findEntrypoint } from "./containers";
import { configMapsOf, effectiveArgv, mountedFiles, objectName } from "./objects";
import { podTemplatesOf } from "./walk";
import type { Facts, Finding, Obj, RenderedStack } from "./types";

/** A reviewed exception declared in the stack file (config/endpoint.ts `kvExceptions`). */
export interface KvException {
    name: string;
    value: string;
    component?: string;
    why: string;
    until: string;
}

/** The exceptions annotated on an object; a malformed annotation is one finding and no exception. */
export function kvExceptionsOf(o: Obj): { list: KvException[]; error?: string } {
    const raw = o?.metadata?.annotations?.[KV_EXCEPTIONS_ANNOTATION];
    if (raw === undefined) return { list: [] };
    try {
        const v = JSON.parse(String(raw));
        if (
            !Array.isArray(v) ||
            !v.every(
                (e) =>
                    e &&
                    typeof e.name === "string" &&
                    typeof e.value === "string" &&
                    typeof e.why === "string" &&
                    e.why.trim() &&
                    /^\d{4}-\d{2}-\d{2}$/.test(String(e.until)),
            )
        ) {
            return { list: [], error: "each exception needs name, value, why and until (YYYY-MM-DD)" };
        }
        return { list: v };
    } catch {
        return { list: [], error: "is not JSON" };
    }
}

function isSafe(safe: KvSafe, value: string): boolean {
    if (safe.any) return true;
    if (safe.values?.includes(value)) return true;
    if (safe.caseInsensitive && safe.values?.some((v) => v.toLowerCase() === value.toLowerCase())) return true;
    return !!safe.pattern && safe.pattern.test(value);
}

const known = new Map<string, KvSetting>(kvKnownSettings.map((s) => [s.name, s]));

/** Flattens a JSON carrier into `carrier.path=value` pairs (a MultiConnector's `connectors` recurse as the carrier). */
function jsonSettings(carrier: string, v: unknown, at = carrier): Array<[string, string]> {
    if (v === null || typeof v !== "object") return [[at, String(v)]];
    if (Array.isArray(v)) {
        if (v.every((x) => x === null || typeof x !== "object")) return [[at, v.map(String).join(",")]];
        return v.flatMap((x) => jsonSettings(carrier, x, carrier));
    }
    const out: Array<[string, string]> = at === carrier ? [] : [[at, "{...}"]];
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out.push(...jsonSettings(carrier, x, `${at}.${k}`));
    return out;
}

/** Entry point id of the Mooncake store service (upstream/mooncake.ts). */
const MOONCAKE_STORE_ENTRYPOINT = "mooncake.mooncake_store_service";
/** Flags of the store service that cannot move KV (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/mooncake/mooncake_store_service.py `parse_arguments`). */
const STORE_FLAGS = ["--port", "--max-wait-time"];

/**
 * The store service's command line as (flag, value) pairs, every occurrence kept. Upstream parses it with argparse:
 * `-D/--define key=value` is `action="append"` and each pair overrides a MooncakeConfig attribute (protocol,
 * device_name, ...); `--config FILE` loads the config from that file instead of the environment
 * (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/mooncake/mooncake_store_service.py `parse_arguments`, `main`,
 * `MooncakeStoreService.__init__`). argparse also accepts `-Dk=v`, `--define=k=v` and unambiguous prefixes
 * (`--def`); a prefix is not one of the exact names below, so it is refused as unknown rather than guessed.
 */
export function storeArgs(argv: readonly string[]): Array<{ flag: string; value: string }> {
    const out: Array<{ flag: string; value: string }> = [];
    for (let i = 0; i < argv.length; i++) {
        const t = argv[i];
        if (!t.startsWith("-")) {
            out.push({ flag: "(positional)", value: t });
            continue;
        }
        if (/^-D./.test(t)) {
            out.push({ flag: "--define", value: t.slice(2) });
            continue;
        }
        const eq = t.indexOf("=");
        const name = eq > 0 ? t.slice(0, eq) : t;
        const flag = name === "-D" ? "--define" : name;
        const value = eq > 0 ? t.slice(eq + 1) : i + 1 < argv.length ? argv[++i] : "";
        out.push({ flag, value });
    }
    return out;
}

/**
 * Every source of a container's environment, as env entries, and the sources the pack cannot read. Sources: the
 * DynamoGraphDeployment's graph-wide `spec.env` (v1beta1 CRD: "env is prepended to every component's environment";
 * ai-dynamo/dynamo deploy/operator config/crd nvidia.com_dynamographdeployments.yaml), the container's `envFrom`
 * (a ConfigMap of the stack is read key by key with its `prefix`; a ConfigMap outside the stack or a Secret cannot be
 * seen) and its own `env` (Kubernetes core/v1 Container: env wins over envFrom; all are checked, so the order does not
 * matter to a closed world that refuses any unsafe value from any source).
 */
export function envSources(o: Obj, c: Obj, configMaps: Map<string, Obj>): { vars: Obj[]; unseen: Array<{ key: string; why: string }> } {
    const vars: Obj[] = [];
    const unseen: Array<{ key: string; why: string }> = [];
    // Graph-level env: v1beta1 `spec.env`, v1alpha1 `spec.envs` (upstream/check/walk.ts `effectivePodSpec`).
    if (o.kind === "DynamoGraphDeployment") vars.push(...(o.spec?.env ?? []), ...(o.spec?.envs ?? []));
    for (const [i, ef] of (c.envFrom ?? []).entries()) {
        if (ef?.configMapRef) {
            const name = ef.configMapRef.name;
            const cm = configMaps.get(`${o.metadata?.namespace ?? ""}/${name}`);
            if (!cm) {
                unseen.push({
                    key: `envFrom[${i}].configMapRef`,
                    why: `envFrom ConfigMap ${name} is not in the stack, so its keys cannot be seen`,
                });
                continue;
            }
            for (const [k, v] of Object.entries(cm.data ?? {})) vars.push({ name: `${ef.prefix ?? ""}${k}`, value: String(v) });
            if (Object.keys(cm.binaryData ?? {}).length)
                unseen.push({
                    key: `envFrom[${i}].configMapRef`,
                    why: `envFrom ConfigMap ${name} holds binaryData the pack does not read`,
                });
        } else
            unseen.push({
                key: `envFrom[${i}]`,
                why: `envFrom ${ef?.secretRef ? `Secret ${ef.secretRef.name}` : JSON.stringify(ef)} cannot be read by the pack (a Secret's contents are not in the preview)`,
            });
    }
    vars.push(...(c.env ?? []));
    return { vars, unseen };
}

/**
 * `UCX_NET_DEVICES` beside a NIXL UCX `device_list` (upstream/kv-transport.ts `ucxNetDevicesInertWithDeviceList`):
 * NIXL sets NET_DEVICES from the list over the environment, so the variable is inert. Undefined when it is not set,
 * there is no list, or the backend is not UCX.
 */
function inertNetDevices(vars: readonly Obj[]): string | undefined {
    const f = ucxNetDevicesInertWithDeviceList;
    // The last of a name wins, as Kubernetes merges env.
    const last = (name: string) => [...vars].reverse().find((e) => e.name === name);
    const value = (name: string) => last(name)?.value;
    const net = last("UCX_NET_DEVICES");
    const raw = value(f.carrier);
    const backend = value("SGLANG_DISAGGREGATION_NIXL_BACKEND");
    if (!net || raw === undefined || (backend !== undefined && String(backend) !== "UCX")) return undefined;
    let list: unknown;
    try {
        list = (JSON.parse(String(raw)) as Record<string, unknown> | null)?.[f.key];
    } catch {
        return undefined; // not JSON: refused by the closed world itself
    }
    if (typeof list !== "string") return undefined;
    const shown = net.value !== undefined ? `UCX_NET_DEVICES=${net.value}` : "UCX_NET_DEVICES";
    return `${shown} is inert: NIXL's UCX backend is given ${f.carrier}.${f.key} "${list}" and sets UCX NET_DEVICES from it with config.modifyAlways, over the environment [${f.source}]. Remove UCX_NET_DEVICES; the device_list is what keeps NIXL on the rails (the pack's ucx-net-devices-rail-hcas judges it)`;
}

/**
 * Rule: closed world for KV transport (upstream/kv-transport.ts). On every container that moves KV, every env var,
 * flag and JSON key of a KV family is known with a safe value, or covered by a reviewed, unexpired exception of the
 * graph for exactly that name and value.
 */
export function kvClosedWorldRule(stack: RenderedStack, facts: Facts): Finding[] {
    const out: Finding[] = [];
    const configMaps = configMapsOf(stack.objects);
    const today = (stack.now ?? new Date()).toISOString().slice(0, 10);
    for (const o of stack.objects) {
        if (!o || typeof o !== "object") continue;
        const specs = podTemplatesOf(o);
        if (specs.length === 0) continue;
        const ex = kvExceptionsOf(o);
        const object = objectName(o);
        if (ex.error)
            out.push({
                stack: stack.stack,
                object,
                key: `metadata.annotations[${KV_EXCEPTIONS_ANNOTATION}]`,
                message: `KV exceptions ${ex.error}`,
            });
        for (const t of specs) {
            // The template as written: envSources below adds the graph-level env to every container, init ones included.
            const spec = t.spec;
            // DGD component (v1beta1) or service (v1alpha1) and its role, as the shared walker reads them (./walk.ts).
            const comp = t.dgd ? t.component : undefined;
            const role = t.role ?? "";
            // Native sidecars (init containers with restartPolicy Always) run beside the engine for the pod's life, and
            // any container holding GPUs or RDMA devices can move KV: every one of them is in the closed world.
            for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
                const argv = effectiveArgv(c);
                const ep = findEntrypoint(argv, facts);
                // KV movers: a known KV entry point, a DGD worker, or anything holding GPUs or RDMA devices (an engine
                // started another way, `vllm serve` or a shell script, is still in the closed world).
                const devices = Object.keys({ ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) }).some((k) =>
                    /^(rdma\/|nvidia\.com\/gpu$|vpc\.amazonaws\.com\/efa$)/.test(k),
                );
                const moves =
                    (ep && kvMovingEntrypoints.includes(ep.id)) ||
                    devices ||
                    (o.kind === "DynamoGraphDeployment" && ["prefill", "decode", "worker"].includes(role) && c.name === "main");
                if (!moves) continue;
                const where = `${comp ? `${comp}/` : ""}${c.name}`;
                const check = (name: string, value: string, key: string) => {
                    const s = known.get(name);
                    if (s && isSafe(s.safe, value)) return;
                    const hit = ex.list.find((e) => e.name === name && e.value === value && (!e.component || e.component === comp));
                    if (hit && hit.until >= today) return;
                    const why = hit
                        ? `; its exception expired on ${hit.until}`
                        : s
                          ? `; known values: ${s.safe.values?.join(", ") ?? `/${s.safe.pattern?.source}/`} [${s.source}]${s.note ? ` (${s.note})` : ""}`
                          : "; nothing records its effect in upstream/kv-transport.ts";
                    out.push({
                        stack: stack.stack,
                        object,
                        container: where,
                        key,
                        message: `${cannotProve(name, value)}${why}. Record its effect with the upstream source in upstream/kv-transport.ts, or declare a reviewed exception (kvExceptions: name, value, component, why, until) on the endpoint in the stack file`,
                    });
                };
                const env = envSources(o, c, configMaps);
                for (const u of env.unseen)
                    out.push({
                        stack: stack.stack,
                        object,
                        container: where,
                        key: u.key,
                        message: `${u.why}: a KV-moving container's environment must be visible to the pack (the KV closed world cannot prove what it sets, e.g. UCX_TLS or UCX_IB_GPU_DIRECT_RDMA). Set the variables in env, or put the ConfigMap in the stack`,
                    });
                for (const e of env.vars) {
                    if (!kvEnvFamilies.some((f) => f.match.test(e.name))) continue;
                    const value =
                        e.value !== undefined
                            ? String(e.value)
                            : `<from ${e.valueFrom?.fieldRef?.fieldPath ?? JSON.stringify(e.valueFrom ?? {})}>`;
                    const s = known.get(e.name);
                    if (e.value === undefined && s?.safe.any) continue;
                    check(e.name, value, `env.${e.name}`);
                    if (kvJsonCarriers.includes(e.name) && e.value !== undefined) {
                        try {
                            for (const [n, v] of jsonSettings(e.name, JSON.parse(String(e.value)))) check(n, v, `env.${n}`);
                        } catch {
                            check(e.name, value, `env.${e.name}`);
                        }
                    }
                }
                const inert = inertNetDevices(env.vars);
                if (inert)
                    out.push({
                        stack: stack.stack,
                        object,
                        container: where,
                        key: "env.UCX_NET_DEVICES",
                        message: inert,
                    });
                const side = parseSide({ argv, env: {} }, ep, facts.components);
                // Flags inside shell scripts (`sh -c "python3 -m ... --kv-transfer-config ..."`) count too.
                const scripted: Record<string, string | true> = {};
                for (const w of argv.filter((a) => /\s/.test(a) && !/^\s*[{[]/.test(a))) {
                    for (const m of w.matchAll(/(?:^|\s)(--[a-z][a-z0-9_-]*)(?:=(\S+)|\s+(?!-)(\S+))?/g))
                        scripted[m[1]] = m[2] ?? m[3] ?? true;
                }
                for (const [flag, v] of Object.entries({ ...scripted, ...side.flags })) {
                    const scope = kvScopedJsonCarriers[flag];
                    if (scope) {
                        const value = v === true ? "true" : v;
                        let parsed: unknown;
                        try {
                            parsed = JSON.parse(value);
                        } catch {
                            check(flag, value.slice(0, 40), `${flag} (not JSON)`);
                            continue;
                        }
                        for (const [n, x] of jsonSettings(flag, parsed))
                            if (scope.some((k) => n === `${flag}.${k}` || n.startsWith(`${flag}.${k}.`))) check(n, x, n);
                        continue;
                    }
                    if (kvOpaqueArgFiles.includes(flag)) {
                        check(flag, v === true ? "true" : v, `${flag} (a file of engine arguments the pack does not read)`);
                        continue;
                    }
                    if (!kvFlagFamily.match.test(flag)) continue;
                    const value = v === true ? "true" : v;
                    check(flag, value, flag);
                    if (kvJsonCarriers.includes(flag)) {
                        try {
                            for (const [n, x] of jsonSettings(flag, JSON.parse(value))) check(n, x, n);
                        } catch {
                            /* not JSON: refused above unless known */
                        }
                    }
                }
                const files = mountedFiles(c, spec, configMaps, o.metadata?.namespace);
                if (ep?.id === MOONCAKE_STORE_ENTRYPOINT)
                    for (const a of storeArgs(argv.slice(ep.argv.length))) {
                        if (a.flag === "--define") {
                            const eq = a.value.indexOf("=");
                            const key = a.value.slice(0, eq);
                            // The device list the pack checks against the rails is MOONCAKE_DEVICE (policies/mooncake.ts);
                            // a `--define device_name` overriding it is accepted only when it restates that list.
                            const device = (c.env ?? []).find((e: Obj) => e.name === "MOONCAKE_DEVICE")?.value;
                            if (eq < 0) check("--define", a.value, "--define");
                            else if (key === "device_name" && device !== undefined && a.value.slice(eq + 1) === String(device)) continue;
                            else if (key === "device_name")
                                check("--define device_name", a.value.slice(eq + 1), `--define ${a.value} (differs from MOONCAKE_DEVICE)`);
                            else check(`mooncake.json.${a.value.slice(0, eq)}`, a.value.slice(eq + 1), `--define ${a.value}`);
                        } else if (a.flag === "--config") {
                            const content = files[a.value];
                            if (content === undefined)
                                check("--config", a.value, "--config (file not mounted from a ConfigMap of the stack)");
                            else
                                try {
                                    for (const [n, x] of jsonSettings("mooncake.json", JSON.parse(content)))
                                        check(n, x, `--config ${a.value}: ${n.slice("mooncake.json.".length)}`);
                                } catch {
                                    check("--config", a.value, `--config ${a.value} (not JSON)`);
                                }
                        } else if (!STORE_FLAGS.includes(a.flag)) check(a.flag, a.value, a.flag);
                    }
                for (const [file, content] of Object.entries(files)) {
                    const base = file.split("/").pop() ?? file;
                    if (!kvJsonCarriers.includes(base)) continue;
                    try {
                        for (const [n, x] of jsonSettings(base, JSON.parse(content)))
                            check(n, x, `file ${file}: ${n.slice(base.length + 1)}`);
                    } catch {
                        check(base, content.slice(0, 40), `file ${file}`);
                    }
                }
            }
        }
    }
    return out;
}
