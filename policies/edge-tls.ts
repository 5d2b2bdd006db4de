import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { stackPolicy } from "./lib/report";

/**
 * The tenant edge: tenants send bearer API keys, so a Gateway listener clients can reach from outside the cluster must
 * terminate TLS. An HTTP (or TCP) listener is accepted only when
 * - the Gateway names the load balancer that terminates TLS in front of it (annotation
 *   {@link TLS_TERMINATED_BY_ANNOTATION}, set from `platform:gateway.listener.tls.source: terminated-in-front`): the
 *   reviewed, visible way out; or
 * - the Gateway is provably not reachable from outside: its GatewayClass is parameterised by an EnvoyProxy of this
 *   stack whose `provider.kubernetes.envoyService.type` is `ClusterIP`. Envoy Gateway's default proxy Service is
 *   `LoadBalancer` (envoyproxy/gateway api/v1alpha1/envoyproxy_types.go `KubernetesServiceSpec.Type`, default
 *   LoadBalancer); an EnvoyProxy or GatewayClass the pack cannot see counts as reachable.
 */

/** Mirrors lib/edge.ts TLS_TERMINATED_BY_ANNOTATION (the pack stands alone; test/edge-tls.test.ts checks they agree). */
export const TLS_TERMINATED_BY_ANNOTATION = "platform.h200.ai/tls-terminated-by";

const GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway";
const GATEWAY_CLASS = "kubernetes:gateway.networking.k8s.io/v1:GatewayClass";
const ENVOY_PROXY = "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy";
/** Listener protocols that carry the client's bytes in clear (Gateway API `ProtocolType`). */
const PLAINTEXT = new Set(["HTTP", "TCP", "UDP"]);

function props(r: PolicyResource): any {
    try {
        return r.props ?? {};
    } catch {
        return {};
    }
}

/** True when the Gateway's class is parameterised by an EnvoyProxy of this stack with a ClusterIP Service. */
function clusterInternal(gw: any, resources: PolicyResource[]): boolean {
    const cls = resources
        .filter((r) => r.type === GATEWAY_CLASS)
        .map(props)
        .find((c) => c.metadata?.name === gw.spec?.gatewayClassName);
    const ref = cls?.spec?.parametersRef;
    if (ref?.kind !== "EnvoyProxy") return false;
    const proxy = resources
        .filter((r) => r.type === ENVOY_PROXY)
        .map(props)
        .find((p) => p.metadata?.name === ref.name && (p.metadata?.namespace ?? "default") === (ref.namespace ?? "default"));
    return proxy?.spec?.provider?.kubernetes?.envoyService?.type === "ClusterIP";
}

/**
 * `edge-tls-listeners` (mandatory): one violation per plain-text listener (HTTP, TCP, UDP) of a Gateway reachable from
 * outside the cluster, as this module's comment says: the Gateway passes only when it names the load balancer that
 * terminates TLS in front ({@link TLS_TERMINATED_BY_ANNOTATION}, a value of at least 3 characters) or is provably
 * ClusterIP-only.
 */
export const edgeTlsListeners: StackValidationPolicy = stackPolicy(
    {
        name: "edge-tls-listeners",
        description:
            "A Gateway listener reachable from outside the cluster terminates TLS (HTTPS/TLS): tenants' API keys never cross a network in clear text.",
        remediationSteps:
            "Set platform:gateway.listener.tls (acme-dns01, private-ca or secret); plain HTTP only with tls.source: terminated-in-front naming the load balancer that terminates TLS in front.",
    },
    (_v, resources) => {
        const out: Array<{ subject: string; finding: { field: string; problem: string; fix: string }; urn?: string }> = [];
        for (const r of resources.filter((x) => x.type === GATEWAY)) {
            const gw = props(r);
            const terminatedBy = gw.metadata?.annotations?.[TLS_TERMINATED_BY_ANNOTATION];
            if (typeof terminatedBy === "string" && terminatedBy.trim().length >= 3) continue;
            if (clusterInternal(gw, resources)) continue;
            (gw.spec?.listeners ?? []).forEach((l: any, i: number) => {
                const protocol = String(l?.protocol ?? "");
                if (!PLAINTEXT.has(protocol)) return;
                out.push({
                    subject: `Gateway/${gw.metadata?.namespace ?? "default"}/${gw.metadata?.name ?? r.name}`,
                    finding: {
                        field: `spec.listeners[${i}]`,
                        problem: `listener ${l?.name ?? i} is ${protocol} on port ${l?.port} and reachable from outside the cluster (the proxy Service is a load balancer), so tenants' bearer keys would cross the network in clear text`,
                        fix: `terminate TLS on it (protocol HTTPS with a certificate), or, if a load balancer in front terminates TLS, name it in the ${TLS_TERMINATED_BY_ANNOTATION} annotation (platform:gateway.listener.tls.source: terminated-in-front)`,
                    },
                    urn: r.urn,
                });
            });
        }
        return out;
    },
);

/** The edge TLS policies of the pack. */
export const edgeTlsPolicies = [edgeTlsListeners];
