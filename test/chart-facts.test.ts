/**
 * Every Helm values key the product sets is one the pinned chart's templates read (upstream/charts, each entry citing
 * the chart's templates at its tag), and every chart facts entry is for exactly the version config/versions.ts pins.
 * A values key nothing reads passes every schema and does nothing on `up`.
 */
import { describe, expect, it } from "vitest";
import { networkOperatorValues } from "../components/spoke/BackendFabric";
import { dynamoPlatformValues } from "../components/spoke/DynamoPlatform";
import { eksGpuOperatorValues, gpuOperatorValues } from "../components/spoke/GpuOperator";
import { collectorValues } from "../components/spoke/Metering";
import { versions } from "../config/versions";
import { certManagerValues } from "../lib/edge";
import { efaDevicePluginValues } from "../lib/efa";
import { aiGatewayValues, envoyGatewayValues, gatewayCrdsValues } from "../lib/gateway";
import { chartFacts, charts, unknownValuesKeys } from "../upstream/charts";
import { lbcValues } from "../lib/aws-load-balancer-controller";

/** Chart name (last path segment of an OCI reference) and version of each pinned Helm chart. */
const pinned = [
    versions.networkOperator,
    versions.gpuOperator,
    versions.efaDevicePlugin,
    versions.otelCollector,
    versions.dynamoPlatform,
    versions.gatewayCrds,
    versions.envoyGateway,
    versions.aiGatewayCrds,
    versions.aiGateway,
    versions.certManager,
    versions.awsLoadBalancerController,
].map((v) => ({ chart: v.chart.split("/").pop()!, version: v.version, repository: "repo" in v ? v.repo : v.chart }));

const facts = (chart: string) => {
    const p = pinned.find((x) => x.chart === chart)!;
    const f = chartFacts(chart, p.version);
    if (!f) throw new Error(`no chart facts for ${chart} ${p.version}`);
    return f;
};

describe("upstream/charts: facts per pinned chart version", () => {
    it("has exactly one entry per pinned chart, at the pinned version and repository", () => {
        expect(charts.map((c) => `${c.chart}@${c.version}`).sort()).toEqual(pinned.map((p) => `${p.chart}@${p.version}`).sort());
        for (const p of pinned) expect(chartFacts(p.chart, p.version)!.repository).toBe(p.repository);
    });

    it("every entry cites owner/repo@ref:path and lists keys", () => {
        for (const c of charts) {
            expect(c.source).toMatch(/^[\w.-]+\/[\w.-]+@[\w.-]+:\S+$/);
            if (c.chart !== "ai-gateway-crds-helm") expect(c.valuesKeys.length).toBeGreaterThan(2);
        }
        // ai-gateway-crds-helm templates are plain CRD YAML (envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-crds-helm/templates).
        expect(facts("ai-gateway-crds-helm").valuesKeys).toEqual([]);
    });
});

describe("values we set are values the chart reads", () => {
    const cases: Array<[string, unknown]> = [
        ["network-operator", networkOperatorValues()],
        ["gpu-operator", gpuOperatorValues({ gpuDirectRdma: "peermem", useHostMofed: true })],
        ["gpu-operator", eksGpuOperatorValues()],
        ["aws-efa-k8s-device-plugin", efaDevicePluginValues(["p5en.48xlarge"], "nvidia.com/gpu")],
        ["opentelemetry-collector", collectorValues({ namespace: "metering", replicas: 2, queueGiB: 8, storageClassName: "fast" })],
        ["dynamo-platform", dynamoPlatformValues({ grove: true, kaiScheduler: true, prometheusEndpoint: "http://prom:9090" })],
        ["gateway-crds-helm", gatewayCrdsValues()],
        ["gateway-helm", envoyGatewayValues({ redisUrl: "redis:6379", timeout: "100ms" })],
        ["ai-gateway-helm", aiGatewayValues()],
        ["cert-manager", certManagerValues(true)],
        [
            "aws-load-balancer-controller",
            lbcValues({
                clusterName: "platform-sg1",
                region: "ap-southeast-1",
                vpcId: "vpc-1",
                nodeSelector: { "platform.example/system": "true" },
            }),
        ],
    ];
    it.each(cases)("%s", (chart, values) => {
        expect(unknownValuesKeys(facts(chart), values)).toEqual([]);
    });

    it("finds a key the chart never reads: network-operator 26.x has no nicConfigurationOperator value", () => {
        // Mellanox/network-operator@v26.1.2 templates read nfd.*, sriovNetworkOperator.enabled, operator.*, ... but no
        // nicConfigurationOperator (that is NicClusterPolicy.spec.nicConfigurationOperator).
        expect(
            unknownValuesKeys(facts("network-operator"), { nfd: { enabled: true }, nicConfigurationOperator: { enabled: false } }),
        ).toEqual(["nicConfigurationOperator.enabled"]);
        expect(networkOperatorValues()).toEqual({ nfd: { enabled: true }, sriovNetworkOperator: { enabled: false } });
    });

    it("open subtrees pass anything below them; lists are one value; typos are found at any depth", () => {
        const gpu = facts("gpu-operator");
        expect(
            unknownValuesKeys(gpu, { daemonsets: { tolerations: [{ key: "x", anything: 1 }] }, driver: { rdma: { enable: true } } }),
        ).toEqual(["driver.rdma.enable"]);
        // gateway-helm writes config.envoyGateway verbatim into the EnvoyGateway ConfigMap (templates/envoy-gateway-config.yaml).
        expect(
            unknownValuesKeys(facts("gateway-helm"), {
                config: { envoyGateway: { anything: { below: true } } },
                deploymnet: { replicas: 2 },
            }),
        ).toEqual(["deploymnet.replicas"]);
    });
});
