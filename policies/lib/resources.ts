import type { PolicyResource } from "@pulumi/policy";
import { FABRIC_LABEL, FRONTEND_NICS_ANNOTATION, MEMLOCK_LABEL, POOL_LABEL, RAIL_TABLE_ANNOTATION } from "../../lib/labels";

/**
 * Small helpers over the resources a stack policy sees. Label keys are the product's own, from their one definition
 * (lib/labels.ts, which loads no package).
 */
export const LABELS = {
    pool: POOL_LABEL,
    fabric: FABRIC_LABEL,
    memlock: MEMLOCK_LABEL,
    railTable: RAIL_TABLE_ANNOTATION,
    frontendNics: FRONTEND_NICS_ANNOTATION,
} as const;

/** Pulumi type tokens the policies look at. */
export const TYPES = {
    nodePatch: "kubernetes:core/v1:NodePatch",
    nicClusterPolicy: "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy",
    helmRelease: "kubernetes:helm.sh/v3:Release",
    configMap: "kubernetes:core/v1:ConfigMap",
} as const;

/** One rail of a pool's rail table as published in the node annotation. */
export interface RailEntry {
    rail: number;
    gpu: number;
    gpuPciAddress: string;
    hca: string;
    netdev: string;
    pciAddress: string;
    numa: number;
    linkLayer: string;
    linkRateGbps: number;
}

/** A node pool as reconstructed from the NodePatch resources of a stack. */
export interface PoolView {
    name: string;
    fabric: string;
    memlockUnlimited: boolean;
    rails: RailEntry[];
    frontendHcas: string[];
    /** A resource of the pool to attach violations to. */
    urn: string;
    nodes: string[];
    /**
     * EKS GPU node groups only: the node group runs an EKS-optimized accelerated NVIDIA AMI, which ships the NVIDIA
     * driver and the host components EFA needs, GPUDirect included (EKS user guide "Use EKS-optimized AMIs with EFA";
     * the AMI loads `efa_nv_peermem`, awslabs/amazon-eks-ami release v20260610), so GPUDirect RDMA does not come from
     * the GPU Operator there (its driver is off on these AMIs).
     */
    gpuDirectFromAmi?: boolean;
}

/** `aws.eks.NodeGroup.amiType` values of the EKS-optimized accelerated NVIDIA AMIs (AL2023 and Bottlerocket). */
export const EKS_NVIDIA_AMI_TYPES = [
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
] as const;

/**
 * Pure: the resources of Pulumi type token `type` exactly (`kubernetes:core/v1:Node`, `aws:eks/nodeGroup:NodeGroup`),
 * in input order. Never throws.
 */
export function ofType(resources: PolicyResource[], type: string): PolicyResource[] {
    return resources.filter((r) => r.type === type);
}

/**
 * The resource of `type` that `r` depends on (e.g. a node group's launch template). Found through the dependency
 * graph, which is known in preview even where the reference itself (`launchTemplate.id`) is still being computed.
 */
export function dependencyOfType(r: PolicyResource, type: string): PolicyResource | undefined {
    return (r.dependencies ?? []).find((d) => d.type === type);
}

function parseJson<T>(text: unknown, fallback: T): T {
    if (typeof text !== "string") return fallback;
    try {
        return JSON.parse(text) as T;
    } catch {
        return fallback;
    }
}

/** Node pools of the stack, from NodePatch labels and the rail-table annotation. */
export function nodePools(resources: PolicyResource[]): PoolView[] {
    const pools = new Map<string, PoolView>();
    for (const r of ofType(resources, TYPES.nodePatch)) {
        const md = r.props.metadata ?? {};
        const labels = md.labels ?? {};
        const pool = labels[LABELS.pool];
        if (!pool) continue;
        const ann = md.annotations ?? {};
        const existing = pools.get(pool);
        if (existing) {
            existing.nodes.push(md.name);
            continue;
        }
        pools.set(pool, {
            name: pool,
            fabric: labels[LABELS.fabric] ?? "",
            memlockUnlimited: labels[LABELS.memlock] === "true",
            rails: parseJson<RailEntry[]>(ann[LABELS.railTable], []),
            frontendHcas: parseJson<Array<{ hca: string }>>(ann[LABELS.frontendNics], []).map((f) => f.hca),
            urn: r.urn,
            nodes: [md.name],
        });
    }
    return [...pools.values()];
}

/** Pulumi types that install a Helm chart from `chart`/`version`/`values` inputs. */
export const HELM_TYPES = ["kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart"] as const;

/**
 * The chart name a `chart` input refers to, however it is written: `gpu-operator`, `nvidia/gpu-operator`
 * (repo/chart), `oci://registry/path/gpu-operator`, or a package URL/path `.../gpu-operator-v25.10.1.tgz`.
 */
export function chartName(chart: unknown): string {
    const s = String(chart ?? "")
        .trim()
        .replace(/\/+$/, "");
    const last = s.split("/").pop() ?? s;
    const tgz = /^(.*?)-v?\d+\.\d+\.\d+[^/]*\.tgz$/.exec(last);
    return tgz ? tgz[1] : last;
}

/** Helm releases (v3 Release, v4 Chart) of a given chart name, whatever form the chart reference takes. */
export function helmReleases(resources: PolicyResource[], chart: string): PolicyResource[] {
    return resources.filter((r) => (HELM_TYPES as readonly string[]).includes(r.type) && chartName(r.props.chart) === chart);
}
