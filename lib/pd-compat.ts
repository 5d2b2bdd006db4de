import type { Source } from "../upstream";

/**
 * Which settings of a prefill worker and a decode worker of one graph must agree, per engine, so the KV blocks one
 * writes are the blocks the other reads (same shape, size, dtype and transfer backend). A pair that disagrees passes
 * health checks and then fails, hangs or silently recomputes on every handoff. lib/dgd.ts builds both
 * roles from one function, so they agree by construction; policies (helper "b") and tests compare rendered containers
 * with {@link pdMismatches}.
 *
 * Deliberately absent: tensor-parallel size. vLLM's NixlConnector and SGLang's NIXL/Mooncake backends transfer between
 * different TP sizes (heterogeneous TP, vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py: the
 * handshake maps TP ranks and checks block size and KV dtype), so P/D with prefill TP 2 and decode TP 4 is valid.
 */

export type PdEngine = "vllm" | "sglang" | "trtllm";

/** One setting that must be equal on both sides. */
export interface PdMatchSetting {
    /**
     * Where the value lives in a worker container:
     * - `flag`: an engine flag (`--x v` or `--x=v`; a switch reads as "true");
     * - `env`: an env var's literal value;
     * - `kvTransferConfig`: a value derived from vLLM's `--kv-transfer-config` JSON (see `key`);
     * - `engineArgs`: a dotted path into TRT-LLM's `--override-engine-args` JSON.
     */
    where: "flag" | "env" | "kvTransferConfig" | "engineArgs";
    /**
     * Flag name, env var name or JSON path. For `kvTransferConfig`: `connectors` (the connector chain, outermost first),
     * `nixl.backends`, `nixl.kv_buffer_device`, `kv_load_failure_policy`.
     */
    key: string;
    /** Upstream default used when a side does not set it; undefined = compare presence as well. */
    default?: string;
    /** What breaks when the two sides differ. */
    why: string;
    source: Source;
}

const VLLM_NIXL: Source = "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py";
const SGL_CONN: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/nixl/conn.py";
const TRT_TX: Source = "NVIDIA/TensorRT-LLM@v1.3.0rc25:tensorrt_llm/_torch/pyexecutor/kv_cache_transceiver.py";

const TRANSPORT: PdMatchSetting[] = [
    { where: "env", key: "UCX_TLS", why: "both ends of a UCX endpoint need a common RDMA transport, else UCX picks another (tcp) or fails to connect", source: "openucx/ucx@v1.21.0:src/ucp/core/ucp_context.c" },
    { where: "env", key: "FI_PROVIDER", why: "libfabric endpoints of different providers cannot address each other", source: "ofiwg/libfabric@v2.4.0:src/fabric.c" },
];

const SETTINGS: Record<PdEngine, readonly PdMatchSetting[]> = {
    vllm: [
        { where: "flag", key: "--model", why: "KV of another model has another layer/head layout", source: VLLM_NIXL },
        { where: "flag", key: "--block-size", why: "the NIXL handshake refuses a remote block size that differs (block length mismatch)", source: VLLM_NIXL },
        { where: "flag", key: "--kv-cache-dtype", default: "auto", why: "the handshake compares KV dtypes; fp8 vs auto blocks differ in size and type", source: VLLM_NIXL },
        { where: "flag", key: "--dtype", default: "auto", why: "with --kv-cache-dtype auto the KV dtype follows the model dtype", source: "vllm-project/vllm@v0.28.0:vllm/engine/arg_utils.py" },
        { where: "kvTransferConfig", key: "connectors", why: "the decode side pulls with the connector the prefill side published through", source: "vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py" },
        { where: "kvTransferConfig", key: "nixl.backends", default: "UCX", why: "NIXL agents only transfer over a backend both loaded (UCX vs LIBFABRIC)", source: VLLM_NIXL },
        { where: "kvTransferConfig", key: "nixl.kv_buffer_device", default: "cuda", why: "cuda vs cpu buffers are different memory registrations and block layouts", source: VLLM_NIXL },
        { where: "kvTransferConfig", key: "kv_load_failure_policy", default: "recompute", why: "a side left on recompute hides failed loads as silent re-prefill", source: "vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py" },
        ...TRANSPORT,
    ],
    sglang: [
        { where: "flag", key: "--model-path", why: "KV of another model has another layout", source: SGL_CONN },
        { where: "flag", key: "--page-size", default: "1", why: "KV indices are transferred per page; different page sizes address different tokens", source: SGL_CONN },
        { where: "flag", key: "--kv-cache-dtype", default: "auto", why: "different KV dtypes give different item lengths", source: SGL_CONN },
        { where: "flag", key: "--dtype", default: "auto", why: "with --kv-cache-dtype auto the KV dtype follows the model dtype", source: "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py" },
        { where: "flag", key: "--disaggregation-transfer-backend", default: "mooncake", why: "prefill and decode must run the same transfer engine (nixl vs mooncake)", source: "sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/utils.py" },
        { where: "env", key: "SGLANG_DISAGGREGATION_NIXL_BACKEND", default: "UCX", why: "NIXL agents only transfer over a backend both loaded", source: SGL_CONN },
        ...TRANSPORT,
    ],
    trtllm: [
        { where: "flag", key: "--model-path", why: "KV of another model has another layout", source: TRT_TX },
        { where: "flag", key: "--kv-block-size", default: "32", why: "tokens per block must agree for block-wise transfer", source: "ai-dynamo/dynamo@v1.5.0:components/src/dynamo/trtllm/backend_args.py" },
        { where: "engineArgs", key: "kv_cache_config.dtype", default: "auto", why: "different KV dtypes give different block sizes", source: TRT_TX },
        { where: "engineArgs", key: "cache_transceiver_config.backend", why: "the cache transceivers must speak the same backend (NIXL/UCX/MPI)", source: TRT_TX },
        { where: "env", key: "TRTLLM_NIXL_KVCACHE_BACKEND", default: "UCX", why: "NIXL agents only transfer over a backend both loaded", source: TRT_TX },
        ...TRANSPORT,
    ],
};

/** The settings prefill and decode of `engine` must agree on, with the upstream source of each. */
export function pdMustMatch(engine: PdEngine): readonly PdMatchSetting[] {
    return SETTINGS[engine];
}

/** The part of a container this module reads (core/v1 Container shape). */
export interface PdContainer {
    command?: string[];
    args?: string[];
    env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
}

function argv(c: PdContainer): string[] {
    const all = [...(c.command ?? []), ...(c.args ?? [])];
    if (all[0] === "sh" && all[1] === "-c" && all[3] === "--") return all.slice(4);
    return all;
}

function flagValue(c: PdContainer, flag: string): string | undefined {
    const a = argv(c);
    let v: string | undefined;
    for (let i = 0; i < a.length; i++) {
        if (a[i] === flag) v = a[i + 1] !== undefined && !a[i + 1].startsWith("--") ? a[i + 1] : "true";
        else if (a[i].startsWith(`${flag}=`)) v = a[i].slice(flag.length + 1);
    }
    return v;
}

function parse(s: string | undefined): any {
    if (s === undefined) return undefined;
    try { return JSON.parse(s); } catch { return undefined; }
}

function dig(o: any, path: string): unknown {
    return path.split(".").reduce((x, k) => (x && typeof x === "object" ? x[k] : undefined), o);
}

const str = (v: unknown) => (v === undefined ? undefined : typeof v === "string" ? v : JSON.stringify(v));

/** The value of one setting in a container, as a string (JSON for structured values), or undefined when unset. */
export function pdSettingValue(c: PdContainer, s: PdMatchSetting): string | undefined {
    if (s.where === "flag") return flagValue(c, s.key);
    if (s.where === "env") {
        const e = (c.env ?? []).find((x) => x.name === s.key);
        return e === undefined ? undefined : e.value ?? JSON.stringify(e.valueFrom);
    }
    if (s.where === "engineArgs") return str(dig(parse(flagValue(c, "--override-engine-args")), s.key));
    const kvt = parse(flagValue(c, "--kv-transfer-config"));
    if (!kvt) return undefined;
    const inner: any[] = kvt.kv_connector_extra_config?.connectors ?? [];
    const nixl = [kvt, ...inner].find((x) => x?.kv_connector === "NixlConnector");
    if (s.key === "connectors") return JSON.stringify([kvt.kv_connector, ...inner.map((x) => x?.kv_connector)]);
    if (s.key === "kv_load_failure_policy") return str(kvt.kv_load_failure_policy);
    if (s.key === "nixl.backends") return str(nixl?.kv_connector_extra_config?.backends?.join(","));
    if (s.key === "nixl.kv_buffer_device") return str(nixl?.kv_buffer_device);
    return undefined;
}

/** A setting on which the two sides differ. */
export interface PdMismatch { setting: PdMatchSetting; prefill?: string; decode?: string }

/** Settings of {@link pdMustMatch} on which a prefill and a decode container differ (an unset side reads as the default). */
export function pdMismatches(engine: PdEngine, prefill: PdContainer, decode: PdContainer): PdMismatch[] {
    const out: PdMismatch[] = [];
    for (const s of pdMustMatch(engine)) {
        const p = pdSettingValue(prefill, s) ?? s.default, d = pdSettingValue(decode, s) ?? s.default;
        if (p !== d) out.push({ setting: s, prefill: p, decode: d });
    }
    return out;
}
