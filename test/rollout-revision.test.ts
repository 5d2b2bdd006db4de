/**
 * A rollout of a model revision (config/endpoint.ts `modelRevision`): hcm1/qwen3-32b pinned at one Hugging Face commit
 * rolls to another, nothing else changed. Every state is rendered through the real program (hub, then spoke) and
 * checked as test/rollout-steps.test.ts checks the shipped engine change: the whole pack passes, each render follows the
 * ordering rules from the one before, each graph's workers carry their own revision's flags (and the model-cache
 * pre-stage fetches the revision the workers load). Then `npm run rollout -- advance` drives it on a copy of the hub
 * file against a real Prometheus started by the test: a passing gate writes the next step, a regression holds.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import YAML from "yaml";
import type { Endpoint } from "../config/endpoint";
import { prestageDaemonSet } from "../lib/faststart";
import { decideAdvance, dynamoNamespace, type RenderView, transitionProblems, viewOf } from "../lib/rollout";
import { allPolicies } from "../policies/policies";
import type { CapturedResource } from "../tools/harness";
import { runPolicies } from "../tools/policy-runner";
import { main } from "../tools/rollout";
import { referenceableOutputs } from "../tools/wire";
import { inputs, runRepoStack, STACKS, stackFile } from "./helpers";
import { startPrometheus, type TestPrometheus } from "./prometheus-server";
import { END, openMetrics, START, applied, PASS, SOAK_PASS } from "./rollout-series";

const HUB = stackFile("hub-prod").config;
const ENDPOINTS: Endpoint[] = JSON.parse(HUB["platform:endpoints"]);
const INDEX = ENDPOINTS.findIndex((e) => e.spoke === "hcm1" && e.name === "qwen3-32b");
const OLD = "0123456789abcdef0123456789abcdef01234567";
const NEW = "fedcba9876543210fedcba9876543210fedcba98";
const GATE = {
    ttftP95Ratio: 1.2,
    itlP99Ratio: 1.2,
    errorRateDelta: 0.005,
    minRequests: 500,
    windowSeconds: 900,
    ingestDelaySeconds: 120,
    promotion: { soakSeconds: 1800, maxErrorRate: 0.01, minRequests: 2000 },
};
const NOW = new Date("2026-12-01T12:00:00Z");

/** hcm1/qwen3-32b at commit OLD, rolling to commit NEW as revision `r2`, no state yet (warming). */
function revisionRollout(): Endpoint {
    const e = structuredClone(ENDPOINTS[INDEX]) as any;
    e.modelRevision = OLD;
    e.tokenizerMatchesMain = OLD;
    e.rollout = { revision: "r2", target: { modelRevision: NEW, tokenizerMatchesMain: NEW }, steps: [10, 50, 100], gate: GATE };
    return e;
}

function states(): Array<{ name: string; endpoint: Endpoint }> {
    const warming = revisionRollout();
    const { rollout: _r, ...before } = structuredClone(warming);
    const out = [
        { name: "before the rollout", endpoint: before as Endpoint },
        { name: "warming", endpoint: warming },
    ];
    let cur = applied(warming, decideAdvance(warming, NOW, { targetReady: true }));
    out.push({ name: "step 1 (10%)", endpoint: cur });
    for (let k = 1; k < 3; k++) {
        cur = applied(cur, decideAdvance(cur, NOW, { gate: PASS }));
        out.push({ name: `step ${k + 1}`, endpoint: cur });
    }
    out.push({ name: "promoted", endpoint: applied(cur, decideAdvance(cur, NOW, { gate: SOAK_PASS })) });
    return out;
}

async function renderSpoke(e: Endpoint): Promise<CapturedResource[]> {
    const endpoints = ENDPOINTS.map((x, i) => (i === INDEX ? e : x));
    const hub = await runRepoStack("hub-prod", { config: { ...HUB, "platform:endpoints": JSON.stringify(endpoints) } });
    const spoke = await runRepoStack("spoke-hcm1", {
        stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
    });
    return spoke.resources;
}

const kindOf = (rs: CapturedResource[], kind: string) => rs.filter((r) => r.type.endsWith(`:${kind}`)).map(inputs);

function renderedView(rs: CapturedResource[], model: string): RenderView {
    const v: RenderView = new Map();
    for (const d of kindOf(rs, "DynamoGraphDeployment")) {
        if (!/^([a-z0-9-]+-)?qwen3-32b$/.test(String(d.metadata.name))) continue;
        const workers = d.spec.components.filter((c: any) => ["prefill", "decode", "worker"].includes(c.type));
        v.set(d.metadata.name, { capacity: workers.length > 0 && workers.every((c: any) => c.replicas >= 1), weight: 0 });
    }
    for (const r of kindOf(rs, "AIGatewayRoute"))
        for (const rule of r.spec.rules)
            if (rule.matches[0].headers[0].value === model) {
                const primary = rule.backendRefs.filter((b: any) => !b.priority);
                const explicit = primary.some((b: any) => b.weight !== undefined);
                for (const b of primary)
                    v.set(b.name, { capacity: v.get(b.name)?.capacity ?? false, weight: explicit ? b.weight : 100 / primary.length });
            }
    return v;
}

/** The `--revision` value each worker container of a graph gets (and `--tokenizer-revision` on vLLM). */
function workerRevisions(d: any): string[] {
    const out: string[] = [];
    for (const c of d.spec.components.filter((x: any) => ["prefill", "decode", "worker"].includes(x.type))) {
        const args: string[] = c.podTemplate.spec.containers[0].args;
        const at = (f: string) => (args.includes(f) ? args[args.indexOf(f) + 1] : "none");
        out.push(`${c.type}:${at("--revision")}`);
    }
    return out;
}

describe("a model-revision rollout, every state rendered", () => {
    it("each render passes the pack, follows the ordering rules, and runs each graph at its own revision", async () => {
        let prev: RenderView | undefined;
        let prevName = "";
        for (const s of states()) {
            const rs = await renderSpoke(s.endpoint);
            const report = await runPolicies(allPolicies, rs);
            expect(
                report.mandatory.map((f) => `${f.policyName}: ${f.message}`),
                s.name,
            ).toEqual([]);
            const view = renderedView(rs, s.endpoint.model);
            expect(view, s.name).toEqual(viewOf(s.endpoint));
            if (prev) expect(transitionProblems(prev, view), `${prevName} -> ${s.name}`).toEqual([]);
            prev = view;
            prevName = s.name;
            const graphs = new Map(kindOf(rs, "DynamoGraphDeployment").map((d) => [d.metadata.name, d]));
            const expected = new Map<string, string>();
            if (s.name === "promoted") expected.set("r2-qwen3-32b", NEW);
            else {
                expected.set("qwen3-32b", OLD);
                if (s.name !== "before the rollout") expected.set("r2-qwen3-32b", NEW);
            }
            expect([...graphs.keys()].filter((n) => /^([a-z0-9-]+-)?qwen3-32b$/.test(n)).sort(), s.name).toEqual(
                [...expected.keys()].sort(),
            );
            for (const [name, rev] of expected)
                expect(workerRevisions(graphs.get(name)), `${s.name}: ${name}`).toEqual([`prefill:${rev}`, `decode:${rev}`]);
        }
    }, 300_000);

    it("vLLM workers get the tokenizer at the same revision (vLLM's tokenizer revision does not follow --revision)", async () => {
        const e = revisionRollout() as any;
        e.rollout.target.engine = "vllm";
        e.rollout.state = { phase: "warming", since: "2026-12-01T09:00:00Z" };
        const rs = await renderSpoke(e);
        const d = kindOf(rs, "DynamoGraphDeployment").find((x) => x.metadata.name === "r2-qwen3-32b");
        for (const c of d!.spec.components.filter((x: any) => ["prefill", "decode"].includes(x.type))) {
            const args: string[] = c.podTemplate.spec.containers[0].args;
            expect(args[args.indexOf("--revision") + 1]).toBe(NEW);
            expect(args[args.indexOf("--tokenizer-revision") + 1]).toBe(NEW);
        }
    }, 120_000);
});

describe("the model-cache pre-stage fetches the revision the workers load", () => {
    it("its script, run by python3 over a recording huggingface_hub, passes the revision to snapshot_download", () => {
        const e = {
            ...revisionRollout(),
            speculative: { method: "eagle3", draftModel: "org/drafter", numSpeculativeTokens: 3 },
        } as Endpoint;
        const ds = prestageDaemonSet({
            endpoint: e,
            namespace: "inference",
            image: "img",
            nodeSelector: {},
            tolerations: [],
            nvme: { mountPath: "/mnt/nvme" } as any,
            labels: {},
        }) as any;
        const init = ds.spec.template.spec.initContainers.find((c: any) => c.name === "model-cache");
        expect(init.args).toEqual(["--model", "Qwen/Qwen3-32B", "--revision", OLD, "--model", "org/drafter"]);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "prestage-"));
        fs.writeFileSync(
            path.join(dir, "huggingface_hub.py"),
            "def snapshot_download(repo_id, revision=None):\n    return repo_id + '@' + str(revision)\n",
        );
        const r = spawnSync(init.command[0], [...init.command.slice(1), ...init.args], {
            encoding: "utf8",
            env: { ...process.env, PYTHONPATH: dir },
        });
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout.trim().split("\n")).toEqual([
            `pre-staging Qwen/Qwen3-32B ${OLD} -> Qwen/Qwen3-32B@${OLD}`,
            "pre-staging org/drafter main -> org/drafter@None",
        ]);
        const bad = spawnSync(init.command[0], [...init.command.slice(1), "--revision", OLD], {
            encoding: "utf8",
            env: { ...process.env, PYTHONPATH: dir },
        });
        expect(bad.status).not.toBe(0);
        expect(bad.stderr).toMatch(/unknown argument --revision/);
    });
});

describe("npm run rollout -- advance drives a model-revision rollout against a real Prometheus", () => {
    let prom: TestPrometheus;
    const ns = (dgd: string) => dynamoNamespace(dgd);
    beforeAll(async () => {
        prom = await startPrometheus(
            openMetrics([
                { ns: ns("qwen3-32b"), rps: 2 },
                // r2: same latency (passes); r3: the new weights answer twice as slowly (holds).
                { ns: ns("r2-qwen3-32b"), rps: 0.5, ready: true },
                { ns: ns("r3-qwen3-32b"), rps: 0.5, ready: true, slow: 1 },
            ]),
        );
    }, 120_000);
    afterAll(async () => {
        await prom?.stop();
    });

    const iso = (s: number) => new Date(s * 1000).toISOString().replace(".000", "");
    const nowIso = new Date((END + GATE.ingestDelaySeconds) * 1000).toISOString();
    /** A copy of the shipped hub file whose hcm1/qwen3-32b rollout is replaced by a model-revision rollout. */
    const hubCopy = (revision: string, state?: Record<string, unknown>) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rollout-revision-"));
        const file = path.join(dir, "Pulumi.hub-prod.yaml");
        const doc = YAML.parseDocument(fs.readFileSync(path.join(STACKS, "Pulumi.hub-prod.yaml"), "utf8"));
        const eps = doc.getIn(["config", "platform:endpoints"]) as any;
        const i = eps.items.findIndex((x: any) => x.get("rollout"));
        eps.items[i].set("modelRevision", OLD);
        eps.items[i].set("tokenizerMatchesMain", OLD);
        eps.items[i].set(
            "rollout",
            doc.createNode({
                revision,
                target: { modelRevision: NEW, tokenizerMatchesMain: NEW },
                steps: [10, 50, 100],
                gate: GATE,
                ...(state ? { state } : {}),
            }),
        );
        fs.writeFileSync(file, doc.toString({ lineWidth: 0 }));
        return { file, index: i };
    };
    const run = async (args: string[]) => {
        const out: string[] = [];
        const code = await main(args, (s) => out.push(s));
        return { code, out: out.join("\n") };
    };
    const rolloutOf = (file: string, index: number) =>
        YAML.parse(fs.readFileSync(file, "utf8")).config["platform:endpoints"][index].rollout;

    it("warming -> step 1 (health gate) -> step 2 (gate passes), each written into the hub file", async () => {
        const { file, index } = hubCopy("r2");
        let r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).toBe(0);
        expect(r.out).toMatch(/health gate: .*inference-r2-qwen3-32b/);
        expect(rolloutOf(file, index).state).toMatchObject({ phase: "shifting", step: 0, targetReady: true });
        // The step began when the data began: the gate reads the whole window.
        const doc = YAML.parseDocument(fs.readFileSync(file, "utf8"));
        (doc.getIn(["config", "platform:endpoints", index, "rollout", "state"]) as any).set("since", iso(START));
        fs.writeFileSync(file, doc.toString({ lineWidth: 0 }));
        r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).toBe(0);
        expect(r.out).toMatch(/gate: PASS/);
        const ro = rolloutOf(file, index);
        expect(ro.state).toMatchObject({ phase: "shifting", step: 1, lastGate: { verdict: "pass" } });
        expect(ro.target).toEqual({ modelRevision: NEW, tokenizerMatchesMain: NEW });
    });

    it("a regression of the new revision holds the rollout with what was measured, and writes no step", async () => {
        const { file, index } = hubCopy("r3", { phase: "shifting", step: 0, since: iso(START), targetReady: true });
        const r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).not.toBe(0);
        expect(r.out).toMatch(/TTFT p95 .* ratio 2\.00 above 1\.2/);
        const st = rolloutOf(file, index).state;
        expect(st).toMatchObject({ phase: "shifting", step: 0, lastGate: { verdict: "hold" } });
        expect(st.held?.reason).toMatch(/TTFT p95/);
        // Held: advancing again writes no step until a person resumes or aborts.
        const again = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(again.code, again.out).not.toBe(0);
        expect(rolloutOf(file, index).state.step).toBe(0);
    });
});
