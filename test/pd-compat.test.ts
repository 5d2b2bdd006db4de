/**
 * upstream/pairs.ts: prefill and decode of one graph are identical except the engines' role settings; KV-shaping
 * settings compare by meaning (defaults, spellings). The rendered graph agrees by construction.
 */
import { describe, expect, it } from "vitest";
import { components, entrypoints, pairDifferences, pairKvSettings, pairRoleSettings } from "../upstream";
import { effectiveArgv, pairSideOf } from "../upstream/check";
import { endpoint, endpointObjects, mainOf } from "./policies/rdma-fixtures";

const ep = (id: string) => entrypoints.find((e) => e.id === id)!;
const pair = (e = endpoint()) => {
    const { dgd } = endpointObjects(e);
    return { p: structuredClone(mainOf(dgd, "prefill")) as any, d: structuredClone(mainOf(dgd, "decode")) as any };
};
const diff = (id: string, p: any, d: any) =>
    pairDifferences(pairSideOf(p, {}, new Map(), undefined), pairSideOf(d, {}, new Map(), undefined), ep(id), components).map((x) => [
        x.key,
        x.prefill,
        x.decode,
    ]);

describe("pair facts", () => {
    it("role settings per engine: the role flag and TP size, each with an upstream source; KV settings name what breaks", () => {
        for (const id of ["dynamo.vllm", "dynamo.sglang", "dynamo.trtllm"]) {
            const keys = pairRoleSettings[id].map((r) => r.key);
            expect(keys).toContain("--disaggregation-mode");
            expect(keys.some((k) => /tensor-parallel-size|tp-size/.test(k))).toBe(true);
            for (const s of [...pairRoleSettings[id], ...pairKvSettings[id]]) expect(s.source).toMatch(/^[\w.-]+\/[\w.-]+@[^:]+:.+/);
        }
        expect(pairKvSettings["dynamo.vllm"].map((s) => s.key)).toEqual(
            expect.arrayContaining(["--kv-cache-dtype", "--block-size", "NIXL backends", "kv_connector"]),
        );
    });
});

describe("the rendered prefill and decode agree by construction", () => {
    for (const [engine, id] of [
        ["vllm", "dynamo.vllm"],
        ["sglang", "dynamo.sglang"],
        ["trtllm", "dynamo.trtllm"],
    ] as const) {
        it(`${engine}: no difference outside role settings`, () => {
            const { p, d } = pair(endpoint({ engine, kvPool: engine === "trtllm" ? { kind: "none" } : undefined }));
            expect(effectiveArgv(p).slice(0, 3)).toEqual(ep(id).argv);
            expect(diff(id, p, d)).toEqual([]);
        });
    }
});

describe("pairDifferences finds a disagreeing pair", () => {
    it("vLLM: decode on fp8 KV and LIBFABRIC while prefill stays auto/UCX; the raw JSON is not reported twice", () => {
        const { p, d } = pair();
        d.args.push("--kv-cache-dtype", "fp8");
        const i = d.args.indexOf("--kv-transfer-config");
        const kvt = JSON.parse(d.args[i + 1]);
        kvt.kv_connector_extra_config.connectors[0].kv_connector_extra_config.backends = ["LIBFABRIC"];
        d.args[i + 1] = JSON.stringify(kvt);
        expect(diff("dynamo.vllm", p, d)).toEqual([
            ["--kv-cache-dtype", "auto", "fp8"],
            ["NIXL backends", '["UCX"]', '["LIBFABRIC"]'],
        ]);
    });
    it("vLLM: a timeout inside kv_transfer_config on one side is a difference; the same JSON with other key order is not", () => {
        const { p, d } = pair();
        const i = d.args.indexOf("--kv-transfer-config");
        const kvt = JSON.parse(d.args[i + 1]);
        d.args[i + 1] = JSON.stringify(Object.fromEntries(Object.entries(kvt).reverse()));
        expect(diff("dynamo.vllm", p, d)).toEqual([]);
        kvt.kv_connector_extra_config.connectors[0].kv_connector_extra_config.abort_timeout = 10;
        d.args[i + 1] = JSON.stringify(kvt);
        expect(diff("dynamo.vllm", p, d).map((x) => x[0])).toEqual(["--kv-transfer-config"]);
    });
    it("SGLang: a page size set on one side only is compared against upstream's default; --tensor-parallel-size is --tp-size", () => {
        const { p, d } = pair(endpoint({ engine: "sglang" }));
        d.args[d.args.indexOf("--page-size") + 1] = "1";
        expect(diff("dynamo.sglang", p, d)).toEqual([["--page-size", "64", "1"]]);
        d.args.splice(d.args.indexOf("--page-size"), 2);
        expect(diff("dynamo.sglang", p, d)).toEqual([["--page-size", "64", "1"]]);
        const q = pair(endpoint({ engine: "sglang" }));
        q.d.args[q.d.args.indexOf("--tp-size")] = "--tensor-parallel-size";
        expect(diff("dynamo.sglang", q.p, q.d)).toEqual([]);
    });
});
