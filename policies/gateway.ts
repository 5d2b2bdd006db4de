import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import {
    aiRoutes, bytesOf, chartReleases, cmpSemver, gatewayUrn, GROUPS, GW, keyOf, llmGateways, modelNamespaces, nameOf, nsOf, ofKind,
    routeGateways, secondsOf, selectsDynamo, semver, stripMatcher, targets, targetsGateway,
} from "./lib/gateway";
import { aiGatewayMinimum, gatewayCompatibleSets } from "../upstream/gateway";
import { Attachment, effectiveFor, gatewayAttachments, listenerLabel, modelListeners, ModelListener } from "./lib/attachment";

/**
 * Gateway policies (DESIGN §5; failure reports in reference/gateway-failures.md, cited per policy as GF#n).
 * Stack policies read resource outputs; for Kubernetes objects those are the applied object.
 */

const isSecurityPolicy = (type: string) => type.startsWith(`kubernetes:${GROUPS.eg}/`) && type.endsWith(":SecurityPolicy");
const ROUTE_KINDS = ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"];

function extAuthOf(sp: PolicyResource): any { return sp.props.spec?.extAuth; }

/**
 * ext_authz must fail closed with an explicit status. `failOpen: true` lets every request through when the
 * auth service is down, and since envoyproxy/gateway#6512 even skips ext_authz entirely when its config is
 * invalid (GF#1). Without `statusOnError` Envoy answers 403 for an outage, indistinguishable from a denied key.
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
        if (ea.failOpen === true) report(`SecurityPolicy ${keyOf(args as unknown as PolicyResource)}: extAuth.failOpen is true; an unreachable or misconfigured auth service would let every request through (envoyproxy/gateway#6512). Set it to false.`);
        if (typeof ea.statusOnError !== "number") report(`SecurityPolicy ${keyOf(args as unknown as PolicyResource)}: extAuth.statusOnError is not set; Envoy would answer an auth outage with 403, like a denied key. Set it explicitly (503).`);
    },
};

/** Every SecurityPolicy/ClientTrafficPolicy attachment to Gateways and listeners (targetRefs + targetSelectors). */
function attachmentsOf(resources: PolicyResource[], kind: "SecurityPolicy" | "ClientTrafficPolicy" | "BackendTrafficPolicy"): Attachment[] {
    return ofKind(resources, GROUPS.eg, kind).flatMap((r) => gatewayAttachments(r, kind, resources));
}

/** Findings common to both per-listener rules: Gateway not in the stack, conflicts, overrides. */
function attachmentFindings(kind: string, m: ModelListener, e: ReturnType<typeof effectiveFor>, report: (msg: string, urn?: string) => void): void {
    const label = listenerLabel(m);
    for (const c of e.conflicted) {
        report(`${label}: ${kind} ${keyOf(c.policy)} (${c.via}) and ${keyOf(e.effective!.policy)} both attach at ${e.level} level; Envoy Gateway applies only the oldest and marks the rest Conflicted${e.orderUndecided ? " (on a new stack which one is oldest depends on creation order)" : ""}. Keep exactly one.`, c.policy.urn);
    }
}

/**
 * Auth per listener, as Envoy Gateway applies it (lib/attachment.ts): every listener that carries AIGatewayRoutes
 * gets exactly one effective SecurityPolicy, it configures ext_authz, and ext_authz fails closed. A listener-level
 * policy replaces the Gateway-level one on that listener (so a listener-level policy without extAuth switches auth
 * off there), and a second policy at the same level is Conflicted (DESIGN §5; GF#2; envoyproxy/gateway
 * internal/gatewayapi/securitypolicy.go `resolveSecurityPolicyGatewayTargetRef`). One Gateway-level policy, or one
 * policy per listener, both pass.
 */
export const oneGatewaySecurityPolicy: StackValidationPolicy = {
    name: "gateway-one-extauth-security-policy",
    description: "Every Gateway listener carrying AIGatewayRoutes must have exactly one effective SecurityPolicy (listener-level via targetRefs sectionName, else Gateway-level via targetRefs or targetSelectors), configuring a fail-closed extAuth; no second policy at the same level (Conflicted), no listener-level policy without extAuth overriding the Gateway's (envoyproxy/gateway internal/gatewayapi/securitypolicy.go).",
    remediationSteps: "Attach one SecurityPolicy with extAuth to the Gateway (targetRefs: the Gateway), or one per listener (targetRefs with sectionName); remove duplicates.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const att = attachmentsOf(args.resources, "SecurityPolicy");
        for (const m of modelListeners(args.resources)) {
            if (!m.gw) { report(`Gateway ${m.gateway} carries AIGatewayRoutes (${m.routes.join(", ")}) but is not defined in this stack, so the SecurityPolicy of its listeners cannot be computed (fail closed).`, gatewayUrn(args.resources, m.gateway, undefined)); continue; }
            const e = effectiveFor(att, m.gateway, m.listener!.name);
            const label = listenerLabel(m);
            if (!e.effective) { report(`${label} carries AIGatewayRoutes (${m.routes.join(", ")}) but no SecurityPolicy applies to it: requests reach the models unauthenticated.`, m.gw.urn); continue; }
            attachmentFindings("SecurityPolicy", m, e, report);
            const sp = e.effective.policy;
            const ea = extAuthOf(sp);
            if (!ea) {
                const over = e.overridden.filter((o) => extAuthOf(o.policy)).map((o) => keyOf(o.policy));
                report(`SecurityPolicy ${keyOf(sp)} is the effective policy of ${label} (${e.level} level) and has no extAuth: nothing checks API keys, model access or limits there${over.length ? `; it replaces the Gateway-level ext_authz of ${over.join(", ")} on this listener` : ""}.`, sp.urn);
            } else if (ea.failOpen === true) {
                report(`SecurityPolicy ${keyOf(sp)} (effective on ${label}): extAuth.failOpen is true; an unreachable auth service lets every request through.`, sp.urn);
            }
        }
    },
};

/**
 * A route-level SecurityPolicy replaces the Gateway-level one for its routes unless it sets `mergeType`
 * (envoyproxy/gateway#8781, GF#2), and one on an HTTPRoute generated from an AIGatewayRoute is matched on
 * the first, pre-model route pass, so it never scopes models (ai-gateway#1474, GF#3).
 */
export const noRouteSecurityPolicyOverride: StackValidationPolicy = {
    name: "gateway-no-route-security-policy-override",
    description: "No SecurityPolicy may target a route without mergeType, redefine extAuth at route level, or target an HTTPRoute generated from an AIGatewayRoute.",
    remediationSteps: "Remove the route-level SecurityPolicy, or set mergeType: StrategicMerge and leave extAuth to the Gateway-level policy; decide per-model access in the auth service.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const generated = new Set(aiRoutes(args.resources).map(keyOf));
        for (const sp of args.resources.filter((r) => isSecurityPolicy(r.type))) {
            const routeTargets = targets(sp).filter((t) => ROUTE_KINDS.includes(t.kind));
            const routeSelectors = (sp.props.spec?.targetSelectors ?? []).filter((s: any) => ROUTE_KINDS.includes(s.kind));
            if (routeTargets.length === 0 && routeSelectors.length === 0) continue;
            const what = [...routeTargets.map((t) => `${t.kind} ${t.name}`), ...routeSelectors.map((s: any) => `${s.kind} selector`)].join(", ");
            if (!sp.props.spec?.mergeType) report(`SecurityPolicy ${keyOf(sp)} targets ${what} without mergeType: it replaces the Gateway's ext_authz on those routes.`, sp.urn);
            else if (extAuthOf(sp)) report(`SecurityPolicy ${keyOf(sp)} targets ${what} and redefines extAuth: route-level ext_authz replaces the Gateway's auth service.`, sp.urn);
            for (const t of routeTargets) {
                if (t.kind === "HTTPRoute" && generated.has(`${nsOf(sp)}/${t.name}`)) {
                    report(`SecurityPolicy ${keyOf(sp)} targets HTTPRoute ${t.name}, which the AI Gateway generates from the AIGatewayRoute of that name: it is evaluated before the model is known and cannot scope models (ai-gateway#1474).`, sp.urn);
                }
            }
        }
    },
};

/**
 * Client-sent identity headers and `x-ai-eg-model` must be removed before routing and before ext_authz: only
 * ClientTrafficPolicy `earlyRequestHeaders` runs that early (reference/gateway.md §6; ai-gateway#2410, GF#4).
 * Judged per listener on the effective ClientTrafficPolicy (listener-level beats Gateway-level, oldest wins at a
 * level: envoyproxy/gateway internal/gatewayapi/clienttrafficpolicy.go "Unable to target section, another
 * ClientTrafficPolicy has already attached to it"). A header the auth service does not set would otherwise keep
 * the client's value; rate-limit selector headers would be spoofable.
 */
export const earlyIdentityHeaderStrip: StackValidationPolicy = {
    name: "gateway-early-identity-header-strip",
    description: "Every listener carrying AIGatewayRoutes needs exactly one effective ClientTrafficPolicy whose earlyRequestHeaders remove x-ai-eg-model, every x-platform- identity header, every header ext_authz sets, and every rate-limit selector header.",
    remediationSteps: "Add headers.earlyRequestHeaders.remove / removeOnMatch (Prefix x-platform-) to the ClientTrafficPolicy of the Gateway (or of each listener).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const ctpAtt = attachmentsOf(args.resources, "ClientTrafficPolicy");
        const spAtt = attachmentsOf(args.resources, "SecurityPolicy");
        const btpAtt = attachmentsOf(args.resources, "BackendTrafficPolicy");
        for (const m of modelListeners(args.resources)) {
            if (!m.gw) { report(`Gateway ${m.gateway} carries AIGatewayRoutes but is not defined in this stack, so the ClientTrafficPolicy of its listeners cannot be computed (fail closed).`, gatewayUrn(args.resources, m.gateway, undefined)); continue; }
            const l = m.listener!.name;
            const e = effectiveFor(ctpAtt, m.gateway, l);
            const label = listenerLabel(m);
            if (!e.effective) { report(`${label} has no ClientTrafficPolicy: client-sent ${GW.modelHeader} and identity headers reach route matching and ext_authz.`, m.gw.urn); continue; }
            attachmentFindings("ClientTrafficPolicy", m, e, report);
            const ctp = e.effective.policy;
            const stripped = stripMatcher(ctp.props.spec?.headers?.earlyRequestHeaders);
            const required = new Set<string>([GW.modelHeader, ...GW.identityHeaders, `${GW.identityPrefix}any`]);
            const sp = effectiveFor(spAtt, m.gateway, l).effective?.policy;
            for (const h of (sp ? extAuthOf(sp)?.http?.headersToBackend : undefined) ?? []) required.add(String(h).toLowerCase());
            for (const b of btpAtt.filter((x) => x.gateway === m.gateway && (!x.section || x.section === l)).map((x) => x.policy)) {
                for (const rule of b.props.spec?.rateLimit?.global?.rules ?? []) for (const sel of rule.clientSelectors ?? []) for (const h of sel.headers ?? []) required.add(String(h.name).toLowerCase());
            }
            const missing = [...required].filter((h) => !stripped(h)).map((h) => (h === `${GW.identityPrefix}any` ? `${GW.identityPrefix}* (prefix)` : h));
            if (missing.length) report(`ClientTrafficPolicy ${keyOf(ctp)} (effective on ${label}) does not strip ${missing.join(", ")} in headers.earlyRequestHeaders: a client could spoof them.`, ctp.urn);
        }
    },
};

/**
 * Smallest `bodyToExtAuth.maxRequestBytes` accepted: 4 MiB. A 100k-token prompt is ~0.4-0.8 MB of JSON and
 * coding-agent turns reach 2 MB; 64 KiB produced 413s before authorization (silogen/cluster-forge#832, GF#6).
 */
export const MIN_EXT_AUTH_BODY_BYTES = 4 * 1024 * 1024;

/**
 * The body must reach the auth service (it reads `model` itself: ext_authz runs before the AI Gateway parses
 * the body) and fit the buffers: a body over `maxRequestBytes` or the connection `bufferLimit` (Envoy default
 * 32 KiB) is a 413 before authorization (ai-gateway#827, GF#6).
 */
export const requestBodyLimits: StackValidationPolicy = {
    name: "gateway-request-body-limits",
    description: `On every listener carrying AIGatewayRoutes, the effective ext_authz forwards the body (bodyToExtAuth.maxRequestBytes >= ${MIN_EXT_AUTH_BODY_BYTES} bytes) and the effective ClientTrafficPolicy connection.bufferLimit is at least maxRequestBytes.`,
    remediationSteps: "Set extAuth.bodyToExtAuth.maxRequestBytes (e.g. 32 MiB) and ClientTrafficPolicy connection.bufferLimit at least as large (e.g. 50Mi).",
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
            const once = (msg: string, urn?: string) => { if (!seen.has(msg)) { seen.add(msg); report(msg, urn); } };
            const buffer = ctp ? bytesOf(ctp.props.spec?.connection?.bufferLimit) : undefined;
            const max = extAuthOf(sp).bodyToExtAuth?.maxRequestBytes;
            if (typeof max !== "number") { once(`SecurityPolicy ${keyOf(sp)}: extAuth.bodyToExtAuth is not set; the auth service cannot read the model or max_tokens from the body.`, sp.urn); continue; }
            if (max < MIN_EXT_AUTH_BODY_BYTES) once(`SecurityPolicy ${keyOf(sp)}: bodyToExtAuth.maxRequestBytes ${max} is below ${MIN_EXT_AUTH_BODY_BYTES}; long prompts would get 413 before authorization.`, sp.urn);
            if (buffer === undefined) once(`${listenerLabel(m)}: no ClientTrafficPolicy connection.bufferLimit; Envoy's 32 KiB default answers 413 to any larger prompt.`, ctp?.urn ?? sp.urn);
            else if (buffer < max) once(`ClientTrafficPolicy ${keyOf(ctp!)}: connection.bufferLimit (${buffer} bytes) is below bodyToExtAuth.maxRequestBytes (${max}) of SecurityPolicy ${keyOf(sp)}.`, ctp!.urn);
        }
    },
};

/**
 * ext_authz must point at something that exists: a missing backend once made Envoy Gateway drop ext_authz
 * from the config while the route kept serving (envoyproxy/gateway#5366, GF#1). Services need the port; a
 * cross-namespace reference needs a ReferenceGrant.
 */
export const extAuthBackendResolves: StackValidationPolicy = {
    name: "gateway-extauth-backend-resolves",
    description: "Every SecurityPolicy extAuth backendRef must resolve to a Service (with that port) or Backend defined in the same stack, with a ReferenceGrant when cross-namespace.",
    remediationSteps: "Deploy the auth service Service in this stack and reference it by name, namespace and port; add a ReferenceGrant in its namespace for cross-namespace references.",
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
                    if (!s) { report(`SecurityPolicy ${keyOf(sp)}: extAuth backendRef Service ${key} is not defined in this stack.`, sp.urn); continue; }
                    const ports: any[] = s.props.spec?.ports ?? [];
                    if (!ports.some((p) => p.port === ref.port)) report(`SecurityPolicy ${keyOf(sp)}: Service ${key} has no port ${ref.port ?? "(none given)"} (ports: ${ports.map((p) => p.port).join(", ") || "none"}).`, sp.urn);
                } else if (kind === "Backend") {
                    if (!backends.has(key)) report(`SecurityPolicy ${keyOf(sp)}: extAuth backendRef Backend ${key} is not defined in this stack.`, sp.urn);
                } else {
                    report(`SecurityPolicy ${keyOf(sp)}: extAuth backendRef kind ${kind} cannot be checked in this stack; use a Service or Backend.`, sp.urn);
                }
                if (ns !== nsOf(sp)) {
                    const granted = grants.some((g) => nsOf(g) === ns
                        && (g.props.spec?.from ?? []).some((f: any) => f.group === GROUPS.eg && f.kind === "SecurityPolicy" && f.namespace === nsOf(sp))
                        && (g.props.spec?.to ?? []).some((t: any) => (t.group ?? "") === (kind === "Backend" ? GROUPS.eg : "") && t.kind === kind && (!t.name || t.name === ref.name)));
                    if (!granted) report(`SecurityPolicy ${keyOf(sp)}: cross-namespace extAuth backendRef ${kind} ${key} has no ReferenceGrant in namespace ${ns}.`, sp.urn);
                }
            }
        }
    },
};

/**
 * Models are reached only through the LLM Gateway: no LoadBalancer/NodePort/externalIPs Service, Ingress or
 * Gateway API route may lead to Dynamo pods (DESIGN §5 "No Ingress, LoadBalancer or NodePort may point at a
 * model"), or it bypasses ext_authz and every limit.
 */
export const noModelSideDoor: StackValidationPolicy = {
    name: "gateway-no-side-door-to-models",
    description: "No Service of type LoadBalancer/NodePort (or with externalIPs), Ingress, or HTTPRoute/GRPCRoute/TLSRoute/TCPRoute may reach Dynamo pods or the inference namespaces outside the LLM Gateway.",
    remediationSteps: "Keep Dynamo frontends ClusterIP and expose models only through AIGatewayRoutes on the LLM Gateway.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const modelNs = modelNamespaces(args.resources);
        const inModelNs = (host: string) => [...modelNs].some((ns) => host === `${ns}.svc` || host.includes(`.${ns}.svc`));
        for (const s of ofKind(args.resources, GROUPS.core, "Service")) {
            const spec = s.props.spec ?? {};
            const exposed = spec.type === "LoadBalancer" || spec.type === "NodePort" || (spec.externalIPs ?? []).length > 0;
            if (exposed && (modelNs.has(nsOf(s)) || selectsDynamo(spec.selector))) {
                report(`Service ${keyOf(s)} is ${spec.type ?? "ClusterIP with externalIPs"} and reaches model pods (${selectsDynamo(spec.selector) ? "selects Dynamo labels" : `namespace ${nsOf(s)}`}): it bypasses the gateway's auth and limits.`, s.urn);
            }
        }
        for (const i of ofKind(args.resources, GROUPS.net, "Ingress")) {
            if (modelNs.has(nsOf(i))) report(`Ingress ${keyOf(i)} in model namespace ${nsOf(i)} exposes model Services outside the gateway.`, i.urn);
        }
        const backends = new Map(ofKind(args.resources, GROUPS.eg, "Backend").map((b) => [keyOf(b), b] as const));
        for (const kind of ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"]) {
            for (const r of ofKind(args.resources, GROUPS.gwapi, kind)) {
                const refs = (r.props.spec?.rules ?? []).flatMap((rule: any) => rule.backendRefs ?? []);
                for (const ref of refs) {
                    const ns = ref.namespace ?? nsOf(r);
                    const refKind = ref.kind ?? "Service";
                    const b = refKind === "Backend" ? backends.get(`${ns}/${ref.name}`) : undefined;
                    const hosts: string[] = (b?.props.spec?.endpoints ?? []).map((e: any) => e.fqdn?.hostname).filter(Boolean);
                    if ((refKind === "Service" && modelNs.has(ns)) || hosts.some(inModelNs)) {
                        report(`${kind} ${keyOf(r)} routes to ${refKind} ${ns}/${ref.name}${hosts.length ? ` (${hosts.join(", ")})` : ""} in a model namespace: a path to the models that skips the LLM Gateway's AIGatewayRoutes.`, r.urn);
                    }
                }
            }
        }
    },
};

function gatewayHelmValues(resources: PolicyResource[]): Array<{ r: PolicyResource; eg: any }> {
    return chartReleases(resources, "gateway-helm").map((r) => ({ r, eg: r.props.values?.config?.envoyGateway ?? {} }));
}

/**
 * Envoy's global rate limiting fails open by default (`rateLimit.failClosed: false`) and its 20 ms default
 * timeout turns a slow Redis into "no limits" (envoyproxy/ratelimit#462, GF#10). If used, it fails closed.
 * The AI Gateway QuotaPolicy rate limit service likewise (`controller.quotaRateLimitFailureModeDeny`).
 */
export const envoyRateLimitFailClosed: StackValidationPolicy = {
    name: "gateway-envoy-ratelimit-fail-closed",
    description: "If Envoy Gateway global rate limiting (or AI Gateway QuotaPolicy) is used, it must be fail-closed with an explicit timeout.",
    remediationSteps: "In gateway-helm values set config.envoyGateway.rateLimit.failClosed: true and rateLimit.timeout; for QuotaPolicy set ai-gateway-helm controller.quotaRateLimitFailureModeDeny: true.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const releases = gatewayHelmValues(args.resources);
        for (const { r, eg } of releases) {
            if (!eg.rateLimit) continue;
            if (eg.rateLimit.failClosed !== true) report(`Helm release ${r.name} (gateway-helm): config.envoyGateway.rateLimit.failClosed is not true; requests pass unlimited when the rate limit service is down.`, r.urn);
            if (!eg.rateLimit.timeout) report(`Helm release ${r.name} (gateway-helm): config.envoyGateway.rateLimit.timeout is not set (20 ms default).`, r.urn);
        }
        const globalRl = ofKind(args.resources, GROUPS.eg, "BackendTrafficPolicy")
            .filter((b) => b.props.spec?.rateLimit?.global || b.props.spec?.rateLimit?.type === "Global");
        if (globalRl.length && !releases.some(({ eg }) => eg.rateLimit?.failClosed === true)) {
            for (const b of globalRl) report(`BackendTrafficPolicy ${keyOf(b)} uses global rate limiting but no gateway-helm release in this stack sets config.envoyGateway.rateLimit.failClosed: true.`, b.urn);
        }
        const quotas = ofKind(args.resources, GROUPS.aigw, "QuotaPolicy");
        if (quotas.length) {
            const aigw = chartReleases(args.resources, "ai-gateway-helm");
            if (!aigw.some((r) => r.props.values?.controller?.quotaRateLimitFailureModeDeny === true)) {
                for (const q of quotas) report(`QuotaPolicy ${keyOf(q)}: ai-gateway-helm controller.quotaRateLimitFailureModeDeny is not true, so quotas fail open.`, q.urn);
            }
        }
    },
};

/** AI Gateway / Agent Router ↔ Envoy Gateway minor versions built and tested together (upstream/gateway.ts). */
export const COMPATIBLE_SETS = gatewayCompatibleSets;

/**
 * AI Gateway ≥ v1.1.0: before it a client's `x-ai-eg-model` was appended to, not overwritten (ai-gateway#2410,
 * GF#4). CRD and controller charts at the same version, and the pair from one tested set.
 */
export const gatewayChartVersions: StackValidationPolicy = {
    name: "gateway-chart-versions",
    description: "ai-gateway-helm and ai-gateway-crds-helm must be >= v1.1.0 and equal; gateway-helm and gateway-crds-helm equal; AI Gateway and Envoy Gateway from one compatible set.",
    remediationSteps: "Pin all four charts together in config/versions.ts (Agent Router v1.2.0 with Envoy Gateway v1.9.2).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const ai = chartReleases(args.resources, "ai-gateway-helm");
        const aiCrds = chartReleases(args.resources, "ai-gateway-crds-helm");
        const eg = chartReleases(args.resources, "gateway-helm");
        const egCrds = chartReleases(args.resources, "gateway-crds-helm");
        for (const r of [...ai, ...aiCrds]) {
            const v = semver(r.props.version);
            if (!v) report(`Helm release ${r.name} (${r.props.chart}): version ${JSON.stringify(r.props.version)} is not an exact release; pin vX.Y.Z.`, r.urn);
            else if (cmpSemver(v, aiGatewayMinimum.version) < 0) report(`Helm release ${r.name} (${r.props.chart}): ${r.props.version} is below v${aiGatewayMinimum.version.join(".")}, where a client-sent x-ai-eg-model is appended instead of overwritten (ai-gateway#2410).`, r.urn);
        }
        const same = (a: PolicyResource[], b: PolicyResource[], what: string) => {
            for (const x of a) for (const y of b) if (x.props.version !== y.props.version) report(`${what}: ${x.props.chart}@${x.props.version} and ${y.props.chart}@${y.props.version} differ; install the CRDs of the controller's version.`, y.urn);
        };
        same(ai, aiCrds, "AI Gateway");
        same(eg, egCrds, "Envoy Gateway");
        for (const a of ai) for (const e of eg) {
            const av = semver(a.props.version); const ev = semver(e.props.version);
            if (!av || !ev) continue;
            const set = COMPATIBLE_SETS.find((s) => s.aiGateway === `${av[0]}.${av[1]}`);
            if (!set || set.envoyGateway !== `${ev[0]}.${ev[1]}`) {
                report(`AI Gateway ${a.props.version} with Envoy Gateway ${e.props.version} is not a tested set (${COMPATIBLE_SETS.map((s) => `${s.aiGateway}.x↔${s.envoyGateway}.x`).join(", ")}).`, e.urn);
            }
        }
    },
};

/**
 * Envoy Gateway must run the AI Gateway extension hooks and the Backend API, or model routing silently falls
 * to the catch-all 404 (ai-gateway#1944/#1485, GF#5; AIServiceBackend accepts only Backends).
 */
export const aiGatewayExtensionConfigured: StackValidationPolicy = {
    name: "gateway-ai-extension-configured",
    description: "When AIGatewayRoutes exist, a gateway-helm release must enable extensionApis.enableBackend and point extensionManager.service.fqdn at the AI Gateway controller.",
    remediationSteps: "Use lib/gateway.ts envoyGatewayValues() (ai-gateway manifests/envoy-gateway-values.yaml) for the gateway-helm values.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        if (aiRoutes(args.resources).length === 0) return;
        const releases = gatewayHelmValues(args.resources);
        if (releases.length === 0) { report("AIGatewayRoutes exist but this stack installs no gateway-helm release configured for the AI Gateway.", aiRoutes(args.resources)[0].urn); return; }
        for (const { r, eg } of releases) {
            if (eg.extensionApis?.enableBackend !== true) report(`Helm release ${r.name} (gateway-helm): config.envoyGateway.extensionApis.enableBackend is not true; AIServiceBackends cannot reach their Backends.`, r.urn);
            const host = eg.extensionManager?.service?.fqdn?.hostname;
            if (typeof host !== "string" || !host.startsWith("ai-gateway-controller.")) report(`Helm release ${r.name} (gateway-helm): config.envoyGateway.extensionManager.service.fqdn.hostname is ${JSON.stringify(host)}, not the AI Gateway controller; the body-to-model routing filter is never installed.`, r.urn);
            if (!(eg.extensionManager?.hooks?.xdsTranslator?.post ?? []).includes("Route")) report(`Helm release ${r.name} (gateway-helm): extensionManager.hooks.xdsTranslator.post lacks Route.`, r.urn);
        }
    },
};

/** AIGatewayRoute rules cap (CRD maxItems 15; the controller adds the catch-all), GF#5. */
export const aiRouteMaxRules: ResourceValidationPolicy = {
    name: "aigatewayroute-max-15-rules",
    description: "An AIGatewayRoute may have at most 15 rules; larger catalogs must be split across routes.",
    remediationSteps: "Split the rules over several AIGatewayRoutes (lib/gateway.ts aiGatewayRoutes does this).",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:aigateway\.envoyproxy\.io\/[^:]+:AIGatewayRoute$/.test(args.type)) return;
        const n = (args.props.spec?.rules ?? []).length;
        if (n > 15) report(`AIGatewayRoute ${args.props.metadata?.name ?? args.name} has ${n} rules; the CRD allows 15 (one slot is the controller's route-not-found).`);
    },
};

/**
 * Every rule selects its model by an exact `x-ai-eg-model` match, each model once per Gateway: duplicates make
 * the older route win silently (GF#5).
 */
export const aiRouteUniqueModels: StackValidationPolicy = {
    name: "aigatewayroute-unique-models",
    description: "Every AIGatewayRoute rule must match an exact x-ai-eg-model value, unique across all AIGatewayRoutes on the same Gateway.",
    remediationSteps: "Give each model one rule (several backendRefs for several endpoints of the same model).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const seen = new Map<string, string>();
        for (const r of aiRoutes(args.resources)) {
            (r.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
                const label = `AIGatewayRoute ${keyOf(r)} rule ${rule.name ?? i}`;
                const models: string[] = (rule.matches ?? []).flatMap((m: any) => (m.headers ?? [])
                    .filter((h: any) => String(h.name).toLowerCase() === GW.modelHeader && (h.type ?? "Exact") === "Exact").map((h: any) => h.value));
                if (models.length === 0) { report(`${label} has no exact ${GW.modelHeader} match: it would catch requests for other models.`, r.urn); return; }
                for (const gw of routeGateways(r)) for (const m of models) {
                    const k = `${gw}\u0000${m}`;
                    if (seen.has(k)) report(`${label}: model ${m} on Gateway ${gw} is already routed by ${seen.get(k)}.`, r.urn);
                    else seen.set(k, label);
                }
            });
        }
    },
};

/** Shortest whole-request timeout accepted for a model rule: the AI Gateway's 60 s default cuts long streams (CRD `timeouts` doc). */
export const MIN_REQUEST_TIMEOUT_SECONDS = 300;

/** Long streams need an explicit whole-request timeout (GF#5 rule list: "explicit long timeouts.request"). */
export const aiRouteStreamTimeouts: ResourceValidationPolicy = {
    name: "aigatewayroute-long-stream-timeouts",
    description: `Every AIGatewayRoute rule must set timeouts.request explicitly, at least ${MIN_REQUEST_TIMEOUT_SECONDS}s (the 60 s default cuts long streamed completions).`,
    remediationSteps: "Set rules[].timeouts.request (e.g. 1800s) from platform:gateway.requestTimeoutSeconds.",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:aigateway\.envoyproxy\.io\/[^:]+:AIGatewayRoute$/.test(args.type)) return;
        (args.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
            const t = secondsOf(rule.timeouts?.request);
            if (t === undefined) report(`AIGatewayRoute ${args.props.metadata?.name ?? args.name} rule ${rule.name ?? i}: timeouts.request is not set; the AI Gateway's 60 s default cuts long streams.`);
            else if (t < MIN_REQUEST_TIMEOUT_SECONDS) report(`AIGatewayRoute ${args.props.metadata?.name ?? args.name} rule ${rule.name ?? i}: timeouts.request ${rule.timeouts.request} is below ${MIN_REQUEST_TIMEOUT_SECONDS}s.`);
        });
    },
};

/** Credentials never appear in route matches (ai-gateway#1485; GF#3, GF#5). */
export const aiRouteNoSecretHeaderMatch: ResourceValidationPolicy = {
    name: "aigatewayroute-no-secret-header-match",
    description: "No AIGatewayRoute rule may match on a credential header (Authorization, x-api-key, Cookie): the secret sits in the manifest and a wrong key becomes a 404 (ai-gateway#1485).",
    remediationSteps: "Authenticate in the Gateway-level ext_authz; match rules on x-ai-eg-model only.",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!/^kubernetes:aigateway\.envoyproxy\.io\/[^:]+:AIGatewayRoute$/.test(args.type)) return;
        (args.props.spec?.rules ?? []).forEach((rule: any, i: number) => {
            for (const m of rule.matches ?? []) for (const h of m.headers ?? []) {
                if ((GW.secretHeaders as readonly string[]).includes(String(h.name).toLowerCase())) report(`AIGatewayRoute ${args.props.metadata?.name ?? args.name} rule ${rule.name ?? i} matches on credential header ${h.name}.`);
            }
        });
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
        if (args.props.spec?.mergeBackends !== undefined) report(`EnvoyProxy ${args.props.metadata?.name ?? args.name} sets mergeBackends; Agent Router backend resolution breaks with shared clusters.`);
    },
};

/** Fields every metering access log record needs besides the token keys (GF#9). */
export const REQUIRED_ACCESS_LOG_OPERATORS = ["%REQ(X-REQUEST-ID)%", "%RESPONSE_CODE%", "%RESPONSE_FLAGS%", "%RESPONSE_CODE_DETAILS%"];

/**
 * The access log is the metering source: a remote sink (OpenTelemetry or ALS) with JSON fields carrying the
 * request id (idempotency key), response code/flags/details (aborted vs zero tokens) and every
 * `llmRequestCosts` key of the Gateway's routes (GF#9).
 */
export const accessLogUsageFields: StackValidationPolicy = {
    name: "gateway-access-log-usage-fields",
    description: "The EnvoyProxy of each LLM Gateway must ship a JSON access log to an OpenTelemetry/ALS sink including x-request-id, response code/flags/details and every llmRequestCosts key.",
    remediationSteps: "Use services/shared/accesslog.ts meteringAccessLogSetting() in EnvoyProxy spec.telemetry.accessLog.settings.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const proxies = new Map(ofKind(args.resources, GROUPS.eg, "EnvoyProxy").map((p) => [keyOf(p), p] as const));
        const classes = new Map(ofKind(args.resources, GROUPS.gwapi, "GatewayClass").map((c) => [nameOf(c), c] as const));
        for (const [key, gw] of llmGateways(args.resources)) {
            const costKeys = new Set<string>();
            for (const r of aiRoutes(args.resources).filter((x) => routeGateways(x).includes(key))) for (const c of r.props.spec?.llmRequestCosts ?? []) costKeys.add(c.metadataKey);
            const refs: any[] = [];
            const infra = gw?.props.spec?.infrastructure?.parametersRef;
            if (infra?.kind === "EnvoyProxy") refs.push({ ...infra, namespace: nsOf(gw!) });
            const pr = gw ? classes.get(gw.props.spec?.gatewayClassName)?.props.spec?.parametersRef : undefined;
            if (pr?.kind === "EnvoyProxy") refs.push(pr);
            const proxy = refs.map((r) => proxies.get(`${r.namespace ?? "default"}/${r.name}`)).find(Boolean);
            if (!proxy) { report(`Gateway ${key}: no EnvoyProxy in this stack is attached to it (GatewayClass or infrastructure parametersRef), so no access log carries usage to metering.`, gatewayUrn(args.resources, key, gw)); continue; }
            const settings: any[] = proxy.props.spec?.telemetry?.accessLog?.settings ?? [];
            const ok = settings.some((s) => {
                const remote = (s.sinks ?? []).some((k: any) => k.type === "OpenTelemetry" || k.type === "ALS");
                const values = Object.values(s.format?.json ?? {}).map(String);
                const has = (op: string) => values.some((v) => v.includes(op));
                return remote && REQUIRED_ACCESS_LOG_OPERATORS.every(has) && [...costKeys].every((k) => has(`%DYNAMIC_METADATA(${GW.aiMetadataNamespace}:${k})%`));
            });
            if (!ok) {
                report(`EnvoyProxy ${keyOf(proxy)} (Gateway ${key}): no access log setting ships JSON with ${[...REQUIRED_ACCESS_LOG_OPERATORS, ...[...costKeys].map((k) => `%DYNAMIC_METADATA(${GW.aiMetadataNamespace}:${k})%`)].join(", ")} to an OpenTelemetry or ALS sink.`, proxy.urn);
            }
        }
    },
};

/** Keys under which an object names a request header it writes (EG JWT claimToHeaders, credentialInjection, apiKeyAuth/basicAuth forwarding). */
const HEADER_WRITE_KEYS = ["header", "forwardClientIDHeader", "forwardUsernameHeader"];
/** Keys whose subtree mutates responses only (never a request identity header). */
const RESPONSE_KEYS = ["responseHeaderModifier", "lateResponseHeaders", "responseOverride", "responseHeaders"];

/** Places in `spec` that set or add a request header named by `isIdentity` (`set`/`add` lists, header-writing keys). */
function identityWrites(spec: unknown, isIdentity: (h: string) => boolean, path = "spec"): string[] {
    const out: string[] = [];
    const walk = (v: unknown, p: string) => {
        if (Array.isArray(v)) { v.forEach((x, i) => walk(x, `${p}[${i}]`)); return; }
        if (!v || typeof v !== "object") return;
        for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
            if (RESPONSE_KEYS.includes(k)) continue;
            if ((k === "set" || k === "add") && Array.isArray(x)) {
                x.forEach((e: any, i) => { const n = typeof e === "string" ? e : e?.name; if (typeof n === "string" && isIdentity(n)) out.push(`${p}.${k}[${i}] (${n})`); });
                continue;
            }
            if (HEADER_WRITE_KEYS.includes(k) && typeof x === "string" && isIdentity(x)) { out.push(`${p}.${k} (${x})`); continue; }
            walk(x, `${p}.${k}`);
        }
    };
    walk(spec, path);
    return out;
}

/**
 * Identity headers come only from ext_authz. The auth service's verdict reaches the backends as `x-platform-*`
 * headers (and the other headers named in `extAuth.http.headersToBackend`); anything else that writes one of them
 * forges an identity: an HTTPRoute/GRPCRoute RequestHeaderModifier (Gateway API HTTPHeaderFilter set/add), an EG
 * HTTPRouteFilter credentialInjection, ClientTrafficPolicy earlyRequestHeaders/lateRequestHeaders set/add, JWT
 * claimToHeaders, apiKeyAuth forwardClientIDHeader, basicAuth forwardUsernameHeader, AIGatewayRoute backendRefs[]
 * headerMutation and AIServiceBackend headerMutation, BackendTrafficPolicy header settings, and EnvoyPatchPolicy /
 * EnvoyExtensionPolicy (Lua, Wasm) text that names one (raw xDS or code the pack cannot evaluate, so any mention is
 * refused). The early strip removes client copies; these sources run after it.
 */
export const identityHeadersOnlyFromExtAuth: StackValidationPolicy = {
    name: "gateway-identity-headers-only-from-extauth",
    description: "No object other than the ext_authz SecurityPolicy may set or add an identity header (x-platform-*, or any header extAuth.headersToBackend forwards): route RequestHeaderModifier filters, HTTPRouteFilter credentialInjection, ClientTrafficPolicy header set/add, JWT claimToHeaders, apiKeyAuth/basicAuth forwarding headers, AIGatewayRoute/AIServiceBackend headerMutation, BackendTrafficPolicy, EnvoyPatchPolicy and EnvoyExtensionPolicy code.",
    remediationSteps: "Remove the header mutation; identity headers are set only by the auth service through ext_authz headersToBackend.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const names = new Set<string>(GW.identityHeaders.map((h) => h.toLowerCase()));
        const sps = args.resources.filter((r) => isSecurityPolicy(r.type));
        for (const sp of sps) for (const h of extAuthOf(sp)?.http?.headersToBackend ?? []) names.add(String(h).toLowerCase());
        const isIdentity = (h: string) => { const x = h.toLowerCase(); return x.startsWith(GW.identityPrefix) || names.has(x); };
        const groups: string[] = [GROUPS.eg, GROUPS.aigw, GROUPS.gwapi];
        for (const r of args.resources) {
            const g = /^kubernetes:([^/]+)\/[^:]+:(.+)$/.exec(r.type);
            if (!g || !groups.includes(g[1])) continue;
            const kind = g[2];
            const spec = r.props.spec;
            if (!spec) continue;
            if (kind === "EnvoyPatchPolicy" || kind === "EnvoyExtensionPolicy") {
                const text = JSON.stringify(spec).toLowerCase();
                const hit = [...names, GW.identityPrefix].find((h) => text.includes(h));
                if (hit) report(`${kind} ${keyOf(r)} mentions identity header ${hit === GW.identityPrefix ? `${GW.identityPrefix}*` : hit}: raw xDS patches and Lua/Wasm code can set it after ext_authz, which the pack cannot evaluate. Identity headers come only from ext_authz.`, r.urn);
                continue;
            }
            const specForScan = kind === "SecurityPolicy" ? { ...spec, extAuth: undefined } : spec;
            const writes = identityWrites(specForScan, isIdentity);
            if (writes.length) report(`${kind} ${keyOf(r)} sets identity header(s) at ${writes.join(", ")}: identity headers come only from ext_authz (headersToBackend); any other writer forges a tenant, key or lease.`, r.urn);
        }
    },
};

/** The gateway policies of the pack. */
export const gatewayPolicies = [
    extAuthFailClosed, oneGatewaySecurityPolicy, noRouteSecurityPolicyOverride, earlyIdentityHeaderStrip, requestBodyLimits,
    extAuthBackendResolves, noModelSideDoor, envoyRateLimitFailClosed, gatewayChartVersions, aiGatewayExtensionConfigured,
    aiRouteMaxRules, aiRouteUniqueModels, aiRouteStreamTimeouts, aiRouteNoSecretHeaderMatch, envoyProxyNoMergeBackends, accessLogUsageFields,
    identityHeadersOnlyFromExtAuth,
];
