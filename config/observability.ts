import { z } from "zod";
import { kubePrometheusStackPrometheus } from "../upstream/activation";

/**
 * `platform:observability` of a spoke: scrape objects, Grafana dashboards and PrometheusRules for the Prometheus
 * stack the cluster runs (components/spoke/Observability.ts). Every field has a default; the defaults fit
 * kube-prometheus-stack installed as release `kube-prometheus-stack` in `monitoring`. The release name and namespace
 * are the one setting both the scrape objects' selector labels and the Planner's Prometheus URL derive from
 * (`prometheusOf`), so the Prometheus that scrapes is the Prometheus the Planner reads.
 */
export const ObservabilityConfigSchema = z
    .object({
        /**
         * The cluster runs prometheus-operator (its CRDs `monitoring.coreos.com/v1` are installed). When false no
         * PodMonitor, ServiceMonitor or PrometheusRule is rendered (they would fail to apply) and only the dashboards
         * are (plain ConfigMaps).
         */
        prometheusOperator: z.boolean().default(true),
        /**
         * Helm release name of the cluster's kube-prometheus-stack. Its Prometheus selects `release: <name>` and is served
         * by the Service `<fullname>-prometheus` on port 9090 (`prometheusOf`).
         */
        prometheusRelease: z
            .string()
            .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
            .max(53)
            .default("kube-prometheus-stack"),
        /** Namespace of kube-prometheus-stack, its PrometheusRules and the dashboard ConfigMaps. */
        namespace: z
            .string()
            .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
            .default("monitoring"),
        /**
         * Labels every PodMonitor / ServiceMonitor / PrometheusRule carries so Prometheus selects it. kube-prometheus-stack
         * defaults `prometheus.prometheusSpec.{rule,podMonitor,serviceMonitor}SelectorNilUsesHelmValues: true`, which
         * selects `release: <helm release name>` (prometheus-community/helm-charts charts/kube-prometheus-stack/values.yaml).
         * Unset: `{ release: <prometheusRelease> }`.
         */
        selectorLabels: z.record(z.string(), z.string()).optional(),
        /**
         * Label the Grafana dashboard sidecar watches ConfigMaps for: kube-prometheus-stack's `grafana.sidecar.dashboards.label`
         * `grafana_dashboard` with `labelValue` `"1"` (same values.yaml).
         */
        dashboardLabel: z
            .object({ key: z.string().min(1), value: z.string() })
            .strict()
            .default({ key: "grafana_dashboard", value: "1" }),
        /** Pods allowed to scrape the metering service's `/metrics` (its NetworkPolicy otherwise admits only the collector). */
        scrapers: z
            .array(
                z
                    .object({
                        namespace: z.string().min(1),
                        podLabels: z.record(z.string(), z.string()),
                    })
                    .strict(),
            )
            .default([{ namespace: "monitoring", podLabels: { "app.kubernetes.io/name": "prometheus" } }]),
        /** Alert thresholds. Defaults are the figures the platform exists to reach. */
        alerts: z
            .object({
                /** TTFT p95 above this for 10 minutes pages, seconds. */
                ttftP95Seconds: z.number().positive().default(3.5),
                /** ITL p99 above this for 10 minutes pages, seconds. */
                itlP99Seconds: z.number().positive().default(0.06),
                /** KV cache utilisation above this fraction for 15 minutes warns (the planner should have scaled by then). */
                kvUsageFraction: z.number().gt(0).lte(1).default(0.95),
                /**
                 * Lowest acceptable average KV transfer rate of a worker, GB/s (gigabytes). Default 5 GB/s = 40 Gb/s, a tenth of
                 * one 400 Gb/s NDR rail: per-rank PCIe-affine NICs measured 15-25 GB/s, a wrong NIC ~0.76 GB/s and TCP
                 * fallback lower still. Below it KV is moving over TCP or
                 * over the wrong NIC.
                 */
                kvTransferMinGBps: z.number().positive().default(5),
                /** Served policy bundle not confirmed current by the hub for this long warns, seconds. */
                bundleMaxAgeSeconds: z.number().int().positive().default(900),
                /** Usage not yet acknowledged by the hub above this warns, bytes. */
                spoolUnshippedBytes: z
                    .number()
                    .int()
                    .positive()
                    .default(256 * 1024 ** 2),
            })
            .strict()
            .prefault({}),
    })
    .strict();

/** `platform:observability` of a spoke as parsed ({@link ObservabilityConfigSchema}, defaults filled in). */
export type ObservabilityConfig = z.infer<typeof ObservabilityConfigSchema>;

/** The Prometheus one observability setting names. */
export interface PrometheusTarget {
    /** Labels every PodMonitor / ServiceMonitor / PrometheusRule carries (`release: <release>` unless overridden). */
    selectorLabels: Record<string, string>;
    /**
     * In-cluster URL of that Prometheus: Service `<fullname>-prometheus`, port 9090 (upstream/activation.ts
     * `kubePrometheusStackPrometheus`, read in kube-prometheus-stack's _helpers.tpl and prometheus/service.yaml).
     */
    url: string;
}

/** The Prometheus of `platform:observability`: what scrape objects carry and what the Planner queries. */
export function prometheusOf(c: Pick<ObservabilityConfig, "prometheusRelease" | "namespace" | "selectorLabels">): PrometheusTarget {
    return {
        selectorLabels: c.selectorLabels ?? { release: c.prometheusRelease },
        url: (({ host, port }) => `http://${host}:${port}`)(kubePrometheusStackPrometheus(c.prometheusRelease, c.namespace)),
    };
}
