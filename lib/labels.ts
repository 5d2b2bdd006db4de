/**
 * Label, annotation and taint keys the platform writes and reads. The policy pack imports them from here
 * (policies/lib/resources.ts), so this file imports no package. Keys an upstream rule reads are defined in
 * upstream/labels.ts (upstream/ imports nothing outside itself) and re-exported here; every other key is built from
 * {@link LABEL_PREFIX} here, so no `inference-platform.io/...` name is written anywhere else
 * (test/policies/fact-base.test.ts).
 */
import { LABEL_PREFIX } from "../upstream/labels";

export { CACHE_SCOPES_ANNOTATION, ENDPOINT_LABEL, LABEL_PREFIX } from "../upstream/labels";

/** EKS resource tag: the spoke cluster a resource belongs to (components/spoke/EksCluster.ts). */
export const CLUSTER_TAG = `${LABEL_PREFIX}/cluster`;
/** EKS resource tag: the node group an EFA launch template or instance belongs to (components/spoke/EfaNodeGroup.ts). */
export const NODE_GROUP_TAG = `${LABEL_PREFIX}/node-group`;

/**
 * Pod label naming the graph component's role (`frontend`, `planner`, `prefill`, `decode`, `worker`): what the
 * platform's own PodMonitors select (lib/observability.ts `dynamoScrapeTargets`), so every prefill, decode and
 * aggregated worker is scraped whatever the operator's own labels are.
 */
export const ROLE_LABEL = `${LABEL_PREFIX}/role`;

/** Node label: node pool name. Workloads select their pool by it. */
export const POOL_LABEL = `${LABEL_PREFIX}/pool`;
/** Node label: node profile name (`dgx-h200`). */
export const PROFILE_LABEL = `${LABEL_PREFIX}/node-profile`;
/** Node label: GPU product, same value as GPU feature discovery's `nvidia.com/gpu.product`. */
export const GPU_PRODUCT_LABEL = `${LABEL_PREFIX}/gpu-product`;
/** Node label: backend fabric (`infiniband` | `efa`). */
export const FABRIC_LABEL = `${LABEL_PREFIX}/fabric`;
/** Node label: rail topology, e.g. `rail-optimized-8` (GPU i on rail/leaf i, 8 rails). */
export const RAIL_TOPOLOGY_LABEL = `${LABEL_PREFIX}/rail-topology`;
/** Node label: `true` when containerd/kubelet run with LimitMEMLOCK=infinity. */
export const MEMLOCK_LABEL = `${LABEL_PREFIX}/memlock-unlimited`;
/** Node label (EKS GPU node groups): EFA devices per node, one per network card (p5en 16, p5e 32). */
export const EFA_DEVICES_LABEL = `${LABEL_PREFIX}/efa-devices`;
/** Node label (EKS): the platform CPU node group that runs the gateway, auth, metering and Mooncake master. */
export const SYSTEM_POOL_LABEL = `${LABEL_PREFIX}/system`;
/** Node annotation: the pool's rail table as JSON (rail, gpu, hca, netdev, PCI, NUMA, rate). */
export const RAIL_TABLE_ANNOTATION = `${LABEL_PREFIX}/rail-table`;
/** Node annotation: the frontend (north-south) NICs as JSON. */
export const FRONTEND_NICS_ANNOTATION = `${LABEL_PREFIX}/frontend-nics`;

/**
 * Taint on GPU nodes. `nvidia.com/gpu` is the key the GPU Operator's own DaemonSets tolerate by default
 * (gpu-operator values `daemonsets.tolerations`), so only GPU workloads land there.
 */
export const GPU_TAINT = { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" } as const;

/** Namespace for the platform's own shared objects (frontend network description, rail tables). */
export const PLATFORM_NAMESPACE = "platform-system";

/** Namespace the inference workloads (DynamoGraphDeployments, Mooncake) run in; rail networks are created for it. */
export const INFERENCE_NAMESPACE = "inference";

/**
 * Workload annotation: the reviewed KV-transport exceptions of a graph, as JSON (config/endpoint.ts `kvExceptions`,
 * written by lib/dgd.ts, read by the upstream rule upstream/check/kv-closed-world.ts in npm run upstream-check and in
 * the policy pack). Defined with the rule that reads it (upstream/ depends on nothing); `${LABEL_PREFIX}/kv-exceptions`.
 */
export { KV_EXCEPTIONS_ANNOTATION } from "../upstream/labels";

/* Rollouts (lib/rollout.ts, policies/rollout.ts). */

/**
 * AIGatewayRoute annotation: JSON array of the rollouts whose rules the route carries, one
 * {@link RolloutAnnotationEntry} each (lib/rollout.ts `rolloutAnnotation`).
 */
export const ROLLOUT_ANNOTATION = `${LABEL_PREFIX}/rollouts`;
/** DynamoGraphDeployment label: the endpoint a revisioned graph belongs to. */
export const REVISION_OF_LABEL = `${LABEL_PREFIX}/revision-of`;
/** DynamoGraphDeployment label: the revision a revisioned graph runs. */
export const REVISION_LABEL = `${LABEL_PREFIX}/revision`;

/** One revision of a rollout as the route annotation carries it. */
export interface RolloutRevisionEntry {
    /** DynamoGraphDeployment name = Backend = AIServiceBackend name. */
    dgd: string;
    role: "source" | "target";
    /** Percent of the model's traffic on this spoke (0-100); the two revisions add up to 100. */
    weight: number;
    /** Capacity was reported ready by the spoke's Prometheus before traffic was written (the source always is). */
    ready: boolean;
}

/** One rollout as the route annotation carries it. */
export interface RolloutAnnotationEntry {
    endpoint: string;
    model: string;
    phase: "warming" | "shifting" | "aborting";
    /** Index into `steps` while shifting. */
    step?: number;
    steps: number[];
    revisions: [RolloutRevisionEntry, RolloutRevisionEntry];
}
