import type { StackValidationPolicy } from "@pulumi/policy";
import { gatewayUrn, GROUPS, GW, keyOf, stripMatcher } from "../lib/gateway";
import { effectiveFor, listenerLabel, modelListeners } from "../lib/attachment";
import { isSecurityPolicy, extAuthOf, attachmentsOf, attachmentFindings } from "./attach";

/* Identity headers: stripped from clients before anything reads them, written only by ext_authz. */

/**
 * Client-sent identity headers and `x-ai-eg-model` must be removed before routing and before ext_authz: only
 * ClientTrafficPolicy `earlyRequestHeaders` runs that early (ai-gateway#2410).
 * Judged per listener on the effective ClientTrafficPolicy (listener-level beats Gateway-level, oldest wins at a
 * level: envoyproxy/gateway internal/gatewayapi/clienttrafficpolicy.go "Unable to target section, another
 * ClientTrafficPolicy has already attached to it"). A header the auth service does not set would otherwise keep
 * the client's value; rate-limit selector headers would be spoofable.
 */
export const earlyIdentityHeaderStrip: StackValidationPolicy = {
    name: "gateway-early-identity-header-strip",
    description: `Every listener carrying AIGatewayRoutes needs exactly one effective ClientTrafficPolicy whose earlyRequestHeaders remove ${GW.modelHeader}, every ${GW.identityPrefix} identity header, every ${GW.dynamoPrefix} routing override, every header ext_authz sets, and every rate-limit selector header.`,
    remediationSteps: `Add headers.earlyRequestHeaders.remove / removeOnMatch (Prefix ${GW.identityPrefix}, Prefix ${GW.dynamoPrefix}) to the ClientTrafficPolicy of the Gateway (or of each listener).`,
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const ctpAtt = attachmentsOf(args.resources, "ClientTrafficPolicy");
        const spAtt = attachmentsOf(args.resources, "SecurityPolicy");
        const btpAtt = attachmentsOf(args.resources, "BackendTrafficPolicy");
        for (const m of modelListeners(args.resources)) {
            if (!m.gw) {
                report(
                    `Gateway ${m.gateway} carries AIGatewayRoutes but is not defined in this stack, so the ClientTrafficPolicy of its listeners cannot be computed (fail closed).`,
                    gatewayUrn(args.resources, m.gateway, undefined),
                );
                continue;
            }
            const l = m.listener!.name;
            const e = effectiveFor(ctpAtt, m.gateway, l);
            const label = listenerLabel(m);
            if (!e.effective) {
                report(
                    `${label} has no ClientTrafficPolicy: client-sent ${GW.modelHeader} and identity headers reach route matching and ext_authz.`,
                    m.gw.urn,
                );
                continue;
            }
            attachmentFindings("ClientTrafficPolicy", m, e, report);
            const ctp = e.effective.policy;
            const stripped = stripMatcher(ctp.props.spec?.headers?.earlyRequestHeaders);
            const required = new Set<string>([
                GW.modelHeader,
                ...GW.identityHeaders,
                ...GW.dynamoHeaders,
                `${GW.identityPrefix}any`,
                `${GW.dynamoPrefix}any`,
            ]);
            const sp = effectiveFor(spAtt, m.gateway, l).effective?.policy;
            const forwarded = new Set<string>(
                ((sp ? extAuthOf(sp)?.http?.headersToBackend : undefined) ?? []).map((h: unknown) => String(h).toLowerCase()),
            );
            const notForwarded = GW.dynamoHeaders.filter((h) => !forwarded.has(h));
            // A listener SecurityPolicy without extAuth is refused on its own (gateway-one-extauth-security-policy).
            if (sp && extAuthOf(sp) && notForwarded.length)
                report(
                    `SecurityPolicy ${keyOf(sp)} (effective on ${label}) does not forward ${notForwarded.join(", ")} from the auth service (extAuth.http.headersToBackend): the platform's clamped priority and derived cache salt would not reach the Dynamo frontend, and the client's own values would (priority and tenant KV isolation inert).`,
                    sp.urn,
                );
            for (const h of (sp ? extAuthOf(sp)?.http?.headersToBackend : undefined) ?? []) required.add(String(h).toLowerCase());
            for (const b of btpAtt.filter((x) => x.gateway === m.gateway && (!x.section || x.section === l)).map((x) => x.policy)) {
                for (const rule of b.props.spec?.rateLimit?.global?.rules ?? [])
                    for (const sel of rule.clientSelectors ?? [])
                        for (const h of sel.headers ?? []) required.add(String(h.name).toLowerCase());
            }
            const missing = [...required]
                .filter((h) => !stripped(h))
                .map((h) =>
                    h.endsWith("-any") && (h === `${GW.identityPrefix}any` || h === `${GW.dynamoPrefix}any`)
                        ? `${h.slice(0, -3)}* (prefix)`
                        : h,
                );
            if (missing.length)
                report(
                    `ClientTrafficPolicy ${keyOf(ctp)} (effective on ${label}) does not strip ${missing.join(", ")} in headers.earlyRequestHeaders: a client could spoof them.`,
                    ctp.urn,
                );
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
        if (Array.isArray(v)) {
            v.forEach((x, i) => walk(x, `${p}[${i}]`));
            return;
        }
        if (!v || typeof v !== "object") return;
        for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
            if (RESPONSE_KEYS.includes(k)) continue;
            if ((k === "set" || k === "add") && Array.isArray(x)) {
                x.forEach((e: any, i) => {
                    const n = typeof e === "string" ? e : e?.name;
                    if (typeof n === "string" && isIdentity(n)) out.push(`${p}.${k}[${i}] (${n})`);
                });
                continue;
            }
            if (HEADER_WRITE_KEYS.includes(k) && typeof x === "string" && isIdentity(x)) {
                out.push(`${p}.${k} (${x})`);
                continue;
            }
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
    description: `No object other than the ext_authz SecurityPolicy may set or add an identity header (${GW.identityPrefix}*, or any header extAuth.headersToBackend forwards): route RequestHeaderModifier filters, HTTPRouteFilter credentialInjection, ClientTrafficPolicy header set/add, JWT claimToHeaders, apiKeyAuth/basicAuth forwarding headers, AIGatewayRoute/AIServiceBackend headerMutation, BackendTrafficPolicy, EnvoyPatchPolicy and EnvoyExtensionPolicy code.`,
    remediationSteps: "Remove the header mutation; identity headers are set only by the auth service through ext_authz headersToBackend.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const names = new Set<string>([...GW.identityHeaders, ...GW.dynamoHeaders].map((h) => h.toLowerCase()));
        const sps = args.resources.filter((r) => isSecurityPolicy(r.type));
        for (const sp of sps) for (const h of extAuthOf(sp)?.http?.headersToBackend ?? []) names.add(String(h).toLowerCase());
        const isIdentity = (h: string) => {
            const x = h.toLowerCase();
            return x.startsWith(GW.identityPrefix) || names.has(x);
        };
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
                if (hit)
                    report(
                        `${kind} ${keyOf(r)} mentions identity header ${hit === GW.identityPrefix ? `${GW.identityPrefix}*` : hit}: raw xDS patches and Lua/Wasm code can set it after ext_authz, which the pack cannot evaluate. Identity headers come only from ext_authz.`,
                        r.urn,
                    );
                continue;
            }
            const specForScan = kind === "SecurityPolicy" ? { ...spec, extAuth: undefined } : spec;
            const writes = identityWrites(specForScan, isIdentity);
            if (writes.length)
                report(
                    `${kind} ${keyOf(r)} sets identity header(s) at ${writes.join(", ")}: identity headers come only from ext_authz (headersToBackend); any other writer forges a tenant, key or lease.`,
                    r.urn,
                );
        }
    },
};
