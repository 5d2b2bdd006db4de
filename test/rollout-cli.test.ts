import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import YAML from "yaml";
import { dynamoNamespace, type RenderView, transitionProblems } from "../lib/rollout";
import { readStackFile } from "../lib/stackfiles";
import { allPolicies } from "../policies/policies";
import type { CapturedResource } from "../tools/harness";
import { runPolicies } from "../tools/policy-runner";
import { hubFileOf, main } from "../tools/rollout";
import { referenceableOutputs } from "../tools/wire";
import { inputs, runRepoStack, STACKS, testTempDir } from "./helpers";
import { startPrometheus, type TestPrometheus } from "./prometheus-server";
import { openMetrics, START } from "./rollout-series";

describe("npm run rollout --hub: a stack name like the other tools, or a path", () => {
    it("resolves a stack name under stacks/, keeps a path, defaults to hub-prod", () => {
        expect(hubFileOf(undefined)).toBe(path.join("stacks", "Pulumi.hub-prod.yaml"));
        expect(hubFileOf("hub-prod")).toBe(path.join("stacks", "Pulumi.hub-prod.yaml"));
        expect(hubFileOf("hub-eu")).toBe(path.join("stacks", "Pulumi.hub-eu.yaml"));
        expect(hubFileOf("/tmp/x/Pulumi.hub-prod.yaml")).toBe("/tmp/x/Pulumi.hub-prod.yaml");
        expect(hubFileOf("Pulumi.hub-prod.yaml")).toBe("Pulumi.hub-prod.yaml");
    });

    it("the CLI reads the named stack's file", async () => {
        const out: string[] = [];
        // hn1/llama-70b of the shipped hub has no rollout: the message names the resolved file.
        const code = await main(["status", "hn1/llama-70b", "--hub", "hub-prod"], (s) => out.push(s));
        expect(out.join("\n")).toContain(path.join("stacks", "Pulumi.hub-prod.yaml"));
        expect(code).not.toBe(0);
    });
});

/**
 * The whole rollout through the command line, the way an operator drives it: the shipped hcm1/qwen3-32b rollout on a
 * copy of the hub file, from warming through every step to the promotion, each command reading a real Prometheus
 * (started here) whose frontend series follow the split the spoke would serve after each `pulumi up`. Every hub file
 * the command writes is rendered through the hub and the spoke and checked: the whole pack passes, and each render
 * follows the ordering rules from the one before (lib/rollout.ts `transitionProblems`). The promotion keeps the
 * target's graph (same name, same Pulumi URNs, same spec: no capacity gap) and removes only the source's resources.
 */
describe("npm run rollout from the first step through promotion, end to end", () => {
    const SRC = dynamoNamespace("qwen3-32b");
    const TGT = dynamoNamespace("v2-qwen3-32b");
    /** When each command runs (`--now`) and when the spoke serves what it wrote (`pulumi up` half a minute later). */
    const N1 = START + 300;
    const applyAt = (n: number) => n + 30;
    /** The next command: the step's applied check crosses within 90 s, the window is 120 s, the ingest delay 120 s. */
    const next = (n: number) => applyAt(n) + 360;
    const N = [N1, next(N1), next(next(N1)), next(next(next(N1)))];
    const S = N.map(applyAt);
    const EARLY = S[3] + 270;
    const PROMOTE = S[3] + 360;
    /** 10 requests per second for the model, split by the step the spoke serves. */
    const SPLIT = [10, 25, 50, 100];
    let prom: TestPrometheus;
    beforeAll(async () => {
        prom = await startPrometheus(
            openMetrics([
                { ns: SRC, rps: 10, segments: S.map((t, k) => [t, (10 * (100 - SPLIT[k])) / 100] as [number, number]) },
                { ns: TGT, rps: 0, ready: true, segments: S.map((t, k) => [t, (10 * SPLIT[k]) / 100] as [number, number]) },
            ]),
        );
    }, 120_000);
    afterAll(async () => {
        await prom?.stop();
    });

    const HUB = path.join(STACKS, "Pulumi.hub-prod.yaml");
    /** A copy of the shipped hub file with the rollout just added (no state) and a gate sized for the recorded minutes. */
    function hubCopy(): string {
        const dir = testTempDir("rollout-e2e-");
        const file = path.join(dir, "Pulumi.hub-prod.yaml");
        const doc = YAML.parseDocument(fs.readFileSync(HUB, "utf8"));
        const eps = doc.getIn(["config", "platform:endpoints"]) as any;
        const ro = eps.items.find((x: any) => x.get("rollout")).get("rollout");
        ro.delete("state");
        ro.set(
            "gate",
            doc.createNode({
                ttftP95Ratio: 1.2,
                itlP99Ratio: 1.2,
                errorRateDelta: 0.005,
                minRequests: 100,
                windowSeconds: 120,
                ingestDelaySeconds: 120,
                promotion: { soakSeconds: 120, maxErrorRate: 0.01, minRequests: 200 },
            }),
        );
        fs.writeFileSync(file, doc.toString({ lineWidth: 0 }));
        return file;
    }
    const run = async (args: string[]) => {
        const out: string[] = [];
        const code = await main(args, (s) => out.push(s));
        return { code, out: out.join("\n") };
    };
    const iso = (s: number) => new Date(s * 1000).toISOString();

    /** The hub file rendered: the hub, then spoke-hcm1 reading its contract, and the pack's report on the spoke. */
    async function render(file: string) {
        const config = readStackFile(file).config;
        const hub = await runRepoStack("hub-prod", { config });
        const spoke = await runRepoStack("spoke-hcm1", {
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
        });
        const report = await runPolicies(allPolicies, structuredClone(spoke.resources));
        return { resources: spoke.resources, mandatory: report.mandatory.map((f) => `${f.policyName}: ${f.message}`) };
    }
    /** What the ordering rules see of a render: the Qwen graphs' capacity and their share of the model's traffic. */
    function view(rs: CapturedResource[]): RenderView {
        const v: RenderView = new Map();
        for (const d of rs.filter((r) => r.type.endsWith(":DynamoGraphDeployment")).map(inputs)) {
            if (!/^([a-z0-9-]+-)?qwen3-32b$/.test(String(d.metadata.name))) continue;
            const workers = d.spec.components.filter((c: any) => ["prefill", "decode", "worker"].includes(c.type));
            v.set(d.metadata.name, { capacity: workers.length > 0 && workers.every((c: any) => c.replicas >= 1), weight: 0 });
        }
        for (const r of rs.filter((x) => x.type.endsWith(":AIGatewayRoute")).map(inputs))
            for (const rule of r.spec.rules)
                if (rule.matches[0].headers[0].value === "Qwen/Qwen3-32B") {
                    const primary = rule.backendRefs.filter((b: any) => !b.priority);
                    const explicit = primary.some((b: any) => b.weight !== undefined);
                    for (const b of primary)
                        v.set(b.name, { capacity: v.get(b.name)?.capacity ?? false, weight: explicit ? b.weight : 100 / primary.length });
                }
        return v;
    }

    it("advance x4, then promote: each written state renders, passes the pack and follows the ordering rules", async () => {
        const file = hubCopy();
        const states: Array<{ name: string; text: string }> = [{ name: "warming", text: fs.readFileSync(file, "utf8") }];
        const cmd = async (c: string, now: number, code: number, expectOut: RegExp) => {
            const r = await run([c, "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", iso(now)]);
            expect(r.code, r.out).toBe(code);
            expect(r.out).toMatch(expectOut);
            return r;
        };
        await cmd("advance", N[0], 0, /step 1\/4: 10% to v2-qwen3-32b/);
        states.push({ name: "step 1 (10%)", text: fs.readFileSync(file, "utf8") });
        // promote is the 100% step's transition only.
        await cmd("promote", N[1], 1, /at step 1\/4 \(10%\): promote is the transition from the 100% step/);
        for (let k = 1; k < 4; k++) {
            const r = await cmd("advance", N[k], 0, new RegExp(`gate: PASS[\\s\\S]*step ${k + 1}/4: ${SPLIT[k]}% to v2-qwen3-32b`));
            if (k === 3) expect(r.out).toMatch(/once applied, promote soaks the target alone \(120 s\) before the source graph goes/);
            states.push({ name: `step ${k + 1} (${SPLIT[k]}%)`, text: fs.readFileSync(file, "utf8") });
        }
        // At 100% the source answers nothing: the soak judges the target alone, and waits for its full soak.
        const early = await cmd("promote", EARLY, 3, /promotion soak: WAIT/);
        expect(early.out).toMatch(/the 100% step has \d+ s of readable traffic .* the promotion soak needs 120 s/);
        const done = await cmd("promote", PROMOTE, 0, /promotion soak: PASS/);
        expect(done.out).toMatch(/source +inference-qwen3-32b +requests +0 \(not judged: no traffic at 100%\)/);
        expect(done.out).toMatch(
            /promoted revision v2: .* its graph v2-qwen3-32b keeps its name \(no capacity gap\), and the source graph qwen3-32b goes/,
        );
        const text = fs.readFileSync(file, "utf8");
        states.push({ name: "promoted", text });
        const e = YAML.parse(text).config["platform:endpoints"].find((x: any) => x.spoke === "hcm1" && x.name === "qwen3-32b");
        expect(e).toMatchObject({ revision: "v2", engine: "vllm", planner: { enabled: false } });
        expect(e.rollout).toBeUndefined();
        // Nothing left to drive.
        expect((await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url])).out).toMatch(/has no rollout/);

        let prev: { name: string; view: RenderView; resources: CapturedResource[] } | undefined;
        for (const s of states) {
            fs.writeFileSync(file, s.text);
            const r = await render(file);
            expect(r.mandatory, s.name).toEqual([]);
            const v = view(r.resources);
            if (prev) expect(transitionProblems(prev.view, v), `${prev.name} -> ${s.name}`).toEqual([]);
            if (s.name === "promoted") {
                // The target's graph keeps its name and its Pulumi resources: nothing of it is replaced or restarted.
                const after = new Map(r.resources.map((x) => [x.urn, x] as const));
                const target = prev!.resources.filter((x) => x.urn.includes("v2-qwen3-32b"));
                expect(target.length).toBeGreaterThan(0);
                for (const x of target) {
                    expect(after.has(x.urn), `${x.urn} is kept`).toBe(true);
                    expect(inputs(after.get(x.urn)!), x.urn).toEqual(inputs(x));
                }
                // Only the source graph's resources go.
                const gone = prev!.resources.filter((x) => !after.has(x.urn)).map((x) => x.urn);
                expect(gone.length).toBeGreaterThan(0);
                for (const u of gone) expect(u, "only the source's resources are deleted").toMatch(/qwen3-32b/);
                expect([...v.keys()]).toEqual(["v2-qwen3-32b"]);
            }
            prev = { name: s.name, view: v, resources: r.resources };
        }
    }, 600_000);
});
