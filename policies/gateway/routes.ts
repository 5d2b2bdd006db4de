import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { aiRoutes, GROUPS, GW, keyOf, modelNamespaces, nsOf, ofKind, routeGateways, secondsOf, selectsDynamo } from "../lib/gateway";

/* Routes to models: no side door around the AI Gateway, one rule per model, long-stream timeouts, no secret header matches. */

/**
 * Models are reached only through the LLM Gateway: no LoadBalancer/NodePort/externalIPs Service, Ingress or
 * Gateway API route may lead to Dynamo pods (DESIGN §5 "No Ingress, LoadBalancer or NodePort may point at a
 * model"), or it bypasses ext_authz and every limit.
 */
export const noModelSideDoor: StackValidationPolicy = {
    name: "gateway-no-side-door-to-models",
    description:
        "No Service of type LoadBalancer/NodePort (or with externalIPs), Ingress, or HTTPRoute/GRPCRoute/TLSRoute/TCPRoute may reach Dynamo pods or the inference namespaces outside the LLM Gateway.",
    remediationSteps: "Keep Dynamo frontends ClusterIP and expose models only through AIGatewayRoutes on the LLM Gateway.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const modelNs = modelNamespaces(args.resources);
        const inModelNs = (host: string) => [...modelNs].some((ns) => host === `${ns}.svc` || host.includes(`.${ns}.svc`));
        for (const s of ofKind(args.resources, GROUPS.core, "Service")) {
            const spec = s.props.spec ?? {};
            const exposed = spec.type === "LoadBalancer" || spec.type === "NodePort" || (spec.externalIPs ?? []).length > 0;
            if (exposed && (modelNs.has(nsOf(s)) || selectsDynamo(spec.selector))) {
                report(
                    `Service ${keyOf(s)} is ${spec.type ?? "ClusterIP with externalIPs"} and reaches model pods (${selectsDynamo(spec.selector) ? "selects Dynamo labels" : `namespace ${nsOf(s)}`}): it bypasses the gateway's auth and limits.`,
                    s.urn,
                );
            }
        }
        for (const i of ofKind(args.resources, GROUPS.net, "Ingress")) {
            if (modelNs.has(nsOf(i)))
                report(`Ingress ${keyOf(i)} in model namespace ${nsOf(i)} exposes model Services outside the gateway.`, i.urn);
        }
        const backends = new Map(ofKind(args.resources, GROUPS.eg, "Backend").map((b) => [keyOf(b), b] as const));
        for (const kind of ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"]) {
            for (const r of ofKind(args.resources, GROUPS.gwapi, kind)) {
                const refs = (r.props.spec?.rules ?? []).flatMap((rule: any) => rule.backendRefs ?? []);
                for (const ref of refs) {
                    const ns = ref.namespace ?? nsOf(r);
                    const refKind = ref.kind ?? "Service";
                    const b = refKind === "Backend" ? backends.get(`${ns}/${ref.name}`) : undefined;
                    const hosts: string[] = (b?.props.spec?.endpoints ?? []).map((e: any) => e.fqdn?.hostname).filter(Boolean);
                    if ((refKind === "Service" && modelNs.has(ns)) || hosts.some(inModelNs)) {
                        report(
                            `${kind} ${keyOf(r)} routes to ${refKind} ${ns}/${ref.name}${hosts.length ? ` (${hosts.join(", ")})` : ""} in a model namespace: a path to the models that skips the LLM Gateway's AIGatewayRoutes.`,
                            r.urn,
                        );
                    }
                }
            }
        }
    },
};

/** AIGatewayRoute rules cap (CRD maxItems 15; the controller adds the catch-all), GF#5. */
export const aiRouteMaxRules: ResourceValidationPolicy = {
    name: "aigatewayroute-max-15-rules",
    description: "An AIGatewayRoute may have at most 15 rules; larger catalogs must be split across routes.",
    remediationSteps: "Split the rules over several AIGatewayRoutes (lib/gateway.ts aiGatewayRoutes does this).",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:aigateway\.envoyproxy\.io\/[^:]+:AIGatewayRoute$/.test(args.type)) return;
        const n = (args.props.spec?.rules ?? []).length;
        if (n > 15)
            report(
                `AIGatewayRoute ${args.props.metadata?.name ?? args.name} has ${n} rules; the CRD allows 15 (one slot is the controller's route-not-found).`,
            );
    },
};

/**
 * Every rule selects its model by an exact `x-ai-eg-model` match, each model once per Gateway: duplicates make
 * the older route win silently (GF#5).
 */
export const aiRouteUniqueModels: StackValidationPolicy = {
    name: "aigatewayroute-unique-models",
    description:
        "Every AIGatewayRoute rule must match an exact x-ai-eg-model value, unique across all AIGatewayRoutes on the same Gateway.",
    remediationSteps: "Give each model one rule (several backendRefs for several endpoints of the same model).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const seen = new Map<string, string>();
        for (const r of aiRoutes(args.resources)) {
            (r.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
                const label = `AIGatewayRoute ${keyOf(r)} rule ${rule.name ?? i}`;
                const models: string[] = (rule.matches ?? []).flatMap((m: any) =>
                    (m.headers ?? [])
                        .filter((h: any) => String(h.name).toLowerCase() === GW.modelHeader && (h.type ?? "Exact") === "Exact")
                        .map((h: any) => h.value),
                );
                if (models.length === 0) {
                    report(`${label} has no exact ${GW.modelHeader} match: it would catch requests for other models.`, r.urn);
                    return;
                }
                for (const gw of routeGateways(r))
                    for (const m of models) {
                        const k = `${gw}\u0000${m}`;
                        if (seen.has(k)) report(`${label}: model ${m} on Gateway ${gw} is already routed by ${seen.get(k)}.`, r.urn);
                        else seen.set(k, label);
                    }
            });
        }
    },
};

/** Shortest whole-request timeout accepted for a model rule: the AI Gateway's 60 s default cuts long streams (CRD `timeouts` doc). */
export const MIN_REQUEST_TIMEOUT_SECONDS = 300;

/** Long streams need an explicit whole-request timeout (GF#5 rule list: "explicit long timeouts.request"). */
export const aiRouteStreamTimeouts: ResourceValidationPolicy = {
    name: "aigatewayroute-long-stream-timeouts",
    description: `Every AIGatewayRoute rule must set timeouts.request explicitly, at least ${MIN_REQUEST_TIMEOUT_SECONDS}s (the 60 s default cuts long streamed completions).`,
    remediationSteps: "Set rules[].timeouts.request (e.g. 1800s) from platform:gateway.requestTimeoutSeconds.",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:aigateway\.envoyproxy\.io\/[^:]+:AIGatewayRoute$/.test(args.type)) return;
        (args.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
            const t = secondsOf(rule.timeouts?.request);
            if (t === undefined)
                report(
                    `AIGatewayRoute ${args.props.metadata?.name ?? args.name} rule ${rule.name ?? i}: timeouts.request is not set; the AI Gateway's 60 s default cuts long streams.`,
                );
            else if (t < MIN_REQUEST_TIMEOUT_SECONDS)
                report(
                    `AIGatewayRoute ${args.props.metadata?.name ?? args.name} rule ${rule.name ?? i}: timeouts.request ${rule.timeouts.request} is below ${MIN_REQUEST_TIMEOUT_SECONDS}s.`,
                );
        });
    },
};

/** Credentials never appear in route matches (ai-gateway#1485; GF#3, GF#5). */
export const aiRouteNoSecretHeaderMatch: ResourceValidationPolicy = {
    name: "aigatewayroute-no-secret-header-match",
    description:
        "No AIGatewayRoute rule may match on a credential header (Authorization, x-api-key, Cookie): the secret sits in the manifest and a wrong key becomes a 404 (ai-gateway#1485).",
    remediationSteps: "Authenticate in the Gateway-level ext_authz; match rules on x-ai-eg-model only.",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:aigateway\.envoyproxy\.io\/[^:]+:AIGatewayRoute$/.test(args.type)) return;
        (args.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
            for (const m of rule.matches ?? [])
                for (const h of m.headers ?? []) {
                    if ((GW.secretHeaders as readonly string[]).includes(String(h.name).toLowerCase()))
                        report(
                            `AIGatewayRoute ${args.props.metadata?.name ?? args.name} rule ${rule.name ?? i} matches on credential header ${h.name}.`,
                        );
                }
        });
    },
};
