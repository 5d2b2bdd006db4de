import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { aiRoutes, bytesOf, gatewayUrn, GROUPS, keyOf, nsOf, ofKind, targets } from "../lib/gateway";
import { effectiveFor, listenerLabel, modelListeners } from "../lib/attachment";
import { isSecurityPolicy, ROUTE_KINDS, extAuthOf, attachmentsOf, attachmentFindings } from "./attach";

/* ext_authz: fails closed, exactly one effective SecurityPolicy per model listener, no route-level override, the body reaches it, its backend resolves. */

/**
 * ext_authz must fail closed with an explicit status. `failOpen: true` lets every request through when the
 * auth service is down, and since envoyproxy/gateway#6512 even skips ext_authz entirely when its config is
 * invalid. Without `statusOnError` Envoy answers 403 for an outage, indistinguishable from a denied key.
 */
export const extAuthFailClosed: ResourceValidationPolicy = {
    name: "gateway-extauth-fail-closed",
    description: "Every SecurityPolicy with extAuth must have failOpen absent or false and an explicit statusOnError.",
    remediationSteps: "Set spec.extAuth.failOpen: false and spec.extAuth.statusOnError (e.g. 503) in the SecurityPolicy.",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!isSecurityPolicy(args.type)) return;
        const ea = args.props.spec?.extAuth;
        if (!ea) return;
        if (ea.failOpen === true)
            report(
                `SecurityPolicy ${keyOf(args as unknown as PolicyResource)}: extAuth.failOpen is true; an unreachable or misconfigured auth service would let every request through (envoyproxy/gateway#6512). Set it to false.`,
            );
        if (typeof ea.statusOnError !== "number")
            report(
                `SecurityPolicy ${keyOf(args as unknown as PolicyResource)}: extAuth.statusOnError is not set; Envoy would answer an auth outage with 403, like a denied key. Set it explicitly (503).`,
            );
    },
};

/**
 * Auth per listener, as Envoy Gateway applies it (lib/attachment.ts): every listener that carries AIGatewayRoutes
 * gets exactly one effective SecurityPolicy, it configures ext_authz, and ext_authz fails closed. A listener-level
 * policy replaces the Gateway-level one on that listener (so a listener-level policy without extAuth switches auth
 * off there), and a second policy at the same level is Conflicted (envoyproxy/gateway
 * internal/gatewayapi/securitypolicy.go `resolveSecurityPolicyGatewayTargetRef`). One Gateway-level policy, or one
 * policy per listener, both pass.
 */
export const oneGatewaySecurityPolicy: StackValidationPolicy = {
    name: "gateway-one-extauth-security-policy",
    description:
        "Every Gateway listener carrying AIGatewayRoutes must have exactly one effective SecurityPolicy (listener-level via targetRefs sectionName, else Gateway-level via targetRefs or targetSelectors), configuring a fail-closed extAuth; no second policy at the same level (Conflicted), no listener-level policy without extAuth overriding the Gateway's (envoyproxy/gateway internal/gatewayapi/securitypolicy.go).",
    remediationSteps:
        "Attach one SecurityPolicy with extAuth to the Gateway (targetRefs: the Gateway), or one per listener (targetRefs with sectionName); remove duplicates.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const att = attachmentsOf(args.resources, "SecurityPolicy");
        for (const m of modelListeners(args.resources)) {
            if (!m.gw) {
                report(
                    `Gateway ${m.gateway} carries AIGatewayRoutes (${m.routes.join(", ")}) but is not defined in this stack, so the SecurityPolicy of its listeners cannot be computed (fail closed).`,
                    gatewayUrn(args.resources, m.gateway, undefined),
                );
                continue;
            }
            const e = effectiveFor(att, m.gateway, m.listener!.name);
            const label = listenerLabel(m);
            if (!e.effective) {
                report(
                    `${label} carries AIGatewayRoutes (${m.routes.join(", ")}) but no SecurityPolicy applies to it: requests reach the models unauthenticated.`,
                    m.gw.urn,
                );
                continue;
            }
            attachmentFindings("SecurityPolicy", m, e, report);
            const sp = e.effective.policy;
            const ea = extAuthOf(sp);
            if (!ea) {
                const over = e.overridden.filter((o) => extAuthOf(o.policy)).map((o) => keyOf(o.policy));
                report(
                    `SecurityPolicy ${keyOf(sp)} is the effective policy of ${label} (${e.level} level) and has no extAuth: nothing checks API keys, model access or limits there${over.length ? `; it replaces the Gateway-level ext_authz of ${over.join(", ")} on this listener` : ""}.`,
                    sp.urn,
                );
            } else if (ea.failOpen === true) {
                report(
                    `SecurityPolicy ${keyOf(sp)} (effective on ${label}): extAuth.failOpen is true; an unreachable auth service lets every request through.`,
                    sp.urn,
                );
            }
        }
    },
};

/**
 * A route-level SecurityPolicy replaces the Gateway-level one for its routes unless it sets `mergeType`
 * (envoyproxy/gateway#8781), and one on an HTTPRoute generated from an AIGatewayRoute is matched on
 * the first, pre-model route pass, so it never scopes models (ai-gateway#1474).
 */
export const noRouteSecurityPolicyOverride: StackValidationPolicy = {
    name: "gateway-no-route-security-policy-override",
    description:
        "No SecurityPolicy may target a route without mergeType, redefine extAuth at route level, or target an HTTPRoute generated from an AIGatewayRoute.",
    remediationSteps:
        "Remove the route-level SecurityPolicy, or set mergeType: StrategicMerge and leave extAuth to the Gateway-level policy; decide per-model access in the auth service.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const generated = new Set(aiRoutes(args.resources).map(keyOf));
        for (const sp of args.resources.filter((r) => isSecurityPolicy(r.type))) {
            const routeTargets = targets(sp).filter((t) => ROUTE_KINDS.includes(t.kind));
            const routeSelectors = (sp.props.spec?.targetSelectors ?? []).filter((s: any) => ROUTE_KINDS.includes(s.kind));
            if (routeTargets.length === 0 && routeSelectors.length === 0) continue;
            const what = [...routeTargets.map((t) => `${t.kind} ${t.name}`), ...routeSelectors.map((s: any) => `${s.kind} selector`)].join(
                ", ",
            );
            if (!sp.props.spec?.mergeType)
                report(
                    `SecurityPolicy ${keyOf(sp)} targets ${what} without mergeType: it replaces the Gateway's ext_authz on those routes.`,
                    sp.urn,
                );
            else if (extAuthOf(sp))
                report(
                    `SecurityPolicy ${keyOf(sp)} targets ${what} and redefines extAuth: route-level ext_authz replaces the Gateway's auth service.`,
                    sp.urn,
                );
            for (const t of routeTargets) {
                if (t.kind === "HTTPRoute" && generated.has(`${nsOf(sp)}/${t.name}`)) {
                    report(
                        `SecurityPolicy ${keyOf(sp)} targets HTTPRoute ${t.name}, which the AI Gateway generates from the AIGatewayRoute of that name: it is evaluated before the model is known and cannot scope models (ai-gateway#1474).`,
                        sp.urn,
                    );
                }
            }
        }
    },
};

/**
 * Smallest `bodyToExtAuth.maxRequestBytes` accepted: 4 MiB. A 100k-token prompt is ~0.4-0.8 MB of JSON and
 * coding-agent turns reach 2 MB; 64 KiB produced 413s before authorization (silogen/cluster-forge#832).
 */
export const MIN_EXT_AUTH_BODY_BYTES = 4 * 1024 * 1024;

/**
 * The body must reach the auth service (it reads `model` itself: ext_authz runs before the AI Gateway parses
 * the body) and fit the buffers: a body over `maxRequestBytes` or the connection `bufferLimit` (Envoy default
 * 32 KiB) is a 413 before authorization (ai-gateway#827).
 */
export const requestBodyLimits: StackValidationPolicy = {
    name: "gateway-request-body-limits",
    description: `On every listener carrying AIGatewayRoutes, the effective ext_authz forwards the body (bodyToExtAuth.maxRequestBytes >= ${MIN_EXT_AUTH_BODY_BYTES} bytes) and the effective ClientTrafficPolicy connection.bufferLimit is at least maxRequestBytes.`,
    remediationSteps:
        "Set extAuth.bodyToExtAuth.maxRequestBytes (e.g. 32 MiB) and ClientTrafficPolicy connection.bufferLimit at least as large (e.g. 50Mi).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const ctpAtt = attachmentsOf(args.resources, "ClientTrafficPolicy");
        const spAtt = attachmentsOf(args.resources, "SecurityPolicy");
        const seen = new Set<string>();
        for (const m of modelListeners(args.resources)) {
            if (!m.gw) continue;
            const l = m.listener!.name;
            const sp = effectiveFor(spAtt, m.gateway, l).effective?.policy;
            const ctp = effectiveFor(ctpAtt, m.gateway, l).effective?.policy;
            if (!sp || !extAuthOf(sp)) continue;
            const once = (msg: string, urn?: string) => {
                if (!seen.has(msg)) {
                    seen.add(msg);
                    report(msg, urn);
                }
            };
            const buffer = ctp ? bytesOf(ctp.props.spec?.connection?.bufferLimit) : undefined;
            const max = extAuthOf(sp).bodyToExtAuth?.maxRequestBytes;
            if (typeof max !== "number") {
                once(
                    `SecurityPolicy ${keyOf(sp)}: extAuth.bodyToExtAuth is not set; the auth service cannot read the model or max_tokens from the body.`,
                    sp.urn,
                );
                continue;
            }
            if (max < MIN_EXT_AUTH_BODY_BYTES)
                once(
                    `SecurityPolicy ${keyOf(sp)}: bodyToExtAuth.maxRequestBytes ${max} is below ${MIN_EXT_AUTH_BODY_BYTES}; long prompts would get 413 before authorization.`,
                    sp.urn,
                );
            if (buffer === undefined)
                once(
                    `${listenerLabel(m)}: no ClientTrafficPolicy connection.bufferLimit; Envoy's 32 KiB default answers 413 to any larger prompt.`,
                    ctp?.urn ?? sp.urn,
                );
            else if (buffer < max)
                once(
                    `ClientTrafficPolicy ${keyOf(ctp!)}: connection.bufferLimit (${buffer} bytes) is below bodyToExtAuth.maxRequestBytes (${max}) of SecurityPolicy ${keyOf(sp)}.`,
                    ctp!.urn,
                );
        }
    },
};

/**
 * ext_authz must point at something that exists: a missing backend once made Envoy Gateway drop ext_authz
 * from the config while the route kept serving (envoyproxy/gateway#5366). Services need the port; a
 * cross-namespace reference needs a ReferenceGrant.
 */
export const extAuthBackendResolves: StackValidationPolicy = {
    name: "gateway-extauth-backend-resolves",
    description:
        "Every SecurityPolicy extAuth backendRef must resolve to a Service (with that port) or Backend defined in the same stack, with a ReferenceGrant when cross-namespace.",
    remediationSteps:
        "Deploy the auth service Service in this stack and reference it by name, namespace and port; add a ReferenceGrant in its namespace for cross-namespace references.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const services = new Map(ofKind(args.resources, GROUPS.core, "Service").map((s) => [keyOf(s), s] as const));
        const backends = new Set(ofKind(args.resources, GROUPS.eg, "Backend").map(keyOf));
        const grants = ofKind(args.resources, GROUPS.gwapi, "ReferenceGrant");
        for (const sp of args.resources.filter((r) => isSecurityPolicy(r.type))) {
            const ea = extAuthOf(sp);
            if (!ea) continue;
            const svc = ea.http ?? ea.grpc ?? {};
            const refs = [...(svc.backendRef ? [svc.backendRef] : []), ...(svc.backendRefs ?? [])];
            if (refs.length === 0) report(`SecurityPolicy ${keyOf(sp)}: extAuth has no backendRef.`, sp.urn);
            for (const ref of refs) {
                const kind = ref.kind ?? "Service";
                const ns = ref.namespace ?? nsOf(sp);
                const key = `${ns}/${ref.name}`;
                if (kind === "Service") {
                    const s = services.get(key);
                    if (!s) {
                        report(`SecurityPolicy ${keyOf(sp)}: extAuth backendRef Service ${key} is not defined in this stack.`, sp.urn);
                        continue;
                    }
                    const ports: any[] = s.props.spec?.ports ?? [];
                    if (!ports.some((p) => p.port === ref.port))
                        report(
                            `SecurityPolicy ${keyOf(sp)}: Service ${key} has no port ${ref.port ?? "(none given)"} (ports: ${ports.map((p) => p.port).join(", ") || "none"}).`,
                            sp.urn,
                        );
                } else if (kind === "Backend") {
                    if (!backends.has(key))
                        report(`SecurityPolicy ${keyOf(sp)}: extAuth backendRef Backend ${key} is not defined in this stack.`, sp.urn);
                } else {
                    report(
                        `SecurityPolicy ${keyOf(sp)}: extAuth backendRef kind ${kind} cannot be checked in this stack; use a Service or Backend.`,
                        sp.urn,
                    );
                }
                if (ns !== nsOf(sp)) {
                    const granted = grants.some(
                        (g) =>
                            nsOf(g) === ns &&
                            (g.props.spec?.from ?? []).some(
                                (f: any) => f.group === GROUPS.eg && f.kind === "SecurityPolicy" && f.namespace === nsOf(sp),
                            ) &&
                            (g.props.spec?.to ?? []).some(
                                (t: any) =>
                                    (t.group ?? "") === (kind === "Backend" ? GROUPS.eg : "") &&
                                    t.kind === kind &&
                                    (!t.name || t.name === ref.name),
                            ),
                    );
                    if (!granted)
                        report(
                            `SecurityPolicy ${keyOf(sp)}: cross-namespace extAuth backendRef ${kind} ${key} has no ReferenceGrant in namespace ${ns}.`,
                            sp.urn,
                        );
                }
            }
        }
    },
};
