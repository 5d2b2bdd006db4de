import type { ComponentFacts, Source } from "./types";

/**
 * TensorRT-LLM at the version Dynamo 1.5.0's `tensorrtllm-runtime` ships (1.3.0rc25, NIXL 1.3.1;
 * docs.nvidia.com/dynamo/v1.5.0/reference/compatibility). Its flags are Dynamo's (`python3 -m dynamo.trtllm`,
 * upstream/dynamo.ts `dynamoTrtllm`); the engine itself is configured through `--override-engine-args` keys.
 */
export const trtllm: ComponentFacts = {
    component: "trtllm",
    version: "1.3.0rc25",
    flags: {},
    env: {
        TRTLLM_NIXL_KVCACHE_BACKEND: {
            default: "UCX",
            source: "NVIDIA/TensorRT-LLM@v1.3.0rc25:cpp/tensorrt_llm/executor/cache_transmission/nixl_utils/transferAgent.cpp",
            note: "NIXL backend of the cache transceiver; Dynamo efa-on-aws.mdx selects LIBFABRIC with it",
        },
    },
};

/** `--override-engine-args` keys the product writes (TRT-LLM LLM API `LlmArgs`). */
export const trtllmEngineArgKeys = {
    source: "NVIDIA/TensorRT-LLM@v1.3.0rc25:tensorrt_llm/llmapi/llm_args.py#TorchLlmArgs" as Source,
    keys: ["kv_cache_config", "cache_transceiver_config", "max_seq_len", "speculative_config", "tensor_parallel_size"] as const,
    /** `cache_transceiver_config.backend` choices. */
    cacheTransceiverBackends: ["DEFAULT", "UCX", "NIXL", "MPI", "MOONCAKE"] as const,
} as const;
