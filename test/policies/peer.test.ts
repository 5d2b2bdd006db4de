import { beforeAll, describe, expect, it } from "vitest";
import { gatewayPolicies, peerFallbackVerified } from "../../policies/gateway";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";

/*
 * The peer fallback rule and the closed shape on the real spoke-hn1 graph (the shipped hub falls hn1's models back
 * to hcm1): the rendered peer objects pass; each way of sending traffic to a peer without TLS, to an undeclared host,
 * for a model the peer does not serve, or around the peer's auth is refused.
 */

let base: CapturedResource[];
beforeAll(async () => {
    base = (await runHubAndSpoke("spoke-hn1")).spoke.resources;
});
const graph = () => structuredClone(base);

function edit(rs: CapturedResource[], name: string, fn: (o: Record<string, any>) => void): CapturedResource[] {
    const r = rs.find((x) => x.name === name);
    if (!r) throw new Error(`no resource ${name}`);
    fn(r.inputs as Record<string, any>);
    fn(r.outputs as Record<string, any>);
    return rs;
}

async function mandatory(rs: CapturedResource[]): Promise<string[]> {
    return (await runPolicies(gatewayPolicies, rs)).mandatory.map((f) => f.message);
}

const BACKEND = "agent-router-backend-peer-hcm1";
const ROUTE = "agent-router-route-llm-models-0";

describe("peer fallback (gateway-peer-fallback-verified + closed shape)", () => {
    it("the rendered peer Backend, AIServiceBackend, CA, declaration, backendRefs and retry pass every gateway policy", async () => {
        const rs = graph();
        expect(rs.some((r) => r.name === BACKEND)).toBe(true);
        expect(await mandatory(rs)).toEqual([]);
    });

    it("refuses a peer Backend without TLS", async () => {
        const rs = edit(graph(), BACKEND, (o) => delete o.spec.tls);
        expect((await mandatory(rs)).join("\n")).toMatch(/Backend llm-gateway\/peer-hcm1 has no tls: .*clear text/);
    });

    it("refuses insecureSkipVerify (closed shape and the peer rule)", async () => {
        const m = (await mandatory(edit(graph(), BACKEND, (o) => (o.spec.tls.insecureSkipVerify = true)))).join("\n");
        expect(m).toMatch(/spec\.tls\.insecureSkipVerify is not a field the pack knows to be safe on Backend/);
        expect(m).toMatch(/sets tls\.insecureSkipVerify: the peer's certificate is not verified/);
    });

    it("refuses verifying the private-CA peer with the system CAs, and a CA other than the declared one", async () => {
        const sys = await mandatory(
            edit(graph(), BACKEND, (o) => {
                delete o.spec.tls.caCertificateRefs;
                o.spec.tls.wellKnownCACertificates = "System";
            }),
        );
        expect(sys.join("\n")).toMatch(/verify llm\.hcm1\.example\.com with exactly the declared CA/);
        const other = await mandatory(
            edit(
                graph(),
                "agent-router-peer-hcm1-ca",
                (o) => (o.data["ca.crt"] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            ),
        );
        expect(other.join("\n")).toMatch(/holds a ca\.crt other than the CA the hub declares for hcm1/);
    });

    it("refuses a peer Backend aimed anywhere but the declared gateway (e.g. the peer's frontends: skipping its auth)", async () => {
        const rs = edit(
            graph(),
            BACKEND,
            (o) => (o.spec.endpoints = [{ fqdn: { hostname: "llama-70b-frontend.inference.hcm1.internal", port: 8000 } }]),
        );
        expect((await mandatory(rs)).join("\n")).toMatch(
            /are not exactly the declared peer gateway llm\.hcm1\.example\.com:443; .*skips the peer's auth/,
        );
    });

    it("refuses a peer the hub does not declare", async () => {
        const rs = edit(graph(), "agent-router-gateway-peers", (o) => (o.data["peers.json"] = JSON.stringify({ peers: [] })));
        expect((await mandatory(rs)).join("\n")).toMatch(/peer backend the hub does not declare/);
    });

    it("refuses a fallback for a model the peer is not declared to serve", async () => {
        const rs = edit(graph(), "agent-router-gateway-peers", (o) => {
            const d = JSON.parse(o.data["peers.json"]);
            d.peers[0].models = ["Qwen/Qwen3-32B"];
            o.data["peers.json"] = JSON.stringify(d);
        });
        expect((await mandatory(rs)).join("\n")).toMatch(
            /falls back to peer hcm1 for meta-llama\/Llama-3\.3-70B-Instruct, which the hub does not declare that peer serves/,
        );
    });

    it("refuses a peer backendRef that forwards identity headers, drops the tenant's key, or does not mark the hop", async () => {
        const rs = edit(graph(), ROUTE, (o) => {
            const ref = o.spec.rules[0].backendRefs[1];
            ref.headerMutation.remove = ["x-ai-eg-model", "authorization"];
            ref.headerMutation.set = [];
        });
        const m = (await mandatory(rs)).join("\n");
        expect(m).toMatch(/forwards trusted identity header\(s\) x-platform-tenant, .*remove them/);
        expect(m).toMatch(/removes authorization: the peer's auth needs the tenant's own key/);
        expect(m).toMatch(/does not set x-llm-peer-hop; .*loops/);
    });

    it("refuses a peer as a share of normal traffic (priority not above the local backends) and any other header set", async () => {
        const rs = edit(graph(), ROUTE, (o) => {
            o.spec.rules[0].backendRefs[1].priority = 0;
            o.spec.rules[0].backendRefs[1].headerMutation.set.push({ name: "x-platform-tenant", value: "acme" });
        });
        const m = (await mandatory(rs)).join("\n");
        expect(m).toMatch(/has priority 0; a peer is a fallback, at a priority above every local backendRef/);
        expect(m).toMatch(/headerMutation\.set\[\]\.name is "x-platform-tenant"; the pack knows only x-llm-peer-hop/);
    });

    it("refuses a retry policy that retries auth refusals at the peer, or targets something other than a model route", async () => {
        const rs = edit(graph(), "agent-router-fallback-llm-models-0", (o) => {
            o.spec.retry.retryOn.httpStatusCodes.push(429);
            o.spec.targetRefs[0].name = "other-route";
        });
        const m = (await mandatory(rs)).join("\n");
        expect(m).toMatch(/retry\.retryOn\.httpStatusCodes\[\] is 429/);
        expect(m).toMatch(/targets HTTPRoute other-route, which is not the route the AI Gateway generates/);
    });

    it("is registered and mandatory", () => {
        expect(peerFallbackVerified.enforcementLevel).toBe("mandatory");
        expect(gatewayPolicies).toContain(peerFallbackVerified);
    });
});
