/**
 * Closed world for KV transport (upstream/kv-transport.ts, upstream/check/kv-closed-world.ts), run through the pack's
 * upstream-rules policy: unknown settings of a KV family and unsafe values are refused ("the pack cannot prove ..."),
 * known-safe variants pass, and a reviewed exception from the stack file is accepted exactly, only until its date.
 */
import { describe, expect, it } from "vitest";
import { upstreamRulesPolicy } from "../../policies/upstream";
import { EndpointSchema } from "../../config/endpoint";
import { KV_EXCEPTIONS_ANNOTATION, LABEL_PREFIX } from "../../lib/labels";
import { kvClosedWorldRule, checkRendered, defaultFacts } from "../../upstream/check";
import { cannotProve, kvKnownSettings } from "../../upstream/kv-transport";
import { components } from "../../upstream";
import { edit, endpoint, endpointObjects, mainOf, setArg, setEnv, stack as fixtureStack, violations } from "./rdma-fixtures";

/** Equal TP on prefill and decode: one Mooncake store pool keys blocks by tp_rank, not TP size (upstream/check/endpoint-support.ts). */
const EQUAL_TP = { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } };
/** The fixture stack with equal-TP endpoints (the compliant baseline every case mutates). */
const stack = (eps = [endpoint({ topology: EQUAL_TP })], o?: Parameters<typeof fixtureStack>[1]) => fixtureStack(eps, o);

const policy = upstreamRulesPolicy();
const both = (fn: (m: Record<string, any>) => void, rs = stack()) =>
    edit(rs, "DynamoGraphDeployment", (o) => {
        fn(mainOf(o, "prefill"));
        fn(mainOf(o, "decode"));
    });
const closed = async (rs: ReturnType<typeof stack>) => (await violations([policy], rs)).filter((v) => /the pack cannot prove/.test(v));

describe("KV closed world facts", () => {
    it("every known env setting and flag is one a pinned component reads (upstream-check and the closed world agree)", () => {
        const env = Object.values(components).flatMap((c) => Object.keys(c.env));
        const flags = Object.values(components).flatMap((c) => Object.keys(c.flags));
        for (const s of kvKnownSettings.filter((x) => !x.name.includes("."))) {
            if (s.name.startsWith("--")) expect(flags, s.name).toContain(s.name);
            else
                expect(
                    env.some((k) => k === s.name || (k.endsWith("*") && s.name.startsWith(k.slice(0, -1)))),
                    s.name,
                ).toBe(true);
            expect(s.source).toMatch(/^[\w.-]+\/[\w.-]+@[^:]+:.+/);
        }
    });
});

describe("KV closed world in the pack", () => {
    it("the compliant graphs pass (vLLM + Mooncake store, SGLang, TRT-LLM)", async () => {
        expect(await violations([policy], stack())).toEqual([]);
        expect(await violations([policy], stack([endpoint({ engine: "sglang", topology: EQUAL_TP })]))).toEqual([]);
    });
    it("refuses UCX_NET_DEVICES beside SGLang's NIXL device_list: NIXL sets NET_DEVICES from the list over it (inert)", async () => {
        const sg = stack([endpoint({ engine: "sglang", topology: EQUAL_TP })]);
        const inert = async (fn: (m: Record<string, any>) => void) =>
            (await violations([policy], both(fn, sg))).filter((v) => /is inert/.test(v));
        const rails = "mlx5_0:1,mlx5_3:1";
        const found = await inert((m) => setEnv(m, "UCX_NET_DEVICES", rails));
        expect(found).toHaveLength(2);
        expect(found[0]).toMatch(
            new RegExp(
                `field env\\.UCX_NET_DEVICES: UCX_NET_DEVICES=${rails} is inert: NIXL's UCX backend is given SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS\\.device_list ".*" and sets UCX NET_DEVICES from it with config\\.modifyAlways, over the environment \\[ai-dynamo/nixl@v1\\.4\\.0:src/plugins/ucx/ucx_utils\\.cpp\\]`,
            ),
        );
        // Without a device_list, or with the LIBFABRIC backend, UCX_NET_DEVICES is what UCX reads: not inert.
        expect(
            await inert((m) => {
                setEnv(m, "UCX_NET_DEVICES", rails);
                setEnv(m, "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS", "{}");
            }),
        ).toEqual([]);
        expect(
            await inert((m) => {
                setEnv(m, "UCX_NET_DEVICES", rails);
                setEnv(m, "SGLANG_DISAGGREGATION_NIXL_BACKEND", "LIBFABRIC");
            }),
        ).toEqual([]);
        // vLLM renders no device_list: its UCX_NET_DEVICES stays live.
        expect(
            (
                await violations(
                    [policy],
                    both((m) => setEnv(m, "UCX_NET_DEVICES", rails)),
                )
            ).filter((v) => /is inert/.test(v)),
        ).toEqual([]);
    });
    it("an unknown knob of each family is refused, naming name and value", async () => {
        for (const [n, v] of [
            ["UCX_ZCOPY_THRESH", "inf"],
            ["NIXL_PLUGIN_DIR", "/tmp"],
            ["FI_EFA_TX_SIZE", "64"],
            ["NCCL_P2P_DISABLE", "1"],
            ["MC_FORCE_TCP", "1"],
            ["MOONCAKE_OFFLOAD_ENABLED", "true"],
            ["VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "5"],
            ["DYN_KVBM_NIXL_BACKEND_UCX", "true"],
            ["CUDA_VISIBLE_DEVICES", "0"],
            ["PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"],
        ]) {
            const v1 = await closed(both((m) => setEnv(m, n, v)));
            expect(v1.join("\n"), n).toContain(cannotProve(n, v));
        }
    });
    it("a known setting at an unsafe value is refused: GPUDirect off, KV buffer in host memory, TCP transports", async () => {
        expect((await closed(both((m) => setEnv(m, "UCX_TLS", "tcp,cuda_copy")))).join("\n")).toContain(
            cannotProve("UCX_TLS", "tcp,cuda_copy"),
        );
        expect((await closed(both((m) => setEnv(m, "UCX_IB_GPU_DIRECT_RDMA", "no")))).join("\n")).toContain(
            cannotProve("UCX_IB_GPU_DIRECT_RDMA", "no"),
        );
        expect((await closed(both((m) => setEnv(m, "UCX_RNDV_SCHEME", "am_bcopy")))).join("\n")).toContain("UCX_RNDV_SCHEME=am_bcopy");
        const cpu = both((m) => {
            const i = m.args.indexOf("--kv-transfer-config");
            const k = JSON.parse(m.args[i + 1]);
            k.kv_connector_extra_config.connectors[0].kv_buffer_device = "cpu";
            m.args[i + 1] = JSON.stringify(k);
        });
        expect((await closed(cpu)).join("\n")).toContain(cannotProve("--kv-transfer-config.kv_buffer_device", "cpu"));
        const gds = both((m) => {
            const i = m.args.indexOf("--kv-transfer-config");
            const k = JSON.parse(m.args[i + 1]);
            k.kv_connector_extra_config.connectors[0].kv_connector_extra_config.backends = ["UCX", "GDS"];
            m.args[i + 1] = JSON.stringify(k);
        });
        expect((await closed(gds)).join("\n")).toContain(cannotProve("--kv-transfer-config.kv_connector_extra_config.backends", "UCX,GDS"));
        // KVBM's disk tier somewhere other than a local path (a URL), and a zero-sized tier, are not proven.
        expect((await closed(both((m) => setEnv(m, "DYN_KVBM_DISK_CACHE_DIR", "s3://kv-cache")))).join("\n")).toContain(
            cannotProve("DYN_KVBM_DISK_CACHE_DIR", "s3://kv-cache"),
        );
        expect((await closed(both((m) => setEnv(m, "DYN_KVBM_CPU_CACHE_GB", "0")))).join("\n")).toContain(
            cannotProve("DYN_KVBM_CPU_CACHE_GB", "0"),
        );
        const sg = stack([endpoint({ engine: "sglang", topology: EQUAL_TP })]);
        expect((await closed(both((m) => setArg(m, "--disaggregation-transfer-backend", "fake"), sg))).join("\n")).toContain(
            "--disaggregation-transfer-backend=fake",
        );
    });
    it("known-safe variants pass: tuned thresholds, equivalent spellings, settings that only add an RDMA path", async () => {
        for (const [n, v] of [
            ["UCX_RNDV_THRESH", "8192"],
            ["UCX_RNDV_SCHEME", "put_zcopy"],
            ["UCX_TLS", "rc_x,rc,dc_x,cuda_copy,cuda_ipc,gdr_copy"],
            ["UCX_IB_GPU_DIRECT_RDMA", "yes"],
            ["UCX_MAX_HCA_PER_GPU", "2"],
            ["NCCL_NET_GDR_LEVEL", "SYS"],
            // KVBM's pod-local tiers (upstream/kvbm.ts): a size and a local directory.
            ["DYN_KVBM_CPU_CACHE_GB", "100"],
            ["DYN_KVBM_DISK_CACHE_DIR", "/kvbm"],
            ["DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER", "true"],
        ]) {
            expect(await closed(both((m) => setEnv(m, n, v))), `${n}=${v}`).toEqual([]);
        }
    });
    it("a reviewed exception is accepted exactly (name, value, component) and refused after its date", async () => {
        const base = {
            name: "UCX_ZCOPY_THRESH",
            value: "inf",
            why: "NIXL zcopy threshold tuning under review by infra",
            until: "2099-12-31",
        };
        const withEx = (ex: object[]) => stack([EndpointSchema.parse({ ...endpoint({ topology: EQUAL_TP }), kvExceptions: ex })]);
        const set = (rs: ReturnType<typeof stack>, v = "inf") => both((m) => setEnv(m, "UCX_ZCOPY_THRESH", v), rs);
        expect(await closed(set(withEx([base])))).toEqual([]);
        // Nothing near it: another value, or another component than the one named.
        expect((await closed(set(withEx([base]), "1024"))).join("\n")).toContain(cannotProve("UCX_ZCOPY_THRESH", "1024"));
        const onlyDecode = await closed(set(withEx([{ ...base, component: "decode" }])));
        expect(onlyDecode.join("\n")).toMatch(/prefill\/main/);
        expect(onlyDecode.join("\n")).not.toMatch(/decode\/main/);
        // Expired.
        expect((await closed(set(withEx([{ ...base, until: "2020-01-01" }])))).join("\n")).toMatch(/its exception expired on 2020-01-01/);
    });
    it("an engine started another way is still in the closed world: GPUs or RDMA devices put a container in scope; flags inside a shell script count", () => {
        const dep = (container: Record<string, any>) => ({
            apiVersion: "apps/v1",
            kind: "Deployment",
            metadata: { name: "side", namespace: "inference" },
            spec: { template: { spec: { containers: [container] } } },
        });
        const run = (o: Record<string, any>) =>
            checkRendered({ stack: "s", objects: [o], releases: [] }, defaultFacts, undefined, [kvClosedWorldRule]).findings.map(
                (f) => f.message,
            );
        const gpu = { limits: { "nvidia.com/gpu": "1" } };
        expect(
            run(
                dep({
                    name: "vllm",
                    image: "vllm/vllm-openai:latest",
                    command: ["vllm", "serve", "m"],
                    env: [{ name: "UCX_TLS", value: "tcp" }],
                    resources: gpu,
                }),
            ).join("\n"),
        ).toContain(cannotProve("UCX_TLS", "tcp"));
        expect(
            run(
                dep({
                    name: "sgl",
                    image: "x",
                    command: ["sh", "-c", "python3 -m sglang.launch_server --disaggregation-transfer-backend fake --port 1"],
                    resources: { limits: { "rdma/rail_0": "1" } },
                }),
            ).join("\n"),
        ).toContain(cannotProve("--disaggregation-transfer-backend", "fake"));
        // No GPU, no RDMA device, no KV entry point: not a KV mover.
        expect(run(dep({ name: "web", image: "x", command: ["web"], env: [{ name: "UCX_TLS", value: "tcp" }] }))).toEqual([]);
    });
    it("the stack file's exception reaches the graph as an annotation; the rule judges it against the render date", () => {
        const e = EndpointSchema.parse({
            ...endpoint({ topology: EQUAL_TP }),
            kvExceptions: [
                {
                    name: "NCCL_P2P_DISABLE",
                    value: "1",
                    component: "decode",
                    why: "reviewed: PCIe switch errata on rev A boards",
                    until: "2027-01-31",
                },
            ],
        });
        const { dgd } = endpointObjects(e);
        expect(KV_EXCEPTIONS_ANNOTATION).toBe(`${LABEL_PREFIX}/kv-exceptions`);
        expect(JSON.parse(dgd.metadata.annotations![KV_EXCEPTIONS_ANNOTATION])).toEqual(e.kvExceptions);
        setEnv(mainOf(dgd, "decode"), "NCCL_P2P_DISABLE", "1");
        const at = (d: string) =>
            checkRendered({ stack: "s", objects: [dgd as any], releases: [], now: new Date(d) }, defaultFacts, undefined, [
                kvClosedWorldRule,
            ]).findings.map((f) => f.message);
        expect(at("2027-01-31T23:00:00Z")).toEqual([]);
        expect(at("2027-02-01T00:00:00Z").join("\n")).toMatch(/NCCL_P2P_DISABLE=1` keeps KV on RDMA; its exception expired on 2027-01-31/);
        expect(() =>
            EndpointSchema.parse({
                ...endpoint({ topology: EQUAL_TP }),
                kvExceptions: [{ name: "X", value: "1", why: "short", until: "soon" }],
            }),
        ).toThrow(/until must be YYYY-MM-DD|too_small|at least/);
    });
});
