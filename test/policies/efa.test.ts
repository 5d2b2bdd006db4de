import { beforeAll, describe, expect, it } from "vitest";
import {
    efaGpuOperator,
    efaLaunchTemplate,
    efaPluginAllowlist,
    efaPolicies,
    efaWorkloadHugepages,
    efaWorkloadTransport,
} from "../../policies/efa";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke } from "../helpers";

let sg1: CapturedResource[];
beforeAll(async () => {
    sg1 = (await runHubAndSpoke("spoke-sg1")).spoke.resources;
});

/** sg1's graph with one resource type's inputs and outputs edited. */
function edit(
    type: string,
    fn: (o: Record<string, any>) => void,
    match: (r: CapturedResource) => boolean = () => true,
): CapturedResource[] {
    return sg1.map((r) => {
        if (r.type !== type || !match(r)) return r;
        const c = structuredClone(r);
        fn(c.outputs as Record<string, any>);
        fn(c.inputs as Record<string, any>);
        return c;
    });
}
const isChart = (chart: string) => (r: CapturedResource) => (r.inputs as any).chart === chart;
const messages = async (policy: Parameters<typeof runPolicies>[0], rs: CapturedResource[]) =>
    (await runPolicies(policy, rs)).mandatory.map((f) => f.message);

describe("EFA policies on the repo's EKS spoke (compliant)", () => {
    it("spoke-sg1 has no EFA findings", async () => {
        const report = await runPolicies(efaPolicies, sg1);
        expect(report.findings).toEqual([]);
    });
});

describe("policy efa-device-plugin-allowlist", () => {
    it("fails when the plugin allowlist lacks the pool's instance type", async () => {
        const rs = edit(
            "kubernetes:helm.sh/v3:Release",
            (o) => {
                o.values.supportedInstanceLabels.values = ["p5.48xlarge", "p5e.48xlarge"];
            },
            isChart("aws-efa-k8s-device-plugin"),
        );
        expect(await messages([efaPluginAllowlist], rs)).toEqual([
            "EFA node group h200: instance type(s) p5en.48xlarge are not in efa-device-plugin-release's supportedInstanceLabels.values (p5.48xlarge, p5e.48xlarge); the plugin DaemonSet would schedule 0 pods there and EFA traffic would fall back to TCP.",
        ]);
    });
    it("fails when the allowlist is left to the chart default, or the GPU taint is not tolerated", async () => {
        const noList = edit(
            "kubernetes:helm.sh/v3:Release",
            (o) => {
                delete o.values.supportedInstanceLabels;
            },
            isChart("aws-efa-k8s-device-plugin"),
        );
        expect((await messages([efaPluginAllowlist], noList)).join("\n")).toMatch(/supportedInstanceLabels.values is not set/);
        const noTol = edit(
            "kubernetes:helm.sh/v3:Release",
            (o) => {
                o.values.tolerations = [];
            },
            isChart("aws-efa-k8s-device-plugin"),
        );
        expect((await messages([efaPluginAllowlist], noTol)).join("\n")).toMatch(
            /tainted nvidia.com\/gpu; Helm release efa-device-plugin-release does not tolerate it/,
        );
    });
    it("fails when no plugin is deployed", async () => {
        const rs = sg1.filter((r) => !isChart("aws-efa-k8s-device-plugin")(r));
        expect((await messages([efaPluginAllowlist], rs)).join("\n")).toMatch(/no aws-efa-k8s-device-plugin Helm release/);
    });
});

describe("policy efa-node-group-launch-template", () => {
    const lt = "aws:ec2/launchTemplate:LaunchTemplate";
    // Only the GPU group's template (the system node group has its own, without EFA interfaces).
    const efaLt = (r: CapturedResource) => r.name === "nodes-h200-lt";
    it("fails when a card is missing or card 0 is EFA-only primary", async () => {
        const fewer = edit(
            lt,
            (o) => {
                o.networkInterfaces = o.networkInterfaces.slice(0, 9);
            },
            efaLt,
        );
        expect((await messages([efaLaunchTemplate], fewer)).join("\n")).toMatch(
            /8 EFA interfaces for 16 network cards of p5en.48xlarge; card 8 \/ device 0 must be efa-only/,
        );
        const badPrimary = edit(
            lt,
            (o) => {
                o.networkInterfaces[0].interfaceType = "efa-only";
            },
            efaLt,
        );
        expect((await messages([efaLaunchTemplate], badPrimary)).join("\n")).toMatch(/card 0 \/ device 0 must be the ENA primary/);
    });
    it("fails without LimitMEMLOCK=infinity in the bootstrap, or without a placement group", async () => {
        const noMemlock = edit(
            lt,
            (o) => {
                o.userData = Buffer.from(
                    Buffer.from(o.userData, "base64").toString().replace("LimitMEMLOCK=infinity", "LimitNOFILE=1048576"),
                ).toString("base64");
            },
            efaLt,
        );
        expect((await messages([efaLaunchTemplate], noMemlock)).join("\n")).toMatch(/does not set containerd LimitMEMLOCK=infinity/);
        const noPg = edit(
            lt,
            (o) => {
                delete o.placement.groupName;
            },
            efaLt,
        );
        expect((await messages([efaLaunchTemplate], noPg)).join("\n")).toMatch(/no placement group/);
    });
    it("fails when the group spans several subnets", async () => {
        const rs = edit(
            "aws:eks/nodeGroup:NodeGroup",
            (o) => {
                o.subnetIds = ["a", "b"];
            },
            (r) => (r.inputs as any).nodeGroupNamePrefix === "h200-",
        );
        expect((await messages([efaLaunchTemplate], rs)).join("\n")).toMatch(/uses 2 subnets/);
    });
});

describe("policy efa-gpu-operator-mofed-disabled", () => {
    it("fails when the NVIDIA device plugin keeps MOFED_ENABLED on", async () => {
        const rs = edit(
            "kubernetes:helm.sh/v3:Release",
            (o) => {
                o.values.devicePlugin = {};
            },
            isChart("gpu-operator"),
        );
        expect((await messages([efaGpuOperator], rs)).join("\n")).toMatch(/lacks MOFED_ENABLED=false/);
    });
});

// ------------------------------------------------------------ workloads on the EFA pool

interface Worker {
    env?: Record<string, string>;
    resources?: Record<string, string>;
    privileged?: boolean;
    antiAffinityKey?: string | null;
    args?: string[];
}

/** A disaggregated SGLang DGD (v1beta1 shape) on pool h200 whose prefill/decode workers are built from `w`. */
function dgd(w: Worker = {}): CapturedResource {
    const env = w.env ?? {
        FI_PROVIDER: "efa",
        FI_EFA_USE_DEVICE_RDMA: "1",
        NCCL_NET: "Libfabric",
        SGLANG_DISAGGREGATION_NIXL_BACKEND: "LIBFABRIC",
    };
    const res = w.resources ?? { "nvidia.com/gpu": "2", "vpc.amazonaws.com/efa": "4", "hugepages-2Mi": "2564Mi", cpu: "2" };
    const component = (name: string, other: string) => ({
        name,
        type: name,
        podTemplate: {
            spec: {
                nodeSelector: { "inference-platform.io/pool": "h200" },
                ...(w.antiAffinityKey === null
                    ? {}
                    : {
                          affinity: {
                              podAntiAffinity: {
                                  requiredDuringSchedulingIgnoredDuringExecution: [
                                      {
                                          labelSelector: { matchLabels: { [w.antiAffinityKey ?? "nvidia.com/dynamo-component"]: other } },
                                          topologyKey: "kubernetes.io/hostname",
                                      },
                                  ],
                              },
                          },
                      }),
                containers: [
                    {
                        name: "main",
                        image: "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.0.0-efa",
                        args: w.args ?? ["--disaggregation-mode", name, "--disaggregation-transfer-backend", "nixl"],
                        env: Object.entries(env).map(([n, value]) => ({ name: n, value })),
                        resources: { requests: res, limits: res },
                        securityContext: { privileged: w.privileged ?? true },
                    },
                ],
            },
        },
    });
    const obj = {
        apiVersion: "nvidia.com/v1beta1",
        kind: "DynamoGraphDeployment",
        metadata: { name: "qwen3-32b", namespace: "inference" },
        spec: { components: [component("prefill", "decode"), component("decode", "prefill")] },
    };
    return {
        urn: "urn:pulumi:spoke-sg1::platform::kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment::qwen3-32b",
        type: "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment",
        name: "qwen3-32b",
        parent: "",
        provider: "",
        custom: true,
        remote: false,
        dependencies: [],
        inputs: obj,
        outputs: obj,
    };
}
const workloadMessages = async (w: Worker) => messages([efaWorkloadTransport], [...sg1, dgd(w)]);

describe("policy efa-workload-transport", () => {
    it("passes a LIBFABRIC/EFA worker pair with dynamo-component anti-affinity (compliant)", async () => {
        expect(await workloadMessages({})).toEqual([]);
        expect((await runPolicies([efaWorkloadHugepages], [...sg1, dgd()])).findings).toEqual([]);
    });
    it("fails NIXL on UCX over EFA (software emulation)", async () => {
        const msgs = await workloadMessages({
            env: { FI_PROVIDER: "efa", SGLANG_DISAGGREGATION_NIXL_BACKEND: "UCX", UCX_TLS: "srd,cuda_copy" },
        });
        expect(msgs.filter((m) => /SGLANG_DISAGGREGATION_NIXL_BACKEND=UCX: NIXL's UCX backend on EFA/.test(m))).toHaveLength(2);
        expect(msgs.filter((m) => /UCX on EFA \(UCX_TLS=srd,cuda_copy\) without UCX_PROTO_EMULATION_ENABLE=n/.test(m))).toHaveLength(2);
    });
    it("fails vLLM whose kv-transfer-config keeps the default UCX backend", async () => {
        const msgs = await workloadMessages({
            args: ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'],
            env: { FI_PROVIDER: "efa" },
        });
        expect(msgs.join("\n")).toMatch(/vLLM --kv-transfer-config selects NIXL backends \[\]; on EFA it must be \["LIBFABRIC"\]/);
    });
    it("fails the sockets/tcp libfabric provider and an unset FI_PROVIDER", async () => {
        for (const p of ["sockets", "tcp"]) {
            const msgs = await workloadMessages({ env: { FI_PROVIDER: p, SGLANG_DISAGGREGATION_NIXL_BACKEND: "LIBFABRIC" } });
            expect(msgs).toContain(
                `qwen3-32b component prefill container main: FI_PROVIDER is "${p}"; it must be efa, or libfabric picks the sockets (TCP) provider and NIXL logs "TCP fallback" at INFO (ai-dynamo/nixl PR #833).`,
            );
        }
        expect((await workloadMessages({ env: { SGLANG_DISAGGREGATION_NIXL_BACKEND: "LIBFABRIC" } })).join("\n")).toMatch(
            /FI_PROVIDER is unset/,
        );
    });
    it("passes EFA devices and huge pages given in limits only (class 6: kubernetes pkg/apis/core/v1/defaults.go SetDefaults_Pod defaults requests to limits)", async () => {
        const limitsOnly = (o: CapturedResource): CapturedResource => {
            const c = structuredClone(o);
            for (const x of [c.inputs, c.outputs] as any[])
                for (const comp of x.spec.components)
                    for (const ct of comp.podTemplate.spec.containers) ct.resources = { limits: ct.resources.limits };
            return c;
        };
        const rs = [...sg1, limitsOnly(dgd())];
        expect(await messages([efaWorkloadTransport, efaWorkloadHugepages], rs)).toEqual([]);
    });
    it("fails a worker without the EFA resource", async () => {
        const msgs = await workloadMessages({ resources: { "nvidia.com/gpu": "2" } });
        expect(msgs).toContain(
            "qwen3-32b component decode container main: runs on an EFA pool but does not limit vpc.amazonaws.com/efa (a limit alone is enough: Kubernetes sets the request to it); without it no EFA device is injected and NIXL/NCCL fall back to TCP.",
        );
    });
    it("fails NCCL on sockets and a non-privileged worker", async () => {
        const msgs = await workloadMessages({
            env: { FI_PROVIDER: "efa", SGLANG_DISAGGREGATION_NIXL_BACKEND: "LIBFABRIC", NCCL_NET: "Socket" },
            privileged: false,
        });
        expect(msgs.join("\n")).toMatch(/NCCL_NET=Socket on EFA/);
        expect(msgs.join("\n")).toMatch(/not privileged; on EFA, IPC_LOCK alone is insufficient/);
    });
    it("fails prefill/decode without anti-affinity, or keyed on app.kubernetes.io/component", async () => {
        expect(
            (await workloadMessages({ antiAffinityKey: null })).filter((m) =>
                /no required podAntiAffinity on nvidia.com\/dynamo-component/.test(m),
            ),
        ).toHaveLength(2);
        expect(
            (await workloadMessages({ antiAffinityKey: "app.kubernetes.io/component" })).filter((m) =>
                /no required podAntiAffinity/.test(m),
            ),
        ).toHaveLength(2);
    });
});

describe("policy efa-workload-hugepages (mandatory: the generator requests huge pages)", () => {
    it("is mandatory", () => {
        expect(efaWorkloadHugepages.enforcementLevel).toBe("mandatory");
    });
    it("passes the repo's EKS spoke, whose generated workers request hugepages-2Mi with a cpu request (compliant)", async () => {
        expect((await runPolicies([efaWorkloadHugepages], sg1)).findings).toEqual([]);
    });
    it("fails workers without hugepages-2Mi", async () => {
        const r = await runPolicies(
            [efaWorkloadHugepages],
            [...sg1, dgd({ resources: { "nvidia.com/gpu": "2", "vpc.amazonaws.com/efa": "4", cpu: "2" } })],
        );
        expect(r.mandatory.map((f) => f.message)).toEqual([
            "qwen3-32b component prefill container main: no hugepages-2Mi request on an EFA pool; the EFA provider's huge pages are not accounted to the pod.",
            "qwen3-32b component decode container main: no hugepages-2Mi request on an EFA pool; the EFA provider's huge pages are not accounted to the pod.",
        ]);
    });
    it("fails huge pages the API server would refuse: without cpu or memory", async () => {
        const msgs = await messages(
            [efaWorkloadHugepages],
            [...sg1, dgd({ resources: { "nvidia.com/gpu": "2", "vpc.amazonaws.com/efa": "4", "hugepages-2Mi": "2564Mi" } })],
        );
        expect(msgs).toEqual([
            'qwen3-32b component prefill container main: requests hugepages-2Mi without cpu or memory; the API server refuses the pod ("HugePages require cpu or memory").',
            'qwen3-32b component decode container main: requests hugepages-2Mi without cpu or memory; the API server refuses the pod ("HugePages require cpu or memory").',
        ]);
    });
    it("fails huge pages whose request differs from the limit", async () => {
        const rs = edit("kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment", (o) => {
            for (const c of o.spec.components)
                if (c.type === "decode") c.podTemplate.spec.containers[0].resources.limits["hugepages-2Mi"] = "10256Mi";
        });
        expect(await messages([efaWorkloadHugepages], rs)).toEqual([
            "endpoint-qwen3-32b-dgd component decode container main: hugepages-2Mi request 5128Mi differs from its limit 10256Mi; huge pages cannot be overcommitted, so the API server refuses the pod.",
        ]);
    });
});

describe("EFA policies on an InfiniBand spoke", () => {
    it("leave spoke-hn1 alone", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1");
        expect((await runPolicies(efaPolicies, spoke.resources)).findings).toEqual([]);
    });
});
