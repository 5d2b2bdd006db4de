/**
 * The rollout state machine and the hub-file edit (lib/rollout.ts), without a server: what `npm run rollout` decides
 * from a gate verdict, and that the edit keeps the file's comments and validates.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import type { Endpoint } from "../config/endpoint";
import { parseFlatStackConfig } from "../config/stack";
import {
    applyEdit,
    decideAbort,
    decideAdvance,
    decideHold,
    decidePromote,
    decideResume,
    findEndpoint,
    type GateResult,
    revisionsOf,
    rolloutHubIssues,
    rolloutStatusLines,
} from "../lib/rollout";
import { diffMarkdown, placementChanges } from "../tools/diff";
import { readStackFile } from "../lib/stackfiles";
import { STACKS, stackFile, testTempDir } from "./helpers";

const HUB_FILE = path.join(STACKS, "Pulumi.hub-prod.yaml");
const ENDPOINTS: Endpoint[] = JSON.parse(stackFile("hub-prod").config["platform:endpoints"]);
const INDEX = ENDPOINTS.findIndex((e) => e.rollout);
const E = ENDPOINTS[INDEX];
const NOW = new Date("2026-12-02T00:00:00Z");
const gate = (verdict: GateResult["verdict"], reasons = ["r"]): GateResult => ({
    verdict,
    reasons,
    range: { from: "a", to: "b", seconds: 900 },
    source: { dynamoNamespace: "inference-qwen3-32b", requests: 1000 },
    target: { dynamoNamespace: "inference-v2-qwen3-32b", requests: 300 },
    queries: [],
    applied: { applied: true, from: "a", latestShare: 0.1, query: "q" },
});

describe("rollout state machine", () => {
    it("the shipped rollout renders both graphs with the step's weights", () => {
        expect(revisionsOf(E).map((r) => [r.graph.name, r.graph.engine, r.weight])).toEqual([
            ["qwen3-32b", "sglang", 90],
            ["v2-qwen3-32b", "vllm", 10],
        ]);
    });
    it("a failed gate holds with what it measured; a held rollout waits for a person", () => {
        const d = decideAdvance(E, NOW, { gate: gate("hold", ["TTFT p95 ratio 2.37 above 1.2"]) });
        expect(d.exitCode).toBe(2);
        expect(d.edit).toMatchObject({ kind: "state", state: { step: 0, held: { reason: "gate failed: TTFT p95 ratio 2.37 above 1.2" } } });
        const held = { ...E, rollout: { ...E.rollout!, state: (d.edit as any).state } } as Endpoint;
        expect(revisionsOf(held).map((r) => r.weight)).toEqual([90, 10]);
        expect(decideAdvance(held, NOW, { gate: gate("pass") })).toMatchObject({ exitCode: 2, edit: { kind: "none" } });
        const resumed = decideResume(held, NOW);
        expect(resumed.edit).toMatchObject({ kind: "state", state: { step: 0, since: "2026-12-02T00:00:00Z" } });
        expect((resumed.edit as any).state.held).toBeUndefined();
    });
    it("too few samples waits: only the verdict is written, the step stays", () => {
        const d = decideAdvance(E, NOW, { gate: gate("wait") });
        expect(d.exitCode).toBe(3);
        expect(d.edit).toMatchObject({ kind: "state", state: { step: 0, since: E.rollout!.state!.since, lastGate: { verdict: "wait" } } });
    });
    it("warming without ready capacity sends no traffic", () => {
        const { state: _s, ...r } = E.rollout!;
        const warming = { ...E, rollout: r } as Endpoint;
        expect(revisionsOf(warming).map((x) => x.weight)).toEqual([100, 0]);
        const d = decideAdvance(warming, NOW, { targetReady: false });
        expect(d.exitCode).toBe(3);
        expect(d.edit).toMatchObject({ kind: "state", state: { phase: "warming" } });
    });
    it("abort: traffic back first, then the target goes", () => {
        const a = decideAbort(E, NOW);
        expect(a.edit).toMatchObject({ kind: "state", state: { phase: "aborting" } });
        const aborting = { ...E, rollout: { ...E.rollout!, state: (a.edit as any).state } } as Endpoint;
        expect(revisionsOf(aborting).map((r) => r.weight)).toEqual([100, 0]);
        expect(decideAdvance(aborting, NOW, {})).toMatchObject({ exitCode: 1 });
        expect(decideAbort(aborting, NOW).edit).toEqual({ kind: "remove" });
    });
    it("the 100% step is judged by the promotion soak: a comparison verdict there is refused, a soak elsewhere too", () => {
        const last = { ...E, rollout: { ...E.rollout!, state: { ...E.rollout!.state!, step: 3 } } } as Endpoint;
        expect(decideAdvance(last, NOW, { gate: gate("pass") })).toMatchObject({ exitCode: 1, edit: { kind: "none" } });
        expect(decideAdvance(E, NOW, { gate: { ...gate("pass"), judged: "soak" } })).toMatchObject({ exitCode: 1 });
        const soak = (v: GateResult["verdict"], reasons?: string[]) => ({ ...gate(v, reasons), judged: "soak" as const });
        expect(decideAdvance(last, NOW, { gate: soak("wait") })).toMatchObject({
            exitCode: 3,
            edit: { kind: "state", state: { step: 3, lastGate: { verdict: "wait" } } },
        });
        expect(decideAdvance(last, NOW, { gate: soak("hold", ["error rate 5.00% above the promotion's 1.00%"]) }).edit).toMatchObject({
            kind: "state",
            state: { step: 3, held: { reason: "promotion soak failed: error rate 5.00% above the promotion's 1.00%" } },
        });
        const p = decidePromote(last, NOW, { gate: soak("pass") });
        expect(p).toMatchObject({ exitCode: 0, edit: { kind: "promote", revision: "v2", settings: { engine: "vllm" } } });
        expect(p.message).toMatch(/its graph v2-qwen3-32b keeps its name \(no capacity gap\), and the source graph qwen3-32b goes/);
        // promote before the 100% step is refused, naming where the rollout is.
        expect(decidePromote(E, NOW, { gate: soak("pass") })).toMatchObject({
            exitCode: 1,
            edit: { kind: "none" },
            message: expect.stringMatching(/at step 1\/4 \(10%\): promote is the transition from the 100% step/),
        });
    });
    it("the hub refuses a target too small for 100% only while the rollout carries no traffic (abort stays writable)", () => {
        const small = structuredClone(E) as Endpoint;
        small.rollout!.target.topology = {
            mode: "disaggregated",
            prefill: { replicas: 1, gpusPerWorker: 2 },
            decode: { replicas: 1, gpusPerWorker: 2 },
        };
        (small.topology as any).decode.replicas = 3;
        const at = (st: any) => {
            const e = structuredClone(small);
            e.rollout!.state = st;
            return rolloutHubIssues([e]).map((i) => `${i.path.join(".")}: ${i.message}`);
        };
        expect(at(undefined).join("\n")).toMatch(
            /^endpoints\.0\.rollout\.target\.topology: the target v2-qwen3-32b can never carry the last step \(100%\): its decode runs 1 replica, the source's 3/,
        );
        expect(at({ phase: "warming", since: "2026-12-01T09:00:00Z" })).toHaveLength(1);
        expect(at(E.rollout!.state)).toEqual([]);
        expect(at({ phase: "aborting", since: "2026-12-01T09:00:00Z", targetReady: true })).toEqual([]);
        // Sized for 100% (the same replicas per role), it is accepted when written.
        small.rollout!.target.topology = { ...small.topology } as any;
        expect(at(undefined)).toEqual([]);
    });
    it("hold by a person", () => {
        expect(decideHold(E, NOW, "review").edit).toMatchObject({ kind: "state", state: { held: { reason: "review" } } });
    });
    it("names an endpoint by spoke/name, or by name when one rollout carries it", () => {
        expect(findEndpoint(ENDPOINTS, "hcm1/qwen3-32b")).toEqual({ index: INDEX });
        expect(findEndpoint(ENDPOINTS, "qwen3-32b")).toEqual({ index: INDEX });
        expect(findEndpoint(ENDPOINTS, "llama-70b")).toMatchObject({ error: expect.stringMatching(/names 3 endpoints/) });
    });
    it("status lines from the hub's placement contracts", () => {
        expect(rolloutStatusLines({ hcm1: { endpoints: [E] }, hn1: { endpoints: [] } })).toEqual([
            "hcm1/qwen3-32b -> v2: shifting step 1/4; qwen3-32b 90% · v2-qwen3-32b 10%; last gate pass at 2026-12-01T09:00:00Z",
        ]);
    });
});

describe("the hub-file edit", () => {
    const text = fs.readFileSync(HUB_FILE, "utf8");
    const parse = (t: string) => {
        const dir = testTempDir("rollout-edit-");
        const f = path.join(dir, "Pulumi.hub-prod.yaml");
        fs.writeFileSync(f, t);
        const sf = readStackFile(f);
        const cfg = parseFlatStackConfig(sf.config, f, sf.secretKeys, { now: NOW });
        if (cfg.role !== "hub") throw new Error("not a hub");
        return cfg.hub.endpoints;
    };
    const comments = (t: string) => t.split("\n").filter((l) => l.trim().startsWith("#"));
    it("promotion: the endpoint takes the target's settings and revision, the rollout goes, comments stay", () => {
        const out = applyEdit(text, HUB_FILE, INDEX, { kind: "promote", settings: { ...E.rollout!.target }, revision: "v2" });
        const e = parse(out)[INDEX];
        expect(e).toMatchObject({ engine: "vllm", revision: "v2", planner: { enabled: false } });
        expect(e.rollout).toBeUndefined();
        expect(revisionsOf(e).map((r) => r.graph.name)).toEqual(["v2-qwen3-32b"]);
        for (const l of comments(text).filter(
            (x) =>
                !x.includes("Gated canary") &&
                !x.includes("DynamoGraphDeployment and Dynamo") &&
                !x.includes("4 GPUs fit") &&
                !x.includes("writes `state`") &&
                !x.includes("The 100% step"),
        ))
            expect(out).toContain(l);
    });
    it("removal leaves the endpoint as it ran before the rollout", () => {
        const out = applyEdit(text, HUB_FILE, INDEX, { kind: "remove" });
        const e = parse(out)[INDEX];
        expect(e.rollout).toBeUndefined();
        expect(e.engine).toBe("sglang");
        expect(YAML.parse(out).config["platform:endpoints"].length).toBe(ENDPOINTS.length);
    });
});

describe("the PR diff shows a rollout's step, weights and last gate verdict", () => {
    it("advancing a step changes the placement table's line for the endpoint", () => {
        const dir = testTempDir("rollout-diff-");
        for (const side of ["base", "head"]) fs.mkdirSync(path.join(dir, side));
        const text = fs.readFileSync(HUB_FILE, "utf8");
        fs.writeFileSync(path.join(dir, "base", "Pulumi.hub-prod.yaml"), text);
        const d = decideAdvance(E, NOW, { gate: gate("pass") });
        fs.writeFileSync(path.join(dir, "head", "Pulumi.hub-prod.yaml"), applyEdit(text, HUB_FILE, INDEX, d.edit));
        const placement = placementChanges(path.join(dir, "base"), path.join(dir, "head"));
        expect(placement.map((p) => p.spoke)).toEqual(["hcm1"]);
        const md = diffMarkdown([], { ref: "main", sha: "0123456789abcdef" }, { files: [], placement });
        expect(md).toContain(
            "+ qwen3-32b (Qwen/Qwen3-32B, 8 GPUs; rollout v2: shifting step 2/4; qwen3-32b 75% · v2-qwen3-32b 25%; last gate pass at 2026-12-02T00:00:00Z)",
        );
        expect(md).toContain(
            "− qwen3-32b (Qwen/Qwen3-32B, 8 GPUs; rollout v2: shifting step 1/4; qwen3-32b 90% · v2-qwen3-32b 10%; last gate pass at 2026-12-01T09:00:00Z)",
        );
    });
});
