import type { Fact } from "./types";

/**
 * Failover across spokes (lib/failover.ts, components/hub/GlobalDns.ts): every field rendered for a peer fallback or
 * the global hostname, where it was read at the pinned version, and what it needs to take effect. test/failover.test.ts
 * checks every spec field the spoke renders for a peer appears here.
 */
export interface RenderedFieldFact extends Fact {
    /** Object kind (`Backend`, `AIGatewayRoute`, ...; `aws:route53/HealthCheck` for a Pulumi AWS resource). */
    readonly kind: string;
    /** Dotted spec path (`[]` for array items), or the Pulumi input name. */
    readonly field: string;
    /** What it needs to take effect (what else must be true, or it is inert). */
    readonly takesEffect: string;
}

/**
 * Where the Envoy Gateway and AI Gateway facts below were actually read, against the pins (config/versions.ts:
 * gateway-helm / gateway-crds-helm v1.9.2, ai-gateway-helm / ai-gateway-crds-helm v1.2.0). Neither pinned tag is
 * readable here: the envoyproxy/gateway snapshot's release/v1.9 ends at v1.9.0, and AI Gateway v1.2.0 was released as
 * theagentrouter/agent-router, of which no snapshot exists (its v1.2.0 release notes list only added optional
 * fields). So every such fact cites the tag it was read at; each was re-checked there
 * (field present in the CRD, function and comment in the Go source). Re-read at the pins when they are readable.
 */
export const failoverSourcesReadAt: ReadonlyArray<
    Fact & { readonly repo: string; readonly tag: string; readonly commit: string; readonly pinned: string }
> = [
    {
        repo: "envoyproxy/gateway",
        tag: "v1.9.0",
        commit: "39763b1c07ec30a5526fe70434a2cfe4181de642",
        pinned: "v1.9.2",
        source: "envoyproxy/gateway@v1.9.0:charts/gateway-helm/charts/crds/crds/generated",
        note: "head of release/v1.9 in the snapshot read; v1.9.1 and v1.9.2 not in it",
    },
    {
        repo: "envoyproxy/ai-gateway",
        tag: "v1.1.0",
        commit: "c217da8a539570ba3f6014a60c2687c29a945f1f",
        pinned: "v1.2.0",
        source: "envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-crds-helm/templates",
        note: "tip of main in the snapshot read; v1.2.0 is theagentrouter/agent-router, not readable here",
    },
];

const EG_BACKEND: Fact["source"] =
    "envoyproxy/gateway@v1.9.0:charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backends.yaml";
const EG_BTP: Fact["source"] =
    "envoyproxy/gateway@v1.9.0:charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backendtrafficpolicies.yaml";
const EG_CTP: Fact["source"] =
    "envoyproxy/gateway@v1.9.0:charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_clienttrafficpolicies.yaml";
const AIGW_ROUTE: Fact["source"] =
    "envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_aigatewayroutes.yaml";
const AIGW_FALLBACK: Fact["source"] = "envoyproxy/ai-gateway@v1.1.0:site/docs/capabilities/traffic/provider-fallback.md";
const TF_HC: Fact["source"] = "hashicorp/terraform-provider-aws@v6.0.0:website/docs/r/route53_health_check.html.markdown";
const TF_REC: Fact["source"] = "hashicorp/terraform-provider-aws@v6.0.0:website/docs/r/route53_record.html.markdown";

/** Every rendered failover field. */
export const failoverFields: ReadonlyArray<RenderedFieldFact> = [
    {
        kind: "Backend",
        field: "endpoints[].fqdn.hostname",
        source: EG_BACKEND,
        takesEffect: "resolved by Envoy's DNS; the peer's listener hostname must resolve from the spoke to its edge",
    },
    { kind: "Backend", field: "endpoints[].fqdn.port", source: EG_BACKEND, takesEffect: "443: the peer edge's HTTPS port" },
    {
        kind: "Backend",
        field: "tls.sni",
        source: EG_BACKEND,
        takesEffect:
            "the SNI of the upstream TLS connection (no BackendTLSPolicy is attached, which would take precedence); the peer's edge must serve a certificate for it",
    },
    {
        kind: "Backend",
        field: "tls.caCertificateRefs[].group",
        source: EG_BACKEND,
        takesEffect: 'core group (""): a ConfigMap with key ca.crt in the Backend\'s namespace (one ref supported)',
    },
    { kind: "Backend", field: "tls.caCertificateRefs[].kind", source: EG_BACKEND, takesEffect: "ConfigMap" },
    {
        kind: "Backend",
        field: "tls.caCertificateRefs[].name",
        source: EG_BACKEND,
        takesEffect: "the ConfigMap peer-<spoke>-ca, key ca.crt; mutually exclusive with wellKnownCACertificates",
    },
    {
        kind: "Backend",
        field: "tls.wellKnownCACertificates",
        source: EG_BACKEND,
        takesEffect: "System: Envoy's system CA bundle; only for a peer whose edge certificate is from a public CA (ACME)",
    },
    {
        kind: "AIServiceBackend",
        field: "backendRef.name",
        source: "envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_aiservicebackends.yaml",
        takesEffect: "an Envoy Gateway Backend (extensionApis.enableBackend: true, lib/gateway.ts envoyGatewayValues)",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].backendRefs[].priority",
        source: AIGW_ROUTE,
        takesEffect:
            "sets the Envoy endpoint priority (overrides Backend fallback, so the Backend carries none); traffic reaches priority 1 only through a retry with numAttemptsPerPriority (BackendTrafficPolicy below)",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].backendRefs[].headerMutation.remove[]",
        source: AIGW_ROUTE,
        takesEffect:
            "applied by the AI Gateway per backend before the request leaves for it (route-level mutation would take precedence; none is rendered)",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].backendRefs[].headerMutation.set[].name",
        source: AIGW_ROUTE,
        takesEffect: "as remove; x-llm-peer-hop only",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].backendRefs[].headerMutation.set[].value",
        source: AIGW_ROUTE,
        takesEffect: "literal: the forwarding spoke's name",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].matches[].headers[].type",
        source: AIGW_ROUTE,
        takesEffect:
            "RegularExpression (implementation-specific: Envoy Gateway renders an Envoy safe_regex header matcher, which fails on a missing header) only on the hop guard's x-llm-peer-hop match; the model match stays Exact",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].matches[].headers[].name",
        source: AIGW_ROUTE,
        takesEffect:
            "the model header the AI Gateway sets from the body (services/shared/identity.ts AI_GATEWAY_MODEL_HEADER) and, on the hop guard, x-llm-peer-hop; both in one match (ANDed)",
    },
    {
        kind: "AIGatewayRoute",
        field: "rules[].matches[].headers[].value",
        source: AIGW_ROUTE,
        takesEffect: "the model name (Exact); .* on the hop guard (any value, the header must be present)",
    },
    {
        kind: "BackendTrafficPolicy",
        field: "targetRefs[].name",
        source: AIGW_FALLBACK,
        takesEffect: "the HTTPRoute the AI Gateway generates with the AIGatewayRoute's name, in its namespace",
    },
    { kind: "BackendTrafficPolicy", field: "targetRefs[].group", source: EG_BTP, takesEffect: "gateway.networking.k8s.io" },
    { kind: "BackendTrafficPolicy", field: "targetRefs[].kind", source: EG_BTP, takesEffect: "HTTPRoute" },
    {
        kind: "BackendTrafficPolicy",
        field: "retry.numRetries",
        source: EG_BTP,
        takesEffect:
            "one per peer priority; a request header x-envoy-max-retries (set by the auth service on a forwarded request) takes precedence",
    },
    {
        kind: "BackendTrafficPolicy",
        field: "retry.numAttemptsPerPriority",
        source: EG_BTP,
        takesEffect:
            "1: each retry goes to the next priority (Envoy previous_priorities); 0 or unset keeps every attempt on the healthy top priority",
    },
    {
        kind: "BackendTrafficPolicy",
        field: "retry.retryOn.triggers[]",
        source: EG_BTP,
        takesEffect: "retriable-status-codes is needed for httpStatusCodes to retry at all (AI Gateway provider-fallback troubleshooting)",
    },
    {
        kind: "BackendTrafficPolicy",
        field: "retry.retryOn.httpStatusCodes[]",
        source: EG_BTP,
        takesEffect:
            "with the retriable-status-codes trigger; 404 only on a route whose every rule is a peer-enabled model rule or its hop guard (dynamoModelNotFound below), where it can only mean the model has no workers here",
    },
    {
        kind: "BackendTrafficPolicy",
        field: "retry.perRetry.backOff.baseInterval",
        source: EG_BTP,
        takesEffect: "jittered exponential back-off",
    },
    { kind: "BackendTrafficPolicy", field: "retry.perRetry.backOff.maxInterval", source: EG_BTP, takesEffect: ">= baseInterval" },
    {
        kind: "ClientTrafficPolicy",
        field: "healthCheck.path",
        source: EG_CTP,
        takesEffect:
            "Envoy's health_check filter, ordered first in the HTTP filter chain, before ext_authz (envoyproxy/gateway@v1.9.0:internal/xds/translator/httpfilters.go newOrderedHTTPFilter): answered without a key",
    },
    {
        kind: "aws:route53/HealthCheck",
        field: "type, fqdn, ipAddress, port, resourcePath, enableSni, requestInterval, failureThreshold",
        source: TF_HC,
        takesEffect:
            "HTTPS with SNI = fqdn; ipAddress probes the site's VIP (else fqdn is resolved); requestInterval 10 or 30; healthy on 2xx/3xx from resourcePath",
    },
    {
        kind: "aws:route53/Record",
        field: "setIdentifier, healthCheckId, latencyRoutingPolicies[].region, failoverRoutingPolicies[].type",
        source: TF_REC,
        takesEffect:
            "one routing policy per record; latency records need an AWS region per spoke; failover needs exactly one PRIMARY and one SECONDARY; a CNAME cannot sit at the zone apex",
    },
];

/**
 * What a Dynamo frontend answers for a model it cannot serve while the frontend itself lives (the gateway and its
 * Route 53 check are healthy): 503 "Model `<m>` is not ready to serve requests yet" when the model is registered but no
 * namespace has a complete worker set (`check_model_serving_ready`, `ModelManagerError::ModelUnavailable`), 503
 * "Service is not ready" before the frontend is ready (`check_ready`), and 404 "Model not found" once no worker
 * registers the model any more (the discovery watcher's `replace_discovery_group`/`remove_group` drop it from the
 * committed models). So a dead model on a live spoke answers 404 or 503, and the peer fallback retries on both
 * (lib/failover.ts FALLBACK_STATUS_CODES). The frontend's own `/health` does not tell: it answers 200 with whatever
 * instances are registered, none included; per model, `GET /v1/models/{model}` answers 200 only when the model is
 * ready (503/404 otherwise), but only behind the gateway's ext_authz.
 */
export const dynamoModelNotServed: ReadonlyArray<Fact> = [
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/http/service/openai.rs#check_model_serving_ready",
        note: "ErrorMessage::model_not_found 404, service_unavailable_with_body(model_not_ready_message) 503, from_model_error; get_model_retrieve applies the readiness gate",
    },
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/discovery/watcher.rs",
        note: "replace_discovery_group / remove_group emit ModelUpdate::Removed once get_committed_model(name) is none",
    },
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/http/service/health.rs#health_handler",
        note: "200 {status: healthy, endpoints, instances} whenever the frontend is ready, with or without instances",
    },
];

/**
 * Why the Route 53 health check probes the gateway and not a model (lib/failover.ts `healthCheckArgs`):
 * - one global hostname serves every model, and Route 53 answers a DNS query, which names no model (the model is in
 *   the request body): a spoke's record is in or out for all its models, so failing it for one dead model would send
 *   every other model's clients away from a spoke that serves them, and a calculated check over per-model checks
 *   could only say "all" or "any";
 * - the gateway answers no per-model path without a key: Envoy Gateway's ClientTrafficPolicy `healthCheck` has only
 *   `path` (Envoy's health_check filter, answered before ext_authz, knowing no route or backend), and the frontend's
 *   per-model readiness (`dynamoModelNotServed`) is reachable only through ext_authz; an unauthenticated route to it
 *   would be the gateway side door the pack refuses.
 * What fails over for a dead model instead: the spoke's gateway, per request, to the peers that serve the model
 * (priority backendRefs, BackendTrafficPolicy retry on FALLBACK_STATUS_CODES, priority spill when the frontend has no
 * hosts). Route 53 takes a spoke out when its gateway is down (site, network, Envoy).
 */
export const route53SeesTheGateway: ReadonlyArray<Fact> = [
    { source: EG_CTP, note: "ClientTrafficPolicy spec.healthCheck: properties path only (required)" },
    {
        source: TF_HC,
        note: "a health check probes one resource_path (HTTPS, HTTPS_STR_MATCH) or combines child checks (CALCULATED: child_healthchecks, child_health_threshold)",
    },
];

/**
 * Envoy's per-request retry override the auth service sets on a forwarded request (services/shared/peer.ts): read by
 * the router when it builds the retry state, after ext_authz added it, and it takes precedence over the route's
 * `num_retries`; Envoy sanitises a client's copy at the edge, and the gateway strips it early too.
 */
export const envoyMaxRetriesOverride: Fact = {
    source: "envoyproxy/envoy@v1.36.0:source/common/router/retry_state_impl.cc",
    note: '"The max retries header takes precedence if set" (RetryStateImpl constructor, x-envoy-max-retries)',
};

/**
 * The AI Gateway's `backend_name` dynamic metadata: `<namespace>/<AIServiceBackend>/route/<route>/rule/<i>/ref/<j>`;
 * metering reads the AIServiceBackend to tell a peer-served request (services/metering/normalise.ts).
 */
export const aiGatewayBackendName: Fact = {
    source: "envoyproxy/ai-gateway@v1.1.0:internal/internalapi/internalapi.go#PerRouteRuleRefBackendName",
};

/**
 * Why the hop guard (lib/failover.ts withPeerFallback: model header + x-llm-peer-hop presence, local backendRefs only)
 * wins over the model's rule with peers for a forwarded request: Gateway API route precedence gives "Largest number of
 * header matches" precedence across all rules of the routes on a listener, before any tie-breaker by route age, name or
 * rule order; Envoy Gateway sorts the xDS routes of a listener by it (path match, path length, then header match count,
 * then query param count, descending) before handing them to Envoy, which takes the first route that matches.
 */
export const hopGuardPrecedence: ReadonlyArray<Fact> = [
    {
        source: "kubernetes-sigs/gateway-api@v1.6.1:apis/v1/httproute_types.go#HTTPRouteRule",
        note: 'Matches: "Across all rules specified on applicable Routes, precedence must be given to the match having: ... Largest number of header matches"',
    },
    {
        source: "envoyproxy/gateway@v1.9.0:internal/gatewayapi/sort.go#XdsIRRoutes.Less",
        note: "3. Sort based on the number of Header matches (sortXdsIRMap sorts each listener's routes in descending order)",
    },
    {
        source: "envoyproxy/envoy@v1.39.1:api/envoy/config/route/v3/route_components.proto#HeaderMatcher",
        note: "treat_missing_header_as_empty defaults to false: a string_match/safe_regex header matcher does not match a request without the header, so the guard catches only forwarded requests",
    },
];

/**
 * Why a forwarded request loops without the hop guard: when the priority-0 backend has no healthy hosts (the
 * `<dgd>-frontend` Service gone), Envoy's priority load sends the FIRST attempt to priority 1 (priority spill), so the
 * auth service's `x-envoy-max-retries: 0` on a forwarded request does not keep it local.
 */
export const envoyPrioritySpill: Fact = {
    source: "envoyproxy/envoy@v1.39.1:source/common/upstream/load_balancer_impl.cc#LoadBalancerBase::recalculatePerPriorityState",
    note: "a priority with 0 healthy hosts gets 0 load; the remainder spills to the next priority (overprovisioning factor 1.4)",
};

/**
 * Why a 404 falls back to the peer (lib/failover.ts MODEL_NOT_FOUND_STATUS): with the frontend up and every worker of the
 * model gone, Dynamo's discovery controller removes the model's group once it has no cohorts left, the OpenAI service then
 * answers 404 `model_not_found` for it (a registered model with no servable worker set is 503 instead,
 * `ModelUnavailable`), and the frontend's /health stays 200 with zero instances, so neither the Service's endpoints nor a
 * health probe take the local backend out. Read at ai-dynamo/dynamo main 2a6da14c, the tree every Dynamo fact here was read at (upstream/kvbm.ts).
 */
export const dynamoModelNotFound: ReadonlyArray<Fact> = [
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/discovery/controller.rs#L382-L388",
        note: "reconcile_group: group.cohorts.is_empty() -> host.remove_group(key) (the model is no longer served)",
    },
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/http/service/openai.rs#L286",
        note: 'ErrorMessage::model_not_found: StatusCode::NOT_FOUND, message "Model not found"',
    },
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/http/service/openai.rs#L306-L313",
        note: "from_model_error: ModelUnavailable -> 503, every other ModelManagerError (the model not found) -> 404",
    },
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/http/service/health.rs#L63-L95",
        note: "health_handler: 200 {status: healthy} once the service is ready, whatever the instance list (empty included)",
    },
];
