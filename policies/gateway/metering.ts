import type { StackValidationPolicy } from "@pulumi/policy";
import { aiRoutes, gatewayUrn, GROUPS, GW, keyOf, llmGateways, nameOf, nsOf, ofKind, routeGateways } from "../lib/gateway";

/* The access log is the metering source: a remote JSON sink with the request id, response codes and token keys. */

/** Fields every metering access log record needs besides the token keys. */
export const REQUIRED_ACCESS_LOG_OPERATORS = ["%REQ(X-REQUEST-ID)%", "%RESPONSE_CODE%", "%RESPONSE_FLAGS%", "%RESPONSE_CODE_DETAILS%"];

/**
 * The access log is the metering source: a remote sink (OpenTelemetry or ALS) with JSON fields carrying the
 * request id (idempotency key), response code/flags/details (aborted vs zero tokens) and every
 * `llmRequestCosts` key of the Gateway's routes.
 */
export const accessLogUsageFields: StackValidationPolicy = {
    name: "gateway-access-log-usage-fields",
    description:
        "The EnvoyProxy of each LLM Gateway must ship a JSON access log to an OpenTelemetry/ALS sink including x-request-id, response code/flags/details and every llmRequestCosts key.",
    remediationSteps: "Use services/shared/accesslog.ts meteringAccessLogSetting() in EnvoyProxy spec.telemetry.accessLog.settings.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const proxies = new Map(ofKind(args.resources, GROUPS.eg, "EnvoyProxy").map((p) => [keyOf(p), p] as const));
        const classes = new Map(ofKind(args.resources, GROUPS.gwapi, "GatewayClass").map((c) => [nameOf(c), c] as const));
        for (const [key, gw] of llmGateways(args.resources)) {
            const costKeys = new Set<string>();
            for (const r of aiRoutes(args.resources).filter((x) => routeGateways(x).includes(key)))
                for (const c of r.props.spec?.llmRequestCosts ?? []) costKeys.add(c.metadataKey);
            const refs: any[] = [];
            const infra = gw?.props.spec?.infrastructure?.parametersRef;
            if (infra?.kind === "EnvoyProxy") refs.push({ ...infra, namespace: nsOf(gw!) });
            const pr = gw ? classes.get(gw.props.spec?.gatewayClassName)?.props.spec?.parametersRef : undefined;
            if (pr?.kind === "EnvoyProxy") refs.push(pr);
            const proxy = refs.map((r) => proxies.get(`${r.namespace ?? "default"}/${r.name}`)).find(Boolean);
            if (!proxy) {
                report(
                    `Gateway ${key}: no EnvoyProxy in this stack is attached to it (GatewayClass or infrastructure parametersRef), so no access log carries usage to metering.`,
                    gatewayUrn(args.resources, key, gw),
                );
                continue;
            }
            const settings: any[] = proxy.props.spec?.telemetry?.accessLog?.settings ?? [];
            const ok = settings.some((s) => {
                const remote = (s.sinks ?? []).some((k: any) => k.type === "OpenTelemetry" || k.type === "ALS");
                const values = Object.values(s.format?.json ?? {}).map(String);
                const has = (op: string) => values.some((v) => v.includes(op));
                return (
                    remote &&
                    REQUIRED_ACCESS_LOG_OPERATORS.every(has) &&
                    [...costKeys].every((k) => has(`%DYNAMIC_METADATA(${GW.aiMetadataNamespace}:${k})%`))
                );
            });
            if (!ok) {
                report(
                    `EnvoyProxy ${keyOf(proxy)} (Gateway ${key}): no access log setting ships JSON with ${[...REQUIRED_ACCESS_LOG_OPERATORS, ...[...costKeys].map((k) => `%DYNAMIC_METADATA(${GW.aiMetadataNamespace}:${k})%`)].join(", ")} to an OpenTelemetry or ALS sink.`,
                    proxy.urn,
                );
            }
        }
    },
};
