import type { ComponentFacts, Source } from "./types";

/**
 * vLLM at the version Dynamo 1.5.0's `vllm-runtime` ships (v0.28.0; docs.nvidia.com/dynamo/v1.5.0/reference/compatibility).
 * Only what the product renders or relies on, plus near neighbours the checker and the P/D match list need. The
 * Dynamo worker (`python3 -m dynamo.vllm`) parses these engine args itself (upstream/dynamo.ts `dynamoVllm`).
 */
const ARGS: Source = "vllm-project/vllm@v0.28.0:vllm/engine/arg_utils.py#EngineArgs.add_cli_args";
const ENVS: Source = "vllm-project/vllm@v0.28.0:vllm/envs.py";

export const vllm: ComponentFacts = {
    component: "vllm",
    version: "v0.28.0",
    flags: {
        "--model": { takesValue: true, source: ARGS },
        "--served-model-name": { takesValue: true, source: ARGS },
        "--tensor-parallel-size": { takesValue: true, aliases: ["-tp"], default: "1", source: ARGS },
        "--kv-transfer-config": { takesValue: true, source: ARGS, note: "JSON of KVTransferConfig, keys in vllmKvTransferConfigKeys" },
        "--kv-events-config": { takesValue: true, source: ARGS },
        "--max-model-len": { takesValue: true, source: ARGS },
        "--revision": {
            takesValue: true,
            source: ARGS,
            note: "Hugging Face revision of --model's weights and config (EngineArgs.revision); upstream/revision.ts",
        },
        "--tokenizer-revision": {
            takesValue: true,
            source: ARGS,
            note: "revision of the tokenizer; unset it is not --revision but the repo default, so rendered with it (upstream/revision.ts)",
        },
        "--speculative-config": { takesValue: true, source: ARGS },
        "--block-size": { takesValue: true, source: ARGS, note: "KV block size in tokens; must match between prefill and decode" },
        "--kv-cache-dtype": { takesValue: true, default: "auto", source: ARGS, note: "must match between prefill and decode" },
        "--dtype": { takesValue: true, default: "auto", source: ARGS },
        "--gpu-memory-utilization": { takesValue: true, default: "0.9", source: ARGS },
        "--enable-prefix-caching": { takesValue: false, aliases: ["--no-enable-prefix-caching"], source: ARGS },
        "--scheduling-policy": {
            takesValue: true,
            choices: ["fcfs", "priority"],
            default: "fcfs",
            source: "vllm-project/vllm@v0.28.0:vllm/config/scheduler.py#SchedulerPolicy",
            note: "priority: the waiting queue is ordered by request priority (lower first); fcfs ignores it (upstream/activation.ts engine-priority)",
        },
    },
    env: {
        VLLM_NIXL_SIDE_CHANNEL_HOST: {
            default: "localhost",
            source: `${ENVS}#VLLM_NIXL_SIDE_CHANNEL_HOST`,
            note: "the address a prefill worker advertises to decode",
        },
        VLLM_NIXL_SIDE_CHANNEL_PORT: { default: "5600", source: `${ENVS}#VLLM_NIXL_SIDE_CHANNEL_PORT` },
        VLLM_GPU_NIC_PCIE_MAPPING: {
            default: "",
            source: "vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_net_device",
            note: "set together with VLLM_NIC_SELECTION_VARS or EngineCore init raises",
        },
        VLLM_NIC_SELECTION_VARS: {
            default: "",
            source: "vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_gpu_nic_mapping",
            note: "per rank: <hca><suffix> is prepended to the variable's existing value",
        },
        MOONCAKE_CONFIG_PATH: {
            source: "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py#MooncakeStoreConfig.load_from_env",
            note: "MooncakeStoreConnector reads its JSON config from this file",
        },
    },
};

/** Keys `KVTransferConfig` accepts in `--kv-transfer-config` (pydantic dataclass; unknown keys are rejected). */
export const vllmKvTransferConfigKeys = {
    source: "vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py#KVTransferConfig" as Source,
    keys: [
        "kv_connector",
        "engine_id",
        "kv_buffer_device",
        "kv_buffer_size",
        "kv_role",
        "kv_rank",
        "kv_parallel_size",
        "kv_ip",
        "kv_port",
        "kv_connector_extra_config",
        "kv_connector_module_path",
        "kv_load_failure_policy",
    ] as const,
    kvRoles: ["kv_producer", "kv_consumer", "kv_both"] as const,
    /** Default `recompute`: a failed KV load silently re-runs the prefill; `fail` makes it an error. */
    kvLoadFailurePolicies: ["recompute", "fail"] as const,
    kvLoadFailurePolicyDefault: "recompute",
} as const;

/**
 * `MooncakeStoreConfig` (the `MOONCAKE_CONFIG_PATH` JSON of `MooncakeStoreConnector`): `mode` defaults to `embedded`;
 * `__post_init__` refuses an unknown mode, `embedded` with `global_segment_size == 0`, and `standalone-store` with a
 * non-zero segment.
 */
export const vllmMooncakeStoreConfig = {
    source: "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py#MooncakeStoreConfig" as Source,
    keys: [
        "metadata_server",
        "master_server_address",
        "protocol",
        "device_name",
        "mode",
        "global_segment_size",
        "local_buffer_size",
        "enable_offload",
        "tenant_id",
    ] as const,
    modes: ["embedded", "standalone-store"] as const,
    modeDefault: "embedded",
} as const;
