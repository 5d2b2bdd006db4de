import { AI_GATEWAY_METADATA_NAMESPACE, IDENTITY_HEADERS, TOKEN_METADATA_KEYS } from "./identity";

/**
 * The per-request access-log record the gateway emits and the metering service consumes: field name ->
 * Envoy command operator. One record per request, written when the stream ends (Envoy access log),
 * carrying the request id (idempotency key), the trusted identity headers set by ext_authz, and the
 * AI Gateway's token metadata (written only for complete responses), plus the
 * response flags so "aborted" (e.g. `DC`, downstream connection termination) is distinguishable from
 * "zero tokens".
 */
export const ACCESS_LOG_FIELDS: Record<string, string> = {
    requestId: "%REQ(X-REQUEST-ID)%",
    startTime: "%START_TIME%",
    durationMs: "%DURATION%",
    method: "%REQ(:METHOD)%",
    path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
    status: "%RESPONSE_CODE%",
    responseFlags: "%RESPONSE_FLAGS%",
    responseCodeDetails: "%RESPONSE_CODE_DETAILS%",
    bytesReceived: "%BYTES_RECEIVED%",
    bytesSent: "%BYTES_SENT%",
    tenant: `%REQ(${IDENTITY_HEADERS.tenant.toUpperCase()})%`,
    team: `%REQ(${IDENTITY_HEADERS.team.toUpperCase()})%`,
    keyId: `%REQ(${IDENTITY_HEADERS.keyId.toUpperCase()})%`,
    model: `%REQ(${IDENTITY_HEADERS.model.toUpperCase()})%`,
    lease: `%REQ(${IDENTITY_HEADERS.lease.toUpperCase()})%`,
    routeName: `%DYNAMIC_METADATA(${AI_GATEWAY_METADATA_NAMESPACE}:route_name)%`,
    backendName: `%DYNAMIC_METADATA(${AI_GATEWAY_METADATA_NAMESPACE}:backend_name)%`,
    inputTokens: `%DYNAMIC_METADATA(${AI_GATEWAY_METADATA_NAMESPACE}:${TOKEN_METADATA_KEYS.input})%`,
    cachedInputTokens: `%DYNAMIC_METADATA(${AI_GATEWAY_METADATA_NAMESPACE}:${TOKEN_METADATA_KEYS.cachedInput})%`,
    outputTokens: `%DYNAMIC_METADATA(${AI_GATEWAY_METADATA_NAMESPACE}:${TOKEN_METADATA_KEYS.output})%`,
    totalTokens: `%DYNAMIC_METADATA(${AI_GATEWAY_METADATA_NAMESPACE}:${TOKEN_METADATA_KEYS.total})%`,
    /** `text/event-stream` marks a streamed response (the access log has no other stream indicator). */
    contentType: "%RESP(CONTENT-TYPE)%",
};

/**
 * Where the gateway sends the access log (services/metering/README.md, "Sink"): Envoy Gateway's
 * `OpenTelemetry` sink (OTLP/gRPC) to the spoke's metering OpenTelemetry Collector, which keeps a persistent,
 * fsynced sending queue and retries `POST /v1/logs` on the metering service until it answers 2xx (only after
 * the spool fsync). With format `JSON`, Envoy Gateway puts each ACCESS_LOG_FIELDS entry into the log record's
 * attributes (envoyproxy/gateway internal/gatewayapi/listener.go, `al.Attributes = format.JSON`).
 * Deployed by components/spoke/Metering.ts, which also grants the cross-namespace reference.
 */
export const METERING_ACCESS_LOG_COLLECTOR = {
    namespace: "platform-system",
    /** Service of the collector (Helm `fullnameOverride`). */
    service: "metering-collector",
    /** OTLP/gRPC receiver port. */
    port: 4317,
} as const;

/**
 * One `EnvoyProxy.spec.telemetry.accessLog.settings[]` entry that ships ACCESS_LOG_FIELDS to metering. The
 * gateway component puts this into its EnvoyProxy as is. `type: Route`: one record per routed request
 * (listener-level records only exist for unrouted requests, which are never billable).
 */
export function meteringAccessLogSetting() {
    const c = METERING_ACCESS_LOG_COLLECTOR;
    return {
        type: "Route" as const,
        format: { type: "JSON" as const, json: { ...ACCESS_LOG_FIELDS } },
        sinks: [
            {
                type: "OpenTelemetry" as const,
                openTelemetry: {
                    backendRefs: [{ group: "", kind: "Service", name: c.service, namespace: c.namespace, port: c.port }],
                    resources: { "service.name": "llm-gateway-access-log" },
                },
            },
        ],
    };
}
