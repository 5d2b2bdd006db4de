import type { Finding, Obj, RenderedStack } from "./types";

/**
 * The one pod-spec walker of the repository: every pod template of a rendered Kubernetes object, for the upstream rules
 * (./objects.ts `podSpecs`, ./view.ts `podsOf`, ./pairs.ts) and the policy pack's workload view
 * (policies/lib/workloads.ts). Pure: plain objects in, plain data out.
 *
 * Shapes read:
 * - Kubernetes workloads: Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job (`spec.template`),
 *   CronJob (`spec.jobTemplate.spec.template`), PodTemplate (`template`), Pod (`spec`);
 * - LeaderWorkerSet `spec.leaderWorkerTemplate.{leaderTemplate,workerTemplate,size}` (kubernetes-sigs/lws@main:
 *   docs/examples/sample/README.md, "leader pod's spec is specified in leaderTemplate, and worker pods' spec is specified
 *   in workerTemplate"): the leader template (the worker template when there is none) and the worker template;
 * - DynamoGraphDeployment (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:
 *   deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml): v1beta1 `spec.components[].podTemplate`,
 *   v1alpha1 `spec.services{}` whose main container is `extraPodSpec.mainContainer` with the service's `resources`
 *   (`{cpu, memory, gpu, gpuType, custom}`, `claims`), `envs`, `envFromSecret`, `livenessProbe`, `readinessProbe` and
 *   `volumeMounts` merged in as the operator's conversion webhook merges them ({@link v1alpha1MainContainer}), and whose
 *   `frontendSidecar` (`{image, args, envs, envFromSecret}`) is a container of the pod too (`sidecar-frontend`).
 *
 * Closed world: {@link unreadPodTemplates} names what an object carries that looks like a pod template and the walker
 * does not read, and every kind of a workload API group the walker has no reading for.
 */

/** One pod template of an object. */
export interface PodTemplateView {
    /** `component <name>` (DGD), `leader` / `worker` (LWS), "" for single-template objects. */
    label: string;
    /** DGD component (v1beta1) or service (v1alpha1) name; LWS `leader` / `worker`. */
    component?: string;
    /** DGD role, lower case: v1beta1 `type`; v1alpha1 `subComponentType` when prefill/decode, else `componentType`. */
    role?: string;
    /** Field path of the pod spec, e.g. `spec.components[2].podTemplate.spec`. */
    path: string;
    /** The pod spec (v1alpha1: assembled, the main container first, named `main`). */
    spec: Obj;
    /** The pod template's metadata (labels, annotations). */
    metadata: Obj;
    /** Pods of this template (replicas; LWS: groups x pods per group of that template). */
    replicas: number;
    /** Field path of each entry of `spec.containers` (v1alpha1: the main container lives at `extraPodSpec.mainContainer`). */
    containerPaths: string[];
    /** Field path of each entry of `spec.initContainers`. */
    initContainerPaths: string[];
    /** Field path of the main container's resources when not under the container (v1alpha1 `resources`). */
    mainResourcesPath?: string;
    /** Graph-level env every container of a DGD sees (v1beta1 `spec.env`, v1alpha1 `spec.envs`). */
    graphEnv?: { env: Obj[]; path: string; envKey: string };
    /** DGD: apiVersion's version, the component/service object and its path. */
    dgd?: { version: string; component: Obj; componentPath: string };
}

/** The API group of an apiVersion (`apps/v1` -> `apps`, `v1` -> ""). */
export function groupOf(apiVersion: unknown): string {
    const a = String(apiVersion ?? "");
    return a.includes("/") ? a.slice(0, a.lastIndexOf("/")) : "";
}

const TEMPLATE_KINDS: Readonly<Record<string, readonly string[]>> = {
    apps: ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"],
    batch: ["Job"],
    "": ["ReplicationController"],
};
/** Kinds whose pods all run one template with `spec.replicas` copies (DaemonSet / Job: 1 per template here). */
const REPLICATED = ["Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"];

/** Reads a Kubernetes integer quantity (`"8"`, `8`); anything else gives NaN. */
function count(v: unknown): number {
    if (typeof v === "number") return v;
    if (typeof v !== "string" || !/^\d+$/.test(v.trim())) return Number.NaN;
    return Number(v.trim());
}

function paths(containers: unknown, at: string): string[] {
    return Array.isArray(containers) ? containers.map((_, i) => `${at}[${i}]`) : [];
}

function template(t: Obj | undefined, at: string, replicas: number, extra: Partial<PodTemplateView> = {}): PodTemplateView | undefined {
    if (!t || typeof t !== "object") return undefined;
    const spec: Obj = t.spec ?? {};
    const path = `${at}.spec`;
    return {
        label: "",
        path,
        spec,
        metadata: t.metadata ?? {},
        replicas,
        containerPaths: paths(spec.containers, `${path}.containers`),
        initContainerPaths: paths(spec.initContainers, `${path}.initContainers`),
        ...extra,
    };
}

/** DGD role of a component: v1beta1 `type`, v1alpha1 `subComponentType` (prefill/decode) or `componentType`. */
export function dgdRole(type: unknown, sub?: unknown): string {
    const s = String(sub ?? "").toLowerCase();
    if (s === "prefill" || s === "decode") return s;
    return String(type ?? "").toLowerCase();
}

/** v1alpha1 `resources.{limits,requests}` (`{cpu, memory, gpu, gpuType, custom{}}`) as Kubernetes resource names. */
function v1alpha1Resources(x: Obj | undefined): Record<string, string> {
    const o: Record<string, string> = {};
    if (!x || typeof x !== "object") return o;
    if (x.cpu) o.cpu = String(x.cpu);
    if (x.memory) o.memory = String(x.memory);
    if (x.gpu) o[String(x.gpuType || "nvidia.com/gpu")] = String(x.gpu);
    for (const [k, v] of Object.entries(x.custom ?? {})) if (v !== undefined && v !== null) o[k] = String(v);
    return o;
}

/** Where the v1alpha1 main-container merge below is read (ai-dynamo/dynamo, the operator's conversion webhook). */
export const V1ALPHA1_MAIN_CONTAINER_SOURCE =
    "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/api/v1alpha1/shared_spec_conversion.go";

/** The name of the container a v1alpha1 `frontendSidecar` becomes ({@link V1ALPHA1_MAIN_CONTAINER_SOURCE} `defaultFrontendSidecarContainerName`). */
export const V1ALPHA1_FRONTEND_SIDECAR = "sidecar-frontend";

/** Go's zero value as JSON carries it (absent, null, "", 0, false, an empty list or object): mergo never copies it. */
function empty(v: unknown): boolean {
    if (v === undefined || v === null || v === "" || v === 0 || v === false) return true;
    if (Array.isArray(v)) return v.length === 0;
    return typeof v === "object" && Object.keys(v as Obj).length === 0;
}

/**
 * `mergo.Merge(dst, src, mergo.WithOverride)` (github.com/imdario/mergo v0.3.16, the operator's pin) on plain JSON:
 * objects (Go structs, maps, pointers to structs) merge key by key, anything else in `src` that is not Go's zero value
 * replaces `dst`'s (lists whole). Returns a new object; neither argument is changed.
 */
function mergeOverride(dst: Obj, src: Obj): Obj {
    const out: Obj = { ...dst };
    for (const [k, v] of Object.entries(src)) {
        if (empty(v)) continue;
        const d = out[k];
        const isObj = (x: unknown) => !!x && typeof x === "object" && !Array.isArray(x);
        out[k] = isObj(v) && isObj(d) ? mergeOverride(d, v) : structuredClone(v);
    }
    return out;
}

/**
 * `mergeEnvs(common, specific)` ({@link V1ALPHA1_MAIN_CONTAINER_SOURCE}): `common` then `specific`, one entry per name,
 * a `specific` entry replacing the `common` one of its name in place.
 */
function mergeEnvs(common: Obj[], specific: Obj[]): Obj[] {
    const out: Obj[] = [];
    const seen = new Map<string, number>();
    for (const e of [...common, ...specific]) {
        const i = seen.get(String(e?.name));
        if (i !== undefined) out[i] = e;
        else {
            seen.set(String(e?.name), out.length);
            out.push(e);
        }
    }
    return out;
}

/**
 * A v1alpha1 service's containers as the operator runs them: the main container ({@link v1alpha1MainContainer}) first,
 * then the `extraPodSpec.containers` not named `main` (the operator drops one of that name: "Assemble containers: main
 * first, then non-main user sidecars", {@link V1ALPHA1_MAIN_CONTAINER_SOURCE} `buildSharedPodTemplateFromAlpha`), each
 * with its path in the object. The frontend sidecar is not among them.
 */
export function v1alpha1Containers(svc: Obj | undefined, spath: string): { containers: Obj[]; paths: string[] } {
    const extra: unknown[] = Array.isArray(svc?.extraPodSpec?.containers) ? svc.extraPodSpec.containers : [];
    const containers: Obj[] = [v1alpha1MainContainer(svc)];
    const out = [`${spath}.extraPodSpec.mainContainer`];
    extra.forEach((c, i) => {
        if ((c as Obj)?.name === "main") return;
        containers.push(c as Obj);
        out.push(`${spath}.extraPodSpec.containers[${i}]`);
    });
    return { containers, paths: out };
}

/**
 * The main container the operator runs for a v1alpha1 service, as its conversion webhook builds the v1beta1
 * `podTemplate` container `main` ({@link V1ALPHA1_MAIN_CONTAINER_SOURCE} `buildMainContainerFromDedicated` then
 * `mergeExtraPodSpecMainContainer`): a base from the service's own fields (`resources` as Kubernetes resource names,
 * with `claims`; `envs`; `envFromSecret` as one `envFrom` secretRef when not empty; `livenessProbe`; `readinessProbe`;
 * every `volumeMounts[]` entry as `{name, mountPath: mountPoint}`, compilation-cache ones included), then
 * `extraPodSpec.mainContainer` merged over it with mergo's override (its `envFrom`, `command`, `args`, `image`... replace
 * the base's when set, `resources.{limits,requests}` override per resource name, probes merge field by field), except:
 * `env` is `mergeEnvs(envs, mainContainer.env)` (one entry per name, the container's winning), `volumeMounts` are
 * the container's own followed by the service's, `startupProbe` is the container's, and the name is always `main`.
 * `resources.{limits,requests}` are always objects (empty when nothing sets them).
 */
export function v1alpha1MainContainer(svc: Obj | undefined): Obj {
    const s: Obj = svc ?? {};
    const base: Obj = { name: "main" };
    if (s.resources && typeof s.resources === "object") {
        const r: Obj = {};
        const limits = v1alpha1Resources(s.resources.limits);
        const requests = v1alpha1Resources(s.resources.requests);
        if (Object.keys(limits).length) r.limits = limits;
        if (Object.keys(requests).length) r.requests = requests;
        if (Array.isArray(s.resources.claims) && s.resources.claims.length) r.claims = structuredClone(s.resources.claims);
        base.resources = r;
    }
    const envs: Obj[] = Array.isArray(s.envs) ? s.envs : [];
    if (envs.length) base.env = structuredClone(envs);
    if (s.envFromSecret) base.envFrom = [{ secretRef: { name: String(s.envFromSecret) } }];
    if (s.livenessProbe) base.livenessProbe = structuredClone(s.livenessProbe);
    if (s.readinessProbe) base.readinessProbe = structuredClone(s.readinessProbe);
    const dedicatedMounts: Obj[] = (Array.isArray(s.volumeMounts) ? s.volumeMounts : []).map((vm: Obj) => ({
        name: vm?.name,
        mountPath: vm?.mountPoint ?? "",
    }));
    if (dedicatedMounts.length) base.volumeMounts = dedicatedMounts;
    const mc: Obj | undefined = s.extraPodSpec?.mainContainer;
    let main: Obj = base;
    if (mc && typeof mc === "object") {
        main = mergeOverride(base, { ...mc, name: "main" });
        const env = mergeEnvs(envs, Array.isArray(mc.env) ? mc.env : []);
        if (env.length) main.env = structuredClone(env);
        else delete main.env;
        const mounts = [...(Array.isArray(mc.volumeMounts) ? structuredClone(mc.volumeMounts) : []), ...dedicatedMounts];
        if (mounts.length) main.volumeMounts = mounts;
        else delete main.volumeMounts;
        if (mc.startupProbe) main.startupProbe = structuredClone(mc.startupProbe);
    }
    main.name = "main";
    main.resources = { ...(main.resources ?? {}), requests: main.resources?.requests ?? {}, limits: main.resources?.limits ?? {} };
    return main;
}

function dgdTemplates(o: Obj): PodTemplateView[] {
    const spec: Obj = o.spec ?? {};
    const version = String(o.apiVersion ?? "").split("/")[1] ?? "";
    const out: PodTemplateView[] = [];
    if (Array.isArray(spec.components)) {
        spec.components.forEach((comp: Obj, i: number) => {
            const cpath = `spec.components[${i}]`;
            const t = template(comp?.podTemplate ?? {}, `${cpath}.podTemplate`, count(comp?.replicas) || 1, {
                label: `component ${comp?.name}`,
                component: comp?.name,
                role: dgdRole(comp?.type),
                graphEnv: Array.isArray(spec.env) ? { env: spec.env, path: "spec", envKey: "env" } : undefined,
                dgd: { version, component: comp ?? {}, componentPath: cpath },
            });
            if (t) out.push(t);
        });
    }
    if (spec.services && typeof spec.services === "object" && !Array.isArray(spec.services)) {
        for (const [name, svc] of Object.entries(spec.services as Record<string, Obj>)) {
            const spath = `spec.services.${name}`;
            const eps: Obj = svc?.extraPodSpec ?? {};
            const { containers, paths: containerPaths } = v1alpha1Containers(svc, spath);
            const fs: Obj | undefined = svc?.frontendSidecar;
            // The operator appends the frontend sidecar unless a container already has its name (`appendFrontendSidecar`).
            if (fs && typeof fs === "object" && !containers.some((c) => c?.name === V1ALPHA1_FRONTEND_SIDECAR)) {
                const c: Obj = { name: V1ALPHA1_FRONTEND_SIDECAR, image: fs.image, args: fs.args ?? [], env: fs.envs ?? [] };
                if (fs.envFromSecret) c.envFrom = [{ secretRef: { name: fs.envFromSecret } }];
                containers.push(c);
                containerPaths.push(`${spath}.frontendSidecar`);
            }
            out.push({
                label: `component ${name}`,
                component: name,
                role: dgdRole(svc?.componentType, svc?.subComponentType),
                path: `${spath}.extraPodSpec`,
                spec: { ...eps, containers },
                metadata: svc?.extraPodMetadata ?? {},
                replicas: count(svc?.replicas) || 1,
                containerPaths,
                initContainerPaths: paths(eps.initContainers, `${spath}.extraPodSpec.initContainers`),
                mainResourcesPath: `${spath}.resources`,
                graphEnv: Array.isArray(spec.envs) ? { env: spec.envs, path: "spec", envKey: "envs" } : undefined,
                dgd: { version, component: svc ?? {}, componentPath: spath },
            });
        }
    }
    return out;
}

/** Every pod template of an object (empty for objects that carry none the walker reads). */
export function podTemplatesOf(o: Obj): PodTemplateView[] {
    if (!o || typeof o !== "object") return [];
    const kind = String(o.kind ?? "");
    const group = groupOf(o.apiVersion);
    const spec: Obj = o.spec ?? {};
    // The pack's objects carry their apiVersion; a manifest without one is read by kind (older renders, tests).
    const inGroup = (g: string) => o.apiVersion === undefined || group === g;
    if (kind === "DynamoGraphDeployment" && inGroup("nvidia.com")) return dgdTemplates(o);
    for (const [g, kinds] of Object.entries(TEMPLATE_KINDS))
        if (kinds.includes(kind) && inGroup(g)) {
            const t = template(spec.template, "spec.template", REPLICATED.includes(kind) ? count(spec.replicas) || 1 : 1);
            return t ? [t] : [];
        }
    if (kind === "CronJob" && inGroup("batch")) {
        const t = template(spec.jobTemplate?.spec?.template, "spec.jobTemplate.spec.template", 1);
        return t ? [t] : [];
    }
    if (kind === "PodTemplate" && inGroup("")) {
        const t = template(o.template, "template", 1);
        return t ? [t] : [];
    }
    if (kind === "Pod" && inGroup("")) {
        return [
            {
                label: "",
                path: "spec",
                spec,
                metadata: o.metadata ?? {},
                replicas: 1,
                containerPaths: paths(spec.containers, "spec.containers"),
                initContainerPaths: paths(spec.initContainers, "spec.initContainers"),
            },
        ];
    }
    if (kind === "LeaderWorkerSet" && inGroup("leaderworkerset.x-k8s.io")) {
        const lwt: Obj = spec.leaderWorkerTemplate ?? {};
        const groups = count(spec.replicas) || 1;
        const size = count(lwt.size) || 1;
        const out: PodTemplateView[] = [];
        const leader = lwt.leaderTemplate
            ? template(lwt.leaderTemplate, "spec.leaderWorkerTemplate.leaderTemplate", groups, { label: "leader", component: "leader" })
            : template(lwt.workerTemplate, "spec.leaderWorkerTemplate.workerTemplate", groups, { label: "leader", component: "leader" });
        if (leader) out.push(leader);
        if (lwt.leaderTemplate) {
            const worker = template(lwt.workerTemplate, "spec.leaderWorkerTemplate.workerTemplate", groups * Math.max(1, size - 1), {
                label: "worker",
                component: "worker",
            });
            if (worker) out.push(worker);
        }
        return out;
    }
    return [];
}

/**
 * API groups whose kinds run pods (Kubernetes `apps`, `batch`; LeaderWorkerSet's; Grove's `grove.io` PodCliqueSet /
 * PodClique): a kind of these the walker has no reading for is refused, whatever its shape.
 */
const WORKLOAD_GROUPS = ["apps", "batch", "leaderworkerset.x-k8s.io", "grove.io"];
/**
 * Kinds of Dynamo's `nvidia.com` group whose CRDs carry a pod template or container
 * (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/config/crd/bases/).
 */
const DYNAMO_POD_KINDS = ["DynamoGraphDeployment", "DynamoComponentDeployment", "DynamoGraphDeploymentRequest", "DynamoCheckpoint"];
/** Kinds of the core group that carry a pod template. */
const CORE_POD_KINDS = ["Pod", "PodTemplate", "ReplicationController"];
/** Keys under which a pod spec keeps containers. */
const CONTAINER_KEYS = ["containers", "initContainers", "ephemeralContainers", "mainContainer"];

/** A container-like value: an object with an image, command or args, or a list holding one. */
function containerLike(v: unknown): boolean {
    const one = (x: unknown) =>
        !!x && typeof x === "object" && !Array.isArray(x) && ["image", "command", "args"].some((k) => k in (x as Obj));
    return Array.isArray(v) ? v.some(one) : one(v);
}

/** Field paths of every container-like value under a container key, anywhere in `v`. */
function containerFields(v: unknown, at: string, out: string[]): void {
    if (Array.isArray(v)) v.forEach((x, i) => containerFields(x, `${at}[${i}]`, out));
    else if (v && typeof v === "object")
        for (const [k, x] of Object.entries(v as Obj)) {
            const p = at ? `${at}.${k}` : k;
            if (CONTAINER_KEYS.includes(k) && containerLike(x)) out.push(p);
            else containerFields(x, p, out);
        }
}

/**
 * What of an object looks like a pod template but is not read by {@link podTemplatesOf}: `{ key, why }` per field
 * (a kind of a workload group the walker cannot read: key `kind`). Empty when the walker reads everything it carries.
 * `data`/`stringData`/`binaryData` (ConfigMap/Secret payloads) are not scanned.
 */
export function unreadPodTemplates(o: Obj): Array<{ key: string; why: string }> {
    if (!o || typeof o !== "object") return [];
    const kind = String(o.kind ?? "");
    const group = groupOf(o.apiVersion);
    const templates = podTemplatesOf(o);
    const out: Array<{ key: string; why: string }> = [];
    const known =
        (group === "" && CORE_POD_KINDS.includes(kind)) ||
        (group === "nvidia.com" && DYNAMO_POD_KINDS.includes(kind)) ||
        WORKLOAD_GROUPS.includes(group);
    if (known && templates.length === 0)
        out.push({
            key: "kind",
            why: `${o.apiVersion} ${kind} runs pods, and the pod-spec walker (upstream/check/walk.ts) reads no pod template of it`,
        });
    const covered = new Set<string>();
    for (const t of templates) {
        for (const p of [...t.containerPaths, ...t.initContainerPaths]) covered.add(p.replace(/\[\d+\]$/, ""));
    }
    const found: string[] = [];
    const { data: _d, stringData: _s, binaryData: _b, ...rest } = o;
    containerFields(rest, "", found);
    for (const p of found)
        if (!covered.has(p))
            out.push({
                key: p,
                why: "holds containers the pod-spec walker (upstream/check/walk.ts) does not read, so no upstream rule sees them",
            });
    return out;
}

/**
 * Rule (closed world): every object whose pod templates the walker cannot read (a workload kind it has no reading for,
 * or containers outside the templates it reads) is a finding, so no container reaches the cluster unchecked.
 */
export function unreadPodTemplateRule(stack: RenderedStack): Finding[] {
    return stack.objects.flatMap((o) =>
        unreadPodTemplates(o).map((u) => ({
            stack: stack.stack,
            object: `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`,
            key: u.key,
            message: `${u.why}; render the workload as a kind the walker reads, or teach upstream/check/walk.ts the shape from its upstream schema`,
        })),
    );
}

/**
 * The pod spec as its containers run it: a DGD's graph-level env (v1beta1 `spec.env`, "prepended to every component's
 * environment"; v1alpha1 `spec.envs`, "applied to all services", ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:
 * deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml) put before each container's own env, as
 * the pack's workload view resolves it (policies/lib/workloads.ts). Init containers keep their own env.
 */
export function effectivePodSpec(t: PodTemplateView): Obj {
    const g = t.graphEnv?.env;
    if (!g?.length) return t.spec;
    return { ...t.spec, containers: (t.spec.containers ?? []).map((c: Obj) => ({ ...c, env: [...g, ...(c?.env ?? [])] })) };
}
