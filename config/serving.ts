import { z } from "zod";
import { DnsLabel } from "./endpoint";

/**
 * Spoke serving settings (`platform:serving`, optional; every field has a default so existing spoke stack files
 * keep working): how the Dynamo platform is installed and which node pool runs each endpoint the hub places here.
 */
export const ServingConfigSchema = z
    .object({
        /** Namespace of the dynamo-platform release (operator); upstream installs into `dynamo-system`. */
        platformNamespace: DnsLabel.default("dynamo-system"),
        /**
         * Install Grove with the platform (`global.grove.install/enabled`). Needed only for multinode components;
         * production installs Grove separately. Workers here never span nodes.
         */
        grove: z.boolean().default(false),
        /** Install the KAI scheduler with the platform (`global.kai-scheduler.install/enabled`). */
        kaiScheduler: z.boolean().default(false),
        /**
         * Prometheus the Planner queries (env `PROMETHEUS_ENDPOINT`, chart `dynamo-operator.dynamo.metrics.prometheusEndpoint`).
         * Unset: the Prometheus of `platform:observability` (config/observability.ts `prometheusOf`), the one the scrape
         * objects are selected by. Upstream's own default (`prometheus-kube-prometheus-prometheus`, a release named
         * `prometheus`) is never used implicitly.
         */
        prometheusEndpoint: z.string().url().optional(),
        /**
         * Secret in the inference namespace holding a Hugging Face token under key `HF_TOKEN` (read by huggingface_hub),
         * for gated models: the frontend, workers and model-cache pre-stage of an endpoint with `gatedModel` get
         * `HF_TOKEN` from it (`secretKeyRef`; never `envFrom` of the whole Secret, whose other keys the pack could not
         * see); a public model's containers reference nothing. Required on a spoke that runs a `gatedModel` endpoint.
         * Create it yourself (`kubectl -n inference create secret generic <name> --from-literal=HF_TOKEN=...`): only its
         * name is in the stack file. Unset: no secret is referenced.
         */
        hfTokenSecret: z.string().min(1).optional(),
        /**
         * Node pool per endpoint name (`<endpoint>: <pool>`). Optional while the spoke has one GPU pool; required for
         * every placed endpoint once it has several, so a placement never lands on a pool by accident.
         */
        endpointPools: z.record(DnsLabel, DnsLabel).default({}),
        /**
         * On-prem only: node selector (label -> value) of the CPU nodes that run each endpoint's Dynamo Frontend and
         * Planner and the Mooncake master (no GPU, no RDMA). Unset: no selector, so they land on any untainted node (the
         * GPU pools carry the GPU taint). EKS spokes always use their CPU node group's selector and reject this key.
         */
        systemNodeSelector: z.record(z.string().min(1), z.string()).optional(),
    })
    .strict();

/** `platform:serving` of a spoke as parsed ({@link ServingConfigSchema}, defaults filled in). */
export type ServingConfig = z.infer<typeof ServingConfigSchema>;
