import { versions } from "../../config/versions";
import { allPolicies } from "../../policies/policies";
import { runPolicies } from "../../tools/policy-runner";
import { describe, expect, it } from "vitest";
import { PREFLIGHT_CONTAINER as LIB_PREFLIGHT } from "../../lib/preflight";
import {
    libfabricRequiresEfa,
    nicMapPerRank,
    ncclIbHcaRailHcas,
    ncclNoSocketFallback,
    noHostPathInfiniband,
    PREFLIGHT_CONTAINER,
    railsCoverEveryGpu,
    rdmaCmRailNetworks,
    rdmaFabricAddressing,
    rdmaIpcLock,
    rdmaMemlockPath,
    rdmaPreflightInit,
    rdmaResourcePerGpu,
    rdmaWorkloadOnRdmaPool,
    rdmaWorkloadPolicies,
    ucxNetDevicesRailHcas,
    ucxTlsRdmaNoTcp,
} from "../../policies/rdma-workloads";
import { buildDgd } from "../../lib/dgd";
import { mooncakePolicies } from "../../policies/mooncake";
import { efaWorkloadHugepages, efaWorkloadTransport } from "../../policies/efa";
import { eksGpuOperatorValues } from "../../components/spoke/GpuOperator";
import {
    DGX,
    edit,
    endpoint,
    k8s,
    mainOf,
    platform,
    poolPatches,
    res,
    setArg,
    setEnv,
    setMooncakeProtocol,
    stack,
    violations,
} from "./rdma-fixtures";

const P = "DynamoGraphDeployment/llama-70b container prefill/main field spec.components[2].podTemplate.spec.containers[0]";
const D = "DynamoGraphDeployment/llama-70b container decode/main field spec.components[3].podTemplate.spec.containers[0]";
const RAILS = "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1";

/** The default graph with the prefill main container edited. */
const prefill = (fn: (m: Record<string, any>) => void) => edit(stack(), "DynamoGraphDeployment", (o) => fn(mainOf(o, "prefill")));

describe("RDMA workload policies on the generated graph", () => {
    it("the generated graphs (vLLM/SGLang/TRT-LLM, disaggregated and aggregated, both memlock paths) pass every rule", async () => {
        const agg = { topology: { mode: "aggregated", workers: { replicas: 2, gpusPerWorker: 4 } } };
        for (const rs of [
            stack(),
            stack([endpoint({ engine: "sglang" })]),
            stack([endpoint({ engine: "trtllm", kvPool: { kind: "none" } })]),
            stack([endpoint(agg)]),
            stack([endpoint({ engine: "sglang", ...agg })], { memlockUnlimited: true }),
        ])
            expect(await violations(rdmaWorkloadPolicies, rs)).toEqual([]);
    });
    it("an aggregated worker whose only KV connector is Mooncake gets no UCX env; its RDMA proof rests on the Mooncake config", async () => {
        const agg = { topology: { mode: "aggregated", workers: { replicas: 2, gpusPerWorker: 4 } } };
        for (const engine of ["vllm", "sglang"]) {
            const rs = stack([endpoint({ engine, ...agg })]);
            const dgd = rs.find((r) => (r.inputs as any).kind === "DynamoGraphDeployment")!.inputs as any;
            const env: string[] = mainOf(dgd, "worker").env.map((e: { name: string }) => e.name);
            // Nothing in the pod loads UCX: no NIXL connector (lib/nixl.ts kvTransportEnv).
            expect(
                env.filter((n) => /^(UCX_|VLLM_NIC_SELECTION_VARS|VLLM_GPU_NIC_PCIE_MAPPING)/.test(n)),
                engine,
            ).toEqual([]);
            expect(await violations([...rdmaWorkloadPolicies, ...mooncakePolicies], rs), engine).toEqual([]);
        }
        // The Mooncake transport decides: tcp in the worker's Mooncake config is refused.
        const tcp = setMooncakeProtocol(stack([endpoint(agg)]), "tcp");
        const msgs = await violations([...rdmaWorkloadPolicies, ...mooncakePolicies], tcp);
        expect(
            msgs.some((m) => m.startsWith("DynamoGraphDeployment/llama-70b container worker/main") && /Mooncake protocol is "tcp"/.test(m)),
        ).toBe(true);
    });
    it("the pack's preflight container name is the one lib/preflight.ts generates", () => {
        expect(PREFLIGHT_CONTAINER).toBe(LIB_PREFLIGHT);
    });
});

describe("rdma-resource-per-gpu", () => {
    it("compliant: every rail in requests and limits", async () => {
        expect(await violations([rdmaResourcePerGpu], stack())).toEqual([]);
    });
    it("no RDMA resource at all", async () => {
        const rs = prefill((m) => {
            m.resources = { requests: { "nvidia.com/gpu": "2" }, limits: { "nvidia.com/gpu": "2" } };
        });
        expect(await violations([rdmaResourcePerGpu], rs)).toEqual([
            `${P}.resources: requests no RDMA device (rdma/*, vpc.amazonaws.com/efa) for 2 GPU(s), so NIXL/UCX, Mooncake and NCCL fall back to TCP without an error. Fix: request the pool's rail resources (rdma/rail_<i>: 1 each) in both requests and limits.`,
        ]);
    });
    it("fewer devices than GPUs (a limit without a request counts: Kubernetes defaults the request to it)", async () => {
        const rs = edit(stack(), "DynamoGraphDeployment", (o) => {
            mainOf(o, "decode").resources = {
                requests: { "nvidia.com/gpu": "4", "rdma/rail_0": "1" },
                limits: { "nvidia.com/gpu": "4", "rdma/rail_0": "1", "rdma/rail_1": "1" },
            };
        });
        expect(await violations([rdmaResourcePerGpu], rs)).toEqual([
            `${D}.resources.limits: has 2 RDMA device(s) for 4 GPU(s); each GPU needs its own. Fix: request at least 4 RDMA devices (every rail resource of the pool).`,
        ]);
    });
});

/*
 * kubernetes/kubernetes pkg/apis/core/v1/defaults.go SetDefaults_Pod: "If limits are specified,
 * but requests are not, default requests to limits" (for every resource of every container). Extended resources
 * and huge pages are not overcommittable: pkg/apis/core/validation ValidateResourceRequirements rejects a request
 * that differs from its limit ("must be equal to ... limit") and a request without a limit ("Limit must be set").
 */
describe("extended resources in limits only (class 6)", () => {
    const limitsOnly = (m: Record<string, any>) => {
        const lim = { ...m.resources.limits };
        m.resources = { limits: lim };
    };
    it("a worker with rdma/* and nvidia.com/gpu in limits only passes the whole pack", async () => {
        const rs = edit(stack(), "DynamoGraphDeployment", (o) => {
            limitsOnly(mainOf(o, "decode"));
            limitsOnly(mainOf(o, "prefill"));
        });
        const msgs = async (x: typeof rs) =>
            (await runPolicies(allPolicies, x)).mandatory.map((f) => f.message).filter((m) => /resources|RDMA device|requests?\b/.test(m));
        // Whatever else the pack says about the graph, moving the quantities to limits adds no finding.
        const all = async (x: typeof rs) => (await runPolicies(allPolicies, x)).mandatory.map((f) => `${f.policyName}: ${f.message}`);
        expect(await all(rs)).toEqual(await all(stack()));
        expect(await msgs(rs)).toEqual([]);
    });
    it("a request that differs from its limit, or a request without a limit, is refused (API server would reject the pod)", async () => {
        const differs = edit(stack(), "DynamoGraphDeployment", (o) => {
            const m = mainOf(o, "decode");
            m.resources.requests["rdma/rail_0"] = "2";
        });
        expect((await violations([rdmaResourcePerGpu], differs)).join("\n")).toMatch(/rdma\/rail_0 request 2 differs from limit 1/);
        const noLimit = edit(stack(), "DynamoGraphDeployment", (o) => {
            const m = mainOf(o, "decode");
            delete m.resources.limits["rdma/rail_3"];
        });
        expect((await violations([rdmaResourcePerGpu], noLimit)).join("\n")).toMatch(/rdma\/rail_3 is requested but not limited/);
    });
});

describe("rdma-rails-cover-every-gpu", () => {
    it("compliant: all eight rails", async () => {
        expect(await violations([railsCoverEveryGpu], stack())).toEqual([]);
    });
    it("a TP=2 worker requesting only rails 0 and 1", async () => {
        const rs = prefill((m) => {
            const r = { "nvidia.com/gpu": "2", "rdma/rail_0": "1", "rdma/rail_1": "1" };
            m.resources = { requests: { ...r }, limits: { ...r } };
        });
        expect(await violations([railsCoverEveryGpu], rs)).toEqual([
            `${P}.resources.limits: requests rail(s) 0,1 of pool h200 for 2 GPU(s), but the NVIDIA device plugin may assign any 2 of the node's 8 GPUs; rail(s) 2,3,4,5,6,7 would leave a GPU without its PCIe-affine NIC. Fix: request every rail resource of pool h200 (one device per rail).`,
        ]);
    });
});

describe("ucx-tls-rdma-no-tcp (values parsed as UCX reads them)", () => {
    const tls = async (v: string | undefined) =>
        violations(
            [ucxTlsRdmaNoTcp],
            prefill((m) => setEnv(m, "UCX_TLS", v)),
        );
    it("compliant: rc_x,rc,cuda_copy,cuda_ipc, an exclusion list without tcp, and :aux suffixes", async () => {
        expect(await tls("rc_x,rc,cuda_copy,cuda_ipc")).toEqual([]);
        expect(await tls("^tcp")).toEqual([]);
        expect(await tls("dc_x,ud_v:aux,cuda")).toEqual([]);
    });
    it("unset", async () => {
        expect(await tls(undefined)).toEqual([
            `${P}.env[UCX_TLS]: UCX_TLS is unset, so UCX may use every transport including tcp (NIXL never restricts it). Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        ]);
    });
    it("all, an exclusion list that keeps tcp, and no RDMA/CUDA transport", async () => {
        expect(await tls("all")).toEqual([
            `${P}.env[UCX_TLS]: UCX_TLS=all lets UCX use tcp, so a missing RDMA device degrades to TCP instead of failing. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        ]);
        expect(await tls("^ib,srd")).toEqual([
            `${P}.env[UCX_TLS]: UCX_TLS=^ib,srd lets UCX use tcp, so a missing RDMA device degrades to TCP instead of failing. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
            `${P}.env[UCX_TLS]: UCX_TLS=^ib,srd has no RDMA transport (rc, dc, ud, ib) for inter-node KV transfer. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        ]);
        expect(await tls("rc_x,rc")).toEqual([
            `${P}.env[UCX_TLS]: UCX_TLS=rc_x,rc has no CUDA transport (cuda_copy, cuda_ipc), so GPU buffers are treated as host memory. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        ]);
    });
    it("a value that is not a substring match: 'tcpx' is not tcp, 'rcache' is not rc", async () => {
        expect(await tls("rcache,cuda_copy")).toEqual([
            `${P}.env[UCX_TLS]: UCX_TLS=rcache,cuda_copy has no RDMA transport (rc, dc, ud, ib) for inter-node KV transfer. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        ]);
    });
    it("read from an envFrom ConfigMap and from a fieldRef", async () => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_TLS", undefined);
            m.envFrom = [{ configMapRef: { name: "ucx-defaults" } }];
        });
        rs.push(
            k8s({
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name: "ucx-defaults", namespace: "inference" },
                data: { UCX_TLS: "cuda_copy,tcp" },
            }),
        );
        expect(await violations([ucxTlsRdmaNoTcp], rs)).toEqual([
            `${P}.envFrom[0] (ConfigMap ucx-defaults): UCX_TLS=cuda_copy,tcp lets UCX use tcp, so a missing RDMA device degrades to TCP instead of failing. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
            `${P}.envFrom[0] (ConfigMap ucx-defaults): UCX_TLS=cuda_copy,tcp has no RDMA transport (rc, dc, ud, ib) for inter-node KV transfer. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        ]);
        const opaque = prefill((m) => {
            m.env = m.env.filter((e: any) => e.name !== "UCX_TLS");
            m.env.push({ name: "UCX_TLS", valueFrom: { configMapKeyRef: { name: "elsewhere", key: "tls" } } });
        });
        expect(await violations([ucxTlsRdmaNoTcp], opaque)).toEqual([
            `${P}.env[UCX_TLS]: UCX_TLS comes from a source the policy cannot read, so the transport cannot be proven. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc as a literal value.`,
        ]);
    });
});

describe("ucx-net-devices-rail-hcas", () => {
    const dev = async (v: string | undefined) =>
        violations(
            [ucxNetDevicesRailHcas],
            prefill((m) => setEnv(m, "UCX_NET_DEVICES", v)),
        );
    const fix = `Fix: set UCX_NET_DEVICES to rail HCAs of pool h200 (${RAILS}).`;
    it("compliant: the pool's rail HCAs", async () => {
        expect(await dev(RAILS)).toEqual([]);
        expect(await dev("mlx5_3:1")).toEqual([]);
    });
    it("all, an exclusion list, a frontend NIC, a storage HCA, a netdev, a missing port", async () => {
        expect(await dev("all")).toEqual([`${P}.env[UCX_NET_DEVICES]: UCX_NET_DEVICES=all allows every device. ${fix}`]);
        expect(await dev("^mlx5_1:1")).toEqual([
            `${P}.env[UCX_NET_DEVICES]: UCX_NET_DEVICES=^mlx5_1:1 is an exclusion list, so every other device (frontend NICs, tcp netdevs) stays allowed. ${fix}`,
        ]);
        expect(await dev("mlx5_0:1,mlx5_1:1")).toEqual([
            `${P}.env[UCX_NET_DEVICES]: mlx5_1:1 is a frontend (north-south) NIC of pool h200; KV traffic never rides the frontend. ${fix}`,
        ]);
        expect(await dev("mlx5_2:1")).toEqual([`${P}.env[UCX_NET_DEVICES]: mlx5_2:1 is not a rail HCA of pool h200. ${fix}`]);
        expect(await dev("eth0")).toEqual([`${P}.env[UCX_NET_DEVICES]: eth0 is not a rail HCA of pool h200. ${fix}`]);
        expect(await dev("mlx5_0")).toEqual([
            `${P}.env[UCX_NET_DEVICES]: mlx5_0 has no :port; UCX names RDMA devices <hca>:<port>. Fix: write mlx5_0:1.`,
        ]);
    });
    it("SGLang's NIXL device_list replaces UCX_NET_DEVICES (config.modifyAlways), so it is judged alone", async () => {
        const PARAMS = "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS";
        const sg = stack([endpoint({ engine: "sglang" })]);
        // Rendered: the rails as device_list, no UCX_NET_DEVICES (lib/nixl.ts nixl-device-list).
        const dgd = sg.find((r) => (r.inputs as Record<string, any>).kind === "DynamoGraphDeployment")!.inputs as Record<string, any>;
        for (const role of ["prefill", "decode"]) {
            const names = (mainOf(dgd, role).env as Array<{ name: string }>).map((e) => e.name);
            expect(names).toContain(PARAMS);
            expect(names).not.toContain("UCX_NET_DEVICES");
        }
        expect(await violations([ucxNetDevicesRailHcas, nicMapPerRank], sg)).toEqual([]);
        const list = (v: string | undefined, net?: string) =>
            violations(
                [ucxNetDevicesRailHcas],
                edit(sg, "DynamoGraphDeployment", (o) => {
                    setEnv(mainOf(o, "prefill"), PARAMS, v === undefined ? JSON.stringify({}) : JSON.stringify({ device_list: v }));
                    if (net) setEnv(mainOf(o, "prefill"), "UCX_NET_DEVICES", net);
                }),
            );
        expect(await list("mlx5_0, mlx5_1")).toEqual([
            `${P}.env[${PARAMS}].device_list: NIXL device_list "mlx5_0, mlx5_1" (UCX NET_DEVICES mlx5_0:1,mlx5_1:1, over any UCX_NET_DEVICES): mlx5_1:1 is a frontend (north-south) NIC of pool h200; KV traffic never rides the frontend. ${fix}`,
        ]);
        expect(await list("mlx5_0, mlx5_3")).toEqual([]);
        // A UCX_NET_DEVICES beside the list never reaches UCX: the list alone is judged (the KV closed world refuses
        // the inert variable, test/policies/kv-closed-world.test.ts).
        expect(await list("mlx5_0, mlx5_3", "all")).toEqual([]);
        expect(await list("mlx5_0, mlx5_1", RAILS)).toHaveLength(1);
        // No device_list and no UCX_NET_DEVICES: UCX may use any device.
        expect(await list(undefined)).toEqual([expect.stringMatching(/env\[UCX_NET_DEVICES\]: UCX_NET_DEVICES is unset/)]);
    });
    it("a rail whose resource is not requested", async () => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_NET_DEVICES", RAILS);
            setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", undefined);
            setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined);
            for (const k of ["requests", "limits"]) delete m.resources[k]["rdma/rail_7"];
        });
        expect(await violations([ucxNetDevicesRailHcas], rs)).toEqual([
            `${P}.env[UCX_NET_DEVICES]: mlx5_11:1 is rail 7, whose RDMA resource the container does not request, so the device is not in the pod. Fix: request every rail resource the device list names.`,
        ]);
    });
});

describe("nic-map-per-rank", () => {
    it("compliant: the pair over the whole rail table; or one UCX device per rank without the pair", async () => {
        expect(await violations([nicMapPerRank], stack())).toEqual([]);
        const rs = prefill((m) => {
            setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", undefined);
            setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined);
            setEnv(m, "UCX_NET_DEVICES", RAILS);
        });
        expect(await violations([nicMapPerRank], rs)).toEqual([]);
    });
    it("per-rank selection (UCX_NET_DEVICES left to vLLM) with a mapped NIC whose rail resource is not requested", async () => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_NET_DEVICES", undefined);
            setEnv(m, "VLLM_NIC_SELECTION_VARS", "UCX_NET_DEVICES:1");
            for (const k of ["requests", "limits"]) delete m.resources[k]?.["rdma/rail_7"];
        });
        expect(await violations([ucxNetDevicesRailHcas], rs)).toEqual([]);
        expect((await violations([nicMapPerRank], rs)).join("\n")).toMatch(
            /to mlx5_11 \(rail 7\), whose RDMA resource the container does not request/,
        );
    });
    it("one of the pair alone", async () => {
        const rs = prefill((m) => setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined));
        expect(await violations([nicMapPerRank], rs)).toEqual([
            `${P}.env[VLLM_NIC_SELECTION_VARS]: VLLM_GPU_NIC_PCIE_MAPPING is set without VLLM_NIC_SELECTION_VARS, which fails vLLM EngineCore init. Fix: set VLLM_GPU_NIC_PCIE_MAPPING (whole rail table) and VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1 together.`,
        ]);
    });
    it("a map that pairs GPU1 with mlx5_1's neighbour by index, and leaves GPUs out", async () => {
        // GPU1 (0000:43:00.0) is on mlx5_3 (0000:40:00.0) on DGX H200, not the next PCI function in index order.
        const rs = prefill((m) => setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", "0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:4f:00.0"));
        const msgs = await violations([nicMapPerRank], rs);
        expect(msgs[0]).toBe(
            `${P}.env[VLLM_GPU_NIC_PCIE_MAPPING]: maps GPU 0000:43:00.0 to 0000:4f:00.0 (mlx5_4) but pool h200's rail table pairs it with 0000:40:00.0 (mlx5_3). Fix: set VLLM_GPU_NIC_PCIE_MAPPING (whole rail table) and VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1 together.`,
        );
        expect(msgs[1]).toBe(
            `${P}.env[VLLM_GPU_NIC_PCIE_MAPPING]: does not cover GPU(s) 0000:52:00.0, 0000:61:00.0, 0000:9d:00.0, 0000:c3:00.0, 0000:d1:00.0, 0000:df:00.0 of pool h200; a rank placed there gets no affine NIC. Fix: set VLLM_GPU_NIC_PCIE_MAPPING (whole rail table) and VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1 together.`,
        );
        expect(msgs).toHaveLength(2);
    });
    it("TP>1 on a single pinned NIC without the pair", async () => {
        const rs = prefill((m) => {
            setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", undefined);
            setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined);
            setEnv(m, "UCX_NET_DEVICES", "mlx5_0:1");
        });
        expect(await violations([nicMapPerRank], rs)).toEqual([
            `${P}.env[UCX_NET_DEVICES]: 2 GPUs (TP ranks) share 1 NIC(s) (UCX_NET_DEVICES=mlx5_0:1); every rank needs its PCIe-affine NIC. Fix: set VLLM_GPU_NIC_PCIE_MAPPING (whole rail table) and VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1 together.`,
        ]);
    });
});

describe("rdma-memlock-path and rdma-ipc-lock", () => {
    it("compliant: root + IPC_LOCK + ulimit on a plain pool; non-root on a LimitMEMLOCK=infinity pool", async () => {
        expect(await violations([rdmaMemlockPath, rdmaIpcLock], stack())).toEqual([]);
        expect(await violations([rdmaMemlockPath, rdmaIpcLock], stack([endpoint()], { memlockUnlimited: true }))).toEqual([]);
    });
    it("IPC_LOCK without root on a pool without LimitMEMLOCK=infinity (nvidia-container-toolkit#2037)", async () => {
        const rs = prefill((m) => {
            m.securityContext = { capabilities: { add: ["IPC_LOCK"] } };
        });
        expect(await violations([rdmaMemlockPath], rs)).toEqual([
            `${P}.securityContext: has no working memlock path: it runs as the image's default user (Dynamo runtime images: UID 1000), not root, and pool h200 does not declare LimitMEMLOCK=infinity. Fix: run as root (runAsUser: 0) with IPC_LOCK and SYS_RESOURCE and start with ulimit -l unlimited, or use a pool with memlockUnlimited: true.`,
        ]);
    });
    it("root without ulimit in the entrypoint, and without IPC_LOCK", async () => {
        const rs = prefill((m) => {
            m.command = ["python3", "-m", "dynamo.vllm"];
            m.securityContext = { runAsUser: 0 };
        });
        expect(await violations([rdmaMemlockPath, rdmaIpcLock], rs)).toEqual([
            `${P}.securityContext: has no working memlock path: it does not add IPC_LOCK, its entrypoint does not run ulimit -l unlimited, and pool h200 does not declare LimitMEMLOCK=infinity. Fix: run as root (runAsUser: 0) with IPC_LOCK and SYS_RESOURCE and start with ulimit -l unlimited, or use a pool with memlockUnlimited: true.`,
            `${P}.securityContext.capabilities.add: does not add IPC_LOCK. Fix: add IPC_LOCK to securityContext.capabilities.add.`,
        ]);
    });
});

describe("rdma-fabric-addressing", () => {
    // openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c: UCX_IB_IS_GLOBAL=y, or the deprecated UCX_IB_ADDR_TYPE ib_global /
    // ib_site_local, sets force_global_addr; auto, ib_local and eth leave an InfiniBand port LID-only.
    it("compliant: UCX_IB_IS_GLOBAL=y on InfiniBand (the rendered env)", async () => {
        expect(await violations([rdmaFabricAddressing], stack())).toEqual([]);
    });
    it("InfiniBand without UCX_IB_IS_GLOBAL", async () => {
        const rs = prefill((m) => setEnv(m, "UCX_IB_IS_GLOBAL", undefined));
        expect(await violations([rdmaFabricAddressing], rs)).toEqual([
            `${P}.env[UCX_IB_IS_GLOBAL]: UCX_IB_IS_GLOBAL is unset on InfiniBand pool h200, so UCX does not force global (GRH) addressing: an InfiniBand port with a link-local subnet prefix is addressed by LID only. Fix: set UCX_IB_IS_GLOBAL=y.`,
        ]);
    });
    it("UCX_IB_IS_GLOBAL=n and UCX_IB_ADDR_TYPE=auto force nothing", async () => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_IB_IS_GLOBAL", "n");
            setEnv(m, "UCX_IB_ADDR_TYPE", "auto");
        });
        expect(await violations([rdmaFabricAddressing], rs)).toEqual([
            `${P}.env[UCX_IB_IS_GLOBAL]: UCX_IB_IS_GLOBAL=n and UCX_IB_ADDR_TYPE=auto (forces global only as ib_global or ib_site_local) on InfiniBand pool h200, so UCX does not force global (GRH) addressing: an InfiniBand port with a link-local subnet prefix is addressed by LID only. Fix: set UCX_IB_IS_GLOBAL=y.`,
        ]);
    });
    it("UCX_IB_ADDR_TYPE=eth (ai-dynamo/dynamo disagg-communication.md) is inert on InfiniBand", async () => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_IB_IS_GLOBAL", undefined);
            setEnv(m, "UCX_IB_ADDR_TYPE", "eth");
        });
        expect(await violations([rdmaFabricAddressing], rs)).toEqual([
            `${P}.env[UCX_IB_ADDR_TYPE]: UCX_IB_ADDR_TYPE=eth (forces global only as ib_global or ib_site_local) on InfiniBand pool h200, so UCX does not force global (GRH) addressing: an InfiniBand port with a link-local subnet prefix is addressed by LID only. Fix: set UCX_IB_IS_GLOBAL=y.`,
        ]);
    });
    it("UCX_IB_IS_GLOBAL=true is not a UCX bool (ucs_config_sscanf_bool)", async () => {
        const rs = prefill((m) => setEnv(m, "UCX_IB_IS_GLOBAL", "true"));
        expect(await violations([rdmaFabricAddressing], rs)).toHaveLength(1);
    });
    it.each([
        ["UCX_IB_ADDR_TYPE", "ib_global"],
        ["UCX_IB_ADDR_TYPE", "IB_SITE_LOCAL"],
        ["UCX_IB_IS_GLOBAL", "Yes"],
        ["UCX_IB_IS_GLOBAL", "1"],
    ])("accepted: %s=%s forces global addressing", async (name, value) => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_IB_IS_GLOBAL", undefined);
            setEnv(m, name, value);
        });
        expect(await violations([rdmaFabricAddressing], rs)).toEqual([]);
    });
    it("a RoCE pool: GID indexes for UCX and Mooncake (ai-dynamo/dynamo #814, sglang PR #30737)", async () => {
        const roce = { ...DGX, rails: DGX.rails.map((r) => ({ ...r, linkLayer: "Ethernet" as const })) };
        const rs = stack([endpoint()], { profile: roce });
        expect(await violations([rdmaFabricAddressing], rs)).toEqual([
            `${P}.env[UCX_IB_GID_INDEX]: UCX_IB_GID_INDEX is unset on RoCE pool h200, so UCX may pick a link-local GID and fail to create address handles. Fix: set UCX_IB_GID_INDEX to the routable RoCEv2 GID index.`,
            `${P}.env[MC_GID_INDEX]: MC_GID_INDEX is unset on RoCE pool h200; Mooncake's automatic GID selection returns NULL on bonded RoCE NICs. Fix: set MC_GID_INDEX to the routable RoCEv2 GID index.`,
            `${D}.env[UCX_IB_GID_INDEX]: UCX_IB_GID_INDEX is unset on RoCE pool h200, so UCX may pick a link-local GID and fail to create address handles. Fix: set UCX_IB_GID_INDEX to the routable RoCEv2 GID index.`,
            `${D}.env[MC_GID_INDEX]: MC_GID_INDEX is unset on RoCE pool h200; Mooncake's automatic GID selection returns NULL on bonded RoCE NICs. Fix: set MC_GID_INDEX to the routable RoCEv2 GID index.`,
            `Deployment/llama-70b-mooncake-store container store field spec.template.spec.containers[0].env[MC_GID_INDEX]: MC_GID_INDEX is unset on RoCE pool h200; Mooncake's automatic GID selection returns NULL on bonded RoCE NICs. Fix: set MC_GID_INDEX to the routable RoCEv2 GID index.`,
        ]);
    });
});

describe("nccl-no-socket-fallback and nccl-ib-hca-rail-hcas (NCCL's own list syntax)", () => {
    it("compliant: NCCL_NET=IB, exact rail list", async () => {
        expect(await violations([ncclNoSocketFallback, ncclIbHcaRailHcas], stack())).toEqual([]);
    });
    it("NCCL_NET unset, Socket, and NCCL_IB_DISABLE=1", async () => {
        expect(
            await violations(
                [ncclNoSocketFallback],
                prefill((m) => setEnv(m, "NCCL_NET", undefined)),
            ),
        ).toEqual([
            `${P}.env[NCCL_NET]: NCCL_NET is unset, so NCCL silently falls back to the Socket transport when the RDMA plugin finds no device. Fix: set NCCL_NET=IB.`,
        ]);
        expect(
            await violations(
                [ncclNoSocketFallback],
                prefill((m) => {
                    setEnv(m, "NCCL_NET", "Socket");
                    setEnv(m, "NCCL_IB_DISABLE", "1");
                }),
            ),
        ).toEqual([
            `${P}.env[NCCL_NET]: NCCL_NET=Socket does not pin NCCL to the InfiniBand plugin. Fix: set NCCL_NET=IB.`,
            `${P}.env[NCCL_IB_DISABLE]: NCCL_IB_DISABLE=1 turns InfiniBand off, so NCCL uses sockets. Fix: set NCCL_IB_DISABLE=0 or remove it.`,
        ]);
    });
    it("prefix matching without '=', an exclusion list, and a frontend HCA", async () => {
        const hca = async (v: string) =>
            violations(
                [ncclIbHcaRailHcas],
                prefill((m) => setEnv(m, "NCCL_IB_HCA", v)),
            );
        const fix = `Fix: set NCCL_IB_HCA==${RAILS}.`;
        expect(await hca("mlx5_10:1,mlx5_11:1")).toEqual([]);
        expect(await hca("mlx5_1")).toEqual([`${P}.env[NCCL_IB_HCA]: entry mlx5_1 selects frontend NIC(s) mlx5_1 of pool h200. ${fix}`]);
        expect(await hca("mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_1")).toEqual([
            `${P}.env[NCCL_IB_HCA]: entry mlx5_1 selects frontend NIC(s) mlx5_1 of pool h200. ${fix}`,
        ]);
        expect(await hca("=mlx5_9:1,mlx5_1:1")).toEqual([
            `${P}.env[NCCL_IB_HCA]: entry mlx5_1:1 selects frontend NIC(s) mlx5_1 of pool h200. ${fix}`,
        ]);
        expect(await hca("^mlx5_1,mlx5_7")).toEqual([
            `${P}.env[NCCL_IB_HCA]: NCCL_IB_HCA=^mlx5_1,mlx5_7 is an exclusion list, so every other HCA (frontend, storage) stays selectable. ${fix}`,
        ]);
        expect(await hca("mlx5_")).toEqual([
            `${P}.env[NCCL_IB_HCA]: entry mlx5_ selects frontend NIC(s) mlx5_1, mlx5_7 of pool h200. ${fix}`,
        ]);
        // NCCL compares the port number: a port that is not 1, 2, ... selects nothing on that HCA
        for (const port of ["0", "x", "1.5", "-1"])
            expect(await hca(`=${RAILS.split(",")[0].split(":")[0]}:${port}`), port).toEqual([
                `${P}.env[NCCL_IB_HCA]: entry ${RAILS.split(",")[0].split(":")[0]}:${port} names no HCA port (ports are numbered from 1). ${fix}`,
            ]);
    });
    it("a prefix that matches several rail HCAs", async () => {
        const cis = stack([endpoint()], {
            profile: {
                ...DGX,
                rails: DGX.rails.map((r, i) => ({ ...r, hca: `mlx5_1${i}` })),
                frontend: DGX.frontend.map((f, i) => ({ ...f, hca: `mlx5_2${i}` })),
            },
        });
        const rs = edit(cis, "DynamoGraphDeployment", (o) => setEnv(mainOf(o, "prefill"), "NCCL_IB_HCA", "mlx5_1"));
        expect((await violations([ncclIbHcaRailHcas], rs))[0]).toBe(
            `${P}.env[NCCL_IB_HCA]: entry mlx5_1 is a prefix match and selects mlx5_10, mlx5_11, mlx5_12, mlx5_13, mlx5_14, mlx5_15, mlx5_16, mlx5_17 (NCCL matches prefixes without a leading '='). Fix: set NCCL_IB_HCA==mlx5_10:1,mlx5_11:1,mlx5_12:1,mlx5_13:1,mlx5_14:1,mlx5_15:1,mlx5_16:1,mlx5_17:1.`,
        );
    });
});

describe("no-hostpath-infiniband", () => {
    it("compliant: devices come from the device plugin", async () => {
        expect(await violations([noHostPathInfiniband], stack())).toEqual([]);
    });
    it("a Mooncake store mounting /dev/infiniband from the host (Mooncake's production reference does)", async () => {
        const rs = edit(
            stack(),
            "Deployment",
            (o) => {
                o.spec.template.spec.volumes.push({ name: "ib", hostPath: { path: "/dev/infiniband" } });
            },
            "llama-70b-mooncake-store",
        );
        expect(await violations([noHostPathInfiniband], rs)).toEqual([
            `Deployment/llama-70b-mooncake-store container store field spec.template.spec.volumes[ib].hostPath: mounts /dev/infiniband from the host. Fix: remove the hostPath volume and request the pool's RDMA resources.`,
        ]);
    });
});

describe("libfabric-requires-efa (ai-dynamo/nixl PR #833)", () => {
    it("compliant: UCX backend on InfiniBand", async () => {
        expect(await violations([libfabricRequiresEfa], stack())).toEqual([]);
    });
    it("SGLang selecting LIBFABRIC without EFA devices", async () => {
        const rs = edit(stack([endpoint({ engine: "sglang" })]), "DynamoGraphDeployment", (o) =>
            setEnv(mainOf(o, "decode"), "SGLANG_DISAGGREGATION_NIXL_BACKEND", "LIBFABRIC"),
        );
        expect(await violations([libfabricRequiresEfa], rs)).toEqual([
            `${D}.resources.limits[vpc.amazonaws.com/efa]: selects NIXL's LIBFABRIC backend but requests no EFA device, so libfabric falls back to the sockets provider. Fix: request vpc.amazonaws.com/efa in requests and limits.`,
        ]);
    });
});

describe("rdma-workload-on-rdma-pool", () => {
    it("compliant: pinned to h200, whose rails the NicClusterPolicy publishes, GPUDirect on", async () => {
        expect(await violations([rdmaWorkloadOnRdmaPool], stack())).toEqual([]);
    });
    it("not pinned to a pool", async () => {
        const rs = edit(stack(), "DynamoGraphDeployment", (o) => {
            o.spec.components[2].podTemplate.spec.nodeSelector = {};
        });
        expect(await violations([rdmaWorkloadOnRdmaPool], rs)).toEqual([
            `DynamoGraphDeployment/llama-70b container prefill/main field spec.components[2].podTemplate.spec.nodeSelector[inference-platform.io/pool]: is not pinned to a node pool, so it may land on nodes without RDMA devices or GPUDirect. Fix: set nodeSelector inference-platform.io/pool to one of h200.`,
        ]);
    });
    it("a pool without GPUDirect RDMA and a resource the plugin does not publish", async () => {
        let rs = edit(stack(), "DynamoGraphDeployment", (o) => {
            const m = mainOf(o, "prefill");
            m.resources.limits["rdma/shared_ib"] = "1";
            m.resources.requests["rdma/shared_ib"] = "1";
        });
        rs = rs.map((r) =>
            r.type === "kubernetes:helm.sh/v3:Release" && (r.inputs as any).chart === "gpu-operator"
                ? {
                      ...r,
                      inputs: { ...r.inputs, values: { driver: { enabled: true, kernelModuleType: "proprietary" } } },
                      outputs: { ...r.outputs, values: { driver: { enabled: true, kernelModuleType: "proprietary" } } },
                  }
                : r,
        );
        const msgs = await violations([rdmaWorkloadOnRdmaPool], rs);
        expect(msgs).toContain(
            `${P}.resources.limits[rdma/shared_ib]: rdma/shared_ib is not published by NicClusterPolicy nic-cluster-policy. Fix: request resources the plugin publishes (rdma/rail_0, rdma/rail_1, rdma/rail_2, rdma/rail_3, rdma/rail_4, rdma/rail_5, rdma/rail_6, rdma/rail_7).`,
        );
        expect(msgs).toContain(
            `${P}.resources.limits[nvidia.com/gpu]: the stack deploys no GPU Operator with GPUDirect RDMA for pool h200, so KV moves through host memory. Fix: deploy GpuOperator with gpuDirectRdma dmabuf (driver.kernelModuleType=open) or peermem (driver.rdma.enabled=true).`,
        );
    });
    it("no NicClusterPolicy in the stack", async () => {
        const rs = stack().filter((r) => !r.type.endsWith(":NicClusterPolicy"));
        expect((await violations([rdmaWorkloadOnRdmaPool], rs))[0]).toBe(
            `${P}.resources.limits[rdma/rail_0]: rdma/rail_0 is requested but the stack deploys no NicClusterPolicy (RDMA shared device plugin). Fix: deploy BackendFabric in the same stack.`,
        );
    });
});

describe("rdma-preflight-init-container", () => {
    it("compliant: every RDMA pod runs it with its resources", async () => {
        expect(await violations([rdmaPreflightInit], stack())).toEqual([]);
    });
    it("missing, and present without the rail resources", async () => {
        const missing = edit(stack(), "DynamoGraphDeployment", (o) => {
            o.spec.components[2].podTemplate.spec.initContainers = [];
        });
        expect(await violations([rdmaPreflightInit], missing)).toEqual([
            `${P.replace(".containers[0]", "")}.initContainers: pod has no rdma-preflight init container, so nothing proves at start that RDMA is usable. Fix: add the rdma-preflight init container running services/preflight/preflight.sh.`,
        ]);
        const bare = edit(stack(), "DynamoGraphDeployment", (o) => {
            o.spec.components[2].podTemplate.spec.initContainers[0].resources = { limits: { "nvidia.com/gpu": "2" } };
        });
        const msgs = await violations([rdmaPreflightInit], bare);
        expect(msgs).toEqual([
            `DynamoGraphDeployment/llama-70b container prefill/main field spec.components[2].podTemplate.spec.initContainers[0].resources.limits: rdma-preflight lacks rdma/rail_0, rdma/rail_1, rdma/rail_2, rdma/rail_3, rdma/rail_4, rdma/rail_5, rdma/rail_6, rdma/rail_7, so it cannot see the devices the workload will use. Fix: give the init container the workload's RDMA resources.`,
        ]);
    });
});

describe("rdma-cm-rail-networks (network-operator#953)", () => {
    it("compliant: verbs on InfiniBand need no secondary network", async () => {
        expect(await violations([rdmaCmRailNetworks], stack())).toEqual([]);
    });
    it("UCX over rdmacm without rail networks, then with them", async () => {
        const rs = prefill((m) => setEnv(m, "UCX_SOCKADDR_TLS_PRIORITY", "rdmacm"));
        const msgs = await violations([rdmaCmRailNetworks], rs);
        expect(msgs).toHaveLength(8);
        expect(msgs[1]).toBe(
            "DynamoGraphDeployment/llama-70b container prefill/main field spec.components[2].podTemplate.metadata.annotations[k8s.v1.cni.cncf.io/networks]: uses RDMA CM on rail 1 (mlx5_3) but the stack renders no network on its netdev ibp64s0. Fix: set platform:backend.railNetworks: true and attach inference/h200-rail-1.",
        );
        const nets = DGX.rails.map((r) =>
            k8s({
                apiVersion: "mellanox.com/v1alpha1",
                kind: "IPoIBNetwork",
                metadata: { name: `h200-rail-${r.rail}` },
                spec: { master: r.netdev, networkNamespace: "inference", ipam: "{}" },
            }),
        );
        const attached = edit([...rs, ...nets], "DynamoGraphDeployment", (o) => {
            o.spec.components[2].podTemplate.metadata.annotations = {
                "k8s.v1.cni.cncf.io/networks": DGX.rails.map((r) => `inference/h200-rail-${r.rail}`).join(","),
            };
        });
        expect(await violations([rdmaCmRailNetworks], attached)).toEqual([]);
    });
    it("an IPoIBNetwork without networkNamespace puts its NAD in default: naming it in the pod's namespace attaches nothing", async () => {
        const rs = prefill((m) => setEnv(m, "UCX_SOCKADDR_TLS_PRIORITY", "rdmacm"));
        const nets = DGX.rails.map((r) =>
            k8s({
                apiVersion: "mellanox.com/v1alpha1",
                kind: "IPoIBNetwork",
                metadata: { name: `h200-rail-${r.rail}` },
                spec: { master: r.netdev, ipam: "{}" },
            }),
        );
        const annotate = (value: string) =>
            edit([...rs, ...nets], "DynamoGraphDeployment", (o) => {
                o.spec.components[2].podTemplate.metadata.annotations = { "k8s.v1.cni.cncf.io/networks": value };
            });
        const inPodNs = await violations([rdmaCmRailNetworks], annotate(DGX.rails.map((r) => `h200-rail-${r.rail}`).join(",")));
        expect(inPodNs).toHaveLength(8);
        expect(inPodNs[0]).toContain(
            "the annotation names inference/h200-rail-0, but the operator creates that NetworkAttachmentDefinition in default, so Multus attaches nothing on ibp24s0. Fix: attach network default/h200-rail-0.",
        );
        expect(await violations([rdmaCmRailNetworks], annotate(DGX.rails.map((r) => `default/h200-rail-${r.rail}`).join(",")))).toEqual([]);
    });
});

describe("workload shapes beyond DGDs", () => {
    it("a StatefulSet and a LeaderWorkerSet running NIXL are checked like DGD workers", async () => {
        const pod = (name: string) => ({
            spec: {
                containers: [
                    {
                        name,
                        image: `${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version}`,
                        command: ["python3", "-m", "dynamo.vllm"],
                        args: ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'],
                        resources: { limits: { "nvidia.com/gpu": "1" } },
                    },
                ],
            },
        });
        const sts = k8s({
            apiVersion: "apps/v1",
            kind: "StatefulSet",
            metadata: { name: "kv", namespace: "inference" },
            spec: { selector: {}, serviceName: "kv", template: pod("engine") },
        });
        const lws = k8s({
            apiVersion: "leaderworkerset.x-k8s.io/v1",
            kind: "LeaderWorkerSet",
            metadata: { name: "lws", namespace: "inference" },
            spec: { leaderWorkerTemplate: { size: 2, leaderTemplate: pod("leader"), workerTemplate: pod("worker") } },
        });
        const msgs = await violations([rdmaResourcePerGpu], [...poolPatches(), sts, lws]);
        expect(msgs).toEqual([
            "StatefulSet/kv container engine field spec.template.spec.containers[0].resources: requests no RDMA device (rdma/*, vpc.amazonaws.com/efa) for 1 GPU(s), so NIXL/UCX, Mooncake and NCCL fall back to TCP without an error. Fix: request the pool's rail resources (rdma/rail_<i>: 1 each) in both requests and limits.",
            "LeaderWorkerSet/lws container leader/leader field spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].resources: requests no RDMA device (rdma/*, vpc.amazonaws.com/efa) for 1 GPU(s), so NIXL/UCX, Mooncake and NCCL fall back to TCP without an error. Fix: request the pool's rail resources (rdma/rail_<i>: 1 each) in both requests and limits.",
            "LeaderWorkerSet/lws container worker/worker field spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources: requests no RDMA device (rdma/*, vpc.amazonaws.com/efa) for 1 GPU(s), so NIXL/UCX, Mooncake and NCCL fall back to TCP without an error. Fix: request the pool's rail resources (rdma/rail_<i>: 1 each) in both requests and limits.",
        ]);
    });
    it("frontends, planners, the Mooncake master and init containers are out of scope", async () => {
        const rs = edit(stack(), "DynamoGraphDeployment", (o) => {
            for (const n of ["Frontend", "Planner"]) setEnv(mainOf(o, n), "UCX_TLS", "tcp");
        });
        expect(await violations([ucxTlsRdmaNoTcp, rdmaResourcePerGpu], rs)).toEqual([]);
    });
    it("setArg helper keeps flags and values together", () => {
        const c = { args: ["--a", "1"] };
        setArg(c, "--b", "2");
        setArg(c, "--a", undefined);
        expect(c.args).toEqual(["--b", "2"]);
    });
});

describe("EKS / EFA pools", () => {
    /**
     * An EFA node group, the platform (on-prem GPU Operator, or the EKS one whose driver is off), and the generated
     * EFA graph. `amiType` unset: the node group names none.
     */
    const efaStack = (withPlugin: boolean, o: { amiType?: string; eksOperator?: boolean } = {}) => {
        const fabric = { kind: "efa" as const, profile: "p5en-48xlarge", devicesPerGpu: 2, devicesPerNode: 16, gpusPerNode: 8 };
        const pool = {
            name: "p5en",
            nodeSelector: { "inference-platform.io/pool": "p5en" },
            tolerations: [{ key: "nvidia.com/gpu", operator: "Equal" as const, value: "present", effect: "NoSchedule" }],
            memlockUnlimited: true,
            fabric,
            hugepages2MiPerNode: 5128,
        };
        const dgd = buildDgd({
            endpoint: endpoint({ kvPool: { kind: "none" } }),
            namespace: "inference",
            pool,
            runtimeImage: `${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version}`,
            plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 0,
        });
        const ng = res("aws:eks/nodeGroup:NodeGroup", "p5en", {
            labels: {
                "inference-platform.io/pool": "p5en",
                "inference-platform.io/fabric": "efa",
                "inference-platform.io/memlock-unlimited": "true",
            },
            scalingConfig: { desiredSize: 2 },
            ...(o.amiType ? { amiType: o.amiType } : {}),
        });
        const base = platform().filter(
            (r) => !r.type.endsWith(":NicClusterPolicy") && !(o.eksOperator && (r.inputs as any).chart === "gpu-operator"),
        );
        const rs = [ng, ...base, k8s(dgd)];
        if (o.eksOperator)
            rs.push(res("kubernetes:helm.sh/v3:Release", "gpu-operator", { chart: "gpu-operator", values: eksGpuOperatorValues() }));
        if (withPlugin) rs.push(res("kubernetes:helm.sh/v3:Release", "efa-plugin", { chart: "aws-efa-k8s-device-plugin", values: {} }));
        return rs;
    };
    it("the generated EFA graph (LIBFABRIC, FI_PROVIDER=efa, privileged, P/D anti-affinity, huge pages) passes these rules and policies/efa.ts's workload rules", async () => {
        expect(await violations([...rdmaWorkloadPolicies, efaWorkloadTransport, efaWorkloadHugepages], efaStack(true))).toEqual([]);
    });
    it("GPUDirect on EKS comes from the accelerated NVIDIA AMI when the GPU Operator's driver is off (compliant)", async () => {
        expect(await violations([rdmaWorkloadOnRdmaPool], efaStack(true, { amiType: "AL2023_x86_64_NVIDIA", eksOperator: true }))).toEqual(
            [],
        );
    });
    it("an EFA pool on a non-NVIDIA AMI with the GPU Operator's driver off has no GPUDirect", async () => {
        const msg = (c: string) =>
            `${c}.resources.limits[nvidia.com/gpu]: EFA pool p5en runs no EKS accelerated NVIDIA AMI and the stack deploys no GPU Operator driver with GPUDirect RDMA, so KV moves through host memory. Fix: use amiType AL2023_x86_64_NVIDIA for the node group (components/spoke/EfaNodeGroup.ts), or a GpuOperator driver with DMA-BUF.`;
        expect(
            await violations([rdmaWorkloadOnRdmaPool], efaStack(true, { amiType: "AL2023_x86_64_STANDARD", eksOperator: true })),
        ).toEqual([msg(P), msg(D)]);
        expect(await violations([rdmaWorkloadOnRdmaPool], efaStack(true, { eksOperator: true }))).toEqual([msg(P), msg(D)]);
    });
    it("an EFA pool whose device plugin the stack does not deploy", async () => {
        expect(await violations([rdmaWorkloadOnRdmaPool], efaStack(false))).toEqual([
            `${P}.resources.limits[vpc.amazonaws.com/efa]: pool p5en is EFA but the stack deploys no aws-efa-k8s-device-plugin, so vpc.amazonaws.com/efa is never advertised. Fix: deploy the EFA device plugin chart in the same stack.`,
            `${D}.resources.limits[vpc.amazonaws.com/efa]: pool p5en is EFA but the stack deploys no aws-efa-k8s-device-plugin, so vpc.amazonaws.com/efa is never advertised. Fix: deploy the EFA device plugin chart in the same stack.`,
        ]);
    });
});
