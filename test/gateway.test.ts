import { peerStrippedHeaders } from "../lib/failover";
import { beforeAll, describe, expect, it } from "vitest";
import { AUTH_OPS_PORT, AUTH_PORT, authEnv, awsConfigFile } from "../components/spoke/AuthService";
import { valkeyArgs } from "../components/spoke/CounterStore";
import { SpokeContractSchema } from "../config/contract";
import { versions } from "../config/versions";
import { aiGatewayValues, envoyGatewayValues, gatewayCrdsValues } from "../lib/gateway";
import { gatewayPolicies } from "../policies/gateway";
import { meteringAccessLogSetting } from "../services/shared/accesslog";
import { CACHE_SALT_SECRET, COUNTER_STORE_SECRET } from "../services/shared/spoke-secrets";
import type { CapturedResource, RunStackResult } from "../tools/harness";
import { runPolicies } from "../tools/policy-runner";
import { unwrapWire } from "../tools/wire";
import { byType, inputs, runHubAndSpoke } from "./helpers";

const REL = "kubernetes:helm.sh/v3:Release";
const find = (rs: CapturedResource[], name: string) => {
    const r = rs.find((x) => x.name === name);
    expect(r, name).toBeDefined();
    return r!;
};
/** URNs a resource waits for, with components expanded to their children (the SDK may record either). */
function waitsFor(rs: CapturedResource[], r: CapturedResource, dep: CapturedResource): boolean {
    return r.dependencies.includes(dep.urn) || rs.some((c) => c.parent === dep.urn && r.dependencies.includes(c.urn));
}

describe.each([false, true])("Agent Router on spoke-hn1 under mocks (preview=%s)", (preview) => {
    let hub: RunStackResult;
    let rs: CapturedResource[];
    beforeAll(async () => {
        const r = await runHubAndSpoke("spoke-hn1", preview);
        hub = r.hub;
        rs = r.spoke.resources;
    });

    it("installs the pinned chart set in the documented order", () => {
        const crds = find(rs, "agent-router-gateway-crds");
        const counters = find(rs, "agent-router-counters");
        const eg = find(rs, "agent-router-envoy-gateway");
        const aiCrds = find(rs, "agent-router-ai-gateway-crds");
        const ai = find(rs, "agent-router-ai-gateway");
        expect([crds, eg, aiCrds, ai].map((r) => [inputs(r).chart, inputs(r).version])).toEqual([
            [versions.gatewayCrds.chart, versions.gatewayCrds.version],
            [versions.envoyGateway.chart, versions.envoyGateway.version],
            [versions.aiGatewayCrds.chart, versions.aiGatewayCrds.version],
            [versions.aiGateway.chart, versions.aiGateway.version],
        ]);
        expect(waitsFor(rs, counters, crds)).toBe(true);
        expect(waitsFor(rs, eg, crds) && waitsFor(rs, eg, counters)).toBe(true);
        expect(waitsFor(rs, aiCrds, eg)).toBe(true);
        expect(waitsFor(rs, ai, aiCrds)).toBe(true);
        expect(inputs(crds).values).toEqual(gatewayCrdsValues());
        expect(inputs(eg)).toMatchObject({ namespace: "envoy-gateway-system", skipCrds: true, values: envoyGatewayValues() });
        expect(inputs(ai)).toMatchObject({ namespace: "envoy-ai-gateway-system", skipCrds: true, values: aiGatewayValues() });
        // Gateway objects wait for the AI Gateway controller (its webhook must see the Envoy pods); routes come last.
        for (const n of ["agent-router-envoy-proxy", "agent-router-backend-llama-70b"]) expect(waitsFor(rs, find(rs, n), ai), n).toBe(true);
        const route = find(rs, "agent-router-route-llm-models-0");
        for (const n of [
            "agent-router-security",
            "agent-router-client-traffic",
            "agent-router-gateway",
            "agent-router-ai-backend-qwen3-32b",
        ])
            expect(waitsFor(rs, route, find(rs, n)), n).toBe(true);
        expect(waitsFor(rs, find(rs, "agent-router-security"), find(rs, "agent-router-auth-service"))).toBe(true);
    });

    it("gateway CRs are direct resources: one Gateway-level SecurityPolicy, early stripping, a Backend per endpoint and peer, one route", () => {
        const kinds = (k: string) => rs.filter((r) => r.type.endsWith(`:${k}`) && r.type.startsWith("kubernetes:"));
        for (const [k, n] of [
            ["GatewayClass", 1],
            ["EnvoyProxy", 1],
            ["Gateway", 1],
            ["ClientTrafficPolicy", 1],
            ["SecurityPolicy", 1],
            // The shipped hub falls hn1's two models back to hcm1: one peer Backend / AIServiceBackend, one retry policy.
            ["Backend", 3],
            ["AIServiceBackend", 3],
            ["AIGatewayRoute", 1],
            ["BackendTrafficPolicy", 1],
        ] as const) {
            expect(kinds(k), k).toHaveLength(n);
        }
        const backends = kinds("Backend")
            .map(inputs)
            .map((b) => b.spec.endpoints[0].fqdn);
        expect(backends).toEqual([
            { hostname: "llama-70b-frontend.inference.svc.cluster.local", port: 8000 },
            { hostname: "qwen3-32b-frontend.inference.svc.cluster.local", port: 8000 },
            { hostname: "llm.hcm1.example.com", port: 443 },
        ]);
        const route = inputs(kinds("AIGatewayRoute")[0]);
        const peer = {
            name: "peer-hcm1",
            priority: 1,
            headerMutation: { set: [{ name: "x-llm-peer-hop", value: "hn1" }], remove: peerStrippedHeaders() },
        };
        // Each rule with a peer follows its hop guard (model header AND x-llm-peer-hop present, local backend only).
        expect(
            route.spec.rules.map((r: any) => [r.matches[0].headers.map((h: any) => h.value), r.backendRefs, r.timeouts.request]),
        ).toEqual([
            [["Qwen/Qwen3-32B", ".*"], [{ name: "qwen3-32b" }], "1800s"],
            [["Qwen/Qwen3-32B"], [{ name: "qwen3-32b" }, peer], "1800s"],
            [["meta-llama/Llama-3.3-70B-Instruct", ".*"], [{ name: "llama-70b" }], "1800s"],
            [["meta-llama/Llama-3.3-70B-Instruct"], [{ name: "llama-70b" }, peer], "1800s"],
        ]);
        expect(inputs(kinds("EnvoyProxy")[0]).spec.telemetry.accessLog.settings).toEqual([meteringAccessLogSetting()]);
        const sp = inputs(kinds("SecurityPolicy")[0]).spec;
        expect(sp.targetRefs).toEqual([{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "llm" }]);
        expect(sp.extAuth).toMatchObject({ failOpen: false, statusOnError: 503, bodyToExtAuth: { maxRequestBytes: 33554432 } });
        expect(inputs(kinds("ClientTrafficPolicy")[0]).spec.connection.bufferLimit).toBe("50Mi");
    });

    it("auth service: 2 replicas, probes on the ops port, env from the contract, secrets only by reference", () => {
        // runHubAndSpoke returns the hub rendered in the same mode; its contract is known only outside preview.
        const contract = preview ? undefined : SpokeContractSchema.parse((unwrapWire(hub.outputs.spokeContracts) as any).hn1);
        const dep = inputs(find(rs, "agent-router-auth-deployment"));
        expect(dep.spec.replicas).toBe(2);
        const c = dep.spec.template.spec.containers[0];
        expect(c.image).toBe(`${versions.authService.image}:${versions.authService.version}`);
        expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "ops" });
        expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "ops" });
        expect(c.ports).toEqual([
            { name: "http", containerPort: AUTH_PORT },
            { name: "ops", containerPort: AUTH_OPS_PORT },
        ]);
        if (contract) {
            const env = Object.fromEntries(c.env.filter((e: any) => e.value !== undefined).map((e: any) => [e.name, e.value]));
            expect(env).toEqual(authEnv("hn1", contract.policy, 33554432, 1860));
            expect(c.env.find((e: any) => e.name === "AUTH_REDIS_URL").valueFrom).toEqual({
                secretKeyRef: { name: COUNTER_STORE_SECRET.name, key: "url" },
            });
        }
        const svc = inputs(find(rs, "agent-router-auth-service"));
        expect(svc.spec).toMatchObject({
            type: "ClusterIP",
            ports: [{ name: "http", port: 8080, targetPort: "http", appProtocol: "http" }],
        });
        // The counters' password and the cache-salt key are the operator-installed Secrets (services/shared/spoke-secrets.ts,
        // test/spoke-secrets.test.ts): named, never rendered.
        expect(c.env.find((e: any) => e.name === "AUTH_CACHE_SALT_KEY").valueFrom).toEqual({
            secretKeyRef: { name: CACHE_SALT_SECRET.name, key: CACHE_SALT_SECRET.key },
        });
        const rendered = rs.filter((r) => r.type === "kubernetes:core/v1:Secret").map((r) => inputs(r).metadata.name);
        expect(rendered).not.toContain(COUNTER_STORE_SECRET.name);
        expect(rendered).not.toContain(CACHE_SALT_SECRET.name);
        if (contract) {
            // Only the shared config (role, region) is rendered: the source key is the operator-installed Secret
            // (services/shared/spoke-key-slot.ts SOURCE_KEY_SECRET), read by no program (test/source-key.test.ts).
            const aws = unwrapWire(find(rs, "agent-router-auth-aws").inputs.stringData) as Record<string, string>;
            expect(aws).toEqual({ config: awsConfigFile(contract.policy.roleArn, "ap-southeast-1") });
        }
        const valkey = inputs(find(rs, "agent-router-counters-valkey"));
        expect(valkey.spec.template.spec.containers[0]).toMatchObject({
            image: `${versions.valkey.image}:${versions.valkey.version}`,
            args: valkeyArgs(512),
            env: [{ name: "VALKEY_PASSWORD", valueFrom: { secretKeyRef: { name: COUNTER_STORE_SECRET.name, key: "password" } } }],
        });
    });

    it("Dynamo frontends reachable only from the Envoy proxies; no gateway-policy finding on the real spoke", async () => {
        const np = inputs(find(rs, "agent-router-frontend-isolation"));
        expect(np.metadata).toEqual({ name: "dynamo-frontend-from-gateway-only", namespace: "inference" });
        expect(np.spec.ingress[0].ports).toEqual([{ protocol: "TCP", port: 8000 }]);
        expect(np.spec.ingress[0].from.map((f: any) => f.namespaceSelector.matchLabels["kubernetes.io/metadata.name"])).toEqual([
            "envoy-gateway-system",
            "monitoring",
        ]);
        const report = await runPolicies(gatewayPolicies, rs);
        expect(report.findings).toEqual([]);
        expect(report.policiesRun).toBe(20); // 16 + gateway-identity-headers-only-from-extauth, gateway-closed-shape, gateway-request-id-generated, gateway-peer-fallback-verified
    });
});

describe("Helm release set", () => {
    it("one release per chart, all four from the pinned set", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hcm1");
        const charts = byType(spoke.resources, REL)
            .map(inputs)
            .filter((r) => String(r.chart).startsWith("oci://docker.io/envoyproxy/"));
        expect(charts.map((r) => `${r.chart}@${r.version}`).sort()).toEqual(
            [
                `${versions.aiGatewayCrds.chart}@${versions.aiGatewayCrds.version}`,
                `${versions.aiGateway.chart}@${versions.aiGateway.version}`,
                `${versions.gatewayCrds.chart}@${versions.gatewayCrds.version}`,
                `${versions.envoyGateway.chart}@${versions.envoyGateway.version}`,
            ].sort(),
        );
    });
});
