/**
 * One Prometheus: the Planner's PROMETHEUS_ENDPOINT and dynamo-platform's
 * `dynamo-operator.dynamo.metrics.prometheusEndpoint` derive from the same `platform:observability` setting as the
 * scrape objects' `release` label, and upstream-check refuses a stack where they name different Prometheuses.
 * Upstream: prometheus-community/helm-charts@082861babe110452fca71989c1e410bdec966170:charts/kube-prometheus-stack/templates/_helpers.tpl
 * (`kube-prometheus-stack.fullname`) and @00a2982a4a3e666b1ee06460f154ba08a3c61ec5:charts/kube-prometheus-stack/templates/prometheus/service.yaml
 * (Service `<fullname>-prometheus`, port 9090).
 */
import { versions } from "../config/versions";
import { describe, expect, it } from "vitest";
import { ObservabilityConfigSchema, prometheusOf } from "../config/observability";
import { kubePrometheusStackPrometheus } from "../upstream/activation";
import { checkPrometheusAgreement } from "../upstream/check/prometheus";

const rule = (release: string) => ({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: { name: "r", namespace: "monitoring", labels: { release } },
    spec: { groups: [] },
});
const planner = (url: string) => ({
    apiVersion: "nvidia.com/v1beta1",
    kind: "DynamoGraphDeployment",
    metadata: { name: "m", namespace: "inference" },
    spec: {
        components: [
            {
                name: "planner",
                type: "planner",
                podTemplate: { spec: { containers: [{ name: "main", image: "p:1", env: [{ name: "PROMETHEUS_ENDPOINT", value: url }] }] } },
            },
        ],
    },
});
const platform = (url: string) => ({
    name: "dynamo-platform",
    chart: "dynamo-platform",
    version: versions.dynamoPlatform.version,
    values: { "dynamo-operator": { dynamo: { metrics: { prometheusEndpoint: url } } } },
});

describe("kube-prometheus-stack Service of a release (upstream fullname helper)", () => {
    it("release containing the chart name is the fullname; others get -kube-prometheus-stack, truncated to 26", () => {
        expect(kubePrometheusStackPrometheus("kube-prometheus-stack", "monitoring").service).toBe("kube-prometheus-stack-prometheus");
        // The upstream Planner default `prometheus-kube-prometheus-prometheus` is a release named `prometheus`.
        expect(kubePrometheusStackPrometheus("prometheus", "monitoring").service).toBe("prometheus-kube-prometheus-prometheus");
        expect(kubePrometheusStackPrometheus("obs", "o11y").host).toBe("obs-kube-prometheus-stack-prometheus.o11y.svc.cluster.local");
    });
    it("platform:observability defaults: labels and URL from the one release name", () => {
        const d = prometheusOf(ObservabilityConfigSchema.parse({}));
        expect(d).toEqual({
            selectorLabels: { release: "kube-prometheus-stack" },
            url: "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090",
        });
        const o = prometheusOf(ObservabilityConfigSchema.parse({ prometheusRelease: "prometheus", namespace: "obs" }));
        expect(o).toEqual({
            selectorLabels: { release: "prometheus" },
            url: "http://prometheus-kube-prometheus-prometheus.obs.svc.cluster.local:9090",
        });
    });
});

describe("upstream-check: the Planner's Prometheus is the one that selects the scrape objects", () => {
    it("agreeing endpoints pass", () => {
        const url = "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090";
        expect(
            checkPrometheusAgreement({ stack: "s", objects: [rule("kube-prometheus-stack"), planner(url)], releases: [platform(url)] }),
        ).toEqual([]);
    });
    it("the upstream default against release kube-prometheus-stack is a finding on both the Planner and the chart", () => {
        const url = "http://prometheus-kube-prometheus-prometheus.monitoring.svc.cluster.local:9090";
        const f = checkPrometheusAgreement({
            stack: "s",
            objects: [rule("kube-prometheus-stack"), planner(url)],
            releases: [platform(url)],
        });
        expect(f.map((x) => x.key).sort()).toEqual(["dynamo-operator.dynamo.metrics.prometheusEndpoint", "env.PROMETHEUS_ENDPOINT"]);
        expect(f[0].message).toMatch(
            /release=kube-prometheus-stack in monitoring: http:\/\/kube-prometheus-stack-prometheus\.monitoring\.svc\.cluster\.local:9090.*_helpers\.tpl/,
        );
    });
    it("a wrong port is a finding", () => {
        const f = checkPrometheusAgreement({
            stack: "s",
            objects: [rule("kube-prometheus-stack"), planner("http://kube-prometheus-stack-prometheus.monitoring:9091")],
            releases: [],
        });
        expect(f).toHaveLength(1);
    });
});

describe("GPU Operator DCGM exporter is scraped by the selected Prometheus", () => {
    const gpuOp = (dcgmExporter: Record<string, unknown>) => ({
        name: "gpu-operator",
        chart: "gpu-operator",
        version: versions.gpuOperator.version,
        values: { dcgmExporter },
    });
    it("the chart default (serviceMonitor off) and a wrong release label are findings; ours passes", async () => {
        const { dcgmExporterValues } = await import("../components/spoke/GpuOperator");
        const run = (v: Record<string, unknown>) =>
            checkPrometheusAgreement({ stack: "s", objects: [rule("kube-prometheus-stack")], releases: [gpuOp(v)] });
        expect(run({ enabled: true }).map((x) => x.key)).toEqual(["dcgmExporter.serviceMonitor"]);
        expect(run({ enabled: true })[0].message).toMatch(
            /ServiceMonitor is off \(chart default\).*gpu-operator@v25\.10\.1:deployments\/gpu-operator\/values\.yaml/,
        );
        expect(run({ enabled: true, serviceMonitor: { enabled: true, additionalLabels: { release: "prometheus" } } })).toHaveLength(1);
        expect(dcgmExporterValues({ release: "kube-prometheus-stack" })).toEqual({
            enabled: true,
            serviceMonitor: { enabled: true, honorLabels: true, additionalLabels: { release: "kube-prometheus-stack" } },
        });
        expect(run(dcgmExporterValues({ release: "kube-prometheus-stack" }))).toEqual([]);
    });
});
