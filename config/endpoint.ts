import { z } from "zod";

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
        /** Upper bound on GPUs the planner may use for this endpoint. */
        maxGpuBudget: z.number().int().positive().default(16),
        /** Seconds between load-based adjustments (Dynamo default 5). */
        loadAdjustmentIntervalSeconds: z.number().int().positive().default(5),
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
            .object({ mode: z.enum(["kv", "round-robin"]).default("kv") })
            .strict()
            .default({ mode: "kv" }),
        kvPool: KvPoolSchema.default({ kind: "none" }),
        planner: PlannerSchema.prefault({}),
        speculative: SpeculativeSchema.optional(),
        /** Maximum context length in tokens passed to the engine. */
        maxModelLen: z.number().int().positive().optional(),
        /** Reviewed exceptions to the KV-transport closed world ({@link KvExceptionSchema}). */
        kvExceptions: z.array(KvExceptionSchema).optional(),
        /**
         * Spokes this placement's route falls back to when its own frontend fails, highest priority first; each must
         * place the same model (config/failover.ts `failoverHubIssues`, rendered by lib/failover.ts).
         */
        fallback: z.array(DnsLabel).min(1).max(4).optional(),
    })
    .strict();

export type Endpoint = z.infer<typeof EndpointSchema>;
export type WorkerGroup = z.infer<typeof WorkerGroupSchema>;

/** GPUs an endpoint occupies at its configured replica counts. */
export function endpointGpus(e: Endpoint): number {
    const t = e.topology;
    return t.mode === "disaggregated"
        ? t.prefill.replicas * t.prefill.gpusPerWorker + t.decode.replicas * t.decode.gpusPerWorker
        : t.workers.replicas * t.workers.gpusPerWorker;
}

/**
 * Combinations upstream does not support, refused at the hub before anything is placed (upstream/activation.ts):
 * - `mooncake-store-equal-tp`: every worker sharing one Mooncake store pool runs the same tensor-parallel size (a pool
 *   key carries tp_rank, not TP size: vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/data.py `PoolKey`);
 * - `vllm-disagg-model-speculative`: no model-based drafter (eagle3, mtp) on a disaggregated vLLM endpoint (Dynamo known
 *   issue "vLLM Disagg Decode + EAGLE3 Speculative Decoding Crashes Silently", no fix recorded up to v1.5.0:
 *   ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx). ngram has no drafter model.
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
            message: `${e.speculative.method} speculative decoding on a disaggregated vLLM endpoint crashes silently under KV-transfer load and is unsupported upstream, with no fix recorded up to Dynamo 1.5.0 (vllm-disagg-model-speculative, ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/releases/known-issues.mdx): run it on an aggregated endpoint, or use method ngram`,
        });
    }
    return out;
}
