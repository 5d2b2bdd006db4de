import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import {
    PEER_DECLARATION_CONFIGMAP,
    PEER_DECLARATION_KEY,
    PEER_HOP_HEADER,
    PEER_PREFIX,
    peerCaConfigMapName,
} from "../../services/shared/peer";
import { aiRoutes, GROUPS, GW, keyOf, nameOf, nsOf, ofKind } from "../lib/gateway";
import { isHopGuardMatch } from "./routes";

/*
 * Fallback to a peer spoke's gateway: the one backend outside the cluster the gateway path may hold. A peer Backend
 * is accepted only as a TLS-verified connection to the edge of a gateway the hub declares as a peer serving that
 * model (the contract's failover block, rendered as the gateway-peers ConfigMap: lib/failover.ts peerDeclaration),
 * where the peer's own ext_authz re-verifies the tenant's key. Everything else stays refused by the closed shape
 * (policies/gateway/shape.ts) and the Backend target rule.
 */

/** A declared peer (config/failover.ts PeerContractSchema), as the pack reads it. */
interface DeclaredPeer {
    spoke: string;
    hostname: string;
    port: number;
    ca: { kind: "pem"; pem: string } | { kind: "system" };
    models: string[];
}

/** Declared peers per gateway namespace; a declaration that does not parse is a finding. */
function declarations(resources: PolicyResource[]): {
    byNs: Map<string, DeclaredPeer[]>;
    findings: Array<{ message: string; urn: string }>;
} {
    const byNs = new Map<string, DeclaredPeer[]>();
    const findings: Array<{ message: string; urn: string }> = [];
    for (const cm of ofKind(resources, GROUPS.core, "ConfigMap").filter((c) => nameOf(c) === PEER_DECLARATION_CONFIGMAP)) {
        try {
            const doc = JSON.parse(String(cm.props.data?.[PEER_DECLARATION_KEY]));
            const peers = (doc?.peers ?? []) as DeclaredPeer[];
            if (
                !Array.isArray(peers) ||
                peers.some((p) => typeof p?.spoke !== "string" || typeof p?.hostname !== "string" || !Array.isArray(p?.models))
            )
                throw new Error("peers must be [{spoke, hostname, port, ca, models}]");
            byNs.set(nsOf(cm), peers);
        } catch (e) {
            findings.push({
                message: `ConfigMap ${keyOf(cm)} does not hold a peer declaration the pack can read (${(e as Error).message}); every peer Backend in its namespace is refused`,
                urn: cm.urn,
            });
        }
    }
    return { byNs, findings };
}

/** True for a Backend the gateway renders for a peer (lib/failover.ts peerBackend). */
export function isPeerBackendName(name: string): boolean {
    return name.startsWith(PEER_PREFIX);
}

/**
 * Findings on peer Backends and the route rules that send traffic to them (exported for tests):
 * - a peer Backend `peer-<spoke>` is declared (gateway-peers in its namespace names `<spoke>`), has exactly one
 *   endpoint, the declared hostname on the declared port, and `tls` with `sni` = that hostname, never
 *   `insecureSkipVerify`, verified with exactly the declared CA: `caCertificateRefs` to the ConfigMap
 *   `peer-<spoke>-ca` whose `ca.crt` is the declared PEM, or `wellKnownCACertificates: System` for a publicly trusted
 *   peer (Envoy Gateway Backend `spec.tls`: envoyproxy/gateway@v1.9.0 Backend CRD);
 * - a route backendRef to a peer names a peer declared as serving the rule's model, at a priority above every local
 *   backendRef of the rule (a fallback, never a share of normal traffic), removing every trusted identity header
 *   (`headerMutation.remove`; the peer's ext_authz decides from the tenant's own key), never removing the
 *   tenant's `authorization`, and marking the hop (`headerMutation.set` x-llm-peer-hop: the peer then does not
 *   forward it again, so two spokes falling back to each other cannot loop);
 * - only peer backendRefs carry a headerMutation;
 * - a rule with peer backendRefs is preceded in its route by its hop guard (lib/failover.ts withPeerFallback: the
 *   model header AND x-llm-peer-hop present, exactly the rule's local backendRefs), and a hop guard has no peer
 *   backendRef: a forwarded request is served at the peer or fails there, even when the peer's own backend has no
 *   hosts and Envoy's priority spill would send the first attempt straight back.
 */
export function peerFindings(resources: PolicyResource[]): Array<{ message: string; urn: string }> {
    const { byNs, findings: out } = declarations(resources);
    const configMaps = new Map(ofKind(resources, GROUPS.core, "ConfigMap").map((c) => [keyOf(c), c] as const));
    const backendsByKey = new Map(ofKind(resources, GROUPS.eg, "Backend").map((b) => [keyOf(b), b] as const));
    const peerOf = (ns: string, backendName: string) => byNs.get(ns)?.find((p) => `${PEER_PREFIX}${p.spoke}` === backendName);

    for (const b of ofKind(resources, GROUPS.eg, "Backend").filter((x) => isPeerBackendName(nameOf(x)))) {
        const label = `Backend ${keyOf(b)}`;
        const peer = peerOf(nsOf(b), nameOf(b));
        if (!peer) {
            out.push({
                message: `${label} is a peer backend the hub does not declare (no peer "${nameOf(b).slice(PEER_PREFIX.length)}" in ConfigMap ${nsOf(b)}/${PEER_DECLARATION_CONFIGMAP}): authorised model traffic would leave the spoke for a gateway nobody declared`,
                urn: b.urn,
            });
            continue;
        }
        const spec = b.props.spec ?? {};
        const eps: any[] = spec.endpoints ?? [];
        if (eps.length !== 1 || eps[0]?.fqdn?.hostname !== peer.hostname || Number(eps[0]?.fqdn?.port) !== Number(peer.port))
            out.push({
                message: `${label} endpoints ${JSON.stringify(eps)} are not exactly the declared peer gateway ${peer.hostname}:${peer.port}; any other host (the peer's frontends, an internal address) skips the peer's auth`,
                urn: b.urn,
            });
        const tls = spec.tls;
        if (!tls) {
            out.push({
                message: `${label} has no tls: the tenant's key and prompt would cross to ${peer.hostname} in clear text and the peer is not verified; set tls with sni ${peer.hostname} and the declared CA`,
                urn: b.urn,
            });
            continue;
        }
        if (tls.insecureSkipVerify === true)
            out.push({ message: `${label} sets tls.insecureSkipVerify: the peer's certificate is not verified`, urn: b.urn });
        if (tls.sni !== peer.hostname)
            out.push({
                message: `${label} tls.sni is ${JSON.stringify(tls.sni)}, not the declared peer hostname ${peer.hostname} (the name its certificate is verified against)`,
                urn: b.urn,
            });
        const refs: any[] = tls.caCertificateRefs ?? [];
        if (peer.ca.kind === "system") {
            if (tls.wellKnownCACertificates !== "System" || refs.length)
                out.push({
                    message: `${label}: the hub declares ${peer.hostname} with a publicly trusted certificate; verify it with tls.wellKnownCACertificates: System only`,
                    urn: b.urn,
                });
        } else {
            const want = peerCaConfigMapName(peer.spoke);
            const ok =
                !tls.wellKnownCACertificates &&
                refs.length === 1 &&
                (refs[0]?.kind ?? "ConfigMap") === "ConfigMap" &&
                (refs[0]?.group ?? "") === "" &&
                refs[0]?.name === want;
            const cm = configMaps.get(`${nsOf(b)}/${want}`);
            if (!ok)
                out.push({
                    message: `${label}: verify ${peer.hostname} with exactly the declared CA, tls.caCertificateRefs [ConfigMap ${want}] (no wellKnownCACertificates: the system CAs would accept any public certificate for that name)`,
                    urn: b.urn,
                });
            else if (!cm || String(cm.props.data?.["ca.crt"] ?? "").trim() !== peer.ca.pem.trim())
                out.push({
                    message: `${label}: ConfigMap ${nsOf(b)}/${want} ${cm ? "holds a ca.crt other than" : "is missing; it must hold"} the CA the hub declares for ${peer.spoke}`,
                    urn: b.urn,
                });
        }
    }

    const routeNames = new Set(aiRoutes(resources).map(keyOf));
    const routesByKey = new Map(aiRoutes(resources).map((r) => [keyOf(r), r] as const));
    for (const t of ofKind(resources, GROUPS.eg, "BackendTrafficPolicy")) {
        for (const ref of t.props.spec?.targetRefs ?? [])
            if (!routeNames.has(`${nsOf(t)}/${ref?.name}`))
                out.push({
                    message: `BackendTrafficPolicy ${keyOf(t)} targets HTTPRoute ${ref?.name}, which is not the route the AI Gateway generates for an AIGatewayRoute of this stack (same name, same namespace)`,
                    urn: t.urn,
                });
        out.push(...notFoundRetryFindings(t, routesByKey));
    }

    const aiBackends = new Map(ofKind(resources, GROUPS.aigw, "AIServiceBackend").map((a) => [keyOf(a), a] as const));
    const resolvesToPeer = (ns: string, name: string) => {
        const a = aiBackends.get(`${ns}/${name}`);
        const target = a?.props.spec?.backendRef?.name;
        return isPeerBackendName(name) || (typeof target === "string" && isPeerBackendName(target) && backendsByKey.has(`${ns}/${target}`));
    };
    const refKey = (x: any, ns: string) => `${x.namespace ?? ns}/${x.name}/${x.weight ?? ""}/${x.priority ?? 0}`;
    for (const r of aiRoutes(resources)) {
        const rules: any[] = r.props.spec?.rules ?? [];
        rules.forEach((rule: any, i: number) => {
            const label = `AIGatewayRoute ${keyOf(r)} rule ${rule.name ?? i}`;
            const model = rule.matches?.[0]?.headers?.[0]?.value;
            const refs: any[] = rule.backendRefs ?? [];
            const ns = nsOf(r);
            const local = refs.filter((x) => !resolvesToPeer(x.namespace ?? ns, x.name));
            const guard = isHopGuardMatch(rule.matches?.[0]?.headers ?? []);
            if (guard && local.length !== refs.length)
                out.push({
                    message: `${label}: a peer hop guard (${PEER_HOP_HEADER} present) routes to a peer spoke's gateway; a forwarded request must be served locally or fail, never forwarded again (the spokes would loop)`,
                    urn: r.urn,
                });
            if (!guard && local.length !== refs.length) {
                // The hop guard: an earlier rule of this route for the same model, the hop header present, exactly the
                // local backendRefs. Without it a forwarded request whose local backend has no hosts goes to the peer
                // on its first attempt (Envoy priority spill) and bounces between the spokes (upstream/failover.ts).
                const want = local.map((x) => refKey(x, ns)).sort();
                const ok = rules
                    .slice(0, i)
                    .some(
                        (g: any) =>
                            isHopGuardMatch(g.matches?.[0]?.headers ?? []) &&
                            (g.matches ?? []).length === 1 &&
                            g.matches[0].headers[0].value === model &&
                            JSON.stringify((g.backendRefs ?? []).map((x: any) => refKey(x, ns)).sort()) === JSON.stringify(want),
                    );
                if (!ok)
                    out.push({
                        message: `${label}: falls back to a peer spoke but is not preceded, in the same route, by its hop guard (a rule matching ${GW.modelHeader} ${model} AND ${PEER_HOP_HEADER} present, with exactly this rule's local backendRefs); without it a forwarded request whose local backend has no hosts is sent on to the peer again (Envoy priority spill needs no retry) and loops between the spokes`,
                        urn: r.urn,
                    });
            }
            const localTop = Math.max(0, ...local.map((x) => Number(x.priority ?? 0)));
            for (const x of local)
                if (x.headerMutation)
                    out.push({
                        message: `${label}: backendRef ${x.name} (local) carries a headerMutation; only peer backendRefs may, to remove identity headers`,
                        urn: r.urn,
                    });
            for (const x of refs.filter((y) => resolvesToPeer(y.namespace ?? ns, y.name))) {
                const aisb = aiBackends.get(`${x.namespace ?? ns}/${x.name}`);
                const backendName = aisb?.props.spec?.backendRef?.name ?? x.name;
                if (backendName !== x.name)
                    out.push({
                        message: `${label}: backendRef ${x.name} resolves to Backend ${backendName}; a peer AIServiceBackend has the name of its peer Backend`,
                        urn: r.urn,
                    });
                const peer = peerOf(x.namespace ?? ns, backendName);
                if (!peer) continue; // the Backend finding names the undeclared peer
                if (!peer.models.includes(model))
                    out.push({
                        message: `${label}: falls back to peer ${peer.spoke} for ${model}, which the hub does not declare that peer serves (declared: ${peer.models.join(", ")})`,
                        urn: r.urn,
                    });
                const prio = Number(x.priority ?? 0);
                if (!(prio > localTop) || local.length === 0)
                    out.push({
                        message: `${label}: peer backendRef ${x.name} has priority ${prio}; a peer is a fallback, at a priority above every local backendRef (${localTop})`,
                        urn: r.urn,
                    });
                const removed = new Set(((x.headerMutation?.remove ?? []) as string[]).map((h) => String(h).toLowerCase()));
                const kept = GW.identityHeaders.filter((h) => !removed.has(h));
                if (kept.length)
                    out.push({
                        message: `${label}: peer backendRef ${x.name} forwards trusted identity header(s) ${kept.join(", ")}; remove them (headerMutation.remove) so the peer's auth decides from the tenant's own key`,
                        urn: r.urn,
                    });
                const hop = ((x.headerMutation?.set ?? []) as Array<{ name?: string }>).some(
                    (h) => String(h?.name).toLowerCase() === PEER_HOP_HEADER,
                );
                if (!hop)
                    out.push({
                        message: `${label}: peer backendRef ${x.name} does not set ${PEER_HOP_HEADER}; without it the peer may fall back to this spoke again and the request loops between the two gateways`,
                        urn: r.urn,
                    });
                if (removed.has("authorization"))
                    out.push({
                        message: `${label}: peer backendRef ${x.name} removes authorization: the peer's auth needs the tenant's own key`,
                        urn: r.urn,
                    });
            }
        });
    }
    return out;
}

/**
 * A retry on 404 (the closed shape allows no other 4xx): only on routes where every rule is a peer-enabled model rule
 * (one Exact x-ai-eg-model match, a peer backendRef) or a hop guard (no peer backendRef). There a local 404 is Dynamo's
 * model_not_found with every worker gone (one exact model per rule, so never a wrong name) and the retry walks to the
 * peer; a forwarded request takes the peer's hop guard and its 404 is final. On a route that also holds a model without
 * peers, a 404 would be retried against the same frontend, or mean something else.
 */
function notFoundRetryFindings(t: PolicyResource, routesByKey: Map<string, PolicyResource>): Array<{ message: string; urn: string }> {
    const codes = ((t.props.spec?.retry?.retryOn?.httpStatusCodes ?? []) as unknown[]).map(Number);
    if (!codes.includes(404)) return [];
    const out: Array<{ message: string; urn: string }> = [];
    for (const ref of t.props.spec?.targetRefs ?? []) {
        const r = routesByKey.get(`${nsOf(t)}/${ref?.name}`);
        if (!r) continue; // the target finding names it
        const bad = ((r.props.spec?.rules ?? []) as any[]).flatMap((rule: any, i: number) => {
            const hs: any[] = rule.matches?.length === 1 ? (rule.matches[0].headers ?? []) : [];
            const peers = ((rule.backendRefs ?? []) as any[]).filter((x) => isPeerBackendName(String(x?.name))).length;
            const modelRule =
                hs.length === 1 && String(hs[0]?.name).toLowerCase() === GW.modelHeader && (hs[0]?.type ?? "Exact") === "Exact";
            const ok = (modelRule && peers > 0) || (isHopGuardMatch(hs) && peers === 0);
            return ok ? [] : [String(rule.name ?? i)];
        });
        if (bad.length)
            out.push({
                message: `BackendTrafficPolicy ${keyOf(t)} retries 404 on AIGatewayRoute ${keyOf(r)}, whose rule(s) ${bad.join(", ")} are not a peer-enabled model rule (one exact ${GW.modelHeader} match, a peer backendRef) or its hop guard; a 404 may fall back to a peer only where it can mean nothing but "this model has no workers here"`,
                urn: t.urn,
            });
    }
    return out;
}

/** Peer fallback only as a TLS-verified, declared, auth-preserving backend. */
export const peerFallbackVerified: StackValidationPolicy = {
    name: "gateway-peer-fallback-verified",
    description:
        "A backend outside the cluster is allowed only as a fallback to a peer spoke's gateway the hub declares as serving the model (ConfigMap gateway-peers): one endpoint, the declared hostname on 443, TLS with SNI and exactly the declared CA (never insecureSkipVerify), at a priority above the local backends, with every trusted identity header removed and the tenant's authorization kept, so the peer's own ext_authz re-verifies the tenant; every rule with peers is preceded by its hop guard (model header AND x-llm-peer-hop present, local backends only), so a forwarded request is never forwarded again. A retry never fires on a 4xx except 404, and 404 only on a route whose every rule is a peer-enabled model rule or its hop guard (Dynamo's model_not_found when the model has no workers).",
    remediationSteps:
        "Declare the fallback in the hub file (platform:endpoints[i].fallback) and let lib/failover.ts render the peer objects; give the peer spoke's file platform:gateway.listener.reachable.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        for (const f of peerFindings(args.resources)) report(`${f.message}.`, f.urn);
    },
};
