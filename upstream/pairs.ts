import type { ComponentFacts, EntrypointFacts, FlagFact, Source } from "./types";

/**
 * Pairs that exchange KV: the prefill and the decode worker of one graph. They must be identical in image, flags, env
 * and mounts except the role settings below, read from the engines' sources; any other difference is refused (a
 * closed world: a setting nobody recorded as role-only may change the KV block, the transfer, the hash seed or the
 * drafter, and the pair then fails or silently recomputes on every handoff while every pod is healthy).
 *
 * Two tables, both facts with sources:
 * - {@link pairRoleSettings}: what may differ per entry point (the role flag, parallelism sizes the transfer maps
 *   between, role-only switches);
 * - {@link pairKvSettings}: the KV-shaping settings compared after normalisation (defaults, spellings, values inside
 *   JSON) and explained by name in findings. Everything else is compared verbatim.
 *
 * Used by upstream/check/pairs.ts (npm run upstream-check and the pack's upstream rules) and policies/pd-compat.ts.
 */

/** One side of a pair as the comparison sees it: image, argv after any `sh -c '... exec "$@"' --` wrapper, env, mounts. */
export interface PairSide {
    image?: string;
    argv: readonly string[];
    /** Literal env values; a `valueFrom` entry as `valueFrom:<JSON>`. */
    env: Readonly<Record<string, string>>;
    /** Mounts as `mountPath[#subPath] <- volume source` (contents of mounted config included where known). */
    mounts?: readonly string[];
}

/** A setting allowed to differ between prefill and decode of one entry point. */
export interface RoleSetting {
    readonly key: string;
    readonly why: string;
    readonly source: Source;
}

const DYN = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f";
const VLLM_NIXL: Source = "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py";
const SGL_SA: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py";
const SGL_CONN: Source = "sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/nixl/conn.py";
const TRT_TX: Source = "NVIDIA/TensorRT-LLM@v1.3.0rc25:tensorrt_llm/_torch/pyexecutor/kv_cache_transceiver.py";

/**
 * Role settings per entry point (upstream EntrypointFacts.id), keyed by canonical flag name (`--x`) or env name.
 * Nothing else may differ. Pod-level role settings (replicas, resources, affinity, the preflight's device counts) are
 * outside the compared container and never compared.
 */
export const pairRoleSettings: Readonly<Record<string, readonly RoleSetting[]>> = {
    "dynamo.vllm": [
        {
            key: "--disaggregation-mode",
            why: "the role itself (prefill | decode)",
            source: `${DYN}:components/src/dynamo/vllm/backend_args.py`,
        },
        {
            key: "--tensor-parallel-size",
            why: "heterogeneous TP: the NIXL handshake maps ranks by an integer ratio (checked separately)",
            source: VLLM_NIXL,
        },
        {
            key: "--kv-events-config",
            why: "the worker's KV event publisher to the router (vLLM KVEventsConfig: a ZMQ publisher of block events), outside the KV block and the transfer; the router reads a decode worker's events only under conditional disaggregation, so decode runs without one (upstream/activation.ts kv-events)",
            source: "vllm-project/vllm@v0.28.0:vllm/config/kv_events.py",
        },
    ],
    "dynamo.sglang": [
        { key: "--disaggregation-mode", why: "the role itself (prefill | decode)", source: SGL_SA },
        {
            key: "--tp-size",
            why: "decode reads the prefill TP size from the bootstrap server and maps ranks",
            source: "sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/decode.py",
        },
        { key: "--disaggregation-decode-enable-radix-cache", why: "decode-only switch; prefill ignores it", source: SGL_SA },
        {
            key: "--kv-events-config",
            why: "the worker's KV event publisher to the router, outside the KV block and the transfer; a decode worker on the chunk cache publishes none, so it runs without one (upstream/activation.ts sglang-decode-kv-events)",
            source: `${DYN}:components/src/dynamo/sglang/publisher.py`,
        },
    ],
    "dynamo.trtllm": [
        {
            key: "--disaggregation-mode",
            why: "the role itself (prefill | decode)",
            source: `${DYN}:components/src/dynamo/trtllm/backend_args.py`,
        },
        { key: "--tensor-parallel-size", why: "the cache transceiver splits and merges KV between different TP layouts", source: TRT_TX },
    ],
};

/** A KV-shaping setting compared by meaning, with what breaks when the two sides differ. */
export interface PairKvSetting {
    /** Name in findings (`--page-size`, `NIXL backends`, `tokens per block`, ...). */
    readonly key: string;
    /** Raw flags/env this setting reads; they are compared through it, not verbatim. */
    readonly covers: readonly string[];
    readonly read: (s: ParsedSide) => string | undefined;
    /** Upstream default when a side does not set it. */
    readonly fallback?: string;
    readonly why: string;
    readonly source: Source;
}

/** A side with its flags parsed (canonical names, `true` for a switch). */
export interface ParsedSide {
    image?: string;
    flags: Readonly<Record<string, string | true>>;
    env: Readonly<Record<string, string>>;
    positional: readonly string[];
    mounts: readonly string[];
}

function json(raw: string | true | undefined): Record<string, any> | undefined {
    if (typeof raw !== "string") return undefined;
    try {
        const v = JSON.parse(raw);
        return v && typeof v === "object" ? v : undefined;
    } catch {
        return undefined;
    }
}
const flag =
    (...names: string[]) =>
    (s: ParsedSide) => {
        for (const n of names) {
            const v = s.flags[n];
            if (v !== undefined) return v === true ? "true" : v;
        }
        return undefined;
    };
const env = (name: string) => (s: ParsedSide) => s.env[name];
const STORE_CONNECTORS = ["MooncakeStoreConnector", "LMCacheConnectorV1", "OffloadingConnector"];

/** The P/D connector of a vLLM `--kv-transfer-config` (MultiConnector: the first non-store sub-connector). */
export function vllmPdConnectorOf(kvt: Record<string, any> | undefined): Record<string, any> | undefined {
    if (!kvt) return undefined;
    if (kvt.kv_connector === "MultiConnector")
        return (kvt.kv_connector_extra_config?.connectors ?? []).find((x: any) => !STORE_CONNECTORS.includes(String(x?.kv_connector)));
    return STORE_CONNECTORS.includes(String(kvt.kv_connector)) ? undefined : kvt;
}
const kvt = (s: ParsedSide) => json(s.flags["--kv-transfer-config"]);

/**
 * vLLM `--dtype` spellings of one torch dtype (vllm-project/vllm@v0.28.0:vllm/config/model.py
 * `_STR_DTYPE_TO_TORCH_DTYPE`: half and float16 are torch.float16, float and float32 torch.float32).
 */
export const VLLM_DTYPE_ALIASES: Readonly<Record<string, string>> = { half: "float16", float: "float32" };

/**
 * A vLLM KVTransferConfig with the upstream defaults written out, so two spellings of one meaning compare equal:
 * `kv_buffer_device` defaults to "cuda" (vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py `KVTransferConfig`),
 * a NixlConnector's `kv_connector_extra_config.backends` to ["UCX"] (nixl_connector.py
 * `get_from_extra_config("backends", ["UCX"])`), an absent `kv_connector_extra_config` is {}; a MultiConnector's
 * sub-connectors are KVTransferConfigs themselves (kv_connector/v1/multi_connector.py). Anything else stays as written.
 */
export function vllmKvTransferMeaning(v: unknown): unknown {
    if (!v || typeof v !== "object" || Array.isArray(v)) return v;
    const c: Record<string, any> = { ...(v as Record<string, any>) };
    if (typeof c.kv_connector !== "string") return c;
    c.kv_buffer_device ??= "cuda";
    const extra: Record<string, any> = { ...(c.kv_connector_extra_config ?? {}) };
    if (c.kv_connector === "NixlConnector") extra.backends ??= ["UCX"];
    if (c.kv_connector === "MultiConnector" && Array.isArray(extra.connectors))
        extra.connectors = extra.connectors.map(vllmKvTransferMeaning);
    c.kv_connector_extra_config = extra;
    return c;
}
const trtArgs = (s: ParsedSide) => json(s.flags["--override-engine-args"]) ?? {};

/** KV-shaping settings per entry point; their raw flags are compared through them (normalised), the rest verbatim. */
export const pairKvSettings: Readonly<Record<string, readonly PairKvSetting[]>> = {
    "dynamo.vllm": [
        {
            key: "--model",
            covers: ["--model"],
            read: flag("--model"),
            why: "the model (architecture, KV heads, layers) is part of the NIXL compatibility hash",
            source: VLLM_NIXL,
        },
        {
            key: "--dtype",
            covers: ["--dtype"],
            read: (s) => {
                const v = flag("--dtype")(s);
                return v === undefined ? undefined : (VLLM_DTYPE_ALIASES[v] ?? v);
            },
            fallback: "auto",
            why: "the model dtype is part of the NIXL compatibility hash (and the KV dtype when kv-cache-dtype is auto)",
            source: VLLM_NIXL,
        },
        {
            key: "--kv-cache-dtype",
            covers: ["--kv-cache-dtype"],
            read: flag("--kv-cache-dtype"),
            fallback: "auto",
            why: "the KV cache dtype is part of the NIXL compatibility hash",
            source: VLLM_NIXL,
        },
        {
            key: "attention backend",
            covers: ["--attention-backend", "VLLM_ATTENTION_BACKEND"],
            read: (s) => flag("--attention-backend")(s) ?? env("VLLM_ATTENTION_BACKEND")(s),
            fallback: "(auto)",
            why: "the attention backend is part of the NIXL compatibility hash (it fixes the KV layout)",
            source: VLLM_NIXL,
        },
        {
            key: "--block-size",
            covers: ["--block-size"],
            read: flag("--block-size"),
            fallback: "(platform default)",
            why: "the KV block size is checked in the NIXL handshake; reads address whole blocks",
            source: VLLM_NIXL,
        },
        {
            key: "VLLM_KV_CACHE_LAYOUT",
            covers: ["VLLM_KV_CACHE_LAYOUT"],
            read: env("VLLM_KV_CACHE_LAYOUT"),
            fallback: "(connector default HND)",
            why: "the KV cache layout (HND/NHD) is checked in the NIXL handshake",
            source: VLLM_NIXL,
        },
        {
            key: "kv_connector",
            covers: [],
            read: (s) => vllmPdConnectorOf(kvt(s))?.kv_connector,
            fallback: "(none)",
            why: "both sides must run the same P/D connector",
            source: "vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py",
        },
        {
            key: "NIXL backends",
            covers: [],
            read: (s) => {
                const p = vllmPdConnectorOf(kvt(s));
                if (p?.kv_connector !== "NixlConnector") return undefined;
                return JSON.stringify(
                    ((p.kv_connector_extra_config?.backends ?? ["UCX"]) as string[]).map((b) => String(b).toUpperCase()).sort(),
                );
            },
            fallback: "(n/a)",
            why: "NIXL agents only talk over a backend both loaded (UCX vs LIBFABRIC cannot interoperate)",
            source: VLLM_NIXL,
        },
    ],
    "dynamo.sglang": [
        {
            key: "--model-path",
            covers: ["--model-path"],
            read: flag("--model-path", "--model"),
            why: "prefill and decode must hold the same model's KV",
            source: SGL_SA,
        },
        {
            key: "--dtype",
            covers: ["--dtype"],
            read: flag("--dtype"),
            fallback: "auto",
            why: "fixes the KV dtype when kv-cache-dtype is auto",
            source: SGL_SA,
        },
        {
            key: "--kv-cache-dtype",
            covers: ["--kv-cache-dtype"],
            read: flag("--kv-cache-dtype"),
            fallback: "auto",
            why: "the KV element type must be the same on both sides",
            source: SGL_CONN,
        },
        {
            key: "--page-size",
            covers: ["--page-size"],
            read: flag("--page-size"),
            fallback: "1",
            why: "KV is sent by page index; a different page size moves the wrong tokens",
            source: SGL_CONN,
        },
        {
            key: "--disaggregation-transfer-backend",
            covers: ["--disaggregation-transfer-backend"],
            read: flag("--disaggregation-transfer-backend"),
            fallback: "mooncake",
            why: "both sides must use the same KV transfer backend",
            source: "sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/utils.py",
        },
        {
            key: "SGLANG_DISAGGREGATION_NIXL_BACKEND",
            covers: ["SGLANG_DISAGGREGATION_NIXL_BACKEND"],
            read: (s) =>
                String(flag("--disaggregation-transfer-backend")(s) ?? "mooncake") === "nixl"
                    ? (env("SGLANG_DISAGGREGATION_NIXL_BACKEND")(s) ?? "UCX").toUpperCase()
                    : env("SGLANG_DISAGGREGATION_NIXL_BACKEND")(s),
            fallback: "(n/a)",
            why: "NIXL agents only talk over a backend both loaded",
            source: SGL_CONN,
        },
    ],
    "dynamo.trtllm": [
        {
            key: "--model",
            covers: ["--model"],
            read: flag("--model"),
            why: "prefill and decode must hold the same model's KV",
            source: TRT_TX,
        },
        {
            key: "cache_transceiver_config.backend",
            covers: [],
            read: (s) => trtArgs(s).cache_transceiver_config?.backend,
            fallback: "(default)",
            why: "both sides must use the same cache transceiver backend",
            source: TRT_TX,
        },
        {
            key: "kv_cache_config.dtype",
            covers: [],
            read: (s) => trtArgs(s).kv_cache_config?.dtype,
            fallback: "auto",
            why: "the KV element type must be the same on both sides",
            source: TRT_TX,
        },
        {
            key: "tokens per block",
            covers: ["--kv-block-size"],
            read: (s) => {
                const f = s.flags["--kv-block-size"];
                if (typeof f === "string") return f;
                const t = trtArgs(s).tokens_per_block;
                return t !== undefined ? String(t) : undefined;
            },
            fallback: "32",
            why: "KV blocks are exchanged whole; a different block size misaligns every transfer",
            source: `${DYN}:components/src/dynamo/trtllm/backend_args.py`,
        },
    ],
};

/** JSON text with object keys sorted (equal configs compare equal however they are spelled). */
function canonicalJson(raw: string): string | undefined {
    try {
        const sort = (v: unknown): unknown =>
            Array.isArray(v)
                ? v.map(sort)
                : v && typeof v === "object"
                  ? Object.fromEntries(
                        Object.keys(v as object)
                            .sort()
                            .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
                    )
                  : v;
        return JSON.stringify(sort(JSON.parse(raw)));
    } catch {
        return undefined;
    }
}

/** Parses argv flags to canonical names (aliases resolved through the entry point's flag facts). */
export function parseSide(
    side: PairSide,
    ep: EntrypointFacts | undefined,
    components: Readonly<Record<string, ComponentFacts>>,
): ParsedSide {
    const table = new Map<string, { canonical: string; fact: FlagFact }>();
    for (const id of ep?.components ?? []) {
        for (const [name, fact] of Object.entries(components[id]?.flags ?? {})) {
            table.set(name, { canonical: name, fact });
            for (const a of fact.aliases ?? []) table.set(a, { canonical: name, fact });
        }
    }
    // Without a known entry point the argv is read generically (`--x v`, `--x=v`, switches), program name positional.
    const rest = ep ? side.argv.slice(ep.argv.length) : [...side.argv];
    const flags: Record<string, string | true> = {};
    const positional: string[] = [];
    for (let i = 0; i < rest.length; i++) {
        const tok = rest[i];
        if (!tok.startsWith("-")) {
            positional.push(tok);
            continue;
        }
        const eq = tok.indexOf("=");
        const name = eq > 0 ? tok.slice(0, eq) : tok;
        const hit = table.get(name);
        const canonical = hit?.canonical ?? name;
        const takesValue = hit ? hit.fact.takesValue : eq < 0 && i + 1 < rest.length && !rest[i + 1].startsWith("-");
        flags[canonical] = eq > 0 ? tok.slice(eq + 1) : takesValue && i + 1 < rest.length ? rest[++i] : true;
    }
    return { image: side.image, flags, env: side.env, positional, mounts: side.mounts ?? [] };
}

/** One difference between the two sides. */
export interface PairDifference {
    key: string;
    prefill?: string;
    decode?: string;
    why: string;
    source?: Source;
}

/**
 * Every difference between prefill and decode of entry point `ep` outside its role settings: the KV-shaping settings
 * by meaning (defaults applied), then image, every other flag (JSON values by content, absent = the flag's upstream
 * default), every env var and every mount verbatim.
 */
export function pairDifferences(
    prefill: PairSide,
    decode: PairSide,
    ep: EntrypointFacts | undefined,
    components: Readonly<Record<string, ComponentFacts>>,
    roles: Readonly<Record<string, readonly RoleSetting[]>> = pairRoleSettings,
    kv: Readonly<Record<string, readonly PairKvSetting[]>> = pairKvSettings,
): PairDifference[] {
    const p = parseSide(prefill, ep, components),
        d = parseSide(decode, ep, components);
    const out: PairDifference[] = [];
    const role = new Set((roles[ep?.id ?? ""] ?? []).map((r) => r.key));
    const covered = new Set<string>(
        ["--kv-transfer-config", "--override-engine-args"].filter(() => (kv[ep?.id ?? ""] ?? []).some((s) => s.covers.length === 0)),
    );
    for (const s of kv[ep?.id ?? ""] ?? []) {
        s.covers.forEach((c) => covered.add(c));
        const a = s.read(p) ?? s.fallback,
            b = s.read(d) ?? s.fallback;
        if (a !== b) out.push({ key: s.key, prefill: a, decode: b, why: s.why, source: s.source });
    }
    const generic =
        "prefill and decode of one graph must be identical except their role settings; nothing records this setting as role-only, so a difference may change the KV block, the transfer or the cache key";
    if (p.image !== d.image)
        out.push({ key: "image", prefill: p.image, decode: d.image, why: "engine, NIXL and UCX versions are part of the handshake" });
    const defaults = new Map<string, string>();
    for (const id of ep?.components ?? [])
        for (const [n, f] of Object.entries(components[id]?.flags ?? {})) if (f.default !== undefined) defaults.set(n, f.default);
    const norm = (v: string | true | undefined, name: string) => {
        if (name === "--kv-transfer-config" && typeof v === "string") {
            const j = json(v);
            if (j) return canonicalJson(JSON.stringify(vllmKvTransferMeaning(j))) ?? v;
        }
        return v === undefined ? defaults.get(name) : v === true ? "true" : /^[[{]/.test(v.trim()) ? (canonicalJson(v) ?? v) : v;
    };
    for (const name of [...new Set([...Object.keys(p.flags), ...Object.keys(d.flags)])].sort()) {
        if (role.has(name) || covered.has(name)) continue;
        const a = norm(p.flags[name], name),
            b = norm(d.flags[name], name);
        if (a !== b) out.push({ key: name, prefill: a ?? "(unset)", decode: b ?? "(unset)", why: generic });
    }
    // The JSON configs read by meaning above are still compared in full (a hash seed or timeout inside them matters too).
    for (const name of [...covered].filter((n) => n.startsWith("--") && (n === "--kv-transfer-config" || n === "--override-engine-args"))) {
        const a = norm(p.flags[name], name),
            b = norm(d.flags[name], name);
        if (a !== b && !out.some((x) => kv[ep?.id ?? ""]?.some((s) => s.key === x.key && s.covers.length === 0)))
            out.push({ key: name, prefill: a ?? "(unset)", decode: b ?? "(unset)", why: generic });
    }
    if (JSON.stringify(p.positional) !== JSON.stringify(d.positional))
        out.push({ key: "arguments", prefill: p.positional.join(" "), decode: d.positional.join(" "), why: generic });
    for (const name of [...new Set([...Object.keys(p.env), ...Object.keys(d.env)])].sort()) {
        if (role.has(name) || covered.has(name)) continue;
        if (p.env[name] !== d.env[name])
            out.push({ key: name, prefill: p.env[name] ?? "(unset)", decode: d.env[name] ?? "(unset)", why: generic });
    }
    const pm = [...p.mounts].sort().join("\n"),
        dm = [...d.mounts].sort().join("\n");
    if (pm !== dm)
        out.push({
            key: "volumeMounts",
            prefill: pm || "(none)",
            decode: dm || "(none)",
            why: "a mounted file (config, JSON) the engine reads differs or is only on one side",
        });
    return out;
}
