import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { cacheScopesOf, keyServing } from "../config/serving-policy";
import { type HubConfig, parseStackConfig } from "../config/stack";
import * as path from "node:path";
import { accessModel, buildSpokeContracts } from "../programs/hub";
import { readSpokeEdges } from "../programs/spoke-registry";
import { PolicySchema } from "../services/shared/bundle";
import { platformKeys, stackConfigDoc } from "./helpers";

// Hub tenant policy for serving: priority/latency classes and output-length ceilings as entitlements, and KV cache
// isolation per tenant (or team) unless the hub file declares a sharing group. Evaluated through the real stack parser.

const FILE = "stacks/Pulumi.hub-prod.yaml";
const NOW = new Date("2026-12-01T00:00:00Z");

function parse(mutate: (d: Record<string, any>) => void = () => undefined): HubConfig {
    const d = structuredClone(stackConfigDoc("hub-prod"));
    mutate(d);
    const c = parseStackConfig(platformKeys(d), FILE, { now: NOW });
    if (c.role !== "hub") throw new Error("not a hub");
    return c.hub as HubConfig;
}

/** The ConfigError's lines for a mutated hub file (fails when it parses). */
function issues(mutate: (d: Record<string, any>) => void): { file: string; lines: string[] } {
    try {
        parse(mutate);
    } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        const err = e as ConfigError;
        return { file: err.stackFile, lines: err.issues.map((i) => `${i.key}: ${i.message}`) };
    }
    throw new Error("the hub file parsed");
}

const team = (d: Record<string, any>, t: number, x: number) => d["platform:tenants"][t].teams[x];

describe("hub serving policy: config errors name the stack file and key", () => {
    it.each([
        [
            "a team naming an unknown priority class",
            (d: Record<string, any>) => {
                team(d, 0, 0).serving.priorityClass = "platinum";
            },
            "platform:tenants[0].teams[0].serving.priorityClass",
            /unknown priority class "platinum" \(known: interactive, standard, batch\)/,
        ],
        [
            "a priority class no team may use",
            (d: Record<string, any>) => {
                d["platform:servingClasses"].priority.urgent = 9;
            },
            "platform:servingClasses.priority.urgent",
            /no team may use priority class "urgent"/,
        ],
        [
            "a key claiming a higher priority class than its team",
            (d: Record<string, any>) => {
                d["platform:apiKeys"][4].serving = { priorityClass: "interactive" };
            },
            "platform:apiKeys[4].serving.priorityClass",
            /"interactive" \(5\) is above team "globex\/research"'s "batch" \(0\): a key may only narrow/,
        ],
        [
            "a key raising its output-length-hint ceiling",
            (d: Record<string, any>) => {
                d["platform:apiKeys"][1].serving.maxOutputLengthHint = 100000;
            },
            "platform:apiKeys[1].serving.maxOutputLengthHint",
            /100000 is above team "acme\/search"'s 4096/,
        ],
        [
            "a team without an entitlement once classes exist",
            (d: Record<string, any>) => {
                delete team(d, 1, 0).serving;
            },
            "platform:tenants[1].teams[0].serving",
            /team "globex\/research" has no serving entitlement/,
        ],
        [
            "an SGLang endpoint (salt dropped) serving two tenants without a sharing group",
            (d: Record<string, any>) => {
                d["platform:kvSharing"] = [];
            },
            "platform:endpoints[1].engine",
            /sglang worker of Dynamo 1\.5\.0 is not proven to keep .* the 2 cache scopes whose keys call "Qwen\/Qwen3-32B" \(team:acme\/search, tenant:globex\)/,
        ],
        [
            "a tenant in two sharing groups for one model",
            (d: Record<string, any>) => {
                d["platform:kvSharing"].push({
                    name: "second",
                    tenants: ["acme", "globex"],
                    models: ["Qwen/Qwen3-32B"],
                    reason: "a second group",
                });
            },
            "platform:kvSharing[1].tenants",
            /tenant "acme" already shares model "Qwen\/Qwen3-32B" in group "qwen-sglang"/,
        ],
        [
            "a hub file setting the hub-computed cacheScopes",
            (d: Record<string, any>) => {
                d["platform:endpoints"][0].cacheScopes = 1;
            },
            "platform:endpoints[0].cacheScopes",
            /is set by the hub from its keys/,
        ],
        [
            "a TRT-LLM endpoint once a priority class is above the lowest",
            (d: Record<string, any>) => {
                d["platform:endpoints"][1].engine = "trtllm";
            },
            "platform:endpoints[1].engine",
            /TRT-LLM worker of Dynamo 1\.5\.0 never reads the request priority/,
        ],
    ] as const)("%s", (_t, mutate, key, message) => {
        const r = issues(mutate);
        expect(r.file).toBe(FILE);
        expect(
            r.lines.find((l) => l.startsWith(`${key}: `) && message.test(l)),
            `issues were:\n${r.lines.join("\n")}`,
        ).toBeDefined();
    });
});

describe("entitlements and cache scopes as the bundle carries them", () => {
    const hub = parse();
    const key = (id: string) => hub.apiKeys.find((k) => k.id === id)!;

    it("resolves a key to its team's classes, narrowed by its own", () => {
        expect(keyServing(hub, key("acme-search-prod"))).toMatchObject({ priority: 5, strictPriority: 2, maxOutputLengthHint: 4096 });
        // The CI key narrows priority and latency to batch/background and keeps the team's output ceiling.
        expect(keyServing(hub, key("acme-search-ci"))).toMatchObject({ priority: 0, strictPriority: 0, maxOutputLengthHint: 4096 });
        expect(keyServing(hub, key("globex-research-prod"))).toMatchObject({ priority: 0, strictPriority: 0, maxOutputLengthHint: 8192 });
    });

    it("salts per team where the tenant says so, per tenant otherwise, and per group only where declared", () => {
        const L = "meta-llama/Llama-3.3-70B-Instruct";
        const Q = "Qwen/Qwen3-32B";
        expect(keyServing(hub, key("acme-search-prod")).cacheScopes).toEqual({ [L]: "team:acme/search", [Q]: "shared:qwen-sglang" });
        expect(keyServing(hub, key("acme-agents-prod")).cacheScopes).toEqual({ [L]: "team:acme/agents" });
        expect(keyServing(hub, key("globex-research-prod")).cacheScopes).toEqual({ [L]: "tenant:globex", [Q]: "shared:qwen-sglang" });
        expect(cacheScopesOf(hub, L)).toBe(3);
        expect(cacheScopesOf(hub, Q)).toBe(1);
    });

    it("the bundle's policy carries each key's entitlement and validates against the bundle schema", () => {
        const hashes = Object.fromEntries(hub.apiKeys.map((k, i) => [k.id, String(i).repeat(64).slice(0, 64)]));
        const policy = PolicySchema.parse(accessModel(hub, hashes));
        expect(policy.apiKeys.find((k) => k.id === "acme-search-ci")?.serving).toEqual({
            priority: 0,
            strictPriority: 0,
            maxOutputLengthHint: 4096,
            cacheScopes: { "Qwen/Qwen3-32B": "shared:qwen-sglang" },
        });
    });

    it("each placed endpoint carries its cache-scope count to its spoke", () => {
        const extras = Object.fromEntries(hub.spokes.map((s) => [s.name, {} as never]));
        // The spokes' reachable edges, as the hub reads them from the spoke files beside it (failover peers).
        const edges = readSpokeEdges(hub, path.join(__dirname, "..", "stacks", "Pulumi.hub-prod.yaml"));
        const contracts = buildSpokeContracts(hub, "hub-prod", extras, edges);
        expect(contracts.hn1.endpoints.map((e) => [e.name, e.engine, e.cacheScopes])).toEqual([
            ["llama-70b", "vllm", 3],
            ["qwen3-32b", "sglang", 1],
        ]);
    });
});
