/**
 * Gateway policies, one file
 * per concept under gateway/: auth.ts (ext_authz), identity.ts (identity headers), routes.ts (routes to models),
 * install.ts (controllers and charts), metering.ts (access log), shape.ts (the closed shape of the gateway path and
 * the gateway-generated request id), peer.ts (fallback to a peer spoke's gateway), attach.ts (shared helpers).
 * Stack policies read resource outputs; for Kubernetes objects those are the applied object.
 */
import {
    extAuthBackendResolves,
    extAuthFailClosed,
    noRouteSecurityPolicyOverride,
    oneGatewaySecurityPolicy,
    requestBodyLimits,
} from "./gateway/auth";
import { earlyIdentityHeaderStrip, identityHeadersOnlyFromExtAuth } from "./gateway/identity";
import { aiGatewayExtensionConfigured, envoyProxyNoMergeBackends, envoyRateLimitFailClosed, gatewayChartVersions } from "./gateway/install";
import { accessLogUsageFields } from "./gateway/metering";
import { gatewayClosedShape, requestIdGenerated } from "./gateway/shape";
import { peerFallbackVerified } from "./gateway/peer";
import { aiRouteMaxRules, aiRouteNoSecretHeaderMatch, aiRouteStreamTimeouts, aiRouteUniqueModels, noModelSideDoor } from "./gateway/routes";

export * from "./gateway/auth";
export * from "./gateway/identity";
export * from "./gateway/install";
export * from "./gateway/metering";
export * from "./gateway/routes";
export * from "./gateway/shape";
export * from "./gateway/peer";

/** The gateway policies of the pack. */
export const gatewayPolicies = [
    extAuthFailClosed,
    oneGatewaySecurityPolicy,
    noRouteSecurityPolicyOverride,
    earlyIdentityHeaderStrip,
    requestBodyLimits,
    extAuthBackendResolves,
    noModelSideDoor,
    envoyRateLimitFailClosed,
    gatewayChartVersions,
    aiGatewayExtensionConfigured,
    aiRouteMaxRules,
    aiRouteUniqueModels,
    aiRouteStreamTimeouts,
    aiRouteNoSecretHeaderMatch,
    envoyProxyNoMergeBackends,
    accessLogUsageFields,
    identityHeadersOnlyFromExtAuth,
    gatewayClosedShape,
    requestIdGenerated,
    peerFallbackVerified,
];
