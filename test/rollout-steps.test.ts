/**
 * Every state of the shipped rollout (hcm1/qwen3-32b, SGLang -> vLLM revision v2) rendered through the real program
 * (hub, then the spoke reading the hub's contract) and checked three ways: the whole pack passes, each render
 * against the one before by the ordering rules (lib/rollout.ts `transitionProblems`: capacity before traffic going
 * up, traffic before capacity going down, never both in one step), and the rendered weights against the state. Then
 * the pack's rollout policy on renders broken by hand: traffic to a target never reported ready, a revision scaled
 * to zero while carrying traffic, weights outside a rollout, a third weighted backend; the same on graphs in the
 * deprecated v1alpha1 shape (`spec.services{}`), and a graph in a shape the pack cannot read refused.
 */
import { describe, expect, it } from "vitest";
import type { Endpoint } from "../config/endpoint";
import { ROLLOUT_ANNOTATION } from "../lib/labels";
import { decideAbort, decideAdvance, type RenderView, transitionProblems, viewOf } from "../lib/rollout";
import { allPolicies } from "../policies/policies";
import { rolloutFindings, dynamoNamespacePrefixIsolation } from "../policies/rollout";
import type { CapturedResource } from "../tools/harness";
import { runPolicies } from "../tools/policy-runner";
import { referenceableOutputs } from "../tools/wire";
import { inputs, runRepoStack, stackFile } from "./helpers";
import { applied, PASS, SOAK_PASS } from "./rollout-series";
import { toV1alpha1 } from "./dgd-v1alpha1";

const HUB = stackFile("hub-prod").config;
const ENDPOINTS: Endpoint[] = JSON.parse(HUB["platform:endpoints"]);
const INDEX = ENDPOINTS.findIndex((e) => e.spoke === "hcm1" && e.name === "qwen3-32b");
const SHIPPED = ENDPOINTS[INDEX];
const NOW = new Date("2026-12-01T12:00:00Z");

/** The states of the rollout, in the order the command line writes them, with the ones of an abort. */
function states(): Array<{ name: string; endpoint: Endpoint }> {
    const { rollout: _r, ...before } = structuredClone(SHIPPED);
    const warming = structuredClone(SHIPPED);
    delete (warming.rollout as any).state;
    const out = [
        { name: "before the rollout", endpoint: before as Endpoint },
        { name: "warming (target capacity, no traffic)", endpoint: warming },
    ];
    let cur = applied(warming, decideAdvance(warming, NOW, { targetReady: true }));
    out.push({ name: `step 1 (${SHIPPED.rollout!.steps[0]}%)`, endpoint: cur });
    for (let k = 1; k < SHIPPED.rollout!.steps.length; k++) {
        cur = applied(cur, decideAdvance(cur, NOW, { gate: PASS }));
        out.push({ name: `step ${k + 1} (${SHIPPED.rollout!.steps[k]}%)`, endpoint: cur });
    }
    out.push({ name: "promoted (source graph removed)", endpoint: applied(cur, decideAdvance(cur, NOW, { gate: SOAK_PASS })) });
    return out;
}

/** The states of an abort from the second step: traffic back first, then the target's graph goes. */
function abortStates(): Array<{ name: string; endpoint: Endpoint }> {
    const step2 = states()[3].endpoint;
    const aborting = applied(step2, decideAbort(step2, NOW));
    const removed = applied(aborting, decideAbort(aborting, NOW));
    return [
        { name: "step 2", endpoint: step2 },
        { name: "aborting (traffic back to the source)", endpoint: aborting },
        { name: "aborted (target graph removed)", endpoint: removed },
    ];
}

/**
 * The hub (with the endpoint in the given state) then spoke-hcm1 reading its contract, and the pack's report on the
 * spoke. Rendered once per state: the abort path starts from the promotion's step 2 and the hand-broken renders from
 * its step 1. Callers get their own copy of the resources.
 */
const renders = new Map<string, Promise<{ resources: CapturedResource[]; report: Promise<Awaited<ReturnType<typeof runPolicies>>> }>>();
function renderState(e: Endpoint) {
    const key = JSON.stringify(e);
    let r = renders.get(key);
    if (!r) {
        r = (async () => {
            const endpoints = ENDPOINTS.map((x, i) => (i === INDEX ? e : x));
            const hub = await runRepoStack("hub-prod", { config: { ...HUB, "platform:endpoints": JSON.stringify(endpoints) } });
            const spoke = await runRepoStack("spoke-hcm1", {
                stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
            });
            const resources = spoke.resources;
            let report: Promise<Awaited<ReturnType<typeof runPolicies>>> | undefined;
            return {
                resources,
                get report() {
                    report ??= runPolicies(allPolicies, structuredClone(resources));
                    return report;
                },
            };
        })();
        renders.set(key, r);
    }
    return r;
}

async function renderSpoke(e: Endpoint): Promise<CapturedResource[]> {
    return structuredClone((await renderState(e)).resources);
}

const kindOf = (rs: CapturedResource[], kind: string) => rs.filter((r) => r.type.endsWith(`:${kind}`));

/** Replaces the graph `name` of a render by its v1alpha1 form (resource type and both sides). */
function asV1alpha1(rs: CapturedResource[], name: string): CapturedResource[] {
    for (const r of kindOf(rs, "DynamoGraphDeployment"))
        if ((r.inputs as any).metadata?.name === name) {
            r.type = "kubernetes:nvidia.com/v1alpha1:DynamoGraphDeployment";
            r.inputs = toV1alpha1(r.inputs as any);
            r.outputs = toV1alpha1(r.outputs as any);
        }
    return rs;
}

/** The ordering view of a render: the Qwen graphs (capacity: every worker component at least one replica) and weights. */
function renderedView(rs: CapturedResource[]): RenderView {
    const v: RenderView = new Map();
    for (const d of kindOf(rs, "DynamoGraphDeployment").map(inputs)) {
        if (!/^([a-z0-9-]+-)?qwen3-32b$/.test(String(d.metadata.name))) continue;
        const workers = d.spec.components.filter((c: any) => ["prefill", "decode", "worker"].includes(c.type));
        v.set(d.metadata.name, { capacity: workers.length > 0 && workers.every((c: any) => c.replicas >= 1), weight: 0 });
    }
    for (const r of kindOf(rs, "AIGatewayRoute").map(inputs))
        for (const rule of r.spec.rules)
            if (rule.matches[0].headers[0].value === SHIPPED.model) {
                // Priority 0 carries the traffic; a peer spoke's fallback (priority 1+, lib/failover.ts) is used only
                // when every priority-0 backend fails, so it is no part of the rollout's split.
                const primary = rule.backendRefs.filter((b: any) => !b.priority);
                const explicit = primary.some((b: any) => b.weight !== undefined);
                for (const b of primary) {
                    const w = explicit ? b.weight : 100 / primary.length;
                    v.set(b.name, { capacity: v.get(b.name)?.capacity ?? false, weight: w });
                }
            }
    return v;
}

describe("every state of the shipped rollout, rendered", () => {
    const runs = [
        { path: "promotion", states: states() },
        { path: "abort", states: abortStates() },
    ];
    for (const run of runs)
        it(`${run.path}: each render passes the pack and follows the ordering rules from the one before`, async () => {
            let prev: RenderView | undefined;
            let prevName = "";
            for (const s of run.states) {
                const rendered = await renderState(s.endpoint);
                const rs = structuredClone(rendered.resources);
                const report = await rendered.report;
                expect(
                    report.mandatory.map((f) => `${f.policyName}: ${f.message}`),
                    s.name,
                ).toEqual([]);
                const view = renderedView(rs);
                // The render is what the state says (lib/rollout.ts viewOf), graph by graph.
                expect(view, s.name).toEqual(viewOf(s.endpoint));
                if (prev) expect(transitionProblems(prev, view), `${prevName} -> ${s.name}`).toEqual([]);
                prev = view;
                prevName = s.name;
            }
        }, 240_000);
});

describe("the ordering rules refuse what a hand-written step would do", () => {
    const all = states();
    it("rollout added with traffic at once: capacity and traffic together", () => {
        expect(transitionProblems(viewOf(all[0].endpoint), viewOf(all[2].endpoint))).toEqual(
            expect.arrayContaining([expect.stringMatching(/v2-qwen3-32b gets traffic in the same step its capacity is added/)]),
        );
    });
    it("promotion straight from a step where the source still carries traffic", () => {
        expect(transitionProblems(viewOf(all[3].endpoint), viewOf(all[all.length - 1].endpoint))).toEqual(
            expect.arrayContaining([expect.stringMatching(/qwen3-32b loses its capacity while still carrying 75% of the traffic/)]),
        );
    });
    it("abort that removes the target while it carries traffic", () => {
        const [step2, , removed] = abortStates();
        expect(transitionProblems(viewOf(step2.endpoint), viewOf(removed.endpoint)).join("\n")).toMatch(
            /v2-qwen3-32b loses its capacity while still carrying 25% of the traffic/,
        );
    });
});

describe("the pack's rollout policy on renders broken by hand", () => {
    let rendered: Promise<CapturedResource[]> | undefined;
    const step1 = async () => {
        if (!rendered) rendered = renderSpoke(states()[2].endpoint);
        return structuredClone(await rendered);
    };
    const edit = (rs: CapturedResource[], kind: string, name: string, fn: (o: any) => void) => {
        for (const r of kindOf(rs, kind))
            for (const side of [r.inputs as any, r.outputs as any]) if (side?.metadata?.name === name) fn(side);
    };
    const messages = (rs: CapturedResource[]) => rolloutFindings(rs.map((r) => ({ ...r, props: r.outputs })) as any).map((f) => f.message);

    it("a graph whose name begins with another's is refused (dynamo-namespace-prefix-isolation): its workers would be discovered by the other's frontend", async () => {
        const rs = await step1();
        const prefix = (x: CapturedResource[]) => {
            const out: string[] = [];
            dynamoNamespacePrefixIsolation.validateStack!({ resources: x.map((r) => ({ ...r, props: r.outputs })) } as any, (m: string) =>
                out.push(m),
            );
            return out;
        };
        expect(prefix(rs)).toEqual([]);
        // The naming the product had first, `<endpoint>-<revision>`: the source's frontend prefix matches it.
        edit(rs, "DynamoGraphDeployment", "v2-qwen3-32b", (o) => (o.metadata.name = "qwen3-32b-v2"));
        expect(prefix(rs).join("\n")).toMatch(
            /DynamoGraphDeployment inference\/qwen3-32b-v2 begins with qwen3-32b: the frontend of qwen3-32b/,
        );
    });
    it("the shipped step passes", async () => {
        expect(messages(await step1())).toEqual([]);
    });
    it("traffic to a target whose capacity was never reported ready is refused", async () => {
        const rs = await step1();
        edit(rs, "AIGatewayRoute", "llm-models-0", (o) => {
            const a = JSON.parse(o.metadata.annotations[ROLLOUT_ANNOTATION]);
            a[0].revisions[1].ready = false;
            o.metadata.annotations[ROLLOUT_ANNOTATION] = JSON.stringify(a);
        });
        expect(messages(rs).join("\n")).toMatch(/sends weight 10 to v2-qwen3-32b, whose capacity was never reported ready/);
    });
    it("a revision scaled to zero while carrying traffic is refused", async () => {
        const rs = await step1();
        edit(rs, "DynamoGraphDeployment", "qwen3-32b", (o) => {
            for (const c of o.spec.components) if (c.type === "decode") c.replicas = 0;
        });
        expect(messages(rs).join("\n")).toMatch(/sends weight 90 to qwen3-32b, but its decode run 0 replicas/);
    });
    it("a target without the capacity for its step's share is refused: 10% of 20 decode replicas needs 2", async () => {
        // Before: one ready replica of each role was enough, whatever the share.
        const rs = await step1();
        edit(rs, "DynamoGraphDeployment", "qwen3-32b", (o) => {
            for (const c of o.spec.components) if (c.type === "decode") c.replicas = 20;
        });
        // Every rule of the model (its own and the failover hop's) is refused.
        const found = messages(rs);
        expect(found.length).toBeGreaterThan(0);
        for (const m of found)
            expect(m).toMatch(
                /sends 10% of Qwen\/Qwen3-32B to v2-qwen3-32b, but its decode runs 1 replica, and 10% of the source's 20 decode replicas needs ceil\(0\.1 x 20\) = 2: a revision gets a share/,
            );
        // Scaled to the share, it passes.
        edit(rs, "DynamoGraphDeployment", "v2-qwen3-32b", (o) => {
            for (const c of o.spec.components) if (c.type === "decode") c.replicas = 2;
        });
        expect(messages(rs)).toEqual([]);
    });
    /**
     * Step 1 with a source of 20 decode replicas and an aggregated target (one worker component of 2 GPUs): the roles
     * differ, so worker GPUs compare (the source's 1 x 2 prefill + 20 x 2 decode = 42).
     */
    const rolesDiffer = async () => {
        const rs = await step1();
        edit(rs, "DynamoGraphDeployment", "qwen3-32b", (o) => {
            for (const c of o.spec.components) if (c.type === "decode") c.replicas = 20;
        });
        edit(rs, "DynamoGraphDeployment", "v2-qwen3-32b", (o) => {
            o.spec.components = o.spec.components.filter((c: any) => c.type !== "decode");
            for (const c of o.spec.components) if (c.type === "prefill") c.type = "worker";
        });
        return rs;
    };
    it("a target with other worker roles than its source is compared by worker GPUs", async () => {
        const rs = await rolesDiffer();
        expect(messages(rs).join("\n")).toMatch(
            /its workers \(worker\) request 2 GPUs, and 10% of the source's 42 worker GPUs \(decode, prefill, other roles, so replicas do not compare\) needs ceil\(0\.1 x 42\) = 5/,
        );
    });
    it("weights on a rule without a rollout are refused (closed world)", async () => {
        const rs = await step1();
        edit(rs, "AIGatewayRoute", "llm-models-0", (o) => {
            for (const rule of o.spec.rules) if (rule.matches[0].headers[0].value !== SHIPPED.model) rule.backendRefs[0].weight = 50;
        });
        expect(messages(rs).join("\n")).toMatch(
            /sets backend weights, which the pack accepts only between the two revisions of one endpoint/,
        );
    });
    it("a third weighted backend in a rollout's rule is refused", async () => {
        const rs = await step1();
        edit(rs, "AIGatewayRoute", "llm-models-0", (o) => {
            for (const rule of o.spec.rules)
                if (rule.matches[0].headers[0].value === SHIPPED.model) rule.backendRefs.push({ name: "llama-70b", weight: 5 });
        });
        expect(messages(rs).join("\n")).toMatch(/its weighted backends are llama-70b, qwen3-32b, v2-qwen3-32b/);
    });
    it("weights that differ from the rollout's state are refused", async () => {
        const rs = await step1();
        edit(rs, "AIGatewayRoute", "llm-models-0", (o) => {
            for (const rule of o.spec.rules) if (rule.matches[0].headers[0].value === SHIPPED.model) rule.backendRefs[1].weight = 50;
        });
        expect(messages(rs).join("\n")).toMatch(/v2-qwen3-32b has weight 50 but the rollout's state gives it 10/);
    });
    it("v1alpha1 graphs (spec.services) are read as their v1beta1 form is: the shipped step passes in either shape", async () => {
        const rs = asV1alpha1(asV1alpha1(await step1(), "qwen3-32b"), "v2-qwen3-32b");
        expect(kindOf(rs, "DynamoGraphDeployment").filter((r) => r.type.includes("/v1alpha1:"))).toHaveLength(2);
        expect(messages(rs)).toEqual([]);
    });
    it("a v1alpha1 source scaled to zero while carrying traffic is refused", async () => {
        const rs = asV1alpha1(await step1(), "qwen3-32b");
        edit(rs, "DynamoGraphDeployment", "qwen3-32b", (o) => (o.spec.services.decode.replicas = 0));
        expect(messages(rs).join("\n")).toMatch(/sends weight 90 to qwen3-32b, but its decode run 0 replicas/);
    });
    it("a v1beta1 target without the capacity for its share of a v1alpha1 source is refused: 10% of 20 decode replicas needs 2", async () => {
        const rs = asV1alpha1(await step1(), "qwen3-32b");
        edit(rs, "DynamoGraphDeployment", "qwen3-32b", (o) => (o.spec.services.decode.replicas = 20));
        const found = messages(rs);
        expect(found.length).toBeGreaterThan(0);
        for (const m of found)
            expect(m).toMatch(/its decode runs 1 replica, and 10% of the source's 20 decode replicas needs ceil\(0\.1 x 20\) = 2/);
        edit(rs, "DynamoGraphDeployment", "v2-qwen3-32b", (o) => {
            for (const c of o.spec.components) if (c.type === "decode") c.replicas = 2;
        });
        expect(messages(rs)).toEqual([]);
    });
    it("a v1alpha1 target's GPUs are read from its services' resources.limits.gpu when the roles differ", async () => {
        const rs = await rolesDiffer();
        asV1alpha1(rs, "v2-qwen3-32b");
        const target = kindOf(rs, "DynamoGraphDeployment").find((r) => (r.inputs as any).metadata.name === "v2-qwen3-32b")!;
        expect((target.outputs as any).spec.services.prefill.resources.limits.gpu).toBe("2");
        expect(messages(rs).join("\n")).toMatch(
            /its workers \(worker\) request 2 GPUs, and 10% of the source's 42 worker GPUs \(decode, prefill, other roles, so replicas do not compare\) needs ceil\(0\.1 x 42\) = 5/,
        );
    });
    it("a v1alpha1 extraPodSpec container named main adds no GPUs: the operator drops it", async () => {
        const rs = await rolesDiffer();
        asV1alpha1(rs, "v2-qwen3-32b");
        // A second "main" with 8 GPUs would make the target's 2 GPUs 10 and pass the 5 needed; the operator never runs it.
        for (const r of kindOf(rs, "DynamoGraphDeployment"))
            if ((r.inputs as any).metadata.name === "v2-qwen3-32b")
                for (const side of [r.inputs, r.outputs] as any[])
                    side.spec.services.prefill.extraPodSpec.containers = [
                        { name: "main", image: "example.invalid/x:1", resources: { limits: { "nvidia.com/gpu": "8" } } },
                    ];
        expect(messages(rs).join("\n")).toMatch(/its workers \(worker\) request 2 GPUs, and 10% of the source's 42 worker GPUs/);
    });
    it("a target with two components of one worker role is refused: their capacity does not compare", async () => {
        const rs = await step1();
        edit(rs, "DynamoGraphDeployment", "v2-qwen3-32b", (o) => {
            const decode = o.spec.components.find((c: any) => c.type === "decode");
            o.spec.components.push({ ...structuredClone(decode), name: "decode-b", replicas: 1 });
        });
        expect(messages(rs).join("\n")).toMatch(/has two decode components \(decode, decode-b\), whose capacity the pack does not compare/);
    });
    it("a graph in a shape the pack cannot read is refused, never passed (closed world)", async () => {
        const unknownVersion = await step1();
        for (const r of kindOf(unknownVersion, "DynamoGraphDeployment"))
            if ((r.inputs as any).metadata.name === "v2-qwen3-32b") r.type = "kubernetes:nvidia.com/v1:DynamoGraphDeployment";
        expect(messages(unknownVersion).join("\n")).toMatch(
            /sends weight 10 to v2-qwen3-32b, but its DynamoGraphDeployment is nvidia\.com\/v1, whose shape the pack cannot read \(the pack reads DynamoGraphDeployment v1beta1 spec\.components\[\] and v1alpha1 spec\.services\{\}\)/,
        );
        // A v1alpha1 graph written with v1beta1's list: nothing of it is read, so its traffic is refused.
        const mixed = await step1();
        for (const r of kindOf(mixed, "DynamoGraphDeployment"))
            if ((r.inputs as any).metadata.name === "qwen3-32b") r.type = "kubernetes:nvidia.com/v1alpha1:DynamoGraphDeployment";
        expect(messages(mixed).join("\n")).toMatch(
            /sends weight 90 to qwen3-32b, but its DynamoGraphDeployment is v1alpha1 but carries v1beta1 spec\.components/,
        );
        // A source the pack cannot read makes its target's share unprovable, at 100% too (the source then carries none).
        const rs = await step1();
        edit(rs, "DynamoGraphDeployment", "qwen3-32b", (o) => (o.spec.services = {}));
        expect(messages(rs).join("\n")).toMatch(
            /sends 10% of Qwen\/Qwen3-32B to v2-qwen3-32b, but the source qwen3-32b cannot be read: its DynamoGraphDeployment is v1beta1 but carries v1alpha1 spec\.services/,
        );
    });
});
