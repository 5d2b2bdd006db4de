import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { PolicyContract } from "../../config/contract";
import type { GatewayConfig } from "../../config/gateway";
import { versions } from "../../config/versions";
import {
    AI_GATEWAY_NAMESPACE,
    aiGatewayRoutes,
    aiGatewayValues,
    aiServiceBackend,
    backend,
    clientTrafficPolicy,
    ENVOY_GATEWAY_NAMESPACE,
    envoyGatewayValues,
    envoyProxy,
    frontendNetworkPolicy,
    gateway,
    GATEWAY_NAMESPACE,
    gatewayClass,
    gatewayCrdsValues,
    type RoutedEndpoint,
    securityPolicy,
} from "../../lib/gateway";
import { INFERENCE_NAMESPACE, type RolloutAnnotationEntry } from "../../lib/labels";
import { meteringAccessLogSetting } from "../../services/shared/accesslog";
import { listenerTls, nlbEnvoyService } from "../../lib/edge";
import { AuthService } from "./AuthService";
import { EdgeTls } from "./EdgeTls";
import { CounterStore } from "./CounterStore";
import type { FailoverContract } from "../../config/failover";
import {
    fallbackTrafficPolicy,
    GATEWAY_HEALTH_PATH,
    listenerHostnameFor,
    peerObjects,
    routesWithPeers,
    withPeerFallback,
} from "../../lib/failover";

/** Inputs of {@link AgentRouter}. */
export interface AgentRouterArgs {
    /** This spoke's name. */
    spoke: string;
    /** Endpoints placed on this spoke (contract `endpoints[]`): one Backend + AIServiceBackend each, one route rule per model. */
    endpoints: RoutedEndpoint[];
    /** Rollouts of this spoke's endpoints (lib/rollout.ts `rolloutAnnotation`), annotated on their routes. */
    rollouts?: RolloutAnnotationEntry[];
    /** `platform:gateway` (config/gateway.ts), defaults applied. */
    gateway: GatewayConfig;
    /** The contract's policy block (where the auth service pulls bundles from). */
    policy: pulumi.Input<PolicyContract>;
    /**
     * On-prem (access key): the pods assume the spoke role with the source key the operator installed as the
     * Kubernetes Secret lib/spoke-services.ts `SOURCE_KEY_SECRET` (`npm run mint-key -- install-source-key`); this
     * program only names it and never holds the key. `slot` (the contract's active key slot, not secret) annotates the
     * pod template, so moving `activeKey` rolls the pods onto the re-installed key. Absent on EKS (EKS Pod Identity).
     */
    sourceKey?: { slot: string };
    /** Namespace of the Dynamo frontends (default `inference`). */
    frontendNamespace?: string;
    /**
     * What provisions the proxy Service's load balancer (EKS: the AWS Load Balancer Controller release): the EnvoyProxy
     * and Gateway depend on it, so it is deleted only after them (and the NLB their Service holds).
     */
    loadBalancerProvisioner?: pulumi.Resource[];
    /** EnvoyProxy access log settings; default: the metering sink (services/shared/accesslog.ts). */
    accessLog?: unknown[];
    /** Auth service image override (default: config/versions.ts). */
    authImage?: string;
    /** The contract's failover block (config/failover.ts): peers to fall back to, the global hostname; absent: none. */
    failover?: FailoverContract;
}

/** Extra seconds a concurrency lease outlives the longest request, so a finishing stream keeps its slot. */
export const LEASE_GRACE_SECONDS = 60;

/**
 * The spoke's Agent Router: Envoy Gateway + AI Gateway, installed as one pinned set in the
 * documented order, each step `dependsOn` the previous:
 *   gateway-crds-helm -> counters store (Valkey) -> gateway-helm (AI Gateway extension manager, Backend API)
 *   -> ai-gateway-crds-helm -> ai-gateway-helm (its webhook must exist before Envoy pods start)
 *   -> auth service -> GatewayClass / EnvoyProxy / Gateway / ClientTrafficPolicy / SecurityPolicy
 *   -> Backends / AIServiceBackends / AIGatewayRoutes (routes last: no request path opens before auth and
 *      early header stripping are in place).
 * Every gateway object is a direct Pulumi resource (not inside a chart), so the policy pack sees it.
 * Plus a NetworkPolicy: Dynamo frontends accept HTTP only from Envoy proxy pods (and the configured metrics scraper).
 *
 * @throws Error from the constructor, from its parts: components/spoke/CounterStore.ts (a namespace other than
 *   `COUNTER_STORE_ADDRESS.namespace`), components/spoke/AuthService.ts (a namespace without the cache-salt key),
 *   lib/edge.ts `listenerTls` (no TLS source), components/spoke/EdgeTls.ts, and lib/failover.ts `withPeerFallback` (a
 *   route over the AIGatewayRoute CRD's rule limit with its peer-fallback guards)
 */
export class AgentRouter extends pulumi.ComponentResource {
    public readonly auth: AuthService;
    public readonly counters: CounterStore;
    /** AIGatewayRoute names (rules split at 15 per route). */
    public readonly routeNames: string[];

    constructor(name: string, args: AgentRouterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:AgentRouter", name, {}, opts);
        const g = args.gateway;
        const ns = GATEWAY_NAMESPACE;
        const child = (dependsOn: pulumi.Input<pulumi.Resource>[] = []): pulumi.CustomResourceOptions => ({ parent: this, dependsOn });
        const cr = (n: string, obj: Record<string, unknown>, dependsOn: pulumi.Input<pulumi.Resource>[]) =>
            new k8s.apiextensions.CustomResource(`${name}-${n}`, obj as k8s.apiextensions.CustomResourceArgs, child(dependsOn));

        const nsObj = (n: string, ref: string) =>
            new k8s.core.v1.Namespace(
                `${name}-ns-${n}`,
                {
                    metadata: { name: ref, labels: { "app.kubernetes.io/part-of": "agent-router" } },
                },
                child(),
            );
        const egNs = nsObj("envoy-gateway", ENVOY_GATEWAY_NAMESPACE);
        const aigwNs = nsObj("ai-gateway", AI_GATEWAY_NAMESPACE);
        const gwNs = nsObj("gateway", ns);

        // 1. Gateway API + Envoy Gateway CRDs.
        const crds = new k8s.helm.v3.Release(
            `${name}-gateway-crds`,
            {
                name: "eg-crds",
                chart: versions.gatewayCrds.chart,
                version: versions.gatewayCrds.version,
                namespace: ENVOY_GATEWAY_NAMESPACE,
                values: gatewayCrdsValues(),
            },
            child([egNs]),
        );
        // 2. The counters store (the auth service's limits; Envoy's rate limit service would use it too).
        this.counters = new CounterStore(`${name}-counters`, { namespace: ns }, { parent: this, dependsOn: [crds, gwNs] });
        // 3. Envoy Gateway with the AI Gateway extension manager. Its CRDs come from step 1 (skipCrds).
        const eg = new k8s.helm.v3.Release(
            `${name}-envoy-gateway`,
            {
                name: "eg",
                chart: versions.envoyGateway.chart,
                version: versions.envoyGateway.version,
                namespace: ENVOY_GATEWAY_NAMESPACE,
                skipCrds: true,
                values: envoyGatewayValues(),
            },
            child([crds, this.counters]),
        );
        // 4-5. AI Gateway CRDs, then the controller (extension server + sidecar webhook).
        const aigwCrds = new k8s.helm.v3.Release(
            `${name}-ai-gateway-crds`,
            {
                name: "aieg-crd",
                chart: versions.aiGatewayCrds.chart,
                version: versions.aiGatewayCrds.version,
                namespace: AI_GATEWAY_NAMESPACE,
            },
            child([eg, aigwNs]),
        );
        const aigw = new k8s.helm.v3.Release(
            `${name}-ai-gateway`,
            {
                name: "aieg",
                chart: versions.aiGateway.chart,
                version: versions.aiGateway.version,
                namespace: AI_GATEWAY_NAMESPACE,
                skipCrds: true,
                values: aiGatewayValues(),
            },
            child([aigwCrds]),
        );

        // The auth service the SecurityPolicy points at.
        this.auth = new AuthService(
            `${name}-auth`,
            {
                spoke: args.spoke,
                namespace: ns,
                policy: args.policy,
                sourceKey: args.sourceKey,
                redisUrlSecret: this.counters.urlSecret,
                replicas: g.authReplicas,
                maxBodyBytes: g.maxRequestBytes,
                leaseTtlSeconds: g.requestTimeoutSeconds + LEASE_GRACE_SECONDS,
                image: args.authImage,
            },
            { parent: this, dependsOn: [this.counters, gwNs] },
        );

        // 6. Gateway objects. The edge is HTTPS (certificate from cert-manager or an existing Secret) unless the spoke
        // file names the load balancer that terminates TLS in front; on EKS the proxy Service is an NLB (lib/edge.ts).
        const tls = listenerTls(g.listener.tls, g.listener.tlsSecretName);
        const edge =
            g.listener.tls?.source === "acme-dns01" || g.listener.tls?.source === "private-ca"
                ? new EdgeTls(
                      `${name}-edge-tls`,
                      {
                          tls: g.listener.tls,
                          hostname: g.listener.hostname!,
                          extraDnsNames: args.failover?.globalHostname ? [args.failover.globalHostname] : [],
                          globalDns01:
                              g.listener.tls.source === "acme-dns01" && args.failover?.globalHostname && args.failover.globalHostedZoneId
                                  ? { hostname: args.failover.globalHostname, hostedZoneId: args.failover.globalHostedZoneId }
                                  : undefined,
                          namespace: ns,
                          dependsOn: [gwNs],
                      },
                      { parent: this },
                  )
                : undefined;
        const proxy = cr(
            "envoy-proxy",
            envoyProxy({
                namespace: ns,
                replicas: g.envoyReplicas,
                accessLog: args.accessLog ?? [meteringAccessLogSetting()],
                envoyService: g.listener.exposure ? nlbEnvoyService(g.listener.exposure) : undefined,
            }),
            [aigw, gwNs, ...(args.loadBalancerProvisioner ?? [])],
        );
        const cls = cr("gateway-class", gatewayClass(ns), [proxy]);
        // Behind a global name the listener takes any Host (its own name and the global one; the certificate names both).
        const gw = cr("gateway", gateway({ namespace: ns, hostname: listenerHostnameFor(g.listener.hostname, args.failover), tls }), [
            cls,
            ...(edge ? [edge.certificate] : []),
            ...(args.loadBalancerProvisioner ?? []),
        ]);
        const ctp = cr(
            "client-traffic",
            clientTrafficPolicy({
                namespace: ns,
                bufferLimitBytes: g.bufferLimitBytes,
                healthCheckPath: args.failover ? GATEWAY_HEALTH_PATH : undefined,
            }),
            [gw],
        );
        const sp = cr(
            "security",
            securityPolicy({
                namespace: ns,
                auth: this.auth.backend,
                maxRequestBytes: g.maxRequestBytes,
                timeoutSeconds: g.authTimeoutSeconds,
            }),
            [gw, this.auth.service, this.auth.deployment],
        );

        // Per endpoint: Backend (Dynamo frontend FQDN) -> AIServiceBackend; then the routes.
        const backends = args.endpoints.flatMap((e) => {
            const b = cr(`backend-${e.name}`, backend(e, ns), [aigw, gwNs]);
            return [b, cr(`ai-backend-${e.name}`, aiServiceBackend(e, ns), [b])];
        });
        // Peers (lib/failover.ts): declaration, CA, Backend with TLS and AIServiceBackend per peer; their backendRefs follow
        // the local ones at priority 1+, and a retry per route walks to them.
        const peers = peerObjects(args.failover, ns).map((o) =>
            "data" in o
                ? new k8s.core.v1.ConfigMap(`${name}-${o.metadata.name}`, { metadata: o.metadata, data: o.data }, child([gwNs]))
                : cr(`${o.kind === "Backend" ? "backend" : "ai-backend"}-${o.metadata.name}`, o, [aigw, gwNs]),
        );
        const routes = withPeerFallback(
            aiGatewayRoutes(
                args.endpoints,
                ns,
                { requestSeconds: g.requestTimeoutSeconds, streamIdleSeconds: g.streamIdleTimeoutSeconds },
                args.rollouts,
            ),
            args.failover,
            args.spoke,
        );
        for (const r of routes) {
            const route = cr(`route-${r.metadata.name}`, r, [gw, ctp, sp, ...backends, ...peers]);
            const withPeers = routesWithPeers(routes).find((x) => x.name === r.metadata.name);
            if (withPeers)
                cr(`fallback-${r.metadata.name}`, fallbackTrafficPolicy(r.metadata.name, ns, withPeers.peers, withPeers.modelNotFound), [
                    route,
                ]);
        }
        this.routeNames = routes.map((r) => r.metadata.name);

        const isolation = frontendNetworkPolicy(args.frontendNamespace ?? INFERENCE_NAMESPACE, g.frontendScrapers);
        new k8s.networking.v1.NetworkPolicy(`${name}-frontend-isolation`, { metadata: isolation.metadata, spec: isolation.spec }, child());
        this.registerOutputs({ routeNames: this.routeNames });
    }
}
