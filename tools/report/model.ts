/**
 * What a reviewer needs to know about one rendered stack, gathered from what the render already has: the
 * validated stack config (node profiles, rail pools), the rendered resources (secrets masked, as in
 * `out/<stack>/resources.json`), the stack outputs (masked), the hub's placement contract and the policy report.
 * Pure functions, no I/O: tools/report/markdown.ts and tools/report/pictures.ts turn a view into files.
 */
import { endpointSignals } from "../../upstream/check/signals";
import { endpointGpus, type Endpoint } from "../../config/endpoint";
import { endpointClaimGpus } from "../../config/hub-checks";
import { ENDPOINT_LABEL } from "../../lib/labels";
import { dgdName, revisionsOf, stateOf } from "../../lib/rollout";
import { expectedStartPath, kvTiersText } from "../../lib/faststart";
import type { NodeProfile } from "../../config/nodeProfile";
import { type HubConfig, isEksSpoke, type SpokeConfig, type StackConfig } from "../../config/stack";
import type { PolicyReport } from "../policy-runner";

/** One row of `resources.json`: inputs already masked (`[secret]`, `[unknown]`). */
export interface ResourceRecord {
    urn: string;
    type: string;
    name: string;
    parent?: string;
    inputs: Record<string, any>;
}

/** A policy of the pack as the report lists it. */
export interface PolicyInfo {
    name: string;
    enforcementLevel: string;
}

/** Everything the report is built from. All values are masked: nothing secret reaches a report. */
export interface ReportInput {
    stack: string;
    /** Stack file as shown to the user (`stacks/Pulumi.spoke-hn1.yaml`). */
    file: string;
    config: StackConfig;
    resources: ResourceRecord[];
    /** Stack outputs, masked (`outputs.json` `outputs`). */
    outputs: Record<string, any>;
    policy: PolicyReport;
    /** The pack's policies (name and level), to say which ran. */
    policies: PolicyInfo[];
    /** Outputs of the hub a spoke references, masked; its `spokeContracts[<spoke>]` is the placement. */
    hubOutputs?: Record<string, any>;
    /** `aws:region` of the stack file, when set. */
    awsRegion?: string;
    /** Warnings the program logged while it ran (`pulumi.log.warn`), in order. */
    warnings?: string[];
    /** The stack file's `platform:*` keys as written (before defaults), to mark values taken from a default. */
    raw?: Record<string, unknown>;
}

/** A worker group of an endpoint: `replicas` pods of `gpusPerWorker` GPUs. */
export interface WorkerGroupView {
    role: "prefill" | "decode" | "worker";
    replicas: number;
    gpusPerWorker: number;
}

/** One endpoint as placed (hub contract) and as rendered (its DynamoGraphDeployment). */
export interface EndpointView {
    name: string;
    model: string;
    engine: string;
    mode: "disaggregated" | "aggregated";
    groups: WorkerGroupView[];
    /** GPUs at the configured replica counts (contract). */
    gpus: number;
    /** GPUs the rendered DynamoGraphDeployment requests (`nvidia.com/gpu` limits x replicas); undefined when not rendered. */
    renderedGpus?: number;
    router: string;
    kvPool: string;
    /** Planner `maxGpuBudget`; undefined when the planner is off. */
    plannerBudget?: number;
    /** True when `plannerBudget` is the schema default (the hub file sets no `planner.maxGpuBudget`). */
    plannerBudgetDefault?: boolean;
    /**
     * GPUs the endpoint may come to use on its spoke (config/hub-checks.ts `endpointClaimGpus`): per revision, the
     * planner budget where the planner is on, else the graph's GPUs at its replicas.
     */
    claimGpus: number;
    speculative?: string;
    /** Node pool the endpoint runs on (spoke output `serving.<endpoint>.pool`). */
    pool?: string;
    /** Features as rendered (upstream/check/signals.ts endpointSignals); undefined when the graph is not rendered. */
    features?: { active: string[]; off: string[]; signals: string[] };
    /** KV tiers below GPU memory, e.g. `HBM -> host 512 GiB -> NVMe 4096 GiB (KVBM)` (lib/faststart.ts `kvTiersText`). */
    kvTiers: string;
    /** How a new worker is expected to start (lib/faststart.ts `expectedStartPath`). */
    startPath: string;
    /** Reviewed KV-transport exceptions declared in the stack file (config/endpoint.ts `kvExceptions`). */
    kvExceptions: Array<{ name: string; value: string; component?: string; why: string; until: string }>;
    /** Spokes the endpoint's route falls back to (config/endpoint.ts `fallback`). */
    fallback?: string[];
    /** The endpoint's rollout, when it has one (config/rollout.ts). */
    rollout?: RolloutView;
}

/** A rollout as the report shows it. */
export interface RolloutView {
    revision: string;
    phase: string;
    /** `k/n (p%)` while shifting, else `-`. */
    step: string;
    steps: number[];
    /** Source and target graphs with their weights (percent) and readiness. */
    graphs: Array<{ name: string; role: string; engine: string; weight: number; ready: boolean }>;
    /** The settings the target changes. */
    changes: string[];
    since?: string;
    held?: string;
    lastGate?: string;
}

/** One compute rail of a node pool, joined with the objects rendered for it. */
export interface RailView {
    rail: number;
    /** Leaf switch = rail index (rail-optimised fabric: rail i of every node on leaf i). */
    leaf: number;
    gpu: number;
    gpuPciAddress: string;
    hca: string;
    netdev: string;
    pciAddress: string;
    numa: number;
    linkRateGbps: number;
    /** Extended resource of the RDMA shared device plugin selecting this netdev (`rdma/rail_0`). */
    rdmaResource?: string;
    /** Secondary network (IPoIBNetwork) whose master is this netdev. */
    network?: string;
    /** IP pool (nv-ipam) of that network and its subnet. */
    ipPool?: string;
    subnet?: string;
    perNodeBlockSize?: number;
}

export interface FrontendNicView {
    hca: string;
    netdev: string;
    pciAddress: string;
    numa: number;
    linkRateGbps: number;
}

export interface EfaView {
    instanceType: string;
    networkCards: number;
    cardRateGbps: number;
    devicesPerGpu: number;
    efaInterfaces: number;
    enaInterfaces: number;
}

/** A GPU node pool (on-prem hosts) or EKS GPU node group. */
export interface PoolView {
    name: string;
    profile: string;
    model: string;
    gpuProduct: string;
    gpusPerNode: number;
    gpuMemoryGB: number;
    numaNodes: number;
    /** Host names (on-prem); on EKS `node-1..n` for the desired size. */
    nodes: string[];
    /** EKS scaling (desired/max) when a managed node group. */
    scaling?: { desired: number; min: number; max: number };
    capacityGpus: number;
    rails: RailView[];
    /**
     * Whether the spoke renders rail IP networks (`platform:backend.railNetworks`); off, a rail without network and IP
     * pool is the intended state, not a gap.
     */
    railNetworks: boolean;
    frontend: FrontendNicView[];
    efa?: EfaView;
    /** Values the node profile marks as derived rather than read on a node (`inferred`: field path and how to verify). */
    inferred: Array<{ path: string; note: string }>;
}

export interface NetworkView {
    name: string;
    cidr: string;
    what: string;
}

export interface PolicyView {
    run: number;
    resourcesChecked: number;
    mandatory: number;
    advisory: number;
    findings: Array<{ level: string; policy: string; message: string; resource?: string }>;
    policies: PolicyInfo[];
    /** Policies that found resources of theirs to check in this stack (tools/policy-runner.ts `applied`). */
    applied: string[];
    /** Every resource of the stack but the stack itself (components included), as the report's header counts. */
    resources: number;
}

export interface SpokeView {
    kind: "spoke";
    /** Warnings the program logged while it ran. */
    warnings: string[];
    stack: string;
    file: string;
    spoke: string;
    region: string;
    provider: "onprem" | "eks";
    fabric: "infiniband" | "efa";
    hubStack: string;
    placementRevision?: string;
    policyRevision?: number;
    pools: PoolView[];
    capacityGpus: number;
    endpoints: EndpointView[];
    placedGpus: number;
    /** Sum of the endpoints' `claimGpus` (planner budgets and fixed graphs), the figure the hub refuses above capacity. */
    plannerBudgetGpus: number;
    networks: NetworkView[];
    gpuDirectRdma?: string;
    policy: PolicyView;
    resources: number;
    kubernetesObjects: number;
}

export interface HubSpokeView {
    name: string;
    stack: string;
    region: string;
    provider: string;
    capacityGpus: number;
    placedGpus: number;
    /** Sum of the endpoints' `claimGpus` (planner budgets and fixed graphs), the figure the hub refuses above capacity. */
    plannerBudgetGpus: number;
    endpoints: EndpointView[];
    policyRevision?: number;
    placementRevision?: string;
}

export interface HubView {
    kind: "hub";
    /** Warnings the program logged while it ran. */
    warnings: string[];
    stack: string;
    file: string;
    region?: string;
    spokes: HubSpokeView[];
    models: Array<{ id: string; rps: number; concurrent: number; tokensPerWindow: number; windowSeconds: number; placedOn: string[] }>;
    tenants: number;
    teams: number;
    apiKeys: number;
    policy: PolicyView;
    resources: number;
    /** The global hostname (config/failover.ts), when the hub file sets platform:failover. */
    failover?: { hostname: string; mode: string; spokes: string[] };
}

export type StackView = SpokeView | HubView;

const WORKER_ROLES = new Set(["prefill", "decode", "worker"]);

/** `v` when it is an array, else [] (a preview render holds `[unknown]` where a value is computed). */
const arr = (v: unknown): any[] => (Array.isArray(v) ? v : []);

/** Endpoint view from a placement entry (hub config endpoint or contract endpoint: same shape). */
function endpointView(e: Endpoint): EndpointView {
    const t = e.topology;
    const groups: WorkerGroupView[] =
        t.mode === "disaggregated"
            ? [
                  { role: "prefill", ...t.prefill },
                  { role: "decode", ...t.decode },
              ]
            : [{ role: "worker", ...t.workers }];
    const spec = e.speculative;
    return {
        name: e.name,
        model: e.model,
        engine: e.engine,
        mode: t.mode,
        groups,
        gpus: endpointGpus(e),
        router: e.router?.mode ?? "kv",
        kvPool: e.kvPool?.kind === "mooncake" ? `mooncake ${e.kvPool.segmentSizeGiB} GiB x ${e.kvPool.storeReplicas}` : "none",
        plannerBudget: e.planner && e.planner.enabled !== false ? e.planner.maxGpuBudget : undefined,
        claimGpus: endpointClaimGpus(e),
        speculative: spec
            ? `${spec.method}${spec.draftModel ? ` (${spec.draftModel})` : ""}, ${spec.numSpeculativeTokens} tokens`
            : undefined,
        kvTiers: kvTiersText(e),
        startPath: expectedStartPath(e),
        kvExceptions: [...(e.kvExceptions ?? [])],
        ...(e.fallback ? { fallback: [...e.fallback] } : {}),
        ...(e.rollout ? { rollout: rolloutView(e) } : {}),
    };
}

/** A rollout as the report shows it: revisions, step, weights, last gate verdict (lib/rollout.ts). */
function rolloutView(e: Endpoint): RolloutView {
    const r = e.rollout!;
    const st = stateOf(r);
    const revs = revisionsOf(e);
    return {
        revision: r.revision,
        phase: st.phase,
        step: st.phase === "shifting" ? `${(st.step ?? 0) + 1}/${r.steps.length} (${r.steps[st.step ?? 0]}%)` : "-",
        steps: [...r.steps],
        graphs: revs.map((x) => ({ name: x.graph.name, role: x.role, engine: x.graph.engine, weight: x.weight ?? 0, ready: x.ready })),
        changes: Object.keys(r.target),
        since: st.since,
        held: "held" in st && st.held ? `${st.held.at}: ${st.held.reason}` : undefined,
        lastGate: "lastGate" in st && st.lastGate ? `${st.lastGate.verdict} at ${st.lastGate.at}: ${st.lastGate.summary}` : undefined,
    };
}

function policyView(input: ReportInput): PolicyView {
    const p = input.policy;
    return {
        run: p.policiesRun,
        resourcesChecked: p.resourcesChecked,
        mandatory: p.mandatory.length,
        advisory: p.findings.filter((f) => f.enforcementLevel !== "mandatory").length,
        findings: p.findings.map((f) => ({
            level: f.enforcementLevel,
            policy: f.policyName,
            message: f.message,
            resource: f.resourceName ? `${shortKind(f.resourceType ?? "")} ${f.resourceName}` : undefined,
        })),
        policies: [...input.policies].sort((a, b) => a.name.localeCompare(b.name)),
        applied: p.applied ?? [],
        resources: input.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").length,
    };
}

/** `kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment` -> `DynamoGraphDeployment`. */
export function shortKind(type: string): string {
    return type.split(":").pop() ?? type;
}

const ofKind = (rs: ResourceRecord[], kind: string) => rs.filter((r) => r.type.startsWith("kubernetes:") && r.inputs?.kind === kind);

/** GPUs a rendered DynamoGraphDeployment requests: sum over worker components of replicas x `nvidia.com/gpu` limit. */
export function dgdGpus(dgd: Record<string, any>): number {
    let n = 0;
    for (const c of arr(dgd?.spec?.components)) {
        if (!WORKER_ROLES.has(c.type)) continue;
        const gpu = arr(c?.podTemplate?.spec?.containers).reduce(
            (s: number, k: any) => s + Number(k?.resources?.limits?.["nvidia.com/gpu"] ?? 0),
            0,
        );
        n += (typeof c.replicas === "number" ? c.replicas : 1) * gpu;
    }
    return n;
}

function parseJson(s: unknown): any {
    if (typeof s !== "string") return undefined;
    try {
        return JSON.parse(s);
    } catch {
        return undefined;
    }
}

/** Rails of a profile joined with the NicClusterPolicy resources, IPoIBNetworks and IPPools rendered for them. */
function railViews(profile: NodeProfile, rs: ResourceRecord[]): RailView[] {
    const devicePlugin = new Map<string, string>();
    for (const ncp of ofKind(rs, "NicClusterPolicy")) {
        const cfg = parseJson(ncp.inputs.spec?.rdmaSharedDevicePlugin?.config);
        for (const c of arr(cfg?.configList))
            for (const ifn of arr(c?.selectors?.ifNames)) devicePlugin.set(ifn, `${c.resourcePrefix}/${c.resourceName}`);
    }
    const networks = new Map<string, { name: string; pool?: string }>();
    for (const n of [...ofKind(rs, "IPoIBNetwork"), ...ofKind(rs, "MacvlanNetwork"), ...ofKind(rs, "HostDeviceNetwork")]) {
        const master = n.inputs.spec?.master;
        if (typeof master === "string")
            networks.set(master, { name: n.inputs.metadata?.name ?? n.name, pool: parseJson(n.inputs.spec?.ipam)?.poolName });
    }
    const pools = new Map<string, { subnet?: string; perNodeBlockSize?: number }>();
    for (const p of ofKind(rs, "IPPool"))
        pools.set(p.inputs.metadata?.name ?? p.name, { subnet: p.inputs.spec?.subnet, perNodeBlockSize: p.inputs.spec?.perNodeBlockSize });
    return [...profile.rails]
        .sort((a, b) => a.rail - b.rail)
        .map((r) => {
            const net = networks.get(r.netdev);
            const pool = net?.pool ? pools.get(net.pool) : undefined;
            return {
                rail: r.rail,
                leaf: r.rail,
                gpu: r.gpu,
                gpuPciAddress: r.gpuPciAddress,
                hca: r.hca,
                netdev: r.netdev,
                pciAddress: r.pciAddress,
                numa: r.numa,
                linkRateGbps: r.linkRateGbps,
                rdmaResource: devicePlugin.get(r.netdev),
                network: net?.name,
                ipPool: net?.pool,
                subnet: pool?.subnet,
                perNodeBlockSize: pool?.perNodeBlockSize,
            };
        });
}

function spokeView(input: ReportInput, cfg: SpokeConfig): SpokeView {
    const rs = input.resources;
    const eks = isEksSpoke(cfg);
    const contract = input.hubOutputs?.spokeContracts?.[cfg.spoke.name];
    const pools: PoolView[] = cfg.nodePools.map((p) => {
        const group = eks ? cfg.nodeGroups.gpu.find((g) => g.name === p.name) : undefined;
        const lt = eks
            ? rs.find(
                  (r) =>
                      r.type === "aws:ec2/launchTemplate:LaunchTemplate" &&
                      String(r.inputs.description ?? "").includes(`node group ${p.name}`),
              )
            : undefined;
        const nics = arr(lt?.inputs.networkInterfaces);
        const nodes = eks ? Array.from({ length: group?.scaling.desired ?? 0 }, (_, i) => `${p.name}-node-${i + 1}`) : p.nodes;
        return {
            name: p.name,
            profile: p.profile.name,
            model: p.profile.model,
            gpuProduct: p.profile.gpu.product,
            gpusPerNode: p.profile.gpu.count,
            gpuMemoryGB: p.profile.gpu.memoryGB,
            numaNodes: p.profile.numaNodes,
            nodes,
            inferred: p.profile.inferred ?? [],
            scaling: group ? { ...group.scaling } : undefined,
            capacityGpus: nodes.length * p.profile.gpu.count,
            rails: railViews(p.profile, rs),
            railNetworks: !eks && cfg.backend.railNetworks,
            frontend: p.profile.frontend.map((f) => ({
                hca: f.hca,
                netdev: f.netdev,
                pciAddress: f.pciAddress,
                numa: f.numa,
                linkRateGbps: f.linkRateGbps,
            })),
            efa: p.profile.efa
                ? {
                      ...p.profile.efa,
                      efaInterfaces: nics.filter((n) => n?.interfaceType === "efa" || n?.interfaceType === "efa-only").length,
                      enaInterfaces: nics.filter((n) => n?.interfaceType === "interface").length,
                  }
                : undefined,
        };
    });
    const dgds = new Map(
        ofKind(rs, "DynamoGraphDeployment").map((d) => [d.inputs.metadata?.labels?.[ENDPOINT_LABEL] ?? d.inputs.metadata?.name, d.inputs]),
    );
    const placed: Endpoint[] = Array.isArray(contract?.endpoints) ? contract.endpoints : [];
    const kube = rs.filter((r) => r.type.startsWith("kubernetes:") && typeof r.inputs?.kind === "string").map((r) => r.inputs);
    const releases = rs
        .filter((r) => r.type === "kubernetes:helm.sh/v3:Release")
        .map((r) => ({ name: r.name, chart: String(r.inputs?.chart), version: String(r.inputs?.version), values: r.inputs?.values }));
    const signals = endpointSignals({ stack: input.stack, objects: kube, releases });
    const endpoints = placed
        .map((e) => {
            const v = endpointView(e);
            // The endpoint's graph (`<name>-<revision>` once revisioned), and during a rollout the target's too.
            const dgd = dgds.get(dgdName(e.name, e.revision));
            const target = e.rollout ? dgds.get(dgdName(e.name, e.rollout.revision)) : undefined;
            return {
                ...v,
                renderedGpus: dgd ? dgdGpus(dgd) + (target ? dgdGpus(target) : 0) : undefined,
                pool: input.outputs?.serving?.[e.name]?.pool,
                features: signals.get(dgd?.metadata?.name ?? e.name),
            };
        })
        .sort((a, b) => a.name.localeCompare(b.name));
    const networks: NetworkView[] = [];
    if (eks) {
        const vpc = rs.find((r) => r.type === "aws:ec2/vpc:Vpc");
        if (vpc) networks.push({ name: "VPC", cidr: vpc.inputs.cidrBlock, what: "frontend (north-south): pods, gateway, control plane" });
        for (const s of rs.filter((r) => r.type === "aws:ec2/subnet:Subnet").sort((a, b) => a.name.localeCompare(b.name))) {
            networks.push({
                name: s.inputs.tags?.Name ?? s.name,
                cidr: s.inputs.cidrBlock,
                what: `${s.inputs.availabilityZone} ${s.inputs.tags?.["kubernetes.io/role/elb"] ? "public" : "private"} subnet`,
            });
        }
    } else {
        networks.push({
            name: "frontend",
            cidr: cfg.frontend.subnet,
            what: `north-south Ethernet, ${cfg.frontend.linkRateGbps} Gb/s per port`,
        });
        networks.push({
            name: "rail supernet",
            cidr: cfg.backend.railSupernet,
            what: `east-west InfiniBand, one /${cfg.backend.railPrefixLength} per rail`,
        });
        networks.push({ name: "pods", cidr: cfg.cluster.podCidr, what: "pod network" });
        networks.push({ name: "services", cidr: cfg.cluster.serviceCidr, what: "service network" });
    }
    return {
        kind: "spoke",
        warnings: input.warnings ?? [],
        stack: input.stack,
        file: input.file,
        spoke: cfg.spoke.name,
        region: cfg.spoke.region,
        provider: cfg.cluster.provider,
        fabric: cfg.backend.fabric,
        hubStack: cfg.spoke.hubStack,
        placementRevision: input.outputs?.placementRevision,
        policyRevision: input.outputs?.gateway?.policyRevision,
        pools,
        capacityGpus: pools.reduce((n, p) => n + p.capacityGpus, 0),
        endpoints,
        placedGpus: endpoints.reduce((n, e) => n + (e.renderedGpus ?? e.gpus), 0),
        plannerBudgetGpus: endpoints.reduce((n, e) => n + e.claimGpus, 0),
        networks,
        gpuDirectRdma: cfg.gpuOperator?.gpuDirectRdma,
        policy: policyView(input),
        resources: rs.filter((r) => r.type !== "pulumi:pulumi:Stack").length,
        kubernetesObjects: rs.filter(
            (r) => r.type.startsWith("kubernetes:") && typeof r.inputs?.kind === "string" && !r.type.startsWith("kubernetes:helm.sh/"),
        ).length,
    };
}

function hubView(input: ReportInput, cfg: HubConfig): HubView {
    const out = input.outputs ?? {};
    const spokes: HubSpokeView[] = cfg.spokes
        .map((s) => {
            const rawEndpoints = Array.isArray(input.raw?.endpoints)
                ? (input.raw.endpoints as Array<{ planner?: { maxGpuBudget?: unknown } }>)
                : undefined;
            const endpoints = cfg.endpoints
                .map((e, i) => ({ e, i }))
                .filter(({ e }) => e.spoke === s.name)
                .map(({ e, i }) => {
                    const v = endpointView(e);
                    return rawEndpoints && v.plannerBudget !== undefined && rawEndpoints[i]?.planner?.maxGpuBudget === undefined
                        ? { ...v, plannerBudgetDefault: true }
                        : v;
                })
                .sort((a, b) => a.name.localeCompare(b.name));
            return {
                name: s.name,
                stack: s.stack,
                region: s.region,
                provider: s.provider,
                capacityGpus: s.gpus,
                placedGpus: endpoints.reduce((n, e) => n + e.gpus, 0),
                plannerBudgetGpus: endpoints.reduce((n, e) => n + e.claimGpus, 0),
                endpoints,
                policyRevision: out.policyRevisions?.[s.name]?.revision,
                placementRevision: out.placement?.[s.name]?.revision,
            };
        })
        .sort((a, b) => a.name.localeCompare(b.name));
    const region = input.awsRegion;
    return {
        kind: "hub",
        warnings: input.warnings ?? [],
        stack: input.stack,
        file: input.file,
        region,
        spokes,
        models: cfg.models.map((m) => ({
            id: m.id,
            rps: m.limits.requestsPerSecond,
            concurrent: m.limits.concurrentRequests,
            tokensPerWindow: m.limits.tokensPerWindow,
            windowSeconds: m.limits.windowSeconds,
            placedOn: [...new Set(cfg.endpoints.filter((e) => e.model === m.id).map((e) => e.spoke))].sort(),
        })),
        tenants: cfg.tenants.length,
        teams: cfg.tenants.reduce((n, t) => n + t.teams.length, 0),
        apiKeys: cfg.apiKeys.length,
        policy: policyView(input),
        resources: input.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").length,
        ...(cfg.failover
            ? { failover: { hostname: cfg.failover.hostname, mode: cfg.failover.mode, spokes: [...cfg.failover.spokes] } }
            : {}),
    };
}

/** Builds the view of one stack. @throws never for a stack that rendered (its config was validated by the program). */
export function buildView(input: ReportInput): StackView {
    return input.config.role === "hub" ? hubView(input, input.config.hub) : spokeView(input, input.config.spoke);
}
