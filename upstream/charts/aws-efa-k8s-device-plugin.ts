import type { ChartFacts } from "../types";

/**
 * AWS EFA device plugin chart v0.5.30 (image v0.5.20): `.Values.*` read by stable/aws-efa-k8s-device-plugin/templates.
 * `supportedInstanceLabels.values` feeds the DaemonSet's required node affinity (a type missing there leaves DESIRED=0).
 */
export const efaDevicePluginChart: ChartFacts = {
    chart: "aws-efa-k8s-device-plugin",
    repository: "https://aws.github.io/eks-charts",
    version: "v0.5.30",
    source: "aws/eks-charts@bfe91c4b:stable/aws-efa-k8s-device-plugin/templates",
    note: "Chart.yaml version v0.5.30, appVersion v0.5.20 at commit bfe91c4b (first in repo tag v0.0.241); eks-charts tags the repository, not each chart.",
    valuesKeys: [
        "additionalPodAnnotations",
        "additionalPodLabels",
        "fullnameOverride",
        "image.repository",
        "image.tag",
        "imagePullSecrets",
        "nameOverride",
        "nodeSelector",
        "resources",
        "securityContext",
        "serviceAccount.create",
        "serviceAccount.name",
        "supportedInstanceLabels.keys",
        "supportedInstanceLabels.values",
        "tolerations",
        "updateStrategy",
    ],
    openSubtrees: [
        "additionalPodAnnotations",
        "additionalPodLabels",
        "imagePullSecrets",
        "nodeSelector",
        "resources",
        "securityContext",
        "supportedInstanceLabels.keys",
        "supportedInstanceLabels.values",
        "tolerations",
        "updateStrategy",
    ],
};
