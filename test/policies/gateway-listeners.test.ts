/**
 * Auth per listener, as Envoy Gateway applies it. The expectations follow the translator
 * (envoyproxy/gateway internal/gatewayapi/securitypolicy.go `ProcessSecurityPolicies`: listener-level
 * (Gateway + sectionName) policies are translated before Gateway-level ones; `resolveSecurityPolicyGatewayTargetRef`:
 * a second policy on the same Gateway or listener is Conflicted, "another SecurityPolicy has already attached to
 * it"; clienttrafficpolicy.go the same for ClientTrafficPolicy; policies.go `resolvePolicyTargetsFromSelectors`:
 * targetSelectors match labels, `namespaces.from` Same by default, cross-namespace needs a ReferenceGrant) and
 * Gateway API (a parentRef without sectionName attaches to every listener that admits it).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { gatewayPolicies } from "../../policies/gateway";
import { allPolicies } from "../../policies/policies";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";

let base: CapturedResource[];
beforeAll(async () => {
    base = (await runHubAndSpoke("spoke-hn1")).spoke.resources;
});

const G = "gateway.networking.k8s.io";
const byName = (rs: CapturedResource[], n: string) => {
    const r = rs.find((x) => x.name === n);
    if (!r) throw new Error(n);
    return r;
};
/** Applies fn to inputs and outputs of a resource. */
function edit(r: CapturedResource, fn: (o: Record<string, any>) => void): void {
    fn(r.inputs as any);
    fn(r.outputs as any);
}
/** A copy of a captured resource under a new Pulumi and metadata name. */
function copy(r: CapturedResource, name: string, fn: (o: Record<string, any>) => void): CapturedResource {
    const c = structuredClone(r);
    c.name = name;
    c.urn = `${r.urn}-${name}`;
    edit(c, (o) => {
        o.metadata.name = name;
        fn(o);
    });
    return c;
}
function k8s(apiVersion: string, kind: string, name: string, namespace: string, body: Record<string, any>): CapturedResource {
    const [group, version] = apiVersion.split("/");
    const obj = { apiVersion, kind, metadata: { name, namespace }, ...body };
    return {
        urn: `urn:pulumi:spoke-hn1::platform::kubernetes:${group}/${version}:${kind}::${name}`,
        type: `kubernetes:${group}/${version}:${kind}`,
        name,
        parent: "",
        provider: "",
        custom: true,
        remote: false,
        dependencies: [],
        inputs: structuredClone(obj),
        outputs: structuredClone(obj),
    };
}

/** hn1 with a second listener `https` (443) on the Gateway; the AIGatewayRoute's parentRef (no sectionName) attaches to both. */
function twoListeners(): CapturedResource[] {
    const rs = structuredClone(base);
    edit(byName(rs, "agent-router-gateway"), (o) => {
        o.spec.listeners.push({
            name: "https",
            port: 443,
            protocol: "HTTPS",
            allowedRoutes: { namespaces: { from: "Same" } },
            tls: { certificateRefs: [{ name: "llm-tls" }] },
        });
    });
    return rs;
}

/** Replaces the Gateway-level SecurityPolicy and ClientTrafficPolicy with one of each per listener. */
function perListener(rs: CapturedResource[]): CapturedResource[] {
    const sp = byName(rs, "agent-router-security"),
        ctp = byName(rs, "agent-router-client-traffic");
    const section = (l: string) => (o: Record<string, any>) => {
        o.spec.targetRefs = [{ group: G, kind: "Gateway", name: "llm", sectionName: l }];
    };
    return [
        ...rs.filter((r) => r !== sp && r !== ctp),
        copy(sp, "llm-auth-http", section("http")),
        copy(sp, "llm-auth-https", section("https")),
        copy(ctp, "llm-client-http", section("http")),
        copy(ctp, "llm-client-https", section("https")),
    ];
}

const mandatory = async (rs: CapturedResource[], policies = gatewayPolicies) =>
    (await runPolicies(policies, rs)).mandatory.map((f) => `${f.policyName}: ${f.message}`);

describe("effective SecurityPolicy / ClientTrafficPolicy per listener", () => {
    it("compliant: one fail-closed ext_authz SecurityPolicy and one stripping ClientTrafficPolicy per listener", async () => {
        expect(await mandatory(perListener(twoListeners()))).toEqual([]);
        // The whole pack says nothing more about it than about the repo's own spoke.
        expect(await mandatory(perListener(twoListeners()), allPolicies)).toEqual(await mandatory(structuredClone(base), allPolicies));
    });
    it("compliant: one Gateway-level pair covers both listeners", async () => {
        expect(await mandatory(twoListeners())).toEqual([]);
    });
    it("violating: policies only on listener http leave listener https without auth and without the strip", async () => {
        const rs = perListener(twoListeners()).filter((r) => !/-https$/.test(r.name));
        const m = await mandatory(rs);
        expect(m).toContain(
            "gateway-one-extauth-security-policy: Gateway llm-gateway/llm listener https carries AIGatewayRoutes (llm-gateway/llm-models-0) but no SecurityPolicy applies to it: requests reach the models unauthenticated.",
        );
        expect(m).toContain(
            "gateway-early-identity-header-strip: Gateway llm-gateway/llm listener https has no ClientTrafficPolicy: client-sent x-ai-eg-model and identity headers reach route matching and ext_authz.",
        );
    });
    it("violating: a listener-level SecurityPolicy without extAuth replaces the Gateway-level ext_authz on that listener (no merge)", async () => {
        const rs = twoListeners();
        rs.push(
            k8s("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy", "https-cors", "llm-gateway", {
                spec: {
                    targetRefs: [{ group: G, kind: "Gateway", name: "llm", sectionName: "https" }],
                    cors: { allowOrigins: ["https://app.example"] },
                },
            }),
        );
        expect(await mandatory(rs)).toEqual([
            "gateway-one-extauth-security-policy: SecurityPolicy llm-gateway/https-cors is the effective policy of Gateway llm-gateway/llm listener https (listener level) and has no extAuth: nothing checks API keys, model access or limits there; it replaces the Gateway-level ext_authz of llm-gateway/llm-auth on this listener.",
        ]);
    });
    it("violating: two SecurityPolicies on one listener are Conflicted; the oldest (creationTimestamp) is the effective one", async () => {
        const rs = perListener(twoListeners());
        const old = k8s("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy", "zz-old", "llm-gateway", {
            spec: { targetRefs: [{ group: G, kind: "Gateway", name: "llm", sectionName: "http" }], cors: { allowOrigins: ["*"] } },
        });
        edit(old, (o) => {
            o.metadata.creationTimestamp = "2026-01-01T00:00:00Z";
        });
        edit(byName(rs, "llm-auth-http"), (o) => {
            o.metadata.creationTimestamp = "2026-06-01T00:00:00Z";
        });
        const m = await mandatory([...rs, old]);
        expect(m).toContain(
            "gateway-one-extauth-security-policy: Gateway llm-gateway/llm listener http: SecurityPolicy llm-gateway/llm-auth-http (targetRefs llm/http) and llm-gateway/zz-old both attach at listener level; Envoy Gateway applies only the oldest and marks the rest Conflicted. Keep exactly one.",
        );
        expect(m).toContain(
            "gateway-one-extauth-security-policy: SecurityPolicy llm-gateway/zz-old is the effective policy of Gateway llm-gateway/llm listener http (listener level) and has no extAuth: nothing checks API keys, model access or limits there.",
        );
    });
    it("targetSelectors: a label selector attaches at Gateway level; from another namespace it needs namespaces.from and a ReferenceGrant", async () => {
        const rs = twoListeners();
        edit(byName(rs, "agent-router-gateway"), (o) => {
            o.metadata.labels = { ...(o.metadata.labels ?? {}), "inference-platform.io/llm-gateway": "true" };
        });
        const sel = (o: Record<string, any>) => {
            delete o.spec.targetRefs;
            o.spec.targetSelectors = [{ group: G, kind: "Gateway", matchLabels: { "inference-platform.io/llm-gateway": "true" } }];
        };
        edit(byName(rs, "agent-router-security"), sel);
        expect(await mandatory(rs)).toEqual([]);
        // The same policy moved to another namespace: Same (default) no longer matches, so nothing protects the listeners.
        edit(byName(rs, "agent-router-security"), (o) => {
            o.metadata.namespace = "platform-auth";
        });
        expect((await mandatory(rs)).filter((x) => x.includes("no SecurityPolicy applies"))).toHaveLength(2);
        // namespaces.from All plus a ReferenceGrant in the Gateway's namespace attaches it again.
        edit(byName(rs, "agent-router-security"), (o) => {
            o.spec.targetSelectors[0].namespaces = { from: "All" };
        });
        const grant = k8s("gateway.networking.k8s.io/v1beta1", "ReferenceGrant", "auth-to-gateway", "llm-gateway", {
            spec: {
                from: [{ group: "gateway.envoyproxy.io", kind: "SecurityPolicy", namespace: "platform-auth" }],
                to: [{ group: G, kind: "Gateway" }],
            },
        });
        expect((await mandatory(rs, [gatewayPolicies.find((p) => p.name === "gateway-one-extauth-security-policy")!])).length).toBe(2);
        expect(await mandatory([...rs, grant], [gatewayPolicies.find((p) => p.name === "gateway-one-extauth-security-policy")!])).toEqual(
            [],
        );
    });
    it("a parentRef with sectionName attaches only to that listener, so a policy on the other listener is not required", async () => {
        const rs = perListener(twoListeners()).filter((r) => !/-https$/.test(r.name));
        edit(byName(rs, "agent-router-route-llm-models-0"), (o) => {
            o.spec.parentRefs = o.spec.parentRefs.map((p: any) => ({ ...p, sectionName: "http" }));
        });
        expect(await mandatory(rs)).toEqual([]);
    });
});

describe("gateway-identity-headers-only-from-extauth", () => {
    const only = async (rs: CapturedResource[]) =>
        (await mandatory(rs)).filter((m) => m.startsWith("gateway-identity-headers-only-from-extauth"));
    it("compliant: the repo's spoke, and a RequestHeaderModifier on an ordinary header", async () => {
        const route = k8s("gateway.networking.k8s.io/v1", "HTTPRoute", "docs", "llm-gateway", {
            spec: {
                parentRefs: [{ name: "llm" }],
                rules: [
                    {
                        filters: [{ type: "RequestHeaderModifier", requestHeaderModifier: { set: [{ name: "x-docs", value: "1" }] } }],
                        backendRefs: [{ name: "docs", port: 80 }],
                    },
                ],
            },
        });
        expect(await only([...structuredClone(base), route])).toEqual([]);
    });
    it("violating: HTTPRoute RequestHeaderModifier, ClientTrafficPolicy earlyRequestHeaders.add, AIGatewayRoute headerMutation, JWT claimToHeaders, EnvoyPatchPolicy", async () => {
        const rs = structuredClone(base);
        edit(byName(rs, "agent-router-client-traffic"), (o) => {
            o.spec.headers.earlyRequestHeaders.add = [{ name: "x-platform-team", value: "ops" }];
        });
        edit(byName(rs, "agent-router-route-llm-models-0"), (o) => {
            o.spec.rules[0].backendRefs[0].headerMutation = { set: [{ name: "X-Platform-Tenant", value: "acme" }] };
        });
        const route = k8s("gateway.networking.k8s.io/v1", "HTTPRoute", "side", "llm-gateway", {
            spec: {
                parentRefs: [{ name: "llm" }],
                rules: [
                    {
                        filters: [
                            { type: "RequestHeaderModifier", requestHeaderModifier: { add: [{ name: "x-platform-key-id", value: "k1" }] } },
                        ],
                    },
                ],
            },
        });
        const jwt = k8s("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy", "jwt", "llm-gateway", {
            spec: {
                targetRefs: [{ group: G, kind: "HTTPRoute", name: "side" }],
                mergeType: "StrategicMerge",
                jwt: {
                    providers: [
                        {
                            name: "idp",
                            remoteJWKS: { uri: "https://idp/jwks" },
                            claimToHeaders: [{ claim: "org", header: "x-platform-tenant" }],
                        },
                    ],
                },
            },
        });
        const epp = k8s("gateway.envoyproxy.io/v1alpha1", "EnvoyPatchPolicy", "patch", "llm-gateway", {
            spec: {
                targetRef: { group: G, kind: "Gateway", name: "llm" },
                type: "JSONPatch",
                jsonPatches: [
                    {
                        type: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                        name: "x",
                        operation: {
                            op: "add",
                            path: "/request_headers_to_add/-",
                            value: { header: { key: "x-platform-lease", value: "forever" } },
                        },
                    },
                ],
            },
        });
        const m = await only([...rs, route, jwt, epp]);
        expect(m).toEqual([
            expect.stringContaining(
                "ClientTrafficPolicy llm-gateway/llm-client sets identity header(s) at spec.headers.earlyRequestHeaders.add[0] (x-platform-team)",
            ),
            expect.stringContaining(
                "AIGatewayRoute llm-gateway/llm-models-0 sets identity header(s) at spec.rules[0].backendRefs[0].headerMutation.set[0] (X-Platform-Tenant)",
            ),
            expect.stringContaining(
                "HTTPRoute llm-gateway/side sets identity header(s) at spec.rules[0].filters[0].requestHeaderModifier.add[0] (x-platform-key-id)",
            ),
            expect.stringContaining(
                "SecurityPolicy llm-gateway/jwt sets identity header(s) at spec.jwt.providers[0].claimToHeaders[0].header (x-platform-tenant)",
            ),
            expect.stringContaining("EnvoyPatchPolicy llm-gateway/patch mentions identity header x-platform-lease"),
        ]);
    });
});
