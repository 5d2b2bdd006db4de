import type { Endpoint } from "../config/endpoint";
import {
    HOLD_ARGV,
    hostPathOwnerArgv,
    KVBM_DISK_FILE_PREFIX,
    KVBM_DISK_OFFLOAD_FILTER_OFF,
    KVBM_VLLM_CONNECTOR,
    MODEL_PRESTAGE_ARGV,
    OWNED_HOSTPATH_MOUNTS,
} from "../upstream/kvbm";
import { versions } from "../config/versions";
import { ROLE_LABEL } from "./labels";
import type { EnvVar } from "./nixl";
import type { ContainerSpec } from "./preflight";

/**
 * KV tiers (Dynamo KVBM) and fast start (per-node model cache, image pre-pull) of one endpoint, as plain data.
 * Facts and activation conditions: upstream/kvbm.ts. Node budgets: lib/serving.ts `nodeHostBudget`.
 */

/** The node's local NVMe filesystem (config/nodeProfile.ts `localNvme`). */
export interface LocalNvme {
    mountPath: string;
    capacityGiB: number;
}

/** Directory under the node's local NVMe holding the per-node Hugging Face cache (`$HF_HOME`). */
export const MODEL_CACHE_SUBDIR = "model-cache";
/** Directory under the node's local NVMe holding the KVBM disk tiers' files. */
export const KVBM_DISK_SUBDIR = "kvbm";
/**
 * Where workers and the pre-stage see the model cache. Read-write on the worker too: huggingface_hub takes its file locks
 * there, and a worker that starts before the pre-stage has finished downloads into the same cache instead of failing.
 */
export const MODEL_CACHE_MOUNT = "/models";
/**
 * Where a worker sees its own KVBM disk tier directory (`DYN_KVBM_DISK_CACHE_DIR`): `<localNvme>/kvbm/<pod UID>` on the
 * node, one directory per pod (volumeMount `subPathExpr: $(POD_UID)`), so no two pods ever share one.
 */
export const KVBM_DISK_MOUNT = "/kvbm";
/** Where a worker sees the whole node's KVBM directory (`<localNvme>/kvbm`), to sweep files its dead peers left. */
export const KVBM_DISK_NODE_MOUNT = "/kvbm-node";
/** The env var carrying the pod's UID (`fieldRef metadata.uid`) that names the pod's directory. */
export const KVBM_POD_UID_ENV = "POD_UID";
/**
 * Minutes after which a disk-tier file another pod left is a leak: KVBM keeps its file named only between creating it
 * and registering it with NIXL (seconds: mkostemp, fallocate, register; upstream/kvbm.ts `kvbmDiskFileLifecycle`), then
 * unlinks it; a file still named and untouched this long belongs to a process that died in that window.
 */
export const KVBM_LEAK_MINUTES = 15;

/**
 * Shell prelude of a worker with a KVBM disk tier, run at every container start before the engine (lib/nixl.ts
 * `wrappedCommand`): (1) removes every disk-tier file in the pod's own directory: only this pod's engine writes there,
 * and the previous container, crashed or OOM-killed between allocating and registering its file, is dead; (2) removes
 * disk-tier files older than {@link KVBM_LEAK_MINUTES} in any pod's directory on the node (and the flat directory
 * earlier renders used), left by pods deleted in that window. A live worker's file is never named past its start, so
 * neither step touches one.
 */
export function kvbmDiskCleanupPrelude(): string {
    const f = `'${KVBM_DISK_FILE_PREFIX}*'`;
    return [
        `rm -f ${KVBM_DISK_MOUNT}/${KVBM_DISK_FILE_PREFIX}*`,
        // Another pod's sweep may remove a file first: find then reports it and exits non-zero, which must not stop
        // this worker.
        `{ find ${KVBM_DISK_NODE_MOUNT} -mindepth 1 -maxdepth 2 -type f -name ${f} -mmin +${KVBM_LEAK_MINUTES} -delete || true; }`,
    ].join(" && ");
}

/**
 * Host memory a KVBM worker needs besides its host tier (engine process, CUDA context, tokenizer): the difference
 * between the memory request and the host tier in Dynamo's own KVBM example (100 GB tier, 200Gi request:
 * ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:examples/backends/vllm/deploy/agg_kvbm.yaml).
 */
export const KVBM_WORKER_OVERHEAD_GIB = 100;

/**
 * Host memory each node keeps for the OS, kubelet and the non-KV pods, in GiB, when the KV tiers and Mooncake segments
 * of the pods on it are added up (lib/serving.ts). A platform choice: 10% of a 2 TiB node.
 */
export const NODE_HOST_RESERVE_GIB = 200;

/** Decimal GB KVBM is given for a tier declared in GiB: rounded down, so it never exceeds what was checked. */
export function kvbmGb(gib: number): number {
    return Math.floor((gib * 2 ** 30) / 1e9);
}

/** vLLM `--kv-transfer-config` of an aggregated KVBM worker (upstream/kvbm.ts). */
export function kvbmKvTransferConfig(): Record<string, unknown> {
    return { ...KVBM_VLLM_CONNECTOR, kv_role: "kv_both" };
}

/**
 * The disk tier takes every block the host tier evicts: KVBM's default disk offload filter passes only blocks reused at
 * least twice (frequency >= 2, to spare SSD wear), so an agent session's KV seen once would never reach NVMe and would
 * not survive a pause that evicts it from host memory. Instance-store NVMe is ephemeral and sized for this
 * (upstream/kvbm.ts `DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER`).
 */
export function kvbmDiskFilterEnv(): EnvVar[] {
    return [{ name: "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER", value: KVBM_DISK_OFFLOAD_FILTER_OFF }];
}

/** What a worker container and its pod get for KV tiers and the model cache. */
export interface WorkerFastStart {
    env: EnvVar[];
    volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean; subPathExpr?: string }>;
    volumes: unknown[];
    /** Memory the worker requests (GiB) so the scheduler accounts for the pinned host tier; undefined without tiers. */
    memoryRequestGiB?: number;
    /** Shell prelude the worker runs before the engine ({@link kvbmDiskCleanupPrelude}); undefined without a disk tier. */
    prelude?: string;
}

/**
 * KVBM environment, volumes and memory request, and the read-only model cache mount, of one worker.
 * @throws Error when the endpoint needs the node's local NVMe and `nvme` is undefined (placement refuses this first)
 */
export function workerFastStart(e: Endpoint, nvme: LocalNvme | undefined): WorkerFastStart {
    const out: WorkerFastStart = { env: [], volumeMounts: [], volumes: [] };
    const needNvme = () => {
        if (!nvme) throw new Error(`endpoint ${e.name}: the node profile has no localNvme for the NVMe tier or model cache`);
        return nvme;
    };
    if (e.kvTiers) {
        out.env.push({ name: "DYN_KVBM_CPU_CACHE_GB", value: String(kvbmGb(e.kvTiers.hostGiB)) });
        out.memoryRequestGiB = e.kvTiers.hostGiB + KVBM_WORKER_OVERHEAD_GIB;
        if (e.kvTiers.nvmeGiB) {
            const n = needNvme();
            out.env.push(
                { name: KVBM_POD_UID_ENV, valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
                { name: "DYN_KVBM_DISK_CACHE_GB", value: String(kvbmGb(e.kvTiers.nvmeGiB)) },
                { name: "DYN_KVBM_DISK_CACHE_DIR", value: KVBM_DISK_MOUNT },
                ...kvbmDiskFilterEnv(),
            );
            // The pod's own directory (the kubelet creates it), and the node's, for the start-up sweep.
            out.volumeMounts.push(
                { name: "kvbm-disk", mountPath: KVBM_DISK_MOUNT, subPathExpr: `$(${KVBM_POD_UID_ENV})` },
                { name: "kvbm-disk", mountPath: KVBM_DISK_NODE_MOUNT },
            );
            out.volumes.push({ name: "kvbm-disk", hostPath: { path: `${n.mountPath}/${KVBM_DISK_SUBDIR}`, type: "DirectoryOrCreate" } });
            out.prelude = kvbmDiskCleanupPrelude();
        }
    }
    if (e.fastStart?.modelCache) {
        const n = needNvme();
        out.env.push({ name: "HF_HOME", value: MODEL_CACHE_MOUNT });
        out.volumeMounts.push({ name: "model-cache", mountPath: MODEL_CACHE_MOUNT });
        out.volumes.push({ name: "model-cache", hostPath: { path: `${n.mountPath}/${MODEL_CACHE_SUBDIR}`, type: "DirectoryOrCreate" } });
    }
    return out;
}

/** Name of the init container that hands the hostPath folder mounted at `mount` to the image user. */
export function hostPathOwnerName(mount: string): string {
    return `own${mount.replaceAll("/", "-")}`;
}

/**
 * Init containers that hand each writable model-cache / KVBM-disk hostPath folder among `mounts` to the Dynamo images'
 * user (uid 1000, gid 0, mode 2775; upstream/kvbm.ts `DYNAMO_IMAGE_USER`, `HOSTPATH_OWNER`): kubelet creates a
 * DirectoryOrCreate folder as root 0755 and fsGroup does nothing for hostPath, so without this the pre-stage and a
 * non-root worker cannot write `$HF_HOME` and KVBM cannot create its disk files. The same on EKS and on-prem spokes
 * (nothing on the node is changed outside the pod). Each runs `install -d` on its one folder as root with only
 * CAP_CHOWN and CAP_FOWNER, no privilege escalation, and must run before any other container that mounts the folder.
 * @param image the pod's own image (it carries coreutils `install`), so nothing else is pulled
 * @param mounts the pod's volume mounts; read-only ones and paths outside `OWNED_HOSTPATH_MOUNTS` are skipped
 */
export function hostPathOwnerInitContainers(
    image: string,
    mounts: ReadonlyArray<{ name: string; mountPath: string; readOnly?: boolean }>,
): ContainerSpec[] {
    return OWNED_HOSTPATH_MOUNTS.flatMap((path) => {
        const m = mounts.find((x) => x.mountPath === path && !x.readOnly);
        if (!m) return [];
        return [
            {
                name: hostPathOwnerName(path),
                image,
                command: hostPathOwnerArgv(path),
                resources: { requests: { cpu: "10m", memory: "16Mi" }, limits: { memory: "64Mi" } },
                securityContext: {
                    runAsUser: 0,
                    runAsGroup: 0,
                    runAsNonRoot: false,
                    allowPrivilegeEscalation: false,
                    privileged: false,
                    capabilities: { drop: ["ALL"], add: ["CHOWN", "FOWNER"] },
                },
                volumeMounts: [{ name: m.name, mountPath: path }],
            },
        ];
    });
}

/**
 * The pre-stage script: downloads the model (and a speculative drafter) into `$HF_HOME/hub` with huggingface_hub's
 * `snapshot_download`, the Hugging Face cache layout Dynamo's model-cache guide uses
 * (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/kubernetes/model-deployment/model-loading/model-caching.mdx).
 * Model ids come as `--model <id>` (repeatable). Idempotent: files already in the cache are not fetched again.
 */
export const MODEL_PRESTAGE_SCRIPT = MODEL_PRESTAGE_ARGV[2];

/** Name of an endpoint's pre-stage DaemonSet. */
export function prestageName(endpoint: string): string {
    return `${endpoint}-prestage`;
}

/** What {@link prestageDaemonSet} needs. */
export interface PrestageArgs {
    endpoint: Endpoint;
    namespace: string;
    /** The worker image (the one the pool's workers run): pulling it here is the image pre-pull. */
    image: string;
    nodeSelector: Record<string, string>;
    tolerations: unknown[];
    nvme: LocalNvme;
    /**
     * The spoke's HF token Secret, the one the workers read (`platform:serving.hfTokenSecret`): the pre-stage reads
     * its `HF_TOKEN` key only when the endpoint's model is gated (`gatedModel`), as the workers do ({@link hfTokenEnv}).
     */
    hfTokenSecret?: string;
    labels: Record<string, string>;
}

/** The Secret key the token is read from: huggingface_hub's `HF_TOKEN` (upstream/kvbm.ts `huggingfaceHub`). */
export const HF_TOKEN_KEY = "HF_TOKEN";

/**
 * `HF_TOKEN` from the spoke's HF token Secret (a `secretKeyRef`, never a value) for a container that downloads the
 * endpoint's model: the pre-stage, the workers and the frontend (model card and tokenizer), only when the model is
 * gated (`gatedModel`); empty otherwise.
 * @throws Error when the model is gated and no Secret is named (placement refuses this first: lib/serving.ts)
 */
export function hfTokenEnv(e: Pick<Endpoint, "name" | "model" | "gatedModel">, secret: string | undefined): EnvVar[] {
    if (!e.gatedModel) return [];
    if (!secret)
        throw new Error(`endpoint ${e.name}: ${e.model} is gated (gatedModel) but the spoke names no platform:serving.hfTokenSecret`);
    return [{ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: secret, key: HF_TOKEN_KEY } } }];
}

/**
 * A DaemonSet on every node of the endpoint's pool that (1) pulls the worker image, so a new worker never waits for the
 * pull, and (2) fills the node's model cache on local NVMe in an init container, so a new worker loads weights from
 * local disk. The main container only holds the pod (and so the image) on the node: `sleep infinity` in the same image,
 * no GPU, no RDMA, 10m CPU. A gated model's download authenticates with `HF_TOKEN` from the spoke's HF token Secret
 * (a `secretKeyRef`, never a value); a public model's pre-stage references no Secret.
 * @throws Error when the endpoint's model is gated and no Secret is named (placement refuses this first)
 */
export function prestageDaemonSet(a: PrestageArgs): Record<string, unknown> {
    const e = a.endpoint;
    const name = prestageName(e.name);
    const labels = { ...a.labels, "app.kubernetes.io/name": name, [ROLE_LABEL]: "prestage" };
    const repos = [e.model, ...(e.speculative?.draftModel ? [e.speculative.draftModel] : [])];
    const token = hfTokenEnv(e, a.hfTokenSecret);
    const mount = [{ name: "model-cache", mountPath: MODEL_CACHE_MOUNT }];
    const small = { requests: { cpu: "10m", memory: "16Mi" }, limits: { memory: "64Mi" } };
    return {
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        metadata: { name, namespace: a.namespace, labels },
        spec: {
            selector: { matchLabels: { "app.kubernetes.io/name": name } },
            updateStrategy: { type: "RollingUpdate" },
            template: {
                metadata: { labels },
                spec: {
                    nodeSelector: { ...a.nodeSelector },
                    tolerations: a.tolerations,
                    automountServiceAccountToken: false,
                    initContainers: [
                        ...hostPathOwnerInitContainers(a.image, mount),
                        {
                            name: "model-cache",
                            image: a.image,
                            command: [...MODEL_PRESTAGE_ARGV],
                            // The model at the revision the workers load (config/endpoint.ts `modelRevision`); the drafter at main.
                            args: repos.flatMap((r, i) => [
                                "--model",
                                r,
                                ...(i === 0 && e.modelRevision ? ["--revision", e.modelRevision] : []),
                            ]),
                            env: [{ name: "HF_HOME", value: MODEL_CACHE_MOUNT }, ...token],
                            resources: { requests: { cpu: "2", memory: "4Gi" }, limits: { memory: "8Gi" } },
                            volumeMounts: mount,
                        },
                    ],
                    containers: [{ name: "hold", image: a.image, command: [...HOLD_ARGV], resources: small }],
                    volumes: [
                        { name: "model-cache", hostPath: { path: `${a.nvme.mountPath}/${MODEL_CACHE_SUBDIR}`, type: "DirectoryOrCreate" } },
                    ],
                },
            },
        },
    };
}

/**
 * How a new worker of the endpoint is expected to start, for the report: where the image and the weights come from,
 * the planner's warm reserve, and checkpoint/restore (never: refused in config/endpoint.ts `endpointUpstreamIssues`).
 * Tolerates a partly defaulted endpoint (the report reads stack files as written).
 */
export function expectedStartPath(e: Endpoint): string {
    const parts = [
        e.fastStart?.modelCache
            ? "image pre-pulled on every pool node; weights from the node's NVMe model cache"
            : "image pulled on a node that has not run it; weights downloaded from Hugging Face at start",
        e.planner?.enabled === false
            ? "no planner (fixed replicas)"
            : `planner keeps >= ${e.planner?.minReplicas ?? 1} warm worker(s) per role`,
        `cold start (no checkpoint/restore in Dynamo ${versions.dynamoPlatform.version})`,
    ];
    return parts.join("; ");
}

/** The endpoint's KV tiers as one line, for the report. */
export function kvTiersText(e: Endpoint): string {
    if (!e.kvTiers) return "HBM only";
    return `HBM -> host ${e.kvTiers.hostGiB} GiB${e.kvTiers.nvmeGiB ? ` -> NVMe ${e.kvTiers.nvmeGiB} GiB` : ""} (KVBM)`;
}
