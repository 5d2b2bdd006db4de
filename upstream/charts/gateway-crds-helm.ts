import type { ChartFacts } from "../types";

/**
 * Envoy Gateway `gateway-crds-helm` v1.9.2: the templates read only `crds.gatewayAPI.{enabled,channel}` and
 * `crds.envoyGateway.enabled` (charts/gateway-crds-helm/templates/*).
 */
export const gatewayCrdsChart: ChartFacts = {
    chart: "gateway-crds-helm",
    repository: "oci://docker.io/envoyproxy/gateway-crds-helm",
    version: "v1.9.2",
    source: "envoyproxy/gateway@v1.9.0:charts/gateway-crds-helm/templates",
    note: "Read at v1.9.0; v1.9.1/v1.9.2 are not in the stored snapshot (see gateway-helm).",
    valuesKeys: ["crds.envoyGateway.enabled", "crds.gatewayAPI.channel", "crds.gatewayAPI.enabled"],
    openSubtrees: [],
};
