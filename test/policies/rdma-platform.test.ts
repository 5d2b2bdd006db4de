import { describe, expect, it } from "vitest";
import { versions } from "../../config/versions";
import { cmpSemver, semver } from "../../policies/lib/semver";
import { rdmaSharedDevicePluginMinimum } from "../../upstream/rdma-device-plugin";
import { allowedImage, ALLOWED_RDMA_IMAGES, splitImage } from "../../policies/lib/images";
import {
    gpudirectCoordinatedUpgrades,
    noGpuUtilisationAutoscaling,
    noMacvlanOnInfiniband,
    rdmaDevicePluginConfig,
    rdmaDevicePluginVersion,
    rdmaHcaMaxFitsPods,
    rdmaImageAllowlisted,
    rdmaPlatformPolicies,
} from "../../policies/rdma-platform";
import type { CapturedResource } from "../../tools/harness";
import { edit, k8s, mainOf, stack, violations } from "./rdma-fixtures";

const NCP = "NicClusterPolicy/nic-cluster-policy";

/** Edits the parsed plugin config of the fixture's NicClusterPolicy. */
function pluginConfig(rs: CapturedResource[], fn: (cfg: any) => void): CapturedResource[] {
    return edit(rs, "NicClusterPolicy", (o) => {
        const c = JSON.parse(o.spec.rdmaSharedDevicePlugin.config);
        fn(c);
        o.spec.rdmaSharedDevicePlugin.config = JSON.stringify(c);
    });
}

/** Replaces the outputs (what stack policies read) of the Helm release of `chart`. */
function release(rs: CapturedResource[], chart: string, values: Record<string, unknown>): CapturedResource[] {
    return rs.map((r) => ((r.inputs as any).chart === chart ? { ...r, outputs: { ...r.outputs, values } } : r));
}

describe("fabric and image policies on the generated graph", () => {
    it("pass", async () => {
        expect(await violations(rdmaPlatformPolicies, stack())).toEqual([]);
    });
});

describe("rdma-device-plugin-config", () => {
    it("a selector without vendor, with Ethernet link type, with no ifNames, a frontend netdev, a duplicate, periodic rescans off", async () => {
        const rs = pluginConfig(stack(), (c) => {
            c.periodicUpdateInterval = 0;
            c.configList[0].selectors.vendors = [];
            c.configList[1].selectors.linkTypes = ["ether"];
            c.configList[2].selectors.ifNames = [];
            c.configList[2].selectors.deviceIDs = ["a2dc"];
            c.configList[3].selectors.ifNames.push("enp41s0f0np0");
            c.configList[4].resourceName = "rail_5";
        });
        const f = (i: number, k: string) => `${NCP} field spec.rdmaSharedDevicePlugin.config.configList[${i}].${k}`;
        expect(await violations([rdmaDevicePluginConfig], rs)).toEqual([
            `${NCP} field spec.rdmaSharedDevicePlugin.config.periodicUpdateInterval: is 0, which disables rescans, so an HCA that comes up after the plugin is never served. Fix: set periodicUpdateInterval to e.g. 300 (seconds).`,
            `${f(0, "selectors.vendors")}: rdma/rail_0 does not select vendor 15b3. Fix: set selectors.vendors [15b3].`,
            `${f(1, "selectors.linkTypes")}: rdma/rail_1 selects link types [ether] on an InfiniBand fabric. Fix: set selectors.linkTypes [infiniband].`,
            `${f(2, "selectors.ifNames")}: rdma/rail_2 has no ifNames selector, so it may match every NIC of its device ID, north-south ones included. Fix: select the rail's netdev by ifNames.`,
            `${f(3, "selectors.ifNames")}: rdma/rail_3 selects frontend netdev(s) enp41s0f0np0. Fix: select only rail netdevs.`,
            `${f(5, "resourceName")}: rdma/rail_5 is defined twice. Fix: give every rail its own resourceName.`,
        ]);
    });
});

describe("rdma-device-plugin-version", () => {
    it("compliant: the pinned release (config/versions.ts)", async () => {
        expect(cmpSemver(semver(versions.rdmaSharedDevicePlugin.version)!, rdmaSharedDevicePluginMinimum.version)).toBeGreaterThanOrEqual(
            0,
        );
        expect(await violations([rdmaDevicePluginVersion], stack())).toEqual([]);
    });
    it("Mellanox/k8s-rdma-shared-dev-plugin#48: v1.3.2 loses allocatable after a kubelet restart", async () => {
        const rs = edit(stack(), "NicClusterPolicy", (o) => {
            o.spec.rdmaSharedDevicePlugin.version = "v1.3.2";
        });
        // v1.4.0 written out on purpose: the upstream minimum (PR #82, upstream/rdma-device-plugin.ts), not our pin.
        expect(await violations([rdmaDevicePluginVersion], rs)).toEqual([
            `${NCP} field spec.rdmaSharedDevicePlugin.version: plugin version "v1.3.2" is older than v1.4.0 or unparseable. Fix: pin v1.4.0 or newer (config/versions.ts rdmaSharedDevicePlugin).`,
        ]);
        // A pre-release or suffixed tag is not a release the pack can order: refused too.
        const rc = edit(stack(), "NicClusterPolicy", (o) => {
            o.spec.rdmaSharedDevicePlugin.version = "v1.4.0-rc1";
        });
        expect(await violations([rdmaDevicePluginVersion], rc)).toHaveLength(1);
    });
});

describe("rdma-hca-max-fits-pods", () => {
    it("compliant: 5 pods per rail against 63 x 2 nodes", async () => {
        expect(await violations([rdmaHcaMaxFitsPods], stack())).toEqual([]);
    });
    it("rdmaHcaMax 2 on two nodes for five pods", async () => {
        const rs = pluginConfig(stack(), (c) => {
            for (const e of c.configList) e.rdmaHcaMax = 2;
        });
        const msgs = await violations([rdmaHcaMaxFitsPods], rs);
        expect(msgs).toHaveLength(8);
        expect(msgs[0]).toBe(
            `${NCP} field spec.rdmaSharedDevicePlugin.config.configList[0].rdmaHcaMax: 5 pods request rdma/rail_0 but rdmaHcaMax 2 x 2 node(s) admits 4. Fix: raise rdmaHcaMax or add nodes.`,
        );
    });
});

describe("gpudirect-coordinated-upgrades", () => {
    it("compliant: DMA-BUF, no driver container", async () => {
        expect(await violations([gpudirectCoordinatedUpgrades], stack())).toEqual([]);
    });
    it("NVIDIA/gpu-operator#2868: peermem without draining; an OFED driver container without draining", async () => {
        let rs = release(stack(), "gpu-operator", {
            driver: { enabled: true, rdma: { enabled: true }, upgradePolicy: { autoUpgrade: true } },
        });
        rs = edit(rs, "NicClusterPolicy", (o) => {
            o.spec.ofedDriver = { image: "doca-driver", upgradePolicy: { autoUpgrade: true } };
        });
        expect(await violations([gpudirectCoordinatedUpgrades], rs)).toEqual([
            `${NCP} field spec.ofedDriver.upgradePolicy.drain.enable: the NIC driver container upgrades without draining RDMA pods. Fix: set ofedDriver.upgradePolicy.drain.enable: true.`,
            "Release/gpu-operator field values.driver.upgradePolicy.drain.enable: legacy nvidia-peermem is enabled but GPU driver upgrades do not drain, so a NIC driver upgrade can leave peermem unloadable. Fix: set driver.upgradePolicy.drain.enable: true, or switch to DMA-BUF (gpuDirectRdma: dmabuf).",
        ]);
    });
});

describe("no-macvlan-on-infiniband (Mellanox/network-operator#1017)", () => {
    it("IPoIB on a rail is fine; macvlan on the IB netdev is not", async () => {
        const ipoib = k8s({
            apiVersion: "mellanox.com/v1alpha1",
            kind: "IPoIBNetwork",
            metadata: { name: "h200-rail-0" },
            spec: { master: "ibp24s0" },
        });
        expect(await violations([noMacvlanOnInfiniband], [...stack(), ipoib])).toEqual([]);
        const mac = k8s({
            apiVersion: "mellanox.com/v1alpha1",
            kind: "MacvlanNetwork",
            metadata: { name: "rail-0-mac" },
            spec: { master: "ibp24s0", mode: "bridge" },
        });
        expect(await violations([noMacvlanOnInfiniband], [...stack(), mac])).toEqual([
            "MacvlanNetwork/rail-0-mac field spec.master: master ibp24s0 is the InfiniBand netdev of pool h200 rail 0. Fix: use an IPoIBNetwork on that rail.",
        ]);
    });
});

describe("rdma-image-allowlisted", () => {
    it("every engine and Mooncake image pinned in config/versions.ts is on the pack's allow-list", () => {
        const pins = [...Object.values(versions.dynamoRuntime).flatMap((p) => [`${p.image}:${p.version}`, `${p.image}:${p.efaVersion}`])];
        for (const p of pins) expect(allowedImage(p), p).toBeDefined();
        // The allow-list is derived from upstream/images.ts: exactly the pinned engine and Mooncake variants.
        expect(ALLOWED_RDMA_IMAGES.flatMap((a) => a.tags.map((t) => `${a.repository}:${t}`)).sort()).toEqual(
            pins.map((p) => p.replace(/^docker\.io\//, "")).sort(),
        );
        expect(splitImage("docker.io/lmsysorg/sglang:v0.5.16")).toEqual({
            repository: "lmsysorg/sglang",
            tag: "v0.5.16",
            digest: undefined,
        });
    });
    it("ai-dynamo/dynamo PR #1314 / nixl PR #610 / vllm #35799: an unvalidated image on a decode worker", async () => {
        const rs = edit(stack(), "DynamoGraphDeployment", (o) => {
            mainOf(o, "decode").image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.3.2";
        });
        expect(await violations([rdmaImageAllowlisted], rs)).toEqual([
            "DynamoGraphDeployment/llama-70b container decode/main field spec.components[3].podTemplate.spec.containers[0].image: image nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.3.2 is not on the RDMA image allow-list, so its UCX/NIXL/Mooncake build is unvalidated. Fix: use an allow-listed image (config/versions.ts pins) or validate and add this one.",
        ]);
    });
    it("kvcache-ai/Mooncake#2070: protocol efa on an image whose Mooncake has no EFA transport", async () => {
        const rs = edit(
            stack(),
            "Deployment",
            (o) => {
                o.spec.template.spec.containers[0].env.find((e: any) => e.name === "MOONCAKE_PROTOCOL").value = "efa";
            },
            "llama-70b-mooncake-store",
        );
        expect(await violations([rdmaImageAllowlisted], rs)).toEqual([
            `Deployment/llama-70b-mooncake-store container store field spec.template.spec.containers[0].image: image ${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version} has no Mooncake EFA transport, so protocol efa silently runs the verbs transport. Fix: use an image whose Mooncake is built with USE_EFA.`,
        ]);
    });
});

describe("no-gpu-utilisation-autoscaling", () => {
    it("a KV-utilisation HPA is fine; GPU-utilisation HPA and KEDA trigger are not", async () => {
        const hpa = (metrics: unknown[]) =>
            k8s({
                apiVersion: "autoscaling/v2",
                kind: "HorizontalPodAutoscaler",
                metadata: { name: "decode", namespace: "inference" },
                spec: {
                    scaleTargetRef: {
                        apiVersion: "nvidia.com/v1beta1",
                        kind: "DynamoGraphDeploymentScalingAdapter",
                        name: "llama-70b-decode",
                    },
                    minReplicas: 1,
                    maxReplicas: 4,
                    metrics,
                },
            });
        expect(
            await violations(
                [noGpuUtilisationAutoscaling],
                [
                    hpa([
                        {
                            type: "Pods",
                            pods: {
                                metric: { name: "dynamo_component_kv_cache_usage" },
                                target: { type: "AverageValue", averageValue: "80" },
                            },
                        },
                    ]),
                ],
            ),
        ).toEqual([]);
        expect(
            await violations(
                [noGpuUtilisationAutoscaling],
                [
                    hpa([
                        {
                            type: "External",
                            external: { metric: { name: "DCGM_FI_DEV_GPU_UTIL" }, target: { type: "AverageValue", averageValue: "80" } },
                        },
                    ]),
                ],
            ),
        ).toEqual([
            "HorizontalPodAutoscaler/decode field spec.metrics[0]: scales on GPU utilisation (DCGM_FI_DEV_GPU_UTIL). Fix: scale with the Dynamo Planner on KV-cache utilisation and queue depth.",
        ]);
        const keda = k8s({
            apiVersion: "keda.sh/v1alpha1",
            kind: "ScaledObject",
            metadata: { name: "prefill" },
            spec: {
                scaleTargetRef: { name: "llama-70b-prefill" },
                triggers: [{ type: "prometheus", metadata: { query: 'avg(DCGM_FI_DEV_GPU_UTIL{pod=~"llama.*"})', threshold: "70" } }],
            },
        });
        expect(await violations([noGpuUtilisationAutoscaling], [keda])).toEqual([
            "ScaledObject/prefill field spec.triggers[0].metadata: scales on a GPU-utilisation query. Fix: scale with the Dynamo Planner on KV-cache utilisation and queue depth.",
        ]);
    });
});
