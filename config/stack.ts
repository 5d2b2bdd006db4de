import { z } from "zod";
import { parseCidr, findOverlaps, subnet, Cidr } from "../lib/cidr";
import { ConfigError, ConfigIssue, nearest, zodIssues } from "./errors";
import { KNOWN_MODELS, tensorParallelProblem } from "./models";
import { plainCredentials } from "./secrets";
import { EfaBackendSchema, EksClusterSchema, EksCluster, EksNodeGroups, EksNodeGroupsSchema, profileNameFor } from "./eks";
import { DnsLabel, EndpointSchema, endpointGpus, endpointUpstreamIssues } from "./endpoint";
import { GatewayConfigSchema } from "./gateway";
import { ServingConfigSchema } from "./serving";
import { MeteringConfigSchema, UsageLedgerConfigSchema } from "./metering";
import { ObservabilityConfigSchema } from "./observability";
import { LimitSet, LimitSetSchema } from "./limits";
import { NodeProfile, NodeProfileSchema, presetProfiles } from "./nodeProfile";

/** Config namespace of every platform key in a stack file (`platform:role`, `platform:nodePools`, ...). */
export const CONFIG_NAMESPACE = "platform";

const Cidr = z.string().refine((s) => { try { parseCidr(s); return true; } catch { return false; } },
    { message: "must be an IPv4 CIDR with no host bits set, e.g. 10.64.0.0/16" });

// ---------------------------------------------------------------- hub

/** A GPU cluster the hub may place endpoints on. Its spoke stack file sets `platform:spoke.name` to `name`. */
export const SpokeRefSchema = z.object({
    name: DnsLabel,
    /** Stack name of the spoke (its file is `stacks/Pulumi.<stack>.yaml`). */
    stack: z.string().min(1),
    /** Where the cluster is (cloud region or site), for humans and dashboards. */
    region: z.string().min(1),
    provider: z.enum(["onprem", "eks"]),
    /** GPUs the spoke can schedule; placement beyond this is rejected. */
    gpus: z.number().int().positive(),
}).strict();

export const ModelSchema = z.object({
    /** Model id as clients send it (`model` in the request body). */
    id: z.string().min(1),
    /** Platform-wide limits for this model, the first of the three tiers. */
    limits: LimitSetSchema,
}).strict();

export const TeamSchema = z.object({ id: DnsLabel, limits: LimitSetSchema }).strict();
export const TenantSchema = z.object({ id: DnsLabel, displayName: z.string().min(1), teams: z.array(TeamSchema).min(1) }).strict();

/**
 * An API key's metadata. The key itself is minted by the hub (`@pulumi/random`), kept as a Pulumi
 * secret, and only its SHA-256 leaves the hub (in the signed policy bundle).
 */
export const ApiKeySchema = z.object({
    id: DnsLabel,
    tenant: DnsLabel,
    team: DnsLabel,
    /** Model ids this key may call; each must be in `platform:models`. */
    models: z.array(z.string().min(1)).min(1),
    /** Expiry as an ISO-8601 timestamp; the auth service answers 401 after it. */
    expiresAt: z.string().datetime({ offset: true }),
    limits: LimitSetSchema,
}).strict();

const AccountId = z.string().regex(/^\d{12}$/, "must be a 12-digit AWS account id");
const IamRoleArn = z.string().regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/, "must be an IAM role ARN like arn:aws:iam::111122223333:role/spoke-deployer");
const DateOnly = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date like 2026-11-30");

/** One IAM access key slot of an on-prem spoke without a CA (see {@link SpokeIdentityConfigSchema}). */
export const AccessKeySlotSchema = z.object({
    /** Slot id, part of the IAM user and secret names (`platform-spoke-<spoke>-<id>`); e.g. the month it was issued. */
    id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,15}$/, "must be a short lower-case id like 2026-11"),
    /** Day the slot was added (UTC). The key stops assuming the spoke role `maxKeyAgeDays` later (IAM `aws:CurrentTime`). */
    createdAt: DateOnly.optional(),
}).strict();

/**
 * `platform:spokeIdentities.<spoke>` of the hub: how a spoke obtains its AWS identity (components/hub/SpokeIdentity.ts).
 * - `pod-identity` (EKS default): EKS Pod Identity, trust limited by `aws:SourceAccount` / `aws:SourceArn` to the
 *   spoke's cluster; no key exists.
 * - `roles-anywhere` (on-prem with a CA): IAM Roles Anywhere trust anchor (the site's CA bundle) and profile; the
 *   spoke's workloads present a certificate whose CN is `certificateCn`.
 * - `access-key` (on-prem without a CA, the default there): an IAM user per key slot whose only right is assuming the
 *   spoke role, its key written to a Secrets Manager secret only `deployerRoleArn` may read; rotated in two phases
 *   (add a slot, point `activeKey` at it and roll the spoke, remove the old slot).
 */
export const SpokeIdentityConfigSchema = z.discriminatedUnion("mode", [
    z.object({
        mode: z.literal("pod-identity"),
        /** Account of the spoke's EKS cluster; default the hub's account. */
        accountId: AccountId.optional(),
    }).strict(),
    z.object({
        mode: z.literal("roles-anywhere"),
        /** PEM bundle of the site CA that issues the spoke's workload certificates. */
        caBundle: z.string().includes("-----BEGIN CERTIFICATE-----", { message: "must be a PEM certificate bundle" }),
        /** Subject CN the spoke's certificate must carry; default `platform-spoke-<spoke>`. */
        certificateCn: z.string().min(1).optional(),
        /** The site's egress ranges; when set, the role can be used only from them (`aws:SourceIp`). */
        egressCidrs: z.array(z.string().min(1)).default([]),
    }).strict(),
    z.object({
        mode: z.literal("access-key"),
        /** The spoke's deployer role: the only principal that may read the key's secret. Default `role/platform-spoke-deployer-<spoke>` in the hub account. */
        deployerRoleArn: IamRoleArn.optional(),
        /** One or two slots (two only while rotating). */
        keys: z.array(AccessKeySlotSchema).min(1).max(2).default([{ id: "k1" }]),
        /** Slot id the spoke uses (its secret is named in the contract); default the first slot. */
        activeKey: z.string().optional(),
        /** Maximum key age in days from the slot's `createdAt`. */
        maxKeyAgeDays: z.number().int().min(1).max(365).default(90),
        egressCidrs: z.array(z.string().min(1)).default([]),
    }).strict().superRefine((c, ctx) => {
        const ids = c.keys.map((k) => k.id);
        if (new Set(ids).size !== ids.length) ctx.addIssue({ code: "custom", path: ["keys"], message: "duplicate key slot id" });
        if (c.activeKey !== undefined && !ids.includes(c.activeKey)) ctx.addIssue({ code: "custom", path: ["activeKey"], message: `"${c.activeKey}" is not one of the key slots (${ids.join(", ")})` });
    }),
]);
export type SpokeIdentityConfig = z.infer<typeof SpokeIdentityConfigSchema>;

/** `platform:alarms` of the hub: where CloudWatch alarms (failure queue, iterator age, reconciliation gaps) notify. */
export const HubAlarmsSchema = z.object({
    /** An SNS topic the operator owns (subscriptions: pager, mail). */
    topicArn: z.string().regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$/, "must be an SNS topic ARN like arn:aws:sns:ap-southeast-1:111122223333:platform-alarms"),
    /** Consumer iterator age that alarms, seconds (usage older than this has not reached the ledger). */
    iteratorAgeSeconds: z.number().int().min(60).default(3600),
    /** EventBridge schedule of the reconciliation (services/reconciler). */
    reconcileSchedule: z.string().regex(/^(rate|cron)\(.+\)$/, "must be an EventBridge schedule expression like rate(1 hour)").default("rate(1 hour)"),
    /** Hours the reconciliation looks back on each run. */
    reconcileLookbackHours: z.number().int().min(1).max(24 * 35).default(48),
}).strict();
export type HubAlarms = z.infer<typeof HubAlarmsSchema>;

export const HubConfigSchema = z.object({
    role: z.literal("hub"),
    spokes: z.array(SpokeRefSchema).min(1),
    models: z.array(ModelSchema).min(1),
    tenants: z.array(TenantSchema).min(1),
    apiKeys: z.array(ApiKeySchema),
    endpoints: z.array(EndpointSchema),
    /** Usage ledger (config/metering.ts); optional, every field defaulted. */
    usage: UsageLedgerConfigSchema.prefault({}),
    /** Spoke name -> how it obtains its AWS identity (default: pod-identity on EKS, access-key on-prem). */
    spokeIdentities: z.record(z.string(), SpokeIdentityConfigSchema).default({}),
    /** Alarm destination (required: usage that cannot reach the ledger must page someone). */
    alarms: HubAlarmsSchema,
}).strict().superRefine((h, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
    const dupes = <T>(items: T[], key: (t: T) => string, path: string, what: string) => {
        const seen = new Map<string, number>();
        items.forEach((it, i) => {
            const k = key(it);
            if (seen.has(k)) issue([path, i], `duplicate ${what} "${k}" (also ${path}[${seen.get(k)}])`);
            else seen.set(k, i);
        });
    };
    dupes(h.spokes, (s) => s.name, "spokes", "spoke name");
    for (const [name, id] of Object.entries(h.spokeIdentities)) {
        const s = h.spokes.find((x) => x.name === name);
        if (!s) issue(["spokeIdentities", name], `unknown spoke "${name}" (known: ${h.spokes.map((x) => x.name).join(", ")})`);
        else if (s.provider === "eks" && id.mode !== "pod-identity") issue(["spokeIdentities", name, "mode"], `an EKS spoke uses pod-identity (no long-lived key), not ${id.mode}`);
        else if (s.provider === "onprem" && id.mode === "pod-identity") issue(["spokeIdentities", name, "mode"], "pod-identity is for EKS spokes; an on-prem spoke uses roles-anywhere (CA bundle) or access-key");
    }
    dupes(h.spokes, (s) => s.stack, "spokes", "spoke stack");
    dupes(h.models, (m) => m.id, "models", "model id");
    dupes(h.tenants, (t) => t.id, "tenants", "tenant id");
    dupes(h.apiKeys, (k) => k.id, "apiKeys", "API key id");
    dupes(h.endpoints, (e) => `${e.spoke}/${e.name}`, "endpoints", "endpoint (spoke/name)");
    h.tenants.forEach((t, i) => dupes(t.teams, (x) => x.id, `tenants[${i}].teams` as string, "team id"));

    const models = new Set(h.models.map((m) => m.id));
    const spokes = new Map(h.spokes.map((s) => [s.name, s]));
    const teams = new Set(h.tenants.flatMap((t) => t.teams.map((x) => `${t.id}/${x.id}`)));
    h.apiKeys.forEach((k, i) => {
        if (!h.tenants.some((t) => t.id === k.tenant)) issue(["apiKeys", i, "tenant"], `unknown tenant "${k.tenant}"`);
        else if (!teams.has(`${k.tenant}/${k.team}`)) issue(["apiKeys", i, "team"], `tenant "${k.tenant}" has no team "${k.team}"`);
        k.models.forEach((m, j) => { if (!models.has(m)) issue(["apiKeys", i, "models", j], `unknown model "${m}" (known: ${[...models].join(", ")})`); });
    });
    const gpusBySpoke = new Map<string, number>();
    h.endpoints.forEach((e, i) => {
        if (!models.has(e.model)) issue(["endpoints", i, "model"], `unknown model "${e.model}" (known: ${[...models].join(", ")})`);
        if (!spokes.has(e.spoke)) issue(["endpoints", i, "spoke"], `placement on unknown spoke "${e.spoke}" (known: ${[...spokes.keys()].join(", ")})`);
        gpusBySpoke.set(e.spoke, (gpusBySpoke.get(e.spoke) ?? 0) + endpointGpus(e));
    });
    for (const [name, used] of gpusBySpoke) {
        const s = spokes.get(name);
        if (s && used > s.gpus) {
            // Name every endpoint on the spoke (the one whose replicas grew is among them), or only the one that
            // alone exceeds the spoke: the other endpoints are not what to fix.
            const on = h.endpoints.map((e, i) => ({ e, i, n: endpointGpus(e) })).filter((x) => x.e.spoke === name);
            const alone = on.filter((x) => x.n > s.gpus);
            const list = on.map((x) => `endpoints[${x.i}] ${x.e.name}: ${x.n}`).join(", ");
            for (const x of alone.length ? alone : on) {
                issue(["endpoints", x.i, "topology"], `spoke "${name}" has ${s.gpus} GPUs but its endpoints need ${used} (${list}); this endpoint uses ${x.n}`);
            }
        }
    }
});

export type HubConfig = z.infer<typeof HubConfigSchema>;

/** Limit dimensions compared between tiers; tokens as a rate (per window second) so windows may differ. */
const LIMIT_DIMENSIONS: Array<[string, (l: LimitSet) => number, (l: LimitSet) => string]> = [
    ["requestsPerSecond", (l) => l.requestsPerSecond, (l) => `${l.requestsPerSecond}`],
    ["concurrentRequests", (l) => l.concurrentRequests, (l) => `${l.concurrentRequests}`],
    ["tokensPerWindow", (l) => l.tokensPerWindow / l.windowSeconds, (l) => `${l.tokensPerWindow} per ${l.windowSeconds} s`],
];

/** One issue per dimension where `inner` allows more than `outer` (a tier that can never be reached is a config error). */
function limitsAbove(inner: LimitSet, outer: LimitSet, innerKey: string, outerName: string, outerKey: string): ConfigIssue[] {
    return LIMIT_DIMENSIONS.filter(([, v]) => v(inner) > v(outer)).map(([dim, , show]) => ({
        key: `${innerKey}.${dim}`,
        message: `${show(inner)} is above ${outerName}'s ${show(outer)} (${outerKey}.${dim}); every request must pass all three tiers, so this limit can never be reached`,
    }));
}

/**
 * Checks of a parsed hub that need more than one field or the clock: API keys not expired, key limits within their
 * team's and the models they may call, team limits within some model's, tensor-parallel sizes the model can split
 * into and context lengths within the model's (config/models.ts), and planner budgets at least what the endpoint
 * already uses.
 *
 * @param now the time expiry is judged at
 * @returns issues with full keys (`platform:apiKeys[0].expiresAt`)
 */
export function hubSemanticIssues(h: HubConfig, now: Date): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const models = new Map(h.models.map((m, i) => [m.id, { m, i }]));
    h.apiKeys.forEach((k, i) => {
        const key = `platform:apiKeys[${i}]`;
        if (Date.parse(k.expiresAt) <= now.getTime()) {
            issues.push({ key: `${key}.expiresAt`, message: `API key "${k.id}" expired at ${k.expiresAt}; the auth service would answer 401 to every request: renew it (a later expiresAt) or remove the key` });
        }
        const ti = h.tenants.findIndex((t) => t.id === k.tenant);
        const tj = ti < 0 ? -1 : h.tenants[ti].teams.findIndex((x) => x.id === k.team);
        if (tj >= 0) issues.push(...limitsAbove(k.limits, h.tenants[ti].teams[tj].limits, `${key}.limits`, `team "${k.tenant}/${k.team}"`, `platform:tenants[${ti}].teams[${tj}].limits`));
        for (const id of k.models) {
            const m = models.get(id);
            if (m) issues.push(...limitsAbove(k.limits, m.m.limits, `${key}.limits`, `model "${id}"`, `platform:models[${m.i}].limits`));
        }
    });
    if (h.models.length) {
        h.tenants.forEach((t, ti) => t.teams.forEach((x, tj) => {
            for (const [dim, v, show] of LIMIT_DIMENSIONS) {
                const most = h.models.reduce((a, m, i) => (v(m.limits) > v(h.models[a].limits) ? i : a), 0);
                if (v(x.limits) > v(h.models[most].limits)) {
                    issues.push({ key: `platform:tenants[${ti}].teams[${tj}].limits.${dim}`, message: `${show(x.limits)} is above every model's limit (highest: ${show(h.models[most].limits)} at platform:models[${most}].limits.${dim}); this team limit can never be reached` });
                }
            }
        }));
    }
    h.endpoints.forEach((e, i) => {
        const key = `platform:endpoints[${i}]`;
        const arch = KNOWN_MODELS[e.model];
        if (arch) {
            const groups = e.topology.mode === "disaggregated" ? [["prefill", e.topology.prefill] as const, ["decode", e.topology.decode] as const] : [["workers", e.topology.workers] as const];
            for (const [role, g] of groups) {
                const p = tensorParallelProblem(arch, g.gpusPerWorker);
                if (p) issues.push({ key: `${key}.topology.${role}.gpusPerWorker`, message: `${e.model}: ${p}; the engine refuses to start (${arch.source})` });
            }
            if (e.maxModelLen !== undefined && e.maxModelLen > arch.maxPositionEmbeddings) {
                issues.push({ key: `${key}.maxModelLen`, message: `${e.maxModelLen} tokens is beyond ${e.model}'s max_position_embeddings ${arch.maxPositionEmbeddings}; the engine refuses it (${arch.source})` });
            }
        }
        issues.push(...endpointUpstreamIssues(e, key));
        const used = endpointGpus(e);
        if (e.planner.enabled && e.planner.maxGpuBudget < used) {
            issues.push({ key: `${key}.planner.maxGpuBudget`, message: `${e.planner.maxGpuBudget} GPUs is below the ${used} the endpoint already uses at its configured replicas (platform:endpoints[${i}].topology); the planner could never reach its own starting point` });
        }
    });
    return issues;
}

// ---------------------------------------------------------------- spoke

export const NodePoolSchema = z.object({
    name: DnsLabel,
    /** A preset name from `config/node-profiles/` or an inline profile (same shape as a preset file). */
    profile: z.union([z.string(), z.record(z.string(), z.unknown())]),
    /** Kubernetes node names (hostnames) in this pool. */
    nodes: z.array(z.string().min(1)).min(1),
    /**
     * True when node bootstrap sets `LimitMEMLOCK=infinity` for containerd and kubelet, so RDMA
     * processes can pin memory without running as root (reference/rdma.md §4.2 item 3).
     */
    memlockUnlimited: z.boolean().default(false),
}).strict();

/** `platform:cluster` of an on-prem spoke: an existing Kubernetes cluster reached through a kubeconfig context. */
export const OnPremClusterSchema = z.object({
    provider: z.literal("onprem"),
    /** kubeconfig context for the Kubernetes provider; unset uses the ambient kubeconfig. */
    kubeconfigContext: z.string().optional(),
    podCidr: Cidr,
    serviceCidr: Cidr,
}).strict();

/** `platform:backend` of an on-prem spoke: rail-aligned InfiniBand. */
export const InfinibandBackendSchema = z.object({
    fabric: z.literal("infiniband"),
    /** Pods that may share one rail HCA through the RDMA shared device plugin (`rdmaHcaMax`). */
    rdmaHcaMax: z.number().int().min(1).max(1000).default(63),
    /** Block carved into one IP pool per rail (rail i gets the i-th /railPrefixLength). */
    railSupernet: Cidr,
    railPrefixLength: z.number().int().min(16).max(28).default(20),
    /** Addresses nv-ipam hands each node per rail pool. */
    perNodeBlockSize: z.number().int().min(2).max(4096).default(16),
    /** Minimum port rate in Gb/s every rail HCA must report (NDR = 400); checked by profile and preflight. */
    minLinkRateGbps: z.number().int().positive().default(400),
}).strict();

/** `platform:frontend` of an on-prem spoke: the north-south Ethernet. */
export const FrontendSchema = z.object({
    /** Node addresses on the north-south Ethernet. */
    subnet: Cidr,
    /** Per-port rate in Gb/s (2 x 200 GbE per node). */
    linkRateGbps: z.number().int().positive().default(200),
}).strict();

export const SpokeConfigSchema = z.object({
    role: z.literal("spoke"),
    spoke: z.object({
        /** Must equal a `platform:spokes[].name` of the hub. */
        name: DnsLabel,
        region: z.string().min(1),
        /** Hub stack, fully qualified for real runs (`organization/platform/hub-prod`). */
        hubStack: z.string().min(1),
    }).strict(),
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
    gpuOperator: z.object({
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
    }).strict().refine((g) => !g.useHostMofed || g.gpuDirectRdma === "peermem", {
        message: "useHostMofed only takes effect with gpuDirectRdma peermem (the GPU Operator reads driver.rdma.useHostMofed only when driver.rdma.enabled); remove it for dmabuf",
        path: ["useHostMofed"],
    }).default({ gpuDirectRdma: "dmabuf", useHostMofed: false }),
    /** Agent Router / auth service settings (config/gateway.ts); optional, every field defaulted. */
    gateway: GatewayConfigSchema.prefault({}),
    /** Dynamo platform install and endpoint -> node pool mapping (config/serving.ts); optional, every field defaulted. */
    serving: ServingConfigSchema.prefault({}),
    /** Metering service and access-log collector (config/metering.ts); optional, every field defaulted. */
    metering: MeteringConfigSchema.prefault({}),
    /** Dashboards, alerts and scrape objects (config/observability.ts); optional, every field defaulted. */
    observability: ObservabilityConfigSchema.prefault({}),
}).strict().superRefine((s, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
    if (s.cluster.provider === "onprem") {
        if (s.backend.fabric !== "infiniband") issue(["backend", "fabric"], "an on-prem spoke uses fabric: infiniband (efa is for provider: eks)");
        if (!s.nodePools) issue(["nodePools"], "an on-prem spoke needs nodePools (named hosts per pool)");
        if (!s.frontend) issue(["frontend"], "an on-prem spoke needs frontend (the north-south subnet)");
        if (s.nodeGroups) issue(["nodeGroups"], "nodeGroups are for provider: eks; an on-prem spoke lists its hosts in nodePools");
        return;
    }
    if (s.backend.fabric !== "efa") issue(["backend", "fabric"], "an EKS spoke uses fabric: efa (infiniband is for provider: onprem)");
    if (!s.nodeGroups) issue(["nodeGroups"], "an EKS spoke needs nodeGroups (gpu and cpu)");
    if (s.nodePools) issue(["nodePools"], "nodePools are for provider: onprem; an EKS spoke declares nodeGroups");
    if (s.frontend) issue(["frontend"], "frontend is for provider: onprem; an EKS spoke's north-south network is its VPC");
    if (s.spoke.region !== s.cluster.region) issue(["spoke", "region"], `must equal platform:cluster.region (${s.cluster.region}) on an EKS spoke`);
});

type SpokeConfigRaw = z.infer<typeof SpokeConfigSchema>;
type NodePoolRaw = z.infer<typeof NodePoolSchema>;
export type OnPremCluster = z.infer<typeof OnPremClusterSchema>;
export type InfinibandBackend = z.infer<typeof InfinibandBackendSchema>;
export type EfaBackend = z.infer<typeof EfaBackendSchema>;
export type Frontend = z.infer<typeof FrontendSchema>;

/** A node pool with its profile resolved and validated. On EKS, `nodes` is empty (managed node groups scale). */
export type NodePool = Omit<NodePoolRaw, "profile"> & { profile: NodeProfile };

/** One rail's IP pool: rail index and the subnet all nodes' rail-i ports share (leaf i, one flat IB subnet, no gateway). */
export interface RailPool { rail: number; subnet: string }

type SpokeCommon = Omit<SpokeConfigRaw, "cluster" | "backend" | "nodePools" | "nodeGroups" | "frontend"> & { nodePools: NodePool[]; railPools: RailPool[] };

/** A validated on-prem spoke: InfiniBand rails, named hosts, frontend subnet. */
export type OnPremSpokeConfig = SpokeCommon & { cluster: OnPremCluster; backend: InfinibandBackend; frontend: Frontend; nodeGroups?: undefined };

/**
 * A validated EKS spoke: EFA backend. `nodePools` holds one pool per GPU node group (profile from the instance
 * type, no hosts); `railPools` is empty (no IB rails).
 */
export type EksSpokeConfig = SpokeCommon & { cluster: EksCluster; backend: EfaBackend; nodeGroups: EksNodeGroups; frontend?: undefined };

export type SpokeConfig = OnPremSpokeConfig | EksSpokeConfig;

/** Narrows a spoke config to the EKS variant. */
export function isEksSpoke(c: SpokeConfig): c is EksSpokeConfig {
    return c.cluster.provider === "eks";
}

// ---------------------------------------------------------------- loading

export type StackConfig = { role: "hub"; hub: HubConfig } | { role: "spoke"; spoke: SpokeConfig };

/**
 * Collects the `platform:*` keys of a flat Pulumi config map (`pulumi.runtime.allConfig()` shape: values are
 * strings, objects JSON-encoded) into an object keyed by the short name.
 */
export function namespaceConfig(all: Record<string, string>, namespace = CONFIG_NAMESPACE): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(all)) {
        if (!k.startsWith(`${namespace}:`)) continue;
        let value: unknown = v;
        try { value = JSON.parse(v); } catch { /* plain string */ }
        out[k.slice(namespace.length + 1)] = value;
    }
    return out;
}

type OnPremRaw = SpokeConfigRaw & { cluster: OnPremCluster; backend: InfinibandBackend; nodePools: NodePoolRaw[]; frontend: Frontend; nodeGroups?: undefined };
type EksRaw = SpokeConfigRaw & { cluster: EksCluster; backend: EfaBackend; nodeGroups: EksNodeGroups; frontend?: undefined };

/** Validates the preset profile (or inline profile) `doc` selected at `key`; pushes issues and returns undefined on failure. */
function resolveProfile(doc: unknown, name: string | undefined, key: string, issues: ConfigIssue[]): NodeProfile | undefined {
    const parsed = NodeProfileSchema.safeParse(doc);
    if (!parsed.success) {
        issues.push(...zodIssues(parsed.error, name !== undefined ? `${key} (preset "${name}")` : key));
        return undefined;
    }
    return parsed.data;
}

/**
 * EKS: one pool per GPU node group with the preset profile of its instance type (`p5en.48xlarge` ->
 * `config/node-profiles/p5en-48xlarge.yaml`), checked to be an EFA profile of that exact type; AZs and the
 * VPC checked against the region and the service CIDR.
 */
function resolveEks(raw: EksRaw, issues: ConfigIssue[]): EksSpokeConfig {
    const presets = presetProfiles();
    const groups = raw.nodeGroups;
    const vpc = raw.cluster.vpc;
    const vpcAzs = vpc.mode === "create" ? vpc.availabilityZones : vpc.privateSubnets.map((s) => s.availabilityZone);
    for (const a of vpcAzs) {
        if (!a.startsWith(raw.cluster.region)) issues.push({ key: "platform:cluster.vpc", message: `availability zone ${a} is not in region ${raw.cluster.region}` });
    }
    const names = new Map<string, string>([[groups.cpu.name, "platform:nodeGroups.cpu.name"]]);
    const pools: NodePool[] = [];
    groups.gpu.forEach((g, i) => {
        const key = `platform:nodeGroups.gpu[${i}]`;
        if (names.has(g.name)) issues.push({ key: `${key}.name`, message: `node group name "${g.name}" is already used by ${names.get(g.name)}` });
        else names.set(g.name, `${key}.name`);
        if (!vpcAzs.includes(g.availabilityZone)) issues.push({ key: `${key}.availabilityZone`, message: `${g.availabilityZone} is not one of the VPC's availability zones (${vpcAzs.join(", ")})` });
        const presetName = profileNameFor(g.instanceType);
        const doc = presets.get(presetName);
        if (doc === undefined) { issues.push({ key: `${key}.instanceType`, message: `no node profile "${presetName}" in config/node-profiles/ for ${g.instanceType}` }); return; }
        const profile = resolveProfile(doc, presetName, `${key}.instanceType`, issues);
        if (!profile) return;
        if (profile.efa?.instanceType !== g.instanceType) {
            issues.push({ key: `${key}.instanceType`, message: `node profile "${presetName}" does not describe the EFA layout of ${g.instanceType}` });
            return;
        }
        // The launch template's node bootstrap always sets LimitMEMLOCK=infinity on EKS GPU nodes (lib/efa.ts).
        pools.push({ name: g.name, profile, nodes: [], memlockUnlimited: true });
    });
    const vpcCidr = parseCidr(vpc.cidr);
    for (const [a, b] of findOverlaps([["platform:cluster.vpc.cidr", vpcCidr], ["platform:cluster.serviceCidr", parseCidr(raw.cluster.serviceCidr)]])) {
        issues.push({ key: b, message: `overlaps ${a}` });
    }
    if (vpc.mode === "existing") {
        vpc.privateSubnets.forEach((s, i) => {
            const c = parseCidr(s.cidr);
            if (c.prefix < vpcCidr.prefix || findOverlaps([["vpc", vpcCidr], ["subnet", c]]).length === 0) {
                issues.push({ key: `platform:cluster.vpc.privateSubnets[${i}].cidr`, message: `${s.cidr} is not inside the VPC CIDR ${vpc.cidr}` });
            }
        });
    } else if (vpcCidr.prefix > 20) {
        issues.push({ key: "platform:cluster.vpc.cidr", message: `/${vpcCidr.prefix} is too small: pods take VPC addresses (VPC CNI); use /16 to /20` });
    }
    return { ...raw, nodePools: pools, railPools: [] };
}

function resolveSpoke(raw: OnPremRaw, issues: ConfigIssue[]): OnPremSpokeConfig {
    const presets = presetProfiles();
    const pools: NodePool[] = [];
    const nodeOwner = new Map<string, string>();
    raw.nodePools.forEach((p, i) => {
        const key = `platform:nodePools[${i}]`;
        if (raw.nodePools.findIndex((q) => q.name === p.name) !== i) issues.push({ key: `${key}.name`, message: `duplicate node pool name "${p.name}"` });
        p.nodes.forEach((n, j) => {
            if (nodeOwner.has(n)) issues.push({ key: `${key}.nodes[${j}]`, message: `node "${n}" is already in pool "${nodeOwner.get(n)}"` });
            else nodeOwner.set(n, p.name);
        });
        let doc: unknown = p.profile;
        if (typeof p.profile === "string") {
            doc = presets.get(p.profile);
            if (doc === undefined) {
                issues.push({ key: `${key}.profile`, message: `unknown node profile "${p.profile}" (known: ${[...presets.entries()].filter(([, d]) => !(d as { efa?: unknown })?.efa).map(([n]) => n).join(", ")})` });
                return;
            }
        }
        const profile = resolveProfile(doc, typeof p.profile === "string" ? p.profile : undefined, `${key}.profile`, issues);
        if (!profile) return;
        if (profile.efa) {
            issues.push({ key: `${key}.profile`, message: `node profile "${profile.name}" describes an EFA instance type (${profile.efa.instanceType}) for EKS spokes; an on-prem pool needs an InfiniBand rail profile` });
            return;
        }
        const parsed = { data: profile };
        parsed.data.rails.forEach((r, k) => {
            if (r.linkRateGbps < raw.backend.minLinkRateGbps) {
                issues.push({ key: `${key}.profile.rails[${k}].linkRateGbps`, message: `${r.linkRateGbps} Gb/s is below platform:backend.minLinkRateGbps (${raw.backend.minLinkRateGbps} Gb/s)` });
            }
            if (r.linkLayer !== "InfiniBand") issues.push({ key: `${key}.profile.rails[${k}].linkLayer`, message: `rail ${r.rail} is ${r.linkLayer} but platform:backend.fabric is infiniband` });
        });
        if (parsed.data.frontend.length === 0) issues.push({ key: `${key}.profile.frontend`, message: "the profile declares no frontend NICs; the north-south network needs them" });
        pools.push({ ...p, profile: parsed.data });
    });

    // Rail IP pools: one subnet per rail, carved from the supernet.
    const railCount = Math.max(0, ...pools.map((p) => p.profile.rails.length));
    const railPools: RailPool[] = [];
    const nets: Array<[string, Cidr]> = [
        ["platform:cluster.podCidr", parseCidr(raw.cluster.podCidr)],
        ["platform:cluster.serviceCidr", parseCidr(raw.cluster.serviceCidr)],
        ["platform:frontend.subnet", parseCidr(raw.frontend.subnet)],
        ["platform:backend.railSupernet", parseCidr(raw.backend.railSupernet)],
    ];
    for (const [a, b] of findOverlaps(nets)) issues.push({ key: b, message: `overlaps ${a}` });
    const supernetPrefix = parseCidr(raw.backend.railSupernet).prefix;
    if (raw.backend.railPrefixLength < supernetPrefix) {
        issues.push({ key: "platform:backend.railPrefixLength", message: `/${raw.backend.railPrefixLength} rail subnets are larger than the /${supernetPrefix} platform:backend.railSupernet they are carved from; use a longer prefix` });
        return { ...raw, nodePools: pools, railPools };
    }
    if (2 ** (raw.backend.railPrefixLength - supernetPrefix) < railCount) {
        const need = raw.backend.railPrefixLength - Math.ceil(Math.log2(railCount));
        issues.push({ key: "platform:backend.railSupernet", message: `${raw.backend.railSupernet} holds ${2 ** (raw.backend.railPrefixLength - supernetPrefix)} /${raw.backend.railPrefixLength} rail subnets but the node profiles have ${railCount} rails: use a /${need} or larger supernet (or a longer platform:backend.railPrefixLength)` });
        return { ...raw, nodePools: pools, railPools };
    }
    try {
        const supernet = parseCidr(raw.backend.railSupernet);
        for (let r = 0; r < railCount; r++) {
            const s = subnet(supernet, raw.backend.railPrefixLength, r);
            railPools.push({ rail: r, subnet: s.text });
        }
        const hostsPerRail = 2 ** (32 - raw.backend.railPrefixLength) - 2;
        const nodes = pools.reduce((n, p) => n + p.nodes.length, 0);
        if (nodes * raw.backend.perNodeBlockSize > hostsPerRail) {
            issues.push({ key: "platform:backend.perNodeBlockSize", message: `${nodes} nodes x ${raw.backend.perNodeBlockSize} addresses do not fit a /${raw.backend.railPrefixLength} rail subnet` });
        }
    } catch (e) {
        issues.push({ key: "platform:backend.railPrefixLength", message: (e as Error).message });
    }
    return { ...raw, nodePools: pools, railPools };
}

/** Options of {@link parseStackConfig}. */
export interface ParseOptions {
    /** Time API key expiry is judged at (default: now). */
    now?: Date;
}

/** Config namespaces a stack file may use: this program's, and the providers it configures. */
export const KNOWN_NAMESPACES = [CONFIG_NAMESPACE, "aws", "kubernetes", "pulumi"] as const;

/**
 * Keys of a flat config map in a namespace nothing reads (`platfrom:serving`), with the nearest known namespace.
 * A key without a namespace is reported too (Pulumi prefixes the project name, so it is a hand-edited file).
 */
export function unknownNamespaces(all: Record<string, string>): ConfigIssue[] {
    const out: ConfigIssue[] = [];
    for (const key of Object.keys(all)) {
        const i = key.indexOf(":");
        const ns = i < 0 ? "" : key.slice(0, i);
        if ((KNOWN_NAMESPACES as readonly string[]).includes(ns)) continue;
        const n = nearest(ns, KNOWN_NAMESPACES);
        out.push({ key, message: `unknown config namespace "${ns}"${n ? `; did you mean "${n}:${key.slice(i + 1)}"?` : ""} (known: ${KNOWN_NAMESPACES.join(", ")}); nothing reads this key` });
    }
    return out;
}

/**
 * The whole check of one stack file's flat config map (`pulumi.runtime.allConfig()` shape): no unknown namespace, no
 * credential in plain text (config/secrets.ts), then {@link parseStackConfig} on the `platform:*` keys.
 *
 * @param secretKeys keys whose values are Pulumi secrets (`secure:`), which may hold credentials
 * @throws ConfigError naming the stack file and each bad key
 */
export function parseFlatStackConfig(all: Record<string, string>, stackFile: string, secretKeys: Iterable<string> = [], opts: ParseOptions = {}): StackConfig {
    const issues = [...unknownNamespaces(all), ...plainCredentials(all, new Set(secretKeys))];
    if (issues.length) throw new ConfigError(stackFile, issues);
    return parseStackConfig(namespaceConfig(all), stackFile, opts);
}

/**
 * Validates the `platform:*` keys of one stack file and resolves node profiles and rail IP pools.
 * Nothing is created before this returns, so a bad file is never half-applied.
 *
 * @param raw the namespace map from {@link namespaceConfig}
 * @param stackFile path shown in errors, e.g. `stacks/Pulumi.spoke-hn1.yaml`
 * @throws ConfigError naming the stack file and each bad key (`platform:nodePools[0].profile`)
 */
export function parseStackConfig(raw: Record<string, unknown>, stackFile: string, opts: ParseOptions = {}): StackConfig {
    const role = raw.role;
    if (role !== "hub" && role !== "spoke") {
        throw new ConfigError(stackFile, [{ key: "platform:role", message: role === undefined ? "missing; set it to hub or spoke" : `must be hub or spoke, not ${JSON.stringify(role)}` }]);
    }
    if (role === "hub") {
        const parsed = HubConfigSchema.safeParse(raw);
        if (!parsed.success) throw new ConfigError(stackFile, zodIssues(parsed.error, "platform:", HubConfigSchema));
        const semantic = hubSemanticIssues(parsed.data, opts.now ?? new Date());
        if (semantic.length) throw new ConfigError(stackFile, semantic);
        return { role, hub: parsed.data };
    }
    // The provider decides the fabric: say so, instead of the other fabric's missing keys (railSupernet on EKS).
    const provider = (raw.cluster as { provider?: unknown } | undefined)?.provider;
    const fabric = (raw.backend as { fabric?: unknown } | undefined)?.fabric;
    if (provider === "eks" && fabric !== undefined && fabric !== "efa") {
        throw new ConfigError(stackFile, [{ key: "platform:backend.fabric", message: `an EKS spoke uses fabric: efa (EKS spokes use EFA, with no other platform:backend keys; ${JSON.stringify(fabric)} rails and railSupernet are for provider: onprem)` }]);
    }
    if (provider === "onprem" && fabric !== undefined && fabric !== "infiniband") {
        throw new ConfigError(stackFile, [{ key: "platform:backend.fabric", message: `an on-prem spoke uses fabric: infiniband (rail-aligned InfiniBand with railSupernet; ${JSON.stringify(fabric)} is for provider: eks)` }]);
    }
    const parsed = SpokeConfigSchema.safeParse(raw);
    if (!parsed.success) throw new ConfigError(stackFile, zodIssues(parsed.error, "platform:", SpokeConfigSchema));
    const issues: ConfigIssue[] = [];
    if (parsed.data.cluster.provider === "eks" && raw.gpuOperator !== undefined) {
        issues.push({ key: "platform:gpuOperator", message: "not used on an EKS spoke: the EKS AL2023 NVIDIA AMI provides the driver and GPUDirect (remove the key)" });
    }
    if (parsed.data.cluster.provider === "eks" && parsed.data.serving.systemNodeSelector !== undefined) {
        issues.push({ key: "platform:serving.systemNodeSelector", message: "not used on an EKS spoke: Frontend, Planner and Mooncake master run on the CPU node group (platform:nodeGroups.cpu) by its own selector (remove the key)" });
    }
    const spoke: SpokeConfig = parsed.data.cluster.provider === "eks"
        ? resolveEks(parsed.data as EksRaw, issues)
        : resolveSpoke(parsed.data as OnPremRaw, issues);
    if (issues.length) throw new ConfigError(stackFile, issues);
    return { role, spoke };
}
