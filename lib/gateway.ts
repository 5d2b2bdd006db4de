/**
 * Pure builders for the spoke's Agent Router (Envoy Gateway + AI Gateway) objects. No Pulumi here: each
 * function returns a Kubernetes object or Helm values as plain data, so tests and policies check exactly what
 * components/spoke/AgentRouter.ts applies. Field names follow the upstream CRDs (Envoy Gateway
 * v1.9.0, AI Gateway v1.1.0 with v1.2.0 adding only optional fields, Gateway API v1.6.1); behaviour notes cite
 * the upstream source.
 */
import { createHash } from "node:crypto";
import {
    AI_GATEWAY_MODEL_HEADER,
    DYNAMO_HEADER_PREFIX,
    DYNAMO_HEADERS,
    IDENTITY_HEADER_PREFIX,
    IDENTITY_HEADERS,
    TOKEN_METADATA_KEYS,
} from "../services/shared/identity";
import { ENVOY_MAX_RETRIES_HEADER, PEER_HOP_HEADER } from "../services/shared/peer";
import { INFERENCE_NAMESPACE, ROLLOUT_ANNOTATION, type RolloutAnnotationEntry } from "./labels";
import { FRONTEND_PORT } from "./dgd";
import { type ListenerTls, TLS_TERMINATED_BY_ANNOTATION } from "./edge";
import { frontendService } from "./serving";

/** Namespace of the Gateway, its policies, routes, Backends, the auth service and the counters store. */
export const GATEWAY_NAMESPACE = "llm-gateway";
/** Envoy Gateway controller namespace; Envoy proxy pods run here too (EG's default ControllerNamespace deploy mode). */
export const ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system";
/** AI Gateway controller namespace (upstream install docs). */
export const AI_GATEWAY_NAMESPACE = "envoy-ai-gateway-system";
/** Envoy Gateway's GatewayClass controller name (ai-gateway manifests/envoy-gateway-values.yaml). */
export const ENVOY_GATEWAY_CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller";
/** The AI Gateway extension server Envoy Gateway calls on every xDS translation (ai-gateway-helm Service `ai-gateway-controller`, port `grpc` 1063). */
export const AI_GATEWAY_EXTENSION_SERVER = {
    hostname: `ai-gateway-controller.${AI_GATEWAY_NAMESPACE}.svc.cluster.local`,
    port: 1063,
} as const;

/** GatewayClass bound to Envoy Gateway. */
export const GATEWAY_CLASS_NAME = "agent-router";
/** The LLM Gateway (and the prefix of its policies and routes). */
export const GATEWAY_NAME = "llm";
/** EnvoyProxy parameterising the GatewayClass. */
export const ENVOY_PROXY_NAME = "llm-proxy";

/**
 * Labels Envoy Gateway puts on every Envoy proxy pod it manages (envoyproxy/gateway proxy Deployment
 * template: `app.kubernetes.io/{name: envoy, component: proxy, managed-by: envoy-gateway}`). The AI Gateway's
 * sidecar webhook selects on `managed-by` too.
 */
export const ENVOY_PROXY_POD_LABELS = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
} as const;

/** Pod label the Dynamo operator sets from the component type. */
export const DYNAMO_COMPONENT_TYPE_LABEL = "nvidia.com/dynamo-component-type";
/** Port of the Dynamo OpenAI-compatible frontend (HTTP; lib/dgd.ts `FRONTEND_PORT`). */
export const DYNAMO_FRONTEND_PORT = FRONTEND_PORT;

/**
 * DNS name of an endpoint's Dynamo frontend Service (lib/serving.ts `frontendService`:
 * `<endpoint>-frontend.<inference ns>.svc.cluster.local`, ClusterIP).
 */
export function frontendHost(endpointName: string): string {
    const s = frontendService(endpointName);
    return `${s.name}.${s.namespace}.svc.cluster.local`;
}

/**
 * `AIGatewayRoute.spec.rules` holds at most 15 rules: the controller keeps one slot for its `route-not-found`
 * catch-all (aigw@c217da8:api/v1beta1/ai_gateway_route.go; CRD `maxItems: 15`).
 */
export const MAX_RULES_PER_ROUTE = 15;

/** Envoy's per-connection buffer default (32 KiB): bodies beyond it get 413 (ai-gateway#827). */
export const ENVOY_DEFAULT_BUFFER_LIMIT_BYTES = 32 * 1024;

/** Group/kind/name reference to the LLM Gateway (policy `targetRefs`). */
export function gatewayTargetRef(name = GATEWAY_NAME) {
    return { group: "gateway.networking.k8s.io", kind: "Gateway", name };
}

/**
 * Headers removed before routing and before every HTTP filter, ext_authz included (ClientTrafficPolicy
 * `headers.earlyRequestHeaders`): every trusted identity header, by name and by the
 * `x-platform-` prefix (so a header added later is covered), the Dynamo priority and cache-salt headers the auth
 * service sets (services/shared/identity.ts `DYNAMO_HEADERS`), and `x-ai-eg-model` plus every other gateway-owned
 * `x-ai-eg-` header, so a client can neither pick the first-pass route nor feed ext_authz a fake model; every `x-dynamo-` routing override (a client
 * would otherwise pin its request to a worker); and `x-envoy-max-retries`, which only the auth service sets (services/shared/peer.ts).
 */
export function earlyHeaderStrip() {
    return {
        remove: [
            ...new Set([
                AI_GATEWAY_MODEL_HEADER,
                ...Object.values(IDENTITY_HEADERS),
                ...Object.values(DYNAMO_HEADERS),
                ENVOY_MAX_RETRIES_HEADER,
            ]),
        ].sort(),
        removeOnMatch: [
            { type: "Prefix" as const, value: IDENTITY_HEADER_PREFIX },
            { type: "Prefix" as const, value: "x-ai-eg-" },
            { type: "Prefix" as const, value: DYNAMO_HEADER_PREFIX },
        ],
    };
}

/** Kubernetes quantity for a byte count: `<n>Mi` when a whole number of MiB, else plain bytes. */
export function byteQuantity(bytes: number): string {
    const mi = 1024 * 1024;
    return bytes % mi === 0 ? `${bytes / mi}Mi` : String(bytes);
}

/**
 * Bytes in a Kubernetes quantity (`50Mi`, `1Gi`, `32768`, `64k`).
 * @throws Error for anything that is not a plain quantity
 */
export function parseByteQuantity(q: string | number): number {
    if (typeof q === "number") return q;
    const m = /^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q.trim());
    if (!m) throw new Error(`not a byte quantity: ${q}`);
    const mult: Record<string, number> = { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
    return Number(m[1]) * mult[m[2] ?? ""];
}

/** Inputs of {@link clientTrafficPolicy}. */
export interface ClientTrafficPolicyInput {
    namespace: string;
    /** ClientTrafficPolicy `connection.bufferLimit`, bytes. */
    bufferLimitBytes: number;
    /** `healthCheck.path` Envoy answers itself before ext_authz (lib/failover.ts GATEWAY_HEALTH_PATH); only for a spoke Route 53 or peers probe. */
    healthCheckPath?: string;
}

/**
 * The Gateway's ClientTrafficPolicy: early identity-header stripping, a buffer large enough for the biggest
 * prompt ext_authz must read, `x-request-id` always generated by Envoy (a client cannot choose the metering
 * idempotency key), headers with underscores rejected (Envoy default, explicit).
 */
export function clientTrafficPolicy(x: ClientTrafficPolicyInput) {
    return {
        apiVersion: "gateway.envoyproxy.io/v1alpha1",
        kind: "ClientTrafficPolicy",
        metadata: { name: `${GATEWAY_NAME}-client`, namespace: x.namespace },
        spec: {
            targetRefs: [gatewayTargetRef()],
            headers: { earlyRequestHeaders: earlyHeaderStrip(), requestID: "Generate", withUnderscoresAction: "RejectRequest" },
            connection: { bufferLimit: byteQuantity(x.bufferLimitBytes) },
            ...(x.healthCheckPath ? { healthCheck: { path: x.healthCheckPath } } : {}),
        },
    };
}

/** The auth service as ext_authz sees it. */
export interface AuthBackend {
    service: string;
    namespace: string;
    port: number;
    /** Path prefix Envoy prepends to the client path (`extAuth.http.path`). */
    pathPrefix: string;
}

/** Inputs of {@link securityPolicy}; `timeoutSeconds` is one ext_authz call. */
export interface SecurityPolicyInput {
    namespace: string;
    auth: AuthBackend;
    /** `bodyToExtAuth.maxRequestBytes`. */
    maxRequestBytes: number;
    timeoutSeconds: number;
}

/**
 * Status Envoy returns when the auth service errors or cannot be reached (`statusOnError`). 503, not Envoy's
 * default 403, so an outage is not mistaken for a denied key; the request never reaches a model either way.
 */
export const EXT_AUTH_STATUS_ON_ERROR = 503;

/** Client headers the HTTP auth service receives besides the body (HTTP ext_authz always adds Host, Method, Path, Content-Length, Authorization). */
export const HEADERS_TO_EXT_AUTH = ["authorization", "content-type", "x-request-id", PEER_HOP_HEADER] as const;

/**
 * The one Gateway-level SecurityPolicy: HTTP ext_authz to the auth service, fail-closed, with the
 * body (the auth service reads `model` and `max_tokens` itself, since ext_authz runs before the AI Gateway
 * parses the body), the trusted identity headers copied from the auth response
 * onto the upstream request (overwriting), and an explicit error status.
 */
export function securityPolicy(x: SecurityPolicyInput) {
    return {
        apiVersion: "gateway.envoyproxy.io/v1alpha1",
        kind: "SecurityPolicy",
        metadata: { name: `${GATEWAY_NAME}-auth`, namespace: x.namespace },
        spec: {
            targetRefs: [gatewayTargetRef()],
            extAuth: {
                http: {
                    backendRefs: [{ group: "", kind: "Service", name: x.auth.service, namespace: x.auth.namespace, port: x.auth.port }],
                    path: x.auth.pathPrefix,
                    // Identity headers, the Dynamo priority and cache-salt headers, and the retry override the auth service
                    // sets on a request a peer forwarded (services/shared/peer.ts ENVOY_MAX_RETRIES_HEADER; stripped from
                    // clients early).
                    headersToBackend: [...Object.values(IDENTITY_HEADERS), ...Object.values(DYNAMO_HEADERS), ENVOY_MAX_RETRIES_HEADER],
                },
                headersToExtAuth: [...HEADERS_TO_EXT_AUTH],
                bodyToExtAuth: { maxRequestBytes: x.maxRequestBytes },
                failOpen: false,
                statusOnError: EXT_AUTH_STATUS_ON_ERROR,
                timeout: `${x.timeoutSeconds}s`,
            },
        },
    };
}

/** Inputs of {@link envoyProxy}. */
export interface EnvoyProxyInput {
    namespace: string;
    replicas: number;
    /** `telemetry.accessLog.settings[]` entries (services/shared/accesslog.ts `meteringAccessLogSetting`). */
    accessLog: unknown[];
    /** `provider.kubernetes.envoyService` (EKS: lib/edge.ts `nlbEnvoyService`); unset: Envoy Gateway's default Service. */
    envoyService?: Record<string, unknown>;
}

/**
 * EnvoyProxy for the LLM Gateway: replica count and the metering access log. Never sets `mergeBackends`
 * (EG v1.9): it shares clusters between routes and breaks AI Gateway backend resolution (`ar-rn`).
 */
export function envoyProxy(x: EnvoyProxyInput) {
    return {
        apiVersion: "gateway.envoyproxy.io/v1alpha1",
        kind: "EnvoyProxy",
        metadata: { name: ENVOY_PROXY_NAME, namespace: x.namespace },
        spec: {
            provider: {
                type: "Kubernetes",
                kubernetes: { envoyDeployment: { replicas: x.replicas }, ...(x.envoyService ? { envoyService: x.envoyService } : {}) },
            },
            telemetry: { accessLog: { settings: x.accessLog } },
        },
    };
}

/** GatewayClass bound to Envoy Gateway, parameterised by the EnvoyProxy. */
export function gatewayClass(envoyProxyNamespace: string) {
    return {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "GatewayClass",
        metadata: { name: GATEWAY_CLASS_NAME },
        spec: {
            controllerName: ENVOY_GATEWAY_CONTROLLER_NAME,
            parametersRef: { group: "gateway.envoyproxy.io", kind: "EnvoyProxy", name: ENVOY_PROXY_NAME, namespace: envoyProxyNamespace },
        },
    };
}

/** Inputs of {@link gateway}. */
export interface GatewayInput {
    namespace: string;
    hostname?: string;
    /**
     * The listener's TLS (lib/edge.ts `listenerTls`): a Secret in the gateway namespace gives HTTPS on 443; a device
     * in front that terminates TLS gives HTTP on 80, recorded in the {@link TLS_TERMINATED_BY_ANNOTATION} annotation.
     */
    tls: ListenerTls;
}

/** The LLM Gateway: one listener (one listener per LLM Gateway keeps Gateway-level policies uniform). */
export function gateway(x: GatewayInput) {
    const listener =
        "secretName" in x.tls
            ? {
                  name: "https",
                  protocol: "HTTPS",
                  port: 443,
                  tls: { mode: "Terminate", certificateRefs: [{ kind: "Secret", name: x.tls.secretName }] },
              }
            : { name: "http", protocol: "HTTP", port: 80 };
    return {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        metadata: {
            name: GATEWAY_NAME,
            namespace: x.namespace,
            ...("terminatedBy" in x.tls ? { annotations: { [TLS_TERMINATED_BY_ANNOTATION]: x.tls.terminatedBy } } : {}),
        },
        spec: {
            gatewayClassName: GATEWAY_CLASS_NAME,
            listeners: [{ ...listener, ...(x.hostname ? { hostname: x.hostname } : {}), allowedRoutes: { namespaces: { from: "Same" } } }],
        },
    };
}

/** An endpoint as the gateway routes it: the DGD name (Backend/AIServiceBackend name) and the model it serves. */
export interface RoutedEndpoint {
    name: string;
    model: string;
    /**
     * Percent of the model's traffic during a rollout (lib/rollout.ts `revisionsOf`), rendered as the backendRef's
     * `weight` (Gateway API meaning: weight / sum of the rule's weights; 0 sends none; upstream/rollout.ts
     * `aiGatewayRouteWeightFact`). Unset outside a rollout: no weight is rendered (upstream default 1, equal shares).
     */
    weight?: number;
}

/** Envoy Gateway Backend: the endpoint's Dynamo frontend Service by FQDN (AIServiceBackend accepts only Backends). */
export function backend(e: RoutedEndpoint, namespace: string) {
    return {
        apiVersion: "gateway.envoyproxy.io/v1alpha1",
        kind: "Backend",
        metadata: { name: e.name, namespace },
        spec: { endpoints: [{ fqdn: { hostname: frontendHost(e.name), port: frontendService(e.name).port } }] },
    };
}

/** AIServiceBackend: OpenAI schema (`/v1/chat/completions`, the Dynamo frontend's API) over the Backend. */
export function aiServiceBackend(e: RoutedEndpoint, namespace: string) {
    return {
        apiVersion: "aigateway.envoyproxy.io/v1beta1",
        kind: "AIServiceBackend",
        metadata: { name: e.name, namespace },
        spec: {
            schema: { name: "OpenAI", prefix: "/v1" },
            backendRef: { group: "gateway.envoyproxy.io", kind: "Backend", name: e.name },
        },
    };
}

/**
 * Token counts the AI Gateway writes to dynamic metadata `io.envoy.ai_gateway` at the end of each successful
 * response; the access log (services/shared/accesslog.ts) reads the same keys.
 */
export function llmRequestCosts() {
    return [
        { metadataKey: TOKEN_METADATA_KEYS.input, type: "InputToken" },
        { metadataKey: TOKEN_METADATA_KEYS.cachedInput, type: "CachedInputToken" },
        { metadataKey: TOKEN_METADATA_KEYS.output, type: "OutputToken" },
        { metadataKey: TOKEN_METADATA_KEYS.total, type: "TotalToken" },
    ];
}

/**
 * A route rule name for a model id: DNS-subdomain form (the CRD pattern) plus 8 hex of the id's SHA-256, so
 * ids differing only in case or punctuation never collide.
 */
export function ruleName(model: string): string {
    const base = model
        .toLowerCase()
        .replace(/[^a-z0-9.-]+/g, "-")
        .replace(/[.-]{2,}/g, "-")
        .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
        .slice(0, 200);
    const h = createHash("sha256").update(model).digest("hex").slice(0, 8);
    return base ? `${base}-${h}` : `model-${h}`;
}

/** Per-rule timeouts, seconds: whole request (every streamed chunk) and upstream silence. */
export interface RouteTimeouts {
    requestSeconds: number;
    streamIdleSeconds: number;
}

/**
 * One rule per model (sorted by model id): exact match on `x-ai-eg-model` (which the AI Gateway sets from the
 * body; clients' copies are stripped early), every endpoint serving that model as an equally weighted backend,
 * long-stream timeouts. Models are unique by construction.
 */
export function modelRules(endpoints: RoutedEndpoint[], t: RouteTimeouts) {
    const byModel = new Map<string, RoutedEndpoint[]>();
    for (const e of endpoints) byModel.set(e.model, [...(byModel.get(e.model) ?? []), e]);
    return [...byModel.keys()].sort().map((model) => ({
        name: ruleName(model),
        matches: [{ headers: [{ type: "Exact", name: AI_GATEWAY_MODEL_HEADER, value: model }] }],
        backendRefs: byModel
            .get(model)!
            .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
            .map((e) => (e.weight === undefined ? { name: e.name } : { name: e.name, weight: e.weight })),
        timeouts: { request: `${t.requestSeconds}s` },
        streamIdleTimeout: `${t.streamIdleSeconds}s`,
    }));
}

/** Splits items into consecutive chunks of at most `size` (the last one may be shorter). @throws RangeError for size < 1 */
export function chunk<T>(items: T[], size: number): T[][] {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`chunk size must be a positive integer, got ${size}`);
    const out: T[][] = [];
    for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
    return out;
}

/**
 * The AIGatewayRoutes for a spoke: {@link modelRules} split into routes of at most {@link MAX_RULES_PER_ROUTE}
 * rules (`<gateway>-models-<i>`), each attached to the LLM Gateway and declaring the same `llmRequestCosts`.
 * No endpoints: no routes (every request then gets the AI Gateway's 404). A route carrying a rule of a model under a
 * rollout is annotated {@link ROLLOUT_ANNOTATION} with that rollout's state (lib/rollout.ts `rolloutAnnotation`).
 */
export function aiGatewayRoutes(endpoints: RoutedEndpoint[], namespace: string, t: RouteTimeouts, rollouts: RolloutAnnotationEntry[] = []) {
    return chunk(modelRules(endpoints, t), MAX_RULES_PER_ROUTE).map((rules, i) => {
        // The rollouts whose rules this route carries, for the pack's ordering policy (policies/rollout.ts).
        const models = new Set(rules.map((r) => r.matches[0].headers[0].value));
        const mine = rollouts.filter((r) => models.has(r.model));
        return {
            apiVersion: "aigateway.envoyproxy.io/v1beta1",
            kind: "AIGatewayRoute",
            metadata: {
                name: `${GATEWAY_NAME}-models-${i}`,
                namespace,
                ...(mine.length ? { annotations: { [ROLLOUT_ANNOTATION]: JSON.stringify(mine) } } : {}),
            },
            spec: {
                parentRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: GATEWAY_NAME }],
                llmRequestCosts: llmRequestCosts(),
                rules,
            },
        };
    });
}

/** Pods (outside the gateway) allowed to scrape the frontends' `/metrics` on the HTTP port. */
export interface MetricsScraper {
    namespace: string;
    podLabels: Record<string, string>;
}

/**
 * NetworkPolicy for the Dynamo frontends (pods labelled `nvidia.com/dynamo-component-type: frontend` in the
 * inference namespace): the HTTP port only from Envoy proxy pods in the Envoy Gateway namespace, and from the
 * given metrics scrapers (the frontend serves `/metrics` on the same port). Dynamo's own pods in the same
 * namespace keep every other port, because workers open the response-stream TCP connection back to the
 * frontend (Dynamo runtime TCP response plane; inferred from ai-dynamo/dynamo lib/runtime
 * pipeline/network/tcp) — the HTTP port stays excluded for them too.
 */
export function frontendNetworkPolicy(
    namespace = INFERENCE_NAMESPACE,
    scrapers: MetricsScraper[] = [],
    proxyNamespace = ENVOY_GATEWAY_NAMESPACE,
) {
    const p = DYNAMO_FRONTEND_PORT;
    const peer = (ns: string, labels: Record<string, string>) => ({
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ns } },
        podSelector: { matchLabels: { ...labels } },
    });
    return {
        apiVersion: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        metadata: { name: "dynamo-frontend-from-gateway-only", namespace },
        spec: {
            podSelector: { matchLabels: { [DYNAMO_COMPONENT_TYPE_LABEL]: "frontend" } },
            policyTypes: ["Ingress"],
            ingress: [
                {
                    from: [peer(proxyNamespace, ENVOY_PROXY_POD_LABELS), ...scrapers.map((s) => peer(s.namespace, s.podLabels))],
                    ports: [{ protocol: "TCP", port: p }],
                },
                {
                    from: [{ podSelector: { matchExpressions: [{ key: DYNAMO_COMPONENT_TYPE_LABEL, operator: "Exists" }] } }],
                    ports: [
                        { protocol: "TCP", port: 1, endPort: p - 1 },
                        { protocol: "TCP", port: p + 1, endPort: 65535 },
                    ],
                },
            ],
        },
    };
}

/** Helm values for `gateway-crds-helm`: Gateway API (experimental channel, what Envoy Gateway is tested with) + Envoy Gateway CRDs. */
export function gatewayCrdsValues() {
    return { crds: { gatewayAPI: { enabled: true, channel: "experimental" }, envoyGateway: { enabled: true } } };
}

/** Envoy global rate limiting as defence in depth; off unless given. */
export interface EnvoyRateLimit {
    /** `host:port` of the Redis the rate limit service uses. */
    redisUrl: string;
    /** Rate limit service call timeout (EG default 20 ms, which silently means "no limits" under load). */
    timeout: string;
}

/**
 * Helm values for `gateway-helm` with the AI Gateway integration (ai-gateway manifests/envoy-gateway-values.yaml):
 * Backend API on (AIServiceBackend accepts only Backends), the extension manager hooks pointing at the AI
 * Gateway controller. EnvoyPatchPolicy stays off: nothing here needs raw xDS patches, and one could route around
 * ext_authz. If Envoy rate limiting is used it is fail-closed (`rateLimit.failClosed: true`; default false lets
 * every request through when the rate limit service is down).
 */
export function envoyGatewayValues(rateLimit?: EnvoyRateLimit) {
    return {
        config: {
            envoyGateway: {
                gateway: { controllerName: ENVOY_GATEWAY_CONTROLLER_NAME },
                provider: { type: "Kubernetes" },
                extensionApis: { enableBackend: true, enableEnvoyPatchPolicy: false },
                extensionManager: {
                    hooks: {
                        xdsTranslator: {
                            translation: {
                                listener: { includeAll: true },
                                route: { includeAll: true },
                                cluster: { includeAll: true },
                                secret: { includeAll: true },
                            },
                            post: ["Translation", "Cluster", "Route"],
                        },
                    },
                    service: { fqdn: { ...AI_GATEWAY_EXTENSION_SERVER } },
                    failOpen: false,
                },
                ...(rateLimit
                    ? {
                          rateLimit: {
                              backend: { type: "Redis", redis: { url: rateLimit.redisUrl } },
                              failClosed: true,
                              timeout: rateLimit.timeout,
                          },
                      }
                    : {}),
            },
        },
    };
}

/** Helm values for `ai-gateway-helm`: two controller replicas, since Envoy Gateway's translation fails while the extension server is down (`extensionManager.failOpen: false`). */
export function aiGatewayValues() {
    return { controller: { replicaCount: 2 } };
}
