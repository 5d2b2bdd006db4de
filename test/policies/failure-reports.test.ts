/**
 * Failure reports from upstream issue trackers, pull requests and guides (Dynamo, NIXL, UCX, Mooncake, vLLM, SGLang,
 * the NVIDIA RDMA device plugin and network operator) that a static check can catch, reproduced as the configuration that triggered it and run through the whole pack (tools/policy-runner.ts).
 * Each test names the report and asserts which rule stops it. Reports with no static trigger on our manifests are
 * listed at the end of the file with the reason.
 */
import { versions } from "../../config/versions";
import { describe, expect, it } from "vitest";
import type { Policy } from "@pulumi/policy";
import { allPolicies } from "../../policies/policies";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { DGX, edit, endpoint, k8s, mainOf, poolPatches, setArg, setEnv, stack } from "./rdma-fixtures";

/** Equal TP on prefill and decode: one Mooncake store pool keys blocks by tp_rank, not TP size (upstream/check/endpoint-support.ts). */
const EQUAL_TP = { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } };
/** The compliant baseline every report mutates. */
const baseline = () => stack([endpoint({ topology: EQUAL_TP })]);

/** Names of the policies that report a mandatory violation. */
async function fired(rs: CapturedResource[], policies: Policy[] = allPolicies): Promise<string[]> {
    const r = await runPolicies(policies, rs);
    return [...new Set(r.mandatory.map((f) => f.policyName))].sort();
}

const prefill = (fn: (m: Record<string, any>) => void, rs = baseline()) =>
    edit(rs, "DynamoGraphDeployment", (o) => fn(mainOf(o, "prefill")));
const storeEdit = (fn: (c: Record<string, any>) => void) =>
    edit(baseline(), "Deployment", (o) => fn(o.spec.template.spec.containers[0]), "llama-70b-mooncake-store");
const release = (rs: CapturedResource[], chart: string, values: Record<string, unknown>) =>
    rs.map((r) => ((r.inputs as any).chart === chart ? { ...r, outputs: { ...r.outputs, values } } : r));
const plugin = (rs: CapturedResource[], fn: (c: any, spec: any) => void) =>
    edit(rs, "NicClusterPolicy", (o) => {
        const c = JSON.parse(o.spec.rdmaSharedDevicePlugin.config);
        fn(c, o.spec);
        o.spec.rdmaSharedDevicePlugin.config = JSON.stringify(c);
    });

/** An EFA worker pod (Deployment) with UCX as NIXL's backend, as in ai-dynamo/nixl#909. */
function efaUcxWorker(): CapturedResource {
    return k8s({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "vllm-decode", namespace: "inference" },
        spec: {
            selector: {},
            template: {
                spec: {
                    containers: [
                        {
                            name: "main",
                            image: `${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version}`,
                            command: ["python3", "-m", "dynamo.vllm"],
                            args: [
                                "--disaggregation-mode",
                                "decode",
                                "--kv-transfer-config",
                                '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["UCX"]}}',
                            ],
                            resources: {
                                requests: { "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16" },
                                limits: { "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16" },
                            },
                        },
                    ],
                },
            },
        },
    });
}

describe("Dynamo failures seen in the field: deployment shape", () => {
    it("baseline: the generated graph trips no rule", async () => {
        expect(await fired(baseline())).toEqual([]);
    });
    it("ai-dynamo/dynamo PR #1314: worker image whose UCX was built without verbs (unvalidated tag)", async () => {
        expect(
            await fired(
                prefill((m) => {
                    m.image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.2.1";
                }),
            ),
        ).toContain("rdma-image-allowlisted");
    });
    it("ai-dynamo/dynamo #1209: UCX_NET_DEVICES=mlx5_bond_0:1", async () => {
        expect(await fired(prefill((m) => setEnv(m, "UCX_NET_DEVICES", "mlx5_bond_0:1")))).toContain("ucx-net-devices-rail-hcas");
    });
    it("ai-dynamo/dynamo #12463: UCX_NET_DEVICES unset and UCX_TLS with tcp on 8-HCA nodes", async () => {
        const f = await fired(
            prefill((m) => {
                setEnv(m, "UCX_NET_DEVICES", undefined);
                setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", undefined);
                setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined);
                setEnv(m, "UCX_TLS", "rc,cuda_copy,cuda_ipc,tcp");
            }),
        );
        expect(f).toEqual(expect.arrayContaining(["ucx-net-devices-rail-hcas", "ucx-tls-rdma-no-tcp"]));
    });
    it("ai-dynamo/dynamo PR #10852: UCX_NET_DEVICES=all on nodes with management/DPU NICs", async () => {
        expect(await fired(prefill((m) => setEnv(m, "UCX_NET_DEVICES", "all")))).toContain("ucx-net-devices-rail-hcas");
    });
    it("dynamo recipes/deepseek-v4 README + vllm PR #42083: all TP ranks on mlx5_0:1; mapping without selection vars", async () => {
        expect(
            await fired(
                prefill((m) => {
                    setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", undefined);
                    setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined);
                    setEnv(m, "UCX_NET_DEVICES", "mlx5_0:1");
                }),
            ),
        ).toContain("nic-map-per-rank");
        expect(await fired(prefill((m) => setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined)))).toContain("nic-map-per-rank");
    });
    it("ai-dynamo/dynamo #814 (nixl #201): RoCE pool without UCX_IB_GID_INDEX", async () => {
        const roce = { ...DGX, rails: DGX.rails.map((r) => ({ ...r, linkLayer: "Ethernet" as const })) };
        expect(await fired(stack([endpoint({ kvPool: { kind: "none" } })], { profile: roce }))).toContain("rdma-fabric-addressing");
    });
    it("ai-dynamo/nixl #909 and openucx/ucx#10950: vLLM on EFA keeping NIXL's UCX backend", async () => {
        expect(await fired([efaUcxWorker()])).toContain("efa-workload-transport");
    });
    it("ai-dynamo/nixl PR #833: LIBFABRIC selected without an EFA device (upstream disagg-tcp.yaml)", async () => {
        expect(
            await fired(
                prefill((m) =>
                    setArg(
                        m,
                        "--kv-transfer-config",
                        '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":{"backends":["LIBFABRIC"]}}',
                    ),
                ),
            ),
        ).toContain("libfabric-requires-efa");
    });
    it("ai-dynamo/nixl #1614: UCX_TLS=cuda_copy,cuda_ipc,tcp for inter-node reads", async () => {
        expect(await fired(prefill((m) => setEnv(m, "UCX_TLS", "cuda_copy,cuda_ipc,tcp")))).toContain("ucx-tls-rdma-no-tcp");
    });
    it("ai-dynamo/nixl PR #579/#610: an image with UCX 1.18 (not on the validated allow-list)", async () => {
        expect(
            await fired(
                prefill((m) => {
                    m.image = "registry.example/vllm-ucx118:1.0.0";
                }),
            ),
        ).toContain("rdma-image-allowlisted");
    });
    it("vllm-project/vllm #52607: NixlConnector pull mode on a worker without an RDMA resource", async () => {
        expect(
            await fired(
                prefill((m) => {
                    m.resources = { requests: { "nvidia.com/gpu": "2" }, limits: { "nvidia.com/gpu": "2" } };
                }),
            ),
        ).toContain("rdma-resource-per-gpu");
    });
    it("sgl-project/sglang PR #30737: Mooncake on RoCE without MC_GID_INDEX", async () => {
        const roce = { ...DGX, rails: DGX.rails.map((r) => ({ ...r, linkLayer: "Ethernet" as const })) };
        const r = await runPolicies(allPolicies, stack([endpoint({ engine: "sglang" })], { profile: roce }));
        expect(r.mandatory.some((f) => f.policyName === "rdma-fabric-addressing" && f.message.includes("MC_GID_INDEX is unset"))).toBe(
            true,
        );
    });
    it("vllm-project/vllm PR #44919: Mooncake device list empty (auto-discovery of every RNIC)", async () => {
        expect(await fired(storeEdit((c) => setEnv(c, "MOONCAKE_DEVICE", undefined)))).toContain("mooncake-devices-rail-hcas");
    });
    it("kvcache-ai/Mooncake #281/#1382, sgl-project/sglang #6193/#6894: no GPUDirect RDMA on the pool, memlock too low", async () => {
        const noGdr = release(baseline(), "gpu-operator", {
            driver: { enabled: true, kernelModuleType: "proprietary", rdma: { enabled: false } },
        });
        expect(await fired(noGdr)).toEqual(expect.arrayContaining(["gpudirect-rdma-enabled", "rdma-workload-on-rdma-pool"]));
        expect(
            await fired(
                storeEdit((c) => {
                    c.securityContext = { capabilities: { add: ["IPC_LOCK"] } };
                }),
            ),
        ).toContain("rdma-memlock-path");
    });
    it("openucx/ucx#8229: max locked memory 64 KB (non-root, no ulimit, no LimitMEMLOCK=infinity)", async () => {
        expect(
            await fired(
                prefill((m) => {
                    m.command = ["python3", "-m", "dynamo.vllm"];
                    m.securityContext = {};
                }),
            ),
        ).toEqual(expect.arrayContaining(["rdma-memlock-path", "rdma-ipc-lock"]));
    });
});

describe("Dynamo failures seen in the field: transport and KV", () => {
    it("vllm-project/vllm #35799: NIXL 0.10.0 image (unvalidated) on a worker", async () => {
        expect(
            await fired(
                prefill((m) => {
                    m.image = "vllm/vllm-openai:v0.11.0";
                }),
            ),
        ).toContain("rdma-image-allowlisted");
    });
    it("kvcache-ai/Mooncake #2070: protocol efa on a Mooncake wheel without USE_EFA", async () => {
        expect(await fired(storeEdit((c) => setEnv(c, "MOONCAKE_PROTOCOL", "efa")))).toContain("rdma-image-allowlisted");
    });
    it("openucx/ucx#9383: UCX_NET_DEVICES unset on a hostNetwork pod with bridge interfaces", async () => {
        const rs = edit(
            prefill((m) => {
                setEnv(m, "UCX_NET_DEVICES", undefined);
                setEnv(m, "VLLM_GPU_NIC_PCIE_MAPPING", undefined);
                setEnv(m, "VLLM_NIC_SELECTION_VARS", undefined);
            }),
            "DynamoGraphDeployment",
            (o) => {
                o.spec.components[2].podTemplate.spec.hostNetwork = true;
            },
        );
        expect(await fired(rs)).toContain("ucx-net-devices-rail-hcas");
    });
    it("NVIDIA/nvidia-container-toolkit#2037: IPC_LOCK on a UID 1000 container, node memlock 8 MiB", async () => {
        expect(
            await fired(
                prefill((m) => {
                    m.securityContext = { runAsUser: 1000, capabilities: { add: ["IPC_LOCK"] } };
                }),
            ),
        ).toEqual(["rdma-memlock-path"]);
    });
    it("NVIDIA/TensorRT-LLM PR #18373: UCX_TLS=tcp injected through an envFrom ConfigMap", async () => {
        const rs = stack([endpoint({ engine: "trtllm", kvPool: { kind: "none" } })]);
        const withCm = [
            ...prefill((m) => {
                setEnv(m, "UCX_TLS", undefined);
                m.envFrom = [{ configMapRef: { name: "host-ucx" } }];
            }, rs),
            k8s({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "host-ucx", namespace: "inference" }, data: { UCX_TLS: "tcp" } }),
        ];
        expect(await fired(withCm)).toContain("ucx-tls-rdma-no-tcp");
    });
    it("vllm-project/aibrix#1407: UCX_TLS=cuda_ipc,cuda_copy,tcp,rc", async () => {
        expect(await fired(prefill((m) => setEnv(m, "UCX_TLS", "cuda_ipc,cuda_copy,tcp,rc")))).toContain("ucx-tls-rdma-no-tcp");
    });
    it("ai-dynamo/dynamo nixlbench-deployment.yaml: the validation benchmark requests only nvidia.com/gpu", async () => {
        const bench = k8s({
            apiVersion: "apps/v1",
            kind: "Deployment",
            metadata: { name: "nixlbench", namespace: "default" },
            spec: {
                replicas: 2,
                selector: {},
                template: {
                    spec: {
                        containers: [
                            {
                                name: "nixlbench",
                                image: "nixlbench:latest",
                                command: [
                                    "nixlbench",
                                    "-etcd_endpoints",
                                    "etcd:2379",
                                    "--target_seg_type",
                                    "VRAM",
                                    "--initiator_seg_type",
                                    "VRAM",
                                ],
                                resources: { limits: { "nvidia.com/gpu": "1" } },
                            },
                        ],
                    },
                },
            },
        });
        expect(await fired([...poolPatches(), bench])).toEqual(
            expect.arrayContaining([
                "rdma-resource-per-gpu",
                "ucx-tls-rdma-no-tcp",
                "ucx-net-devices-rail-hcas",
                "rdma-workload-on-rdma-pool",
                "rdma-image-allowlisted",
            ]),
        );
    });
});

describe("RDMA failures seen in the field", () => {
    it("Mellanox/k8s-rdma-shared-dev-plugin#4: plugin before v1.0.0 with a selector not tied to a rail netdev", async () => {
        const rs = plugin(baseline(), (c, spec) => {
            spec.rdmaSharedDevicePlugin.version = "v0.9.0";
            c.configList[0].selectors.ifNames = [];
        });
        expect(await fired(rs)).toEqual(expect.arrayContaining(["rdma-device-plugin-version", "rdma-device-plugin-config"]));
    });
    it("Mellanox/network-operator#31: driver container with rescans disabled", async () => {
        const rs = plugin(baseline(), (c, spec) => {
            c.periodicUpdateInterval = 0;
            spec.ofedDriver = { upgradePolicy: { drain: { enable: true } } };
        });
        expect(await fired(rs)).toContain("rdma-device-plugin-config");
    });
    it("Mellanox/k8s-rdma-shared-dev-plugin#98: selector without linkTypes [infiniband]", async () => {
        expect(
            await fired(
                plugin(baseline(), (c) => {
                    c.configList[2].selectors.linkTypes = [];
                }),
            ),
        ).toContain("rdma-device-plugin-config");
    });
    it("Mellanox/k8s-rdma-shared-dev-plugin#48/#74/#79: plugin v1.3.2 (before PR #82)", async () => {
        expect(
            await fired(
                plugin(baseline(), (_c, spec) => {
                    spec.rdmaSharedDevicePlugin.version = "v1.3.2";
                }),
            ),
        ).toEqual(["rdma-device-plugin-version"]);
    });
    it("Mellanox/k8s-rdma-shared-dev-plugin#118: NIC driver upgrades without draining", async () => {
        expect(
            await fired(
                plugin(baseline(), (_c, spec) => {
                    spec.ofedDriver = { upgradePolicy: { autoUpgrade: true } };
                }),
            ),
        ).toEqual(["gpudirect-coordinated-upgrades"]);
    });
    it("Mellanox/network-operator#953: RDMA CM without a rail network", async () => {
        // Set on both roles (a prefill-only setting is also a pair difference, pd-kv-settings-match).
        expect(
            await fired(
                prefill(
                    (m) => setEnv(m, "UCX_SOCKADDR_TLS_PRIORITY", "rdmacm"),
                    edit(baseline(), "DynamoGraphDeployment", (o) => setEnv(mainOf(o, "decode"), "UCX_SOCKADDR_TLS_PRIORITY", "rdmacm")),
                ),
            ),
        ).toEqual(["rdma-cm-rail-networks"]);
    });
    it("NVIDIA/nccl#1676: GPUDirect RDMA not configured (GDR disabled with only an INFO line)", async () => {
        expect(await fired(baseline().filter((r) => (r.inputs as any).chart !== "gpu-operator"))).toEqual(
            expect.arrayContaining(["gpudirect-rdma-enabled", "rdma-workload-on-rdma-pool"]),
        );
    });
    it("NVIDIA/gpu-operator#2868: legacy peermem with auto-upgrading drivers and no drain", async () => {
        expect(
            await fired(
                release(baseline(), "gpu-operator", {
                    driver: { enabled: true, rdma: { enabled: true }, upgradePolicy: { autoUpgrade: true } },
                }),
            ),
        ).toEqual(["gpudirect-coordinated-upgrades"]);
    });
    it("NVIDIA/nccl#451: container without the HCA char devices, NCCL_NET unset (and NCCL_IB_DISABLE=1, hostPath /dev/infiniband)", async () => {
        const rs = edit(
            prefill((m) => {
                m.resources = { requests: { "nvidia.com/gpu": "2" }, limits: { "nvidia.com/gpu": "2" } };
                setEnv(m, "NCCL_NET", undefined);
                setEnv(m, "NCCL_IB_DISABLE", "1");
            }),
            "DynamoGraphDeployment",
            (o) => {
                o.spec.components[2].podTemplate.spec.volumes.push({ name: "ib", hostPath: { path: "/dev/infiniband" } });
            },
        );
        expect(await fired(rs)).toEqual(
            expect.arrayContaining(["rdma-resource-per-gpu", "nccl-no-socket-fallback", "no-hostpath-infiniband"]),
        );
    });
    it("kubernetes/kubernetes#3595 + nvidia-container-toolkit#2037: no rlimit, non-root GPU image", async () => {
        expect(
            await fired(
                storeEdit((c) => {
                    c.securityContext = {};
                }),
            ),
        ).toEqual(["rdma-ipc-lock", "rdma-memlock-path"]);
    });
    it("Also seen: aws-samples/aws-do-eks PR #63: hostPath /dev/infiniband next to the device plugin", async () => {
        const rs = edit(
            baseline(),
            "Deployment",
            (o) => {
                o.spec.template.spec.volumes.push({ name: "dev", hostPath: { path: "/dev" } });
            },
            "llama-70b-mooncake-store",
        );
        expect(await fired(rs)).toEqual(["no-hostpath-infiniband"]);
    });
    it("Also seen: vllm-project/vllm PR #42075: container without /dev/infiniband (no RDMA resource on the store)", async () => {
        expect(
            await fired(
                storeEdit((c) => {
                    c.resources = { requests: { memory: "528Gi" }, limits: { memory: "528Gi" } };
                }),
            ),
        ).toContain("rdma-resource-per-gpu");
    });
    it("Also seen: ome-projects/ome#837: injected UCX_TLS=tcp and UCX_NET_DEVICES=eth0", async () => {
        expect(
            await fired(
                prefill((m) => {
                    setEnv(m, "UCX_TLS", "tcp");
                    setEnv(m, "UCX_NET_DEVICES", "eth0");
                }),
            ),
        ).toEqual(expect.arrayContaining(["ucx-net-devices-rail-hcas", "ucx-tls-rdma-no-tcp"]));
    });
    it("Also seen: Mellanox/network-operator#1017: MacvlanNetwork on an IB master", async () => {
        const mac = k8s({
            apiVersion: "mellanox.com/v1alpha1",
            kind: "MacvlanNetwork",
            metadata: { name: "m" },
            spec: { master: "ibp64s0" },
        });
        expect(await fired([...baseline(), mac])).toEqual(["no-macvlan-on-infiniband"]);
    });
});

/*
 * Not statically catchable from our manifests (runtime-only or need facts the stack does not declare); the
 * preflight (services/preflight/preflight.sh) or a runtime check covers what it can:
 * - ai-dynamo/nixl #1656 (EFA SRD write emulation): provider capability; counters at runtime.
 * - sgl-project/sglang PR #23853 (pkey index 1): the stack config declares no IB partitions.
 * - Mellanox/k8s-rdma-shared-dev-plugin#192 (rdma_ucm not loaded): host modules; preflight sees no uverbs/rdma_cm.
 * - ray-project/ray PR #62339 (EFA detection by netdev): runtime detection logic.
 * - aws/eks-charts#1358, PR #1348, aws-samples/aws-efa-eks#8, sagemaker-hyperpod-cli PR #282: EKS plugin
 *   placement, covered by policies/efa.ts (efa-device-plugin-allowlist) for EKS stacks.
 */
