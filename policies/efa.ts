import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { dependencyOfType, helmReleases, LABELS, ofType } from "./lib/resources";
import { defaultedRequests } from "./lib/workloads";
import { peek } from "./lib/unknown";
import { EFA_DEVICES_LABEL } from "../lib/labels";
import { podTemplatesOf } from "../upstream/check/walk";

/**
 * EFA (AWS) rules of the RDMA guard: an EKS GPU node group that cannot expose its EFA devices, or a worker
 * that would move KV over TCP on an EFA pool, fails `pulumi preview`.
 * The pack stands alone: label keys, chart names and the published network-card counts are repeated here.
 */

/** Pulumi type tokens these policies read. */
export const EFA_TYPES = {
    nodeGroup: "aws:eks/nodeGroup:NodeGroup",
    launchTemplate: "aws:ec2/launchTemplate:LaunchTemplate",
    placementGroup: "aws:ec2/placementGroup:PlacementGroup",
} as const;

/** Chart of the AWS EFA device plugin (aws/eks-charts). */
export const EFA_PLUGIN_CHART = "aws-efa-k8s-device-plugin";
/** EFA DRA driver chart; cannot coexist with the device plugin on a node. */
export const EFA_DRA_CHART = "aws-dranet";
/** Extended resource of the EFA device plugin. */
export const EFA_RESOURCE = "vpc.amazonaws.com/efa";
/** Node label the plugin's allowlist is matched against. */
export const INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type";
/**
 * Label the Dynamo operator sets on component pods (the component's name; ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/internal/consts/consts.go
 * `KubeLabelDynamoComponent`, set by deploy/operator/internal/controller/dynamocomponentdeployment_renderer.go); P/D
 * anti-affinity must key on it (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/developer-guide/knowledge-base/kubernetes/kubernetes-operator/disagg-communication.md, "AWS EFA Configuration", "Pod Anti-Affinity (Required)", and
 * "Problem: EFA EAGAIN errors (fi_read still retrying)").
 */
export const DYNAMO_COMPONENT_LABEL = "nvidia.com/dynamo-component";

/**
 * Published `NetworkInfo.MaximumNetworkCards` (= EFA interfaces) per instance type: p5en.48xlarge 16 x 200 Gb/s,
 * p5e.48xlarge 32 x 100 Gb/s.
 */
export const PUBLISHED_NETWORK_CARDS: Record<string, number> = { "p5en.48xlarge": 16, "p5e.48xlarge": 32 };

/** An EKS node group labelled `fabric=efa`. */
interface EfaGroup {
    r: PolicyResource;
    pool: string;
    instanceTypes: string[];
    taints: Array<{ key?: string; value?: string; effect?: string }>;
}

/** EFA node groups of the stack (EKS managed node groups whose labels say `inference-platform.io/fabric: efa`). */
export function efaNodeGroups(resources: PolicyResource[]): EfaGroup[] {
    return ofType(resources, EFA_TYPES.nodeGroup)
        .filter((r) => r.props.labels?.[LABELS.fabric] === "efa")
        .map((r) => ({
            r,
            pool: String(r.props.labels?.[LABELS.pool] ?? r.name),
            instanceTypes: (r.props.instanceTypes ?? []) as string[],
            taints: (r.props.taints ?? []) as EfaGroup["taints"],
        }));
}

const tolerates = (tols: Array<Record<string, unknown>>, key: string) =>
    tols.some((t) => t.key === key && (t.operator === "Exists" || t.operator === "Equal" || t.operator === undefined));

/**
 * The EFA device plugin runs on every EFA node: the pinned chart's DaemonSet has a required node affinity on
 * `supportedInstanceLabels.values`, and a type missing there leaves DESIRED=0 with no event, no
 * `vpc.amazonaws.com/efa` on the node and NCCL/NIXL on TCP (aws/eks-charts PR #1348, aws-samples/aws-efa-eks PR #16,
 * ). The allowlist must be explicit in the release values so it is provable offline.
 */
export const efaPluginAllowlist: StackValidationPolicy = {
    name: "efa-device-plugin-allowlist",
    description:
        "Every EFA node group's instance type must be in the EFA device plugin's instance-type allowlist (supportedInstanceLabels.values), the plugin must tolerate the group's taints, and no EFA DRA driver may run alongside it.",
    remediationSteps:
        "Deploy EfaDevicePlugin in the same stack with instanceTypes = the EFA node groups' types (components/spoke/EfaDevicePlugin.ts); tolerate the GPU taint; remove aws-dranet.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const groups = efaNodeGroups(args.resources);
        if (groups.length === 0) return;
        const releases = helmReleases(args.resources, EFA_PLUGIN_CHART);
        if (releases.length === 0) {
            report(
                `EFA node group(s) ${groups.map((g) => g.pool).join(", ")} but no ${EFA_PLUGIN_CHART} Helm release: nothing advertises ${EFA_RESOURCE}, so workloads cannot get EFA devices.`,
            );
            return;
        }
        for (const dra of helmReleases(args.resources, EFA_DRA_CHART)) {
            report(
                `Helm release ${dra.name} (${EFA_DRA_CHART}) next to the EFA device plugin: the EFA DRA driver cannot coexist with the device plugin on a node; pick one mechanism.`,
                dra.urn,
            );
        }
        for (const rel of releases) {
            const labels = rel.props.values?.supportedInstanceLabels ?? {};
            const keys: string[] = labels.keys ?? [];
            const allow: string[] = labels.values ?? [];
            if (!Array.isArray(labels.values)) {
                report(
                    `Helm release ${rel.name} (${EFA_PLUGIN_CHART}): values.supportedInstanceLabels.values is not set, so the allowlist is the chart default, which cannot be checked here; set it to the EFA node groups' instance types.`,
                    rel.urn,
                );
                continue;
            }
            if (!keys.includes(INSTANCE_TYPE_LABEL))
                report(
                    `Helm release ${rel.name}: values.supportedInstanceLabels.keys must include ${INSTANCE_TYPE_LABEL} (got ${JSON.stringify(keys)}).`,
                    rel.urn,
                );
            const tols = (rel.props.values?.tolerations ?? []) as Array<Record<string, unknown>>;
            for (const g of groups) {
                const missing = g.instanceTypes.filter((t) => !allow.includes(t));
                if (missing.length) {
                    report(
                        `EFA node group ${g.pool}: instance type(s) ${missing.join(", ")} are not in ${rel.name}'s supportedInstanceLabels.values (${allow.join(", ") || "empty"}); the plugin DaemonSet would schedule 0 pods there and EFA traffic would fall back to TCP.`,
                        g.r.urn,
                    );
                }
                for (const t of g.taints) {
                    if (t.key && !tolerates(tols, t.key))
                        report(
                            `EFA node group ${g.pool} is tainted ${t.key}; Helm release ${rel.name} does not tolerate it, so the plugin never runs on those nodes.`,
                            rel.urn,
                        );
                }
            }
        }
    },
};

function decodeUserData(v: unknown): string {
    if (typeof v !== "string") return "";
    try {
        return Buffer.from(v, "base64").toString("utf8");
    } catch {
        return "";
    }
}

/**
 * An EFA node group's launch template exposes one EFA per network card with the layout AWS requires
 * (card 0 / device 0 ENA `interface`, card 0 / device 1 and every other card's device 0 `efa-only`; no subnet,
 * which managed node groups reject), sits in a `cluster` placement group, and boots with containerd
 * `LimitMEMLOCK=infinity` and 2 MiB huge pages.
 */
export const efaLaunchTemplate: StackValidationPolicy = {
    name: "efa-node-group-launch-template",
    description:
        "EFA node groups need a launch template with one EFA interface per network card (card 0 ENA + EFA-only, the rest EFA-only), a cluster placement group, a single AZ, and bootstrap that sets LimitMEMLOCK=infinity and huge pages.",
    remediationSteps:
        "Build the node group with components/spoke/EfaNodeGroup.ts (interfaces from aws.ec2.getInstanceType().maximumNetworkCards, lib/efa.ts).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const lts = ofType(args.resources, EFA_TYPES.launchTemplate);
        const pgs = ofType(args.resources, EFA_TYPES.placementGroup);
        for (const g of efaNodeGroups(args.resources)) {
            const lt = dependencyOfType(g.r, EFA_TYPES.launchTemplate) ?? lts.find((l) => l.props.tags?.[LABELS.pool] === g.pool);
            if (!lt) {
                report(`EFA node group ${g.pool} has no launch template in this stack: nothing sets up its EFA interfaces.`, g.r.urn);
                continue;
            }
            const where = `EFA node group ${g.pool} (launch template ${lt.name})`;
            const subnets: unknown[] = g.r.props.subnetIds ?? [];
            if (subnets.length !== 1)
                report(
                    `${where}: uses ${subnets.length} subnets; a cluster placement group lives in one AZ, so give it exactly the subnet of that AZ.`,
                    g.r.urn,
                );
            const nis = (lt.props.networkInterfaces ?? []) as Array<Record<string, any>>;
            const type = g.instanceTypes[0];
            const cards = PUBLISHED_NETWORK_CARDS[type] ?? Number(g.r.props.labels?.[EFA_DEVICES_LABEL] ?? 0);
            if (!cards) {
                report(`${where}: instance type ${type} has no known network-card count; add it to PUBLISHED_NETWORK_CARDS.`, lt.urn);
                continue;
            }
            const at = (card: number, dev: number) =>
                nis.filter((n) => Number(n.networkCardIndex ?? 0) === card && Number(n.deviceIndex ?? 0) === dev);
            const problems: string[] = [];
            const efa = nis.filter((n) => n.interfaceType === "efa" || n.interfaceType === "efa-only").length;
            if (efa !== cards) problems.push(`${efa} EFA interfaces for ${cards} network cards of ${type}`);
            const primary = at(0, 0);
            if (primary.length !== 1 || primary[0].interfaceType !== "interface")
                problems.push("card 0 / device 0 must be the ENA primary (interfaceType interface)");
            if (at(0, 1).length !== 1 || at(0, 1)[0].interfaceType !== "efa-only") problems.push("card 0 / device 1 must be efa-only");
            for (let c = 1; c < cards; c++) {
                const e = at(c, 0);
                if (e.length !== 1 || e[0].interfaceType !== "efa-only") problems.push(`card ${c} / device 0 must be efa-only`);
            }
            if (nis.some((n) => n.subnetId)) problems.push("interfaces set subnetId, which EKS managed node groups reject");
            if (nis.some((n) => !Array.isArray(n.securityGroups) || n.securityGroups.length === 0))
                problems.push("every interface needs the EFA security group (all traffic to and from itself)");
            if (problems.length)
                report(
                    `${where}: ${problems.slice(0, 4).join("; ")}${problems.length > 4 ? `; and ${problems.length - 4} more` : ""}.`,
                    lt.urn,
                );
            // The group's name is computed (auto-named) on a new stack, so in preview it is unknown; the placement
            // group the template depends on is where its strategy is known (Pulumi records the dependency).
            const pgName = peek(() => lt.props.placement?.groupName);
            const pgDep = (lt.dependencies ?? []).find((d) => d.type === EFA_TYPES.placementGroup);
            const pg = pgName.known ? (pgs.find((p) => p.props.name === pgName.value) ?? (pgName.value ? pgDep : undefined)) : pgDep;
            if (pgName.known && !pgName.value) report(`${where}: no placement group; EFA nodes need a cluster placement group.`, lt.urn);
            else if (!pg && !pgName.known)
                report(
                    `${where}: placement.groupName is unknown during preview and the template depends on no placement group of this stack, so its strategy cannot be checked (fail closed); EFA nodes need a cluster placement group.`,
                    lt.urn,
                );
            else if (pg && pg.props.strategy !== "cluster")
                report(`${where}: placement group ${pg.props.name ?? pg.name} has strategy ${pg.props.strategy}, not cluster.`, lt.urn);
            const ud = decodeUserData(lt.props.userData);
            if (!/LimitMEMLOCK=infinity/.test(ud))
                report(
                    `${where}: node bootstrap does not set containerd LimitMEMLOCK=infinity; RDMA memory registration hits containerd's 8 MiB default (nvidia-container-toolkit#2037).`,
                    lt.urn,
                );
            if (!/vm\.nr_hugepages\s*[=\s]\s*[1-9]/.test(ud))
                report(`${where}: node bootstrap reserves no 2 MiB huge pages (vm.nr_hugepages) for the EFA provider.`, lt.urn);
        }
    },
};

/**
 * On EFA nodes the NVIDIA device plugin must not mount every `/dev/infiniband/uverbs*` into GPU containers:
 * k8s-device-plugin >= 0.19 defaults `--mofed-enabled=true`, and the extra devices make libfabric's EFA provider
 * fail so NCCL runs on TCP (EKS user guide; aws-samples/aws-do-eks PR #63).
 */
export const efaGpuOperator: StackValidationPolicy = {
    name: "efa-gpu-operator-mofed-disabled",
    description: "A stack with EFA node groups must deploy the GPU Operator with devicePlugin MOFED_ENABLED=false.",
    remediationSteps: "Use GpuOperator with eksEfaAmi: true (devicePlugin.env MOFED_ENABLED=false).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const groups = efaNodeGroups(args.resources);
        if (groups.length === 0) return;
        const rels = helmReleases(args.resources, "gpu-operator");
        if (rels.length === 0) {
            report(
                `EFA node group(s) ${groups.map((g) => g.pool).join(", ")} but no gpu-operator Helm release: nothing advertises nvidia.com/gpu.`,
            );
            return;
        }
        for (const rel of rels) {
            const env = (rel.props.values?.devicePlugin?.env ?? []) as Array<{ name?: string; value?: string }>;
            if (!env.some((e) => e.name === "MOFED_ENABLED" && String(e.value).toLowerCase() === "false")) {
                report(
                    `Helm release ${rel.name} (gpu-operator): devicePlugin.env lacks MOFED_ENABLED=false; on EFA nodes the device plugin would mount every uverbs device into GPU containers and break libfabric's EFA provider.`,
                    rel.urn,
                );
            }
        }
    },
};

// ------------------------------------------------------------------ workloads

/** A pod template found in a workload, with where it came from. */
interface PodTemplate {
    owner: PolicyResource;
    where: string;
    componentType?: string;
    spec: Record<string, any>;
}

/** Pod templates of every workload, as the shared walker reads them (upstream/check/walk.ts `podTemplatesOf`). */
export function podTemplates(resources: PolicyResource[]): PodTemplate[] {
    const out: PodTemplate[] = [];
    for (const r of resources) {
        if (!r.type.startsWith("kubernetes:")) continue;
        const p = r.props ?? {};
        for (const t of podTemplatesOf(p))
            out.push({
                owner: r,
                where: t.dgd ? t.label : p.kind === "Pod" ? "pod" : t.label ? `${t.label} pod template` : "pod template",
                componentType: t.role,
                spec: t.spec,
            });
    }
    return out;
}

const envOf = (c: Record<string, any>): Record<string, string> =>
    Object.fromEntries(((c.env ?? []) as Array<{ name: string; value?: string }>).map((e) => [e.name, String(e.value ?? "")]));

/** True when the container declares KV/RDMA transport intent (libfabric, NIXL, UCX, NCCL or EFA resources). */
function isTransportContainer(c: Record<string, any>, componentType?: string): boolean {
    const env = envOf(c);
    const res = { ...(c.resources?.requests ?? {}), ...(c.resources?.limits ?? {}) };
    if (EFA_RESOURCE in res) return true;
    if (Object.keys(env).some((k) => /^(FI_|UCX_|NCCL_NET|NIXL_)|NIXL.*BACKEND/.test(k))) return true;
    return (componentType === "prefill" || componentType === "decode") && c.name === "main";
}

/**
 * Whether the pod lands on an EFA pool: it selects an EFA pool or `fabric=efa`, requests EFA devices, or the
 * stack's only GPU pools are EFA pools and the pod requests GPUs.
 */
function onEfa(spec: Record<string, any>, efaPools: Set<string>, otherPools: boolean): boolean {
    const sel = spec.nodeSelector ?? {};
    if (sel[LABELS.fabric] === "efa" || efaPools.has(sel[LABELS.pool])) return true;
    const containers = (spec.containers ?? []) as Array<Record<string, any>>;
    if (containers.some((c) => EFA_RESOURCE in (c.resources?.limits ?? {}) || EFA_RESOURCE in (c.resources?.requests ?? {}))) return true;
    const gpu = containers.some((c) => "nvidia.com/gpu" in (c.resources?.limits ?? {}));
    return gpu && !otherPools && !sel[LABELS.pool];
}

function positive(v: unknown): boolean {
    return Number(v) >= 1;
}

/** The NIXL backend problem for a container, or undefined when LIBFABRIC is selected for its engine. */
function nixlBackendProblem(c: Record<string, any>, env: Record<string, string>): string | undefined {
    for (const [k, v] of Object.entries(env)) {
        if (/NIXL.*BACKEND/.test(k) && v.toUpperCase() === "UCX")
            return `${k}=UCX: NIXL's UCX backend on EFA runs GPU puts in software emulation (ai-dynamo/nixl#909, openucx/ucx#10950); use LIBFABRIC`;
    }
    const argv = [...(c.command ?? []), ...(c.args ?? [])].map(String).join(" ");
    const kvCfg = /--kv-transfer-config[= ](\{.*?\})(?:\s|$)/.exec(argv)?.[1];
    if (kvCfg) {
        let backends: string[] = [];
        try {
            backends = JSON.parse(kvCfg)?.kv_connector_extra_config?.backends ?? [];
        } catch {
            /* reported below */
        }
        if (
            !backends.map((b) => String(b).toUpperCase()).includes("LIBFABRIC") ||
            backends.map((b) => String(b).toUpperCase()).includes("UCX")
        ) {
            return `vLLM --kv-transfer-config selects NIXL backends ${JSON.stringify(backends)}; on EFA it must be ["LIBFABRIC"] (default is UCX)`;
        }
        return undefined;
    }
    if (/sglang/i.test(argv) || "SGLANG_DISAGGREGATION_NIXL_BACKEND" in env || /--disaggregation-transfer-backend nixl/.test(argv)) {
        return env.SGLANG_DISAGGREGATION_NIXL_BACKEND === "LIBFABRIC"
            ? undefined
            : "SGLang on EFA needs SGLANG_DISAGGREGATION_NIXL_BACKEND=LIBFABRIC (its default is UCX)";
    }
    if (/trtllm|tensorrt_llm/i.test(argv) || "TRTLLM_NIXL_KVCACHE_BACKEND" in env) {
        return env.TRTLLM_NIXL_KVCACHE_BACKEND === "LIBFABRIC"
            ? undefined
            : "TensorRT-LLM on EFA needs TRTLLM_NIXL_KVCACHE_BACKEND=LIBFABRIC";
    }
    return undefined;
}

/**
 * KV transport on EFA pools cannot silently become TCP: each prefill/decode (or EFA-requesting) container
 * requests `vpc.amazonaws.com/efa` in requests and limits, pins libfabric to EFA (`FI_PROVIDER=efa`; NIXL's
 * libfabric backend otherwise takes the sockets provider and logs "TCP fallback" at INFO, nixl PR #833), selects
 * NIXL's LIBFABRIC backend (UCX on EFA emulates GPU puts in software), keeps NCCL on the aws-ofi-nccl plugin, and
 * runs privileged (IPC_LOCK alone is not enough for fi_mr_reg of GPU memory); disaggregated prefill and decode
 * pods repel each other on `nvidia.com/dynamo-component` (same node: `fi_read ... EAGAIN`).
 */
export const efaWorkloadTransport: StackValidationPolicy = {
    name: "efa-workload-transport",
    description:
        "Workers on EFA pools must request vpc.amazonaws.com/efa, set FI_PROVIDER=efa, use NIXL's LIBFABRIC backend (not UCX), keep NCCL on Libfabric, run privileged, and keep prefill and decode on different nodes via nvidia.com/dynamo-component anti-affinity.",
    remediationSteps:
        "Build workers with lib/nixl.ts (kvFabricOf on an EFA profile) and lib/dgd.ts; never set FI_PROVIDER to sockets/tcp or a NIXL backend to UCX on EFA.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const groups = efaNodeGroups(args.resources);
        const efaPools = new Set(groups.map((g) => g.pool));
        const otherPools =
            ofType(args.resources, "kubernetes:core/v1:NodePatch").length > 0 ||
            ofType(args.resources, EFA_TYPES.nodeGroup).some(
                (r) => r.props.labels?.[LABELS.fabric] && r.props.labels?.[LABELS.fabric] !== "efa",
            );
        const templates = podTemplates(args.resources);
        const relevant = templates.filter((t) => onEfa(t.spec, efaPools, otherPools));
        if (relevant.length === 0) return;
        for (const t of relevant) {
            const at = `${t.owner.name} ${t.where}`;
            for (const c of (t.spec.containers ?? []) as Array<Record<string, any>>) {
                if (!isTransportContainer(c, t.componentType)) continue;
                const env = envOf(c);
                const where = `${at} container ${c.name}`;
                if (!positive(defaultedRequests(c.resources)[EFA_RESOURCE]) || !positive(c.resources?.limits?.[EFA_RESOURCE])) {
                    report(
                        `${where}: runs on an EFA pool but does not limit ${EFA_RESOURCE} (a limit alone is enough: Kubernetes sets the request to it); without it no EFA device is injected and NIXL/NCCL fall back to TCP.`,
                        t.owner.urn,
                    );
                }
                if (env.FI_PROVIDER !== "efa") {
                    report(
                        `${where}: FI_PROVIDER is ${env.FI_PROVIDER === undefined ? "unset" : `"${env.FI_PROVIDER}"`}; it must be efa, or libfabric picks the sockets (TCP) provider and NIXL logs "TCP fallback" at INFO (ai-dynamo/nixl PR #833).`,
                        t.owner.urn,
                    );
                }
                const backend = nixlBackendProblem(c, env);
                if (backend) report(`${where}: ${backend}.`, t.owner.urn);
                if ("UCX_TLS" in env && env.UCX_PROTO_EMULATION_ENABLE !== "n") {
                    report(
                        `${where}: UCX on EFA (UCX_TLS=${env.UCX_TLS}) without UCX_PROTO_EMULATION_ENABLE=n emulates GPU puts in software (openucx/ucx#10950); use NIXL LIBFABRIC.`,
                        t.owner.urn,
                    );
                }
                if (env.NCCL_NET !== undefined && !/^(Libfabric|AWS Libfabric|OFI)$/i.test(env.NCCL_NET)) {
                    report(
                        `${where}: NCCL_NET=${env.NCCL_NET} on EFA; set NCCL_NET=Libfabric so a plugin failure is an error, not a fallback to Socket.`,
                        t.owner.urn,
                    );
                }
                if (c.securityContext?.privileged !== true) {
                    report(
                        `${where}: not privileged; on EFA, IPC_LOCK alone is insufficient for fi_mr_reg of GPU memory (Dynamo EFA guide).`,
                        t.owner.urn,
                    );
                }
            }
        }
        // Prefill/decode anti-affinity, per DGD with both phases on EFA.
        const byOwner = new Map<string, PodTemplate[]>();
        for (const t of relevant)
            if (t.componentType === "prefill" || t.componentType === "decode")
                byOwner.set(t.owner.urn, [...(byOwner.get(t.owner.urn) ?? []), t]);
        for (const ts of byOwner.values()) {
            if (!ts.some((t) => t.componentType === "prefill") || !ts.some((t) => t.componentType === "decode")) continue;
            for (const t of ts) {
                const terms = (t.spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? []) as Array<
                    Record<string, any>
                >;
                const keyed = terms.some((term) => {
                    const sel = term.labelSelector ?? {};
                    return (
                        DYNAMO_COMPONENT_LABEL in (sel.matchLabels ?? {}) ||
                        (sel.matchExpressions ?? []).some((e: { key?: string }) => e.key === DYNAMO_COMPONENT_LABEL)
                    );
                });
                if (!keyed) {
                    report(
                        `${t.owner.name} ${t.where} (${t.componentType}): no required podAntiAffinity on ${DYNAMO_COMPONENT_LABEL}; prefill and decode on one EFA node fail with "fi_read still retrying EAGAIN" (ai-dynamo/dynamo disagg-communication.md "Problem: EFA EAGAIN errors"; the operator sets no app.kubernetes.io/component on component pods).`,
                        t.owner.urn,
                    );
                }
            }
        }
    },
};

/** Huge-page resource of 2 MiB pages. */
export const HUGEPAGES_2MI = "hugepages-2Mi";

/**
 * EFA workers request their share of the node's 2 MiB huge pages (`hugepages-2Mi`), which the EFA provider uses: the
 * EFA driver pre-allocates 5,128 of them and pods should request them (EKS NCCL example requests 5120Mi for a full p5;
 * Mandatory since the generator (lib/dgd.ts with lib/efa.ts `efaWorkerHugepages`) requests
 * them for every EFA prefill/decode worker; before that nothing rendered them and the rule was advisory. Also checks
 * what the API server would refuse at pod creation, long after `pulumi up` succeeded on the DGD: huge pages must be
 * equal in requests and limits (not overcommittable), and a container with huge pages must request cpu or memory
 * ("HugePages require cpu or memory", kubernetes/kubernetes pkg/apis/core/validation).
 */
export const efaWorkloadHugepages: StackValidationPolicy = {
    name: "efa-workload-hugepages",
    description:
        "Prefill/decode workers on EFA pools must request hugepages-2Mi, equal in requests and limits, together with a cpu or memory request.",
    remediationSteps:
        "Request the worker's GPU share of the node's huge pages and a cpu request (lib/efa.ts efaWorkerHugepages, used by lib/dgd.ts).",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const efaPools = new Set(efaNodeGroups(args.resources).map((g) => g.pool));
        if (efaPools.size === 0) return;
        for (const t of podTemplates(args.resources).filter(
            (x) => (x.componentType === "prefill" || x.componentType === "decode") && onEfa(x.spec, efaPools, false),
        )) {
            for (const c of (t.spec.containers ?? []) as Array<Record<string, any>>) {
                if (c.name !== "main") continue;
                const where = `${t.owner.name} ${t.where} container ${c.name}`;
                const req = defaultedRequests(c.resources);
                const lim = c.resources?.limits ?? {};
                if (!req[HUGEPAGES_2MI]) {
                    report(
                        `${where}: no ${HUGEPAGES_2MI} request on an EFA pool; the EFA provider's huge pages are not accounted to the pod.`,
                        t.owner.urn,
                    );
                    continue;
                }
                if (String(req[HUGEPAGES_2MI]) !== String(lim[HUGEPAGES_2MI] ?? "")) {
                    report(
                        `${where}: ${HUGEPAGES_2MI} request ${req[HUGEPAGES_2MI]} differs from its limit ${lim[HUGEPAGES_2MI] ?? "(unset)"}; huge pages cannot be overcommitted, so the API server refuses the pod.`,
                        t.owner.urn,
                    );
                }
                if (!["cpu", "memory"].some((k) => k in req || k in lim)) {
                    report(
                        `${where}: requests ${HUGEPAGES_2MI} without cpu or memory; the API server refuses the pod ("HugePages require cpu or memory").`,
                        t.owner.urn,
                    );
                }
            }
        }
    },
};

/** The EFA policies of the RDMA guard. */
export const efaPolicies = [efaPluginAllowlist, efaLaunchTemplate, efaGpuOperator, efaWorkloadTransport, efaWorkloadHugepages];
