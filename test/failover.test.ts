import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { buildFailoverContracts, FailoverConfigSchema } from "../config/failover";
import { type HubConfig, parseStackConfig, type SpokeConfig } from "../config/stack";
import { fallbackTrafficPolicy, GATEWAY_HEALTH_PATH, healthCheckArgs, peerObjects, recordArgs, withPeerFallback } from "../lib/failover";
import { aiGatewayRoutes, clientTrafficPolicy } from "../lib/gateway";
import { spokeEdges } from "../programs/failover";
import * as upstreamFailover from "../upstream/failover";
import { failoverFields, failoverSourcesReadAt } from "../upstream/failover";
import { versions } from "../config/versions";
import { platformKeys, stackConfigDoc } from "./helpers";

const NOW = new Date("2026-12-01T00:00:00Z");
const HUB_FILE = "stacks/Pulumi.hub-prod.yaml";

function hub(mutate: (d: Record<string, any>) => void = () => undefined): HubConfig {
    const d = structuredClone(stackConfigDoc("hub-prod"));
    mutate(d);
    const c = parseStackConfig(platformKeys(d), HUB_FILE, { now: NOW });
    if (c.role !== "hub") throw new Error("not a hub");
    return c.hub;
}
function hubError(mutate: (d: Record<string, any>) => void): ConfigError {
    try {
        hub(mutate);
    } catch (e) {
        if (e instanceof ConfigError) return e;
        throw e;
    }
    throw new Error("accepted");
}
function spoke(name: string, mutate: (d: Record<string, any>) => void = () => undefined): SpokeConfig {
    const d = structuredClone(stackConfigDoc(`spoke-${name}`));
    mutate(d);
    const c = parseStackConfig(platformKeys(d), `stacks/Pulumi.spoke-${name}.yaml`, { now: NOW });
    if (c.role !== "spoke") throw new Error("not a spoke");
    return c.spoke;
}
/** The shipped hub without sg1's Llama placement, so sg1 serves Qwen only (a spoke that lacks a model). */
const withoutSg1Llama = (d: Record<string, any>) =>
    (d["platform:endpoints"] = d["platform:endpoints"].filter((e: any) => !(e.spoke === "sg1" && e.name === "llama-70b")));
const ep = (d: Record<string, any>, spokeName: string, name: string) =>
    d["platform:endpoints"].find((e: any) => e.spoke === spokeName && e.name === name);

describe("hub file: failover shape and refusals naming the hub file and key", () => {
    it("the shipped hub places llama-70b and qwen3-32b on hn1 and hcm1, each falling back to the other, behind llm.example.com", () => {
        const h = hub();
        expect(h.failover).toMatchObject({ hostname: "llm.example.com", mode: "active-active", spokes: ["hn1", "hcm1"] });
        expect(h.endpoints.filter((e) => e.fallback).map((e) => `${e.spoke}/${e.name}->${e.fallback!.join(",")}`)).toEqual([
            "hn1/llama-70b->hcm1",
            "hn1/qwen3-32b->hcm1",
            "hcm1/llama-70b->hn1",
            "hcm1/qwen3-32b->hn1",
        ]);
    });

    it("refuses a fallback to a spoke that does not serve the model", () => {
        const e = hubError((d) => {
            withoutSg1Llama(d);
            ep(d, "hcm1", "llama-70b").fallback = ["sg1"];
        });
        expect(e.message).toContain(HUB_FILE);
        expect(e.issues).toEqual([
            {
                key: "platform:endpoints[2].fallback[0]",
                message: expect.stringContaining(
                    'spoke "sg1" does not serve meta-llama/Llama-3.3-70B-Instruct (it is placed on: hn1 (platform:endpoints[0] llama-70b), hcm1 (platform:endpoints[2] llama-70b))',
                ),
            },
        ]);
    });

    it("refuses an unknown fallback spoke, the endpoint's own spoke, and a reserved peer- name", () => {
        const e = hubError((d) => {
            ep(d, "hn1", "llama-70b").fallback = ["hn9"];
            ep(d, "hn1", "qwen3-32b").fallback = ["hn1"];
        });
        expect(e.issues.map((i) => i.key)).toEqual(["platform:endpoints[0].fallback[0]", "platform:endpoints[1].fallback[0]"]);
        const r = hubError((d) => (ep(d, "sg1", "qwen3-32b").name = "peer-qwen"));
        expect(r.issues.map((i) => i.key)).toContain("platform:endpoints[4].name");
    });

    it("refuses a spoke behind the global name that does not serve every model the others serve", () => {
        const e = hubError((d) => {
            withoutSg1Llama(d);
            d["platform:failover"].spokes.push("sg1");
        });
        expect(e.issues).toEqual([
            {
                key: "platform:failover.spokes[2]",
                message: expect.stringContaining('spoke "sg1" serves none of meta-llama/Llama-3.3-70B-Instruct'),
            },
        ]);
    });

    it("refuses primary-standby over more than two spokes (Route 53 failover: one PRIMARY, one SECONDARY)", () => {
        const e = hubError((d) => {
            d["platform:failover"].mode = "primary-standby";
            d["platform:failover"].spokes = ["hn1", "hcm1", "hn1"];
        });
        expect(e.issues.map((i) => i.key)).toEqual(["platform:failover.spokes[2]", "platform:failover.spokes"]);
    });
});

describe("spoke files: the reachable edge peers and Route 53 need", () => {
    const files = (hn1: SpokeConfig) =>
        new Map([
            ["hn1", { file: "stacks/Pulumi.spoke-hn1.yaml", cfg: hn1 }],
            ["hcm1", { file: "stacks/Pulumi.spoke-hcm1.yaml", cfg: spoke("hcm1") }],
        ]);
    it("the shipped spokes declare address, latency region and CA", () => {
        const r = spokeEdges(hub(), files(spoke("hn1")));
        expect(r.issues).toEqual([]);
        expect([...r.edges.values()].map((x) => [x.spoke, x.hostname, x.address, x.latencyRegion, x.ca.kind])).toEqual([
            ["hcm1", "llm.hcm1.example.com", "203.0.113.74", "ap-southeast-1", "pem"],
            ["hn1", "llm.hn1.example.com", "203.0.113.10", "ap-southeast-1", "pem"],
        ]);
    });
    it("an on-prem spoke without its public address or CA is refused on the hub's spoke entry, naming the spoke file and key", () => {
        const hn1 = spoke("hn1", (d) => {
            const r = d["platform:gateway"].listener.reachable;
            delete r.address;
            delete r.caCertificate;
        });
        const r = spokeEdges(hub(), files(hn1));
        expect(r.issues.map((i) => i.key)).toEqual(["platform:spokes[0]", "platform:spokes[0]"]);
        expect(r.issues[0].message).toMatch(
            /^stacks\/Pulumi\.spoke-hn1\.yaml platform:gateway\.listener\.reachable\.caCertificate: missing/,
        );
        expect(r.issues[1].message).toMatch(/^stacks\/Pulumi\.spoke-hn1\.yaml platform:gateway\.listener\.reachable\.address: missing/);
    });
});

describe("rendering", () => {
    const h = hub();
    const edges = spokeEdges(
        h,
        new Map([
            ["hn1", { file: "hn1", cfg: spoke("hn1") }],
            ["hcm1", { file: "hcm1", cfg: spoke("hcm1") }],
        ]),
    ).edges;
    const contracts = buildFailoverContracts(h, edges);

    it("contracts: each of hn1/hcm1 has the other as peer for both models and the global hostname; sg1 has none", () => {
        expect(Object.keys(contracts)).toEqual(["hcm1", "hn1"]);
        expect(contracts.hn1.globalHostname).toBe("llm.example.com");
        expect(contracts.hn1.peers.map((p) => [p.spoke, p.hostname, p.port, p.models])).toEqual([
            ["hcm1", "llm.hcm1.example.com", 443, ["Qwen/Qwen3-32B", "meta-llama/Llama-3.3-70B-Instruct"]],
        ]);
    });

    it("every spec field rendered for a peer is recorded in upstream/failover.ts with its source", () => {
        const leaves = (v: unknown, at = ""): string[] =>
            Array.isArray(v)
                ? v.flatMap((x) => leaves(x, `${at}[]`))
                : v && typeof v === "object"
                  ? Object.entries(v).flatMap(([k, x]) => leaves(x, at ? `${at}.${k}` : k))
                  : [at];
        const routes = withPeerFallback(
            aiGatewayRoutes([{ name: "llama-70b", model: "meta-llama/Llama-3.3-70B-Instruct" }], "llm-gateway", {
                requestSeconds: 1800,
                streamIdleSeconds: 300,
            }),
            contracts.hn1,
            "hn1",
        );
        const rendered: Array<[string, string]> = [
            ...peerObjects(contracts.hn1, "llm-gateway")
                .filter((o) => "spec" in o)
                .flatMap((o) => leaves((o as { spec: unknown }).spec).map((p) => [o.kind, p] as [string, string])),
            ...leaves(routes[0].spec.rules[1].backendRefs[1])
                .filter((p) => p !== "name")
                .map((p) => ["AIGatewayRoute", `rules[].backendRefs[].${p}`] as [string, string]),
            // The hop guard's match (rules[0]): the model header and x-llm-peer-hop.
            ...leaves(routes[0].spec.rules[0].matches).map((p) => ["AIGatewayRoute", `rules[].matches${p}`] as [string, string]),
            ...leaves(fallbackTrafficPolicy("llm-models-0", "llm-gateway", 1).spec).map(
                (p) => ["BackendTrafficPolicy", p] as [string, string],
            ),
            ["ClientTrafficPolicy", "healthCheck.path"],
        ];
        const recorded = new Set(failoverFields.map((f) => `${f.kind} ${f.field}`));
        const known = (k: string, p: string) =>
            recorded.has(`${k} ${p}`) ||
            (k === "AIServiceBackend" && ["schema.name", "schema.prefix", "backendRef.group", "backendRef.kind"].includes(p));
        expect(rendered.filter(([k, p]) => !known(k, p))).toEqual([]);
        expect(clientTrafficPolicy({ namespace: "x", bufferLimitBytes: 1, healthCheckPath: GATEWAY_HEALTH_PATH }).spec.healthCheck).toEqual(
            {
                path: "/healthz/gateway",
            },
        );
    });

    it("every Envoy Gateway / AI Gateway source cites the tag it was read at: the pin, or the read tag recorded against that pin", () => {
        const pins: Record<string, string> = {
            "envoyproxy/gateway": versions.envoyGateway.version,
            "envoyproxy/ai-gateway": versions.aiGateway.version,
        };
        for (const r of failoverSourcesReadAt) expect(r.pinned, r.repo).toBe(pins[r.repo]);
        const text = JSON.stringify(Object.values(upstreamFailover));
        const cited = [...text.matchAll(/(envoyproxy\/(?:gateway|ai-gateway))@([^:"]+):/g)].map((m) => [m[1], m[2]]);
        expect(cited.length).toBeGreaterThan(10);
        for (const [repo, tag] of cited) {
            const ok = tag === pins[repo] || failoverSourcesReadAt.some((r) => r.repo === repo && r.tag === tag);
            expect(ok, `${repo}@${tag}`).toBe(true);
        }
    });
    it("a route whose hop guards would take it past the CRD's 15 rules is refused at render, naming the route", () => {
        const eps = Array.from({ length: 8 }, (_, i) => ({ name: `m${i}`, model: `model-${i}` }));
        const peers = { peers: [{ ...contracts.hn1.peers[0], models: eps.map((e) => e.model) }] };
        const routes = aiGatewayRoutes(eps, "llm-gateway", { requestSeconds: 1800, streamIdleSeconds: 300 });
        expect(() => withPeerFallback(routes, peers, "hn1")).toThrow(
            /AIGatewayRoute llm-models-0: 16 rules with the peer hop guards, above the CRD's 15/,
        );
        const seven = aiGatewayRoutes(eps.slice(0, 7), "llm-gateway", { requestSeconds: 1800, streamIdleSeconds: 300 });
        expect(withPeerFallback(seven, peers, "hn1")[0].spec.rules).toHaveLength(14);
    });

    it("Route 53: an HTTPS health check per spoke probing its VIP with SNI, latency records (active-active) or PRIMARY/SECONDARY", () => {
        const f = h.failover!;
        const hn1 = edges.get("hn1")!;
        expect(healthCheckArgs(hn1, f)).toMatchObject({
            type: "HTTPS",
            fqdn: "llm.hn1.example.com",
            ipAddress: "203.0.113.10",
            port: 443,
            resourcePath: GATEWAY_HEALTH_PATH,
            enableSni: true,
            requestInterval: 10,
            failureThreshold: 3,
        });
        expect(recordArgs(hn1, f)).toEqual({
            zoneId: "Z0123456789ABCDEFGHIJ",
            name: "llm.example.com",
            type: "CNAME",
            ttl: 30,
            records: ["llm.hn1.example.com"],
            setIdentifier: "hn1",
            latencyRoutingPolicies: [{ region: "ap-southeast-1" }],
        });
        const ps = FailoverConfigSchema.parse({ ...f, mode: "primary-standby" });
        expect([recordArgs(hn1, ps), recordArgs(edges.get("hcm1")!, ps)].map((r) => r.failoverRoutingPolicies)).toEqual([
            [{ type: "PRIMARY" }],
            [{ type: "SECONDARY" }],
        ]);
    });
});
