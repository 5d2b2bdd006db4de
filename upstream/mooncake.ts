import type { ComponentFacts, EntrypointFacts, Source } from "./types";

/**
 * Mooncake (kvcache-ai/Mooncake): the master (`mooncake_master`, gflags), the store service
 * (`python3 -m mooncake.mooncake_store_service`) and the client/transfer-engine environment every Mooncake process
 * reads. Read at v0.3.12.post1, the newest tag; the pool (master and store) runs the endpoint's own Dynamo runtime image
 * (programs/serving.ts), so pool and engine clients load one mooncake-transfer-engine wheel.
 */
const T = "kvcache-ai/Mooncake@v0.3.12.post1";
const MASTER: Source = `${T}:mooncake-store/src/master.cpp`;
const CFG: Source = `${T}:mooncake-wheel/mooncake/mooncake_config.py#MooncakeConfig.load_from_env`;

export const mooncakeMaster: ComponentFacts = {
    component: "mooncake-master",
    version: "v0.3.12.post1",
    flags: {
        "--rpc_address": { takesValue: true, default: "0.0.0.0", source: MASTER },
        "--rpc_port": { takesValue: true, default: "0", source: MASTER, note: "0 = use --port (deprecated, default 50051)" },
        "--port": { takesValue: true, default: "50051", source: MASTER, note: "deprecated, use --rpc_port" },
        "--metrics_port": { takesValue: true, default: "9003", source: MASTER },
        "--enable_metric_reporting": { takesValue: true, default: "true", source: MASTER },
        "--default_kv_lease_ttl": { takesValue: true, source: MASTER },
        "--eviction_ratio": { takesValue: true, source: MASTER },
        "--eviction_high_watermark_ratio": { takesValue: true, source: MASTER },
        "--enable_ha": { takesValue: true, default: "false", source: MASTER },
        "--rpc_thread_num": { takesValue: true, default: "0", source: MASTER },
        "--enable_kv_events": {
            takesValue: true,
            default: "false",
            source: MASTER,
            note: "ZMQ KV-event publisher (PR #2214, from v0.3.12): what Dynamo's shared KV cache subscribes to",
        },
        "--kv_events_bind_endpoint": {
            takesValue: true,
            default: "",
            source: MASTER,
            note: "ZMQ PUB bind endpoint, e.g. tcp://0.0.0.0:5557",
        },
    },
    env: {},
};

export const mooncakeStoreService: ComponentFacts = {
    component: "mooncake-store-service",
    version: "v0.3.12.post1",
    flags: {
        "--config": { takesValue: true, source: `${T}:mooncake-wheel/mooncake/mooncake_store_service.py#parse_arguments` },
        "--define": {
            takesValue: true,
            aliases: ["-D"],
            repeatable: true,
            source: `${T}:mooncake-wheel/mooncake/mooncake_store_service.py#parse_arguments`,
            note: 'action="append": every -D key=value counts',
        },
        "--port": {
            takesValue: true,
            default: "8080",
            source: `${T}:mooncake-wheel/mooncake/mooncake_store_service.py#parse_arguments`,
            note: "HTTP API port",
        },
        "--max-wait-time": {
            takesValue: true,
            default: "60",
            source: `${T}:mooncake-wheel/mooncake/mooncake_store_service.py#parse_arguments`,
        },
    },
    env: {},
};

/** Environment of any Mooncake client (store service, SGLang's HiCache backend): MooncakeConfig plus the transfer engine's MC_* knobs. */
export const mooncakeClient: ComponentFacts = {
    component: "mooncake-client",
    version: "v0.3.12.post1",
    flags: {},
    env: {
        MOONCAKE_CONFIG_PATH: { source: CFG },
        MOONCAKE_MASTER: { source: CFG },
        MOONCAKE_LOCAL_HOSTNAME: { default: "localhost", source: CFG, note: "the address peers connect to: must be the pod IP" },
        MOONCAKE_TE_META_DATA_SERVER: { default: "P2PHANDSHAKE", source: CFG },
        MOONCAKE_GLOBAL_SEGMENT_SIZE: { source: CFG },
        MOONCAKE_LOCAL_BUFFER_SIZE: { source: CFG },
        MOONCAKE_PROTOCOL: { default: "tcp", source: CFG, note: "tcp by default: a missing rdma setting is a silent TCP pool" },
        MOONCAKE_DEVICE: { default: "", source: CFG },
        MOONCAKE_OFFLOAD_ENABLED: { default: "false", source: CFG },
        MOONCAKE_TENANT_ID: { default: "default", source: CFG },
    },
};

export const mooncakeEntrypoints: readonly EntrypointFacts[] = [
    { id: "mooncake_master", argv: ["mooncake_master"], components: ["mooncake-master"], flagStyle: "gflags", source: MASTER },
    {
        id: "mooncake.mooncake_store_service",
        argv: ["python3", "-m", "mooncake.mooncake_store_service"],
        components: ["mooncake-store-service", "mooncake-client", "mooncake-transfer-engine"],
        source: `${T}:mooncake-wheel/mooncake/mooncake_store_service.py`,
    },
];

/** The transfer engine's MC_* knobs, read by the C++ library in every process that loads mooncake-transfer-engine. */
export const mooncakeTransferEngine: ComponentFacts = {
    component: "mooncake-transfer-engine",
    version: "v0.3.12.post1",
    flags: {},
    env: {
        MC_FORCE_HCA: {
            source: `${T}:mooncake-transfer-engine/src/transfer_engine_impl.cpp#TransferEngineImpl::init`,
            note: "read only under auto_discover_ (installs RDMA even when discovery found no HCA). INERT for a store client given protocol rdma and an explicit device list: mooncake-store/src/client_service.cpp InitTransferEngine then sets auto_discover=false (unless MC_MS_AUTO_DISC=1) and installs the RDMA transport on exactly those devices, failing (INVALID_PARAMS / INTERNAL_ERROR) instead of falling back to TCP",
        },
        MC_MS_AUTO_DISC: {
            source: `${T}:mooncake-store/src/client_service.cpp#get_auto_discover`,
            note: "1 turns topology auto-discovery back on for a store client (the explicit device list then only filters nothing; MC_MS_FILTERS applies); 0/unset with rdma + device names: explicit devices, no TCP fallback",
        },
        MC_ENABLE_HCA_PEER_AFFINITY: {
            source: `${T}:mooncake-transfer-engine/src/config.cpp`,
            note: "conflicts with MC_ENABLE_DEST_DEVICE_AFFINITY",
        },
        MC_ENABLE_DEST_DEVICE_AFFINITY: { source: `${T}:mooncake-transfer-engine/src/config.cpp` },
        MC_GID_INDEX: { source: `${T}:mooncake-transfer-engine/src/config.cpp` },
        MC_LOG_LEVEL: { source: `${T}:mooncake-transfer-engine/src/config.cpp` },
    },
};
