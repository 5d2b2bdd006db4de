import { describe, expect, it } from "vitest";
import { cpuCeiling, evaluateGoals, GOALS, type TargetResult } from "./bench";

const target = (checksPerSecond: number, clientUs: number, serverUs: number, redisUs?: number): TargetResult => ({
    checksPerSecond,
    p50Ms: 1,
    p99Ms: 2,
    errors: 0,
    clientUsPerCheck: clientUs,
    serverUsPerCheck: serverUs,
    redisUsPerCheck: redisUs,
});

describe("auth bench figures", () => {
    it("the CPU ceiling is the CPUs' time over the three processes' CPU per check, against the floor's rate", () => {
        // 40 + 50 + 10 = 100 µs of CPU per check: 2 CPUs serve at most 2e6 / 100 = 20,000 checks/s
        const c = cpuCeiling(target(15_000, 40, 50, 10), target(40_000, 30, 20), 2);
        expect(c?.usPerCheck).toBe(100);
        expect(c?.checksPerSecond).toBe(20_000);
        expect(c?.ofFloor).toBe(0.5);
        expect(c?.busy).toBe(75);
        // 0.60x of 40,000 = 24,000 checks/s on 2 CPUs: 2e6 / 24,000 µs per check
        expect(c?.goalUs).toBeCloseTo(2e6 / (GOALS.spreadRatio * 40_000), 9);
    });

    it("has no ceiling without a measured CPU per check or floor rate", () => {
        expect(cpuCeiling(target(1, Number.NaN, 50, 10), target(40_000, 30, 20), 2)).toBeUndefined();
        expect(cpuCeiling(target(1, 40, 50, 10), target(0, 30, 20), 2)).toBeUndefined();
    });

    it("judges each goal by its bound, and a cost run (no setting) by none", () => {
        const floor = target(40_000, 30, 20);
        const goals = evaluateGoals({
            closed: [{ setting: "16 in flight", floor, auth: target(28_000, 30, 30, 1) }],
            spread: { setting: "16 in flight, 1000 keys", floor, auth: target(23_000, 40, 40, 21) },
            options: {} as never,
        });
        expect(goals.map((g) => [g.goal.split(",")[0], g.met])).toEqual([
            // 28,000 / 40,000 = 0.70x: the bound itself is met
            ["checks/s auth / floor", true],
            ["checks/s auth / floor", false],
            ["redis CPU per check", false],
        ]);
        expect(goals.map((g) => g.figure)).toEqual([28_000 / 40_000, 23_000 / 40_000, 21]);
        expect(evaluateGoals({ closed: [], options: {} as never })).toEqual([]);
    });
});
