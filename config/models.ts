/**
 * What the platform must know of a model's architecture to refuse a placement its engine would refuse at start-up:
 * attention heads and KV heads (tensor-parallel split) and the longest context (`max_position_embeddings`). Values
 * are the model repositories' own `config.json` fields; a model not listed here is not checked (the engine still
 * refuses at start-up, but the stack cannot know).
 *
 * Engine rules (vLLM, the same in SGLang and TensorRT-LLM for these dense/MLA models):
 * - `num_attention_heads % tp == 0`: vllm-project/vllm `vllm/config/model.py` `verify_with_parallel_config`
 *   ("Total number of attention heads (...) must be divisible by tensor parallel size (...)").
 * - KV heads are split when `num_key_value_heads >= tp` (then `num_key_value_heads % tp == 0`) and replicated when
 *   fewer (then `tp % num_key_value_heads == 0`): vllm `vllm/model_executor/layers/linear.py` `QKVParallelLinear`.
 * - `max_model_len` above the derived maximum (`max_position_embeddings` when `rope_scaling` is null) is refused
 *   unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`: vllm `vllm/config/model.py` `_get_and_verify_max_len`.
 */
export interface ModelArchitecture {
    /** `num_attention_heads` in config.json. */
    attentionHeads: number;
    /** `num_key_value_heads` in config.json. */
    kvHeads: number;
    /** `max_position_embeddings` in config.json: the longest context in tokens. */
    maxPositionEmbeddings: number;
    /** Where the values were read. */
    source: string;
}

/** Known models by Hugging Face repo id (the `model` clients send). */
export const KNOWN_MODELS: Readonly<Record<string, ModelArchitecture>> = {
    "meta-llama/Llama-3.3-70B-Instruct": {
        attentionHeads: 64,
        kvHeads: 8,
        maxPositionEmbeddings: 131072,
        source: "huggingface.co/meta-llama/Llama-3.3-70B-Instruct config.json (num_attention_heads 64, num_key_value_heads 8, max_position_embeddings 131072)",
    },
    "meta-llama/Llama-3.1-70B-Instruct": {
        attentionHeads: 64,
        kvHeads: 8,
        maxPositionEmbeddings: 131072,
        source: "huggingface.co/meta-llama/Llama-3.1-70B-Instruct config.json",
    },
    "meta-llama/Llama-3.1-8B-Instruct": {
        attentionHeads: 32,
        kvHeads: 8,
        maxPositionEmbeddings: 131072,
        source: "huggingface.co/meta-llama/Llama-3.1-8B-Instruct config.json",
    },
    "Qwen/Qwen3-32B": {
        attentionHeads: 64,
        kvHeads: 8,
        maxPositionEmbeddings: 40960,
        source: "huggingface.co/Qwen/Qwen3-32B config.json (num_attention_heads 64, num_key_value_heads 8, max_position_embeddings 40960, rope_scaling null; 131072 only with YaRN rope_scaling added)",
    },
    "deepseek-ai/DeepSeek-R1": {
        attentionHeads: 128,
        kvHeads: 128,
        maxPositionEmbeddings: 163840,
        source: "huggingface.co/deepseek-ai/DeepSeek-R1 config.json (num_attention_heads 128, num_key_value_heads 128, max_position_embeddings 163840)",
    },
    "deepseek-ai/DeepSeek-V3": {
        attentionHeads: 128,
        kvHeads: 128,
        maxPositionEmbeddings: 163840,
        source: "huggingface.co/deepseek-ai/DeepSeek-V3 config.json",
    },
};

/** Why `tp` GPUs cannot split `m`, or undefined when they can. */
export function tensorParallelProblem(m: ModelArchitecture, tp: number): string | undefined {
    if (m.attentionHeads % tp !== 0) return `${m.attentionHeads} attention heads are not divisible by tensor-parallel size ${tp}`;
    if (m.kvHeads >= tp ? m.kvHeads % tp !== 0 : tp % m.kvHeads !== 0)
        return `${m.kvHeads} KV heads can be neither split nor replicated across ${tp} GPUs`;
    return undefined;
}
