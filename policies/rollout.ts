import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { REVISION_OF_LABEL, ROLLOUT_ANNOTATION, type RolloutAnnotationEntry } from "../lib/labels";
import { aiRoutes, GROUPS, gvk, keyOf, nameOf, nsOf, ofKind } from "./lib/gateway";
import { frontendNamespacePrefixFact } from "../upstream/rollout";
import { dgdRole, v1alpha1Containers } from "../upstream/check/walk";

/* Rollouts (lib/rollout.ts): weights only for the two revisions of one endpoint; traffic only where capacity is ready. */

/** The worker components of a DynamoGraphDeployment (the ones that serve; frontend and planner excluded). */
const WORKER_TYPES = new Set(["prefill", "decode", "worker"]);

/** One worker component of a graph: its name, role (`prefill`, `decode`, `worker`), replicas and GPUs per replica. */
interface Worker {
    name: string;
    role: string;
    replicas: number;
    gpus: number;
}

/** GPUs one replica runs: the `nvidia.com/gpu` limits of its containers (lib/dgd.ts). */
function gpusOf(containers: unknown): number {
    return (Array.isArray(containers) ? containers : []).reduce(
        (a: number, k: any) => a + (Number(k?.resources?.limits?.["nvidia.com/gpu"] ?? 0) || 0),
        0,
    );
}

/**
 * The worker components of a DynamoGraphDeployment, in the shape of its apiVersion (both served ones,
 * ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml):
 * v1beta1 `spec.components[]` (`name`, `type`, `replicas`, GPUs of `podTemplate.spec.containers`); v1alpha1
 * `spec.services{}` (the map key, the role of `subComponentType` / `componentType` as upstream/check/walk.ts `dgdRole`
 * reads it, `replicas`, GPUs of the main container the operator builds from the service's `resources` and
 * `extraPodSpec.mainContainer`, upstream/check/walk.ts `v1alpha1MainContainer`, and of `extraPodSpec.containers`).
 * Replicas default to 1 when unset. Closed world: another version, or a spec without its version's list (or with the
 * other version's), gives a string saying why the graph cannot be read, and the pack refuses traffic to it.
 */
export function workerComponents(dgd: PolicyResource): Worker[] | string {
    const version = gvk(dgd.type)?.version ?? String(dgd.props.apiVersion ?? "").split("/")[1];
    const spec = dgd.props.spec ?? {};
    const replicas = (x: any) => Number(x?.replicas ?? 1);
    const READ = "the pack reads DynamoGraphDeployment v1beta1 spec.components[] and v1alpha1 spec.services{}";
    if (version === "v1beta1") {
        if (spec.services !== undefined) return `its DynamoGraphDeployment is v1beta1 but carries v1alpha1 spec.services (${READ})`;
        if (!Array.isArray(spec.components)) return `its DynamoGraphDeployment is v1beta1 without spec.components[] (${READ})`;
        return spec.components
            .filter((c: any) => WORKER_TYPES.has(dgdRole(c?.type)))
            .map((c: any) => ({
                name: String(c.name ?? c.type),
                role: dgdRole(c.type),
                replicas: replicas(c),
                gpus: gpusOf(c?.podTemplate?.spec?.containers),
            }));
    }
    if (version === "v1alpha1") {
        if (spec.components !== undefined) return `its DynamoGraphDeployment is v1alpha1 but carries v1beta1 spec.components (${READ})`;
        if (!spec.services || typeof spec.services !== "object" || Array.isArray(spec.services))
            return `its DynamoGraphDeployment is v1alpha1 without spec.services{} (${READ})`;
        return Object.entries(spec.services as Record<string, any>)
            .map(([name, svc]) => ({ name, svc, role: dgdRole(svc?.componentType, svc?.subComponentType) }))
            .filter((x) => WORKER_TYPES.has(x.role))
            .map(({ name, svc, role }) => ({
                name,
                role,
                replicas: replicas(svc),
                gpus: gpusOf(v1alpha1Containers(svc, `spec.services.${name}`).containers),
            }));
    }
    return `its DynamoGraphDeployment is nvidia.com/${version ?? "(no version)"}, whose shape the pack cannot read (${READ})`;
}

/** Why a graph has no serving capacity (`undefined` when every worker component has at least one replica). */
function noCapacity(dgd: PolicyResource | undefined): string | undefined {
    if (!dgd) return "no DynamoGraphDeployment of that name is in the stack";
    const workers = workerComponents(dgd);
    if (typeof workers === "string") return workers;
    if (!workers.length) return "its DynamoGraphDeployment has no worker component";
    const zero = workers.filter((c) => !(c.replicas >= 1));
    return zero.length ? `its ${zero.map((c) => c.name).join(", ")} run 0 replicas` : undefined;
}

/**
 * A graph's worker components by role (`prefill`, `decode`, `worker`): replicas and GPUs per replica. Two components of
 * one role are not compared (their replicas need not be alike): the graph is refused, saying so.
 */
function workersOf(dgd: PolicyResource): Map<string, Worker> | string {
    const workers = workerComponents(dgd);
    if (typeof workers === "string") return workers;
    const byRole = new Map<string, Worker>();
    for (const w of workers) {
        const seen = byRole.get(w.role);
        if (seen)
            return `its DynamoGraphDeployment has two ${w.role} components (${seen.name}, ${w.name}), whose capacity the pack does not compare (one component per worker role)`;
        byRole.set(w.role, w);
    }
    return byRole;
}

/**
 * Why a rollout's target cannot carry `weight` percent of the traffic its source carries at 100% (`undefined` when it
 * can). Capacity is proven per worker role when both graphs have the same roles: each role of the target runs at
 * least ceil(weight / 100 x the source's replicas of that role), so at 10% of a 4-decode source one decode replica,
 * at 100% four. When the roles differ (a rollout changing aggregated to disaggregated or back), replicas do not
 * compare, and the worker GPUs do: the target's at least ceil(weight / 100 x the source's). The source's replicas are
 * what it was sized at to carry the whole model; a planner may scale both later, the pack reads the rendered counts.
 */
export function shareCapacityProblem(source: PolicyResource, target: PolicyResource, weight: number): string | undefined {
    const s = workersOf(source);
    const t = workersOf(target);
    if (typeof s === "string") return `the source ${nameOf(source)} cannot be read: ${s}`;
    if (typeof t === "string") return t;
    const need = (n: number) => Math.ceil((weight / 100) * n - 1e-9);
    const roles = [...s.keys()].sort();
    if (roles.length && JSON.stringify(roles) === JSON.stringify([...t.keys()].sort())) {
        const short = roles
            .map((role) => ({ role, have: t.get(role)!.replicas, src: s.get(role)!.replicas, want: need(s.get(role)!.replicas) }))
            .filter((x) => x.have < x.want);
        if (!short.length) return undefined;
        return short
            .map(
                (x) =>
                    `its ${x.role} runs ${x.have} replica${x.have === 1 ? "" : "s"}, and ${weight}% of the source's ${x.src} ${x.role} replicas needs ceil(${weight / 100} x ${x.src}) = ${x.want}`,
            )
            .join("; ");
    }
    const gpus = (m: Map<string, { replicas: number; gpus: number }>) => [...m.values()].reduce((a, w) => a + w.replicas * w.gpus, 0);
    const have = gpus(t);
    const src = gpus(s);
    if (have >= need(src)) return undefined;
    return `its workers (${[...t.keys()].join(", ") || "none"}) request ${have} GPUs, and ${weight}% of the source's ${src} worker GPUs (${roles.join(", ") || "none"}, other roles, so replicas do not compare) needs ceil(${weight / 100} x ${src}) = ${need(src)}`;
}

/** Parses a route's rollout annotation; `undefined` when absent, a string when it does not parse. */
function rolloutsOf(route: PolicyResource): RolloutAnnotationEntry[] | string | undefined {
    const raw = route.props.metadata?.annotations?.[ROLLOUT_ANNOTATION];
    if (raw === undefined) return undefined;
    try {
        const v = JSON.parse(String(raw));
        if (!Array.isArray(v)) return "is not a JSON array";
        return v as RolloutAnnotationEntry[];
    } catch {
        return "is not JSON";
    }
}

/**
 * Findings of the rollout policy (exported for tests). Closed world for the gateway's weights: a rule may carry an
 * explicit `weight` only when its weighted backends (priority 0) are exactly the two revisions of one endpoint under
 * a rollout, named in the route's {@link ROLLOUT_ANNOTATION} and labelled {@link REVISION_OF_LABEL} on the target's
 * graph, with the annotation's weights adding up to 100; anything else is refused. Ordering: a backend receiving
 * traffic (weight above 0, or no weight: the upstream default 1) must be a graph in the stack with at least one
 * replica in every worker component (no traffic to a revision without capacity, no scale-down of a revision still
 * carrying traffic), a rollout's target must have been reported ready before it gets traffic, and it must have the
 * capacity for its share ({@link shareCapacityProblem}: per worker role, ceil(share x the source's replicas)).
 */
export function rolloutFindings(resources: PolicyResource[]): Array<{ message: string; urn: string }> {
    const out: Array<{ message: string; urn: string }> = [];
    const dgds = new Map(ofKind(resources, GROUPS.dynamo, "DynamoGraphDeployment").map((d) => [nameOf(d), d] as const));
    const aiBackends = new Map(ofKind(resources, GROUPS.aigw, "AIServiceBackend").map((b) => [keyOf(b), b] as const));
    /** The graph an AIServiceBackend reference leads to (AIServiceBackend -> Backend, named after its graph). */
    const graphOf = (ref: any, route: PolicyResource): string | undefined => {
        const b = aiBackends.get(`${ref.namespace ?? nsOf(route)}/${ref.name}`);
        return b?.props.spec?.backendRef?.name;
    };
    for (const r of aiRoutes(resources)) {
        const parsed = rolloutsOf(r);
        if (typeof parsed === "string") {
            out.push({ message: `AIGatewayRoute ${keyOf(r)}: annotation ${ROLLOUT_ANNOTATION} ${parsed}`, urn: r.urn });
            continue;
        }
        const rollouts = parsed ?? [];
        (r.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
            const label = `AIGatewayRoute ${keyOf(r)} rule ${rule.name ?? i}`;
            const refs: any[] = rule.backendRefs ?? [];
            const primary = refs.filter((x) => !(Number(x.priority ?? 0) > 0));
            const weighted = refs.some((x) => x.weight !== undefined);
            const model = rule.matches?.[0]?.headers?.[0]?.value;
            const ro = rollouts.find((x) => x.model === model);
            if (weighted) {
                const names = primary.map((x) => graphOf(x, r) ?? `(unknown AIServiceBackend ${x.name})`).sort();
                const expected = ro ? ro.revisions.map((v) => v.dgd).sort() : [];
                const sameEndpoint =
                    !!ro &&
                    ro.revisions.every(
                        (v) => v.role === "source" || dgds.get(v.dgd)?.props.metadata?.labels?.[REVISION_OF_LABEL] === ro.endpoint,
                    );
                const sum = ro ? ro.revisions.reduce((a, v) => a + v.weight, 0) : 0;
                if (!ro || JSON.stringify(names) !== JSON.stringify(expected) || !sameEndpoint || sum !== 100) {
                    out.push({
                        message: `${label} sets backend weights, which the pack accepts only between the two revisions of one endpoint under a rollout (annotation ${ROLLOUT_ANNOTATION}, target graph labelled ${REVISION_OF_LABEL}, weights adding up to 100); its weighted backends are ${names.join(", ") || "none"}${ro ? `, the rollout's ${expected.join(", ")} (weights ${sum})` : ", and no rollout names its model"}`,
                        urn: r.urn,
                    });
                    return;
                }
                for (const v of ro.revisions) {
                    const ref = primary.find((x) => graphOf(x, r) === v.dgd);
                    if (Number(ref?.weight ?? 1) !== v.weight)
                        out.push({
                            message: `${label}: ${v.dgd} has weight ${ref?.weight ?? "(default 1)"} but the rollout's state gives it ${v.weight}`,
                            urn: r.urn,
                        });
                }
            } else if (ro) {
                out.push({ message: `${label}: the rollout of ${ro.endpoint} is annotated but the rule carries no weights`, urn: r.urn });
            }
            for (const ref of primary) {
                const w = Number(ref.weight ?? 1);
                if (!(w > 0)) continue;
                const g = graphOf(ref, r);
                const why = g ? noCapacity(dgds.get(g)) : "its AIServiceBackend is not in the stack";
                if (why)
                    out.push({
                        message: `${label} sends ${ref.weight === undefined ? "traffic" : `weight ${w}`} to ${g ?? ref.name}, but ${why}: traffic goes to a revision only once its capacity is up, and capacity goes only after its traffic is gone`,
                        urn: r.urn,
                    });
                const v = ro?.revisions.find((x) => x.dgd === g);
                if (v && v.role === "target" && !v.ready)
                    out.push({
                        message: `${label} sends weight ${w} to ${g}, whose capacity was never reported ready (npm run rollout -- advance runs the health gate first)`,
                        urn: r.urn,
                    });
                const src = ro?.revisions.find((x) => x.role === "source");
                const tgt = g ? dgds.get(g) : undefined;
                const srcDgd = src ? dgds.get(src.dgd) : undefined;
                if (v && v.role === "target" && !why && tgt && srcDgd) {
                    const short = shareCapacityProblem(srcDgd, tgt, v.weight);
                    if (short)
                        out.push({
                            message: `${label} sends ${v.weight}% of ${ro!.model} to ${g}, but ${short}: a revision gets a share of the traffic only with the capacity for it (scale the target in the rollout's target.topology, or add a smaller step)`,
                            urn: r.urn,
                        });
                }
            }
        });
    }
    return out;
}

/** The rollout ordering and the weights' closed world (see {@link rolloutFindings}). */
export const rolloutOrdering: StackValidationPolicy = {
    name: "rollout-traffic-needs-ready-capacity",
    description:
        "Backend weights only between the two revisions of one endpoint under a rollout; a backend that receives traffic is a graph in the stack (DynamoGraphDeployment v1beta1 spec.components or v1alpha1 spec.services; any other shape is refused) with every worker component scaled to at least one replica and, for a rollout's target, reported ready and with the capacity for its share: per worker role at least ceil(share x the source's replicas), or the worker GPUs when the roles differ (no traffic to a revision without ready capacity for it, no scale-down of a revision still carrying traffic).",
    remediationSteps:
        "Drive rollouts with `npm run rollout -- advance|promote|abort <spoke>/<endpoint>` (docs/rollout.md), which writes one step per `pulumi up`: capacity before traffic shifting up, traffic before capacity shifting down (promote removes the source graph only from the 100% step, after the target's soak). Size the rollout's target.topology for 100% before it starts.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        for (const f of rolloutFindings(args.resources)) report(`${f.message}.`, f.urn);
    },
};

/**
 * Two DynamoGraphDeployments in one Kubernetes namespace, one's name beginning with the other's: the shorter one's
 * frontend discovers the longer one's workers by Dynamo namespace prefix (upstream/rollout.ts
 * `frontendNamespacePrefixFact`), so their traffic, a rollout's split and its gate mix. `globalDynamoNamespace`
 * components are refused elsewhere; this reads the DGD names.
 */
export const dynamoNamespacePrefixIsolation: StackValidationPolicy = {
    name: "dynamo-namespace-prefix-isolation",
    description:
        "No DynamoGraphDeployment's name begins with another's in the same namespace: a Dynamo frontend discovers every Dynamo namespace beginning with its own (DYN_NAMESPACE_PREFIX), so it would serve the other graph's workers.",
    remediationSteps:
        "Rename one graph so that neither name begins with the other (a rollout's revision graph is `<revision>-<endpoint>`, config/rollout.ts dgdName).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const dgds = args.resources.filter(
            (r) =>
                r.type === "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment" ||
                r.type === "kubernetes:nvidia.com/v1alpha1:DynamoGraphDeployment",
        );
        for (const a of dgds)
            for (const b of dgds) {
                const an = String(a.props.metadata?.name ?? "");
                const bn = String(b.props.metadata?.name ?? "");
                if (a === b || !an || an === bn || nsOf(a) !== nsOf(b) || !bn.startsWith(an)) continue;
                report(
                    `DynamoGraphDeployment ${nsOf(b)}/${bn} begins with ${an}: the frontend of ${an} (DYN_NAMESPACE_PREFIX ${nsOf(a)}-${an}) discovers ${bn}'s workers as well, so the two graphs' traffic mixes (${frontendNamespacePrefixFact.source}).`,
                    b.urn,
                );
            }
    },
};

/** The rollout policies of the pack. */
export const rolloutPolicies = [rolloutOrdering, dynamoNamespacePrefixIsolation];
