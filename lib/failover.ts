/**
 * Pure builders for failover across spokes: the gateway objects a spoke renders for its peers (Backend with TLS to the
 * peer's edge, AIServiceBackend, CA ConfigMap, priority-1 backendRefs, the retry that walks to them), the declaration
 * the policy pack checks them against, and the Route 53 records of the global hostname. No Pulumi here
 * (components/spoke/AgentRouter.ts and components/hub/GlobalDns.ts apply them). Every field is recorded with its
 * source and what it needs to take effect in upstream/failover.ts.
 */
import type { FailoverConfig, FailoverContract, PeerContract } from "../config/failover";
import { AI_GATEWAY_MODEL_HEADER, IDENTITY_HEADERS } from "../services/shared/identity";
import { GATEWAY_NAME, MAX_RULES_PER_ROUTE } from "./gateway";

import {
    PEER_DECLARATION_CONFIGMAP,
    PEER_DECLARATION_KEY,
    PEER_HOP_HEADER,
    PEER_PREFIX,
    peerCaConfigMapName,
} from "../services/shared/peer";

export { PEER_DECLARATION_CONFIGMAP, PEER_DECLARATION_KEY, PEER_HOP_HEADER, PEER_PREFIX, peerCaConfigMapName };

/** Backend / AIServiceBackend name of a peer spoke's gateway. */
export function peerBackendName(spoke: string): string {
    return `${PEER_PREFIX}${spoke}`;
}

/**
 * Path Envoy answers itself with 200 while the proxy is live (ClientTrafficPolicy `healthCheck.path`: Envoy's
 * health_check filter, ordered first in the HTTP filter chain, before ext_authz:
 * envoyproxy/gateway@v1.9.0:internal/xds/translator/httpfilters.go `newOrderedHTTPFilter`). Route 53 probes it: a
 * health check cannot present a tenant key, so every other path answers 401.
 */
export const GATEWAY_HEALTH_PATH = "/healthz/gateway";

/**
 * Status codes of a local attempt that send the request to the next priority (a peer) on every peer-enabled route:
 * what a spoke whose frontend is dead or cut off answers while its gateway lives. 503: the Dynamo frontend has the
 * model registered but no complete worker set (its per-model readiness gate), or is itself not ready; 502/504: the
 * frontend is gone or cut off. A 404 joins them only where {@link MODEL_NOT_FOUND_STATUS} says. No other 4xx: a
 * 401/403/429 is the auth service's answer (a peer's, for a forwarded request), and retrying it at the next peer would
 * both bypass that peer's limit and charge another's.
 */
export const FALLBACK_STATUS_CODES = [502, 503, 504] as const;
/**
 * The one 4xx that also sends a request to the peer, and only on a route whose every rule is a peer-enabled model rule
 * or its hop guard ({@link routesWithPeers} `modelNotFound`): with the local frontend up and every worker gone, Dynamo
 * drops the model and answers 404 model_not_found while its /health stays 200 (upstream/failover.ts
 * `dynamoModelNotFound`). Each such rule matches one exact model, so a local 404 there means no workers, never a wrong
 * model name. It is not an auth answer: ext_authz refusals (401/403/429) never reach the route's retry. A 404 from the
 * peer is final: the forwarded request took the peer's hop guard with `x-envoy-max-retries: 0`.
 */
export const MODEL_NOT_FOUND_STATUS = 404;
/** Retry triggers (Envoy Gateway `retryOn.triggers`): connection failures and the status codes above. */
export const FALLBACK_TRIGGERS = ["connect-failure", "refused-stream", "reset-before-request", "retriable-status-codes"] as const;

/** The CA ConfigMap of a PEM peer (Backend `tls.caCertificateRefs` reads key `ca.crt`); undefined for a system-CA peer. */
export function peerCaConfigMap(p: PeerContract, namespace: string) {
    if (p.ca.kind !== "pem") return undefined;
    return {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: peerCaConfigMapName(p.spoke), namespace },
        data: { "ca.crt": `${p.ca.pem.trim()}\n` },
    };
}

/**
 * Envoy Gateway Backend for a peer's edge: its listener hostname on 443, TLS verified with the peer's CA (or the
 * system CAs for a publicly trusted certificate) against that hostname, which is also the SNI. Never
 * `insecureSkipVerify`; never `fallback` (the backendRef's `priority` overrides it: AIGatewayRoute CRD
 * `rules[].backendRefs[].priority`).
 */
export function peerBackend(p: PeerContract, namespace: string) {
    const ca =
        p.ca.kind === "pem"
            ? { caCertificateRefs: [{ group: "", kind: "ConfigMap", name: peerCaConfigMapName(p.spoke) }] }
            : { wellKnownCACertificates: "System" };
    return {
        apiVersion: "gateway.envoyproxy.io/v1alpha1",
        kind: "Backend",
        metadata: { name: peerBackendName(p.spoke), namespace },
        spec: {
            endpoints: [{ fqdn: { hostname: p.hostname, port: p.port } }],
            tls: { sni: p.hostname, ...ca },
        },
    };
}

/** AIServiceBackend over the peer Backend: OpenAI schema, as the peer's own gateway speaks it. */
export function peerAiServiceBackend(p: PeerContract, namespace: string) {
    return {
        apiVersion: "aigateway.envoyproxy.io/v1beta1",
        kind: "AIServiceBackend",
        metadata: { name: peerBackendName(p.spoke), namespace },
        spec: {
            schema: { name: "OpenAI", prefix: "/v1" },
            backendRef: { group: "gateway.envoyproxy.io", kind: "Backend", name: peerBackendName(p.spoke) },
        },
    };
}

/**
 * Headers removed from a request before it leaves for a peer: every trusted identity header our ext_authz set
 * (the peer's auth service must decide from the tenant's own key, which travels in `Authorization`) and the AI
 * Gateway's model header (the peer's AI Gateway sets it from the body). The peer strips them early too
 * (lib/gateway.ts `earlyHeaderStrip`); removing them here keeps our trusted identity off the wire.
 */
export function peerStrippedHeaders(): string[] {
    return [...new Set([...Object.values(IDENTITY_HEADERS), AI_GATEWAY_MODEL_HEADER])].sort();
}

/**
 * One peer backendRef of a model rule: priority 1 + its order, identity headers removed, the hop marked with this
 * spoke's name ({@link PEER_HOP_HEADER}: the peer then serves it or fails it, never forwarding it on).
 */
export function peerBackendRef(spoke: string, order: number, self: string) {
    return {
        name: peerBackendName(spoke),
        priority: 1 + order,
        headerMutation: { set: [{ name: PEER_HOP_HEADER, value: self }], remove: peerStrippedHeaders() },
    };
}

/**
 * The header match of a hop guard: {@link PEER_HOP_HEADER} present, any value. Gateway API has no "present" match type;
 * a RegularExpression match becomes an Envoy `safe_regex` header matcher, which fails on a missing header (Envoy
 * `HeaderMatcher.treat_missing_header_as_empty` defaults to false), so `.*` matches exactly the requests that carry it.
 * Recorded in upstream/failover.ts (hopGuardPrecedence).
 */
export const PEER_HOP_MATCH = { type: "RegularExpression", name: PEER_HOP_HEADER, value: ".*" } as const;

/** Name of the hop-guard rule of a model rule (`<rule>-hop`). */
export function hopGuardRuleName(ruleName: string | undefined): string | undefined {
    return ruleName === undefined ? undefined : `${ruleName}-hop`;
}

/**
 * Adds the peers to the model rules of rendered AIGatewayRoutes: for a rule whose model a peer backs up, the local
 * backendRefs stay at priority 0 and each peer follows at priority 1, 2, ... in the endpoints' fallback order, and a
 * hop guard is inserted right before it: the same model match plus {@link PEER_HOP_MATCH}, the local backendRefs only.
 * A request a peer forwarded (it carries the hop header) takes the guard (two header matches beat one: Gateway API
 * precedence, upstream/failover.ts hopGuardPrecedence) and is served here or fails here. Without the guard, a
 * forwarded request whose local backend has no hosts (its DynamoGraphDeployment deleted) goes to the peer on its
 * FIRST attempt by Envoy's priority spill, no retry involved, and bounces between the spokes until the route timeout.
 * Rules of models without peers are unchanged. `self` is this spoke (the hop header's value).
 * @param routes lib/gateway.ts `aiGatewayRoutes` output
 * @throws Error when a route would exceed MAX_RULES_PER_ROUTE rules with its guards (AIGatewayRoute CRD maxItems)
 */
export function withPeerFallback<
    R extends {
        metadata: { name: string };
        spec: {
            rules: Array<{ name?: string; matches: Array<{ headers: Array<{ value: string }> }>; backendRefs: unknown[] }>;
        };
    },
>(routes: R[], f: FailoverContract | undefined, self: string): R[] {
    if (!f?.peers.length) return routes;
    return routes.map((r) => {
        const rules = r.spec.rules.flatMap((rule) => {
            const model = rule.matches[0]?.headers[0]?.value;
            const peers = f.peers.filter((p) => p.models.includes(model));
            if (!peers.length) return [rule];
            const guard = {
                ...rule,
                ...(rule.name === undefined ? {} : { name: hopGuardRuleName(rule.name) }),
                matches: rule.matches.map((m) => ({ ...m, headers: [...m.headers, { ...PEER_HOP_MATCH }] })),
            };
            return [guard, { ...rule, backendRefs: [...rule.backendRefs, ...peers.map((p, i) => peerBackendRef(p.spoke, i, self))] }];
        });
        if (rules.length > MAX_RULES_PER_ROUTE)
            throw new Error(
                `AIGatewayRoute ${r.metadata.name}: ${rules.length} rules with the peer hop guards, above the CRD's ${MAX_RULES_PER_ROUTE}; place fewer models with peers on this spoke or lower MAX_RULES_PER_ROUTE`,
            );
        return { ...r, spec: { ...r.spec, rules } };
    });
}

/**
 * BackendTrafficPolicy on the HTTPRoute the AI Gateway generates for an AIGatewayRoute (same name: AI Gateway
 * provider-fallback docs) that makes priority fallback happen: one attempt per priority (`numAttemptsPerPriority: 1`,
 * so the retry goes to the next priority, not the same frontend), as many retries as there are peer priorities, on
 * connection failures and {@link FALLBACK_STATUS_CODES}, plus {@link MODEL_NOT_FOUND_STATUS} when `modelNotFound` (every rule of
 * the route is a peer-enabled model rule or its hop guard: {@link routesWithPeers}). No per-retry timeout: the rule's `timeouts.request` bounds a
 * long stream. Envoy does not retry once response headers went to the client, so a started stream is never replayed.
 */
export function fallbackTrafficPolicy(routeName: string, namespace: string, peerCount: number, modelNotFound = false) {
    const httpStatusCodes = [...FALLBACK_STATUS_CODES, ...(modelNotFound ? [MODEL_NOT_FOUND_STATUS] : [])];
    return {
        apiVersion: "gateway.envoyproxy.io/v1alpha1",
        kind: "BackendTrafficPolicy",
        metadata: { name: `${routeName}-fallback`, namespace },
        spec: {
            targetRefs: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", name: routeName }],
            retry: {
                numRetries: peerCount,
                numAttemptsPerPriority: 1,
                retryOn: { triggers: [...FALLBACK_TRIGGERS], httpStatusCodes },
                perRetry: { backOff: { baseInterval: "100ms", maxInterval: "1s" } },
            },
        },
    };
}

/** The declaration ConfigMap the pack reads ({@link PEER_DECLARATION_CONFIGMAP}). */
export function peerDeclaration(f: FailoverContract, namespace: string) {
    return {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: PEER_DECLARATION_CONFIGMAP, namespace },
        data: { [PEER_DECLARATION_KEY]: JSON.stringify(f) },
    };
}

/** Every failover object of a spoke's gateway, in apply order (CA, Backend, AIServiceBackend per peer; declaration). */
export function peerObjects(f: FailoverContract | undefined, namespace: string) {
    if (!f?.peers.length) return [];
    return [
        peerDeclaration(f, namespace),
        ...f.peers.flatMap((p) => [peerCaConfigMap(p, namespace), peerBackend(p, namespace), peerAiServiceBackend(p, namespace)]),
    ].filter((x): x is NonNullable<typeof x> => !!x);
}

/**
 * The route names whose rules gained peers (each gets a {@link fallbackTrafficPolicy}), with their peer count and
 * whether a 404 may fall back too (`modelNotFound`: {@link peerOnlyRoute}).
 */
export function routesWithPeers(routes: Array<{ metadata: { name: string }; spec: { rules: RuleLike[] } }>) {
    return routes
        .map((r) => ({
            name: r.metadata.name,
            peers: Math.max(0, ...r.spec.rules.map((x) => x.backendRefs.filter((b) => b.name.startsWith(PEER_PREFIX)).length)),
            modelNotFound: peerOnlyRoute(r.spec.rules),
        }))
        .filter((r) => r.peers > 0);
}

/** A rendered route rule, the fields {@link peerOnlyRoute} reads. */
type RuleLike = {
    matches?: Array<{ headers?: Array<{ name?: string; type?: string; value: string }> }>;
    backendRefs: Array<{ name: string }>;
};

/**
 * True when every rule of a route is either a peer-enabled model rule (one match, one Exact model header, a peer
 * backendRef) or a hop guard (that header plus {@link PEER_HOP_MATCH}, no peer backendRef): then a 404 on any attempt
 * of the route is the model's own "no workers" answer ({@link MODEL_NOT_FOUND_STATUS}) and may fall back. A route that
 * also holds a model without peers retries 5xx only.
 */
export function peerOnlyRoute(rules: RuleLike[]): boolean {
    return rules.every((rule) => {
        const h = rule.matches?.length === 1 ? (rule.matches[0].headers ?? []) : [];
        const model = h[0]?.name === AI_GATEWAY_MODEL_HEADER && (h[0].type ?? "Exact") === "Exact";
        const peers = rule.backendRefs.filter((b) => b.name.startsWith(PEER_PREFIX)).length;
        if (h.length === 1) return model && peers > 0;
        const hop =
            h.length === 2 && h[1].name === PEER_HOP_MATCH.name && h[1].type === PEER_HOP_MATCH.type && h[1].value === PEER_HOP_MATCH.value;
        return model && hop && peers === 0;
    });
}

/** Listener hostname when the spoke is behind a global name: none (accepts its own and the global name; the certificate names both). */
export function listenerHostnameFor(own: string | undefined, f: FailoverContract | undefined): string | undefined {
    return f?.globalHostname ? undefined : own;
}

/** The AIGatewayRoute name prefix (routes are `<gateway>-models-<i>`), for tests and the pack. */
export const ROUTE_PREFIX = `${GATEWAY_NAME}-models-`;

// ---------------------------------------------------------------- Route 53 (hub)

/** One spoke behind the global name, as the hub's DNS sees it (programs/failover.ts `SpokeEdge`). */
export interface DnsSpoke {
    spoke: string;
    hostname: string;
    address?: string;
    latencyRegion?: string;
}

/**
 * Route 53 health check of a spoke's gateway: HTTPS on 443 to {@link GATEWAY_HEALTH_PATH}, SNI and Host = the
 * spoke's listener hostname (`enableSni`), probing the site's public address on-prem or resolving the hostname. It
 * sees the gateway, not a model, on purpose (upstream/failover.ts `route53SeesTheGateway`): the global name serves
 * every model, so a DNS answer cannot follow one model's health, and the gateway answers nothing per model without a
 * key. A dead model on a live gateway fails over in the request path instead: its 404/503 sends the request to the
 * peers ({@link FALLBACK_STATUS_CODES}).
 */
export function healthCheckArgs(s: DnsSpoke, f: FailoverConfig) {
    return {
        type: "HTTPS",
        fqdn: s.hostname,
        ...(s.address ? { ipAddress: s.address } : {}),
        port: 443,
        resourcePath: GATEWAY_HEALTH_PATH,
        enableSni: true,
        requestInterval: f.healthCheck.intervalSeconds,
        failureThreshold: f.healthCheck.failureThreshold,
        tags: { Name: `platform-gateway-${s.spoke}`, "platform:spoke": s.spoke },
    };
}

/**
 * The global name's record for one spoke: a CNAME to the spoke's listener hostname with its health check;
 * `active-active` a latency record in the spoke's latency region, `primary-standby` a failover record (spokes[0]
 * PRIMARY, spokes[1] SECONDARY). Route 53 answers only with healthy spokes' records.
 */
export function recordArgs(s: DnsSpoke, f: FailoverConfig) {
    const routing =
        f.mode === "active-active"
            ? { latencyRoutingPolicies: [{ region: s.latencyRegion! }] }
            : { failoverRoutingPolicies: [{ type: f.spokes[0] === s.spoke ? "PRIMARY" : "SECONDARY" }] };
    return {
        zoneId: f.hostedZoneId,
        name: f.hostname,
        type: "CNAME",
        ttl: f.ttlSeconds,
        records: [s.hostname],
        setIdentifier: s.spoke,
        ...routing,
    };
}
