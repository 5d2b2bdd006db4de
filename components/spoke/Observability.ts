import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { type ObservabilityConfig, prometheusOf } from "../../config/observability";
import { ENVOY_GATEWAY_NAMESPACE, ENVOY_PROXY_POD_LABELS, GATEWAY_NAMESPACE } from "../../lib/gateway";
import { PLATFORM_NAMESPACE } from "../../lib/labels";
import {
    alertGroups,
    dashboards,
    dynamoScrapeTargets,
    grafanaDashboard,
    type ObservedEndpoint,
    podMonitorSpec,
    scrapeTargets,
} from "../../lib/observability";
import { AUTH_POD_LABELS, METERING_POD_LABELS, METERING_PORT } from "../../lib/spoke-services";

/** Inputs of {@link Observability}. */
export interface ObservabilityArgs {
    /** `platform:spoke.name`. */
    spoke: string;
    /** The endpoints the hub placed on this spoke. */
    endpoints: ObservedEndpoint[];
    /** `platform:observability`. */
    config: ObservabilityConfig;
}

/**
 * What an operator needs to see that the spoke works (issue "see the platform"): Grafana dashboards as ConfigMaps for
 * the Grafana sidecar, and, where the cluster runs prometheus-operator, one PrometheusRule (serving, KV-transfer guard,
 * gateway/auth, metering alerts) and PodMonitors for the auth service, metering, the Envoy proxies and every Dynamo
 * frontend, prefill, decode and aggregated worker (the chart's own carry no labels and are off). Plus a
 * NetworkPolicy letting the configured scrapers reach metering's `/metrics` (its isolation policy admits only the
 * access-log collector). All objects are direct resources, validated like every other rendered object.
 */
export class Observability extends pulumi.ComponentResource {
    /** Names of the dashboard ConfigMaps. */
    readonly dashboards: string[];

    constructor(name: string, args: ObservabilityArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:Observability", name, {}, opts);
        const c = args.config;
        const child = { parent: this };
        const meta = (n: string, namespace: string, extra: Record<string, string> = {}) => ({
            name: n,
            namespace,
            labels: { ...prometheusOf(c).selectorLabels, "app.kubernetes.io/part-of": "inference-platform", ...extra },
        });

        this.dashboards = [];
        for (const d of dashboards(args.spoke, args.endpoints)) {
            const cm = `dashboard-${d.uid}`;
            new k8s.core.v1.ConfigMap(
                `${name}-${d.uid}`,
                {
                    metadata: {
                        name: cm,
                        namespace: c.namespace,
                        labels: { [c.dashboardLabel.key]: c.dashboardLabel.value, "app.kubernetes.io/part-of": "inference-platform" },
                    },
                    data: { [`${d.uid}.json`]: JSON.stringify(grafanaDashboard(d), null, 2) },
                },
                child,
            );
            this.dashboards.push(cm);
        }

        if (c.prometheusOperator) {
            new k8s.apiextensions.CustomResource(
                `${name}-rules`,
                {
                    apiVersion: "monitoring.coreos.com/v1",
                    kind: "PrometheusRule",
                    metadata: meta(`inference-platform-${args.spoke}`, c.namespace),
                    spec: { groups: alertGroups(args.spoke, args.endpoints, c) },
                },
                child,
            );
            const targets = [
                ...scrapeTargets({
                    authNamespace: GATEWAY_NAMESPACE,
                    authLabels: AUTH_POD_LABELS,
                    meteringNamespace: PLATFORM_NAMESPACE,
                    meteringLabels: METERING_POD_LABELS,
                    envoyNamespace: ENVOY_GATEWAY_NAMESPACE,
                    envoyLabels: { ...ENVOY_PROXY_POD_LABELS },
                }),
                ...dynamoScrapeTargets(args.endpoints),
            ];
            for (const t of targets) {
                new k8s.apiextensions.CustomResource(
                    `${name}-${t.name}`,
                    {
                        apiVersion: "monitoring.coreos.com/v1",
                        kind: "PodMonitor",
                        metadata: meta(t.name, c.namespace),
                        spec: podMonitorSpec(t),
                    },
                    child,
                );
            }
        }

        new k8s.networking.v1.NetworkPolicy(
            `${name}-metering-scrape`,
            {
                metadata: {
                    name: "metering-from-scrapers",
                    namespace: PLATFORM_NAMESPACE,
                    labels: { "app.kubernetes.io/part-of": "inference-platform" },
                },
                spec: {
                    podSelector: { matchLabels: METERING_POD_LABELS },
                    policyTypes: ["Ingress"],
                    ingress: [
                        {
                            from: c.scrapers.map((s) => ({
                                namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": s.namespace } },
                                podSelector: { matchLabels: s.podLabels },
                            })),
                            ports: [{ protocol: "TCP", port: METERING_PORT }],
                        },
                    ],
                },
            },
            child,
        );

        this.registerOutputs({ dashboards: this.dashboards });
    }
}
