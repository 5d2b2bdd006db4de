import type { ChartFacts } from "../types";

/**
 * Agent Router (Envoy AI Gateway) `ai-gateway-helm` v1.2.0: `.Values.*` read by manifests/charts/ai-gateway-helm/templates.
 * `controller.replicaCount` sets the controller Deployment's replicas (templates/deployment.yaml, also in
 * theagentrouter/agent-router@549dcab4:manifests/charts/ai-gateway-helm/templates/deployment.yaml).
 */
export const aiGatewayChart: ChartFacts = {
    chart: "ai-gateway-helm",
    repository: "oci://docker.io/envoyproxy/ai-gateway-helm",
    version: "v1.2.0",
    source: "envoyproxy/ai-gateway@v1.1.0:manifests/charts/ai-gateway-helm/templates",
    note: "Read at v1.1.0 (c217da8a), the newest tag in the stored snapshot; v1.2.0 keeps the chart names (theagentrouter/agent-router release-notes/v1.2.0.md). Plus the two values the v1.2.0 notes add (`controller.priorityClassName`, `controller.mcp.sessionEncryption.existingSecret`); any other v1.2.0 key fails the check until re-read.",
    valuesKeys: [
        "controller.affinity", "controller.extraEnvVars", "controller.fullnameOverride", "controller.hostNetwork",
        "controller.image.repository", "controller.image.tag", "controller.imagePullPolicy",
        "controller.imagePullSecrets", "controller.leaderElection.enabled", "controller.logFormat",
        "controller.logLevel", "controller.logRequestHeaderAttributes", "controller.maxRecvMsgSize",
        "controller.mcp.sessionEncryption.existingSecret", "controller.mcp.sessionEncryption.fallback.iterations",
        "controller.mcp.sessionEncryption.fallback.seed", "controller.mcp.sessionEncryption.iterations",
        "controller.mcp.sessionEncryption.seed", "controller.metricsRequestHeaderAttributes",
        "controller.mutatingWebhook.caBundleName", "controller.mutatingWebhook.certManager.certificateName",
        "controller.mutatingWebhook.certManager.enable", "controller.mutatingWebhook.certManager.issuerName",
        "controller.mutatingWebhook.namespaceSelector", "controller.mutatingWebhook.objectSelector",
        "controller.mutatingWebhook.port", "controller.mutatingWebhook.tlsCertName",
        "controller.mutatingWebhook.tlsCertSecretName", "controller.mutatingWebhook.tlsKeyName",
        "controller.nameOverride", "controller.nodeSelector", "controller.podAnnotations",
        "controller.podDisruptionBudget", "controller.podDisruptionBudget.annotations",
        "controller.podDisruptionBudget.enabled", "controller.podDisruptionBudget.maxUnavailable",
        "controller.podDisruptionBudget.minAvailable", "controller.podEnv", "controller.podLabels",
        "controller.podSecurityContext", "controller.priorityClassName", "controller.quotaRateLimitFailureModeDeny",
        "controller.quotaRateLimitServiceAddr", "controller.quotaRateLimitTimeout", "controller.replicaCount",
        "controller.requestHeaderAttributes", "controller.resources", "controller.securityContext",
        "controller.service.ports", "controller.service.type", "controller.serviceAccount.annotations",
        "controller.serviceAccount.create", "controller.serviceAccount.name",
        "controller.spanRequestHeaderAttributes", "controller.tolerations", "controller.topologySpreadConstraints",
        "controller.volumes", "controller.watch.cacheSyncTimeout", "controller.watch.namespaces", "endpointConfig",
        "endpointConfig.anthropic", "endpointConfig.cohere", "endpointConfig.openai", "endpointConfig.rootPrefix",
        "envoyGateway.namespace", "extProc.enableRedaction", "extProc.extraEnvVars", "extProc.image.repository",
        "extProc.image.tag", "extProc.imagePullPolicy", "extProc.imagePullSecrets", "extProc.logFormat",
        "extProc.logLevel", "global.imagePullSecrets", "nameOverride",
    ],
    openSubtrees: [
        "controller.affinity", "controller.extraEnvVars", "controller.mutatingWebhook.namespaceSelector",
        "controller.mutatingWebhook.objectSelector", "controller.nodeSelector", "controller.podAnnotations",
        "controller.podDisruptionBudget.annotations", "controller.podEnv", "controller.podLabels",
        "controller.podSecurityContext", "controller.resources", "controller.securityContext",
        "controller.service.ports", "controller.serviceAccount.annotations", "controller.tolerations",
        "controller.topologySpreadConstraints", "controller.volumes", "extProc.extraEnvVars",
    ],
};
