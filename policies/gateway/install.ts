import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { aiRoutes, chartReleases, cmpSemver, GROUPS, GW, keyOf, ofKind, semver } from "../lib/gateway";
import { aiGatewayMinimum, gatewayCompatibleSets } from "../../upstream/gateway";

/* Gateway controllers and charts: rate limits fail closed, one tested version set, the AI Gateway extension wired, no mergeBackends. */

function gatewayHelmValues(resources: PolicyResource[]): Array<{ r: PolicyResource; eg: any }> {
    return chartReleases(resources, "gateway-helm").map((r) => ({ r, eg: r.props.values?.config?.envoyGateway ?? {} }));
}

/**
 * Envoy's global rate limiting fails open by default (`rateLimit.failClosed: false`) and its 20 ms default
 * timeout turns a slow Redis into "no limits" (envoyproxy/ratelimit#462). If used, it fails closed.
 * The AI Gateway QuotaPolicy rate limit service likewise (`controller.quotaRateLimitFailureModeDeny`).
 */
export const envoyRateLimitFailClosed: StackValidationPolicy = {
    name: "gateway-envoy-ratelimit-fail-closed",
    description:
        "If Envoy Gateway global rate limiting (or AI Gateway QuotaPolicy) is used, it must be fail-closed with an explicit timeout.",
    remediationSteps:
        "In gateway-helm values set config.envoyGateway.rateLimit.failClosed: true and rateLimit.timeout; for QuotaPolicy set ai-gateway-helm controller.quotaRateLimitFailureModeDeny: true.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const releases = gatewayHelmValues(args.resources);
        for (const { r, eg } of releases) {
            if (!eg.rateLimit) continue;
            if (eg.rateLimit.failClosed !== true)
                report(
                    `Helm release ${r.name} (gateway-helm): config.envoyGateway.rateLimit.failClosed is not true; requests pass unlimited when the rate limit service is down.`,
                    r.urn,
                );
            if (!eg.rateLimit.timeout)
                report(`Helm release ${r.name} (gateway-helm): config.envoyGateway.rateLimit.timeout is not set (20 ms default).`, r.urn);
        }
        const globalRl = ofKind(args.resources, GROUPS.eg, "BackendTrafficPolicy").filter(
            (b) => b.props.spec?.rateLimit?.global || b.props.spec?.rateLimit?.type === "Global",
        );
        if (globalRl.length && !releases.some(({ eg }) => eg.rateLimit?.failClosed === true)) {
            for (const b of globalRl)
                report(
                    `BackendTrafficPolicy ${keyOf(b)} uses global rate limiting but no gateway-helm release in this stack sets config.envoyGateway.rateLimit.failClosed: true.`,
                    b.urn,
                );
        }
        const quotas = ofKind(args.resources, GROUPS.aigw, "QuotaPolicy");
        if (quotas.length) {
            const aigw = chartReleases(args.resources, "ai-gateway-helm");
            if (!aigw.some((r) => r.props.values?.controller?.quotaRateLimitFailureModeDeny === true)) {
                for (const q of quotas)
                    report(
                        `QuotaPolicy ${keyOf(q)}: ai-gateway-helm controller.quotaRateLimitFailureModeDeny is not true, so quotas fail open.`,
                        q.urn,
                    );
            }
        }
    },
};

/** AI Gateway / Agent Router ↔ Envoy Gateway minor versions built and tested together (upstream/gateway.ts). */
export const COMPATIBLE_SETS = gatewayCompatibleSets;

/**
 * AI Gateway ≥ v1.1.0: before it a client's `x-ai-eg-model` was appended to, not overwritten (ai-gateway#2410,
 * ). CRD and controller charts at the same version, and the pair from one tested set.
 */
export const gatewayChartVersions: StackValidationPolicy = {
    name: "gateway-chart-versions",
    description: `ai-gateway-helm and ai-gateway-crds-helm must be >= v${aiGatewayMinimum.version.join(".")} and equal; gateway-helm and gateway-crds-helm equal; AI Gateway and Envoy Gateway from one compatible set.`,
    remediationSteps: `Pin all four charts together in config/versions.ts, from one compatible set (${gatewayCompatibleSets.map((s) => `Agent Router ${s.aiGateway}.x with Envoy Gateway ${s.envoyGateway}.x`).join(", ")}; upstream/gateway.ts).`,
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const ai = chartReleases(args.resources, "ai-gateway-helm");
        const aiCrds = chartReleases(args.resources, "ai-gateway-crds-helm");
        const eg = chartReleases(args.resources, "gateway-helm");
        const egCrds = chartReleases(args.resources, "gateway-crds-helm");
        for (const r of [...ai, ...aiCrds]) {
            const v = semver(r.props.version);
            if (!v)
                report(
                    `Helm release ${r.name} (${r.props.chart}): version ${JSON.stringify(r.props.version)} is not an exact release; pin vX.Y.Z.`,
                    r.urn,
                );
            else if (cmpSemver(v, aiGatewayMinimum.version) < 0)
                report(
                    `Helm release ${r.name} (${r.props.chart}): ${r.props.version} is below v${aiGatewayMinimum.version.join(".")}, where a client-sent ${GW.modelHeader} is appended instead of overwritten (ai-gateway#2410).`,
                    r.urn,
                );
        }
        const same = (a: PolicyResource[], b: PolicyResource[], what: string) => {
            for (const x of a)
                for (const y of b)
                    if (x.props.version !== y.props.version)
                        report(
                            `${what}: ${x.props.chart}@${x.props.version} and ${y.props.chart}@${y.props.version} differ; install the CRDs of the controller's version.`,
                            y.urn,
                        );
        };
        same(ai, aiCrds, "AI Gateway");
        same(eg, egCrds, "Envoy Gateway");
        for (const a of ai)
            for (const e of eg) {
                const av = semver(a.props.version);
                const ev = semver(e.props.version);
                if (!av || !ev) continue;
                const set = COMPATIBLE_SETS.find((s) => s.aiGateway === `${av[0]}.${av[1]}`);
                if (!set || set.envoyGateway !== `${ev[0]}.${ev[1]}`) {
                    report(
                        `AI Gateway ${a.props.version} with Envoy Gateway ${e.props.version} is not a tested set (${COMPATIBLE_SETS.map((s) => `${s.aiGateway}.x↔${s.envoyGateway}.x`).join(", ")}).`,
                        e.urn,
                    );
                }
            }
    },
};

/**
 * Envoy Gateway must run the AI Gateway extension hooks and the Backend API, or model routing silently falls
 * to the catch-all 404 (ai-gateway#1944/#1485, ; AIServiceBackend accepts only Backends).
 */
export const aiGatewayExtensionConfigured: StackValidationPolicy = {
    name: "gateway-ai-extension-configured",
    description:
        "When AIGatewayRoutes exist, a gateway-helm release must enable extensionApis.enableBackend and point extensionManager.service.fqdn at the AI Gateway controller.",
    remediationSteps:
        "Use lib/gateway.ts envoyGatewayValues() (ai-gateway manifests/envoy-gateway-values.yaml) for the gateway-helm values.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        if (aiRoutes(args.resources).length === 0) return;
        const releases = gatewayHelmValues(args.resources);
        if (releases.length === 0) {
            report(
                "AIGatewayRoutes exist but this stack installs no gateway-helm release configured for the AI Gateway.",
                aiRoutes(args.resources)[0].urn,
            );
            return;
        }
        for (const { r, eg } of releases) {
            if (eg.extensionApis?.enableBackend !== true)
                report(
                    `Helm release ${r.name} (gateway-helm): config.envoyGateway.extensionApis.enableBackend is not true; AIServiceBackends cannot reach their Backends.`,
                    r.urn,
                );
            const host = eg.extensionManager?.service?.fqdn?.hostname;
            if (typeof host !== "string" || !host.startsWith("ai-gateway-controller."))
                report(
                    `Helm release ${r.name} (gateway-helm): config.envoyGateway.extensionManager.service.fqdn.hostname is ${JSON.stringify(host)}, not the AI Gateway controller; the body-to-model routing filter is never installed.`,
                    r.urn,
                );
            if (!(eg.extensionManager?.hooks?.xdsTranslator?.post ?? []).includes("Route"))
                report(`Helm release ${r.name} (gateway-helm): extensionManager.hooks.xdsTranslator.post lacks Route.`, r.urn);
        }
    },
};

/** `mergeBackends` (EG v1.9) shares clusters between routes and breaks AI Gateway backend resolution (Agent Router v1.2.0 notes). */
export const envoyProxyNoMergeBackends: ResourceValidationPolicy = {
    name: "envoyproxy-no-merge-backends",
    description: "EnvoyProxy must not set mergeBackends when used with the AI Gateway.",
    remediationSteps: "Remove spec.mergeBackends from the EnvoyProxy.",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:gateway\.envoyproxy\.io\/[^:]+:EnvoyProxy$/.test(args.type)) return;
        if (args.props.spec?.mergeBackends !== undefined)
            report(
                `EnvoyProxy ${args.props.metadata?.name ?? args.name} sets mergeBackends; Agent Router backend resolution breaks with shared clusters.`,
            );
    },
};
