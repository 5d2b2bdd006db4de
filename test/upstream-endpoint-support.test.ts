/**
 * Endpoint shapes upstream does not support are refused at the hub (stack key named) and by upstream-check:
 * - unequal TP on one Mooncake store pool: pool keys carry tp_rank but not TP size
 *   (vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py `PoolKey`);
 * - model-based speculative decoding on disaggregated vLLM: "vLLM Disagg Decode + EAGLE3 Speculative Decoding Crashes
 *   Silently ... Workaround: None reliable" with no fix recorded up to 1.5.0
 *   (ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx).
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { endpointUpstreamIssues } from "../config/endpoint";
import { type HubConfig, parseStackConfig } from "../config/stack";
import { checkEndpointSupport } from "../upstream/check/endpoint-support";
import { endpoint, endpointObjects } from "./policies/rdma-fixtures";
import { platformKeys, stackConfigDoc } from "./helpers";

const NOW = new Date("2026-12-01T00:00:00Z");
const EAGLE = { speculative: { method: "eagle3", draftModel: "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", numSpeculativeTokens: 3 } };
const TP44 = { topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } } };
const objects = (e: ReturnType<typeof endpoint>) => {
    const { dgd, others } = endpointObjects(e);
    return [structuredClone(dgd), ...structuredClone(others)];
};
const run = (e: ReturnType<typeof endpoint>) => checkEndpointSupport({ stack: "s", objects: objects(e), releases: [] });

describe("hub refuses unsupported endpoint shapes, naming the stack key", () => {
    it("prefill TP2 / decode TP4 on one Mooncake pool; EAGLE3 and MTP on disaggregated vLLM", () => {
        expect(endpointUpstreamIssues(endpoint(), "platform:endpoints[0]").map((x) => x.key)).toEqual([
            "platform:endpoints[0].topology.decode.gpusPerWorker",
        ]);
        const both = endpointUpstreamIssues(endpoint(EAGLE), "platform:endpoints[0]");
        expect(both.map((x) => x.key)).toEqual([
            "platform:endpoints[0].topology.decode.gpusPerWorker",
            "platform:endpoints[0].speculative",
        ]);
        expect(both[0].message).toMatch(/TP2 and decode TP4 on one Mooncake store pool.*mooncake\/store\/data\.py PoolKey/);
        expect(both[1].message).toMatch(/eagle3 .*disaggregated vLLM.*known-issues\.mdx/);
        expect(
            endpointUpstreamIssues(endpoint({ ...TP44, speculative: { method: "mtp", numSpeculativeTokens: 1 } }), "k").map((x) => x.key),
        ).toEqual(["k.speculative"]);
    });
    it("what stays allowed: equal TP on the pool, unequal TP without a pool, ngram on disagg vLLM, EAGLE3 aggregated or on SGLang", () => {
        expect(endpointUpstreamIssues(endpoint(TP44), "k")).toEqual([]);
        expect(endpointUpstreamIssues(endpoint({ kvPool: { kind: "none" } }), "k")).toEqual([]);
        expect(endpointUpstreamIssues(endpoint({ ...TP44, speculative: { method: "ngram", numSpeculativeTokens: 3 } }), "k")).toEqual([]);
        expect(
            endpointUpstreamIssues(
                endpoint({ ...EAGLE, topology: { mode: "aggregated", workers: { replicas: 2, gpusPerWorker: 4 } } }),
                "k",
            ),
        ).toEqual([]);
        expect(endpointUpstreamIssues(endpoint({ ...EAGLE, ...TP44, engine: "sglang" }), "k")).toEqual([]);
    });
    it("a hub stack with the old hn1 llama-70b is a ConfigError naming both keys", () => {
        const d = platformKeys(stackConfigDoc("hub-prod"));
        const eps = d.endpoints as any[];
        const i = eps.findIndex((e) => e.name === "llama-70b" && e.spoke === "hn1");
        eps[i] = {
            ...eps[i],
            topology: { mode: "disaggregated", prefill: { replicas: 2, gpusPerWorker: 2 }, decode: { replicas: 1, gpusPerWorker: 4 } },
            ...EAGLE,
        };
        let err: unknown;
        try {
            parseStackConfig(d, "stacks/Pulumi.hub-prod.yaml", { now: NOW });
        } catch (e) {
            err = e;
        }
        expect(err).toBeInstanceOf(ConfigError);
        expect(String((err as Error).message)).toContain(`platform:endpoints[${i}].topology.decode.gpusPerWorker`);
        expect(String((err as Error).message)).toContain(`platform:endpoints[${i}].speculative`);
    });
    it("the shipped hub stack: hn1 llama-70b runs TP4/TP4 without a drafter; EAGLE3 ships on hcm1's aggregated llama-70b", () => {
        const hub = (parseStackConfig(platformKeys(stackConfigDoc("hub-prod")), "hub-prod", { now: NOW }) as { hub: HubConfig }).hub;
        const hn1 = hub.endpoints.find((e) => e.name === "llama-70b" && e.spoke === "hn1")!;
        expect(hn1.topology).toMatchObject({ mode: "disaggregated", prefill: { gpusPerWorker: 4 }, decode: { gpusPerWorker: 4 } });
        expect(hn1.speculative).toBeUndefined();
        const hcm1 = hub.endpoints.find((e) => e.name === "llama-70b" && e.spoke === "hcm1")!;
        expect(hcm1.topology.mode).toBe("aggregated");
        expect(hcm1.speculative?.method).toBe("eagle3");
    });
});

describe("upstream-check on rendered graphs", () => {
    it("unequal TP on the pool: every pool worker is a finding; equal TP is not", () => {
        const f = run(endpoint());
        expect(f.map((x) => `${x.object.split(" component ")[1]} ${x.key}`)).toEqual([
            "prefill --tensor-parallel-size",
            "decode --tensor-parallel-size",
        ]);
        expect(f[0].message).toMatch(/^mooncake-store-equal-tp .* TP2 while others .* TP4.*mooncake\/store\/data\.py\]$/);
        expect(run(endpoint(TP44))).toEqual([]);
    });
    it("EAGLE3 on disaggregated vLLM is a finding on prefill and decode; on an aggregated vLLM worker it is not", () => {
        const f = run(endpoint({ ...EAGLE, ...TP44 }));
        expect(f.map((x) => x.key)).toEqual(["--speculative-config", "--speculative-config"]);
        expect(f[0].message).toMatch(/^vllm-disagg-model-speculative .*"eagle3".*known-issues\.mdx\]$/);
        expect(run(endpoint({ ...EAGLE, topology: { mode: "aggregated", workers: { replicas: 2, gpusPerWorker: 4 } } }))).toEqual([]);
    });
});

describe("compat: what vLLM's NIXL handshake hashes", () => {
    it("vLLM version + NIXL_CONNECTOR_VERSION, not the NIXL library release (vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py compute_nixl_compatibility_hash)", async () => {
        const { versionPairs } = await import("../upstream/compat");
        const note = versionPairs.find((p) => p.id === "nixl-prefill-decode")!.note!;
        expect(note).toMatch(/vLLM version and NIXL_CONNECTOR_VERSION, a constant of vLLM's connector/);
        expect(note).toMatch(/does NOT cover the NIXL library release/);
    });
});

describe("dynamo-platform chart facts at the 1.5.0 pin", () => {
    it("no dynamo-operator.checkpoint.* (DynamoCheckpoint CRD removed in v1.5.0); global.snapshot.install kept (ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/dynamo-v1-5-0.mdx)", async () => {
        const { dynamoPlatformChart } = await import("../upstream/charts/dynamo-platform");
        expect(dynamoPlatformChart.valuesKeys.filter((k) => k.includes("checkpoint") || k.includes("Checkpoint"))).toEqual([]);
        expect(dynamoPlatformChart.openSubtrees!.filter((k) => k.includes("checkpoint"))).toEqual([]);
        expect(dynamoPlatformChart.valuesKeys).toContain("global.snapshot.install");
        expect(dynamoPlatformChart.note).toMatch(/BEFORE the v1\.5\.0 cut/);
    });
});
