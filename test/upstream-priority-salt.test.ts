/**
 * `npm run upstream-check` (and the pack, which runs the same rules) on priority and the cache salt
 * (upstream/activation.ts `engine-priority`, `router-priority`, `cache-salt`): what lib/ renders passes; a worker that
 * would ignore the platform's priority, a router without a queue, and a salt-dropping engine serving more than one
 * cache scope are findings naming the object, key and source.
 */
import { describe, expect, it } from "vitest";
import { CACHE_SCOPES_ANNOTATION } from "../config/endpoint";
import { checkActivation } from "../upstream/check/activation";
import type { Obj, StackView } from "../upstream/check/view";
import { endpoint, endpointObjects } from "./policies/rdma-fixtures";

const stackOf = (objects: Obj[]): StackView => ({ stack: "spoke-test", objects, releases: [] });
const dgdOf = (e = endpoint()): Obj => structuredClone(endpointObjects(e).dgd);
const component = (dgd: Obj, type: string): Obj => dgd.spec.components.find((c: Obj) => c.type === type);
const mainArgs = (c: Obj): string[] => c.podTemplate.spec.containers.find((x: Obj) => x.name === "main").args;
const removeFlag = (args: string[], flag: string, takesValue: boolean) => {
    const i = args.indexOf(flag);
    expect(i, `${flag} rendered`).toBeGreaterThanOrEqual(0);
    args.splice(i, takesValue ? 2 : 1);
};
const findings = (dgd: Obj, id: string) => checkActivation(stackOf([dgd])).filter((f) => f.message.startsWith(`${id} `));

describe("priority and salt: what lib/ renders takes effect", () => {
    it.each(["vllm", "sglang"] as const)("%s P/D with a KV router: no engine-priority, router-priority or cache-salt finding", (engine) => {
        const dgd = dgdOf(endpoint({ engine, kvPool: { kind: "none" } }));
        for (const id of ["engine-priority", "router-priority", "cache-salt"]) expect(findings(dgd, id)).toEqual([]);
        expect(mainArgs(component(dgd, "frontend"))).toEqual(expect.arrayContaining(["--router-queue-threshold", "1"]));
        // SGLang workers state their prefill window, the queue threshold's denominator (SGLang's H200 chunked prefill size).
        for (const role of ["prefill", "decode"]) {
            const args = mainArgs(component(dgd, role));
            const i = args.indexOf("--max-prefill-tokens");
            if (engine === "sglang") expect(args[i + 1]).toBe("8192");
            else expect(i).toBe(-1);
        }
    });
});

describe("priority and salt: planted faults", () => {
    it("a vLLM decode worker on the default FCFS scheduler", () => {
        const dgd = dgdOf();
        removeFlag(mainArgs(component(dgd, "decode")), "--scheduling-policy", true);
        const f = findings(dgd, "engine-priority");
        expect(f).toHaveLength(1);
        expect(f[0]).toMatchObject({ key: "--scheduling-policy", object: expect.stringMatching(/component .*decode/) });
        expect(f[0].message).toMatch(
            /would be inert: a vLLM worker without `--scheduling-policy priority` serves FCFS \[ai-dynamo\/dynamo@/,
        );
    });

    it("an SGLang worker without priority scheduling, or under a policy SGLang refuses it with", () => {
        const off = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        removeFlag(mainArgs(component(off, "prefill")), "--enable-priority-scheduling", false);
        expect(findings(off, "engine-priority").map((f) => f.key)).toEqual(["--enable-priority-scheduling"]);
        const lpm = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        const args = mainArgs(component(lpm, "decode"));
        args[args.indexOf("--schedule-policy") + 1] = "lpm";
        expect(findings(lpm, "engine-priority").map((f) => `${f.key}: ${f.message}`)).toEqual([
            expect.stringMatching(/^--schedule-policy: .*lpm fails SGLang's start-up assertion/),
        ]);
    });

    it("an SGLang worker without --max-prefill-tokens behind a queueing KV router (the denominator falls back to the KV pool)", () => {
        const dgd = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        removeFlag(mainArgs(component(dgd, "decode")), "--max-prefill-tokens", true);
        const f = findings(dgd, "router-priority");
        expect(f.map((x) => x.key)).toEqual(["--max-prefill-tokens"]);
        expect(f[0].object).toMatch(/component .*decode/);
        expect(f[0].message).toMatch(/publishes the KV pool size as its prefill capacity/);
        // No queue, no denominator to state: only the missing threshold is found.
        const noQueue = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        removeFlag(mainArgs(component(noQueue, "frontend")), "--router-queue-threshold", true);
        removeFlag(mainArgs(component(noQueue, "decode")), "--max-prefill-tokens", true);
        expect(findings(noQueue, "router-priority").map((x) => x.key)).toEqual(["--router-queue-threshold"]);
    });

    it("a KV router without a queue threshold", () => {
        const dgd = dgdOf();
        removeFlag(mainArgs(component(dgd, "frontend")), "--router-queue-threshold", true);
        expect(findings(dgd, "router-priority").map((f) => f.key)).toEqual(["--router-queue-threshold"]);
    });

    it("an SGLang graph serving two cache scopes, or with no scope record, is refused; vLLM keeps the salt", () => {
        const two = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" }, cacheScopes: 2 }));
        expect(two.metadata.annotations[CACHE_SCOPES_ANNOTATION]).toBe("2");
        const f = findings(two, "cache-salt");
        expect(f).toHaveLength(1);
        expect(f[0].key).toBe(`metadata.annotations.${CACHE_SCOPES_ANNOTATION}`);
        expect(f[0].message).toMatch(/a sglang graph drops the cache salt but keys of 2 cache scopes call its model/);
        const unknown = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" }, cacheScopes: undefined }));
        expect(findings(unknown, "cache-salt").map((x) => x.message)).toEqual([expect.stringMatching(/recorded no single cache scope/)]);
        expect(findings(dgdOf(endpoint({ engine: "vllm", cacheScopes: 5 })), "cache-salt")).toEqual([]);
        // A graph without spec.backendFramework: the finding names what is missing (never "a undefined graph").
        const bare = dgdOf(endpoint({ engine: "sglang", kvPool: { kind: "none" }, cacheScopes: undefined }));
        delete bare.spec.backendFramework;
        const m = findings(bare, "cache-salt").map((x) => x.message);
        expect(m).toEqual([expect.stringMatching(/without spec\.backendFramework .*set spec\.backendFramework/)]);
        expect(m.join()).not.toMatch(/undefined/);
    });
});
