import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { GROUPS, gatewayUrn, gvk, keyOf, nameOf, nsOf, ofKind } from "../lib/gateway";
import { effectiveFor, listenerLabel, modelListeners } from "../lib/attachment";
import { attachmentsOf } from "./attach";
import { PEER_HOP_HEADER, PEER_PREFIX } from "../../services/shared/peer";

/*
 * The gateway path as a closed shape. Every object of the Gateway API, Envoy Gateway and AI Gateway groups decides who
 * reaches a model, which identity and request id are trusted, or how routes and policies attach. Each kind the stack
 * may hold is listed here with the spec fields the pack knows to be safe (and, where a value changes who gets in, the
 * values); any other kind or field is refused, so a route kind, backend kind, filter, patch or extension nobody
 * modelled cannot reach a model or detach the auth policy. Adding one means reading what it does in the pinned Envoy
 * Gateway / AI Gateway sources and adding it here with a rule that covers it.
 */

/** API groups of the gateway path. */
export const GATEWAY_GROUPS = [
    "gateway.networking.k8s.io",
    "gateway.envoyproxy.io",
    "aigateway.envoyproxy.io",
    "inference.networking.k8s.io",
    "inference.networking.x-k8s.io",
] as const;

/** A known field: dotted spec path, `[]` for array items, `*` for any map key (a whole subtree ends with `.**`). */
type Shape = { fields: readonly string[]; values?: Readonly<Record<string, readonly string[]>>; why: string };

const REF = ["group", "kind", "name", "namespace", "port", "sectionName"];
const refs = (at: string) => REF.map((k) => `${at}.${k}`);

/** Kinds the gateway path may hold, with their known-safe spec shape. */
export const GATEWAY_SHAPES: Readonly<Record<string, Shape>> = {
    Gateway: {
        fields: [
            "gatewayClassName",
            "listeners[].name",
            "listeners[].port",
            "listeners[].protocol",
            "listeners[].hostname",
            "listeners[].allowedRoutes.namespaces.from",
            "listeners[].allowedRoutes.kinds[].group",
            "listeners[].allowedRoutes.kinds[].kind",
            "listeners[].tls.mode",
            ...refs("listeners[].tls.certificateRefs[]"),
            "addresses[].type",
            "addresses[].value",
        ],
        values: {
            "listeners[].protocol": ["HTTP", "HTTPS"],
            "listeners[].tls.mode": ["Terminate"],
            "listeners[].allowedRoutes.namespaces.from": ["Same"],
            "listeners[].allowedRoutes.kinds[].group": ["aigateway.envoyproxy.io"],
            "listeners[].allowedRoutes.kinds[].kind": ["AIGatewayRoute"],
        },
        why: "listeners accept only AIGatewayRoutes of their own namespace (every model route passes ext_authz)",
    },
    GatewayClass: {
        fields: ["controllerName", ...refs("parametersRef"), "description"],
        values: {
            "parametersRef.group": ["gateway.envoyproxy.io"],
            "parametersRef.kind": ["EnvoyProxy"],
            controllerName: ["gateway.envoyproxy.io/gatewayclass-controller"],
        },
        why: "the class is Envoy Gateway's, parameterised only by an EnvoyProxy the pack checks",
    },
    EnvoyProxy: {
        fields: [
            "provider.type",
            "provider.kubernetes.envoyDeployment.replicas",
            // Placement and metadata only: hostNetwork, hostPorts, volumes or a security context on the proxy pod would
            // open a path around the load balancer (envoyproxy/gateway api/v1alpha1/shared_types.go KubernetesPodSpec).
            "provider.kubernetes.envoyDeployment.pod.annotations.**",
            "provider.kubernetes.envoyDeployment.pod.labels.**",
            "provider.kubernetes.envoyDeployment.pod.nodeSelector.**",
            "provider.kubernetes.envoyDeployment.pod.tolerations[].**",
            "provider.kubernetes.envoyDeployment.pod.affinity.**",
            "provider.kubernetes.envoyDeployment.pod.topologySpreadConstraints[].**",
            "provider.kubernetes.envoyDeployment.container.resources.**",
            "provider.kubernetes.envoyService.type",
            "provider.kubernetes.envoyService.annotations.**",
            "provider.kubernetes.envoyService.externalTrafficPolicy",
            "provider.kubernetes.envoyService.loadBalancerClass",
            "provider.kubernetes.envoyService.loadBalancerSourceRanges[]",
            "provider.kubernetes.envoyHpa.**",
            "provider.kubernetes.envoyPDB.**",
            "telemetry.accessLog.**",
            "telemetry.metrics.**",
            "shutdown.**",
        ],
        // envoyService.type: LoadBalancer is what lib/edge.ts `nlbEnvoyService` renders and Envoy Gateway's default; a
        // NodePort opens the proxy on every node's address, outside the load balancer's source ranges.
        values: { "provider.type": ["Kubernetes"], "provider.kubernetes.envoyService.type": ["LoadBalancer"] },
        why: "replicas, placement, service and telemetry only: no bootstrap patch, no extra filters, no mergeBackends",
    },
    ClientTrafficPolicy: {
        fields: [
            ...refs("targetRefs[]"),
            ...refs("targetRef"),
            "connection.bufferLimit",
            "connection.connectionLimit.**",
            "headers.earlyRequestHeaders.remove[]",
            "headers.earlyRequestHeaders.removeOnMatch[].type",
            "headers.earlyRequestHeaders.removeOnMatch[].value",
            "headers.requestID",
            "headers.withUnderscoresAction",
            "timeout.**",
            "tls.minVersion",
            "tls.maxVersion",
            "tls.ciphers[]",
            "tls.alpnProtocols[]",
            "tls.ecdhCurves[]",
            "tls.signatureAlgorithms[]",
            "http1.**",
            "http2.**",
            "tcpKeepalive.**",
            // Envoy's health_check filter answers this path itself (first in the chain, before ext_authz:
            // envoyproxy/gateway@v1.9.0:internal/xds/translator/httpfilters.go newOrderedHTTPFilter); it reaches no model.
            "healthCheck.path",
        ],
        values: { "headers.requestID": ["Generate"], "headers.withUnderscoresAction": ["RejectRequest", "DropHeader"] },
        why: "strips client identity headers early and generates the request id metering charges by; clientIPDetection is absent (the product renders none: trusting X-Forwarded-For hops or a custom header lets a client choose the address limits and logs see)",
    },
    SecurityPolicy: {
        fields: [
            ...refs("targetRefs[]"),
            ...refs("targetRef"),
            "targetSelectors[].group",
            "targetSelectors[].kind",
            "targetSelectors[].matchLabels.**",
            "cors.**",
            "extAuth.failOpen",
            "extAuth.statusOnError",
            "extAuth.timeout",
            "extAuth.bodyToExtAuth.maxRequestBytes",
            "extAuth.headersToExtAuth[]",
            "extAuth.recomputeRoute",
            ...refs("extAuth.http.backendRefs[]"),
            "extAuth.http.path",
            "extAuth.http.headersToBackend[]",
        ],
        why: "ext_authz over HTTP to the auth service (CORS only answers preflights); no JWT/OIDC/API-key/basic-auth/authorization rules the pack does not model",
    },
    AIGatewayRoute: {
        fields: [
            ...refs("parentRefs[]"),
            "rules[].name",
            ...refs("rules[].backendRefs[]"),
            "rules[].backendRefs[].weight",
            "rules[].backendRefs[].priority",
            // Only on peer backendRefs (policies/gateway/peer.ts): identity headers removed, the hop marked.
            "rules[].backendRefs[].headerMutation.remove[]",
            "rules[].backendRefs[].headerMutation.set[].name",
            "rules[].backendRefs[].headerMutation.set[].value",
            // Two match forms only (policies/gateway/routes.ts ruleMatchShape): the Exact model header, or that header plus
            // x-llm-peer-hop RegularExpression ".*" (the peer hop guard, local backends only; policies/gateway/peer.ts
            // requires one before every rule with peer backends). Everything else is refused there.
            "rules[].matches[].headers[].name",
            "rules[].matches[].headers[].type",
            "rules[].matches[].headers[].value",
            "rules[].timeouts.request",
            "rules[].streamIdleTimeout",
            "llmRequestCosts[].metadataKey",
            "llmRequestCosts[].type",
            "llmRequestCosts[].cel",
        ],
        // The one header a backendRef may set: the peer-hop mark (services/shared/peer.ts), never an identity header.
        values: {
            "rules[].backendRefs[].headerMutation.set[].name": [PEER_HOP_HEADER],
            // RegularExpression only for the hop guard's presence match (routes.ts ruleMatchShape checks which header).
            "rules[].matches[].headers[].type": ["Exact", "RegularExpression"],
        },
        why: "routes by the body's model to AIServiceBackends; header-match rules checked by the route policies",
    },
    AIServiceBackend: {
        fields: ["schema.name", "schema.prefix", "schema.version", ...refs("backendRef")],
        values: { "backendRef.group": ["gateway.envoyproxy.io"], "backendRef.kind": ["Backend"] },
        why: "an AI backend resolves only to an Envoy Gateway Backend",
    },
    Backend: {
        fields: [
            "endpoints[].fqdn.hostname",
            "endpoints[].fqdn.port",
            // A peer spoke's gateway only (policies/gateway/peer.ts): verified TLS, SNI = the declared hostname.
            "tls.sni",
            "tls.caCertificateRefs[].group",
            "tls.caCertificateRefs[].kind",
            "tls.caCertificateRefs[].name",
            "tls.wellKnownCACertificates",
        ],
        values: { "tls.caCertificateRefs[].kind": ["ConfigMap"], "tls.wellKnownCACertificates": ["System"] },
        why: "a Dynamo frontend by cluster DNS name, or a declared peer gateway over verified TLS (no IP or unix socket endpoints, no dynamic resolver, no insecureSkipVerify, no client certificate)",
    },
    BackendTrafficPolicy: {
        fields: [
            ...refs("targetRefs[]"),
            "retry.numRetries",
            "retry.numAttemptsPerPriority",
            "retry.retryOn.triggers[]",
            "retry.retryOn.httpStatusCodes[]",
            "retry.perRetry.backOff.baseInterval",
            "retry.perRetry.backOff.maxInterval",
        ],
        values: {
            "targetRefs[].kind": ["HTTPRoute"],
            "targetRefs[].group": ["gateway.networking.k8s.io"],
            // 404 only of the 4xx: a Dynamo frontend's "Model not found" for a model its rule matched (lib/failover.ts
            // FALLBACK_STATUS_CODES). Never 401/403/429: the auth service's answer; retrying it at a peer skips a limit.
            "retry.retryOn.httpStatusCodes[]": ["404", "500", "502", "503", "504"],
            "retry.retryOn.triggers[]": [
                "connect-failure",
                "refused-stream",
                "reset-before-request",
                "retriable-status-codes",
                "unavailable",
            ],
        },
        why: "retries of an AIGatewayRoute's generated HTTPRoute that walk to the next backend priority (peer fallback) on connection failures and 5xx, nothing else",
    },
    ReferenceGrant: {
        fields: ["from[].group", "from[].kind", "from[].namespace", "to[].group", "to[].kind", "to[].name"],
        values: {
            "from[].kind": ["EnvoyProxy", "SecurityPolicy", "AIServiceBackend", "AIGatewayRoute"],
            "to[].kind": ["Service", "Backend"],
        },
        why: "cross-namespace references for the access-log sink, ext_authz and backends only",
    },
};

/** Spec leaf paths of `v` with array indices collapsed (`a[].b`), each with its value. */
function leaves(v: unknown, at = ""): Array<[string, unknown]> {
    if (Array.isArray(v)) return v.length ? v.flatMap((x) => leaves(x, `${at}[]`)) : [[at, v]];
    if (v && typeof v === "object") {
        const ks = Object.keys(v);
        return ks.length ? ks.flatMap((k) => leaves((v as Record<string, unknown>)[k], at ? `${at}.${k}` : k)) : [[at, v]];
    }
    return [[at, v]];
}

function known(path: string, fields: readonly string[]): boolean {
    return fields.some(
        (f) =>
            f === path ||
            (f.endsWith(".**") &&
                (path === f.slice(0, -3) || path.startsWith(`${f.slice(0, -3)}.`) || path.startsWith(`${f.slice(0, -3)}[]`))),
    );
}

/** Findings of the closed shape for one object (exported for tests). */
export function shapeFindings(r: PolicyResource): string[] {
    const g = gvk(r.type);
    if (!g || !(GATEWAY_GROUPS as readonly string[]).includes(g.group)) return [];
    const subject = `${g.kind} ${keyOf(r)}`;
    const shape = GATEWAY_SHAPES[g.kind];
    if (!shape)
        return [
            `${subject}: kind ${g.kind} (${g.group}) is not a shape the pack knows to be safe on the gateway path; it could route to a model or attach around ext_authz unseen. Known kinds: ${Object.keys(GATEWAY_SHAPES).join(", ")}`,
        ];
    const out: string[] = [];
    for (const [p, value] of leaves(r.props.spec ?? {})) {
        if (!p) continue;
        if (!known(p, shape.fields)) {
            out.push(`${subject}: spec.${p} is not a field the pack knows to be safe on ${g.kind} (${shape.why})`);
            continue;
        }
        const allowed = shape.values?.[p];
        if (allowed && !allowed.includes(String(value)))
            out.push(
                `${subject}: spec.${p} is ${JSON.stringify(value)}; the pack knows only ${allowed.join(", ")} to be safe (${shape.why})`,
            );
    }
    return out;
}

/**
 * Findings on where the gateway path's references lead, which a per-object shape cannot see (exported for tests):
 * - a Backend is exactly the Dynamo frontend Service of its endpoint: every endpoint an FQDN
 *   `<backend name>-frontend.<ns>.svc[.cluster.local]` (lib/gateway.ts `backend`, lib/serving.ts `frontendService`),
 *   in the namespace of a DynamoGraphDeployment of that name in the stack; any other host sends authorised model
 *   traffic (prompts, keys' tokens) somewhere the pack cannot see;
 * - no Service of type ExternalName anywhere in the stack (it turns a cluster DNS name, the one a Backend or ext_authz
 *   reference resolves, into an outside host);
 * - a ReferenceGrant names each target (`to[].name`; without it every object of the kind in its namespace is granted)
 *   and admits only namespaces holding a Gateway of the stack (`from[].namespace`, as components/spoke/Metering.ts
 *   renders for the EnvoyProxy's access-log sink).
 */
export function targetFindings(resources: PolicyResource[]): Array<{ message: string; urn: string }> {
    const out: Array<{ message: string; urn: string }> = [];
    const dgds = new Set(ofKind(resources, GROUPS.dynamo, "DynamoGraphDeployment").map(keyOf));
    for (const b of ofKind(resources, GROUPS.eg, "Backend")) {
        // Peer backends (`peer-<spoke>`) are checked against the hub's declaration by policies/gateway/peer.ts.
        if (nameOf(b).startsWith(PEER_PREFIX)) continue;
        const eps: any[] = b.props.spec?.endpoints ?? [];
        if (!eps.length) out.push({ message: `Backend ${keyOf(b)} has no endpoints`, urn: b.urn });
        for (const e of eps) {
            const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)-frontend\.([a-z0-9-]+)\.svc(\.cluster\.local)?$/.exec(
                String(e?.fqdn?.hostname ?? ""),
            );
            const ok = m && m[1] === nameOf(b) && dgds.has(`${m[3]}/${m[1]}`);
            if (!ok)
                out.push({
                    message: `Backend ${keyOf(b)} endpoint ${JSON.stringify(e)} is not the Dynamo frontend Service of endpoint ${nameOf(b)} (${nameOf(b)}-frontend.<namespace of DynamoGraphDeployment ${nameOf(b)}>.svc.cluster.local): model traffic that passed ext_authz would leave for a host the pack cannot see`,
                    urn: b.urn,
                });
        }
    }
    for (const svc of ofKind(resources, GROUPS.core, "Service"))
        if (svc.props.spec?.type === "ExternalName")
            out.push({
                message: `Service ${keyOf(svc)} is of type ExternalName (${svc.props.spec?.externalName}): it turns a cluster DNS name a Backend or ext_authz reference resolves into an outside host; the product renders none`,
                urn: svc.urn,
            });
    const gatewayNs = new Set(ofKind(resources, GROUPS.gwapi, "Gateway").map(nsOf));
    for (const g of ofKind(resources, GROUPS.gwapi, "ReferenceGrant")) {
        for (const t of g.props.spec?.to ?? [])
            if (!t?.name)
                out.push({
                    message: `ReferenceGrant ${keyOf(g)} grants every ${t?.kind} of namespace ${nsOf(g)} (no to[].name)`,
                    urn: g.urn,
                });
        for (const f of g.props.spec?.from ?? [])
            if (!gatewayNs.has(String(f?.namespace)))
                out.push({
                    message: `ReferenceGrant ${keyOf(g)} admits ${f?.kind} of namespace ${f?.namespace}, which holds no Gateway of this stack (known: ${[...gatewayNs].join(", ") || "none"})`,
                    urn: g.urn,
                });
    }
    return out;
}

/** Every gateway-path object has a known kind and only known-safe fields and values. */
export const gatewayClosedShape: StackValidationPolicy = {
    name: "gateway-closed-shape",
    description: `Every object of the gateway path (${GATEWAY_GROUPS.join(", ")}) must be a kind the pack knows (${Object.keys(GATEWAY_SHAPES).join(", ")}) with only known-safe spec fields and values: listeners accept only same-namespace AIGatewayRoutes, the GatewayClass is parameterised by an EnvoyProxy, ClientTrafficPolicies generate the request id, backends are Envoy Gateway Backends; any other route kind, backend kind, patch or extension policy is refused.`,
    remediationSteps:
        "Use the shapes lib/gateway.ts renders; to add a kind or field, read its effect in the pinned Envoy Gateway / AI Gateway source and add it to GATEWAY_SHAPES (policies/gateway/shape.ts) with a rule covering it.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        for (const r of args.resources) for (const m of shapeFindings(r)) report(`${m}.`, r.urn);
        for (const f of targetFindings(args.resources)) report(`${f.message}.`, f.urn);
    },
};

/**
 * The request id metering charges by (the access log's `%REQ(X-REQUEST-ID)%`) is generated by the gateway on every
 * model listener, never taken from the client: the effective ClientTrafficPolicy sets `headers.requestID: Generate`
 * explicitly. `PreserveOrGenerate` and `Preserve` keep a client-sent id (envoyproxy/gateway@v1.9.2:
 * api/v1alpha1/clienttrafficpolicy_types.go `RequestIDAction`; internal/xds/translator/listener.go sets
 * `preserve_external_request_id`); Generate is the documented default there, but the pack does not rest the metering
 * key on a default that a bump or another policy at a higher level could change.
 */
export const requestIdGenerated: StackValidationPolicy = {
    name: "gateway-request-id-generated",
    description:
        "The effective ClientTrafficPolicy of every listener carrying AIGatewayRoutes must set headers.requestID: Generate, so the x-request-id metering counts by is the gateway's, never the client's.",
    remediationSteps: "Set headers.requestID: Generate in the ClientTrafficPolicy (lib/gateway.ts renders it).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const att = attachmentsOf(args.resources, "ClientTrafficPolicy");
        for (const m of modelListeners(args.resources)) {
            if (!m.gw) {
                report(
                    `Gateway ${m.gateway} carries AIGatewayRoutes but is not defined in this stack, so who sets its request id cannot be computed (fail closed).`,
                    gatewayUrn(args.resources, m.gateway, undefined),
                );
                continue;
            }
            const e = effectiveFor(att, m.gateway, m.listener!.name);
            const id = e.effective?.policy.props.spec?.headers?.requestID;
            if (id !== "Generate")
                report(
                    `${listenerLabel(m)}: ${e.effective ? `ClientTrafficPolicy ${keyOf(e.effective.policy)} sets headers.requestID ${JSON.stringify(id ?? "(unset)")}` : "no ClientTrafficPolicy applies"}, so a client-sent x-request-id becomes the metering key (replayed or colliding ids are charged once). Set headers.requestID: Generate.`,
                    e.effective?.policy.urn ?? m.gw.urn,
                );
        }
    },
};
