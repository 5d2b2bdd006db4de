/**
 * Pure generators of the serving layer, without mocks: UCX/NCCL/Mooncake env from the rail table (lib/nixl.ts),
 * the DGD (lib/dgd.ts) including the one-field engine switch, the Mooncake pool (lib/mooncake.ts) and placement
 * checks (lib/serving.ts).
 */
import { describe, expect, it } from "vitest";
import { ServingConfigSchema } from "../config/serving";
import { NodeProfileSchema, presetProfiles } from "../config/nodeProfile";
import { buildDgd, ENGINES, plannerConfig } from "../lib/dgd";
import { buildMooncake, mooncakeKvEventsEndpoint, mooncakeMasterAddress } from "../lib/mooncake";
import {
    EFA_RESOURCE,
    kvFabricOf,
    kvTransportEnv,
    memlockPath,
    mooncakeEnv,
    rdmaResources,
    sglangNixlBackendParams,
    wrappedCommand,
} from "../lib/nixl";
import { frontendService, placeEndpoints, unpublishedRdmaResources } from "../lib/serving";
import { DGX, endpoint, endpointObjects, mainOf, placement } from "./policies/rdma-fixtures";

const CISCO = NodeProfileSchema.parse(presetProfiles().get("cisco-ucsc-885a-m8-h22"));
const envMap = (env: Array<{ name: string; value?: string; valueFrom?: any }>) =>
    Object.fromEntries(
        env.map((e) => [e.name, e.value ?? (e.valueFrom?.fieldRef ? `fieldRef:${e.valueFrom.fieldRef.fieldPath}` : undefined)]),
    );

describe("lib/nixl.ts: transport env from the rail table", () => {
    it("DGX H200: UCX/NCCL pinned to the rail HCAs in rail order (GPU1 is mlx5_3); static set for SGLang/TRT-LLM", () => {
        expect(envMap(kvTransportEnv(kvFabricOf(DGX), "static"))).toEqual({
            UCX_TLS: "rc_x,rc,cuda_copy,cuda_ipc",
            UCX_NET_DEVICES: "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
            UCX_IB_IS_GLOBAL: "y",
            UCX_PROTO_EMULATION_ENABLE: "n",
            NCCL_NET: "IB",
            NCCL_IB_DISABLE: "0",
            NCCL_IB_HCA: "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
        });
    });
    it("no NIXL connector (an aggregated Mooncake-only worker): no UCX or vLLM NIC variables, NCCL only", () => {
        for (const nic of ["static", "vllm-pcie-map"] as const)
            expect(envMap(kvTransportEnv(kvFabricOf(DGX), nic, { nixl: false }))).toEqual({
                NCCL_NET: "IB",
                NCCL_IB_DISABLE: "0",
                NCCL_IB_HCA: "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
            });
    });
    it("vLLM per-rank map: the whole rail table and no static UCX_NET_DEVICES", () => {
        // vLLM prepends each rank's HCA to an existing UCX_NET_DEVICES and UCX reads the list as a set, so a static
        // list of all rails would keep every rank on every rail (vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py).
        const env = envMap(kvTransportEnv(kvFabricOf(DGX), "vllm-pcie-map"));
        expect(env.UCX_NET_DEVICES).toBeUndefined();
        expect(env.VLLM_GPU_NIC_PCIE_MAPPING).toBe(
            "0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:40:00.0,0000:52:00.0=0000:4f:00.0,0000:61:00.0=0000:5e:00.0,0000:9d:00.0=0000:9a:00.0,0000:c3:00.0=0000:c0:00.0,0000:d1:00.0=0000:ce:00.0,0000:df:00.0=0000:dc:00.0",
        );
        expect(env.VLLM_NIC_SELECTION_VARS).toBe("UCX_NET_DEVICES:1");
        // SGLang ignores the VLLM_* pair: its NIXL UCX backend gets the rails as device_list, which NIXL 1.4.0 splits on
        // ", " and turns into NET_DEVICES <hca>:1,... (ai-dynamo/nixl@v1.4.0 src/plugins/ucx/ucx_backend.cpp, ucx_utils.cpp).
        expect(sglangNixlBackendParams(kvFabricOf(DGX))).toEqual({
            device_list: "mlx5_0, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_9, mlx5_10, mlx5_11",
        });
    });
    it("Cisco C885A: netdevs out of rail order do not change the HCA order; frontend NIC never listed", () => {
        const env = envMap(kvTransportEnv(kvFabricOf(CISCO)));
        expect(env.UCX_NET_DEVICES).toBe(
            "ibp9s0f0:1,ibp35s0f0:1,ibp83s0f0:1,ibp105s0f0:1,ibp143s0f0:1,ibp156s0f0:1,ibp205s0f0:1,ibp241s0f0:1",
        );
        for (const f of CISCO.frontend) expect(String(env.UCX_NET_DEVICES).split(",")).not.toContain(`${f.hca}:1`);
    });
    it("one RDMA device per rail for any GPU count; EFA by devices per GPU", () => {
        expect(rdmaResources(kvFabricOf(DGX), 2)).toEqual(Object.fromEntries([0, 1, 2, 3, 4, 5, 6, 7].map((i) => [`rdma/rail_${i}`, "1"])));
        const efa = { kind: "efa" as const, profile: "p5en", devicesPerGpu: 2, devicesPerNode: 16, gpusPerNode: 8 };
        expect(rdmaResources(efa, 4)).toEqual({ [EFA_RESOURCE]: "8" });
        // Dynamo efa-on-aws.mdx "Required EFA environment variables" (SHM transfer off); FI_EFA_ENABLE_SHM is read by nothing
        // in libfabric's EFA provider (ofiwg/libfabric@v2.4.0:prov/efa/src/efa_env.c) and is not rendered.
        expect(envMap(kvTransportEnv(efa))).toEqual({
            FI_PROVIDER: "efa",
            FI_EFA_USE_DEVICE_RDMA: "1",
            FI_EFA_ENABLE_SHM_TRANSFER: "0",
            NCCL_NET: "Libfabric",
        });
        expect(memlockPath(efa, true).prelude).toBe(
            'ulimit -l unlimited && export LD_LIBRARY_PATH="/opt/amazon/efa/lib:/opt/amazon/efa/lib64:/opt/aws-ofi-nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
        );
    });
    it("rejects a profile whose rail HCA is a frontend NIC, and a profile without rails or EFA", () => {
        expect(() => kvFabricOf(DGX, ["mlx5_3"])).toThrow(
            "node profile dgx-h200: rail HCA(s) mlx5_3 are also frontend NICs; KV traffic must never ride the frontend",
        );
        expect(() => kvFabricOf({ ...DGX, rails: [] })).toThrow(
            "node profile dgx-h200 has no InfiniBand rails and no EFA layout: there is no RDMA path for KV transfer",
        );
    });
    it("memlock path: root + IPC_LOCK + SYS_RESOURCE whatever the node label says", () => {
        // A non-root `ulimit -l unlimited` fails unless the hard limit is already unlimited; memlockUnlimited only labels
        // on-prem nodes, so the container must not depend on it (Dynamo RDMA recipes run as root with both capabilities).
        const f = kvFabricOf(DGX);
        for (const unlimited of [true, false]) {
            expect(memlockPath(f, unlimited)).toEqual({
                securityContext: { runAsUser: 0, runAsGroup: 0, capabilities: { add: ["IPC_LOCK", "SYS_RESOURCE"] } },
                requireIpcLock: true,
                prelude: "ulimit -l unlimited",
            });
        }
        expect(wrappedCommand("ulimit -l unlimited", ["python3", "-m", "dynamo.vllm"])).toEqual([
            "sh",
            "-c",
            'ulimit -l unlimited && exec "$@"',
            "--",
            "python3",
            "-m",
            "dynamo.vllm",
        ]);
    });
    it("Mooncake: explicit rdma, rail devices, no inert MC_FORCE_HCA; EFA refused (kvcache-ai/Mooncake#2070)", () => {
        const env = envMap(mooncakeEnv(kvFabricOf(DGX), "m:50051", { kind: "store", segmentSizeGiB: 512 }));
        expect(env).toMatchObject({
            MOONCAKE_PROTOCOL: "rdma",
            MOONCAKE_DEVICE: "mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11",
            MOONCAKE_GLOBAL_SEGMENT_SIZE: "512gb",
            MOONCAKE_LOCAL_BUFFER_SIZE: "67108864",
            MOONCAKE_TE_META_DATA_SERVER: "P2PHANDSHAKE",
        });
        expect(env).not.toHaveProperty("MC_FORCE_HCA");
        expect(() =>
            mooncakeEnv({ kind: "efa", profile: "p5en", devicesPerGpu: 2, devicesPerNode: 16, gpusPerNode: 8 }, "m:1", { kind: "client" }),
        ).toThrow(/Mooncake#2070/);
    });
});

/** Leaf paths where two JSON values differ. */
function diff(a: unknown, b: unknown, at = ""): string[] {
    if (typeof a !== typeof b || Array.isArray(a) !== Array.isArray(b) || a === null || b === null || typeof a !== "object")
        return a === b ? [] : [at];
    const keys = new Set([...Object.keys(a as object), ...Object.keys(b as object)]);
    return [...keys].flatMap((k) => diff((a as any)[k], (b as any)[k], Array.isArray(a) ? `${at}[${k}]` : `${at}.${k}`));
}

/** A DGD with env lists replaced by name->value maps (compared separately). */
function withoutEnv(dgd: any): { body: any; env: Record<string, Record<string, string | undefined>> } {
    const body = structuredClone(dgd);
    const env: Record<string, Record<string, string | undefined>> = {};
    for (const c of body.spec.components)
        for (const ct of c.podTemplate.spec.containers) {
            env[`${c.name}/${ct.name}`] = envMap(ct.env ?? []);
            delete ct.env;
        }
    return { body, env };
}

describe("lib/dgd.ts: engine is one field", () => {
    // Besides the NIXL backend selector, the NIC selection differs by engine: vLLM narrows per rank (VLLM_* pair, side
    // channel from the pod IP), TRT-LLM gets the static rail set in UCX_NET_DEVICES, SGLang the rails as NIXL's
    // device_list alone (NIXL sets UCX NET_DEVICES from it over the environment, so no UCX_NET_DEVICES: lib/nixl.ts).
    const nicVars = ["VLLM_GPU_NIC_PCIE_MAPPING", "VLLM_NIC_SELECTION_VARS", "VLLM_NIXL_SIDE_CHANNEL_HOST"];
    for (const [to, transferVars] of [
        ["sglang", [...nicVars, "SGLANG_HOST_IP", "SGLANG_DISAGGREGATION_NIXL_BACKEND", "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS"]],
        ["trtllm", [...nicVars, "UCX_NET_DEVICES", "TRTLLM_NIXL_KVCACHE_BACKEND"]],
    ] as const) {
        const transferVar = transferVars.at(-1)!.endsWith("PARAMS") ? "SGLANG_DISAGGREGATION_NIXL_BACKEND" : transferVars.at(-1)!;
        it(`vllm -> ${to} changes only image, command module, args, the transfer/NIC variables, /dev/shm and the planner's backend`, () => {
            const base = { kvPool: { kind: "none" } };
            const a = withoutEnv(endpointObjects(endpoint({ ...base, engine: "vllm" })).dgd);
            const b = withoutEnv(endpointObjects(endpoint({ ...base, engine: to })).dgd);
            const paths = diff(a.body, b.body).map((p) => p.replace(/\[\d+\]/g, "[]"));
            const allowed = new Set([
                ".spec.backendFramework",
                ".spec.components[].podTemplate.spec.containers[].image",
                ".spec.components[].podTemplate.spec.initContainers[].image",
                // The preflight names the image it runs in (PREFLIGHT_IMAGE), the engine's.
                ".spec.components[].podTemplate.spec.initContainers[].env[].value",
                ".spec.components[].podTemplate.spec.containers[].command[]",
                ".spec.components[].podTemplate.spec.containers[].args[]",
                ".spec.components[].sharedMemorySize",
            ]);
            expect([...new Set(paths)].filter((p) => !allowed.has(p))).toEqual([]);
            // What changed in command and args, concretely.
            expect(mainOf(endpointObjects(endpoint({ ...base, engine: to })).dgd, "decode").command.at(-1)).toBe(`dynamo.${to}`);
            const plannerA = JSON.parse(mainOf(a.body, "Planner").args[1]);
            const plannerB = JSON.parse(mainOf(b.body, "Planner").args[1]);
            expect(diff(plannerA, plannerB)).toEqual([".backend"]);
            expect(mainOf(a.body, "Frontend").args).toEqual(mainOf(b.body, "Frontend").args);
            // Environment: identical except the engine's NIXL backend selector.
            for (const k of Object.keys(a.env)) {
                const changed = [...new Set([...Object.keys(a.env[k]), ...Object.keys(b.env[k])])].filter(
                    (n) => a.env[k][n] !== b.env[k][n],
                );
                expect(changed.sort()).toEqual(k.startsWith("prefill/") || k.startsWith("decode/") ? [...transferVars].sort() : []);
            }
            expect(b.env["decode/main"][transferVar]).toBe("UCX");
            expect([
                ...new Set(
                    diff(a.body, b.body)
                        .filter((p) => p.endsWith("sharedMemorySize"))
                        .map((p) => (b.body as any).spec.components[Number(/components\[(\d+)\]/.exec(p)![1])].sharedMemorySize),
                ),
            ]).toEqual([ENGINES[to].sharedMemory]);
        });
    }
    it("each engine gets the model under the flag its entry point names it by (TRT-LLM: --model, not the obsolete --model-path)", () => {
        // upstream/dynamo.ts: dynamo.trtllm's `--model` (`--model-path` parses but warns), SGLang's `--model-path`, vLLM's `--model`
        const modelFlag = { vllm: "--model", sglang: "--model-path", trtllm: "--model" } as const;
        for (const [engine, flag] of Object.entries(modelFlag)) {
            const args: string[] = mainOf(endpointObjects(endpoint({ kvPool: { kind: "none" }, engine })).dgd, "decode").args;
            expect(args[args.indexOf(flag) + 1]).toBe("meta-llama/Llama-3.3-70B-Instruct");
            expect(args.filter((a) => a === "--model" || a === "--model-path")).toEqual([flag]);
        }
    });
    it("KV routing, Planner and placement in the generated vLLM graph", () => {
        const { dgd } = endpointObjects(endpoint());
        expect(dgd.metadata).toEqual({
            name: "llama-70b",
            namespace: "inference",
            labels: { "inference-platform.io/endpoint": "llama-70b", "app.kubernetes.io/part-of": "inference-platform" },
            // The hub's count of KV cache scopes calling the model (config/endpoint.ts CACHE_SCOPES_ANNOTATION).
            annotations: { "inference-platform.io/kv-cache-scopes": "1" },
        });
        expect(dgd.spec.components.map((c) => [c.name, c.type, c.replicas, c.scalingAdapter !== undefined, c.sharedMemorySize])).toEqual([
            ["Frontend", "frontend", 1, false, undefined],
            ["Planner", "planner", 1, false, undefined],
            ["prefill", "prefill", 2, true, "16Gi"],
            ["decode", "decode", 1, true, "16Gi"],
        ]);
        expect(mainOf(dgd, "Frontend").args).toEqual(["--http-port", "8000", "--router-mode", "kv", "--router-queue-threshold", "1"]);
        const d = mainOf(dgd, "decode");
        expect(d.args).toEqual([
            "--model",
            "meta-llama/Llama-3.3-70B-Instruct",
            "--served-model-name",
            "meta-llama/Llama-3.3-70B-Instruct",
            "--tensor-parallel-size",
            "4",
            "--disaggregation-mode",
            "decode",
            "--scheduling-policy",
            "priority",
            "--kv-transfer-config",
            '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_load_failure_policy":"fail","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cuda","kv_connector_extra_config":{"backends":["UCX"]}},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}]}}',
        ]);
        // No KV events on decode: the router subscribes to none without conditional disaggregation
        // (upstream/dynamo.ts kvRouterNeedsWorkerEvents); prefill publishes them.
        expect(mainOf(dgd, "prefill").args.slice(-2)).toEqual([
            "--kv-events-config",
            '{"publisher":"zmq","topic":"kv-events","endpoint":"tcp://*:20080","enable_kv_cache_events":true}',
        ]);
        expect(d.resources.limits["nvidia.com/gpu"]).toBe("4");
        expect(component(dgd, "decode").podTemplate.spec.nodeSelector).toEqual({ "inference-platform.io/pool": "h200" });
        expect(component(dgd, "decode").podTemplate.spec.tolerations).toEqual([
            { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
        ]);
        expect(component(dgd, "decode").podTemplate.spec.initContainers[0].name).toBe("rdma-preflight");
    });
    it("planner config: load thresholds for disagg, decode-only for agg, none for throughput; never GPU utilisation", () => {
        expect(plannerConfig(endpoint())).toEqual({
            environment: "kubernetes",
            backend: "vllm",
            mode: "disagg",
            optimization_target: "load",
            enable_load_scaling: true,
            enable_throughput_scaling: false,
            pre_deployment_sweeping_mode: "none",
            load_adjustment_interval_seconds: 5,
            min_endpoint: 1,
            max_gpu_budget: 12,
            prefill_scale_up_queue_tokens: 200000,
            prefill_scale_down_queue_tokens: 20000,
            decode_scale_up_kv_rate: 80,
            decode_scale_down_kv_rate: 40,
        });
        const agg = plannerConfig(endpoint({ topology: { mode: "aggregated", workers: { replicas: 2, gpusPerWorker: 4 } } }));
        expect(Object.keys(agg).filter((k) => k.includes("scale_"))).toEqual(["decode_scale_up_kv_rate", "decode_scale_down_kv_rate"]);
        expect(
            Object.keys(plannerConfig(endpoint({ planner: { optimizationTarget: "throughput" } }))).filter((k) => k.includes("scale_")),
        ).toEqual([]);
    });
    it("speculative decoding: prefill gets the IDENTICAL config as decode (vLLM's NIXL handshake refuses a pair whose drafter differs)", () => {
        // vllm-project/vllm PR #49230: the NIXL compatibility hash covers the speculative settings of model-based methods
        // (eagle, eagle3, mtp, ...), so a decode-only EAGLE3 is refused at the handshake (upstream/activation.ts).
        const spec = { speculative: { method: "eagle3", draftModel: "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", numSpeculativeTokens: 3 } };
        const v = endpointObjects(endpoint(spec)).dgd;
        const cfg = '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.3-Instruct-70B","num_speculative_tokens":3}';
        for (const role of ["prefill", "decode"]) {
            const a = mainOf(v, role).args;
            expect(a.slice(a.indexOf("--speculative-config"), a.indexOf("--speculative-config") + 2), role).toEqual([
                "--speculative-config",
                cfg,
            ]);
        }
        const s = endpointObjects(endpoint({ ...spec, engine: "sglang" })).dgd;
        const sgl = [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B",
            "--speculative-num-draft-tokens",
            "3",
        ];
        for (const role of ["prefill", "decode"]) expect(mainOf(s, role).args.slice(-6), role).toEqual(sgl);
    });
    it("SGLang with the Mooncake pool: HiCache backend registers with the pod IP from the extra config (MOONCAKE_* would be read by nothing)", () => {
        const { dgd } = endpointObjects(endpoint({ engine: "sglang" }));
        const a = mainOf(dgd, "decode").args;
        // sgl-project/sglang@v0.5.18 mooncake_store.py: with master_server_address in the extra config, load_from_extra_config
        // builds the whole config from it; local_hostname defaults to localhost and MOONCAKE_LOCAL_HOSTNAME is never read.
        expect(a.slice(a.indexOf("--enable-hierarchical-cache"), a.indexOf("--enable-hierarchical-cache") + 9)).toEqual([
            "--enable-hierarchical-cache",
            "--hicache-ratio",
            "2",
            "--hicache-write-policy",
            "write_through",
            "--hicache-storage-backend",
            "mooncake",
            "--hicache-storage-backend-extra-config",
            '{"master_server_address":"llama-70b-mooncake-master.inference.svc.cluster.local:50051","metadata_server":"P2PHANDSHAKE","protocol":"rdma","device_name":"mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11","global_segment_size":0,"local_hostname":"$(POD_IP)"}',
        ]);
        for (const role of ["prefill", "decode"]) {
            const env = envMap(mainOf(dgd, role).env);
            expect(env.POD_IP, role).toBe("fieldRef:status.podIP");
            expect(
                Object.keys(env).filter((k) => k.startsWith("MOONCAKE_")),
                role,
            ).toEqual([]);
            expect(env).toMatchObject({ MC_ENABLE_DEST_DEVICE_AFFINITY: "1" });
            expect(env).not.toHaveProperty("MC_FORCE_HCA");
        }
        // SGLang exports its sglang:* series only with --enable-metrics (ai-dynamo/dynamo components/src/dynamo/sglang/publisher.py).
        expect(a).toContain("--enable-metrics");
        // P/D decode: SGLang forces the radix cache off and refuses HiCache without it unless this flag keeps it on
        // (sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py). Prefill does not need it.
        expect(a).toContain("--disaggregation-decode-enable-radix-cache");
        expect(mainOf(dgd, "prefill").args).not.toContain("--disaggregation-decode-enable-radix-cache");
    });
    it("shared KV cache on the frontend only with a master that publishes KV events, and then with its endpoint", () => {
        // The pinned pool image's Mooncake release is not recorded (upstream/compat.ts), so its master cannot be given
        // --enable_kv_events (Mooncake >= v0.3.12): no --shared-cache-type, which would be a no-op.
        const { dgd, others } = endpointObjects(endpoint({ engine: "sglang" }));
        expect(mainOf(dgd, "Frontend").args).toEqual(["--http-port", "8000", "--router-mode", "kv", "--router-queue-threshold", "1"]);
        expect(others[0].spec.template.spec.containers[0].args).not.toContain("--enable_kv_events=true");
        // With a master that publishes: flag, multiplier and DYN_MOONCAKE_KV_EVENTS_ENDPOINT (ai-dynamo/dynamo
        // lib/llm/src/discovery/model_manager.rs hicache_cache_for) on the frontend, the same endpoint advertised by workers.
        const e = endpoint({ engine: "sglang" });
        const ev = "tcp://llama-70b-mooncake-master.inference.svc.cluster.local:5557";
        const on = buildDgd({
            endpoint: e,
            namespace: "inference",
            pool: placement(),
            runtimeImage: "x:1.0.0",
            plannerImage: "p:1.0.0",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 400,
            mooncake: { master: mooncakeMasterAddress(e.name, "inference"), configMap: "c", kvEventsEndpoint: ev },
        });
        expect(mainOf(on, "Frontend").args).toEqual([
            "--http-port",
            "8000",
            "--router-mode",
            "kv",
            "--router-queue-threshold",
            "1",
            "--shared-cache-type",
            "hicache",
            "--shared-cache-multiplier",
            "0.5",
        ]);
        expect(envMap(mainOf(on, "Frontend").env).DYN_MOONCAKE_KV_EVENTS_ENDPOINT).toBe(ev);
        expect(envMap(mainOf(on, "decode").env).DYN_MOONCAKE_KV_EVENTS_ENDPOINT).toBe(ev);
        // vLLM endpoints never get it (the shared cache reads SGLang HiCache metadata only).
        const vl = buildDgd({
            endpoint: endpoint({}),
            namespace: "inference",
            pool: placement(),
            runtimeImage: "x:1.0.0",
            plannerImage: "p:1.0.0",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 400,
            mooncake: { master: "m:1", configMap: "c", kvEventsEndpoint: ev },
        });
        expect(mainOf(vl, "Frontend").args).not.toContain("--shared-cache-type");
        // A pool image whose Mooncake is recorded >= v0.3.12: the master publishes on 5557 (kvcache-ai/Mooncake@v0.3.12.post1
        // mooncake-store/src/master.cpp enable_kv_events, kv_events_bind_endpoint) and its Service exposes the port.
        const facts = [
            {
                image: "pool:1",
                library: "mooncake" as const,
                version: "v0.3.12.post1",
                source: "kvcache-ai/Mooncake@v0.3.12.post1:x" as const,
            },
        ];
        const m = buildMooncake({
            endpoint: "llama-70b",
            namespace: "inference",
            image: "pool:1",
            pool: placement(),
            segmentSizeGiB: 64,
            storeReplicas: 1,
            poolNodes: 2,
            minLinkRateGbps: 400,
            versionFacts: facts,
        });
        const master = m.masterDeployment.spec.template.spec.containers[0];
        expect(master.args.slice(-3)).toEqual(["--enable_kv_events=true", "--kv_events_bind_endpoint", "tcp://0.0.0.0:5557"]);
        expect(m.masterService.spec.ports.map((p: any) => p.port)).toContain(5557);
        expect(mooncakeKvEventsEndpoint("llama-70b", "inference", "pool:1", facts)).toBe(ev);
        expect(mooncakeKvEventsEndpoint("llama-70b", "inference", "pool:1", [{ ...facts[0], version: "v0.3.11.post1" }])).toBeUndefined();
    });
    it("aggregated without a KV pool moves no KV between pods: no RDMA resources, env or preflight", () => {
        const { dgd } = endpointObjects(
            endpoint({ topology: { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 8 } }, kvPool: { kind: "none" } }),
        );
        const w = component(dgd, "worker").podTemplate.spec;
        expect(w.containers[0].resources).toEqual({ requests: { "nvidia.com/gpu": "8" }, limits: { "nvidia.com/gpu": "8" } });
        expect(w.containers[0].command).toEqual(["python3", "-m", "dynamo.vllm"]);
        expect(w.initContainers).toBeUndefined();
    });
    it("EFA pool: workers request EFA and their share of the node's 2 MiB huge pages (with a cpu request); the preflight gets the devices only", () => {
        const P5EN = NodeProfileSchema.parse(presetProfiles().get("p5en-48xlarge"));
        const e = endpoint({ engine: "sglang", kvPool: { kind: "none" } });
        const pool = { ...placement({ profile: P5EN }), memlockUnlimited: true, hugepages2MiPerNode: 5128 };
        const dgd = buildDgd({
            endpoint: e,
            namespace: "inference",
            pool,
            runtimeImage: "x:1.0.0",
            plannerImage: "p:1.0.0",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 200,
        });
        expect(mainOf(dgd, "prefill").resources).toEqual({
            requests: { "nvidia.com/gpu": "2", [EFA_RESOURCE]: "4", "hugepages-2Mi": "2564Mi", cpu: "2" },
            limits: { "nvidia.com/gpu": "2", [EFA_RESOURCE]: "4", "hugepages-2Mi": "2564Mi" },
        });
        expect(mainOf(dgd, "decode").resources.limits).toEqual({ "nvidia.com/gpu": "4", [EFA_RESOURCE]: "8", "hugepages-2Mi": "5128Mi" });
        expect(component(dgd, "decode").podTemplate.spec.initContainers[0].resources.limits).toEqual({
            "nvidia.com/gpu": "4",
            [EFA_RESOURCE]: "8",
        });
        // Without reserved pages (or on InfiniBand) nothing is added.
        const none = buildDgd({
            endpoint: e,
            namespace: "inference",
            pool: { ...pool, hugepages2MiPerNode: undefined },
            runtimeImage: "x:1.0.0",
            plannerImage: "p:1.0.0",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 200,
        });
        expect(mainOf(none, "prefill").resources.requests["hugepages-2Mi"]).toBeUndefined();
        const ib = buildDgd({
            endpoint: e,
            namespace: "inference",
            pool: { ...placement(), hugepages2MiPerNode: 5128 },
            runtimeImage: "x:1.0.0",
            plannerImage: "p:1.0.0",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 400,
        });
        expect(Object.keys(mainOf(ib, "prefill").resources.requests)).not.toContain("hugepages-2Mi");
    });
    it("Frontend and Planner go to the system nodes when a selector is given; workers keep the pool's", () => {
        const e = endpoint({ kvPool: { kind: "none" } });
        const args = {
            endpoint: e,
            namespace: "inference",
            pool: placement(),
            runtimeImage: "x:1.0.0",
            plannerImage: "p:1.0.0",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 400,
        };
        const sys = buildDgd({ ...args, systemNodeSelector: { "inference-platform.io/system": "true" } });
        expect(component(sys, "Frontend").podTemplate.spec.nodeSelector).toEqual({ "inference-platform.io/system": "true" });
        expect(component(sys, "Planner").podTemplate.spec.nodeSelector).toEqual({ "inference-platform.io/system": "true" });
        expect(component(sys, "decode").podTemplate.spec.nodeSelector).toEqual({ "inference-platform.io/pool": "h200" });
        for (const sel of [undefined, {}]) {
            const plain = buildDgd({ ...args, systemNodeSelector: sel });
            expect("nodeSelector" in component(plain, "Frontend").podTemplate.spec).toBe(false);
            expect("nodeSelector" in component(plain, "Planner").podTemplate.spec).toBe(false);
        }
    });
    it("refuses a worker larger than a node and TRT-LLM with a Mooncake pool", () => {
        const big = endpoint({ topology: { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 8 } } });
        const small = { ...placement(), fabric: { ...kvFabricOf(DGX), gpusPerNode: 4 } };
        expect(() =>
            buildDgd({
                endpoint: big,
                namespace: "inference",
                pool: small,
                runtimeImage: "x:1.0.0",
                plannerImage: "p:1.0.0",
                prometheusEndpoint: "http://p",
                minLinkRateGbps: 400,
                mooncake: { master: "m:1", configMap: "c" },
            }),
        ).toThrow("endpoint llama-70b: worker workers need 8 GPUs but a node of pool h200 (dgx-h200) has 4; workers never span nodes");
        expect(() => endpointObjects(endpoint({ engine: "trtllm" }))).toThrow(
            "endpoint llama-70b: engine trtllm has no Mooncake shared-pool integration in Dynamo (offloading support matrix); use kvPool kind none or engine vllm/sglang",
        );
    });
});

function component(dgd: any, name: string) {
    return dgd.spec.components.find((c: any) => c.name === name);
}

describe("lib/mooncake.ts", () => {
    it("master Deployment + ClusterIP Service, stores on the pool's nodes one per node, segment from config", () => {
        const m = buildMooncake({
            endpoint: "llama-70b",
            namespace: "inference",
            image: "docker.io/lmsysorg/sglang:v0.5.16",
            pool: placement(),
            segmentSizeGiB: 512,
            storeReplicas: 2,
            poolNodes: 2,
            minLinkRateGbps: 400,
        });
        expect(mooncakeMasterAddress("llama-70b", "inference")).toBe("llama-70b-mooncake-master.inference.svc.cluster.local:50051");
        expect(m.masterService.spec.type).toBe("ClusterIP");
        expect(m.masterDeployment.spec.template.spec.containers[0].args).toEqual([
            "--rpc_address",
            "$(POD_IP)",
            "--rpc_port",
            "50051",
            "--metrics_port",
            "9003",
        ]);
        const s = m.storeDeployment.spec.template.spec;
        expect(m.storeDeployment.spec.replicas).toBe(2);
        expect(s.nodeSelector).toEqual({ "inference-platform.io/pool": "h200" });
        expect(s.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey).toBe("kubernetes.io/hostname");
        expect(s.containers[0].resources.limits.memory).toBe("528Gi");
        expect(envMap(s.containers[0].env).MOONCAKE_GLOBAL_SEGMENT_SIZE).toBe("512gb");
        expect(s.initContainers[0].env.find((e: any) => e.name === "PREFLIGHT_GPU_NIC_MAP")).toBeUndefined();
        expect(() =>
            buildMooncake({
                endpoint: "e",
                namespace: "inference",
                image: "i:v1.0.0",
                pool: placement(),
                segmentSizeGiB: 1,
                storeReplicas: 3,
                poolNodes: 2,
                minLinkRateGbps: 400,
            }),
        ).toThrow("endpoint e: kvPool.storeReplicas 3 exceeds the 2 node(s) of pool h200; at most one store per node");
    });
    it("the master goes to the system nodes when a selector is given; stores stay on the pool", () => {
        const args = {
            endpoint: "llama-70b",
            namespace: "inference",
            image: "i:v1.0.0",
            pool: placement(),
            segmentSizeGiB: 64,
            storeReplicas: 2,
            poolNodes: 2,
            minLinkRateGbps: 400,
        };
        const m = buildMooncake({ ...args, systemNodeSelector: { "node-role.kubernetes.io/system": "true" } });
        expect(m.masterDeployment.spec.template.spec.nodeSelector).toEqual({ "node-role.kubernetes.io/system": "true" });
        expect(m.storeDeployment.spec.template.spec.nodeSelector).toEqual({ "inference-platform.io/pool": "h200" });
        expect("nodeSelector" in buildMooncake(args).masterDeployment.spec.template.spec).toBe(false);
    });
});

describe("lib/serving.ts", () => {
    const pool = (name: string, nodes = ["n1", "n2"]) => ({ name, profile: DGX, nodeCount: nodes.length });
    const serving = ServingConfigSchema.parse({});
    it("frontendService: the operator's Service for the Frontend component", () => {
        expect(frontendService("llama-70b")).toEqual({ name: "llama-70b-frontend", namespace: "inference", port: 8000 });
    });
    it("places on the only pool; names every misfit with its contract key", () => {
        expect(placeEndpoints([endpoint()], [pool("h200")], serving, "hub output spokeContracts.hn1").issues).toEqual([]);
        const bad = endpoint({
            topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 8 }, decode: { replicas: 2, gpusPerWorker: 8 } },
            kvPool: { kind: "mooncake", segmentSizeGiB: 64, storeReplicas: 3 },
        });
        expect(placeEndpoints([bad], [pool("h200")], serving, "hub output spokeContracts.hn1").issues).toEqual([
            {
                key: "hub output spokeContracts.hn1.endpoints[0].kvPool.storeReplicas",
                message: '3 Mooncake stores on pool "h200" with 2 node(s); at most one store per node',
            },
            { key: "hub output spokeContracts.hn1.endpoints", message: 'endpoints on pool "h200" need 24 GPUs; its 2 node(s) have 16' },
        ]);
    });
    it("with several pools every endpoint must be mapped", () => {
        const r = placeEndpoints([endpoint()], [pool("a"), pool("b", ["n3"])], serving, "k");
        expect(r.issues).toEqual([
            {
                key: "platform:serving.endpointPools.llama-70b",
                message: 'endpoint "llama-70b" is placed on this spoke but the spoke has 2 node pools (a, b); say which one runs it',
            },
        ]);
        const ok = placeEndpoints(
            [endpoint()],
            [pool("a"), pool("b", ["n3"])],
            ServingConfigSchema.parse({ endpointPools: { "llama-70b": "a" } }),
            "k",
        );
        expect(ok.placements.map((p) => p.pool.name)).toEqual(["a"]);
        expect(
            placeEndpoints([endpoint()], [pool("a")], ServingConfigSchema.parse({ endpointPools: { "llama-70b": "zz" } }), "k").issues,
        ).toEqual([{ key: "platform:serving.endpointPools.llama-70b", message: 'unknown node pool "zz" (known: a)' }]);
    });
    it("an EKS pool counts its node group's desired nodes: a placement beyond them is refused", () => {
        const P5EN = NodeProfileSchema.parse(presetProfiles().get("p5en-48xlarge"));
        const e = endpoint({
            kvPool: { kind: "none" },
            topology: { mode: "disaggregated", prefill: { replicas: 2, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 8 } },
        });
        expect(placeEndpoints([e], [{ name: "h200", profile: P5EN, nodeCount: 2 }], serving, "k").issues).toEqual([]);
        expect(placeEndpoints([e], [{ name: "h200", profile: P5EN, nodeCount: 1 }], serving, "k").issues).toEqual([
            { key: "k.endpoints", message: 'endpoints on pool "h200" need 16 GPUs; its 1 node(s) have 8' },
        ]);
    });
    it("unpublishedRdmaResources: what a pod would request that the pool's device plugin does not advertise", () => {
        const P5EN = NodeProfileSchema.parse(presetProfiles().get("p5en-48xlarge"));
        expect(unpublishedRdmaResources(kvFabricOf(P5EN), [EFA_RESOURCE])).toEqual([]);
        expect(unpublishedRdmaResources(kvFabricOf(P5EN), [])).toEqual([EFA_RESOURCE]);
        expect(
            unpublishedRdmaResources(
                kvFabricOf(DGX),
                [0, 1, 2, 3, 4, 5, 6, 7].map((r) => `rdma/rail_${r}`),
            ),
        ).toEqual([]);
        expect(unpublishedRdmaResources(kvFabricOf(DGX), ["rdma/rail_0", "rdma/rail_1"])).toEqual(
            [2, 3, 4, 5, 6, 7].map((r) => `rdma/rail_${r}`),
        );
    });
    it("serving config defaults keep existing stack files valid", () => {
        // No Prometheus URL of its own: unset, the Planner gets platform:observability's (config/observability.ts prometheusOf).
        expect(ServingConfigSchema.parse({})).toEqual({
            platformNamespace: "dynamo-system",
            grove: false,
            kaiScheduler: false,
            endpointPools: {},
        });
    });
});
