import { z } from "zod";
import { makeRolloutSchema, RevisionLabel } from "./rollout";
import { versions } from "./versions";

/** A DNS-1123 label usable as a Kubernetes object name prefix (endpoints add suffixes, so keep it short). */
export const DnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$/, "must be a lower-case DNS label of at most 40 characters");

/** A pool of identical workers: `replicas` pods, each with `gpusPerWorker` GPUs (tensor parallel degree). */
export const WorkerGroupSchema = z
    .object({
        replicas: z.number().int().min(1),
        /** GPUs per worker = TP size; a worker never spans nodes here (max 8 on HGX H200). */
        gpusPerWorker: z.number().int().min(1).max(8),
    })
    .strict();

/**
 * Serving topology. `disaggregated` splits prefill and decode into separate workers connected by NIXL
 * (KV moves over the RDMA rails); `aggregated` runs both phases in each worker.
 */
export const TopologySchema = z.discriminatedUnion("mode", [
    z.object({ mode: z.literal("disaggregated"), prefill: WorkerGroupSchema, decode: WorkerGroupSchema }).strict(),
    z.object({ mode: z.literal("aggregated"), workers: WorkerGroupSchema }).strict(),
]);

/**
 * Dynamo Planner settings. Scales on KV-cache utilisation and queued prefill tokens (`load`) or on
 * fixed queue/KV thresholds (`throughput`); never on GPU utilisation.
 * Field names follow Dynamo PlannerConfig (ai-dynamo/dynamo components/src/dynamo/planner/config/planner_config.py).
 */
export const PlannerSchema = z
    .object({
        enabled: z.boolean().default(true),
        optimizationTarget: z.enum(["load", "throughput"]).default("load"),
        /** Decode scale-up threshold: KV-cache utilisation in percent (0-100). */
        decodeScaleUpKvRate: z.number().min(1).max(100).default(80),
        /** Decode scale-down threshold: KV-cache utilisation in percent (0-100). */
        decodeScaleDownKvRate: z.number().min(0).max(100).default(40),
        /** Prefill scale-up threshold: queued prefill tokens. */
        prefillScaleUpQueueTokens: z.number().int().positive().default(200000),
        /** Prefill scale-down threshold: queued prefill tokens. */
        prefillScaleDownQueueTokens: z.number().int().min(0).default(20000),
        /**
         * Upper bound on GPUs the planner may use for this endpoint (PlannerConfig `max_gpu_budget`, a hard ceiling on
         * every scale-up: upstream/planner.ts). At least the GPUs at the configured replicas plus one more worker of
         * the largest pool (else the planner can never add a worker), and with the other endpoints of the spoke (their
         * budgets, or their graphs' GPUs where the planner is off) within the spoke's GPUs (config/hub-checks.ts).
         */
        maxGpuBudget: z.number().int().positive().default(16),
        /** Seconds between load-based adjustments (Dynamo default 5). */
        loadAdjustmentIntervalSeconds: z.number().int().positive().default(5),
        /**
         * Workers per role the planner never scales below (PlannerConfig `min_endpoint`; on a disaggregated endpoint
         * `prefill_min_endpoint` and `decode_min_endpoint`): the warm reserve that absorbs a burst while a new worker
         * cold-starts. At least 1 (scale-to-zero removes the model from /v1/models).
         */
        minReplicas: z.number().int().min(1).default(1),
    })
    .strict()
    .refine((p) => p.decodeScaleDownKvRate < p.decodeScaleUpKvRate, {
        message: "decodeScaleDownKvRate must be below decodeScaleUpKvRate",
        path: ["decodeScaleDownKvRate"],
    })
    .refine((p) => p.prefillScaleDownQueueTokens < p.prefillScaleUpQueueTokens, {
        message: "prefillScaleDownQueueTokens must be below prefillScaleUpQueueTokens",
        path: ["prefillScaleDownQueueTokens"],
    });

/** Mooncake host-RAM KV pool shared by the endpoint's workers, read over the RDMA rails. */
export const KvPoolSchema = z.discriminatedUnion("kind", [
    z
        .object({
            kind: z.literal("mooncake"),
            /** Host DRAM each store node contributes, in GiB (MOONCAKE_GLOBAL_SEGMENT_SIZE). */
            segmentSizeGiB: z.number().int().positive(),
            /** Store pods; at most one per GPU node. */
            storeReplicas: z.number().int().positive().default(2),
        })
        .strict(),
    z.object({ kind: z.literal("none") }).strict(),
]);

/** Speculative decoding carried by the placement. */
export const SpeculativeSchema = z
    .object({
        method: z.enum(["eagle3", "ngram", "mtp"]),
        /** Draft model id for eagle3 (Hugging Face repo id). */
        draftModel: z.string().optional(),
        numSpeculativeTokens: z.number().int().min(1).max(16),
    })
    .strict()
    .refine((s) => s.method !== "eagle3" || !!s.draftModel, { message: "eagle3 needs draftModel", path: ["draftModel"] });

/**
 * A reviewed exception to the pack's closed world for KV transport (upstream/kv-transport.ts): one setting the pack
 * cannot prove keeps KV on RDMA, accepted for exactly this name and value on this endpoint's graph (optionally one
 * component: `prefill`, `decode`, `worker`) until `until` (UTC date, inclusive); refused after. The render annotates
 * the graph with it (lib/labels.ts KV_EXCEPTIONS_ANNOTATION) and lists it in the render report.
 */
export const KvExceptionSchema = z
    .object({
        /** Env var, flag (`--x`) or JSON key (`--kv-transfer-config.kv_buffer_device`, `mooncake.json.protocol`). */
        name: z.string().min(1),
        /** The exact value accepted (string form, as the container gets it). */
        value: z.string(),
        /** DGD component the exception applies to; every KV-moving container of the graph when absent. */
        component: DnsLabel.optional(),
        /** Why it is needed and who reviewed it. */
        why: z.string().min(10),
        /** Last day it is accepted (YYYY-MM-DD). */
        until: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "until must be YYYY-MM-DD"),
    })
    .strict();

/**
 * A Hugging Face revision of the model's repository: a commit SHA (40 lower-case hex digits, what pins the files) or a
 * tag/branch name (git ref rules: no `..`, no leading `-` or `/`, at most 128 characters). Rendered as the engine's own
 * `--revision` (upstream/revision.ts), and fetched at the same revision by the model-cache pre-stage.
 */
export const ModelRevisionSchema = z
    .string()
    .regex(
        /^(?:[0-9a-f]{40}|(?!.*\.\.)(?!.*\/\/)[A-Za-z0-9_][A-Za-z0-9._/-]{0,127})$/,
        "must be a Hugging Face revision: a 40-hex commit SHA or a tag/branch name (letters, digits, . _ - /, no '..')",
    )
    .refine((r) => !r.endsWith("/") && !r.endsWith(".lock") && !/^[0-9a-fA-F]{7,39}$/.test(r), {
        message: "an abbreviated commit SHA is not resolved by huggingface_hub: give all 40 hex digits, or a tag/branch name",
    });

/** A gated canary rollout of an endpoint (config/rollout.ts `makeRolloutSchema`, docs/rollout.md). */
export const RolloutSchema = makeRolloutSchema({
    ModelRevisionSchema,
    TopologySchema,
    KvPoolSchema,
    PlannerSchema,
    SpeculativeSchema,
    KvExceptionSchema,
});
/** An endpoint's gated canary rollout as parsed ({@link RolloutSchema}). */
export type Rollout = z.infer<typeof RolloutSchema>;

/**
 * KV tiers below GPU memory, managed by Dynamo KVBM (vLLM `DynamoConnector`): a host-memory tier (G2, pinned DRAM)
 * and optionally a local NVMe tier (G3) behind it. Sizes are per worker pod (KVBM sums its TP ranks' block bytes:
 * ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/block_manager/distributed/leader.rs). Tier
 * order as upstream requires: the host tier is always there (disk-only is experimental upstream and skips the disk
 * offload filter) and each lower tier is at least as large as the one above it, else KVBM churns
 * (docs/fern/pages/reference/components/kvbm-configuration.mdx, same commit). upstream/kvbm.ts records the facts.
 */
export const KvTiersSchema = z
    .object({
        /** Host-memory (G2) tier per worker in GiB; rendered as `DYN_KVBM_CPU_CACHE_GB` (decimal GB, rounded down). */
        hostGiB: z.number().int().positive(),
        /** Local NVMe (G3) tier per worker in GiB, on the node profile's `localNvme`; rendered as `DYN_KVBM_DISK_CACHE_GB`. */
        nvmeGiB: z.number().int().positive().optional(),
    })
    .strict()
    .refine((t) => t.nvmeGiB === undefined || t.nvmeGiB >= t.hostGiB, {
        message:
            "nvmeGiB must be at least hostGiB: each lower KVBM tier at least as large as the tier above it, else blocks are evicted and reloaded repeatedly",
        path: ["nvmeGiB"],
    });

/**
 * How a new worker of the endpoint starts (lib/faststart.ts). `modelCache`: a per-node model cache on the pool's local
 * NVMe (node profile `localNvme`), filled ahead of time by a DaemonSet on every node of the pool, which also pulls the
 * worker image; workers read the weights from it (`HF_HOME`) instead of downloading them. `checkpointRestore`: Dynamo
 * Snapshot (CRIU + cuda-checkpoint), refused where the pinned Dynamo does not support the endpoint's shape.
 */
export const FastStartSchema = z
    .object({
        modelCache: z.boolean().default(false),
        checkpointRestore: z.boolean().default(false),
    })
    .strict();

/**
 * An inference endpoint as the hub places it: one DynamoGraphDeployment on one spoke.
 * Part of the hub -> spoke placement contract.
 */
export const EndpointSchema = z
    .object({
        name: DnsLabel,
        /** Model id as clients send it in the request body `model` (Hugging Face repo id). */
        model: z.string().min(1),
        spoke: DnsLabel,
        engine: z.enum(["vllm", "sglang", "trtllm"]),
        topology: TopologySchema,
        router: z
            .object({
                mode: z.enum(["kv", "round-robin"]).default("kv"),
                /**
                 * The KV router's `--router-queue-threshold` (fraction of the workers' `max_num_batched_tokens`, >= 0):
                 * requests queue at the router once every worker's active prefill is above it, and the queue is
                 * ordered by the request's strict tier, then priority. Unset upstream means no router queue, so the
                 * platform's latency classes would be inert (ai-dynamo/dynamo@v1.5.0:components/src/dynamo/common/configuration/groups/kv_router_args.py;
                 * "Router queueing disabled by default", docs/fern/pages/reference/general/releases/deprecations.mdx).
                 * Default 1: queue only once every worker has a full prefill batch in flight. Rendered for `kv` only.
                 */
                queueThreshold: z.number().min(0).default(1),
            })
            .strict()
            .prefault({}),
        kvPool: KvPoolSchema.default({ kind: "none" }),
        planner: PlannerSchema.prefault({}),
        speculative: SpeculativeSchema.optional(),
        /** Maximum context length in tokens passed to the engine. */
        maxModelLen: z.number().int().positive().optional(),
        /**
         * The model repository's Hugging Face revision ({@link ModelRevisionSchema}) every worker loads (engine
         * `--revision`; vLLM also `--tokenizer-revision`); absent: the repository's `main`. Refused on trtllm
         * (config/endpoint.ts `endpointUpstreamIssues`, `model-revision-engine`). A rollout target may change it.
         */
        modelRevision: ModelRevisionSchema.optional(),
        /**
         * The reviewed way out of `model-revision-tokenizer`: the revision whose tokenizer files (`tokenizer.json`,
         * `tokenizer_config.json`, chat template) a person checked equal `main`'s. The Dynamo frontend tokenizes with the
         * model card's files, which Dynamo fetches at `main` whatever the engine's `--revision` (upstream/revision.ts
         * `frontend-model-card`); so `modelRevision` is refused unless this names the same revision.
         */
        tokenizerMatchesMain: ModelRevisionSchema.optional(),
        /** KVBM tiers in host memory and local NVMe ({@link KvTiersSchema}); absent: KV stays in GPU memory (and the pool). */
        kvTiers: KvTiersSchema.optional(),
        /** Fast start ({@link FastStartSchema}); absent: workers download weights at start. */
        fastStart: FastStartSchema.optional(),
        /**
         * The model (or its speculative drafter) is a gated Hugging Face repository (its page asks to accept a licence:
         * `meta-llama/*`, for one): downloading it needs a token. The spoke must name the Secret holding it
         * (`platform:serving.hfTokenSecret`, key `HF_TOKEN`), else the placement is refused (lib/serving.ts
         * `placeEndpoints`); the model-cache pre-stage gets that Secret's `HF_TOKEN` only for such an endpoint
         * (lib/faststart.ts `prestageDaemonSet`). Absent: the model is public.
         */
        gatedModel: z.boolean().optional(),
        /** Reviewed exceptions to the KV-transport closed world ({@link KvExceptionSchema}). */
        kvExceptions: z.array(KvExceptionSchema).optional(),
        /**
         * The revision this endpoint runs (its DynamoGraphDeployment is `<name>-<revision>`); absent: the graph is named
         * after the endpoint. Written by `npm run rollout` when a rollout completes (docs/rollout.md).
         */
        revision: RevisionLabel.optional(),
        /** A gated canary rollout to a new revision (config/rollout.ts `RolloutSchema`, docs/rollout.md). */
        rollout: RolloutSchema.optional(),
        /**
         * Set by the hub, never in a hub file (programs/hub.ts `buildSpokeContracts`): how many KV cache scopes
         * (config/serving-policy.ts `cacheScope`) have keys calling this endpoint's model. Rendered as the
         * DynamoGraphDeployment annotation {@link CACHE_SCOPES_ANNOTATION}, which the pack and `upstream-check` read
         * to refuse an engine that drops the cache salt while serving more than one scope.
         */
        cacheScopes: z.number().int().min(0).optional(),
        /**
         * Spokes this placement's route falls back to when its own frontend fails, highest priority first; each must
         * place the same model (config/failover.ts `failoverHubIssues`, rendered by lib/failover.ts).
         */
        fallback: z.array(DnsLabel).min(1).max(4).optional(),
    })
    .strict();

/** DGD annotation carrying {@link Endpoint.cacheScopes} (defined with the rule that reads it, upstream/labels.ts). */
export { CACHE_SCOPES_ANNOTATION } from "../upstream/labels";

/** One placed endpoint as parsed ({@link EndpointSchema}, defaults filled in): its spoke, model, engine, topology,
 * router, KV pool and planner. */
export type Endpoint = z.infer<typeof EndpointSchema>;
/** A pool of identical workers as parsed ({@link WorkerGroupSchema}): `replicas` pods of `gpusPerWorker` GPUs each. */
export type WorkerGroup = z.infer<typeof WorkerGroupSchema>;

/** GPUs a topology occupies at its configured replica counts. */
export function topologyGpus(t: z.infer<typeof TopologySchema>): number {
    return t.mode === "disaggregated"
        ? t.prefill.replicas * t.prefill.gpusPerWorker + t.decode.replicas * t.decode.gpusPerWorker
        : t.workers.replicas * t.workers.gpusPerWorker;
}

/**
 * GPUs an endpoint occupies at its configured replica counts; during a rollout both revisions run side by side, so
 * the target's topology counts too (config/rollout.ts).
 */
export function endpointGpus(e: Endpoint): number {
    return topologyGpus(e.topology) + (e.rollout ? topologyGpus(e.rollout.target.topology ?? e.topology) : 0);
}

/**
 * Combinations upstream does not support, refused at the hub before anything is placed (upstream/activation.ts):
 * - `mooncake-store-equal-tp`: every worker sharing one Mooncake store pool runs the same tensor-parallel size (a pool
 *   key carries tp_rank, not TP size: vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py `PoolKey`);
 * - `vllm-disagg-model-speculative`: no model-based drafter (eagle3, mtp) on a disaggregated vLLM endpoint (Dynamo known
 *   issue "vLLM Disagg Decode + EAGLE3 Speculative Decoding Crashes Silently", no fix recorded up to v1.5.0:
 *   ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx). ngram has no drafter model.
 * - `kvbm-vllm-only`, `kvbm-not-with-store`, `kvbm-aggregated-only`: KVBM tiers on an aggregated vLLM endpoint without a
 *   Mooncake store pool (upstream/kvbm.ts);
 * - `snapshot-single-gpu`, `snapshot-not-in-pin`: checkpoint/restore is refused, naming the shape upstream does not
 *   support (multi-GPU workers) or, for a single-GPU shape, what the pinned release no longer ships (upstream/kvbm.ts).
 * @param key the endpoint's stack key, e.g. `platform:endpoints[0]`
 * @returns one issue per refused combination, naming the key to change
 */
export function endpointUpstreamIssues(e: Endpoint, key: string): Array<{ key: string; message: string }> {
    const out: Array<{ key: string; message: string }> = [];
    const t = e.topology;
    if (e.kvPool.kind === "mooncake" && t.mode === "disaggregated" && t.prefill.gpusPerWorker !== t.decode.gpusPerWorker) {
        out.push({
            key: `${key}.topology.decode.gpusPerWorker`,
            message: `prefill runs TP${t.prefill.gpusPerWorker} and decode TP${t.decode.gpusPerWorker} on one Mooncake store pool; pool keys carry the writer's tp_rank but not its TP size, so the two sides cannot read each other's KV (mooncake-store-equal-tp, vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py PoolKey): give prefill and decode the same gpusPerWorker, or use kvPool kind none`,
        });
    }
    if (e.engine === "vllm" && t.mode === "disaggregated" && e.speculative && e.speculative.method !== "ngram") {
        out.push({
            key: `${key}.speculative`,
            message: `${e.speculative.method} speculative decoding on a disaggregated vLLM endpoint crashes silently under KV-transfer load and is unsupported upstream, with no fix recorded up to Dynamo ${versions.dynamoPlatform.version} (vllm-disagg-model-speculative, ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx): run it on an aggregated endpoint, or use method ngram`,
        });
    }
    if (e.kvTiers) {
        const at = `${key}.kvTiers`;
        if (e.engine !== "vllm")
            out.push({
                key: at,
                message: `engine ${e.engine}: KVBM tiers are rendered for vLLM only (kvbm-vllm-only). SGLang offloads with its own HiCache, not KVBM (Dynamo's offloading backends are alternatives: ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/cli/kv-cache-offloading/overview.mdx); TensorRT-LLM's KVBM connector is not rendered here: remove kvTiers or use engine vllm`,
            });
        if (e.kvPool.kind === "mooncake")
            out.push({
                key: at,
                message: `KVBM tiers and a Mooncake store pool on one endpoint stack two offloading backends, which Dynamo calls alternatives, not layers (kvbm-not-with-store, ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/cli/kv-cache-offloading/overview.mdx): remove kvTiers or set kvPool kind none`,
            });
        if (t.mode === "disaggregated")
            out.push({
                key: at,
                message: `KVBM on a disaggregated endpoint runs on the prefill worker only, under Dynamo's PdConnector (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:examples/backends/vllm/deploy/disagg_kvbm.yaml), which this product does not render (kvbm-aggregated-only): use an aggregated topology or remove kvTiers`,
            });
    }
    if (e.modelRevision !== undefined && e.tokenizerMatchesMain !== e.modelRevision)
        out.push({
            key: `${key}.modelRevision`,
            message: `${e.modelRevision}: the Dynamo frontend tokenizes with the model card's files, which Dynamo fetches at the repository's main whatever the engine's --revision (model-revision-tokenizer, ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/hub.rs from_hf; upstream/revision.ts): check that this revision's tokenizer.json, tokenizer_config.json and chat template equal main's, then set tokenizerMatchesMain to the same revision${e.tokenizerMatchesMain ? ` (it names ${e.tokenizerMatchesMain})` : ""}`,
        });
    if (e.modelRevision !== undefined && e.engine === "trtllm")
        out.push({
            key: `${key}.modelRevision`,
            message: `engine trtllm: Dynamo's TensorRT-LLM worker declares --revision in its diffusion argument group only, so the text worker's model download cannot be proven to honour it (model-revision-engine, ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/trtllm/backend_args.py; upstream/revision.ts): remove modelRevision or use engine vllm/sglang`,
        });
    if (e.fastStart?.checkpointRestore) {
        const groups =
            t.mode === "disaggregated"
                ? ([
                      ["prefill", t.prefill],
                      ["decode", t.decode],
                  ] as const)
                : ([["workers", t.workers]] as const);
        const multi = groups.filter(([, g]) => g.gpusPerWorker > 1);
        out.push({
            key: `${key}.fastStart.checkpointRestore`,
            message: multi.length
                ? `${multi.map(([r, g]) => `${r} workers have ${g.gpusPerWorker} GPUs`).join(", ")}: Dynamo Snapshot restores single-GPU workers only; multi-GPU is "highly experimental" (vLLM) or "work in progress" (SGLang, TensorRT-LLM) (snapshot-single-gpu, ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/developer-guide/knowledge-base/kubernetes/kubernetes-operator/snapshot.md), and Dynamo ${versions.dynamoPlatform.version} no longer bundles the snapshot chart, agent or DynamoCheckpoint CRD: set checkpointRestore false and use modelCache`
                : `Dynamo ${versions.dynamoPlatform.version} (config/versions.ts dynamoPlatform) dropped the bundled snapshot chart, snapshot-agent image and DynamoCheckpoint CRD; checkpoint/restore needs the separate ai-dynamo/snapshot chart, a placeholder image and ReadWriteMany storage, none of which this product renders (snapshot-not-in-pin): set checkpointRestore false and use modelCache`,
        });
    }
    return out;
}
