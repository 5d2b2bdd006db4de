import { AI_GATEWAY_METADATA_NAMESPACE, IDENTITY_HEADERS, TOKEN_METADATA_KEYS } from "./identity";

/**
 * The per-request access-log record the gateway emits and the metering service consumes: field name ->
 * Envoy command operator. One record per request, written when the stream ends (Envoy access log),
 * carrying the request id (idempotency key), the trusted identity headers set by ext_authz, and the
 * AI Gateway's token metadata (written only for complete responses, reference/gateway.md §8), plus the
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
};
