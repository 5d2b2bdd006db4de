import { versions } from "../../config/versions";
import { beforeAll, describe, expect, it } from "vitest";
import {
    accessLogUsageFields,
    aiGatewayExtensionConfigured,
    aiRouteMaxRules,
    aiRouteNoSecretHeaderMatch,
    aiRouteStreamTimeouts,
    aiRouteUniqueModels,
    earlyIdentityHeaderStrip,
    envoyProxyNoMergeBackends,
    envoyRateLimitFailClosed,
    extAuthBackendResolves,
    extAuthFailClosed,
    gatewayChartVersions,
    gatewayPolicies,
    noModelSideDoor,
    noRouteSecurityPolicyOverride,
    oneGatewaySecurityPolicy,
    requestBodyLimits,
} from "../../policies/gateway";
import { allPolicies } from "../../policies/policies";
import type { Policy } from "@pulumi/policy";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";
import { edit } from "./graph-edit";

/** The real spoke-hn1 graph, rendered once; every test clones it and breaks one thing. */
let base: CapturedResource[];
beforeAll(async () => {
    base = (await runHubAndSpoke("spoke-hn1")).spoke.resources;
});
const graph = () => structuredClone(base);

const drop = (rs: CapturedResource[], name: string) => rs.filter((r) => r.name !== name);

/** A synthetic Kubernetes resource as the harness would capture it. */
function k8s(apiVersion: string, kind: string, name: string, namespace: string | undefined, body: Record<string, any>): CapturedResource {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["core", apiVersion];
    const obj = { apiVersion, kind, metadata: { name, ...(namespace ? { namespace } : {}) }, ...body };
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

async function messages(policy: Policy, rs: CapturedResource[]): Promise<string[]> {
    const r = await runPolicies([policy], rs);
    expect(r.findings.filter((f) => f.enforcementLevel !== "mandatory")).toEqual([]);
    return r.mandatory.map((f) => f.message);
}

describe("gateway policies: registration and the compliant spoke", () => {
    it("all 20 are mandatory, registered in allPolicies, and silent on the repo's spoke", async () => {
        expect(gatewayPolicies.map((p) => p.name)).toEqual([
            "gateway-extauth-fail-closed",
            "gateway-one-extauth-security-policy",
            "gateway-no-route-security-policy-override",
            "gateway-early-identity-header-strip",
            "gateway-request-body-limits",
            "gateway-extauth-backend-resolves",
            "gateway-no-side-door-to-models",
            "gateway-envoy-ratelimit-fail-closed",
            "gateway-chart-versions",
            "gateway-ai-extension-configured",
            "aigatewayroute-max-15-rules",
            "aigatewayroute-unique-models",
            "aigatewayroute-long-stream-timeouts",
            "aigatewayroute-no-secret-header-match",
            "envoyproxy-no-merge-backends",
            "gateway-access-log-usage-fields",
            "gateway-identity-headers-only-from-extauth",
            "gateway-closed-shape",
            "gateway-request-id-generated",
            "gateway-peer-fallback-verified",
        ]);
        for (const p of gatewayPolicies) {
            expect(p.enforcementLevel, p.name).toBe("mandatory");
            expect(
                allPolicies.map((x) => x.name),
                p.name,
            ).toContain(p.name);
        }
        expect((await runPolicies(gatewayPolicies, graph())).findings).toEqual([]);
    });
});

describe("gateway-extauth-fail-closed", () => {
    it("compliant: failOpen false with statusOnError 503", async () => {
        expect(await messages(extAuthFailClosed, graph())).toEqual([]);
    });
    it("violating: failOpen true and no statusOnError", async () => {
        const rs = edit(graph(), "agent-router-security", (o) => {
            o.spec.extAuth.failOpen = true;
            delete o.spec.extAuth.statusOnError;
        });
        expect(await messages(extAuthFailClosed, rs)).toEqual([
            "SecurityPolicy llm-gateway/llm-auth: extAuth.failOpen is true; an unreachable or misconfigured auth service would let every request through (envoyproxy/gateway#6512). Set it to false.",
            "SecurityPolicy llm-gateway/llm-auth: extAuth.statusOnError is not set; Envoy would answer an auth outage with 403, like a denied key. Set it explicitly (503).",
        ]);
    });
});

describe("gateway-one-extauth-security-policy", () => {
    it("compliant: exactly one Gateway-level SecurityPolicy with extAuth", async () => {
        expect(await messages(oneGatewaySecurityPolicy, graph())).toEqual([]);
    });
    it("violating: no SecurityPolicy on the LLM Gateway", async () => {
        expect(await messages(oneGatewaySecurityPolicy, drop(graph(), "agent-router-security"))).toEqual([
            "Gateway llm-gateway/llm listener http carries AIGatewayRoutes (llm-gateway/llm-models-0) but no SecurityPolicy applies to it: requests reach the models unauthenticated.",
        ]);
    });
    it("violating: a second Gateway-level SecurityPolicy without extAuth", async () => {
        const rs = [
            ...graph(),
            k8s("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy", "cors", "llm-gateway", {
                spec: { targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }], cors: { allowOrigins: ["*"] } },
            }),
        ];
        expect(await messages(oneGatewaySecurityPolicy, rs)).toEqual([
            "Gateway llm-gateway/llm listener http: SecurityPolicy llm-gateway/llm-auth (targetRefs llm) and llm-gateway/cors both attach at gateway level; Envoy Gateway applies only the oldest and marks the rest Conflicted (on a new stack which one is oldest depends on creation order). Keep exactly one.",
            "SecurityPolicy llm-gateway/cors is the effective policy of Gateway llm-gateway/llm listener http (gateway level) and has no extAuth: nothing checks API keys, model access or limits there.",
        ]);
    });
});

describe("gateway-no-route-security-policy-override", () => {
    const routeSp = (name: string, spec: Record<string, any>) =>
        k8s("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy", name, "llm-gateway", { spec });
    it("compliant: a merged route-level policy without extAuth on an ordinary HTTPRoute", async () => {
        const rs = [
            ...graph(),
            routeSp("docs-cors", {
                targetRefs: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", name: "docs" }],
                mergeType: "StrategicMerge",
                cors: { allowOrigins: ["https://x"] },
            }),
        ];
        expect(await messages(noRouteSecurityPolicyOverride, rs)).toEqual([]);
    });
    it("violating: a policy on the HTTPRoute generated from an AIGatewayRoute, without mergeType", async () => {
        const rs = [
            ...graph(),
            routeSp("per-model", {
                targetRefs: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", name: "llm-models-0" }],
                apiKeyAuth: { credentialRefs: [{ name: "k" }], extractFrom: [{ headers: ["x-api-key"] }] },
            }),
        ];
        expect(await messages(noRouteSecurityPolicyOverride, rs)).toEqual([
            "SecurityPolicy llm-gateway/per-model targets HTTPRoute llm-models-0 without mergeType: it replaces the Gateway's ext_authz on those routes.",
            "SecurityPolicy llm-gateway/per-model targets HTTPRoute llm-models-0, which the AI Gateway generates from the AIGatewayRoute of that name: it is evaluated before the model is known and cannot scope models (ai-gateway#1474).",
        ]);
    });
    it("violating: mergeType set but extAuth redefined", async () => {
        const rs = [
            ...graph(),
            routeSp("other-auth", {
                targetRefs: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", name: "docs" }],
                mergeType: "JSONMerge",
                extAuth: { http: { backendRefs: [{ name: "x", port: 1 }] } },
            }),
        ];
        expect(await messages(noRouteSecurityPolicyOverride, rs)).toEqual([
            "SecurityPolicy llm-gateway/other-auth targets HTTPRoute docs and redefines extAuth: route-level ext_authz replaces the Gateway's auth service.",
        ]);
    });
});

describe("gateway-early-identity-header-strip", () => {
    it("compliant: names and x-platform- prefix stripped", async () => {
        expect(await messages(earlyIdentityHeaderStrip, graph())).toEqual([]);
    });
    it("violating: one identity header and the prefix match missing", async () => {
        const rs = edit(graph(), "agent-router-client-traffic", (o) => {
            const e = o.spec.headers.earlyRequestHeaders;
            e.remove = e.remove.filter((h: string) => h !== "x-platform-lease");
            delete e.removeOnMatch;
        });
        expect(await messages(earlyIdentityHeaderStrip, rs)).toEqual([
            "ClientTrafficPolicy llm-gateway/llm-client (effective on Gateway llm-gateway/llm listener http) does not strip x-platform-lease, x-platform-* (prefix), x-dynamo-* (prefix) in headers.earlyRequestHeaders: a client could spoof them.",
        ]);
    });
    it("violating: Dynamo's routing overrides (x-dynamo- prefix) not stripped, so a client could pin a worker", async () => {
        const rs = edit(graph(), "agent-router-client-traffic", (o) => {
            const e = o.spec.headers.earlyRequestHeaders;
            e.removeOnMatch = e.removeOnMatch.filter((m: { value: string }) => m.value !== "x-dynamo-");
        });
        expect(await messages(earlyIdentityHeaderStrip, rs)).toEqual([
            "ClientTrafficPolicy llm-gateway/llm-client (effective on Gateway llm-gateway/llm listener http) does not strip x-dynamo-* (prefix) in headers.earlyRequestHeaders: a client could spoof them.",
        ]);
    });
    it("violating: ext_authz that does not forward the Dynamo priority and cache-salt headers", async () => {
        const rs = edit(graph(), "agent-router-security", (o) => {
            o.spec.extAuth.http.headersToBackend = o.spec.extAuth.http.headersToBackend.filter((h: string) => h !== "x-tenant-id");
        });
        expect(await messages(earlyIdentityHeaderStrip, rs)).toEqual([
            expect.stringMatching(
                /^SecurityPolicy llm-gateway\/llm-auth \(effective on Gateway llm-gateway\/llm listener http\) does not forward x-tenant-id from the auth service .* tenant KV isolation inert\)\.$/,
            ),
        ]);
    });
    it("violating: a rate-limit selector header that is not stripped", async () => {
        const rs = [
            ...graph(),
            k8s("gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy", "tenant-rl", "llm-gateway", {
                spec: {
                    targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }],
                    rateLimit: {
                        global: {
                            rules: [
                                {
                                    clientSelectors: [{ headers: [{ name: "x-customer-id", type: "Distinct" }] }],
                                    limit: { requests: 10, unit: "Second" },
                                    shared: true,
                                },
                            ],
                        },
                    },
                },
            }),
        ];
        expect(await messages(earlyIdentityHeaderStrip, rs)).toEqual([
            "ClientTrafficPolicy llm-gateway/llm-client (effective on Gateway llm-gateway/llm listener http) does not strip x-customer-id in headers.earlyRequestHeaders: a client could spoof them.",
        ]);
    });
    it("violating: no ClientTrafficPolicy at all", async () => {
        expect(await messages(earlyIdentityHeaderStrip, drop(graph(), "agent-router-client-traffic"))).toEqual([
            "Gateway llm-gateway/llm listener http has no ClientTrafficPolicy: client-sent x-ai-eg-model and identity headers reach route matching and ext_authz.",
        ]);
    });
});

describe("gateway-request-body-limits", () => {
    it("compliant: 32 MiB body to ext_authz under a 50Mi buffer; equal limits are fine too", async () => {
        expect(await messages(requestBodyLimits, graph())).toEqual([]);
        expect(
            await messages(
                requestBodyLimits,
                edit(graph(), "agent-router-client-traffic", (o) => {
                    o.spec.connection.bufferLimit = "32Mi";
                }),
            ),
        ).toEqual([]);
    });
    it("violating: buffer below the ext_authz body limit", async () => {
        const rs = edit(graph(), "agent-router-client-traffic", (o) => {
            o.spec.connection.bufferLimit = "16Mi";
        });
        expect(await messages(requestBodyLimits, rs)).toEqual([
            "ClientTrafficPolicy llm-gateway/llm-client: connection.bufferLimit (16777216 bytes) is below bodyToExtAuth.maxRequestBytes (33554432) of SecurityPolicy llm-gateway/llm-auth.",
        ]);
    });
    it("violating: 64 KiB body limit and no buffer limit (Envoy default 32 KiB)", async () => {
        let rs = edit(graph(), "agent-router-security", (o) => {
            o.spec.extAuth.bodyToExtAuth.maxRequestBytes = 65536;
        });
        rs = edit(rs, "agent-router-client-traffic", (o) => {
            delete o.spec.connection;
        });
        expect(await messages(requestBodyLimits, rs)).toEqual([
            "SecurityPolicy llm-gateway/llm-auth: bodyToExtAuth.maxRequestBytes 65536 is below 4194304; long prompts would get 413 before authorization.",
            "Gateway llm-gateway/llm listener http: no ClientTrafficPolicy connection.bufferLimit; Envoy's 32 KiB default answers 413 to any larger prompt.",
        ]);
    });
    it("violating: body not forwarded to ext_authz", async () => {
        const rs = edit(graph(), "agent-router-security", (o) => {
            delete o.spec.extAuth.bodyToExtAuth;
        });
        expect(await messages(requestBodyLimits, rs)).toEqual([
            "SecurityPolicy llm-gateway/llm-auth: extAuth.bodyToExtAuth is not set; the auth service cannot read the model or max_tokens from the body.",
        ]);
    });
});

describe("gateway-extauth-backend-resolves", () => {
    it("compliant: the auth Service and port exist in the stack", async () => {
        expect(await messages(extAuthBackendResolves, graph())).toEqual([]);
    });
    it("violating: wrong port, then a Service the stack does not define", async () => {
        const port = edit(graph(), "agent-router-security", (o) => {
            o.spec.extAuth.http.backendRefs[0].port = 9999;
        });
        expect(await messages(extAuthBackendResolves, port)).toEqual([
            "SecurityPolicy llm-gateway/llm-auth: Service llm-gateway/auth has no port 9999 (ports: 8080).",
        ]);
        const missing = edit(graph(), "agent-router-security", (o) => {
            o.spec.extAuth.http.backendRefs[0].name = "authz";
        });
        expect(await messages(extAuthBackendResolves, missing)).toEqual([
            "SecurityPolicy llm-gateway/llm-auth: extAuth backendRef Service llm-gateway/authz is not defined in this stack.",
        ]);
    });
    it("cross-namespace: violating without a ReferenceGrant, compliant with one", async () => {
        const svc = k8s("v1", "Service", "auth", "platform-system", { spec: { type: "ClusterIP", ports: [{ port: 8080 }] } });
        const rs = [
            ...edit(graph(), "agent-router-security", (o) => {
                o.spec.extAuth.http.backendRefs[0].namespace = "platform-system";
            }),
            svc,
        ];
        expect(await messages(extAuthBackendResolves, rs)).toEqual([
            "SecurityPolicy llm-gateway/llm-auth: cross-namespace extAuth backendRef Service platform-system/auth has no ReferenceGrant in namespace platform-system.",
        ]);
        const grant = k8s("gateway.networking.k8s.io/v1beta1", "ReferenceGrant", "auth-from-gateway", "platform-system", {
            spec: {
                from: [{ group: "gateway.envoyproxy.io", kind: "SecurityPolicy", namespace: "llm-gateway" }],
                to: [{ group: "", kind: "Service", name: "auth" }],
            },
        });
        expect(await messages(extAuthBackendResolves, [...rs, grant])).toEqual([]);
    });
});

describe("gateway-no-side-door-to-models", () => {
    it("compliant: ClusterIP frontends, a LoadBalancer elsewhere that selects no Dynamo pod", async () => {
        const rs = [
            ...graph(),
            k8s("v1", "Service", "grafana", "monitoring", {
                spec: { type: "LoadBalancer", selector: { app: "grafana" }, ports: [{ port: 80 }] },
            }),
        ];
        expect(await messages(noModelSideDoor, rs)).toEqual([]);
    });
    it("violating: LoadBalancer in the inference namespace and a NodePort selecting Dynamo pods elsewhere", async () => {
        const rs = [
            ...graph(),
            k8s("v1", "Service", "llama-public", "inference", {
                spec: { type: "LoadBalancer", selector: { "nvidia.com/dynamo-component-type": "frontend" }, ports: [{ port: 8000 }] },
            }),
            k8s("v1", "Service", "debug", "default", {
                spec: { type: "NodePort", selector: { "nvidia.com/dynamo-graph-deployment-name": "llama-70b" }, ports: [{ port: 8000 }] },
            }),
        ];
        expect(await messages(noModelSideDoor, rs)).toEqual([
            "Service inference/llama-public is LoadBalancer and reaches model pods (selects Dynamo labels): it bypasses the gateway's auth and limits.",
            "Service default/debug is NodePort and reaches model pods (selects Dynamo labels): it bypasses the gateway's auth and limits.",
        ]);
    });
    it("violating: an Ingress in the inference namespace, HTTPRoutes to a frontend Service and to the gateway's own Backend", async () => {
        const rs = [
            ...graph(),
            k8s("networking.k8s.io/v1", "Ingress", "llama", "inference", {
                spec: {
                    rules: [
                        {
                            http: {
                                paths: [
                                    {
                                        path: "/",
                                        pathType: "Prefix",
                                        backend: { service: { name: "llama-70b-frontend", port: { number: 8000 } } },
                                    },
                                ],
                            },
                        },
                    ],
                },
            }),
            k8s("gateway.networking.k8s.io/v1", "HTTPRoute", "direct", "default", {
                spec: { rules: [{ backendRefs: [{ name: "llama-70b-frontend", namespace: "inference", port: 8000 }] }] },
            }),
            k8s("gateway.networking.k8s.io/v1", "HTTPRoute", "via-backend", "llm-gateway", {
                spec: { rules: [{ backendRefs: [{ group: "gateway.envoyproxy.io", kind: "Backend", name: "llama-70b" }] }] },
            }),
        ];
        expect(await messages(noModelSideDoor, rs)).toEqual([
            "Ingress inference/llama in model namespace inference exposes model Services outside the gateway.",
            "HTTPRoute default/direct routes to Service inference/llama-70b-frontend in a model namespace: a path to the models that skips the LLM Gateway's AIGatewayRoutes.",
            "HTTPRoute llm-gateway/via-backend routes to Backend llm-gateway/llama-70b (llama-70b-frontend.inference.svc.cluster.local) in a model namespace: a path to the models that skips the LLM Gateway's AIGatewayRoutes.",
        ]);
    });
});

describe("gateway-envoy-ratelimit-fail-closed", () => {
    const btp = k8s("gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy", "rl", "llm-gateway", {
        spec: {
            targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }],
            rateLimit: { global: { rules: [{ limit: { requests: 100, unit: "Second" }, shared: true }] } },
        },
    });
    it("compliant: no Envoy rate limiting; or global rules with failClosed and a timeout", async () => {
        expect(await messages(envoyRateLimitFailClosed, graph())).toEqual([]);
        const rs = [
            ...edit(graph(), "agent-router-envoy-gateway", (o) => {
                o.values.config.envoyGateway.rateLimit = {
                    backend: { type: "Redis", redis: { url: "counters:6379" } },
                    failClosed: true,
                    timeout: "100ms",
                };
            }),
            btp,
        ];
        expect(await messages(envoyRateLimitFailClosed, rs)).toEqual([]);
    });
    it("violating: rate limiting configured fail-open without a timeout", async () => {
        const rs = edit(graph(), "agent-router-envoy-gateway", (o) => {
            o.values.config.envoyGateway.rateLimit = { backend: { type: "Redis", redis: { url: "counters:6379" } } };
        });
        expect(await messages(envoyRateLimitFailClosed, rs)).toEqual([
            "Helm release agent-router-envoy-gateway (gateway-helm): config.envoyGateway.rateLimit.failClosed is not true; requests pass unlimited when the rate limit service is down.",
            "Helm release agent-router-envoy-gateway (gateway-helm): config.envoyGateway.rateLimit.timeout is not set (20 ms default).",
        ]);
    });
    it("violating: a global rate limit policy with Envoy Gateway at its fail-open default", async () => {
        expect(await messages(envoyRateLimitFailClosed, [...graph(), btp])).toEqual([
            "BackendTrafficPolicy llm-gateway/rl uses global rate limiting but no gateway-helm release in this stack sets config.envoyGateway.rateLimit.failClosed: true.",
        ]);
    });
});

describe("gateway-chart-versions", () => {
    it(`compliant: AI Gateway ${versions.aiGateway.version} with Envoy Gateway ${versions.envoyGateway.version}, CRDs at the controllers' versions`, async () => {
        expect(await messages(gatewayChartVersions, graph())).toEqual([]);
    });
    it(`violating: AI Gateway v1.0.0 (before the x-ai-eg-model overwrite fix) with Envoy Gateway ${versions.envoyGateway.version}`, async () => {
        let rs = edit(graph(), "agent-router-ai-gateway", (o) => {
            o.version = "v1.0.0";
        });
        rs = edit(rs, "agent-router-ai-gateway-crds", (o) => {
            o.version = "v1.0.0";
        });
        expect(await messages(gatewayChartVersions, rs)).toEqual([
            "Helm release agent-router-ai-gateway (oci://docker.io/envoyproxy/ai-gateway-helm): v1.0.0 is below v1.1.0, where a client-sent x-ai-eg-model is appended instead of overwritten (ai-gateway#2410).",
            "Helm release agent-router-ai-gateway-crds (oci://docker.io/envoyproxy/ai-gateway-crds-helm): v1.0.0 is below v1.1.0, where a client-sent x-ai-eg-model is appended instead of overwritten (ai-gateway#2410).",
            `AI Gateway v1.0.0 with Envoy Gateway ${versions.envoyGateway.version} is not a tested set (1.0.x↔1.8.x, 1.1.x↔1.8.x, 1.2.x↔1.9.x).`,
        ]);
    });
    it("violating: CRD chart at another version than its controller; an unpinned version", async () => {
        let rs = edit(graph(), "agent-router-gateway-crds", (o) => {
            o.version = "v1.9.0";
        });
        rs = edit(rs, "agent-router-ai-gateway-crds", (o) => {
            o.version = "latest";
        });
        expect(await messages(gatewayChartVersions, rs)).toEqual([
            'Helm release agent-router-ai-gateway-crds (oci://docker.io/envoyproxy/ai-gateway-crds-helm): version "latest" is not an exact release; pin vX.Y.Z.',
            `AI Gateway: oci://docker.io/envoyproxy/ai-gateway-helm@${versions.aiGateway.version} and oci://docker.io/envoyproxy/ai-gateway-crds-helm@latest differ; install the CRDs of the controller's version.`,
            `Envoy Gateway: oci://docker.io/envoyproxy/gateway-helm@${versions.envoyGateway.version} and oci://docker.io/envoyproxy/gateway-crds-helm@v1.9.0 differ; install the CRDs of the controller's version.`,
        ]);
    });
});

describe("gateway-ai-extension-configured", () => {
    it("compliant: extension server and Backend API configured", async () => {
        expect(await messages(aiGatewayExtensionConfigured, graph())).toEqual([]);
    });
    it("violating: Backend API off and the extension manager pointing elsewhere", async () => {
        const rs = edit(graph(), "agent-router-envoy-gateway", (o) => {
            o.values.config.envoyGateway.extensionApis.enableBackend = false;
            o.values.config.envoyGateway.extensionManager.service.fqdn.hostname = "my-extension.default.svc.cluster.local";
        });
        expect(await messages(aiGatewayExtensionConfigured, rs)).toEqual([
            "Helm release agent-router-envoy-gateway (gateway-helm): config.envoyGateway.extensionApis.enableBackend is not true; AIServiceBackends cannot reach their Backends.",
            'Helm release agent-router-envoy-gateway (gateway-helm): config.envoyGateway.extensionManager.service.fqdn.hostname is "my-extension.default.svc.cluster.local", not the AI Gateway controller; the body-to-model routing filter is never installed.',
        ]);
    });
});

/** An AIGatewayRoute on the LLM Gateway with one rule per given model. */
function route(name: string, models: string[], rule: (m: string) => Record<string, any> = () => ({})) {
    return k8s("aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute", name, "llm-gateway", {
        spec: {
            parentRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }],
            llmRequestCosts: [{ metadataKey: "llm_total_token", type: "TotalToken" }],
            rules: models.map((m, i) => ({
                name: `r${i}`,
                matches: [{ headers: [{ type: "Exact", name: "x-ai-eg-model", value: m }] }],
                backendRefs: [{ name: "llama-70b" }],
                timeouts: { request: "900s" },
                ...rule(m),
            })),
        },
    });
}
const models = (n: number) => Array.from({ length: n }, (_, i) => `extra/m${i}`);

describe("aigatewayroute-max-15-rules", () => {
    it("compliant: 15 rules", async () => {
        expect(await messages(aiRouteMaxRules, [...graph(), route("big", models(15))])).toEqual([]);
    });
    it("violating: 16 rules", async () => {
        expect(await messages(aiRouteMaxRules, [...graph(), route("big", models(16))])).toEqual([
            "AIGatewayRoute big has 16 rules; the CRD allows 15 (one slot is the controller's route-not-found).",
        ]);
    });
});

describe("aigatewayroute-unique-models", () => {
    it("compliant: another route with new models on the same Gateway", async () => {
        expect(await messages(aiRouteUniqueModels, [...graph(), route("more", models(2))])).toEqual([]);
    });
    it("violating: a model routed twice, and a rule with no model match", async () => {
        const dup = route("dup", ["Qwen/Qwen3-32B"]);
        const any = route("any", ["x"], () => ({
            matches: [{ headers: [{ type: "RegularExpression", name: "x-ai-eg-model", value: ".*" }] }],
        }));
        expect(await messages(aiRouteUniqueModels, [...graph(), dup, any])).toEqual([
            "AIGatewayRoute llm-gateway/dup rule r0: model Qwen/Qwen3-32B on Gateway llm-gateway/llm is already routed by AIGatewayRoute llm-gateway/llm-models-0 rule qwen-qwen3-32b-45363f1d.",
            'AIGatewayRoute llm-gateway/any rule r0: its match holds headers ["x-ai-eg-model:RegularExpression"]; the pack knows only exactly one header, x-ai-eg-model of type Exact, or that header followed by x-llm-peer-hop RegularExpression ".*" (the peer hop guard).',
        ]);
    });
});

describe("aigatewayroute-long-stream-timeouts", () => {
    it("compliant: 900s", async () => {
        expect(await messages(aiRouteStreamTimeouts, [...graph(), route("t", ["a"])])).toEqual([]);
    });
    it("violating: unset and 60s", async () => {
        const t = route("t", ["a", "b"], () => ({ timeouts: { request: "60s" } }));
        for (const o of [t.inputs, t.outputs] as any[]) delete o.spec.rules[0].timeouts;
        const rs = [...graph(), t];
        expect(await messages(aiRouteStreamTimeouts, rs)).toEqual([
            "AIGatewayRoute t rule r0: timeouts.request is not set; the AI Gateway's 60 s default cuts long streams.",
            "AIGatewayRoute t rule r1: timeouts.request 60s is below 300s.",
        ]);
    });
});

describe("aigatewayroute-no-secret-header-match", () => {
    it("compliant: model header only", async () => {
        expect(await messages(aiRouteNoSecretHeaderMatch, graph())).toEqual([]);
    });
    it("violating: a rule matching an Authorization value", async () => {
        const rs = [
            ...graph(),
            route("keyed", ["a"], (m) => ({
                matches: [
                    {
                        headers: [
                            { type: "Exact", name: "x-ai-eg-model", value: m },
                            { type: "Exact", name: "Authorization", value: "Bearer sk-h200-leaked" },
                        ],
                    },
                ],
            })),
        ];
        expect(await messages(aiRouteNoSecretHeaderMatch, rs)).toEqual([
            "AIGatewayRoute keyed rule r0 matches on credential header Authorization.",
        ]);
    });
});

describe("envoyproxy-no-merge-backends", () => {
    it("compliant: no mergeBackends", async () => {
        expect(await messages(envoyProxyNoMergeBackends, graph())).toEqual([]);
    });
    it("violating: mergeBackends present (even empty enables it)", async () => {
        const rs = edit(graph(), "agent-router-envoy-proxy", (o) => {
            o.spec.mergeBackends = {};
        });
        expect(await messages(envoyProxyNoMergeBackends, rs)).toEqual([
            "EnvoyProxy llm-proxy sets mergeBackends; Agent Router backend resolution breaks with shared clusters.",
        ]);
    });
});

describe("gateway-access-log-usage-fields", () => {
    const expected =
        "EnvoyProxy llm-gateway/llm-proxy (Gateway llm-gateway/llm): no access log setting ships JSON with %REQ(X-REQUEST-ID)%, %RESPONSE_CODE%, %RESPONSE_FLAGS%, %RESPONSE_CODE_DETAILS%, %DYNAMIC_METADATA(io.envoy.ai_gateway:llm_input_token)%, %DYNAMIC_METADATA(io.envoy.ai_gateway:llm_cached_input_token)%, %DYNAMIC_METADATA(io.envoy.ai_gateway:llm_output_token)%, %DYNAMIC_METADATA(io.envoy.ai_gateway:llm_total_token)% to an OpenTelemetry or ALS sink.";
    it("compliant: the metering OpenTelemetry sink with every field", async () => {
        expect(await messages(accessLogUsageFields, graph())).toEqual([]);
    });
    it("violating: request id dropped from the format", async () => {
        const rs = edit(graph(), "agent-router-envoy-proxy", (o) => {
            delete o.spec.telemetry.accessLog.settings[0].format.json.requestId;
        });
        expect(await messages(accessLogUsageFields, rs)).toEqual([expected]);
    });
    it("violating: a local file sink only", async () => {
        const rs = edit(graph(), "agent-router-envoy-proxy", (o) => {
            o.spec.telemetry.accessLog.settings[0].sinks = [{ type: "File", file: { path: "/dev/stdout" } }];
        });
        expect(await messages(accessLogUsageFields, rs)).toEqual([expected]);
    });
    it("violating: the GatewayClass carries no EnvoyProxy", async () => {
        const rs = edit(graph(), "agent-router-gateway-class", (o) => {
            delete o.spec.parametersRef;
        });
        expect(await messages(accessLogUsageFields, rs)).toEqual([
            "Gateway llm-gateway/llm: no EnvoyProxy in this stack is attached to it (GatewayClass or infrastructure parametersRef), so no access log carries usage to metering.",
        ]);
    });
});
