import { run } from "./lib/unknown";
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { type Finding, stackPolicy, containerLabel } from "./lib/report";
import { helmReleases } from "./lib/resources";
import { plannerConfigChoices } from "../upstream/planner";
import {
    dynamoFrontendIgnoredFlags,
    dynamoFrontendKvOnlyFlags,
    dynamoRemovedWorkerFlags,
    kvRouterNeedsWorkerEvents,
    sglangEmitsKvEvents,
} from "../upstream/dynamo";
import { argv, type ContainerView, engineOf, envValue, flagValue, hasFlag, qty, type StackView } from "./lib/workloads";

/**
 * DynamoGraphDeployment configuration rules, for both served shapes:
 * v1beta1 (`spec.components[]`, `type`, `podTemplate`, container `main`) and v1alpha1 (`spec.services{}`,
 * `componentType`/`subComponentType`, `extraPodSpec.mainContainer`). Each mistake here is accepted by the API
 * server or fails late (at engine start, in the planner, or in routing quality), so the pack catches it first.
 */

interface Dgd {
    r: PolicyResource;
    ref: string;
    version: string;
    spec: Record<string, any>;
}

/** DGDs of the stack. */
function dgds(resources: PolicyResource[]): Dgd[] {
    const out: Dgd[] = [];
    for (const r of resources)
        run(() => {
            const p = r.props ?? {};
            if (p.kind === "DynamoGraphDeployment" && String(p.apiVersion ?? "").startsWith("nvidia.com/")) {
                out.push({
                    r,
                    ref: `DynamoGraphDeployment/${p.metadata?.name ?? r.name}`,
                    version: String(p.apiVersion).split("/")[1],
                    spec: p.spec ?? {},
                });
            }
        });
    return out;
}

/** Components of a DGD as `[name, object, path]`, whatever the shape. */
function components(d: Dgd): Array<{ name: string; c: Record<string, any>; path: string; role: string }> {
    if (Array.isArray(d.spec.components)) {
        return d.spec.components.map((c: any, i: number) => ({
            name: String(c.name),
            c,
            path: `spec.components[${i}]`,
            role: String(c.type ?? ""),
        }));
    }
    if (d.spec.services && typeof d.spec.services === "object") {
        return Object.entries(d.spec.services as Record<string, any>).map(([name, c]) => ({
            name,
            c,
            path: `spec.services.${name}`,
            role:
                c.componentType === "worker" && (c.subComponentType === "prefill" || c.subComponentType === "decode")
                    ? String(c.subComponentType)
                    : String(c.componentType ?? ""),
        }));
    }
    return [];
}

/** The DGD's container views (from the shared stack view). */
function dgdContainers(v: StackView, d: Dgd): ContainerView[] {
    return v.containers.filter((c) => c.resource === d.r && !c.init);
}

const mainOf = (v: StackView, d: Dgd, component: string) =>
    dgdContainers(v, d).find((c) => c.component === component && c.container === "main");

type Out = Array<{ subject: string; finding: Finding; urn?: string }>;

/** The shape must match the apiVersion. */
export const dgdApiShape = stackPolicy(
    {
        name: "dgd-api-shape",
        description:
            "A DynamoGraphDeployment must use the field shape of its apiVersion: v1beta1 `spec.components[]` with `type` and `podTemplate` (GPUs in container resources), v1alpha1 `spec.services{}` with `componentType`, `extraPodSpec.mainContainer` and `resources.limits.gpu`. Mixed shapes are rejected or pruned by the API server.",
        remediationSteps:
            "Write v1beta1 (apiVersion nvidia.com/v1beta1, spec.components) as lib/dgd.ts generates; keep v1alpha1 only for old stacks.",
    },
    (v, resources) => {
        const out: Out = [];
        const V1A = [
            "componentType",
            "subComponentType",
            "extraPodSpec",
            "envs",
            "envFromSecret",
            "resources",
            "sharedMemory",
            "dynamoNamespace",
            "autoscaling",
        ];
        const V1B = ["type", "podTemplate", "sharedMemorySize"];
        for (const d of dgds(resources)) {
            const add = (field: string, problem: string, fix: string) =>
                out.push({ subject: d.ref, finding: { field, problem, fix }, urn: d.r.urn });
            if (d.version === "v1beta1") {
                if (d.spec.services !== undefined)
                    add(
                        "spec.services",
                        "is a v1alpha1 field in a v1beta1 DynamoGraphDeployment",
                        "move each service to spec.components[] (name, type, podTemplate)",
                    );
                if (d.spec.envs !== undefined) add("spec.envs", "is the v1alpha1 name of graph-level env", "use spec.env");
                for (const { c, path } of components(d)) {
                    for (const k of V1A)
                        if (c[k] !== undefined)
                            add(
                                `${path}.${k}`,
                                `is a v1alpha1 field in a v1beta1 component`,
                                "use the v1beta1 field (type, podTemplate, sharedMemorySize, container resources)",
                            );
                    (c.podTemplate?.spec?.containers ?? []).forEach((ct: any, i: number) => {
                        for (const k of ["gpu", "gpuType", "custom"]) {
                            if (ct?.resources?.limits?.[k] !== undefined || ct?.resources?.requests?.[k] !== undefined)
                                add(
                                    `${path}.podTemplate.spec.containers[${i}].resources`,
                                    `uses the v1alpha1 resource key "${k}" inside a PodSpec`,
                                    "use nvidia.com/gpu and rdma/* keys in container resources",
                                );
                        }
                    });
                }
            } else if (d.version === "v1alpha1") {
                if (d.spec.components !== undefined)
                    add("spec.components", "is a v1beta1 field in a v1alpha1 DynamoGraphDeployment", "use apiVersion nvidia.com/v1beta1");
                for (const { c, path } of components(d))
                    for (const k of V1B)
                        if (c[k] !== undefined)
                            add(
                                `${path}.${k}`,
                                "is a v1beta1 field in a v1alpha1 service",
                                "use apiVersion nvidia.com/v1beta1 or the v1alpha1 field",
                            );
            }
        }
        void v;
        return out;
    },
);

/** V1beta1 components need a container named main with an image. */
export const dgdMainContainer = stackPolicy(
    {
        name: "dgd-main-container",
        description:
            "Every DGD component needs a main container with a non-empty image: in v1beta1 a podTemplate container literally named `main` (any other name is a sidecar and the operator generates its own main), in v1alpha1 `extraPodSpec.mainContainer.image` (ai-dynamo/dynamo PR #11421; CRD podTemplate description).",
        remediationSteps: "Name the engine container `main` and give it an image.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            for (const { name, c, path } of components(d)) {
                const main =
                    d.version === "v1alpha1"
                        ? c.extraPodSpec?.mainContainer
                        : (c.podTemplate?.spec?.containers ?? []).find((x: any) => x?.name === "main");
                const field = d.version === "v1alpha1" ? `${path}.extraPodSpec.mainContainer` : `${path}.podTemplate.spec.containers`;
                if (!main) {
                    const names = (c.podTemplate?.spec?.containers ?? []).map((x: any) => x?.name).join(", ");
                    out.push({
                        subject: `${d.ref} container ${name}/main`,
                        finding: {
                            field,
                            problem: `component ${name} has no main container${names ? ` (containers: ${names})` : ""}`,
                            fix: "add a container named main with the engine image",
                        },
                        urn: d.r.urn,
                    });
                } else if (!main.image) {
                    out.push({
                        subject: `${d.ref} container ${name}/main`,
                        finding: {
                            field: `${field}.image`,
                            problem: `component ${name}'s main container has no image`,
                            fix: "set the image (semver tag)",
                        },
                        urn: d.r.urn,
                    });
                }
            }
        }
        void v;
        return out;
    },
);

/** A tag the operator webhook can parse as a version (vX.Y.Z with optional pre-release/build). */
export function semverTag(image: string): string | undefined {
    const noDigest = image.split("@")[0];
    const lastSlash = noDigest.lastIndexOf("/");
    const colon = noDigest.lastIndexOf(":");
    if (colon <= lastSlash) return undefined;
    const tag = noDigest.slice(colon + 1);
    return /^v?\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.+-]*)?$/.test(tag) ? tag : undefined;
}

/** Semver image tag or runtimeVersionOverride. */
export const dgdImageSemver = stackPolicy(
    {
        name: "dgd-image-semver",
        description:
            "A DGD component's main image must carry a parseable semantic-version tag (X.Y.Z), or the component must set runtimeVersionOverride: the operator webhook rejects `:latest`, custom tags and digest-only images otherwise (ai-dynamo/dynamo deploy/operator/internal/webhook/validation/shared_helpers.go; PR #14660).",
        remediationSteps:
            "Pin the image to a release tag (config/versions.ts) or set runtimeVersionOverride to the Dynamo version the image carries.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            for (const { name, c } of components(d)) {
                const m = mainOf(v, d, name);
                if (!m?.image || c.runtimeVersionOverride) continue;
                if (!semverTag(m.image))
                    out.push({
                        subject: containerLabel(m),
                        finding: {
                            field: `${m.path}.image`,
                            problem: `image ${m.image} has no semantic-version tag, so the webhook rejects the component`,
                            fix: "use a release tag (:X.Y.Z) or set runtimeVersionOverride",
                        },
                        urn: d.r.urn,
                    });
            }
        }
        return out;
    },
);

/** Worker role flags by engine. */
export const dgdWorkerRoleFlags = stackPolicy(
    {
        name: "dgd-worker-role-flags",
        description: `Prefill and decode workers must declare their role to the engine: \`--disaggregation-mode prefill|decode\` matching the component type (a vLLM prefill worker without it registers as \`backend\` and the planner and router never find a prefill pool, ai-dynamo/dynamo #13238); vLLM prefill/decode workers need \`--kv-transfer-config\` (start fails otherwise); the worker flags of upstream/dynamo.ts \`dynamoRemovedWorkerFlags\` (${Object.keys(dynamoRemovedWorkerFlags).join(", ")}) are refused where current images reject or ignore them.`,
        remediationSteps:
            "Pass --disaggregation-mode <role> to every prefill/decode worker, --kv-transfer-config with NixlConnector on vLLM, and drop removed flags.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            for (const c of dgdContainers(v, d).filter((x) => x.container === "main")) {
                const eng = engineOf(c);
                if (!eng) continue;
                const add = (field: string, problem: string, fix: string) =>
                    out.push({ subject: containerLabel(c), finding: { field, problem, fix }, urn: d.r.urn });
                const mode = flagValue(c, "--disaggregation-mode");
                for (const [removed, at] of Object.entries(dynamoRemovedWorkerFlags)) {
                    const fact = at[`dynamo.${eng}`];
                    if (fact !== undefined && hasFlag(c, removed))
                        add(`${c.path}.args`, `${removed} ${fact.why} (Dynamo's ${eng} worker)`, `use ${fact.use}`);
                }
                if (c.role === "prefill" || c.role === "decode") {
                    if (mode !== c.role)
                        add(
                            `${c.path}.args`,
                            mode === undefined
                                ? `${c.role} worker has no --disaggregation-mode ${c.role}${eng === "vllm" && c.role === "prefill" ? ", so it registers as backend and no prefill pool exists" : ""}`
                                : `--disaggregation-mode ${mode} does not match component type ${c.role}`,
                            `pass --disaggregation-mode ${c.role}`,
                        );
                    if (eng === "vllm" && !hasFlag(c, "--kv-transfer-config"))
                        add(
                            `${c.path}.args`,
                            `vLLM ${c.role} worker has no --kv-transfer-config, so it fails at start (the default connector is no longer NIXL)`,
                            'pass --kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'',
                        );
                } else if (c.role === "worker" && (mode === "prefill" || mode === "decode")) {
                    add(
                        `${c.path}.args`,
                        `aggregated worker runs --disaggregation-mode ${mode}`,
                        `declare the component as type ${mode} or drop the flag`,
                    );
                }
            }
        }
        return out;
    },
);

/** Router mode of a frontend (CLI flag wins over DYN_ROUTER_MODE; upstream default round-robin). */
function routerMode(c: ContainerView): string {
    return flagValue(c, "--router-mode") ?? envValue(c, "DYN_ROUTER_MODE") ?? "round-robin";
}

/** KV routing needs events; kv-only flags need kv mode. */
export const dgdKvRouterEvents = stackPolicy(
    {
        name: "dgd-kv-router-events",
        description: `A frontend in KV routing mode (\`--router-mode kv\` or DYN_ROUTER_MODE=kv) needs every prefill and aggregated worker (and every decode worker under --router-conditional-disagg, upstream/dynamo.ts kvRouterNeedsWorkerEvents) to publish KV events (vLLM/SGLang --kv-events-config, TRT-LLM --publish-kv-events) unless it runs --no-router-kv-events (approximate mode); an SGLang P/D decode worker publishes none without --disaggregation-decode-enable-radix-cache (chunk cache), so --kv-events-config there is inert and refused; and a vLLM/SGLang decode worker's --kv-events-config is refused as inert unless a KV-routing frontend runs --router-conditional-disagg (ai-dynamo/dynamo lib/llm/src/kv_router.rs KvEventSourceRequirement::derive; TRT-LLM's --publish-kv-events also gates its metrics and stays); KV-only frontend flags (upstream/dynamo.ts dynamoFrontendKvOnlyFlags: ${Object.keys(dynamoFrontendKvOnlyFlags).join(", ")}) are rejected or inert outside kv mode; ignored flags (dynamoFrontendIgnoredFlags: ${Object.keys(dynamoFrontendIgnoredFlags).join(", ")}) are refused.`,
        remediationSteps:
            "Run the frontend with --router-mode kv and give each worker its KV event publisher (lib/dgd.ts does), or drop the kv-only flags.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            const cs = dgdContainers(v, d).filter((x) => x.container === "main");
            // An SGLang P/D decode worker on the chunk cache: Dynamo advertises it as a KV event publisher, it publishes nothing.
            for (const w of cs.filter((c) => c.role === "decode" && engineOf(c) === "sglang" && hasFlag(c, "--kv-events-config")))
                if (!sglangEmitsKvEvents(argv(w)))
                    out.push({
                        subject: containerLabel(w),
                        finding: {
                            field: `${w.path}.args`,
                            problem:
                                "--kv-events-config on an SGLang decode worker without --disaggregation-decode-enable-radix-cache is inert: SGLang forces the chunk cache there, which publishes no KV events, yet Dynamo advertises the worker as a publisher",
                            fix: "drop --kv-events-config from the decode worker (the KV router needs decode events only under --router-conditional-disagg), or keep the radix cache with --disaggregation-decode-enable-radix-cache",
                        },
                        urn: d.r.urn,
                    });
            // A vLLM/SGLang P/D decode worker's --kv-events-config is read by no one unless a KV-routing frontend of the
            // graph turns conditional disaggregation on (KvEventSourceRequirement::NotRequired otherwise). TRT-LLM's
            // --publish-kv-events also gates the worker's metrics, so it is not judged here.
            const conditional = cs.some(
                (fe) =>
                    fe.role === "frontend" &&
                    routerMode(fe) === "kv" &&
                    !hasFlag(fe, "--no-router-kv-events") &&
                    !hasFlag(fe, "--no-kv-events") &&
                    kvRouterNeedsWorkerEvents("decode", argv(fe), envValue(fe, "DYN_ROUTER_CONDITIONAL_DISAGG")),
            );
            for (const w of cs.filter((c) => c.role === "decode" && hasFlag(c, "--kv-events-config")))
                if (!conditional && (engineOf(w) !== "sglang" || sglangEmitsKvEvents(argv(w))))
                    out.push({
                        subject: containerLabel(w),
                        finding: {
                            field: `${w.path}.args`,
                            problem:
                                "--kv-events-config on a P/D decode worker is inert: no KV-routing frontend of the graph runs --router-conditional-disagg (or DYN_ROUTER_CONDITIONAL_DISAGG), so the router requires no events from decode workers (KvEventSourceRequirement::NotRequired) and never subscribes",
                            fix: "drop --kv-events-config from the decode worker (lib/dgd.ts renders none there), or turn conditional disaggregation on at the frontend",
                        },
                        urn: d.r.urn,
                    });
            for (const fe of cs.filter((c) => c.role === "frontend")) {
                const mode = routerMode(fe);
                const add = (c: ContainerView, field: string, problem: string, fix: string) =>
                    out.push({ subject: containerLabel(c), finding: { field, problem, fix }, urn: d.r.urn });
                for (const [f, fact] of Object.entries(dynamoFrontendIgnoredFlags))
                    if (hasFlag(fe, f)) add(fe, `${fe.path}.args`, `${f} is ${fact.why}`, "remove it");
                if (mode !== "kv") {
                    for (const [f, fact] of Object.entries(dynamoFrontendKvOnlyFlags)) {
                        if (hasFlag(fe, f) && flagValue(fe, f) !== fact.unless)
                            add(
                                fe,
                                `${fe.path}.args`,
                                `${f} requires --router-mode kv but the router mode is ${mode}`,
                                "set --router-mode kv or remove the flag",
                            );
                    }
                    continue;
                }
                if (hasFlag(fe, "--no-router-kv-events") || hasFlag(fe, "--no-kv-events")) continue;
                for (const w of cs.filter(
                    (c) =>
                        ["prefill", "decode", "worker"].includes(c.role) &&
                        kvRouterNeedsWorkerEvents(c.role, argv(fe), envValue(fe, "DYN_ROUTER_CONDITIONAL_DISAGG")),
                )) {
                    const eng = engineOf(w);
                    const publishes =
                        eng === "trtllm"
                            ? hasFlag(w, "--publish-kv-events") || hasFlag(w, "--publish-events-and-metrics")
                            : hasFlag(w, "--kv-events-config") && (eng !== "sglang" || sglangEmitsKvEvents(argv(w)));
                    if (eng && !publishes)
                        add(
                            w,
                            `${w.path}.args`,
                            `the frontend routes on KV events but this ${w.role} worker publishes none, so the router sees no cache state`,
                            eng === "trtllm" ? "pass --publish-kv-events" : "pass --kv-events-config with a zmq publisher",
                        );
                }
            }
        }
        return out;
    },
);

const PLANNER_IMAGE = /(^|\/)dynamo-planner(:|@|$)/;

/** The right image per role. */
export const dgdRoleImages = stackPolicy(
    {
        name: "dgd-role-images",
        description:
            "The planner component must run the dedicated dynamo-planner image (from Dynamo 1.1.0 backend images lack its dependencies: ModuleNotFoundError, ai-dynamo/dynamo PR #8407), and no other component may run the planner image (dsx-ai-factory/workload-map PR #144).",
        remediationSteps:
            "Use the dynamo-planner image of the Dynamo release (config/versions.ts `dynamoPlanner`) for the planner and the engine runtime image elsewhere.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            for (const c of dgdContainers(v, d).filter((x) => x.container === "main" && x.image)) {
                const planner = PLANNER_IMAGE.test(c.image!);
                if (c.role === "planner" && !planner)
                    out.push({
                        subject: containerLabel(c),
                        finding: {
                            field: `${c.path}.image`,
                            problem: `planner runs ${c.image}, not the dynamo-planner image`,
                            fix: "use the dynamo-planner image of the Dynamo release (config/versions.ts `dynamoPlanner`)",
                        },
                        urn: d.r.urn,
                    });
                if (c.role !== "planner" && planner)
                    out.push({
                        subject: containerLabel(c),
                        finding: {
                            field: `${c.path}.image`,
                            problem: `${c.role} component runs the planner image ${c.image}`,
                            fix: "use the engine runtime image",
                        },
                        urn: d.r.urn,
                    });
            }
        }
        return out;
    },
);

/**
 * Planner targets: all scale on queue depth / KV-cache utilisation or SLA models, none on GPU utilisation. Exactly the
 * choices PlannerConfig accepts for `optimization_target` (upstream/planner.ts `plannerConfigChoices`).
 */
export const PLANNER_TARGETS: readonly string[] = plannerConfigChoices.optimization_target;

/** Env var that turns a Dynamo worker's forward-pass metrics on (ai-dynamo/dynamo components/src/dynamo/vllm/args.py, sglang/args.py). */
const FPM_PORT_ENV = "DYN_FORWARDPASS_METRIC_PORT";

/** Planner-driven scaling wired correctly, never on GPU utilisation. */
export const dgdPlannerScaling = stackPolicy(
    {
        name: "dgd-planner-scaling",
        description:
            "With a Planner every prefill/decode/worker component opts into the scaling adapter (v1beta1 `scalingAdapter: {}`; v1alpha1 `scalingAdapter.enabled: true`, since `{}` means disabled there) and keeps at least one replica and sets no DYN_FORWARDPASS_METRIC_PORT of its own (the operator injects it; it switches the forward-pass metrics load scaling reads); the planner's optimization_target is one of throughput/latency/load/sla (queue depth and KV-cache utilisation, never GPU utilisation: TTFT p95 44.5 s -> 1.4-3.4 s) with min endpoints >= 1; the deprecated `autoscaling` field is ignored and must not be relied on.",
        remediationSteps:
            "Add scalingAdapter to the workers, run the planner with optimization_target load (thresholds from config) and min_endpoint 1, and drop spec.services[*].autoscaling.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            const comps = components(d);
            const add = (subject: string, field: string, problem: string, fix: string) =>
                out.push({ subject, finding: { field, problem, fix }, urn: d.r.urn });
            for (const { name, c, path } of comps)
                if (c.autoscaling !== undefined)
                    add(
                        `${d.ref} container ${name}/main`,
                        `${path}.autoscaling`,
                        "autoscaling is deprecated and ignored by the operator, so nothing scales this component",
                        "use the Planner with the scaling adapter",
                    );
            const planners = comps.filter((x) => x.role === "planner");
            if (planners.length === 0) continue;
            for (const { name, c, path, role } of comps) {
                if (!["prefill", "decode", "worker"].includes(role)) continue;
                const subject = `${d.ref} container ${name}/main`;
                const enabled = d.version === "v1alpha1" ? c.scalingAdapter?.enabled === true : c.scalingAdapter !== undefined;
                if (!enabled)
                    add(
                        subject,
                        `${path}.scalingAdapter`,
                        d.version === "v1alpha1" && c.scalingAdapter !== undefined
                            ? "scalingAdapter is present but not enabled (in v1alpha1 {} means disabled)"
                            : "does not opt into the scaling adapter, so the Planner patches the DGD directly (ai-dynamo/dynamo #13538)",
                        d.version === "v1alpha1" ? "set scalingAdapter.enabled: true" : "add scalingAdapter: {}",
                    );
                if (c.replicas !== undefined && qty(c.replicas) < 1)
                    add(
                        subject,
                        `${path}.replicas`,
                        "has 0 replicas; a model with no workers disappears from /v1/models",
                        "keep at least one replica",
                    );
                // Load scaling reads this worker's forward-pass metrics over the event plane; the worker emits them
                // only with DYN_FORWARDPASS_METRIC_PORT set, which the operator injects (upstream/activation.ts
                // planner-signals). A podTemplate env of that name replaces the operator's value.
                const m = mainOf(v, d, name);
                if (m?.env.has(FPM_PORT_ENV))
                    add(
                        containerLabel(m),
                        `${m.path}.env.${FPM_PORT_ENV}`,
                        `sets ${FPM_PORT_ENV}, replacing the operator's 20380: it switches the forward-pass metrics the Planner's load scaling reads (empty: none, and the Planner silently stops scaling this role)`,
                        `remove ${FPM_PORT_ENV} from the podTemplate and leave it to the operator`,
                    );
            }
            for (const { name } of planners) {
                const m = mainOf(v, d, name);
                if (!m) continue;
                const raw = flagValue(m, "--config");
                if (!raw?.trim().startsWith("{")) continue;
                let cfg: Record<string, any>;
                try {
                    cfg = JSON.parse(raw);
                } catch {
                    add(containerLabel(m), `${m.path}.args[--config]`, "planner --config is not valid JSON", "pass a JSON PlannerConfig");
                    continue;
                }
                const target = cfg.optimization_target ?? "throughput";
                if (!PLANNER_TARGETS.includes(String(target)))
                    add(
                        containerLabel(m),
                        `${m.path}.args[--config].optimization_target`,
                        `optimization_target ${target} is not a queue/KV-utilisation target (${PLANNER_TARGETS.join(", ")}); scaling on GPU busy was measured at TTFT p95 44.5 s`,
                        "use optimization_target load with KV-cache and queue thresholds",
                    );
                for (const k of ["min_endpoint", "prefill_min_endpoint", "decode_min_endpoint"]) {
                    if (cfg[k] !== undefined && Number(cfg[k]) < 1)
                        add(
                            containerLabel(m),
                            `${m.path}.args[--config].${k}`,
                            `${k} ${cfg[k]} lets the planner scale a role to zero, removing the model`,
                            `set ${k} to at least 1`,
                        );
                }
            }
        }
        return out;
    },
);

/** The CRD's CEL rules, evaluated statically. */
export const dgdCelRules = stackPolicy(
    {
        name: "dgd-cel-rules",
        description:
            "The DGD CRD's CEL validations, checked before apply: component names unique case-insensitively, at most one `epp` component, `eppConfig` only on `epp`, `minAvailable` <= `replicas` unless replicas is 0, and `spec.restart` unset on create (shared/schemas/dynamo DGD x-kubernetes-validations).",
        remediationSteps: "Rename duplicate components, keep one epp, and remove spec.restart from the manifest.",
    },
    (v, resources) => {
        const out: Out = [];
        for (const d of dgds(resources)) {
            const add = (field: string, problem: string, fix: string) =>
                out.push({ subject: d.ref, finding: { field, problem, fix }, urn: d.r.urn });
            if (d.spec.restart !== undefined)
                add(
                    "spec.restart",
                    "must be unset on create",
                    "remove spec.restart; set spec.restart.id only after creation to request a restart",
                );
            const comps = components(d);
            const seen = new Map<string, string>();
            for (const { name, c, path, role } of comps) {
                const k = name.toLowerCase();
                if (seen.has(k))
                    add(
                        `${path}.name`,
                        `component name ${name} collides with ${seen.get(k)} (names are unique case-insensitively)`,
                        "rename one of them",
                    );
                else seen.set(k, name);
                if (c.eppConfig !== undefined && c.type !== "epp" && c.componentType !== "epp")
                    add(`${path}.eppConfig`, "eppConfig is only allowed when type is epp", "remove eppConfig");
                if (c.minAvailable !== undefined) {
                    const reps = c.replicas === undefined ? 1 : qty(c.replicas);
                    if (reps !== 0 && qty(c.minAvailable) > reps)
                        add(
                            `${path}.minAvailable`,
                            `minAvailable ${c.minAvailable} exceeds replicas ${reps}`,
                            "lower minAvailable to at most replicas",
                        );
                }
                void role;
            }
            const epps = comps.filter((x) => x.role === "epp");
            if (epps.length > 1)
                add(`${epps[1].path}.type`, `${epps.length} components have type epp; at most one may`, "keep a single epp component");
        }
        void v;
        return out;
    },
);

/** Multinode needs Grove (or LWS). */
export const dgdMultinodeOrchestrator = stackPolicy(
    {
        name: "dgd-multinode-orchestrator",
        description:
            "A DGD component with `multinode` needs Grove (or LWS >= 0.7 with Volcano) on the cluster, which the same stack must install (dynamo-platform global.grove / global.lws, or their own releases); without it the DGD errors out.",
        remediationSteps:
            "Enable Grove in platform:serving (grove: true) or install LWS, matching the platform's Grove compatibility range.",
    },
    (v, resources) => {
        const out: Out = [];
        const platforms = helmReleases(resources, "dynamo-platform");
        const orchestrated =
            platforms.some((r) =>
                run(() => {
                    const g = r.props.values?.global ?? {};
                    return g.grove?.install === true || g.grove?.enabled === true || g.lws?.install === true;
                }),
            ) ||
            resources.some((r) => run(() => r.type === "kubernetes:helm.sh/v3:Release" && /grove|lws/.test(String(r.props.chart ?? ""))));
        for (const d of dgds(resources)) {
            for (const { name, c, path } of components(d)) {
                if (c.multinode === undefined || orchestrated) continue;
                out.push({
                    subject: `${d.ref} container ${name}/main`,
                    finding: {
                        field: `${path}.multinode`,
                        problem: "is multinode but the stack installs neither Grove nor LWS",
                        fix: "enable Grove in the dynamo-platform release (platform:serving.grove: true) or install LWS",
                    },
                    urn: d.r.urn,
                });
            }
        }
        void v;
        return out;
    },
);

/** DGD configuration policies. */
export const dynamoPolicies: StackValidationPolicy[] = [
    dgdApiShape,
    dgdMainContainer,
    dgdImageSemver,
    dgdWorkerRoleFlags,
    dgdKvRouterEvents,
    dgdRoleImages,
    dgdPlannerScaling,
    dgdCelRules,
    dgdMultinodeOrchestrator,
];
