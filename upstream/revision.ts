import type { Source } from "./types";

/**
 * How the pinned engines and Dynamo take a model's Hugging Face revision (config/endpoint.ts `modelRevision`), read at
 * the engine pins of config/versions.ts (vLLM v0.28.0, SGLang v0.5.18) and Dynamo at
 * ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f (the commit the product's Dynamo facts are read at).
 */
export interface RevisionFact {
    id: string;
    fact: string;
    /** What the product renders or refuses because of it. */
    consequence: string;
    source: Source;
}

export const revisionFacts: readonly RevisionFact[] = [
    {
        id: "vllm-revision",
        fact: "Dynamo's vLLM worker builds its parser with AsyncEngineArgs.add_cli_args and AsyncEngineArgs.from_cli_args, so vLLM's --revision and --tokenizer-revision reach EngineArgs unchanged; the worker also resolves its HF cache lookups with vllm_config.model_config.revision. vLLM's tokenizer_revision does not default to revision.",
        consequence: "vllm workers get --revision <r> --tokenizer-revision <r> (lib/dgd.ts ENGINES.vllm)",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/vllm/args.py",
    },
    {
        id: "vllm-prefetch-main",
        fact: "Before vLLM starts, Dynamo's vLLM worker prefetches `--model` with fetch_model(config.model) (ignore_weights False): hub::from_hf without a revision, so `main`'s full snapshot, unless --model is a local path or a ModelExpress load format. vLLM then loads --revision's snapshot itself.",
        consequence:
            "a vLLM worker with modelRevision downloads main's weights too (disk and start time); not rendered away, named in docs/rollout.md",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/vllm/main.py#should_prefetch_model",
    },
    {
        id: "sglang-revision",
        fact: "Dynamo's SGLang worker parses ServerArgs.add_cli_args / ServerArgs.from_cli_args, so --revision reaches ServerArgs.revision (weights and config); the worker runs --skip-tokenizer-init, so SGLang loads no tokenizer.",
        consequence: "sglang workers get --revision <r> (lib/dgd.ts ENGINES.sglang)",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/sglang/args.py",
    },
    {
        id: "trtllm-revision",
        fact: "Dynamo's TensorRT-LLM worker declares --revision (DYN_TRTLLM_REVISION) in its diffusion argument group; that the text (LLM) worker's model download honours it is not shown at the pin.",
        consequence: "modelRevision on trtllm is refused naming the key (config/endpoint.ts model-revision-engine)",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/trtllm/backend_args.py",
    },
    {
        id: "frontend-model-card",
        fact: "The frontend tokenizes and applies the chat template from the worker's model deployment card. The worker registers the card from hub::from_hf(<repo id>) and the frontend resolves its hf:// files with hub::from_hf(<repo>); neither takes a revision: hf-hub's Cache::model reads the repository's `main` ref, and a miss downloads `main`.",
        consequence:
            "the frontend's tokenizer and chat template are main's, whatever modelRevision says: modelRevision is refused unless tokenizerMatchesMain names the same revision, a person's check that its tokenizer files equal main's (config/endpoint.ts model-revision-tokenizer)",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/hub.rs#from_hf",
    },
    {
        id: "prestage-revision",
        fact: "huggingface_hub snapshot_download(repo_id, revision) fills snapshots/<commit> and, for a tag or branch, refs/<name>; the engine's own lookup at the same revision finds it in the cache.",
        consequence: "the model-cache pre-stage passes --revision <r> after the model (lib/faststart.ts prestageDaemonSet)",
        source: "huggingface/huggingface_hub@03333b689b5a2dee604676791c0792ede6246a31:src/huggingface_hub/_snapshot_download.py",
    },
];
