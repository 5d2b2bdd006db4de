import type { ChartFacts } from "../types";

/**
 * NVIDIA Network Operator chart 26.1.2: the values its templates read (`.Values.*` in deployment/network-operator/templates),
 * the dependency conditions of its Chart.yaml (`nfd.enabled`, `sriovNetworkOperator.enabled`, `maintenanceOperator.enabled`)
 * and its three subcharts as open subtrees (we set none of their values). There is no `nicConfigurationOperator` key: the
 * NIC configuration operator is a NicClusterPolicy field (`spec.nicConfigurationOperator`), not a chart value.
 */
export const networkOperatorChart: ChartFacts = {
    chart: "network-operator",
    repository: "https://helm.ngc.nvidia.com/nvidia",
    version: "26.1.2",
    source: "Mellanox/network-operator@v26.1.2:deployment/network-operator/templates",
    note: "Chart.yaml version 26.1.2 at that tag; keys identical to v26.1.0 (only image tags differ).",
    valuesKeys: [
        "imagePullSecrets", "maintenanceOperator.enabled", "nfd.deployNodeFeatureRules", "nfd.enabled",
        "operator.admissionController.certificate.caCrt", "operator.admissionController.certificate.tlsCrt",
        "operator.admissionController.certificate.tlsKey", "operator.admissionController.enabled",
        "operator.admissionController.useCertManager", "operator.affinity", "operator.cniBinDirectory",
        "operator.cniNetworkDirectory", "operator.fullnameOverride", "operator.image", "operator.imagePullSecrets",
        "operator.maintenanceOperator.drainControllerRequestorID",
        "operator.maintenanceOperator.nodeMaintenanceNamePrefix",
        "operator.maintenanceOperator.nodeMaintenanceNamespace", "operator.maintenanceOperator.requestorID",
        "operator.maintenanceOperator.useDrainControllerRequestor", "operator.maintenanceOperator.useRequestor",
        "operator.nameOverride", "operator.nodeSelector", "operator.ofedDriver.initContainer", "operator.repository",
        "operator.resources", "operator.tag", "operator.tolerations", "operator.useDTK",
        "sriovNetworkOperator.enabled", "upgradeCRDs",
    ],
    openSubtrees: [
        "imagePullSecrets", "maintenance-operator-chart", "node-feature-discovery", "operator.affinity",
        "operator.imagePullSecrets", "operator.nodeSelector", "operator.ofedDriver.initContainer",
        "operator.resources", "operator.tolerations", "sriov-network-operator",
    ],
};
