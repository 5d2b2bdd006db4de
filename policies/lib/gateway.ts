import type { PolicyResource } from "@pulumi/policy";
import { helmReleases } from "./resources";
import {
    AI_GATEWAY_METADATA_NAMESPACE,
    AI_GATEWAY_MODEL_HEADER,
    DYNAMO_HEADER_PREFIX,
    DYNAMO_HEADERS,
    IDENTITY_HEADER_PREFIX,
    IDENTITY_HEADERS,
} from "../../services/shared/identity";
import { INFERENCE_NAMESPACE } from "../../lib/labels";

/**
 * Helpers over the gateway objects of a stack (Envoy Gateway, AI Gateway, Gateway API). Header and namespace names
 * are the product's own, imported from the one place that defines them (services/shared/identity.ts, lib/labels.ts;
 * neither loads a package).
 */
export const GW = {
    /** Client-facing model header the AI Gateway sets from the body. */
    modelHeader: AI_GATEWAY_MODEL_HEADER,
    /** Prefix of every trusted identity header. */
    identityPrefix: IDENTITY_HEADER_PREFIX,
    /** Trusted identity headers the auth service sets. */
    identityHeaders: Object.values(IDENTITY_HEADERS) as string[],
    /** Dynamo request headers the auth service sets (clamped priority and tier, derived cache salt). */
    dynamoHeaders: Object.values(DYNAMO_HEADERS) as string[],
    dynamoPrefix: DYNAMO_HEADER_PREFIX,
    /** Dynamic metadata namespace of the AI Gateway's token counts. */
    aiMetadataNamespace: AI_GATEWAY_METADATA_NAMESPACE,
    /** Label key prefix the Dynamo operator puts on its pods (`nvidia.com/dynamo-component-type`, ...). */
    dynamoLabelPrefix: "nvidia.com/dynamo-",
    /** Namespace the platform runs inference workloads in. */
    inferenceNamespace: INFERENCE_NAMESPACE,
    /** Request headers that carry credentials: never a route match (they would sit in manifests; ai-gateway#1485). */
    secretHeaders: ["authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"],
} as const;

/** A Kubernetes object's group/version/kind from a Pulumi type token (`kubernetes:<group>/<version>:<Kind>`; core = `core`). */
export function gvk(type: string): { group: string; version: string; kind: string } | undefined {
    const m = /^kubernetes:([^/]+)\/([^:]+):(.+)$/.exec(type);
    if (!m) return undefined;
    return { group: m[1] === "core" ? "" : m[1], version: m[2], kind: m[3] };
}

/** Resources of a group and kind, any version. */
export function ofKind(resources: PolicyResource[], group: string, kind: string): PolicyResource[] {
    return resources.filter((r) => {
        const g = gvk(r.type);
        return !!g && g.group === group && g.kind === kind;
    });
}

/** API groups the gateway policies look at (`""` = core). */
export const GROUPS = {
    eg: "gateway.envoyproxy.io",
    aigw: "aigateway.envoyproxy.io",
    gwapi: "gateway.networking.k8s.io",
    net: "networking.k8s.io",
    core: "",
    dynamo: "nvidia.com",
} as const;

/** Namespace of an object (the Kubernetes provider's default is `default`). */
export function nsOf(r: PolicyResource): string {
    return r.props.metadata?.namespace ?? "default";
}

/** `metadata.name` of an object, else its Pulumi name. */
export function nameOf(r: PolicyResource): string {
    return r.props.metadata?.name ?? r.name;
}

/** `namespace/name` of an object. */
export function keyOf(r: PolicyResource): string {
    return `${nsOf(r)}/${nameOf(r)}`;
}

/** Policy attachment targets of an Envoy Gateway policy (`targetRef` or `targetRefs`; selectors reported separately). */
export function targets(r: PolicyResource): Array<{ group?: string; kind: string; name: string; sectionName?: string }> {
    const s = r.props.spec ?? {};
    return [...(s.targetRef ? [s.targetRef] : []), ...(s.targetRefs ?? [])];
}

/** True if a policy targets the Gateway `ns/name`. */
export function targetsGateway(r: PolicyResource, gatewayKey: string): boolean {
    return targets(r).some((t) => t.kind === "Gateway" && `${nsOf(r)}/${t.name}` === gatewayKey);
}

/** The AIGatewayRoutes of the stack. */
export function aiRoutes(resources: PolicyResource[]): PolicyResource[] {
    return ofKind(resources, GROUPS.aigw, "AIGatewayRoute");
}

/** `ns/name` of each Gateway an AIGatewayRoute attaches to. */
export function routeGateways(route: PolicyResource): string[] {
    return (route.props.spec?.parentRefs ?? [])
        .filter((p: any) => (p.kind ?? "Gateway") === "Gateway")
        .map((p: any) => `${p.namespace ?? nsOf(route)}/${p.name}`);
}

/**
 * The stack's LLM Gateways (Gateways that AIGatewayRoutes attach to), keyed `ns/name`, with the Gateway
 * resource when it is in the stack.
 */
export function llmGateways(resources: PolicyResource[]): Map<string, PolicyResource | undefined> {
    const gws = new Map(ofKind(resources, GROUPS.gwapi, "Gateway").map((g) => [keyOf(g), g] as const));
    const out = new Map<string, PolicyResource | undefined>();
    for (const r of aiRoutes(resources)) for (const k of routeGateways(r)) out.set(k, gws.get(k));
    return out;
}

/** A resource to attach a gateway-level finding to: the Gateway if present, else the first route on it. */
export function gatewayUrn(resources: PolicyResource[], key: string, gw: PolicyResource | undefined): string | undefined {
    return gw?.urn ?? aiRoutes(resources).find((r) => routeGateways(r).includes(key))?.urn;
}

/** A header-name matcher from ClientTrafficPolicy `earlyRequestHeaders` (`remove` + `removeOnMatch`). */
export function stripMatcher(early: any): (header: string) => boolean {
    const remove = new Set<string>((early?.remove ?? []).map((h: string) => h.toLowerCase()));
    const matchers: Array<(h: string) => boolean> = (early?.removeOnMatch ?? []).map((m: any) => {
        const v = String(m.value ?? "").toLowerCase();
        switch (m.type ?? "Exact") {
            case "Prefix":
                return (h: string) => h.startsWith(v);
            case "Suffix":
                return (h: string) => h.endsWith(v);
            case "RegularExpression": {
                try {
                    const re = new RegExp(`^(?:${m.value})$`, "i");
                    return (h: string) => re.test(h);
                } catch {
                    return () => false;
                }
            }
            default:
                return (h: string) => h === v;
        }
    });
    return (header: string) => {
        const h = header.toLowerCase();
        return remove.has(h) || matchers.some((f) => f(h));
    };
}

/**
 * Bytes in a Kubernetes quantity (`50Mi`, `1Gi`, `32768`, `64k`) or number; undefined when unparseable.
 */
export function bytesOf(q: unknown): number | undefined {
    if (typeof q === "number") return q;
    if (typeof q !== "string") return undefined;
    const m = /^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q.trim());
    if (!m) return undefined;
    const mult: Record<string, number> = { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
    return Number(m[1]) * mult[m[2] ?? ""];
}

/** Seconds in a Gateway API duration (`900s`, `15m`, `1h30m`, `500ms`); undefined when unparseable. */
export function secondsOf(d: unknown): number | undefined {
    if (typeof d !== "string" || !/^([0-9]{1,5}(h|m|s|ms))+$/.test(d)) return undefined;
    let total = 0;
    for (const [, n, unit] of d.matchAll(/([0-9]+)(ms|h|m|s)/g))
        total += Number(n) * ({ h: 3600, m: 60, s: 1, ms: 0.001 } as Record<string, number>)[unit];
    return total;
}

/** Release version parsing and comparison: policies/lib/semver.ts (one helper for the pack). */
export { cmpSemver, semver } from "./semver";

/** Helm releases/charts of a chart name (plain name or OCI reference ending in `/<name>`). */
export function chartReleases(resources: PolicyResource[], chart: string): PolicyResource[] {
    return helmReleases(resources, chart);
}

/** Namespaces that run models: every DynamoGraphDeployment's namespace plus the platform's inference namespace. */
export function modelNamespaces(resources: PolicyResource[]): Set<string> {
    const out = new Set<string>([GW.inferenceNamespace]);
    for (const r of ofKind(resources, GROUPS.dynamo, "DynamoGraphDeployment")) out.add(nsOf(r));
    return out;
}

/** True if a label selector selects on a Dynamo operator label. */
export function selectsDynamo(selector: Record<string, string> | undefined): boolean {
    return Object.keys(selector ?? {}).some((k) => k.startsWith(GW.dynamoLabelPrefix));
}
