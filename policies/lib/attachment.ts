import type { PolicyResource } from "@pulumi/policy";
import { aiRoutes, GROUPS, keyOf, nameOf, nsOf, ofKind } from "./gateway";

/**
 * Envoy Gateway policy attachment, computed per (Gateway, listener) the way the translator does it
 * (envoyproxy/gateway internal/gatewayapi/securitypolicy.go `ProcessSecurityPolicies`, clienttrafficpolicy.go
 * `ProcessClientTrafficPolicies`, read at the v1.9 line):
 * - targets come from `targetRefs` (in the policy's namespace, `sectionName` = a listener) and from
 *   `targetSelectors` (kind/group, `matchLabels`/`matchExpressions` on the target's labels, and `namespaces`
 *   `from: Same` (default) | `All` | `Selector`; a target in another namespace also needs a ReferenceGrant in
 *   its namespace: policies.go `resolvePolicyTargetsFromSelectors`, `isCrossNamespaceReferencePermitted`);
 * - listener-level policies (Gateway + sectionName) are translated before Gateway-level ones, so a listener with
 *   its own policy never gets the Gateway-level one (no merge: `mergeType` exists only for route targets);
 * - at one level the first policy wins and every later one is `Conflicted` ("Unable to target Listener ...,
 *   another SecurityPolicy has already attached to it"); policies arrive "already sorted by the provider
 *   layer": oldest `creationTimestamp` first, then namespace/name.
 */

export type PolicyKind = "SecurityPolicy" | "ClientTrafficPolicy" | "BackendTrafficPolicy";

/** A Gateway listener (Gateway API `spec.listeners[]`). */
export interface Listener {
    name: string;
    port?: number;
    protocol?: string;
    allowedRoutes?: Record<string, any>;
}

/** Listeners of a Gateway resource. */
export function listenersOf(gw: PolicyResource): Listener[] {
    return ((gw.props.spec?.listeners ?? []) as any[]).map((l) => ({
        name: String(l.name),
        port: l.port,
        protocol: l.protocol,
        allowedRoutes: l.allowedRoutes,
    }));
}

/** Label selector (`matchLabels` + `matchExpressions`) as Kubernetes evaluates it (apimachinery labels.Selector). */
export function selectorMatches(
    sel:
        | { matchLabels?: Record<string, string>; matchExpressions?: Array<{ key: string; operator: string; values?: string[] }> }
        | undefined,
    labels: Record<string, string>,
): boolean {
    if (!sel) return false;
    for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
    for (const e of sel.matchExpressions ?? []) {
        const has = Object.hasOwn(labels, e.key);
        const vals = e.values ?? [];
        switch (e.operator) {
            case "In":
                if (!has || !vals.includes(labels[e.key])) return false;
                break;
            case "NotIn":
                if (has && vals.includes(labels[e.key])) return false;
                break;
            case "Exists":
                if (!has) return false;
                break;
            case "DoesNotExist":
                if (has) return false;
                break;
            default:
                return false;
        }
    }
    return true;
}

const labelsOf = (r: PolicyResource): Record<string, string> => ({ ...(r.props.metadata?.labels ?? {}) });

/** One resolved attachment of a policy to a Gateway (or one of its listeners). */
export interface Attachment {
    policy: PolicyResource;
    gateway: string;
    section?: string;
    via: string;
}

/** Namespace labels of the stack's Namespace objects. */
function namespaceLabels(resources: PolicyResource[]): Map<string, Record<string, string>> {
    return new Map(ofKind(resources, GROUPS.core, "Namespace").map((n) => [nameOf(n), labelsOf(n)] as const));
}

/** True if a ReferenceGrant in `toNs` lets `from` (policy group/kind/ns) reference the Gateway `toName`. */
function granted(resources: PolicyResource[], fromKind: string, fromNs: string, toNs: string, toName: string): boolean {
    return ofKind(resources, GROUPS.gwapi, "ReferenceGrant").some(
        (g) =>
            nsOf(g) === toNs &&
            (g.props.spec?.from ?? []).some((f: any) => f.group === GROUPS.eg && f.kind === fromKind && f.namespace === fromNs) &&
            (g.props.spec?.to ?? []).some((t: any) => t.group === GROUPS.gwapi && t.kind === "Gateway" && (!t.name || t.name === toName)),
    );
}

/** Gateway attachments of a policy (targetRefs + targetSelectors). */
export function gatewayAttachments(policy: PolicyResource, kind: PolicyKind, resources: PolicyResource[]): Attachment[] {
    const spec = policy.props.spec ?? {};
    const ns = nsOf(policy);
    const out: Attachment[] = [];
    const refs = [...(spec.targetRef ? [spec.targetRef] : []), ...(spec.targetRefs ?? [])];
    for (const t of refs) {
        if (t.kind !== "Gateway" || (t.group ?? GROUPS.gwapi) !== GROUPS.gwapi) continue;
        out.push({
            policy,
            gateway: `${ns}/${t.name}`,
            section: t.sectionName,
            via: `targetRefs ${t.name}${t.sectionName ? `/${t.sectionName}` : ""}`,
        });
    }
    const nsLabels = namespaceLabels(resources);
    (spec.targetSelectors ?? []).forEach((s: any, i: number) => {
        if (s.kind !== "Gateway" || (s.group ?? GROUPS.gwapi) !== GROUPS.gwapi) return;
        for (const gw of ofKind(resources, GROUPS.gwapi, "Gateway")) {
            const gns = nsOf(gw);
            const from = s.namespaces?.from ?? "Same";
            const nsOk =
                from === "All" ||
                (from === "Same" && gns === ns) ||
                (from === "Selector" && selectorMatches(s.namespaces?.selector, nsLabels.get(gns) ?? {}));
            if (!nsOk) continue;
            if (!selectorMatches({ matchLabels: s.matchLabels, matchExpressions: s.matchExpressions }, labelsOf(gw))) continue;
            if (gns !== ns && !granted(resources, kind, ns, gns, nameOf(gw))) continue;
            if (!out.some((a) => a.gateway === keyOf(gw) && !a.section))
                out.push({ policy, gateway: keyOf(gw), via: `targetSelectors[${i}]` });
        }
    });
    return out;
}

/** Provider order: oldest `creationTimestamp` first (absent = not created yet, after the created ones), then namespace/name. */
export function providerOrder(a: PolicyResource, b: PolicyResource): number {
    const ta = a.props.metadata?.creationTimestamp,
        tb = b.props.metadata?.creationTimestamp;
    if (ta && tb && ta !== tb) return Date.parse(ta) - Date.parse(tb);
    if (ta && !tb) return -1;
    if (!ta && tb) return 1;
    return keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0;
}

/** Effective policy of one listener: listener-level candidates first, else Gateway-level; the rest conflicted. */
export interface Effective {
    effective?: Attachment;
    level?: "listener" | "gateway";
    /** Attachments at the winning level that lose (Conflicted); order between them depends on creation order. */
    conflicted: Attachment[];
    /** A Gateway-level attachment that the listener-level one replaces. */
    overridden: Attachment[];
    /** True when the winner is decided only by creation time the stack does not fix (two new objects). */
    orderUndecided: boolean;
}

/**
 * Pure: which of `attachments` (one policy kind, from {@link gatewayAttachments}) Envoy Gateway applies to listener
 * `listener` of Gateway `gateway` (`namespace/name`), as its translator decides (envoyproxy/gateway
 * internal/gatewayapi/securitypolicy.go `ProcessSecurityPolicies`, see this module's comment): attachments naming the
 * listener (`sectionName`) win over Gateway-level ones; at the winning level the oldest by {@link providerOrder}
 * applies and every later one is Conflicted.
 * @returns `effective` undefined (and `level` undefined) when nothing attaches to the listener; `orderUndecided` true
 *   when there is a conflict and the winner has no `creationTimestamp` yet (a new stack: creation order decides).
 *   Never throws.
 */
export function effectiveFor(attachments: Attachment[], gateway: string, listener: string): Effective {
    const mine = attachments.filter((a) => a.gateway === gateway);
    const byOrder = (x: Attachment, y: Attachment) => providerOrder(x.policy, y.policy);
    const L = mine.filter((a) => a.section === listener).sort(byOrder);
    const G = mine.filter((a) => !a.section).sort(byOrder);
    const [win, ...rest] = L.length ? L : G;
    const undecided = rest.length > 0 && !win.policy.props.metadata?.creationTimestamp;
    return {
        effective: win,
        level: win ? (L.length ? "listener" : "gateway") : undefined,
        conflicted: rest,
        overridden: L.length ? G : [],
        orderUndecided: undecided,
    };
}

/** A listener that can reach a model: an AIGatewayRoute (and so its generated HTTPRoute) attaches to it. */
export interface ModelListener {
    gateway: string;
    gw?: PolicyResource;
    listener?: Listener;
    routes: string[];
}

/**
 * Listeners that carry AIGatewayRoutes. A parentRef without sectionName/port attaches to every listener whose
 * protocol carries HTTPRoutes (HTTP/HTTPS) and whose `allowedRoutes` admits the route (Gateway API
 * `ParentReference` and `AllowedRoutes`: `namespaces.from` default Same; `kinds` default by protocol). A
 * Selector namespace filter is taken as admitting (it may, and the pack must not assume it does not).
 */
export function modelListeners(resources: PolicyResource[]): ModelListener[] {
    const gws = new Map(ofKind(resources, GROUPS.gwapi, "Gateway").map((g) => [keyOf(g), g] as const));
    const out = new Map<string, ModelListener>();
    for (const route of aiRoutes(resources)) {
        for (const p of route.props.spec?.parentRefs ?? []) {
            if ((p.kind ?? "Gateway") !== "Gateway") continue;
            const key = `${p.namespace ?? nsOf(route)}/${p.name}`;
            const gw = gws.get(key);
            if (!gw) {
                const id = `${key}\u0000?`;
                const e = out.get(id) ?? { gateway: key, routes: [] };
                e.routes.push(keyOf(route));
                out.set(id, e);
                continue;
            }
            for (const l of listenersOf(gw)) {
                if (p.sectionName && p.sectionName !== l.name) continue;
                if (p.port !== undefined && p.port !== l.port) continue;
                if (!["HTTP", "HTTPS"].includes(String(l.protocol ?? ""))) continue;
                const kinds = (l.allowedRoutes?.kinds ?? []) as Array<{ kind: string }>;
                if (kinds.length && !kinds.some((k) => k.kind === "HTTPRoute")) continue;
                const from = l.allowedRoutes?.namespaces?.from ?? "Same";
                if (from === "Same" && nsOf(route) !== nsOf(gw)) continue;
                const id = `${key}\u0000${l.name}`;
                const e = out.get(id) ?? { gateway: key, gw, listener: l, routes: [] };
                e.routes.push(keyOf(route));
                out.set(id, e);
            }
        }
    }
    return [...out.values()];
}

/** `Gateway ns/name listener l` for messages. */
export function listenerLabel(m: ModelListener): string {
    return `Gateway ${m.gateway} listener ${m.listener?.name ?? "(unknown)"}`;
}
