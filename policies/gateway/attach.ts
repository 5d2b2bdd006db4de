import type { PolicyResource } from "@pulumi/policy";
import { GROUPS, keyOf, ofKind } from "../lib/gateway";
import { type Attachment, type effectiveFor, gatewayAttachments, listenerLabel, type ModelListener } from "../lib/attachment";

/* Shared helpers of the gateway policies: which objects are SecurityPolicies, route kinds, policy attachments per listener. */

export const isSecurityPolicy = (type: string) => type.startsWith(`kubernetes:${GROUPS.eg}/`) && type.endsWith(":SecurityPolicy");
export const ROUTE_KINDS = ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"];

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
