import type { ChartFacts } from "../types";

/**
 * Agent Router `ai-gateway-crds-helm` v1.2.0: plain CRD YAML under templates/, no `.Values` read at all.
 */
export const aiGatewayCrdsChart: ChartFacts = {
    chart: "ai-gateway-crds-helm",
    repository: "oci://docker.io/envoyproxy/ai-gateway-crds-helm",
    version: "v1.2.0",
    source: "envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-crds-helm/templates",
    note: "Read at v1.1.0 (newest tag in the stored snapshot).",
    valuesKeys: [],
    openSubtrees: [],
};
