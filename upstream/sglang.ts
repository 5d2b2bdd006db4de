import type { ComponentFacts, Source } from "./types";

/**
 * SGLang at the version Dynamo 1.5.0's `sglang-runtime` ships (v0.5.18, NIXL 1.4.0;
 * docs.nvidia.com/dynamo/v1.5.0/reference/compatibility). `python3 -m dynamo.sglang` parses SGLang's ServerArgs.
 */
const SA: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py#ServerArgs.add_cli_args";
const ENV: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/environ.py";

export const sglang: ComponentFacts = {
    component: "sglang",
    version: "v0.5.18",
    flags: {
        "--model-path": { takesValue: true, source: SA },
        "--served-model-name": { takesValue: true, source: SA },
        "--tp-size": { takesValue: true, aliases: ["--tensor-parallel-size"], default: "1", source: SA },
        "--trust-remote-code": { takesValue: false, source: SA },
        "--skip-tokenizer-init": { takesValue: false, source: SA },
        "--max-prefill-tokens": {
            takesValue: true,
            default: "16384",
            source: SA,
            note: "tokens in one prefill batch (the real bound is max(this, the context length)); Dynamo publishes it as the worker's max_num_batched_tokens, the KV router's queue-threshold denominator (upstream/activation.ts router-priority)",
        },
        "--page-size": {
            takesValue: true,
            default: "1",
            source: SA,
            note: "KV page size in tokens; must match between prefill and decode",
        },
        "--kv-cache-dtype": { takesValue: true, default: "auto", source: SA, note: "must match between prefill and decode" },
        "--dtype": { takesValue: true, default: "auto", source: SA },
        "--host": { takesValue: true, default: "127.0.0.1", source: SA },
        "--context-length": { takesValue: true, source: SA },
        "--revision": {
            takesValue: true,
            source: SA,
            note: "Hugging Face revision of --model-path (ServerArgs.revision), used for weights and config; upstream/revision.ts",
        },
        "--disaggregation-mode": { takesValue: true, choices: ["null", "prefill", "decode"], default: "null", source: SA },
        "--disaggregation-transfer-backend": {
            takesValue: true,
            choices: ["mooncake", "nixl", "ascend", "fake"],
            default: "mooncake",
            source: SA,
        },
        "--disaggregation-bootstrap-port": { takesValue: true, default: "8998", source: SA },
        "--disaggregation-ib-device": {
            takesValue: true,
            source: SA,
            note: "RDMA devices of the disaggregation transfer engine, one or a comma list (mlx5_0,mlx5_1); unset: Mooncake auto-detects devices",
        },
        "--disaggregation-decode-enable-radix-cache": {
            takesValue: false,
            source: SA,
            note: "keeps the radix cache on a P/D decode worker (the P/D hook forces it off otherwise)",
        },
        "--kv-events-config": { takesValue: true, source: SA },
        "--enable-metrics": {
            takesValue: false,
            source: SA,
            note: "registers the sglang:* Prometheus series; Dynamo's worker re-exports them only then (upstream/activation.ts exporterActivation)",
        },
        "--enable-hierarchical-cache": { takesValue: false, source: SA, note: "refused together with a disabled radix cache" },
        "--hicache-ratio": { takesValue: true, default: "2.0", source: SA },
        "--hicache-write-policy": { takesValue: true, choices: ["write_back", "write_through", "write_through_selective"], source: SA },
        "--hicache-storage-backend": { takesValue: true, source: SA },
        "--hicache-storage-backend-extra-config": { takesValue: true, source: SA },
        "--disable-radix-cache": { takesValue: false, source: SA },
        "--schedule-policy": {
            takesValue: true,
            choices: ["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"],
            default: "fcfs",
            source: SA,
            note: "priority scheduling is asserted to run under fcfs or lof only",
        },
        "--enable-priority-scheduling": {
            takesValue: false,
            source: SA,
            note: "without it the request priority Dynamo passes is ignored (upstream/activation.ts engine-priority)",
        },
        "--speculative-algorithm": { takesValue: true, source: SA },
        "--speculative-draft-model-path": { takesValue: true, source: SA },
        "--speculative-num-draft-tokens": { takesValue: true, source: SA },
    },
    env: {
        SGLANG_HOST_IP: {
            source: "sgl-project/sglang@v0.5.18:python/sglang/srt/utils/common.py#get_local_ip_auto",
            note: "the address a P/D worker advertises; unset = guessed, falling back to 0.0.0.0",
        },
        SGLANG_DISAGGREGATION_NIXL_BACKEND: { default: "UCX", source: `${ENV}#Envs.SGLANG_DISAGGREGATION_NIXL_BACKEND` },
        SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS: {
            default: "{}",
            source: `${ENV}#Envs.SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS`,
            note: "JSON object of string values, passed to the NIXL backend (UCX: device_list); sglang/srt/disaggregation/nixl/conn.py",
        },
    },
};

/**
 * SGLang's chunked prefill size on an H200 when `--chunked-prefill-size` is not given: `_handle_gpu_memory_settings`
 * sets 8192 for a GPU with 90 to 160 GiB ("H20, H200"; 141 GB HBM3e). The per-step prefill window, so the value the
 * platform renders as `--max-prefill-tokens` on an SGLang worker behind a queueing KV router (lib/dgd.ts). The rule
 * reads the same in every copy of server_args.py the search index holds, from the plain assignments to the later
 * `declare_resolution(..., chunked_prefill_size=8192)` form; the v0.5.18 tree itself was over the fetch size limit.
 */
export const SGLANG_H200_CHUNKED_PREFILL_SIZE = {
    value: 8192,
    source: "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py#ServerArgs._handle_gpu_memory_settings" as Source,
} as const;
