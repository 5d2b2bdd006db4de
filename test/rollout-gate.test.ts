/**
 * The rollout gate against a real Prometheus (Debian's `prometheus` package) started by the test: frontend series
 * as the Dynamo frontend exports them (upstream/rollout.ts `frontendGateSeries`, the `dynamo_namespace` target label
 * lib/observability.ts relabels), backfilled with `promtool tsdb create-blocks-from openmetrics`, read over the HTTP
 * API by lib/rollout.ts `evaluateGate` and by `npm run rollout` itself. Fails, never skips, when Prometheus is missing.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import YAML from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RolloutGate } from "../config/rollout";
import { dynamoNamespace, evaluateGate, evaluatePromotion } from "../lib/rollout";
import { main } from "../tools/rollout";
import { STACKS } from "./helpers";
import { startPrometheus, type TestPrometheus } from "./prometheus-server";
import { END, openMetrics, START } from "./rollout-series";

const GATE: RolloutGate = {
    ttftP95Ratio: 1.2,
    itlP99Ratio: 1.2,
    errorRateDelta: 0.005,
    minRequests: 500,
    windowSeconds: 900,
    ingestDelaySeconds: 120,
    promotion: { soakSeconds: 900, maxErrorRate: 0.01, minRequests: 500 },
};
const ns = (dgd: string) => dynamoNamespace(dgd);
const at = (s: number) => new Date(s * 1000);

let prom: TestPrometheus;
beforeAll(async () => {
    prom = await startPrometheus(
        openMetrics([
            { ns: ns("pass-src"), rps: 2, errorShare: 0.002 },
            { ns: ns("pass-tgt"), rps: 0.5, errorShare: 0.002 },
            { ns: ns("slow-src"), rps: 2 },
            { ns: ns("slow-tgt"), rps: 0.5, slow: 1 },
            { ns: ns("err-src"), rps: 2, errorShare: 0.001 },
            { ns: ns("err-tgt"), rps: 0.5, errorShare: 0.05 },
            { ns: ns("few-src"), rps: 2 },
            { ns: ns("few-tgt"), rps: 0.02 },
            { ns: ns("gap-src"), rps: 2 },
            { ns: ns("gap-tgt"), rps: 0.5, noTtft: true },
            { ns: ns("lone-src"), rps: 2 },
            // The spoke applied 10% -> 25% twenty minutes before the end (target share 9% -> 23%).
            { ns: ns("late-src"), rps: 2 },
            { ns: ns("late-tgt"), rpsBefore: 0.2, switchAt: END - 1200, rps: 0.6 },
            // The step was written (25%) but the spoke still serves 10%: nobody ran `pulumi up`.
            { ns: ns("stale-src"), rps: 2 },
            { ns: ns("stale-tgt"), rps: 0.2 },
            // The 100% step: the source's frontend answers nothing, the target everything (the promotion soak).
            { ns: ns("soak-src"), rps: 0 },
            { ns: ns("soak-tgt"), rps: 2.5, errorShare: 0.002 },
            { ns: ns("soakerr-src"), rps: 0 },
            { ns: ns("soakerr-tgt"), rps: 2.5, errorShare: 0.05 },
            { ns: ns("soakslow-src"), rps: 0 },
            { ns: ns("soakslow-tgt"), rps: 2.5, slow: 2 },
            { ns: ns("soakfew-src"), rps: 0 },
            { ns: ns("soakfew-tgt"), rps: 0.2 },
            { ns: ns("soakgap-src"), rps: 0 },
            { ns: ns("soakgap-tgt"), rps: 2.5, noTtft: true },
            // The hub file says 100% but the spoke still splits 50/50.
            { ns: ns("soakstale-src"), rps: 1.25 },
            { ns: ns("soakstale-tgt"), rps: 1.25 },
            // The shipped hub's rollout (hcm1/qwen3-32b -> v2), for the command line run below.
            { ns: ns("qwen3-32b"), rps: 2 },
            { ns: ns("v2-qwen3-32b"), rps: 0.5, ready: true },
        ]),
    );
}, 120_000);
afterAll(async () => {
    await prom?.stop();
});

/** The step the gate judges: 10% -> 25% (the pass series' 20% is on the 25% side). */
const STEP25 = { step: 25, previous: 10 };
/** The first step read from: five minutes after the data starts, so every applied-check point has a full window. */
const SINCE = START + 300;
const gate = (src: string, tgt: string, since = SINCE, now = END + GATE.ingestDelaySeconds, weights = STEP25) =>
    evaluateGate({ prometheusUrl: prom.url, gate: GATE, sourceDgd: src, targetDgd: tgt, since: at(since), now: at(now), weights });

describe("rollout gate on a real Prometheus", () => {
    it("pass: same latency and error rate, enough requests, window elapsed", async () => {
        const g = await gate("pass-src", "pass-tgt");
        expect(g.verdict, g.reasons.join("; ")).toBe("pass");
        expect(g.applied).toMatchObject({ applied: true, from: at(SINCE).toISOString() });
        expect(g.range.seconds).toBe(END - SINCE);
        expect(g.target.requests).toBeCloseTo(0.5 * (END - SINCE), -1);
        expect(g.source.requests).toBeCloseTo(2 * (END - SINCE), -1);
        expect(g.target.ttftP95Seconds! / g.source.ttftP95Seconds!).toBeCloseTo(1, 2);
        expect(g.source.ttftP95Seconds).toBeGreaterThan(0.2);
        expect(g.source.ttftP95Seconds).toBeLessThan(0.4);
    });

    it("regression: the target's TTFT and ITL twice the source's holds, with what was measured", async () => {
        const g = await gate("slow-src", "slow-tgt");
        expect(g.verdict).toBe("hold");
        expect(g.reasons.join("\n")).toMatch(/TTFT p95 .* ratio 2\.00 above 1\.2/);
        expect(g.reasons.join("\n")).toMatch(/ITL p99 .* above 1\.2/);
        expect(g.target.ttftP95Seconds! / g.source.ttftP95Seconds!).toBeCloseTo(2, 1);
    });

    it("regression: an error rate above the source's by more than the delta holds", async () => {
        const g = await gate("err-src", "err-tgt");
        expect(g.verdict).toBe("hold");
        expect(g.reasons.join("\n")).toMatch(/error rate (4\.9\d|5\.00)% vs 0\.10%/);
    });

    it("too few samples: the target answered fewer than minRequests in the step: wait", async () => {
        const g = await gate("few-src", "few-tgt", SINCE, END + GATE.ingestDelaySeconds, { step: 1, previous: 0 });
        expect(g.verdict).toBe("wait");
        expect(g.reasons.join("\n")).toMatch(/target answered 42 requests in the step; the gate needs 500/);
    });

    it("a window shorter than windowSeconds (after the ingest delay) waits, even with good data", async () => {
        const g = await gate("pass-src", "pass-tgt", END - 600);
        expect(g.verdict).toBe("wait");
        expect(g.reasons[0]).toMatch(/600 s of readable traffic .* needs 900 s/);
    });

    it("the gate reads only the current step: the range starts at the step's start", async () => {
        const g = await gate("pass-src", "pass-tgt", END - 1200);
        expect(g.range.seconds).toBe(1200);
        expect(g.source.requests).toBeCloseTo(2 * 1200, -1);
    });

    it("missing series: a target without its TTFT histogram holds, never passes", async () => {
        const g = await gate("gap-src", "gap-tgt");
        expect(g.verdict).toBe("hold");
        expect(g.reasons.join("\n")).toMatch(
            /missing series: target \(inference-gap-tgt\): no dynamo_frontend_time_to_first_token_seconds histogram/,
        );
    });

    it("a target with no series at all never passes: the spoke does not serve the step (wait, with the share seen)", async () => {
        const g = await gate("lone-src", "nobody-tgt");
        expect(g.verdict).toBe("wait");
        expect(g.reasons.join("\n")).toMatch(/does not serve this step yet: the target's frontend answered 0\.0% of the requests/);
    });

    it("a step written but not applied on the spoke waits, however good its data: the share is still the previous step's", async () => {
        // Before the applied check this passed on the previous step's traffic (same latency, enough requests).
        const g = await gate("stale-src", "stale-tgt");
        expect(g.verdict).toBe("wait");
        expect(g.applied.applied).toBe(false);
        expect(g.applied.latestShare).toBeCloseTo(0.2 / 2.2, 2);
        expect(g.reasons[0]).toMatch(
            /the spoke does not serve this step yet: the target's frontend answered 9\.1% of the requests .* nearer the previous 10% than the step's 25% .* run `pulumi up` on the hub and the spoke/,
        );
        expect(g.source.requests).toBeUndefined();
    });

    it("the window starts when the spoke serves the step, not when the hub file was written", async () => {
        const g = await gate("late-src", "late-tgt");
        expect(g.verdict, g.reasons.join("; ")).toBe("pass");
        const from = new Date(g.range.from).getTime() / 1000;
        // Applied once the two-minute share crossed 17.5%: between the switch and two minutes after it.
        expect(from).toBeGreaterThan(END - 1200);
        expect(from).toBeLessThanOrEqual(END - 1200 + 120);
        expect(g.range.seconds).toBe(END - from);
        // Only traffic after the switch is read: 0.6 rps, not the 0.2 rps of the previous step.
        expect(g.target.requests! / g.range.seconds).toBeCloseTo(0.6, 1);
        expect(g.range.seconds).toBeGreaterThanOrEqual(GATE.windowSeconds);
    });

    it("a step applied too recently waits for its window, even when it was written long ago", async () => {
        const g = await gate("late-src", "late-tgt", SINCE, END - 1200 + 600 + GATE.ingestDelaySeconds);
        expect(g.verdict).toBe("wait");
        expect(g.reasons[0]).toMatch(/s of readable traffic since the spoke serves it .* needs 900 s/);
    });

    it("Prometheus unreachable: an error, no verdict", async () => {
        await expect(
            evaluateGate({
                prometheusUrl: "http://127.0.0.1:1",
                gate: GATE,
                sourceDgd: "a",
                targetDgd: "b",
                since: at(START),
                now: at(END),
                weights: STEP25,
            }),
        ).rejects.toThrow(/cannot reach Prometheus/);
    });
});

/** The 100% step the promotion soak judges: 50% -> 100%. */
const STEP100 = { step: 100, previous: 50 };
const soak = (src: string, tgt: string, gate: RolloutGate = GATE, since = SINCE) =>
    evaluatePromotion({
        prometheusUrl: prom.url,
        gate,
        sourceDgd: src,
        targetDgd: tgt,
        since: at(since),
        now: at(END + GATE.ingestDelaySeconds),
        weights: STEP100,
    });

describe("promotion soak on a real Prometheus: the 100% step, the target judged alone", () => {
    it("the comparison gate can never pass at 100%: the source answers no requests (the hole the soak closes)", async () => {
        const g = await gate("soak-src", "soak-tgt", SINCE, END + GATE.ingestDelaySeconds, STEP100);
        expect(g.verdict).toBe("wait");
        expect(g.reasons.join("\n")).toMatch(/source answered 0 requests in the step; the gate needs 500/);
    });

    it("pass: a low error rate over the soak with enough requests", async () => {
        const g = await soak("soak-src", "soak-tgt");
        expect(g.judged).toBe("soak");
        expect(g.verdict, g.reasons.join("; ")).toBe("pass");
        expect(g.applied).toMatchObject({ applied: true, latestShare: 1 });
        expect(g.range.seconds).toBe(END - SINCE);
        expect(g.target.requests).toBeCloseTo(2.5 * (END - SINCE), -1);
        expect(g.source.requests).toBe(0);
        expect(g.reasons[0]).toMatch(/^soak 2100 s at 100%: error rate 0\.\d+% \(≤ 1\.00%\)/);
    });

    it("fail -> hold: an error rate above promotion.maxErrorRate holds, with what was measured", async () => {
        const g = await soak("soakerr-src", "soakerr-tgt");
        expect(g.verdict).toBe("hold");
        expect(g.reasons.join("\n")).toMatch(/error rate (4\.9\d|5\.00)% above the promotion's 1\.00%/);
    });

    it("fail -> hold: a TTFT p95 above the optional absolute bound holds", async () => {
        const g = await soak("soakslow-src", "soakslow-tgt", { ...GATE, promotion: { ...GATE.promotion, ttftP95Seconds: 0.5 } });
        expect(g.verdict).toBe("hold");
        expect(g.reasons.join("\n")).toMatch(/TTFT p95 \d+ ms above the promotion's 500 ms/);
        // Without the bound the same traffic passes: latency is judged only where a bound is set.
        expect((await soak("soakslow-src", "soakslow-tgt")).verdict).toBe("pass");
    });

    it("too few -> wait: the target answered fewer than promotion.minRequests", async () => {
        const g = await soak("soakfew-src", "soakfew-tgt");
        expect(g.verdict).toBe("wait");
        expect(g.reasons.join("\n")).toMatch(/target answered 420 requests in the soak; the promotion needs 500/);
    });

    it("too short -> wait: a soak shorter than promotion.soakSeconds waits, however good its data", async () => {
        const g = await soak("soak-src", "soak-tgt", GATE, END - 600);
        expect(g.verdict).toBe("wait");
        expect(g.reasons[0]).toMatch(/the 100% step has 600 s of readable traffic .* the promotion soak needs 900 s/);
    });

    it("not applied -> wait: the spoke still splits 50/50, so the 100% step is not served yet", async () => {
        const g = await soak("soakstale-src", "soakstale-tgt");
        expect(g.verdict).toBe("wait");
        expect(g.reasons[0]).toMatch(
            /does not serve this step yet: the target's frontend answered 50\.0% .* nearer the previous 50% than the step's 100%/,
        );
    });

    it("missing series -> hold: a target without its TTFT histogram is never promoted", async () => {
        const g = await soak("soakgap-src", "soakgap-tgt");
        expect(g.verdict).toBe("hold");
        expect(g.reasons.join("\n")).toMatch(
            /missing series: target \(inference-soakgap-tgt\): no dynamo_frontend_time_to_first_token_seconds histogram; a promotion never passes without its data/,
        );
        // No series at all for the target: the applied check sees no traffic, so it waits; never a pass.
        const none = await soak("soak-src", "nobody-tgt");
        expect(none.verdict).toBe("wait");
        expect(none.target.requests).toBeUndefined();
    });
});

describe("npm run rollout against the real Prometheus, on a copy of the shipped hub file", () => {
    const hubCopy = (mutate: (rollout: any) => void) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rollout-hub-"));
        const file = path.join(dir, "Pulumi.hub-prod.yaml");
        const doc = YAML.parseDocument(fs.readFileSync(path.join(STACKS, "Pulumi.hub-prod.yaml"), "utf8"));
        const eps = doc.getIn(["config", "platform:endpoints"]) as any;
        const i = eps.items.findIndex((x: any) => x.get("rollout"));
        const ro = eps.items[i].get("rollout");
        mutate(ro);
        fs.writeFileSync(file, doc.toString({ lineWidth: 0 }));
        return { file, index: i };
    };
    const run = async (args: string[]) => {
        const out: string[] = [];
        const code = await main(args, (s) => out.push(s));
        return { code, out: out.join("\n") };
    };
    const nowIso = at(END + GATE.ingestDelaySeconds).toISOString();

    it("advance on a passing step writes the next step (25%), keeping the file's comments", async () => {
        const { file, index } = hubCopy((ro) => ro.setIn(["state", "since"], at(START).toISOString().replace(".000", "")));
        const before = fs.readFileSync(file, "utf8");
        const r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).toBe(0);
        expect(r.out).toMatch(/gate: PASS/);
        expect(r.out).toMatch(/step 2\/4: 25% to v2-qwen3-32b/);
        const after = fs.readFileSync(file, "utf8");
        const ro = YAML.parse(after).config["platform:endpoints"][index].rollout;
        expect(ro.state).toMatchObject({ phase: "shifting", step: 1, targetReady: true, lastGate: { verdict: "pass" } });
        expect(ro.state.since).toBe(nowIso.replace(".000", ""));
        // Every comment line of the original is still there.
        for (const l of before.split("\n").filter((x) => x.trim().startsWith("#"))) expect(after).toContain(l);
    });

    it("advance from warming runs the health gate on the target's frontend and sends the first step", async () => {
        const { file, index } = hubCopy((ro) => ro.delete("state"));
        const r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).toBe(0);
        expect(r.out).toMatch(
            /health gate: max\(dynamo_frontend_model_total_kv_blocks\{dynamo_namespace="inference-v2-qwen3-32b"\}\) = 4096/,
        );
        expect(YAML.parse(fs.readFileSync(file, "utf8")).config["platform:endpoints"][index].rollout.state).toMatchObject({
            phase: "shifting",
            step: 0,
            targetReady: true,
        });
    });

    it("advance on a step the spoke does not serve yet waits (exit 3) and says so", async () => {
        // Step 3 (50%) written; the spoke's frontends still split 80/20, nearer the previous 25%.
        const { file, index } = hubCopy((ro) => {
            ro.setIn(["state", "step"], 2);
            ro.setIn(["state", "since"], at(START).toISOString().replace(".000", ""));
        });
        const r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).toBe(3);
        expect(r.out).toMatch(/applied NOT YET: target share 20\.00%/);
        expect(r.out).toMatch(/the spoke does not serve this step yet: .* nearer the previous 25% than the step's 50%/);
        const st = YAML.parse(fs.readFileSync(file, "utf8")).config["platform:endpoints"][index].rollout.state;
        expect(st).toMatchObject({ phase: "shifting", step: 2, lastGate: { verdict: "wait" } });
        expect(st.held).toBeUndefined();
    });

    it("advance before the window elapsed writes only the verdict (wait, exit 3)", async () => {
        const { file, index } = hubCopy((ro) =>
            ro.setIn(
                ["state", "since"],
                at(END - 60)
                    .toISOString()
                    .replace(".000", ""),
            ),
        );
        const r = await run(["advance", "hcm1/qwen3-32b", "--hub", file, "--prometheus", prom.url, "--now", nowIso]);
        expect(r.code, r.out).toBe(3);
        const st = YAML.parse(fs.readFileSync(file, "utf8")).config["platform:endpoints"][index].rollout.state;
        expect(st).toMatchObject({ phase: "shifting", step: 0, lastGate: { verdict: "wait" } });
        expect(st.held).toBeUndefined();
    });
});
