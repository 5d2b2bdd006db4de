/**
 * EFA (AWS Elastic Fabric Adapter) node-side facts as pure functions: launch-template interface layout, node
 * bootstrap, the device plugin's instance-type allowlist and values, a worker's huge-page share. No Pulumi
 * resources here. The worker transport env (FI_PROVIDER, NIXL LIBFABRIC, ...) lives with the other fabrics'
 * in lib/nixl.ts.
 *
 * Units: link rates in Gb/s (gigabits); huge pages as counts of 2 MiB pages; memory sizes in MiB.
 * Facts: the AWS EC2 and EKS EFA guides (p5e/p5en, EFA), NIXL's LIBFABRIC backend on EFA.
 */

/** Huge-page resource workers on EFA nodes request. */
export const HUGEPAGES_2MI_RESOURCE = "hugepages-2Mi";
/** Node label the EFA device plugin's required node affinity matches its allowlist against. */
export const INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type";

/** One `aws.ec2.LaunchTemplate` `networkInterfaces[]` entry (field names as in @pulumi/aws). */
export interface LaunchTemplateInterface {
    networkCardIndex: number;
    deviceIndex: number;
    /** `interface` = ENA only; `efa-only` = EFA device without an IP (saves subnet addresses). */
    interfaceType: "interface" | "efa" | "efa-only";
    securityGroups: string[];
    /** A string in the SDK (`"true"`). */
    deleteOnTermination: string;
    description: string;
}

/**
 * The network interfaces of an EFA node's launch template, derived from the instance type's network cards
 * (`aws.ec2.getInstanceType.maximumNetworkCards`). AWS guidance (EC2 "Maximize network bandwidth on instances
 * with multiple network cards", EKS guide P6-B200 example):
 * - card 0 / device 0: ENA (`interface`); an EFA-only interface can never be primary;
 * - card 0 / device 1: `efa-only` (card 0 supports EFA on p5e/p5en);
 * - every other card / device 0: `efa-only`.
 * So a node gets one EFA device per card (p5en 16, p5e 32) and exactly one IP-consuming interface.
 * No `subnetId`: EKS managed node groups reject a launch template that sets one.
 *
 * @param maximumNetworkCards `NetworkInfo.MaximumNetworkCards` (p5en.48xlarge 16, p5e.48xlarge 32)
 * @param securityGroupIds the cluster security group and the EFA self-referencing group
 * @throws Error when the count is not a positive integer or no security group is given
 */
export function efaNetworkInterfaces(maximumNetworkCards: number, securityGroupIds: string[]): LaunchTemplateInterface[] {
    if (!Number.isInteger(maximumNetworkCards) || maximumNetworkCards < 1) {
        throw new Error(`maximumNetworkCards must be a positive integer, got ${maximumNetworkCards}`);
    }
    if (securityGroupIds.length === 0)
        throw new Error("EFA interfaces need at least one security group (one that allows all traffic to and from itself)");
    const entry = (card: number, device: number, type: LaunchTemplateInterface["interfaceType"]): LaunchTemplateInterface => ({
        networkCardIndex: card,
        deviceIndex: device,
        interfaceType: type,
        securityGroups: [...securityGroupIds],
        deleteOnTermination: "true",
        description: type === "interface" ? `card ${card} ENA (primary)` : `card ${card} EFA-only`,
    });
    const out = [entry(0, 0, "interface"), entry(0, 1, "efa-only")];
    for (let card = 1; card < maximumNetworkCards; card++) out.push(entry(card, 0, "efa-only"));
    return out;
}

/** EFA devices a launch-template layout yields (entries of type `efa` or `efa-only`). */
export function efaDeviceCount(interfaces: Array<Pick<LaunchTemplateInterface, "interfaceType">>): number {
    return interfaces.filter((i) => i.interfaceType === "efa" || i.interfaceType === "efa-only").length;
}

/** What `aws.ec2.getInstanceType` says about a type, reduced to what EFA needs. */
export interface InstanceTypeNetworkInfo {
    instanceType: string;
    maximumNetworkCards: number;
    efaSupported: boolean;
    efaMaximumInterfaces?: number;
}

/**
 * Checks the live instance-type description against the node profile before any launch template is built,
 * so a profile typo or an AWS change fails `pulumi preview` instead of booting nodes with fewer EFAs.
 *
 * @param expectedCards the profile's `efa.networkCards`
 * @throws Error when the type lacks EFA or its card count differs from the profile
 */
export function checkInstanceTypeForEfa(info: InstanceTypeNetworkInfo, expectedCards: number): void {
    if (!info.efaSupported) throw new Error(`${info.instanceType} does not support EFA (aws.ec2.getInstanceType efaSupported=false)`);
    if (info.maximumNetworkCards !== expectedCards) {
        throw new Error(
            `${info.instanceType} has ${info.maximumNetworkCards} network cards but its node profile says ${expectedCards}; fix config/node-profiles`,
        );
    }
    if (info.efaMaximumInterfaces !== undefined && info.efaMaximumInterfaces < expectedCards) {
        throw new Error(
            `${info.instanceType} allows ${info.efaMaximumInterfaces} EFA interfaces, fewer than its ${expectedCards} network cards`,
        );
    }
}

/** Options of {@link nodeBootstrapUserData}. */
export interface NodeBootstrapOptions {
    /** 2 MiB huge pages to reserve (`vm.nr_hugepages`); the EFA driver pre-allocates 5,128 (EKS EFA guide). */
    hugepages2Mi: number;
    /** Build a RAID0 over the instance-store NVMe for kubelet/containerd (model weights, images). */
    localStorageRaid0: boolean;
}

/** MIME boundary of the launch template user data. */
export const USER_DATA_BOUNDARY = "==PLATFORM-NODE-BOOTSTRAP==";

/**
 * Launch-template user data for an EKS AL2023 GPU node: a MIME multi-part document (managed node groups
 * merge it with their own nodeadm part) with
 * 1. a nodeadm `NodeConfig` (`node.eks.aws/v1alpha1`) asking for the instance-store RAID0;
 * 2. a shell part that gives containerd `LimitMEMLOCK=infinity` (systemd drop-in) so RDMA memory
 *    registration does not hit containerd's 8 MiB default (nvidia-container-toolkit#2037),
 *    and reserves `hugepages2Mi` 2 MiB huge pages persistently (sysctl.d) and at once.
 * The shell part runs from cloud-init before nodeadm starts kubelet, so kubelet sees the huge pages and
 * containerd picks up the drop-in [inference: AL2023 runs nodeadm-run after cloud-final; the preflight
 * checks `ulimit -l` = unlimited in the pod regardless].
 *
 * @returns the user data as plain text (the launch template wants base64; see {@link base64}).
 * @throws Error when `hugepages2Mi` is negative or not an integer
 */
export function nodeBootstrapUserData(opts: NodeBootstrapOptions): string {
    if (!Number.isInteger(opts.hugepages2Mi) || opts.hugepages2Mi < 0)
        throw new Error(`hugepages2Mi must be a non-negative integer, got ${opts.hugepages2Mi}`);
    const nodeConfig = [
        "---",
        "apiVersion: node.eks.aws/v1alpha1",
        "kind: NodeConfig",
        "spec:",
        "  instance:",
        "    localStorage:",
        `      strategy: ${opts.localStorageRaid0 ? "RAID0" : "Mount"}`,
    ].join("\n");
    const script = [
        "#!/bin/bash",
        "set -euo pipefail",
        "# RDMA (EFA) needs unlimited locked memory in every container: containerd's limit is inherited.",
        "mkdir -p /etc/systemd/system/containerd.service.d",
        "cat > /etc/systemd/system/containerd.service.d/50-memlock.conf <<'EOF'",
        "[Service]",
        "LimitMEMLOCK=infinity",
        "EOF",
        "systemctl daemon-reload",
        "if systemctl is-active --quiet containerd; then systemctl restart containerd; fi",
        "# 2 MiB huge pages for the EFA provider and the workers' hugepages-2Mi requests.",
        `echo 'vm.nr_hugepages = ${opts.hugepages2Mi}' > /etc/sysctl.d/90-hugepages.conf`,
        `sysctl -w vm.nr_hugepages=${opts.hugepages2Mi}`,
    ].join("\n");
    return [
        "MIME-Version: 1.0",
        `Content-Type: multipart/mixed; boundary="${USER_DATA_BOUNDARY}"`,
        "",
        `--${USER_DATA_BOUNDARY}`,
        "Content-Type: application/node.eks.aws",
        "",
        nodeConfig,
        "",
        `--${USER_DATA_BOUNDARY}`,
        'Content-Type: text/x-shellscript; charset="us-ascii"',
        "",
        script,
        "",
        `--${USER_DATA_BOUNDARY}--`,
        "",
    ].join("\n");
}

/** Base64 of a UTF-8 string (launch template `userData` is base64). */
export function base64(text: string): string {
    return Buffer.from(text, "utf8").toString("base64");
}

/**
 * Instance types of the EFA node groups missing from the device plugin's allowlist
 * (`supportedInstanceLabels.values`). The chart's DaemonSet has a *required* node affinity on that list, so
 * a missing type means DESIRED=0, no `vpc.amazonaws.com/efa` on the node and NCCL/NIXL quietly on TCP
 * (aws/eks-charts@bfe91c4b:stable/aws-efa-k8s-device-plugin/templates, upstream/charts/aws-efa-k8s-device-plugin.ts).
 * Empty result = the allowlist provably covers the pools.
 */
export function missingFromEfaAllowlist(allowlist: readonly string[], instanceTypes: readonly string[]): string[] {
    const allowed = new Set(allowlist);
    return [...new Set(instanceTypes)].filter((t) => !allowed.has(t)).sort();
}

/**
 * Pure: Helm values of the pinned EFA device plugin chart (aws/eks-charts@bfe91c4b:stable/aws-efa-k8s-device-plugin,
 * values keys in upstream/charts/aws-efa-k8s-device-plugin.ts) for the given EFA instance types and GPU taint:
 * `supportedInstanceLabels` (key {@link INSTANCE_TYPE_LABEL}, the types deduplicated and sorted), the allowlist the
 * DaemonSet's required node affinity reads, and tolerations for `CriticalAddonsOnly` and the GPU taint.
 * @throws Error when `instanceTypes` is empty: an empty allowlist schedules the plugin nowhere
 */
export function efaDevicePluginValues(instanceTypes: readonly string[], gpuTaintKey: string): Record<string, unknown> {
    const values = [...new Set(instanceTypes)].sort();
    if (values.length === 0) throw new Error("the EFA device plugin needs at least one instance type in its allowlist");
    return {
        supportedInstanceLabels: { keys: [INSTANCE_TYPE_LABEL], values },
        // Chart default tolerates only CriticalAddonsOnly; GPU nodes carry the platform GPU taint.
        tolerations: [
            { key: "CriticalAddonsOnly", operator: "Exists" },
            { key: gpuTaintKey, operator: "Exists", effect: "NoSchedule" },
        ],
    };
}

/**
 * A worker's share of its node's 2 MiB huge pages, as the `hugepages-2Mi` quantity in MiB: the node reserves
 * `hugepages2MiPerNode` pages (5,128 by default for the EFA provider) and a worker with
 * `gpus` of the node's `gpusPerNode` GPUs gets that fraction, so workers packed onto one node still fit.
 * The EKS NCCL example requests `hugepages-2Mi: 5120Mi` for a whole p5 node.
 *
 * @returns MiB (a multiple of 2), 0 when the node reserves none
 * @throws Error when `gpus` is not in 1..gpusPerNode
 */
export function efaHugepagesMiB(hugepages2MiPerNode: number, gpusPerNode: number, gpus: number): number {
    if (!Number.isInteger(gpus) || gpus < 1 || gpus > gpusPerNode) throw new Error(`a worker needs 1..${gpusPerNode} GPUs, got ${gpus}`);
    return Math.floor((hugepages2MiPerNode * gpus) / gpusPerNode) * 2;
}

/** A container's resources split by where they go (core/v1 ResourceRequirements, quantities as strings). */
export interface ContainerResources {
    requests: Record<string, string>;
    limits: Record<string, string>;
}

/**
 * What an EFA worker container adds to its GPU and EFA resources for the node's 2 MiB huge pages
 * (the EFA driver pre-allocates 5,128 x 2 MiB pages, pods request `hugepages-2Mi`):
 * - `hugepages-2Mi` = the worker's GPU share of the node's pages ({@link efaHugepagesMiB}), in requests and limits
 *   alike (huge pages cannot be overcommitted: the API server requires request = limit);
 * - a `cpu` request of one core per GPU, requests only: the API server refuses a container that requests huge pages
 *   without cpu or memory ("HugePages require cpu or memory", kubernetes/kubernetes pkg/apis/core/validation
 *   `ValidateResourceRequirements`). No cpu limit (no CFS throttling of the engine) and no memory request or limit
 *   (a memory limit would cap weight loading and the engine's host buffers).
 *
 * @param hugepages2MiPerNode 2 MiB pages the node reserves (`platform:nodeGroups.gpu[].hugepages2Mi`)
 * @returns empty maps when the node reserves no huge pages
 * @throws Error when `gpus` is not in 1..gpusPerNode
 */
export function efaWorkerHugepages(hugepages2MiPerNode: number, gpusPerNode: number, gpus: number): ContainerResources {
    const mib = efaHugepagesMiB(hugepages2MiPerNode, gpusPerNode, gpus);
    if (mib === 0) return { requests: {}, limits: {} };
    const hp = { [HUGEPAGES_2MI_RESOURCE]: `${mib}Mi` };
    return { requests: { ...hp, cpu: String(gpus) }, limits: { ...hp } };
}
