import type { ChartFacts } from "../types";

/**
 * Envoy Gateway chart `gateway-helm` v1.9.2: `.Values.*` read by charts/gateway-helm/templates and its `crds` subchart
 * (condition `crds.enabled`). `config.envoyGateway` is merged over the chart's default EnvoyGateway config and written
 * verbatim into the `envoy-gateway-config` ConfigMap (templates/envoy-gateway-config.yaml), so its fields are those of the
 * EnvoyGateway API (api/v1alpha1/envoygateway_types.go), not chart keys.
 */
export const envoyGatewayChart: ChartFacts = {
    chart: "gateway-helm",
    repository: "oci://docker.io/envoyproxy/gateway-helm",
    version: "v1.9.2",
    source: "envoyproxy/gateway@v1.9.0:charts/gateway-helm/templates",
    note: "Read at v1.9.0 (39763b1c, head of release/v1.9 in the stored snapshot): the v1.9.1 and v1.9.2 tags are not in it. v1.9.2 is the pin Agent Router v1.2.0 is built against (theagentrouter/agent-router release-notes/v1.2.0.md); re-read when the snapshot has the tag.",
    valuesKeys: [
        "certgen.job.affinity", "certgen.job.annotations", "certgen.job.args", "certgen.job.nodeSelector",
        "certgen.job.pod.annotations", "certgen.job.pod.labels", "certgen.job.pod.securityContext",
        "certgen.job.resources", "certgen.job.securityContext", "certgen.job.tolerations",
        "certgen.job.ttlSecondsAfterFinished", "certgen.rbac.annotations", "certgen.rbac.labels", "commonLabels",
        "config.envoyGateway", "crds.enabled", "crds.gatewayAPI.safeUpgradePolicy.enabled", "createNamespace",
        "deployment.annotations", "deployment.envoyGateway.extraEnv", "deployment.envoyGateway.image.repository",
        "deployment.envoyGateway.image.tag", "deployment.envoyGateway.imagePullPolicy",
        "deployment.envoyGateway.imagePullSecrets", "deployment.envoyGateway.livenessProbe",
        "deployment.envoyGateway.readinessProbe", "deployment.envoyGateway.resources",
        "deployment.envoyGateway.securityContext", "deployment.envoyGateway.startupProbe",
        "deployment.envoyGateway.strategy", "deployment.envoyGateway.wasmCacheVolume", "deployment.pod.affinity",
        "deployment.pod.annotations", "deployment.pod.extraVolumeMounts", "deployment.pod.extraVolumes",
        "deployment.pod.labels", "deployment.pod.nodeSelector", "deployment.pod.securityContext",
        "deployment.pod.tolerations", "deployment.pod.topologySpreadConstraints", "deployment.ports",
        "deployment.priorityClassName", "deployment.replicas", "fullnameOverride", "global.imagePullSecrets",
        "global.imageRegistry", "global.images.envoyGateway.image", "global.images.envoyGateway.pullPolicy",
        "global.images.envoyGateway.pullSecrets", "global.images.envoyProxy.image",
        "global.images.envoyProxy.pullPolicy", "global.images.envoyProxy.pullSecrets",
        "global.images.ratelimit.image", "global.images.ratelimit.pullPolicy", "global.images.ratelimit.pullSecrets",
        "hpa.behavior", "hpa.enabled", "hpa.maxReplicas", "hpa.metrics", "hpa.minReplicas",
        "kubernetesClusterDomain", "nameOverride", "namespaceOverride", "podDisruptionBudget.maxUnavailable",
        "podDisruptionBudget.minAvailable", "podDisruptionBudget.unhealthyPodEvictionPolicy", "service.annotations",
        "service.loadBalancerIP", "service.trafficDistribution", "service.type", "serviceAccount.create",
        "serviceAccount.name", "topologyInjector.annotations", "topologyInjector.enabled",
    ],
    openSubtrees: [
        "certgen.job.affinity", "certgen.job.annotations", "certgen.job.nodeSelector", "certgen.job.pod.annotations",
        "certgen.job.pod.labels", "certgen.job.pod.securityContext", "certgen.job.resources",
        "certgen.job.securityContext", "certgen.job.tolerations", "certgen.rbac.annotations", "certgen.rbac.labels",
        "commonLabels", "config.envoyGateway", "config.envoyGateway.extensionApis",
        "config.envoyGateway.provider.kubernetes", "deployment.annotations", "deployment.envoyGateway.extraEnv",
        "deployment.envoyGateway.imagePullSecrets", "deployment.envoyGateway.livenessProbe",
        "deployment.envoyGateway.readinessProbe", "deployment.envoyGateway.resources",
        "deployment.envoyGateway.securityContext", "deployment.envoyGateway.startupProbe",
        "deployment.envoyGateway.strategy", "deployment.envoyGateway.wasmCacheVolume", "deployment.pod.affinity",
        "deployment.pod.annotations", "deployment.pod.extraVolumeMounts", "deployment.pod.extraVolumes",
        "deployment.pod.labels", "deployment.pod.nodeSelector", "deployment.pod.securityContext",
        "deployment.pod.tolerations", "deployment.pod.topologySpreadConstraints", "deployment.ports",
        "deployment.priorityClassName", "global.imagePullSecrets", "global.images.envoyGateway.pullSecrets",
        "global.images.envoyProxy.pullSecrets", "global.images.ratelimit.pullPolicy",
        "global.images.ratelimit.pullSecrets", "hpa.behavior", "hpa.metrics", "service.annotations",
        "service.trafficDistribution", "topologyInjector.annotations",
    ],
};
