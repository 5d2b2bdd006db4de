import type { PolicyResource } from "@pulumi/policy";
import { podTemplatesOf } from "../../upstream/check/walk";
import { isUnknownError, peek } from "./unknown";
import { EKS_NVIDIA_AMI_TYPES, LABELS, nodePools, type PoolView } from "./resources";

/**
 * Every container of every workload in a stack, normalised across shapes: DynamoGraphDeployment v1beta1
 * (`spec.components[].podTemplate`) and v1alpha1 (`spec.services{}` with `extraPodSpec.mainContainer`,
 * `resources.{limits,requests}.{gpu,custom}`, `envs`), Deployments, StatefulSets, DaemonSets, ReplicaSets,
 * Jobs, CronJobs, Pods and LeaderWorkerSets. Environment is resolved to what the process sees: `envFrom`
 * ConfigMaps/Secrets and `valueFrom` references of the same stack, graph-level env, later entries winning.
 */

/** Role of a container in the serving graph. */
export type Role = "frontend" | "planner" | "prefill" | "decode" | "worker" | "epp" | "other";

/** One resolved environment variable. */
export interface EnvValue {
    /** The value when known (literal or resolved from a ConfigMap/Secret of the stack). */
    value?: string;
    /** Field path that sets it, e.g. `spec.components[2].podTemplate.spec.containers[0].env[UCX_TLS]`. */
    field: string;
    /** Set from something the policy cannot read (fieldRef, a ConfigMap outside the stack, unknown in preview). */
    opaque?: boolean;
    /** Why it is opaque. */
    why?: string;
    /** Downward-API field the value comes from (`status.podIP`, `metadata.name`). */
    fieldRef?: string;
}

/** A volume of the pod (the fields the policies read). */
export interface VolumeView {
    name: string;
    hostPath?: string;
    configMap?: string;
    /** The ConfigMap volume's `items` (key -> relative path), when it lists them. */
    configMapItems?: Array<{ key: string; path: string }>;
}

/** A container, normalised. */
export interface ContainerView {
    /** The stack resource (violations attach to it). */
    resource: PolicyResource;
    /** `Kind/name` of the workload, e.g. `DynamoGraphDeployment/llama-70b`. */
    ref: string;
    kind: string;
    apiVersion: string;
    name: string;
    namespace: string;
    /** DGD component (v1beta1) or service (v1alpha1) name; LWS `leader`/`worker`. */
    component?: string;
    role: Role;
    /** Container name (`main` for the DGD main container). */
    container: string;
    /** Path to the container object, e.g. `spec.components[2].podTemplate.spec.containers[0]`. */
    path: string;
    init: boolean;
    image?: string;
    command: string[];
    args: string[];
    env: Map<string, EnvValue>;
    /** envFrom sources whose variables the pack cannot see. */
    opaqueEnv: OpaqueEnvSource[];
    volumeMounts: Array<{ name: string; mountPath: string; subPath?: string }>;
    /** Resource quantities as strings (v1alpha1 `gpu` mapped to its `gpuType`, `custom` flattened). */
    requests: Record<string, string>;
    limits: Record<string, string>;
    /** Field path of the resources block. */
    resourcesPath: string;
    security: { runAsUser?: number; runAsNonRoot?: boolean; privileged?: boolean; capAdd: string[]; field: string };
    pod: PodView;
    /** The DGD component/service object and graph spec, for DGD-specific rules. */
    dgd?: { version: string; component: Record<string, any>; spec: Record<string, any>; componentPath: string };
    /** Replicas of the pod template (1 for Pods/DaemonSets-per-node). */
    replicas: number;
}

/** The pod around a container. */
export interface PodView {
    path: string;
    nodeSelector: Record<string, string>;
    affinity: Record<string, any> | undefined;
    volumes: VolumeView[];
    hostNetwork: boolean;
    annotations: Record<string, string>;
    labels: Record<string, string>;
    initContainers: ContainerView[];
    containers: ContainerView[];
}

/** Extended resources that put an RDMA device in the pod. */
export function isRdmaResource(name: string): boolean {
    if (name.startsWith("rdma/")) return true;
    if (name === "vpc.amazonaws.com/efa") return true;
    return name.startsWith("nvidia.com/") && name !== "nvidia.com/gpu" && /rdma|sriov|hostdev|_ib|ib_/i.test(name);
}

/** Parses a Kubernetes integer quantity (`"8"`, `8`); non-integers give NaN. */
export function qty(v: unknown): number {
    if (typeof v === "number") return v;
    if (typeof v !== "string" || !/^\d+$/.test(v.trim())) return NaN;
    return Number(v.trim());
}

/** GPUs of a container (`nvidia.com/gpu` limit, else request). */
export function gpusOf(c: ContainerView): number {
    const n = qty(c.limits["nvidia.com/gpu"] ?? c.requests["nvidia.com/gpu"]);
    return Number.isFinite(n) ? n : 0;
}

/** The argv as one string (command + args), for flag lookups. */
export function argv(c: ContainerView): string[] {
    return [...c.command, ...c.args];
}

/**
 * Value of a command-line flag in argv (`--flag value` or `--flag=value`), also inside `sh -c` scripts.
 * Returns undefined when absent, "" for a bare flag.
 */
export function flagValue(c: ContainerView, flag: string): string | undefined {
    const words = argv(c).flatMap((w) => (/\s/.test(w) && !/^[{[]/.test(w.trim()) ? shellWords(w) : [w]));
    for (let i = 0; i < words.length; i++) {
        const w = words[i];
        if (w === flag) return i + 1 < words.length && !words[i + 1].startsWith("--") ? words[i + 1] : "";
        if (w.startsWith(`${flag}=`)) return w.slice(flag.length + 1);
    }
    return undefined;
}

/** True when argv mentions a flag at all. */
export function hasFlag(c: ContainerView, flag: string): boolean {
    return flagValue(c, flag) !== undefined;
}

/** Minimal shell word splitting (quotes respected) for `sh -c` scripts. */
function shellWords(s: string): string[] {
    const out: string[] = [];
    const re = /'([^']*)'|"([^"]*)"|(\S+)/g;
    for (const m of s.matchAll(re)) out.push(m[1] ?? m[2] ?? m[3]);
    return out;
}

/** Python module run by the container (`python3 -m dynamo.vllm` -> `dynamo.vllm`), also inside `sh -c`. */
export function pythonModule(c: ContainerView): string | undefined {
    const words = argv(c).flatMap((w) => (/\s/.test(w) ? shellWords(w) : [w]));
    const i = words.indexOf("-m");
    return i >= 0 ? words[i + 1] : undefined;
}

/** Engine a Dynamo worker runs, from its module. */
export function engineOf(c: ContainerView): "vllm" | "sglang" | "trtllm" | undefined {
    const m = pythonModule(c);
    if (m === "dynamo.vllm") return "vllm";
    if (m === "dynamo.sglang") return "sglang";
    if (m === "dynamo.trtllm") return "trtllm";
    return undefined;
}

// ------------------------------------------------------------------ stack context

/** ConfigMaps and Secrets of the stack by `namespace/name`, for env resolution. */
export interface StackData {
    configMaps: Map<string, Record<string, string>>;
    secrets: Map<string, Record<string, string>>;
    /** `ConfigMap ns/name` / `Secret ns/name` of the stack whose content is unknown (preview). */
    unknownData: Set<string>;
}

export { isUnknownError };

function dataOf(resources: PolicyResource[]): StackData {
    const configMaps = new Map<string, Record<string, string>>();
    const secrets = new Map<string, Record<string, string>>();
    const unknownData = new Set<string>();
    for (const r of resources) {
        const p = r.props ?? {};
        const isCm = p.kind === "ConfigMap" && p.apiVersion === "v1";
        const isSecret = p.kind === "Secret" && p.apiVersion === "v1";
        if (!isCm && !isSecret) continue;
        const key = `${p.metadata?.namespace ?? "default"}/${p.metadata?.name ?? r.name}`;
        // Content computed by another resource (a generated password) is unknown during preview: record that,
        // so a container taking env from it is judged as "cannot see" (fail closed), not as "sets nothing".
        const content = peek(() => {
            if (isCm) return { ...strMap(p.data) };
            const data: Record<string, string> = {};
            for (const [k, v] of Object.entries(p.data ?? {})) data[k] = Buffer.from(String(v), "base64").toString("utf8");
            Object.assign(data, strMap(p.stringData));
            return data;
        });
        if (!content.known) {
            unknownData.add(`${isCm ? "ConfigMap" : "Secret"} ${key}`);
            continue;
        }
        (isCm ? configMaps : secrets).set(key, content.value);
    }
    return { configMaps, secrets, unknownData };
}

/** Everything the workload policies look at, computed once per stack. */
export interface StackView {
    containers: ContainerView[];
    pools: PoolView[];
    data: StackData;
    resources: PolicyResource[];
}

/**
 * Where a resources array keeps its stack view: a symbol property of the array itself, so that a runner handing each
 * policy its own view of one shared array (a Proxy, tools/policy-runner.ts) still builds the view once per run.
 */
export const STACK_VIEW_KEY: unique symbol = Symbol.for("inference-platform.stackView");

/** Builds (and caches on the resources array) the stack view. */
export function stackView(resources: PolicyResource[]): StackView {
    const hit = (resources as unknown as Record<symbol, StackView | undefined>)[STACK_VIEW_KEY];
    if (hit) return hit;
    const data = dataOf(resources);
    const containers: ContainerView[] = [];
    for (const r of resources) containers.push(...workloadContainers(r, data));
    const view = { containers, pools: [...nodePools(resources), ...eksPools(resources)], data, resources };
    Object.defineProperty(resources, STACK_VIEW_KEY, { value: view, enumerable: false });
    return view;
}

/**
 * EKS GPU node groups (`aws:eks/nodeGroup:NodeGroup` with the pool label) as pools: EFA fabric, no rails, memlock
 * from their label (the launch template sets LimitMEMLOCK=infinity), GPUDirect from their AMI type. Their nodes are not
 * known up front (managed node groups scale), so `nodes` holds the desired size as placeholder names.
 */
function eksPools(resources: PolicyResource[]): PoolView[] {
    const out: PoolView[] = [];
    for (const r of resources) {
        if (r.type !== "aws:eks/nodeGroup:NodeGroup") continue;
        const labels = r.props.labels ?? {};
        const name = labels[LABELS.pool];
        if (!name || out.some((p) => p.name === name)) continue;
        const size = Number(r.props.scalingConfig?.desiredSize ?? 0);
        out.push({
            name,
            fabric: String(labels[LABELS.fabric] ?? ""),
            memlockUnlimited: labels[LABELS.memlock] === "true",
            rails: [],
            frontendHcas: [],
            urn: r.urn,
            nodes: Array.from({ length: size }, (_, i) => `${name}-${i}`),
            gpuDirectFromAmi: (EKS_NVIDIA_AMI_TYPES as readonly string[]).includes(String(r.props.amiType ?? "")),
        });
    }
    return out;
}

// ------------------------------------------------------------------ extraction

type Json = Record<string, any>;

/** An env source the pack cannot read: which variables it sets is not visible (class "what it cannot see"). */
export interface OpaqueEnvSource {
    field: string;
    source: string;
    why: string;
}

/**
 * The environment a container's process sees, resolved as the kubelet does (pkg/kubelet/kubelet_pods.go
 * `makeEnvironmentVariables`): `envFrom` sources in order (a later source wins for a key), then `env` entries
 * (which win over envFrom), each with its `prefix`. A ConfigMap or Secret of the same stack is read; one that is
 * not in the stack, or whose content is unknown during preview, is an {@link OpaqueEnvSource}; a `valueFrom` that
 * cannot be read (outside the stack, fieldRef, resourceFieldRef, unknown) is an opaque value.
 */
function resolveEnv(
    data: StackData,
    ns: string,
    sources: Array<{ env?: any[]; envFrom?: any[]; path: string; envKey?: string }>,
): { env: Map<string, EnvValue>; opaque: OpaqueEnvSource[] } {
    const out = new Map<string, EnvValue>();
    const opaque: OpaqueEnvSource[] = [];
    const look = (kind: "ConfigMap" | "Secret", name: string): { data?: Record<string, string>; why?: string } => {
        const key = `${ns}/${name}`;
        const d = (kind === "ConfigMap" ? data.configMaps : data.secrets).get(key);
        if (d) return { data: d };
        if (data.unknownData.has(`${kind} ${key}`)) return { why: `${kind} ${key} has content unknown during preview` };
        return { why: `${kind} ${key} is not defined in this stack` };
    };
    for (const s of sources) {
        (s.envFrom ?? []).forEach((ef: Json, i: number) => {
            const prefix = ef.prefix ?? "";
            const field = `${s.path}.envFrom[${i}]`;
            const kind = ef.configMapRef ? "ConfigMap" : ef.secretRef ? "Secret" : undefined;
            const name = ef.configMapRef?.name ?? ef.secretRef?.name;
            if (!kind || !name) {
                opaque.push({ field, source: "envFrom", why: "names no ConfigMap or Secret the pack can read" });
                return;
            }
            const hit = look(kind, String(name));
            if (!hit.data) {
                opaque.push({ field, source: `${kind} ${name}`, why: hit.why! });
                return;
            }
            for (const [k, v] of Object.entries(hit.data)) out.set(prefix + k, { value: String(v), field: `${field} (${kind} ${name})` });
        });
        for (const e of s.env ?? []) {
            if (!e?.name) continue;
            const field = `${s.path}.${s.envKey ?? "env"}[${e.name}]`;
            const lit = peek(() => e.value);
            if (!lit.known) {
                out.set(e.name, { field, opaque: true, why: "its value is unknown during preview" });
                continue;
            }
            if (lit.value !== undefined) {
                out.set(e.name, { value: String(lit.value), field });
                continue;
            }
            const vf = e.valueFrom ?? {};
            const ref = vf.configMapKeyRef
                ? { kind: "ConfigMap" as const, r: vf.configMapKeyRef }
                : vf.secretKeyRef
                  ? { kind: "Secret" as const, r: vf.secretKeyRef }
                  : undefined;
            if (ref) {
                const hit = look(ref.kind, String(ref.r.name));
                const v = hit.data?.[ref.r.key];
                out.set(
                    e.name,
                    v === undefined
                        ? { field, opaque: true, why: hit.why ?? `${ref.kind} ${ns}/${ref.r.name} has no key ${ref.r.key}` }
                        : { value: v, field: `${field} (${ref.kind} ${ref.r.name})` },
                );
            } else if (vf.fieldRef?.fieldPath) {
                // The downward API: a pod field, known by kind (status.podIP is the pod's routable address).
                out.set(e.name, { field, fieldRef: String(vf.fieldRef.fieldPath) });
            } else {
                out.set(e.name, { field, opaque: true, why: `it is set by ${Object.keys(vf).join(", ") || "nothing readable"}` });
            }
        }
    }
    return { env: out, opaque };
}

function strMap(o: unknown): Record<string, string> {
    const out: Record<string, string> = {};
    if (o && typeof o === "object") for (const [k, v] of Object.entries(o as Json)) if (v !== undefined && v !== null) out[k] = String(v);
    return out;
}

/**
 * A container's requests as the API server stores them: a resource given in `limits` only gets a request equal
 * to its limit (kubernetes/kubernetes pkg/apis/core/v1/defaults.go `SetDefaults_Pod`: "If limits are specified,
 * but requests are not, default requests to limits"). So `limits: { rdma/rail_0: 1 }` alone is a valid request
 * for one device; extended resources and huge pages given in both must be equal (pkg/apis/core/validation
 * `ValidateResourceRequirements`: "must be equal to ... limit" for resources that are not overcommittable).
 */
export function defaultedRequests(resources: Json | undefined): Record<string, string> {
    return { ...strMap(resources?.limits), ...strMap(resources?.requests) };
}

function podView(spec: Json, meta: Json, path: string): PodView {
    return {
        path,
        nodeSelector: strMap(spec.nodeSelector),
        affinity: spec.affinity,
        volumes: (spec.volumes ?? []).map((v: Json) => ({
            name: v.name,
            hostPath: v.hostPath?.path,
            configMap: v.configMap?.name,
            ...(v.configMap?.items
                ? { configMapItems: v.configMap.items.map((i: Json) => ({ key: String(i.key), path: String(i.path) })) }
                : {}),
        })),
        hostNetwork: spec.hostNetwork === true,
        annotations: strMap(meta?.annotations),
        labels: strMap(meta?.labels),
        initContainers: [],
        containers: [],
    };
}

function security(podSec: Json | undefined, cSec: Json | undefined, field: string): ContainerView["security"] {
    const p = podSec ?? {};
    const c = cSec ?? {};
    return {
        runAsUser: c.runAsUser ?? p.runAsUser,
        runAsNonRoot: c.runAsNonRoot ?? p.runAsNonRoot,
        privileged: c.privileged === true,
        capAdd: [...(c.capabilities?.add ?? [])].map((x: string) => String(x).replace(/^CAP_/, "")),
        field,
    };
}

interface Base {
    resource: PolicyResource;
    ref: string;
    kind: string;
    apiVersion: string;
    name: string;
    namespace: string;
    replicas: number;
}

function podContainers(
    base: Base,
    data: StackData,
    spec: Json,
    meta: Json,
    podPath: string,
    extra: {
        component?: string;
        role?: Role;
        globalEnv?: Array<{ env: any[]; path: string; envKey?: string }>;
        dgd?: ContainerView["dgd"];
    },
): PodView {
    const pod = podView(spec ?? {}, meta ?? {}, podPath);
    const make = (c: Json, i: number, init: boolean): ContainerView => {
        const path = `${podPath}.${init ? "initContainers" : "containers"}[${i}]`;
        return {
            ...base,
            component: extra.component,
            role: extra.role ?? "other",
            container: String(c.name ?? `#${i}`),
            path,
            init,
            image: c.image,
            command: (c.command ?? []).map(String),
            args: (c.args ?? []).map(String),
            ...(() => {
                const r = resolveEnv(data, base.namespace, [
                    ...(init ? [] : (extra.globalEnv ?? [])),
                    { env: c.env, envFrom: c.envFrom, path },
                ]);
                return { env: r.env, opaqueEnv: r.opaque };
            })(),
            volumeMounts: (c.volumeMounts ?? []).map((m: Json) => ({
                name: String(m.name),
                mountPath: String(m.mountPath),
                subPath: m.subPath,
            })),
            requests: defaultedRequests(c.resources),
            limits: strMap(c.resources?.limits),
            resourcesPath: `${path}.resources`,
            security: security(spec?.securityContext, c.securityContext, `${path}.securityContext`),
            pod,
            dgd: extra.dgd,
        };
    };
    pod.initContainers = (spec?.initContainers ?? []).map((c: Json, i: number) => make(c, i, true));
    pod.containers = (spec?.containers ?? []).map((c: Json, i: number) => make(c, i, false));
    return pod;
}

/** A walker role (upstream/check/walk.ts `dgdRole`) as a {@link Role}. */
function roleOf(role: string | undefined): Role {
    return ["frontend", "planner", "prefill", "decode", "worker", "epp"].includes(role ?? "") ? (role as Role) : "other";
}

/**
 * Containers of one stack resource (empty for non-workloads): the pod templates of the shared walker
 * (upstream/check/walk.ts `podTemplatesOf`, the same reading `npm run upstream-check` uses), resolved for the pack.
 */
export function workloadContainers(r: PolicyResource, data: StackData): ContainerView[] {
    const p = r.props ?? {};
    const kind = String(p.kind ?? "");
    const apiVersion = String(p.apiVersion ?? "");
    if (!kind || !apiVersion) return [];
    const name = String(p.metadata?.name ?? r.name);
    const base: Base = {
        resource: r,
        ref: `${kind}/${name}`,
        kind,
        apiVersion,
        name,
        namespace: String(p.metadata?.namespace ?? "default"),
        replicas: 1,
    };
    const out: ContainerView[] = [];
    const spec: Json = p.spec ?? {};
    for (const t of podTemplatesOf(p)) {
        const pod = podContainers({ ...base, replicas: t.replicas }, data, t.spec, t.metadata, t.path, {
            component: t.component,
            role: t.dgd ? roleOf(t.role) : undefined,
            globalEnv: t.graphEnv ? [t.graphEnv] : [],
            dgd: t.dgd ? { ...t.dgd, spec } : undefined,
        });
        pod.containers.forEach((c, i) => {
            const at = t.containerPaths[i];
            if (!at || at === c.path) return;
            // A container that lives elsewhere than `<pod>.containers[i]` (DGD v1alpha1 `extraPodSpec.mainContainer`).
            for (const v of c.env.values()) if (v.field.startsWith(`${c.path}.`)) v.field = at + v.field.slice(c.path.length);
            for (const o of c.opaqueEnv) if (o.field.startsWith(`${c.path}.`)) o.field = at + o.field.slice(c.path.length);
            c.path = at;
            c.resourcesPath = i === 0 && t.mainResourcesPath ? t.mainResourcesPath : `${at}.resources`;
            c.security.field = `${at}.securityContext`;
        });
        out.push(...pod.initContainers, ...pod.containers);
    }
    return out;
}

// ------------------------------------------------------------------ scope

/** Why a container is an RDMA (KV-transfer) workload. */
export interface KvUse {
    nixl: boolean;
    mooncake: boolean;
    nccl: boolean;
}

const MOONCAKE_ENV = /^(MOONCAKE_|MC_)/;

/**
 * What KV/collective transport a container runs. Frontends, planners, EPP and init containers never move KV;
 * a Mooncake master has no data path. Everything else is judged by what it runs and how it is configured:
 * DGD prefill/decode components (NIXL unless their PD connector is Mooncake), NIXL/UCX settings or binaries
 * (e.g. nixlbench), Mooncake clients and stores, NCCL settings.
 */
export function kvUse(c: ContainerView): KvUse {
    const none = { nixl: false, mooncake: false, nccl: false };
    if (c.init || ["frontend", "planner", "epp"].includes(c.role)) return none;
    const text = argv(c).join(" ");
    const keys = [...c.env.keys()];
    const masterOnly = /\bmooncake_master\b/.test(text) && !/mooncake_store_service|MooncakeStore|MooncakeConnector/.test(text);
    const mooncakePd = /"kv_connector"\s*:\s*"MooncakeConnector"|--disaggregation-transfer-backend[= ]mooncake/.test(text);
    const mooncake = !masterOnly && (keys.some((k) => MOONCAKE_ENV.test(k)) || /mooncake/i.test(text.replace(/\bmooncake_master\b/g, "")));
    const nixl =
        /nixl/i.test(text) || keys.some((k) => /^(UCX_|NIXL_)/.test(k)) || ((c.role === "prefill" || c.role === "decode") && !mooncakePd);
    const nccl = keys.some((k) => k.startsWith("NCCL_"));
    return { nixl, mooncake, nccl };
}

/** True when the container moves KV or collectives over the network and is subject to the RDMA rules. */
export function inScope(c: ContainerView): boolean {
    const u = kvUse(c);
    return u.nixl || u.mooncake || u.nccl;
}

/** Node pools a pod is pinned to (pool label in nodeSelector or required node affinity). Empty = not pinned. */
export function poolsOf(c: ContainerView, pools: PoolView[]): { pools: PoolView[]; named: string[] } {
    const named = new Set<string>();
    const sel = c.pod.nodeSelector[LABELS.pool];
    if (sel) named.add(sel);
    const terms = c.pod.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
    for (const t of terms) {
        for (const e of t.matchExpressions ?? []) {
            if (e.key === LABELS.pool && e.operator === "In") for (const v of e.values ?? []) named.add(String(v));
        }
    }
    return { pools: pools.filter((p) => named.has(p.name)), named: [...named] };
}

/** Sum of RDMA devices a container requests (limits), and per resource. */
export function rdmaDevices(c: ContainerView, which: "limits" | "requests"): { total: number; byName: Record<string, number> } {
    const byName: Record<string, number> = {};
    let total = 0;
    for (const [k, v] of Object.entries(c[which])) {
        if (!isRdmaResource(k)) continue;
        const n = qty(v);
        byName[k] = Number.isFinite(n) ? n : 0;
        total += byName[k];
    }
    return { total, byName };
}

/** The field path of an env variable (where it is set, or where it should be added). */
export function envField(c: ContainerView, name: string): string {
    return c.env.get(name)?.field ?? `${c.path}.env[${name}]`;
}

/** Value of an env variable (undefined when unset or unreadable). */
export function envValue(c: ContainerView, name: string): string | undefined {
    return c.env.get(name)?.value;
}
