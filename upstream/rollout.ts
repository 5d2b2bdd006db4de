import type { Fact, Source } from "./types";

/**
 * Facts a rollout (lib/rollout.ts) rests on, each read in the pinned upstream source.
 */

/**
 * The Dynamo namespace of a DynamoGraphDeployment's components is `<Kubernetes namespace>-<DGD name>` (dots in the
 * name replaced by `-`) unless a component sets `globalDynamoNamespace` (the product never does). The deprecated
 * `dynamoNamespace` field is not read for it. The operator sets it as `DYN_NAMESPACE` in every component container
 * and as the pod label `nvidia.com/dynamo-namespace`. Needs: nothing but a distinct DGD name, so two revisions
 * rendered as two DGDs get two Dynamo namespaces.
 */
export const dynamoNamespaceFact: Fact & { readonly podLabel: string; readonly env: string } = {
    podLabel: "nvidia.com/dynamo-namespace",
    env: "DYN_NAMESPACE",
    source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/api/v1beta1/dynamocomponentdeployment_types.go#ComputeDynamoNamespace",
    note: "deploy/operator/internal/dynamo/graph.go GetDynamoNamespace (object namespace and name) and the pod label KubeLabelDynamoNamespace; deploy/operator/internal/dynamo/component_common.go sets DYN_NAMESPACE (consts.go DynamoNamespaceEnvVar)",
};

/**
 * Discovery and prefill/decode pairing are scoped by Dynamo namespace: the frontend watches models in its own
 * namespace (`--namespace`, env `DYN_NAMESPACE`, "Dynamo namespace for model discovery scoping"), and a decode
 * endpoint takes part in the namespace-level P/D rendezvous with the prefill workers of the same namespace only, so
 * prefill of one revision never pairs with decode of another when each revision is its own DGD.
 */
export const dynamoDiscoveryScope: readonly Fact[] = [
    { source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/frontend/frontend_args.py#--namespace" },
    {
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/discovery/watcher.rs",
        note: "WorkerSet keyed by (EndpointId incl. namespace, model type, worker type); only a Decode endpoint joins the namespace-level P/D rendezvous",
    },
];

/**
 * The operator gives every frontend `DYN_NAMESPACE_PREFIX=<k8s namespace>-<DGD name>`, and the frontend discovers the
 * models of every Dynamo namespace that begins with it (a plain prefix match: "'ns' matches 'ns', 'ns-abc123'"); the
 * prefix takes precedence over `--namespace`. Workers register under `<k8s namespace>-<DGD name>-<hash>` during rolling
 * updates, which is what the prefix is for. So a DGD whose name begins with another DGD's name in the same Kubernetes
 * namespace has its workers discovered, and served, by the other's frontend as well. Needs, for two graphs to stay
 * apart: neither name begins with the other (config/rollout.ts `dgdName` puts the revision first; the hub and the
 * pack refuse such pairs).
 */
export const frontendNamespacePrefixFact: Fact & { readonly env: string } = {
    env: "DYN_NAMESPACE_PREFIX",
    source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/frontend/frontend_args.py#--namespace-prefix",
    note: "deploy/operator/internal/dynamo/component_frontend.go sets DYN_NAMESPACE_PREFIX from the DGD's Dynamo namespace; the runtime's NamespaceFilter::Prefix is a starts-with match (the strict variant, set by the operator only for runtime 1.7 and later, still matches hyphen suffixes)",
};

/**
 * AIGatewayRoute `rules[].backendRefs[].weight` (int32, minimum 0, default 1) is copied unchanged into the generated
 * HTTPRoute's `backendRefs[].weight` for AIServiceBackend references, so it has the Gateway API meaning: each backend
 * gets weight / sum(weights) of the rule's requests, and weight 0 sends it none. Needs: every backend of the rule to
 * resolve (an invalid backendRef answers 500 for its share).
 */
export const aiGatewayRouteWeightFact: Fact & { readonly default: number; readonly minimum: number } = {
    default: 1,
    minimum: 0,
    source: "envoyproxy/ai-gateway@v1.1.0:internal/controller/ai_gateway_route.go",
    note: "read at v1.1.0, the newest tag in the source snapshot (the pinned chart is 1.2.0; re-read when it is available). newHTTPRoute: HTTPBackendRef{BackendRef{BackendObjectReference: backend.Spec.BackendRef, Weight: br.Weight}}; api/v1beta1/ai_gateway_route.go Weight *int32 (default 1, minimum 0); the weight semantics are the Gateway API BackendRef's",
};

/** The frontend series a rollout gate reads, with the label values it selects on. */
export const frontendGateSeries: Fact & {
    readonly ttft: string;
    readonly itl: string;
    readonly requests: string;
    readonly statusLabel: string;
    readonly errorStatus: string;
    readonly ready: string;
} = {
    ttft: "dynamo_frontend_time_to_first_token_seconds",
    itl: "dynamo_frontend_inter_token_latency_seconds",
    requests: "dynamo_frontend_requests_total",
    statusLabel: "status",
    errorStatus: "error",
    /** Gauge `model_total_kv_blocks` ("Total KV cache blocks available for a worker serving the model", label model): set once a worker registers. */
    ready: "dynamo_frontend_model_total_kv_blocks",
    source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/runtime/src/metrics/prometheus_names.rs#frontend_service",
    note: "status values success/error (frontend_service::status); names composed in lib/llm/src/http/service/metrics.rs; the `dynamo_namespace` label is the scrape target label lib/observability.ts copies from the pod label nvidia.com/dynamo-namespace",
};

/**
 * What proves that the spoke applied a rollout step: the traffic each revision's frontend answers. A revision's
 * frontend serves only what the gateway routes to its AIServiceBackend (one DGD, one Dynamo namespace, discovery scoped
 * by namespace: `dynamoDiscoveryScope`, `frontendNamespacePrefixFact`), so the target's share of
 * `dynamo_frontend_requests_total` (every `status`) between the two `dynamo_namespace` values is the split the Envoy
 * proxies really apply (`aiGatewayRouteWeightFact`). It is the signal because nothing else the spoke exposes says
 * which placement it runs: the spoke reads the hub's deployment declaration through a stack reference during its own
 * `pulumi up` and ACKs no placement revision (only policy bundles are ACKed), the hub file's `state.since` is when the
 * step was written, not applied, and no scraped series carries the route's weights. Needs: both frontends scraped
 * with the `dynamo_namespace` target label (lib/observability.ts `dynamoScrapeTargets`) and traffic on the model.
 */
export const stepAppliedSignal: Fact & { readonly series: string; readonly label: string } = {
    series: "dynamo_frontend_requests_total",
    label: "dynamo_namespace",
    source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/runtime/src/metrics/prometheus_names.rs#frontend_service",
    note: "frontend_service::REQUESTS_TOTAL incremented once per request by lib/llm/src/http/service/metrics.rs; the split between the revisions is the Gateway API weight semantics of aiGatewayRouteWeightFact",
};

/** Where each fact of this module was read (for upstream-check style listings). */
export const rolloutSources: readonly Source[] = [
    dynamoNamespaceFact.source,
    ...dynamoDiscoveryScope.map((f) => f.source),
    aiGatewayRouteWeightFact.source,
    frontendGateSeries.source,
    stepAppliedSignal.source,
];
