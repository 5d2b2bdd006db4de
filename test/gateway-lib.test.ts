import { describe, expect, it } from "vitest";
import { GatewayConfigSchema, MiB } from "../config/gateway";
import {
    aiGatewayRoutes,
    backend,
    byteQuantity,
    chunk,
    clientTrafficPolicy,
    earlyHeaderStrip,
    envoyGatewayValues,
    frontendNetworkPolicy,
    MAX_RULES_PER_ROUTE,
    modelRules,
    parseByteQuantity,
    ruleName,
    securityPolicy,
} from "../lib/gateway";
import { bytesOf, GW, secondsOf, stripMatcher } from "../policies/lib/gateway";
import {
    AI_GATEWAY_METADATA_NAMESPACE,
    AI_GATEWAY_MODEL_HEADER,
    IDENTITY_HEADER_PREFIX,
    IDENTITY_HEADERS,
} from "../services/shared/identity";
import { INFERENCE_NAMESPACE } from "../lib/labels";

const T = { requestSeconds: 1800, streamIdleSeconds: 300 };
const auth = { service: "auth", namespace: "llm-gateway", port: 8080, pathPrefix: "/authz" };

describe("route rules", () => {
    it("40 models split into 15 + 15 + 10 rules, every model exactly once, sorted", () => {
        const eps = Array.from({ length: 40 }, (_, i) => ({
            name: `ep-${String(i).padStart(2, "0")}`,
            model: `org/model-${String(39 - i).padStart(2, "0")}`,
        }));
        const routes = aiGatewayRoutes(eps, "llm-gateway", T);
        expect(routes.map((r) => r.spec.rules.length)).toEqual([15, 15, 10]);
        expect(routes.map((r) => r.metadata.name)).toEqual(["llm-models-0", "llm-models-1", "llm-models-2"]);
        const models = routes.flatMap((r) => r.spec.rules.map((x) => x.matches[0].headers[0].value));
        expect(models).toEqual(Array.from({ length: 40 }, (_, i) => `org/model-${String(i).padStart(2, "0")}`));
        expect(routes[2].spec.rules[9].backendRefs).toEqual([{ name: "ep-00" }]);
        for (const r of routes) {
            expect(r.spec.llmRequestCosts.map((c) => c.metadataKey)).toEqual([
                "llm_input_token",
                "llm_cached_input_token",
                "llm_output_token",
                "llm_total_token",
            ]);
            expect(r.spec.parentRefs).toEqual([{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }]);
        }
    });

    it("exactly 15 models fit one route; 16 need two", () => {
        const eps = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `e${i}`, model: `m${String(i).padStart(2, "0")}` }));
        expect(aiGatewayRoutes(eps(15), "ns", T).map((r) => r.spec.rules.length)).toEqual([15]);
        expect(aiGatewayRoutes(eps(16), "ns", T).map((r) => r.spec.rules.length)).toEqual([15, 1]);
        expect(aiGatewayRoutes([], "ns", T)).toEqual([]);
        expect(MAX_RULES_PER_ROUTE).toBe(15);
    });

    it("two endpoints serving one model become one rule with both backends (unique x-ai-eg-model)", () => {
        const rules = modelRules(
            [
                { name: "llama-b", model: "L" },
                { name: "qwen", model: "Q" },
                { name: "llama-a", model: "L" },
            ],
            T,
        );
        expect(rules).toEqual([
            {
                name: ruleName("L"),
                matches: [{ headers: [{ type: "Exact", name: "x-ai-eg-model", value: "L" }] }],
                backendRefs: [{ name: "llama-a" }, { name: "llama-b" }],
                timeouts: { request: "1800s" },
                streamIdleTimeout: "300s",
            },
            {
                name: ruleName("Q"),
                matches: [{ headers: [{ type: "Exact", name: "x-ai-eg-model", value: "Q" }] }],
                backendRefs: [{ name: "qwen" }],
                timeouts: { request: "1800s" },
                streamIdleTimeout: "300s",
            },
        ]);
    });

    it("rule names are DNS subdomains and distinct for ids differing only in case", () => {
        const pattern = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
        expect(ruleName("meta-llama/Llama-3.3-70B-Instruct")).toMatch(/^meta-llama-llama-3\.3-70b-instruct-[0-9a-f]{8}$/);
        for (const m of ["meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-32B", "a..b", "__", "x/.y"]) expect(ruleName(m)).toMatch(pattern);
        expect(ruleName("Qwen/Qwen3-32B")).not.toBe(ruleName("qwen/qwen3-32b"));
    });

    it("chunk rejects a non-positive size", () => {
        expect(() => chunk([1], 0)).toThrow("chunk size must be a positive integer, got 0");
        expect(chunk([1, 2, 3], 2)).toEqual([[1, 2], [3]]);
    });
});

describe("header stripping and ext_authz", () => {
    it("strips x-ai-eg-model and every identity header by name and prefix; the policy matcher agrees", () => {
        const strip = earlyHeaderStrip();
        expect(strip.remove).toEqual([
            "x-ai-eg-model",
            "x-dynamo-request-priority",
            "x-dynamo-request-strict-priority",
            // Only the auth service sets it, on a request a peer spoke forwarded (services/shared/peer.ts).
            "x-envoy-max-retries",
            "x-platform-key-id",
            "x-platform-lease",
            "x-platform-model",
            "x-platform-policy-revision",
            "x-platform-team",
            "x-platform-tenant",
            "x-tenant-id",
        ]);
        expect(strip.removeOnMatch).toEqual([
            { type: "Prefix", value: "x-platform-" },
            { type: "Prefix", value: "x-ai-eg-" },
            // Dynamo's routing overrides: a client must not pin its request to a worker
            // (ai-dynamo/dynamo@v1.5.0:lib/llm/src/protocols/common/extensions.rs#apply_header_routing_overrides).
            { type: "Prefix", value: "x-dynamo-" },
        ]);
        const m = stripMatcher(strip);
        for (const h of [
            ...Object.values(IDENTITY_HEADERS),
            "X-Platform-Something-New",
            "x-ai-eg-original-path",
            "x-dynamo-worker-instance-id",
            "x-dynamo-prefill-instance-id",
            "x-dynamo-dp-rank",
        ])
            expect(m(h), h).toBe(true);
        expect(m("authorization")).toBe(false);
    });

    it("the policy pack's copies of the shared names equal services/shared/identity.ts", () => {
        expect(GW.modelHeader).toBe(AI_GATEWAY_MODEL_HEADER);
        expect(GW.identityPrefix).toBe(IDENTITY_HEADER_PREFIX);
        expect([...GW.identityHeaders].sort()).toEqual(Object.values(IDENTITY_HEADERS).sort());
        expect(GW.aiMetadataNamespace).toBe(AI_GATEWAY_METADATA_NAMESPACE);
        expect(GW.inferenceNamespace).toBe(INFERENCE_NAMESPACE);
    });

    it("SecurityPolicy: fail-closed HTTP ext_authz with body, identity headers to backend, 503 on error", () => {
        const sp = securityPolicy({ namespace: "llm-gateway", auth, maxRequestBytes: 32 * MiB, timeoutSeconds: 5 });
        expect(sp.spec).toEqual({
            targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }],
            extAuth: {
                http: {
                    backendRefs: [{ group: "", kind: "Service", name: "auth", namespace: "llm-gateway", port: 8080 }],
                    path: "/authz",
                    headersToBackend: [
                        "x-platform-tenant",
                        "x-platform-team",
                        "x-platform-key-id",
                        "x-platform-model",
                        "x-platform-lease",
                        "x-platform-policy-revision",
                        "x-dynamo-request-priority",
                        "x-dynamo-request-strict-priority",
                        "x-tenant-id",
                        // The auth service's retry override for a request a peer forwarded (no loop between spokes).
                        "x-envoy-max-retries",
                    ],
                },
                headersToExtAuth: ["authorization", "content-type", "x-request-id", "x-llm-peer-hop"],
                bodyToExtAuth: { maxRequestBytes: 33554432 },
                failOpen: false,
                statusOnError: 503,
                timeout: "5s",
            },
        });
    });

    it("ClientTrafficPolicy buffer limit as a quantity; Envoy generates request ids", () => {
        const ctp = clientTrafficPolicy({ namespace: "llm-gateway", bufferLimitBytes: 50 * MiB });
        expect(ctp.spec.connection.bufferLimit).toBe("50Mi");
        expect(ctp.spec.headers.requestID).toBe("Generate");
        expect(byteQuantity(1000)).toBe("1000");
        expect(parseByteQuantity("50Mi")).toBe(52428800);
        expect(bytesOf("50Mi")).toBe(52428800);
        expect(bytesOf("64k")).toBe(64000);
        expect(bytesOf("lots")).toBeUndefined();
        expect(secondsOf("1h30m")).toBe(5400);
        expect(secondsOf("900s")).toBe(900);
        expect(() => parseByteQuantity("1.5Gi")).toThrow("not a byte quantity: 1.5Gi");
    });

    it("config rejects a buffer limit below the ext_authz body limit, defaults to 32 MiB / 50 MiB", () => {
        expect(GatewayConfigSchema.parse({})).toMatchObject({
            maxRequestBytes: 33554432,
            bufferLimitBytes: 52428800,
            requestTimeoutSeconds: 1800,
            authReplicas: 2,
            listener: {},
        });
        const r = GatewayConfigSchema.safeParse({ maxRequestBytes: 64 * MiB, bufferLimitBytes: 32 * MiB });
        expect(r.success).toBe(false);
        expect(r.error!.issues[0].path).toEqual(["bufferLimitBytes"]);
        expect(GatewayConfigSchema.safeParse({ authReplicas: 1 }).success).toBe(false);
    });
});

describe("backends, Helm values, isolation", () => {
    it("Backend points at the endpoint's ClusterIP frontend Service by FQDN", () => {
        expect(backend({ name: "llama-70b", model: "L" }, "llm-gateway").spec).toEqual({
            endpoints: [{ fqdn: { hostname: "llama-70b-frontend.inference.svc.cluster.local", port: 8000 } }],
        });
    });

    it("Envoy Gateway values: AI Gateway extension server, Backend API on, EnvoyPatchPolicy off; rate limiting only fail-closed", () => {
        const v = envoyGatewayValues();
        expect(v.config.envoyGateway.extensionApis).toEqual({ enableBackend: true, enableEnvoyPatchPolicy: false });
        expect(v.config.envoyGateway.extensionManager.service).toEqual({
            fqdn: { hostname: "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local", port: 1063 },
        });
        expect(v.config.envoyGateway.extensionManager.hooks.xdsTranslator.post).toEqual(["Translation", "Cluster", "Route"]);
        expect("rateLimit" in v.config.envoyGateway).toBe(false);
        const rl = envoyGatewayValues({ redisUrl: "counters.llm-gateway.svc.cluster.local:6379", timeout: "100ms" }).config
            .envoyGateway as Record<string, any>;
        expect(rl.rateLimit).toEqual({
            backend: { type: "Redis", redis: { url: "counters.llm-gateway.svc.cluster.local:6379" } },
            failClosed: true,
            timeout: "100ms",
        });
    });

    it("frontends: HTTP port only from Envoy proxy pods, other ports only from Dynamo pods", () => {
        const np = frontendNetworkPolicy();
        expect(np.metadata.namespace).toBe("inference");
        expect(np.spec.podSelector).toEqual({ matchLabels: { "nvidia.com/dynamo-component-type": "frontend" } });
        expect(np.spec.ingress[0]).toEqual({
            from: [
                {
                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "envoy-gateway-system" } },
                    podSelector: {
                        matchLabels: {
                            "app.kubernetes.io/name": "envoy",
                            "app.kubernetes.io/component": "proxy",
                            "app.kubernetes.io/managed-by": "envoy-gateway",
                        },
                    },
                },
            ],
            ports: [{ protocol: "TCP", port: 8000 }],
        });
        expect(np.spec.ingress[1].ports).toEqual([
            { protocol: "TCP", port: 1, endPort: 7999 },
            { protocol: "TCP", port: 8001, endPort: 65535 },
        ]);
        const scraped = frontendNetworkPolicy("inference", GatewayConfigSchema.parse({}).frontendScrapers);
        expect(scraped.spec.ingress[0].from[1]).toEqual({
            namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } },
            podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } },
        });
        expect(GatewayConfigSchema.safeParse({ frontendScrapers: [{ namespace: "monitoring", podLabels: {} }] }).success).toBe(false);
    });
});
