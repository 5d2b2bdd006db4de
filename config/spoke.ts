import { z } from "zod";
import { UnlistedAwsRegionsSchema } from "./aws-region";
import { parseCidr } from "./cidr";
import { EfaBackendSchema, EksClusterSchema, type EksCluster, type EksNodeGroups, EksNodeGroupsSchema } from "./eks";
import { DnsLabel } from "./endpoint";
import { edgeIssues } from "./edge";
import { GatewayConfigSchema } from "./gateway";
import { MeteringConfigSchema } from "./metering";
import type { NodeProfile } from "./nodeProfile";
import { ObservabilityConfigSchema } from "./observability";
import { ServingConfigSchema } from "./serving";

const Cidr = z.string().refine(
    (s) => {
        try {
            parseCidr(s);
            return true;
        } catch {
            return false;
        }
    },
    { message: "must be an IPv4 CIDR with no host bits set, e.g. 10.64.0.0/16" },
);

/** An on-prem GPU node pool (`platform:nodePools[]`): named nodes sharing one node profile. */
export const NodePoolSchema = z
    .object({
        name: DnsLabel,
        /** A preset name from `config/node-profiles/` or an inline profile (same shape as a preset file). */
        profile: z.union([z.string(), z.record(z.string(), z.unknown())]),
        /** Kubernetes node names (hostnames) in this pool. */
        nodes: z.array(z.string().min(1)).min(1),
        /**
         * True when node bootstrap sets `LimitMEMLOCK=infinity` for containerd and kubelet, so RDMA
         * processes can pin memory without running as root.
         */
        memlockUnlimited: z.boolean().default(false),
    })
    .strict();

/** `platform:cluster` of an on-prem spoke: an existing Kubernetes cluster reached through a kubeconfig context. */
export const OnPremClusterSchema = z
    .object({
        provider: z.literal("onprem"),
        /** kubeconfig context for the Kubernetes provider; unset uses the ambient kubeconfig. */
        kubeconfigContext: z.string().optional(),
        podCidr: Cidr,
        serviceCidr: Cidr,
    })
    .strict();

/** `platform:backend` of an on-prem spoke: rail-aligned InfiniBand. */
export const InfinibandBackendSchema = z
    .object({
        fabric: z.literal("infiniband"),
        /** Pods that may share one rail HCA through the RDMA shared device plugin (`rdmaHcaMax`). */
        rdmaHcaMax: z.number().int().min(1).max(1000).default(63),
        /**
         * Block carved into one IP pool per rail (rail i gets the i-th /railPrefixLength). Reserved and checked (no
         * overlap with the cluster's or other spokes' networks) always; rendered as IPPools only with `railNetworks`.
         */
        railSupernet: Cidr,
        railPrefixLength: z.number().int().min(16).max(28).default(20),
        /** Addresses nv-ipam hands each node per rail pool. */
        perNodeBlockSize: z.number().int().min(2).max(4096).default(16),
        /** Minimum port rate in Gb/s every rail HCA must report (NDR = 400); checked by profile and preflight. */
        minLinkRateGbps: z.number().int().positive().default(400),
        /**
         * Render the per-rail IP networks (docs/architecture.md "Rail networks"): NicClusterPolicy
         * `secondaryNetwork` (Multus, IPoIB CNI) and `nvIpam`, one nv-ipam IPPool per rail carved from `railSupernet`,
         * one IPoIBNetwork `<pool>-rail-<i>` per pool and rail in the inference namespace. Only RDMA CM needs an IP on a
         * rail (UCX `UCX_SOCKADDR_TLS_PRIORITY=rdmacm`, rdma_cm tools): the platform's own workloads (NIXL over UCX
         * verbs, Mooncake's transfer engine, NCCL) address the HCAs by LID/GID and handshake over the pod network, so
         * the default renders none of it. A network only takes effect in a pod whose `k8s.v1.cni.cncf.io/networks`
         * annotation names it (upstream/activation.ts `ipoib-rail-networks`); the policy pack's `rdma-cm-rail-networks`
         * refuses an RDMA CM workload that does not attach its rails' networks.
         */
        railNetworks: z.boolean().default(false),
    })
    .strict();

/** `platform:frontend` of an on-prem spoke: the north-south Ethernet. */
export const FrontendSchema = z
    .object({
        /** Node addresses on the north-south Ethernet. */
        subnet: Cidr,
        /** Per-port rate in Gb/s (2 x 200 GbE per node). */
        linkRateGbps: z.number().int().positive().default(200),
    })
    .strict();

/** The `platform:*` keys of a spoke stack file (`platform:role: spoke`), on-prem or EKS. */
export const SpokeConfigSchema = z
    .object({
        role: z.literal("spoke"),
        spoke: z
            .object({
                /** Must equal a `platform:spokes[].name` of the hub. */
                name: DnsLabel,
                region: z.string().min(1),
                /** Hub stack, fully qualified for real runs (`organization/platform/hub-prod`). */
                hubStack: z.string().min(1),
                /**
                 * Key ids (16 hex characters each) of the hub's signing key, as its `publication.keyId` output shows:
                 * the spoke accepts only published hub outputs signed by one of them (lib/hub-publication.ts). Required
                 * for every real run (an offline render reads its mock hub without it); two during a key rotation
                 * (the old and the new key), one otherwise.
                 */
                hubKeyIds: z
                    .array(z.string().regex(/^[0-9a-f]{16}$/, "16 lower-case hex characters (the hub's publication.keyId output)"))
                    .min(1)
                    .max(4)
                    .optional(),
                /** Deprecated, read for compatibility: a single {@link hubKeyIds} entry (both may be given; their union counts). */
                hubKeyId: z
                    .string()
                    .regex(/^[0-9a-f]{16}$/, "16 lower-case hex characters (the hub's publication.keyId output)")
                    .optional(),
            })
            .strict(),
        /** `provider: onprem` (an existing cluster) or `provider: eks` (created here, config/eks.ts). */
        cluster: z.discriminatedUnion("provider", [OnPremClusterSchema, EksClusterSchema]),
        /** On-prem only: pools of named hosts. */
        nodePools: z.array(NodePoolSchema).min(1).optional(),
        /** EKS only: managed node groups (GPU groups with EFA, one CPU group). */
        nodeGroups: EksNodeGroupsSchema.optional(),
        /** `fabric: infiniband` (on-prem) or `fabric: efa` (EKS). */
        backend: z.discriminatedUnion("fabric", [InfinibandBackendSchema, EfaBackendSchema]),
        /** On-prem only: the north-south Ethernet (on EKS it is the VPC). */
        frontend: FrontendSchema.optional(),
        gpuOperator: z
            .object({
                /**
                 * GPUDirect RDMA kernel path: `dmabuf` (recommended; open GPU kernel modules, Linux >= 5.12) or
                 * legacy `peermem` (nvidia-peermem, needs MLNX/DOCA OFED) — NVIDIA cloud-native-docs gpu-operator-rdma.
                 */
                gpuDirectRdma: z.enum(["dmabuf", "peermem"]).default("dmabuf"),
                /**
                 * True when the host (not the DOCA driver container) provides the NIC drivers (`driver.rdma.useHostMofed`). Only
                 * read with `peermem`: the GPU Operator ignores it unless `driver.rdma.enabled` (components/spoke/GpuOperator.ts).
                 */
                useHostMofed: z.boolean().default(false),
            })
            .strict()
            .refine((g) => !g.useHostMofed || g.gpuDirectRdma === "peermem", {
                message:
                    "useHostMofed only takes effect with gpuDirectRdma peermem (the GPU Operator reads driver.rdma.useHostMofed only when driver.rdma.enabled); remove it for dmabuf",
                path: ["useHostMofed"],
            })
            .default({ gpuDirectRdma: "dmabuf", useHostMofed: false }),
        /** Agent Router / auth service settings (config/gateway.ts); optional, every field defaulted. */
        gateway: GatewayConfigSchema.prefault({}),
        /** Dynamo platform install and endpoint -> node pool mapping (config/serving.ts); optional, every field defaulted. */
        serving: ServingConfigSchema.prefault({}),
        /** Metering service and access-log collector (config/metering.ts); optional, every field defaulted. */
        metering: MeteringConfigSchema.prefault({}),
        /** Dashboards, alerts and scrape objects (config/observability.ts); optional, every field defaulted. */
        observability: ObservabilityConfigSchema.prefault({}),
        /**
         * Regions newer than the pinned AWS SDK that this file names (EKS `platform:cluster.region` / `aws:region`, Route 53
         * regions of the listener): a region the SDK does not list is otherwise refused as a typo (config/aws-region.ts;
         * `npm run new-spoke -- --unlisted-region` writes it). Remove an entry once the SDK lists it (it is refused then).
         */
        unlistedAwsRegions: UnlistedAwsRegionsSchema.optional(),
    })
    .strict()
    .superRefine((s, ctx) => {
        const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
        for (const x of edgeIssues(s.cluster.provider, s.gateway.listener)) issue(x.path, x.message);
        if (s.cluster.provider === "onprem") {
            if (s.backend.fabric !== "infiniband")
                issue(["backend", "fabric"], "an on-prem spoke uses fabric: infiniband (efa is for provider: eks)");
            if (!s.nodePools) issue(["nodePools"], "an on-prem spoke needs nodePools (named hosts per pool)");
            if (!s.frontend) issue(["frontend"], "an on-prem spoke needs frontend (the north-south subnet)");
            if (s.nodeGroups) issue(["nodeGroups"], "nodeGroups are for provider: eks; an on-prem spoke lists its hosts in nodePools");
            return;
        }
        if (s.backend.fabric !== "efa") issue(["backend", "fabric"], "an EKS spoke uses fabric: efa (infiniband is for provider: onprem)");
        if (!s.nodeGroups) issue(["nodeGroups"], "an EKS spoke needs nodeGroups (gpu and cpu)");
        if (s.nodePools) issue(["nodePools"], "nodePools are for provider: onprem; an EKS spoke declares nodeGroups");
        if (s.frontend) issue(["frontend"], "frontend is for provider: onprem; an EKS spoke's north-south network is its VPC");
        if (s.spoke.region !== s.cluster.region)
            issue(["spoke", "region"], `must equal platform:cluster.region (${s.cluster.region}) on an EKS spoke`);
    });

/** A spoke file's `platform:*` keys as the schema parses them ({@link SpokeConfigSchema}), before profiles are resolved. */
export type SpokeConfigRaw = z.infer<typeof SpokeConfigSchema>;
/** One `platform:nodePools[]` entry as parsed ({@link NodePoolSchema}), its profile not yet resolved. */
export type NodePoolRaw = z.infer<typeof NodePoolSchema>;
/** `platform:cluster` of an on-prem spoke as parsed ({@link OnPremClusterSchema}). */
export type OnPremCluster = z.infer<typeof OnPremClusterSchema>;
/** `platform:backend` of an on-prem spoke as parsed ({@link InfinibandBackendSchema}): the InfiniBand rail fabric. */
export type InfinibandBackend = z.infer<typeof InfinibandBackendSchema>;
/** `platform:backend` of an EKS spoke as parsed ({@link EfaBackendSchema}): EFA. */
export type EfaBackend = z.infer<typeof EfaBackendSchema>;
/** `platform:frontend` of an on-prem spoke as parsed ({@link FrontendSchema}): the north-south Ethernet subnet and per-port rate (Gb/s). */
export type Frontend = z.infer<typeof FrontendSchema>;

/** A node pool with its profile resolved and validated. On EKS, `nodes` is empty (managed node groups scale). */
export type NodePool = Omit<NodePoolRaw, "profile"> & { profile: NodeProfile };

/** One rail's IP pool: rail index and the subnet all nodes' rail-i ports share (leaf i, one flat IB subnet, no gateway). */
export interface RailPool {
    rail: number;
    subnet: string;
}

type SpokeCommon = Omit<SpokeConfigRaw, "cluster" | "backend" | "nodePools" | "nodeGroups" | "frontend"> & {
    nodePools: NodePool[];
    railPools: RailPool[];
};

/** A validated on-prem spoke: InfiniBand rails, named hosts, frontend subnet. */
export type OnPremSpokeConfig = SpokeCommon & {
    cluster: OnPremCluster;
    backend: InfinibandBackend;
    frontend: Frontend;
    nodeGroups?: undefined;
};

/**
 * A validated EKS spoke: EFA backend. `nodePools` holds one pool per GPU node group (profile from the instance
 * type, no hosts); `railPools` is empty (no IB rails).
 */
export type EksSpokeConfig = SpokeCommon & { cluster: EksCluster; backend: EfaBackend; nodeGroups: EksNodeGroups; frontend?: undefined };

/** A validated spoke config, on-prem or EKS (config/stack.ts `parseFlatStackConfig`, resolved by config/resolve-spoke.ts); `cluster.provider` tells which. */
export type SpokeConfig = OnPremSpokeConfig | EksSpokeConfig;

/** Narrows a spoke config to the EKS variant. */
export function isEksSpoke(c: SpokeConfig): c is EksSpokeConfig {
    return c.cluster.provider === "eks";
}
