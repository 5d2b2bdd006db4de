import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import {
    aiRoutes,
    GROUPS,
    GW,
    keyOf,
    modelNamespaces,
    nameOf,
    nsOf,
    ofKind,
    routeGateways,
    secondsOf,
    selectsDynamo,
} from "../lib/gateway";
import { PEER_HOP_HEADER, PEER_PREFIX } from "../../services/shared/peer";

/* Routes to models: no side door around the AI Gateway, one rule per model, long-stream timeouts, no secret header matches. */

/**
 * Models are reached only through the LLM Gateway: no LoadBalancer/NodePort/externalIPs Service, Ingress or
 * Gateway API route may lead to Dynamo pods ("No Ingress, LoadBalancer or NodePort may point at a
 * model"), or it bypasses ext_authz and every limit.
 */
export const noModelSideDoor: StackValidationPolicy = {
    name: "gateway-no-side-door-to-models",
    description:
        "No Service of type LoadBalancer/NodePort (or with externalIPs), Ingress, or HTTPRoute/GRPCRoute/TLSRoute/TCPRoute may reach Dynamo pods or the inference namespaces outside the LLM Gateway; in a model namespace only ClusterIP Services and the NetworkPolicy shape the product renders (frontend port from the gateway and scrapers, other ports from Dynamo pods) are accepted.",
    remediationSteps: "Keep Dynamo frontends ClusterIP and expose models only through AIGatewayRoutes on the LLM Gateway.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const modelNs = modelNamespaces(args.resources);
        const inModelNs = (host: string) => [...modelNs].some((ns) => host === `${ns}.svc` || host.includes(`.${ns}.svc`));
        for (const s of ofKind(args.resources, GROUPS.core, "Service")) {
            const spec = s.props.spec ?? {};
            const exposed = spec.type === "LoadBalancer" || spec.type === "NodePort" || (spec.externalIPs ?? []).length > 0;
            // Named like a Dynamo frontend Service (`<endpoint>-frontend`, lib/serving.ts frontendService): its selector may
            // pick the frontend pods by labels the pack does not know; an exposed one is refused wherever it sits.
            const frontendNamed = /-frontend$/.test(nameOf(s));
            if (exposed && (modelNs.has(nsOf(s)) || selectsDynamo(spec.selector) || frontendNamed)) {
                report(
                    `Service ${keyOf(s)} is ${spec.type ?? "ClusterIP with externalIPs"} and reaches model pods (${selectsDynamo(spec.selector) ? "selects Dynamo labels" : frontendNamed && !modelNs.has(nsOf(s)) ? "named like a Dynamo frontend" : `namespace ${nsOf(s)}`}): it bypasses the gateway's auth and limits.`,
                    s.urn,
                );
            }
        }
        for (const s of ofKind(args.resources, GROUPS.core, "Service")) {
            if (!modelNs.has(nsOf(s))) continue;
            const spec = s.props.spec ?? {};
            if ((spec.type ?? "ClusterIP") !== "ClusterIP" && spec.type !== "LoadBalancer" && spec.type !== "NodePort")
                report(
                    `Service ${keyOf(s)} in model namespace ${nsOf(s)} is of type ${spec.type}; the pack knows only ClusterIP Services there (an ExternalName can shadow a Dynamo frontend's cluster DNS name the gateway's Backend resolves).`,
                    s.urn,
                );
        }
        for (const np of ofKind(args.resources, GROUPS.net, "NetworkPolicy")) {
            if (!modelNs.has(nsOf(np))) continue;
            const why = networkPolicySideDoor(np.props.spec ?? {});
            if (why)
                report(
                    `NetworkPolicy ${keyOf(np)} in model namespace ${nsOf(np)} ${why} NetworkPolicies add up, so any allow beyond the rendered frontend policy is a side door around the gateway. Use the policy lib/gateway.ts frontendNetworkPolicy renders.`,
                    np.urn,
                );
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

const isObj = (v: unknown): v is Record<string, any> => !!v && typeof v === "object" && !Array.isArray(v);
/** JSON with object keys sorted (Pulumi may hand the pack objects with keys in another order). */
const canon = (v: unknown): string =>
    JSON.stringify(v, (_k, x) =>
        isObj(x)
            ? Object.fromEntries(
                  Object.keys(x)
                      .sort()
                      .map((k) => [k, x[k]]),
              )
            : x,
    );
const onlyKeys = (v: unknown, keys: string[]) => isObj(v) && Object.keys(v).every((k) => keys.includes(k));

/**
 * Why a NetworkPolicy in a model namespace allows more than the one shape the product renders (`undefined` when it
 * allows nothing, or only what lib/gateway.ts frontendNetworkPolicy renders). Closed world: a policy without ingress
 * rules only restricts and is accepted; one with ingress rules must select the Dynamo frontends
 * (`nvidia.com/dynamo-component-type: frontend`) and hold only (a) the HTTP port from named namespaces' labelled pods
 * (Envoy proxies, metrics scrapers) and (b) every other port from Dynamo's own pods. No ipBlock, no empty peer, no
 * other pods selected (workers, prefill, Mooncake take no ingress from outside the namespace's own traffic).
 */
export function networkPolicySideDoor(spec: Record<string, any>): string | undefined {
    const ingress: any[] = spec.ingress ?? [];
    if (!ingress.length) return undefined;
    const sel = spec.podSelector ?? {};
    const labels = sel.matchLabels ?? {};
    if (
        !onlyKeys(sel, ["matchLabels"]) ||
        Object.keys(labels).length !== 1 ||
        labels[`${GW.dynamoLabelPrefix}component-type`] !== "frontend"
    )
        return `allows ingress to pods ${JSON.stringify(sel)}, not only the Dynamo frontends (matchLabels ${GW.dynamoLabelPrefix}component-type: frontend);`;
    const gwAt = ingress.findIndex((r) => (r.ports ?? []).length === 1 && r.ports[0].endPort === undefined);
    const gw = ingress[gwAt];
    const port = gw?.ports[0].port;
    if (!gw || typeof port !== "number" || (gw.ports[0].protocol ?? "TCP") !== "TCP" || !onlyKeys(gw.ports[0], ["protocol", "port"]))
        return "has no rule for exactly the frontend's HTTP port;";
    for (const [i, rule] of ingress.entries()) {
        if (!onlyKeys(rule, ["from", "ports"]) || !(rule.from ?? []).length)
            return `has a rule ${JSON.stringify(rule)} open to every peer or field the pack does not model;`;
        if (i === gwAt) {
            for (const peer of rule.from) {
                const ns = peer.namespaceSelector?.matchLabels ?? {};
                const pods = peer.podSelector?.matchLabels ?? {};
                const ok =
                    onlyKeys(peer, ["namespaceSelector", "podSelector"]) &&
                    onlyKeys(peer.namespaceSelector, ["matchLabels"]) &&
                    onlyKeys(peer.podSelector, ["matchLabels"]) &&
                    Object.keys(ns).length === 1 &&
                    typeof ns["kubernetes.io/metadata.name"] === "string" &&
                    Object.keys(pods).length > 0;
                if (!ok)
                    return `admits peer ${JSON.stringify(peer)} to the frontend port; the pack knows only labelled pods of a namespace named by kubernetes.io/metadata.name;`;
            }
            continue;
        }
        const from = rule.from;
        const internal =
            from.length === 1 &&
            onlyKeys(from[0], ["podSelector"]) &&
            onlyKeys(from[0].podSelector, ["matchExpressions"]) &&
            canon(from[0].podSelector.matchExpressions) === canon([{ key: `${GW.dynamoLabelPrefix}component-type`, operator: "Exists" }]) &&
            canon(rule.ports) ===
                canon([
                    { protocol: "TCP", port: 1, endPort: port - 1 },
                    { protocol: "TCP", port: port + 1, endPort: 65535 },
                ]);
        if (!internal)
            return `has a rule ${JSON.stringify(rule)} beyond the frontend port from the gateway and the other ports from Dynamo's own pods;`;
    }
    return undefined;
}

/** AIGatewayRoute rules cap (CRD maxItems 15; the controller adds the catch-all). */
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
 * Why a rule's matches are not one of the two shapes the product renders (`undefined` when they are):
 * - the model rule: exactly one match holding exactly one header, `x-ai-eg-model`, type Exact (lib/gateway.ts
 *   aiGatewayRoutes);
 * - the hop guard of a model with peers (lib/failover.ts withPeerFallback): exactly one match holding exactly the
 *   Exact `x-ai-eg-model` header and `x-llm-peer-hop` as RegularExpression `.*` (present, any value), with only local
 *   backendRefs (no `peer-` backend): a forwarded request is served here or fails here. Both headers sit in ONE match,
 *   so they are ANDed and the guard is narrower than the model rule; the model header still selects the model the key
 *   was authorised for. A client that sets `x-llm-peer-hop` itself only loses its own fallback.
 * Gateway API ORs the matches of a rule (kubernetes-sigs/gateway-api apis/v1/httproute_types.go `HTTPRouteRule.Matches`:
 * "the rule matches if any one of the matches is satisfied") and AIGatewayRoute matches are "a subset of the
 * HTTPRouteMatch in the Gateway API"
 * (envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_aigatewayroutes.yaml
 * `rules[].matches`), so an extra match or header reaches the rule's
 * backends for a request whose model the key's auth never approved. Closed world: anything else is refused.
 */
export function ruleMatchShape(rule: any): string | undefined {
    const matches = rule?.matches ?? [];
    if (matches.length !== 1)
        return `has ${matches.length} matches; the pack knows only exactly one match on ${GW.modelHeader} (matches of a rule are ORed, so another match reaches this model's backends without the model the key was authorised for).`;
    const m = matches[0] ?? {};
    const other = Object.keys(m).filter((k) => k !== "headers");
    if (other.length) return `its match also sets ${other.join(", ")}; the pack knows only an exact ${GW.modelHeader} header match.`;
    const hs = m.headers ?? [];
    const model = hs.length >= 1 && String(hs[0].name).toLowerCase() === GW.modelHeader && (hs[0].type ?? "Exact") === "Exact";
    if (model && hs.length === 1) return undefined;
    if (model && isHopGuardMatch(hs)) {
        const peers = (rule.backendRefs ?? []).filter((b: any) => String(b?.name).startsWith(PEER_PREFIX));
        if (peers.length)
            return `is a peer hop guard (${PEER_HOP_HEADER} present) yet routes to peer backend(s) ${peers.map((b: any) => b.name).join(", ")}; a forwarded request must be served locally or fail, never forwarded again (the spokes would loop).`;
        return undefined;
    }
    return `its match holds headers ${JSON.stringify(hs.map((h: any) => `${h.name}:${h.type ?? "Exact"}`))}; the pack knows only exactly one header, ${GW.modelHeader} of type Exact, or that header followed by ${PEER_HOP_HEADER} RegularExpression ${JSON.stringify(HOP_PRESENT)} (the peer hop guard).`;
}

/** The hop guard's value: any value, the header must be present (lib/failover.ts PEER_HOP_MATCH). */
const HOP_PRESENT = ".*";

/** True for the headers of a hop guard's match: the model header, then x-llm-peer-hop RegularExpression `.*`. */
export function isHopGuardMatch(hs: any[]): boolean {
    return (
        hs.length === 2 &&
        String(hs[0]?.name).toLowerCase() === GW.modelHeader &&
        (hs[0]?.type ?? "Exact") === "Exact" &&
        String(hs[1]?.name).toLowerCase() === PEER_HOP_HEADER &&
        hs[1]?.type === "RegularExpression" &&
        hs[1]?.value === HOP_PRESENT
    );
}

/**
 * Every rule selects its model by an exact `x-ai-eg-model` match, each model once per Gateway: duplicates make
 * the older route win silently.
 */
export const aiRouteUniqueModels: StackValidationPolicy = {
    name: "aigatewayroute-unique-models",
    description: `Every AIGatewayRoute rule must have exactly one match holding exactly one header, an Exact ${GW.modelHeader}, unique across all AIGatewayRoutes on the same Gateway (matches are ORed: any other match reaches the model unapproved); the one other form is a peer hop guard: that header plus x-llm-peer-hop RegularExpression .* in the same match, local backends only, one per model.`,
    remediationSteps: "Give each model one rule (several backendRefs for several endpoints of the same model).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const seen = new Map<string, string>();
        for (const r of aiRoutes(args.resources)) {
            (r.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
                const label = `AIGatewayRoute ${keyOf(r)} rule ${rule.name ?? i}`;
                const shapeWrong = ruleMatchShape(rule);
                if (shapeWrong) {
                    report(`${label}: ${shapeWrong}`, r.urn);
                    return;
                }
                const models: string[] = (rule.matches ?? []).flatMap((m: any) =>
                    (m.headers ?? [])
                        .filter((h: any) => String(h.name).toLowerCase() === GW.modelHeader && (h.type ?? "Exact") === "Exact")
                        .map((h: any) => h.value),
                );
                if (models.length === 0) {
                    report(`${label} has no exact ${GW.modelHeader} match: it would catch requests for other models.`, r.urn);
                    return;
                }
                // A hop guard shares its model with the model rule it guards: each form is unique on its own.
                const guard = isHopGuardMatch(rule.matches[0].headers) ? "\u0000hop" : "";
                for (const gw of routeGateways(r))
                    for (const m of models) {
                        const k = `${gw}\u0000${m}${guard}`;
                        if (seen.has(k)) report(`${label}: model ${m} on Gateway ${gw} is already routed by ${seen.get(k)}.`, r.urn);
                        else seen.set(k, label);
                    }
            });
        }
    },
};

/** Shortest whole-request timeout accepted for a model rule: the AI Gateway's 60 s default cuts long streams (CRD `timeouts` doc). */
export const MIN_REQUEST_TIMEOUT_SECONDS = 300;

/** Long streams need an explicit whole-request timeout (`timeouts.request`). */
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

/** Credentials never appear in route matches (ai-gateway#1485). */
export const aiRouteNoSecretHeaderMatch: ResourceValidationPolicy = {
    name: "aigatewayroute-no-secret-header-match",
    description:
        "No AIGatewayRoute rule may match on a credential header (Authorization, x-api-key, Cookie): the secret sits in the manifest and a wrong key becomes a 404 (ai-gateway#1485).",
    remediationSteps: `Authenticate in the Gateway-level ext_authz; match rules on ${GW.modelHeader} only.`,
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
