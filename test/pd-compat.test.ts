/**
 * lib/pd-compat.ts: the settings prefill and decode of one graph must agree on (KV layout, dtype, transfer backend), and
 * the rendered graph agreeing on all of them by construction. Sources per setting in lib/pd-compat.ts.
 */
import { describe, expect, it } from "vitest";
import { pdMismatches, pdMustMatch, pdSettingValue } from "../lib/pd-compat";
import { endpoint, endpointObjects, mainOf } from "./policies/rdma-fixtures";

const pair = (e = endpoint()) => { const { dgd } = endpointObjects(e); return { p: structuredClone(mainOf(dgd, "prefill")), d: structuredClone(mainOf(dgd, "decode")) }; };

describe("pdMustMatch", () => {
    it("lists, per engine, the KV layout / dtype / backend settings with an upstream source each; never TP size", () => {
        expect(pdMustMatch("vllm").map((s) => s.key)).toEqual(["--model", "--block-size", "--kv-cache-dtype", "--dtype", "connectors", "nixl.backends", "nixl.kv_buffer_device", "kv_load_failure_policy", "UCX_TLS", "FI_PROVIDER"]);
        expect(pdMustMatch("sglang").map((s) => s.key)).toEqual(["--model-path", "--page-size", "--kv-cache-dtype", "--dtype", "--disaggregation-transfer-backend", "SGLANG_DISAGGREGATION_NIXL_BACKEND", "UCX_TLS", "FI_PROVIDER"]);
        expect(pdMustMatch("trtllm").map((s) => s.key)).toEqual(["--model-path", "--kv-block-size", "kv_cache_config.dtype", "cache_transceiver_config.backend", "TRTLLM_NIXL_KVCACHE_BACKEND", "UCX_TLS", "FI_PROVIDER"]);
        for (const e of ["vllm", "sglang", "trtllm"] as const) {
            for (const s of pdMustMatch(e)) expect(s.source).toMatch(/^[\w.-]+\/[\w.-]+@[^:]+:.+/);
            expect(pdMustMatch(e).map((s) => s.key)).not.toContain("--tensor-parallel-size");
        }
    });
});

describe("the rendered prefill and decode agree by construction", () => {
    for (const engine of ["vllm", "sglang"] as const) {
        it(`${engine}: no mismatch although prefill TP 2 and decode TP 4 differ`, () => {
            const { p, d } = pair(endpoint({ engine }));
            expect(pdMismatches(engine, p, d)).toEqual([]);
        });
    }
    it("trtllm: no mismatch; both use the NIXL cache transceiver", () => {
        const { p, d } = pair(endpoint({ engine: "trtllm", kvPool: { kind: "none" } }));
        expect(pdMismatches("trtllm", p, d)).toEqual([]);
        expect(pdSettingValue(p, pdMustMatch("trtllm").find((s) => s.key === "cache_transceiver_config.backend")!)).toBe("NIXL");
    });
    it("vLLM P/D fails a KV load instead of recomputing (kv_load_failure_policy fail; vLLM default recompute)", () => {
        const { p, d } = pair();
        const s = pdMustMatch("vllm").find((x) => x.key === "kv_load_failure_policy")!;
        expect([pdSettingValue(p, s), pdSettingValue(d, s)]).toEqual(["fail", "fail"]);
        expect(s.default).toBe("recompute");
    });
});

describe("pdMismatches finds a disagreeing pair", () => {
    it("vLLM: decode on fp8 KV and LIBFABRIC while prefill stays auto/UCX", () => {
        const { p, d } = pair();
        d.args.push("--kv-cache-dtype", "fp8");
        const i = d.args.indexOf("--kv-transfer-config");
        const kvt = JSON.parse(d.args[i + 1]);
        kvt.kv_connector_extra_config.connectors[0].kv_connector_extra_config.backends = ["LIBFABRIC"];
        d.args[i + 1] = JSON.stringify(kvt);
        expect(pdMismatches("vllm", p, d).map((m) => [m.setting.key, m.prefill, m.decode])).toEqual([["--kv-cache-dtype", "auto", "fp8"], ["nixl.backends", "UCX", "LIBFABRIC"]]);
    });
    it("SGLang: a page size set on one side only is compared against upstream's default", () => {
        const { p, d } = pair(endpoint({ engine: "sglang" }));
        d.args[d.args.indexOf("--page-size") + 1] = "1";
        expect(pdMismatches("sglang", p, d).map((m) => [m.setting.key, m.prefill, m.decode])).toEqual([["--page-size", "64", "1"]]);
        d.args.splice(d.args.indexOf("--page-size"), 2);
        expect(pdMismatches("sglang", p, d).map((m) => [m.setting.key, m.prefill, m.decode])).toEqual([["--page-size", "64", "1"]]);
    });
});
