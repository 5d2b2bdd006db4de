import { beforeAll, describe, expect, it } from "vitest";
import { gatewayPolicies, peerFallbackVerified } from "../../policies/gateway";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";
import { edit } from "./graph-edit";

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
            const ref = o.spec.rules[1].backendRefs[1];
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
            o.spec.rules[1].backendRefs[1].priority = 0;
            o.spec.rules[1].backendRefs[1].headerMutation.set.push({ name: "x-platform-tenant", value: "acme" });
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

    it("retries Dynamo's 404 model_not_found at the peer only on a route of peer-enabled model rules and their hop guards; any other 4xx stays refused", async () => {
        const btp = graph().find((x) => x.name === "agent-router-fallback-llm-models-0")!.inputs as Record<string, any>;
        expect(btp.spec.retry.retryOn.httpStatusCodes).toEqual([502, 503, 504, 404]);
        // A model without peers on the same route: there a 404 would be retried against the same frontend.
        const mixed = edit(graph(), ROUTE, (o) =>
            o.spec.rules.push({
                name: "no-peer",
                matches: [{ headers: [{ type: "Exact", name: "x-ai-eg-model", value: "other/model" }] }],
                backendRefs: [structuredClone(o.spec.rules[0].backendRefs[0])],
            }),
        );
        expect((await mandatory(mixed)).join("\n")).toMatch(
            /BackendTrafficPolicy llm-gateway\/llm-models-0-fallback retries 404 on AIGatewayRoute llm-gateway\/llm-models-0, whose rule\(s\) no-peer are not a peer-enabled model rule/,
        );
        // The same route without the 404 retry passes that check.
        const no404 = edit(mixed, "agent-router-fallback-llm-models-0", (o) => {
            o.spec.retry.retryOn.httpStatusCodes = [502, 503, 504];
        });
        expect((await mandatory(no404)).join("\n")).not.toMatch(/retries 404/);
        for (const code of [400, 403, 409, 429]) {
            const rs = edit(graph(), "agent-router-fallback-llm-models-0", (o) => o.spec.retry.retryOn.httpStatusCodes.push(code));
            expect((await mandatory(rs)).join("\n")).toMatch(new RegExp(`retry\\.retryOn\\.httpStatusCodes\\[\\] is ${code}`));
        }
    });

    it("renders each rule with peers right after its hop guard: model header AND x-llm-peer-hop present, local backends only", () => {
        const route = graph().find((x) => x.name === ROUTE)!.inputs as Record<string, any>;
        const [guard, withPeers] = route.spec.rules;
        expect(guard.name).toBe(`${withPeers.name}-hop`);
        expect(guard.matches).toEqual([
            {
                headers: [withPeers.matches[0].headers[0], { type: "RegularExpression", name: "x-llm-peer-hop", value: ".*" }],
            },
        ]);
        expect(guard.backendRefs).toEqual(withPeers.backendRefs.filter((b: any) => !String(b.name).startsWith("peer-")));
        expect(withPeers.backendRefs.some((b: any) => String(b.name).startsWith("peer-"))).toBe(true);
    });

    it("refuses a rule with peers that its hop guard does not precede (removed, after it, or with other local backends)", async () => {
        const msg = /falls back to a peer spoke but is not preceded, in the same route, by its hop guard.*loops between the spokes/;
        const removed = edit(graph(), ROUTE, (o) => o.spec.rules.splice(0, 1));
        expect((await mandatory(removed)).join("\n")).toMatch(msg);
        const after = edit(graph(), ROUTE, (o) => o.spec.rules.splice(0, 2, o.spec.rules[1], o.spec.rules[0]));
        expect((await mandatory(after)).join("\n")).toMatch(msg);
        const other = edit(graph(), ROUTE, (o) => (o.spec.rules[0].backendRefs = [{ name: "somewhere-else" }]));
        expect((await mandatory(other)).join("\n")).toMatch(msg);
    });

    it("refuses a hop guard that forwards to a peer, and any other header-match form (closed shape)", async () => {
        const forwards = edit(graph(), ROUTE, (o) => o.spec.rules[0].backendRefs.push(structuredClone(o.spec.rules[1].backendRefs[1])));
        const m = (await mandatory(forwards)).join("\n");
        expect(m).toMatch(/is a peer hop guard \(x-llm-peer-hop present\) yet routes to peer backend\(s\) peer-hcm1/);
        expect(m).toMatch(/a peer hop guard \(x-llm-peer-hop present\) routes to a peer spoke's gateway/);
        for (const hop of [
            { type: "Exact", name: "x-llm-peer-hop", value: "hcm1" },
            { type: "RegularExpression", name: "x-other", value: ".*" },
            { type: "RegularExpression", name: "x-llm-peer-hop", value: "h.*" },
        ]) {
            const rs = edit(graph(), ROUTE, (o) => (o.spec.rules[0].matches[0].headers[1] = hop));
            expect((await mandatory(rs)).join("\n")).toMatch(
                /the pack knows only exactly one header, x-ai-eg-model of type Exact, or that header followed by x-llm-peer-hop/,
            );
        }
        const third = edit(graph(), ROUTE, (o) => o.spec.rules[0].matches[0].headers.push({ name: "x-tenant", value: "acme" }));
        expect((await mandatory(third)).join("\n")).toMatch(/the pack knows only exactly one header/);
        const typed = edit(graph(), ROUTE, (o) => (o.spec.rules[0].matches[0].headers[1].type = "Present"));
        expect((await mandatory(typed)).join("\n")).toMatch(/headers\[\]\.type is "Present"; the pack knows only Exact, RegularExpression/);
    });

    it("is registered and mandatory", () => {
        expect(peerFallbackVerified.enforcementLevel).toBe("mandatory");
        expect(gatewayPolicies).toContain(peerFallbackVerified);
    });
});
