import { run } from "./lib/unknown";
import { rdmaSharedDevicePluginMinimum } from "../upstream/rdma-device-plugin";
import { cmpSemver, semver, semverText } from "./lib/semver";
import type { StackValidationPolicy } from "@pulumi/policy";
import { allowedImage } from "./lib/images";
import { gpuDirect, railsOfResource, rdmaPlugin } from "./lib/fabric";
import { containerPolicy, type Finding, stackPolicy } from "./lib/report";
import { LABELS, ofType, TYPES } from "./lib/resources";
import { envValue, inScope, kvUse } from "./lib/workloads";

/**
 * Fabric-side and image rules (device plugin versions and selectors, driver upgrades, secondary networks), the image
 * allow-list, and never scaling on GPU busy.
 */

type Out = Array<{ subject: string; finding: Finding; urn?: string }>;

/** Mellanox PCI vendor ID. */
const MELLANOX = "15b3";

/** Plugin selectors that cannot silently serve the wrong NIC or none. */
export const rdmaDevicePluginConfig = stackPolicy(
    {
        name: "rdma-device-plugin-config",
        description:
            "Every RDMA shared device plugin resource selects vendor 15b3, linkTypes [infiniband] on InfiniBand pools (a port flipped to Ethernet then drops out instead of being served, k8s-rdma-shared-dev-plugin#98), and a rail-unique ifNames selector that is never a frontend netdev (deviceIDs alone also match north-south BlueField NICs); resource names are unique; periodicUpdateInterval is not 0, so HCAs that come up after the plugin are picked up (network-operator#31).",
        remediationSteps:
            "Generate NicClusterPolicy.spec.rdmaSharedDevicePlugin.config from the rail table (lib/rails.ts rdmaSharedDevicePluginConfig).",
    },
    (v) => {
        const out: Out = [];
        const plugin = rdmaPlugin(v.resources);
        if (!plugin?.config) return out;
        const subject = `NicClusterPolicy/${plugin.name}`;
        const field = (i: number, k: string) => `spec.rdmaSharedDevicePlugin.config.configList[${i}].${k}`;
        const add = (f: string, problem: string, fix: string) =>
            out.push({ subject, finding: { field: f, problem, fix }, urn: plugin.ncp.urn });
        const ibPools = v.pools.filter((p) => p.fabric === "infiniband");
        const frontNetdevs = new Set<string>();
        for (const p of v.pools)
            run(() => {
                const nodes = ofType(v.resources, TYPES.nodePatch).filter((r) => r.props.metadata?.labels?.[LABELS.pool] === p.name);
                for (const n of nodes)
                    for (const f of JSON.parse(String(n.props.metadata?.annotations?.[LABELS.frontendNics] ?? "[]")))
                        frontNetdevs.add(String(f.netdev));
            });
        const names = new Set<string>();
        if (plugin.config.periodicUpdateInterval === 0)
            add(
                "spec.rdmaSharedDevicePlugin.config.periodicUpdateInterval",
                "is 0, which disables rescans, so an HCA that comes up after the plugin is never served",
                "set periodicUpdateInterval to e.g. 300 (seconds)",
            );
        for (const r of plugin.config.configList) {
            if (names.has(r.resource))
                add(field(r.index, "resourceName"), `${r.resource} is defined twice`, "give every rail its own resourceName");
            names.add(r.resource);
            if (!r.vendors.includes(MELLANOX))
                add(
                    field(r.index, "selectors.vendors"),
                    `${r.resource} does not select vendor ${MELLANOX}`,
                    `set selectors.vendors [${MELLANOX}]`,
                );
            if (ibPools.length && !(r.linkTypes.length === 1 && r.linkTypes[0] === "infiniband"))
                add(
                    field(r.index, "selectors.linkTypes"),
                    `${r.resource} selects link types [${r.linkTypes.join(", ")}] on an InfiniBand fabric`,
                    "set selectors.linkTypes [infiniband]",
                );
            if (r.ifNames.length === 0)
                add(
                    field(r.index, "selectors.ifNames"),
                    `${r.resource} has no ifNames selector, so it may match every NIC of its device ID, north-south ones included`,
                    "select the rail's netdev by ifNames",
                );
            const front = r.ifNames.filter((n) => frontNetdevs.has(n));
            if (front.length)
                add(
                    field(r.index, "selectors.ifNames"),
                    `${r.resource} selects frontend netdev(s) ${front.join(", ")}`,
                    "select only rail netdevs",
                );
        }
        return out;
    },
);

/** Oldest accepted plugin release (upstream/rdma-device-plugin.ts), as `vX.Y.Z`. */
const PLUGIN_MINIMUM = semverText(rdmaSharedDevicePluginMinimum.version);

/** A plugin version with the known fixes. */
export const rdmaDevicePluginVersion = stackPolicy(
    {
        name: "rdma-device-plugin-version",
        description: `The RDMA shared device plugin must be >= ${PLUGIN_MINIMUM}: earlier versions advertise devices that do not exist (Mellanox/k8s-rdma-shared-dev-plugin#4, fixed v1.0.0), report Ready before the driver loaded the RDMA char devices (#23 there, fixed v1.1.0), and drop allocatable to 0 after a kubelet restart (#48/#74/#79 there, fixed by its PR #82 in ${PLUGIN_MINIMUM}).`,
        remediationSteps: `Pin rdmaSharedDevicePlugin.version to a release >= ${PLUGIN_MINIMUM} (config/versions.ts pins one).`,
    },
    (v) => {
        const plugin = rdmaPlugin(v.resources);
        if (!plugin) return [];
        const ver = String(plugin.raw.version ?? "");
        const parsed = semver(ver);
        return parsed && cmpSemver(parsed, rdmaSharedDevicePluginMinimum.version) >= 0
            ? []
            : [
                  {
                      subject: `NicClusterPolicy/${plugin.name}`,
                      finding: {
                          field: "spec.rdmaSharedDevicePlugin.version",
                          problem: `plugin version "${ver || "(unset)"}" is older than ${PLUGIN_MINIMUM} or unparseable`,
                          fix: `pin ${PLUGIN_MINIMUM} or newer (config/versions.ts rdmaSharedDevicePlugin)`,
                      },
                      urn: plugin.ncp.urn,
                  },
              ];
    },
);

/** rdmaHcaMax must cover the pods that share a rail resource. */
export const rdmaHcaMaxFitsPods = stackPolicy(
    {
        name: "rdma-hca-max-fits-pods",
        description:
            "Each RDMA shared resource admits at most rdmaHcaMax pods per node; the stack's pods requesting it must fit rdmaHcaMax x the nodes of the pools it selects, or the extra pods stay Pending (Mellanox/k8s-rdma-shared-dev-plugin README, rdmaHcaMax).",
        remediationSteps: "Raise platform:backend.rdmaHcaMax or add nodes.",
    },
    (v) => {
        const plugin = rdmaPlugin(v.resources);
        if (!plugin?.config) return [];
        const out: Out = [];
        for (const r of plugin.config.configList) {
            const nodes = v.pools.filter((p) => railsOfResource(r, p).length > 0).reduce((n, p) => n + p.nodes.length, 0);
            const pods = new Map<string, number>();
            for (const c of v.containers) {
                if (c.init || c.limits[r.resource] === undefined) continue;
                pods.set(`${c.resource.urn}#${c.pod.path}`, c.replicas);
            }
            const demand = [...pods.values()].reduce((a, b) => a + b, 0);
            const cap = (r.rdmaHcaMax ?? 0) * nodes;
            if (demand > cap)
                out.push({
                    subject: `NicClusterPolicy/${plugin.name}`,
                    finding: {
                        field: `spec.rdmaSharedDevicePlugin.config.configList[${r.index}].rdmaHcaMax`,
                        problem: `${demand} pods request ${r.resource} but rdmaHcaMax ${r.rdmaHcaMax ?? 0} x ${nodes} node(s) admits ${cap}`,
                        fix: "raise rdmaHcaMax or add nodes",
                    },
                    urn: plugin.ncp.urn,
                });
        }
        return out;
    },
);

/** Driver upgrades drain RDMA pods, and peermem upgrades move together. */
export const gpudirectCoordinatedUpgrades = stackPolicy(
    {
        name: "gpudirect-coordinated-upgrades",
        description:
            "NIC and GPU driver upgrades must drain nodes: a network-operator driver upgrade under running pods takes their RDMA interfaces offline (k8s-rdma-shared-dev-plugin#118) and, with legacy nvidia-peermem, leaves the peer-memory module built against the old ABI so GPUDirect silently disappears (NVIDIA/gpu-operator#2868). With peermem the GPU driver upgrade policy must drain too; DMA-BUF avoids the module altogether.",
        remediationSteps:
            "Set NicClusterPolicy.spec.ofedDriver.upgradePolicy.drain.enable: true and gpu-operator driver.upgradePolicy.drain.enable: true (or use gpuDirectRdma: dmabuf).",
    },
    (v) => {
        const out: Out = [];
        const plugin = rdmaPlugin(v.resources);
        run(() => {
            const ofed = plugin?.ncp.props.spec?.ofedDriver;
            if (plugin && ofed && ofed.upgradePolicy?.drain?.enable !== true)
                out.push({
                    subject: `NicClusterPolicy/${plugin.name}`,
                    finding: {
                        field: "spec.ofedDriver.upgradePolicy.drain.enable",
                        problem: "the NIC driver container upgrades without draining RDMA pods",
                        fix: "set ofedDriver.upgradePolicy.drain.enable: true",
                    },
                    urn: plugin.ncp.urn,
                });
        });
        for (const rel of gpuDirect(v.resources).releases)
            run(() => {
                const d = rel.props.values?.driver ?? {};
                if (d.rdma?.enabled === true && d.upgradePolicy?.drain?.enable !== true)
                    out.push({
                        subject: `Release/${rel.name}`,
                        finding: {
                            field: "values.driver.upgradePolicy.drain.enable",
                            problem:
                                "legacy nvidia-peermem is enabled but GPU driver upgrades do not drain, so a NIC driver upgrade can leave peermem unloadable",
                            fix: "set driver.upgradePolicy.drain.enable: true, or switch to DMA-BUF (gpuDirectRdma: dmabuf)",
                        },
                        urn: rel.urn,
                    });
            });
        return out;
    },
);

/** network-operator#1017: macvlan cannot sit on IPoIB. */
export const noMacvlanOnInfiniband = stackPolicy(
    {
        name: "no-macvlan-on-infiniband",
        description:
            "A MacvlanNetwork must not use an InfiniBand rail netdev as master: macvlan cannot sit on IPoIB and pod creation fails with 'failed to create macvlan: invalid argument' (Mellanox/network-operator#1017). Use an IPoIBNetwork on IB rails.",
        remediationSteps: "Replace the MacvlanNetwork with an IPoIBNetwork (BackendFabric creates one per rail).",
    },
    (v) => {
        const out: Out = [];
        const ib = new Map<string, string>();
        for (const p of v.pools) for (const r of p.rails) if (r.linkLayer === "InfiniBand") ib.set(r.netdev, `${p.name} rail ${r.rail}`);
        for (const r of v.resources)
            run(() => {
                const p = r.props ?? {};
                if (p.kind !== "MacvlanNetwork") return;
                const master = String(p.spec?.master ?? "");
                if (ib.has(master))
                    out.push({
                        subject: `MacvlanNetwork/${p.metadata?.name ?? r.name}`,
                        finding: {
                            field: "spec.master",
                            problem: `master ${master} is the InfiniBand netdev of pool ${ib.get(master)}`,
                            fix: "use an IPoIBNetwork on that rail",
                        },
                        urn: r.urn,
                    });
            });
        return out;
    },
);

/** Images from an allow-list whose UCX/NIXL/Mooncake builds were validated. */
export const rdmaImageAllowlisted = containerPolicy(
    {
        name: "rdma-image-allowlisted",
        description:
            "RDMA workloads run only images from the pack's allow-list (policies/lib/images.ts), each validated on an RDMA node: UCX >= 1.19 with verbs transports (a UCX without verbs picks tcp, ai-dynamo/dynamo PR #1314; UCX 1.18 error handling costs ~10x, ai-dynamo/nixl PR #610), a NIXL not on the known-bad list (vllm-project/vllm #35799), and a Mooncake built with EFA when its protocol is efa (kvcache-ai/Mooncake#2070).",
        remediationSteps: "Use a pinned image from config/versions.ts, or validate a new image and add it to policies/lib/images.ts.",
    },
    (c) => {
        if (!c.image) return [];
        const entry = allowedImage(c.image);
        if (!entry)
            return [
                {
                    field: `${c.path}.image`,
                    problem: `image ${c.image} is not on the RDMA image allow-list, so its UCX/NIXL/Mooncake build is unvalidated`,
                    fix: "use an allow-listed image (config/versions.ts pins) or validate and add this one",
                },
            ];
        if (kvUse(c).mooncake && (envValue(c, "MOONCAKE_PROTOCOL") ?? "").toLowerCase() === "efa" && !entry.mooncakeEfa) {
            return [
                {
                    field: `${c.path}.image`,
                    problem: `image ${c.image} has no Mooncake EFA transport, so protocol efa silently runs the verbs transport`,
                    fix: "use an image whose Mooncake is built with USE_EFA",
                },
            ];
        }
        return [];
    },
    inScope,
);

/** Never autoscale inference on GPU utilisation. */
export const noGpuUtilisationAutoscaling = stackPolicy(
    {
        name: "no-gpu-utilisation-autoscaling",
        description:
            "No HorizontalPodAutoscaler or KEDA ScaledObject may scale on GPU utilisation (nvidia.com/gpu resource metrics, DCGM_FI_DEV_GPU_UTIL): scaling on GPU busy instead of KV-cache utilisation and queue measured TTFT p95 44.5 s vs 1.4-3.4 s. Scale with the Dynamo Planner on queue depth and KV-cache utilisation.",
        remediationSteps: "Remove the GPU-utilisation autoscaler and enable the endpoint's Planner (optimization_target load).",
    },
    (v) => {
        const out: Out = [];
        const gpuMetric = /DCGM_FI_DEV_GPU_UTIL|gpu_util|gpu_utilization|GPU_UTIL/i;
        for (const r of v.resources)
            run(() => {
                const p = r.props ?? {};
                const subject = `${p.kind}/${p.metadata?.name ?? r.name}`;
                if (p.kind === "HorizontalPodAutoscaler") {
                    (p.spec?.metrics ?? []).forEach((m: any, i: number) => {
                        const name =
                            m?.resource?.name ??
                            m?.containerResource?.name ??
                            m?.external?.metric?.name ??
                            m?.pods?.metric?.name ??
                            m?.object?.metric?.name ??
                            "";
                        if (name === "nvidia.com/gpu" || gpuMetric.test(String(name)))
                            out.push({
                                subject,
                                finding: {
                                    field: `spec.metrics[${i}]`,
                                    problem: `scales on GPU utilisation (${name})`,
                                    fix: "scale with the Dynamo Planner on KV-cache utilisation and queue depth",
                                },
                                urn: r.urn,
                            });
                    });
                } else if (p.kind === "ScaledObject") {
                    (p.spec?.triggers ?? []).forEach((t: any, i: number) => {
                        const text = JSON.stringify(t?.metadata ?? {});
                        if (gpuMetric.test(text))
                            out.push({
                                subject,
                                finding: {
                                    field: `spec.triggers[${i}].metadata`,
                                    problem: "scales on a GPU-utilisation query",
                                    fix: "scale with the Dynamo Planner on KV-cache utilisation and queue depth",
                                },
                                urn: r.urn,
                            });
                    });
                }
            });
        return out;
    },
);

/** Fabric, image and autoscaling policies. */
export const rdmaPlatformPolicies: StackValidationPolicy[] = [
    rdmaDevicePluginConfig,
    rdmaDevicePluginVersion,
    rdmaHcaMaxFitsPods,
    gpudirectCoordinatedUpgrades,
    noMacvlanOnInfiniband,
    rdmaImageAllowlisted,
    noGpuUtilisationAutoscaling,
];
