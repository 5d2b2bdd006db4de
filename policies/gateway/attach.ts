import type { PolicyResource } from "@pulumi/policy";
import { GROUPS, keyOf, ofKind } from "../lib/gateway";
import { type Attachment, type effectiveFor, gatewayAttachments, listenerLabel, type ModelListener } from "../lib/attachment";

/* Shared helpers of the gateway policies: which objects are SecurityPolicies, route kinds, policy attachments per listener. */

/**
 * Pure: whether a Pulumi type token is an Envoy Gateway SecurityPolicy of any version
 * (`kubernetes:gateway.envoyproxy.io/<version>:SecurityPolicy`), so a version bump cannot slip a policy past the pack.
 */
export const isSecurityPolicy = (type: string) => type.startsWith(`kubernetes:${GROUPS.eg}/`) && type.endsWith(":SecurityPolicy");
/**
 * Gateway API route kinds a SecurityPolicy may target instead of a Gateway (policies/gateway/auth.ts refuses a route-level
 * policy that would replace the Gateway's ext_authz): HTTPRoute, GRPCRoute, TCPRoute, TLSRoute, UDPRoute.
 */
export const ROUTE_KINDS = ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"];

/**
 * Pure: a SecurityPolicy resource's `spec.extAuth` (Envoy Gateway `ExtAuth`: `grpc`/`http` backend, `failOpen`, ...), or
 * undefined when it has none or its spec is unknown in preview. Never throws.
 */
export function extAuthOf(sp: PolicyResource): any {
    return sp.props.spec?.extAuth;
}

/** Every SecurityPolicy/ClientTrafficPolicy attachment to Gateways and listeners (targetRefs + targetSelectors). */
export function attachmentsOf(
    resources: PolicyResource[],
    kind: "SecurityPolicy" | "ClientTrafficPolicy" | "BackendTrafficPolicy",
): Attachment[] {
    return ofKind(resources, GROUPS.eg, kind).flatMap((r) => gatewayAttachments(r, kind, resources));
}

/** Findings common to both per-listener rules: Gateway not in the stack, conflicts, overrides. */
export function attachmentFindings(
    kind: string,
    m: ModelListener,
    e: ReturnType<typeof effectiveFor>,
    report: (msg: string, urn?: string) => void,
): void {
    const label = listenerLabel(m);
    for (const c of e.conflicted) {
        report(
            `${label}: ${kind} ${keyOf(c.policy)} (${c.via}) and ${keyOf(e.effective!.policy)} both attach at ${e.level} level; Envoy Gateway applies only the oldest and marks the rest Conflicted${e.orderUndecided ? " (on a new stack which one is oldest depends on creation order)" : ""}. Keep exactly one.`,
            c.policy.urn,
        );
    }
}
