import type { ChartFacts } from "../types";
import { aiGatewayCrdsChart } from "./ai-gateway-crds-helm";
import { aiGatewayChart } from "./ai-gateway-helm";
import { efaDevicePluginChart } from "./aws-efa-k8s-device-plugin";
import { awsLoadBalancerControllerChart } from "./aws-load-balancer-controller";
import { certManagerChart } from "./cert-manager";
import { dynamoPlatformChart } from "./dynamo-platform";
import { gatewayCrdsChart } from "./gateway-crds-helm";
import { envoyGatewayChart } from "./gateway-helm";
import { gpuOperatorChart } from "./gpu-operator";
import { networkOperatorChart } from "./network-operator";
import { otelCollectorChart } from "./opentelemetry-collector";

export {
    aiGatewayChart,
    aiGatewayCrdsChart,
    awsLoadBalancerControllerChart,
    certManagerChart,
    dynamoPlatformChart,
    efaDevicePluginChart,
    envoyGatewayChart,
    gatewayCrdsChart,
    gpuOperatorChart,
    networkOperatorChart,
    otelCollectorChart,
};

/**
 * Values keys of every Helm chart the product installs, one entry per pinned chart version (config/versions.ts).
 * Each was read from the chart's templates at (or, where the stored snapshot lacks the tag, next to) the pinned
 * version; `source` and `note` say which.
 */
export const charts: readonly ChartFacts[] = [
    networkOperatorChart,
    gpuOperatorChart,
    efaDevicePluginChart,
    otelCollectorChart,
    envoyGatewayChart,
    gatewayCrdsChart,
    aiGatewayChart,
    aiGatewayCrdsChart,
    dynamoPlatformChart,
    certManagerChart,
    awsLoadBalancerControllerChart,
];

/** The facts for `chart` at exactly `version`, or undefined (an unknown chart or version is itself a finding). */
export function chartFacts(chart: string, version: string): ChartFacts | undefined {
    return charts.find((c) => c.chart === chart && c.version === version);
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
const segMatch = (pattern: string, path: string[]) => {
    const p = pattern.split(".");
    return p.length === path.length && p.every((s, i) => s === "*" || s === path[i]);
};
const under = (prefix: string, path: string[]) => {
    const p = prefix.split(".");
    return p.length <= path.length && p.every((s, i) => s === "*" || s === path[i]);
};

/**
 * Dotted values paths in `values` that the chart does not read: a path is read when it equals a `valuesKeys` entry, or
 * lies under an `openSubtrees` entry, or is a map whose own path is a key and whose children are read. Descends into
 * maps only (a list is one value). Pure.
 *
 * @returns unknown paths, e.g. `["nicConfigurationOperator.enabled"]`
 */
export function unknownValuesKeys(facts: ChartFacts, values: unknown): string[] {
    const out: string[] = [];
    const walk = (v: unknown, path: string[]) => {
        if (path.length > 0 && (facts.openSubtrees ?? []).some((o) => under(o, path))) return;
        if (path.length > 0 && (!isMap(v) || Object.keys(v).length === 0)) {
            if (!facts.valuesKeys.some((k) => segMatch(k, path))) out.push(path.join("."));
            return;
        }
        if (!isMap(v)) return;
        for (const [k, child] of Object.entries(v)) walk(child, [...path, k]);
    };
    walk(values, []);
    return out;
}
