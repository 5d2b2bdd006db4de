import type { StackValidationPolicy } from "@pulumi/policy";
import { containerLabel, Finding, stackPolicy } from "./lib/report";
import { ContainerView, EnvValue, engineOf, flagValue, StackView } from "./lib/workloads";

/**
 * Prefill and decode of one DynamoGraphDeployment must be able to talk (issue 10 class 2). Health checks pass
 * either way; a pair that disagrees on anything that changes the shape, size or type of a KV block, or on the
 * transfer itself, fails or hangs on every handoff, or (vLLM's default) silently recomputes the prefill on the
 * decode worker. The pack stands alone, so the per-engine must-match lists live here, read from the engines at the
 * versions Dynamo 1.5.0's runtime images carry (vLLM v0.28.0, SGLang v0.5.18, TensorRT-LLM in
 * tensorrtllm-runtime 1.5.0; config/versions.ts dynamoRuntime):
 *
 * vLLM (vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py):
 * - `compute_nixl_compatibility_hash` hashes "vLLM version and NIXL connector version, model architecture (name,
 *   dtype, KV heads, layers), KV cache format (dtype, sliding window), attention backend"; a handshake with another
 *   hash is refused: so image (version), `--model`, `--dtype`, `--kv-cache-dtype`, attention backend
 *   (`--attention-backend` / `VLLM_ATTENTION_BACKEND`) must match;
 * - "tensor_parallel_size, block_size, and kv_cache_layout are validated at runtime in
 *   _validate_remote_agent_handshake": `--block-size` and `VLLM_KV_CACHE_LAYOUT` must match, and the two TP sizes
 *   must divide one another (KV heads are split between ranks by an integer ratio, kv_connector/utils.py
 *   `TpKVTopology`);
 * - both sides must run the same P/D connector (`--kv-transfer-config` kv_connector, inside MultiConnector too) and
 *   share a NIXL backend (`kv_connector_extra_config.backends`, default UCX);
 * - `KVTransferConfig.kv_load_failure_policy` is Literal["recompute", "fail"] with default "recompute"
 *   (vllm/config/kv_transfer.py): a failed KV read re-runs the prefill on the decode worker with no error, so
 *   P/D must set "fail";
 * - the side channel a prefill worker advertises is `VLLM_NIXL_SIDE_CHANNEL_HOST`, default "localhost"
 *   (vllm/envs.py); Dynamo sets it only for a top-level NixlConnector, falling back to 127.0.0.1
 *   (ai-dynamo/dynamo@v1.5.0:components/src/dynamo/vllm/args.py), so it must be set to a routable address (the pod
 *   IP from the downward API, or the host IP on hostNetwork), never loopback or a wildcard.
 *
 * SGLang (sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py, srt/disaggregation/):
 * - `--page-size` (default 1) and `--kv-cache-dtype` (default auto) fix the KV page the decode side receives by page
 *   index; `--dtype` fixes the KV dtype when kv-cache-dtype is auto; `--disaggregation-transfer-backend` (default
 *   mooncake) and, for NIXL, `SGLANG_DISAGGREGATION_NIXL_BACKEND` (default UCX) must be the same transfer;
 *   `--model-path` and image must match; TP may differ (decode reads prefill_tp_size from the bootstrap server);
 * - the bootstrap host Dynamo's prefill handler advertises is the host of `--dist-init-addr`, else SGLang's
 *   `get_ip()` (`SGLANG_HOST_IP`/`HOST_IP`, else the routable interface)
 *   (ai-dynamo/dynamo@v1.5.0:components/src/dynamo/sglang/request_handlers/prefill_handler.py `_get_bootstrap_info`):
 *   none of those may be loopback or a wildcard.
 *
 * TensorRT-LLM (NVIDIA/TensorRT-LLM disaggregated serving docs; Dynamo trtllm worker flags):
 * - `cache_transceiver_config.backend` (NIXL/UCX/MPI), `kv_cache_config.dtype` and tokens per block
 *   (`--kv-block-size`, default 32, or `tokens_per_block`) must match; `--model-path` and image too; TP/PP may
 *   differ; engine args given only as a file (`--extra-engine-args`) cannot be compared and are refused.
 *
 * Mooncake (kvcache-ai/Mooncake transfer engine): `MOONCAKE_LOCAL_HOSTNAME` is the address peers are told to
 * connect to; loopback or a wildcard is refused.
 */

type Engine = "vllm" | "sglang" | "trtllm";

/** One setting that must be equal between prefill and decode. */
export interface MustMatch { key: string; read: (c: ContainerView) => string | undefined; fallback?: string; why: string }

function json(raw: string | undefined): Record<string, any> | undefined {
    if (raw === undefined) return undefined;
    try { const v = JSON.parse(raw); return v && typeof v === "object" ? v : undefined; } catch { return undefined; }
}

/** The P/D connector of a vLLM `--kv-transfer-config` (MultiConnector: the first non-store sub-connector). */
const STORE_CONNECTORS = ["MooncakeStoreConnector", "LMCacheConnectorV1", "OffloadingConnector"];
export function vllmPdConnector(c: ContainerView): Record<string, any> | undefined {
    const kvt = json(flagValue(c, "--kv-transfer-config"));
    if (!kvt) return undefined;
    if (kvt.kv_connector === "MultiConnector") {
        return (kvt.kv_connector_extra_config?.connectors ?? []).find((x: any) => !STORE_CONNECTORS.includes(String(x?.kv_connector)));
    }
    return STORE_CONNECTORS.includes(String(kvt.kv_connector)) ? undefined : kvt;
}

const env = (name: string) => (c: ContainerView) => c.env.get(name)?.value;
const flag = (...names: string[]) => (c: ContainerView) => { for (const n of names) { const v = flagValue(c, n); if (v !== undefined) return v; } return undefined; };
const trtEngineArgs = (c: ContainerView) => json(flagValue(c, "--override-engine-args")) ?? {};

/** The per-engine must-match lists (sources above). */
export const MUST_MATCH: Record<Engine, MustMatch[]> = {
    vllm: [
        { key: "image", read: (c) => c.image, why: "the vLLM version is part of the NIXL compatibility hash" },
        { key: "--model", read: flag("--model"), why: "the model (architecture, KV heads, layers) is part of the NIXL compatibility hash" },
        { key: "--dtype", read: flag("--dtype"), fallback: "auto", why: "the model dtype is part of the NIXL compatibility hash (and the KV dtype when kv-cache-dtype is auto)" },
        { key: "--kv-cache-dtype", read: flag("--kv-cache-dtype"), fallback: "auto", why: "the KV cache dtype is part of the NIXL compatibility hash" },
        { key: "attention backend", read: (c) => flagValue(c, "--attention-backend") ?? env("VLLM_ATTENTION_BACKEND")(c), fallback: "(auto)", why: "the attention backend is part of the NIXL compatibility hash (it fixes the KV layout)" },
        { key: "--block-size", read: flag("--block-size"), fallback: "(platform default)", why: "the KV block size is checked in the NIXL handshake; reads address whole blocks" },
        { key: "VLLM_KV_CACHE_LAYOUT", read: env("VLLM_KV_CACHE_LAYOUT"), fallback: "(connector default HND)", why: "the KV cache layout (HND/NHD) is checked in the NIXL handshake" },
        { key: "kv_connector", read: (c) => vllmPdConnector(c)?.kv_connector, fallback: "(none)", why: "both sides must run the same P/D connector" },
        { key: "NIXL backends", read: (c) => { const p = vllmPdConnector(c); if (p?.kv_connector !== "NixlConnector") return undefined; return JSON.stringify(((p.kv_connector_extra_config?.backends ?? ["UCX"]) as string[]).map((b) => String(b).toUpperCase()).sort()); }, fallback: "(n/a)", why: "NIXL agents only talk over a backend both loaded (UCX vs LIBFABRIC cannot interoperate)" },
    ],
    sglang: [
        { key: "image", read: (c) => c.image, why: "the disaggregation bootstrap protocol and KV metadata are version-bound" },
        { key: "--model-path", read: flag("--model-path", "--model"), why: "prefill and decode must hold the same model's KV" },
        { key: "--dtype", read: flag("--dtype"), fallback: "auto", why: "fixes the KV dtype when kv-cache-dtype is auto" },
        { key: "--kv-cache-dtype", read: flag("--kv-cache-dtype"), fallback: "auto", why: "the KV element type must be the same on both sides" },
        { key: "--page-size", read: flag("--page-size"), fallback: "1", why: "KV is sent by page index; a different page size moves the wrong tokens" },
        { key: "--disaggregation-transfer-backend", read: flag("--disaggregation-transfer-backend"), fallback: "mooncake", why: "both sides must use the same KV transfer backend" },
        { key: "SGLANG_DISAGGREGATION_NIXL_BACKEND", read: (c) => (String(flagValue(c, "--disaggregation-transfer-backend") ?? "mooncake") === "nixl" ? (env("SGLANG_DISAGGREGATION_NIXL_BACKEND")(c) ?? "UCX").toUpperCase() : undefined), fallback: "(n/a)", why: "NIXL agents only talk over a backend both loaded" },
    ],
    trtllm: [
        { key: "image", read: (c) => c.image, why: "the cache transceiver wire format is version-bound" },
        { key: "--model-path", read: flag("--model-path", "--model"), why: "prefill and decode must hold the same model's KV" },
        { key: "cache_transceiver_config.backend", read: (c) => trtEngineArgs(c).cache_transceiver_config?.backend, fallback: "(default)", why: "both sides must use the same cache transceiver backend" },
        { key: "kv_cache_config.dtype", read: (c) => trtEngineArgs(c).kv_cache_config?.dtype, fallback: "auto", why: "the KV element type must be the same on both sides" },
        { key: "tokens per block", read: (c) => flagValue(c, "--kv-block-size") ?? (trtEngineArgs(c).tokens_per_block !== undefined ? String(trtEngineArgs(c).tokens_per_block) : undefined), fallback: "32", why: "KV blocks are exchanged whole; a different block size misaligns every transfer" },
    ],
};

/** Loopback or wildcard: never an address a peer can use. */
export function unroutable(host: string): boolean {
    const h = host.trim().toLowerCase().replace(/^\[|\]$/g, "");
    return h === "localhost" || h.endsWith(".localhost") || /^127\./.test(h) || h === "::1" || h === "0:0:0:0:0:0:0:1"
        || h === "0.0.0.0" || h === "::" || h === "*" || h === "" || h === "0";
}

/** Host part of `host:port`, `[v6]:port` or a bare host. */
function hostOf(addr: string): string {
    const a = addr.trim();
    if (a.startsWith("[")) return a.slice(1, a.indexOf("]") > 0 ? a.indexOf("]") : undefined);
    return (a.match(/:/g) ?? []).length === 1 ? a.split(":")[0] : a;
}

/** A handshake address from env: bad if a loopback/wildcard literal, or a downward-API field that is not the pod's address. */
function addressProblem(v: EnvValue | undefined, c: ContainerView): string | undefined {
    if (!v) return undefined;
    if (v.fieldRef) {
        if (v.fieldRef === "status.podIP" || v.fieldRef === "status.podIPs") return undefined;
        if (v.fieldRef === "status.hostIP" && c.pod.hostNetwork) return undefined;
        return `comes from ${v.fieldRef}, which is not an address the pod listens on`;
    }
    if (v.value !== undefined && unroutable(hostOf(v.value))) return `is ${JSON.stringify(v.value)}, a loopback or wildcard address a peer cannot connect to`;
    return undefined;
}

interface Pair { ref: string; prefill: ContainerView; decode: ContainerView }

/** Prefill/decode main containers of each DGD. */
function pairs(v: StackView): Pair[] {
    const byDgd = new Map<string, ContainerView[]>();
    for (const c of v.containers) {
        if (c.kind !== "DynamoGraphDeployment" || c.init || c.container !== "main" || (c.role !== "prefill" && c.role !== "decode")) continue;
        byDgd.set(c.resource.urn, [...(byDgd.get(c.resource.urn) ?? []), c]);
    }
    const out: Pair[] = [];
    for (const cs of byDgd.values()) {
        for (const p of cs.filter((c) => c.role === "prefill")) for (const d of cs.filter((c) => c.role === "decode")) out.push({ ref: p.ref, prefill: p, decode: d });
    }
    return out;
}

const tpOf = (c: ContainerView) => Number(flagValue(c, "--tensor-parallel-size") ?? flagValue(c, "--tp") ?? flagValue(c, "--tp-size") ?? "1");

type Out = Array<{ subject: string; finding: Finding; urn?: string }>;

/** Prefill and decode agree on every setting that shapes a KV block or the transfer. */
export const pdSettingsMatch = stackPolicy({
    name: "pd-kv-settings-match",
    description: "The prefill and decode workers of one DynamoGraphDeployment must run the same engine and agree on every setting that changes the shape, size or type of a KV block or the transfer (vLLM: image, --model, --dtype, --kv-cache-dtype, attention backend, --block-size, VLLM_KV_CACHE_LAYOUT, connector, NIXL backends, TP sizes that divide; SGLang: image, --model-path, --dtype, --kv-cache-dtype, --page-size, transfer backend, NIXL backend; TensorRT-LLM: image, --model-path, cache_transceiver_config.backend, kv_cache_config.dtype, tokens per block). Sources: vllm-project/vllm@v0.28.0 nixl_connector.py compute_nixl_compatibility_hash and _validate_remote_agent_handshake; sgl-project/sglang@v0.5.18 server_args.py; TensorRT-LLM disaggregated serving.",
    remediationSteps: "Render prefill and decode from one engine configuration (lib/dgd.ts); set a KV setting on both or neither.",
}, (v) => {
    const out: Out = [];
    for (const { ref, prefill, decode } of pairs(v)) {
        const add = (field: string, problem: string, fix: string) => out.push({ subject: `${ref} prefill ${prefill.component}/decode ${decode.component}`, finding: { field, problem, fix }, urn: prefill.resource.urn });
        const ep = engineOf(prefill), ed = engineOf(decode);
        if (ep !== ed) { add(`${decode.path}.command`, `prefill runs ${ep ?? "an unknown engine"} but decode runs ${ed ?? "an unknown engine"}; their KV formats and transfer protocols differ`, "run the same engine on both"); continue; }
        if (!ep) continue;
        if (ep === "trtllm") for (const c of [prefill, decode]) {
            if (flagValue(c, "--extra-engine-args") !== undefined) add(`${c.path}.args[--extra-engine-args]`, "takes TensorRT-LLM engine args from a file, so its cache transceiver and KV settings cannot be compared with its peer's", "pass them as --override-engine-args JSON");
        }
        // vLLM and SGLang read further CLI arguments from a YAML file given with --config (vLLM FlexibleArgumentParser
        // `--config`; SGLang ServerArgs `--config`): settings there never reach the pack.
        if (ep === "vllm" || ep === "sglang") for (const c of [prefill, decode]) {
            if (flagValue(c, "--config") !== undefined) add(`${c.path}.args[--config]`, `reads ${ep} arguments from the file ${flagValue(c, "--config")}, so its KV settings cannot be compared with its peer's`, "pass the arguments on the command line");
        }
        for (const s of MUST_MATCH[ep]) {
            const a = s.read(prefill) ?? s.fallback, b = s.read(decode) ?? s.fallback;
            if (a !== b) add(`${decode.path} ${s.key}`, `prefill has ${s.key} ${a ?? "(unset)"} but decode has ${b ?? "(unset)"}: ${s.why}; the pair passes health checks and fails or hangs on every handoff`, `set ${s.key} to the same value on prefill and decode`);
        }
        if (ep === "vllm") {
            const tp = tpOf(prefill), td = tpOf(decode);
            if (Number.isFinite(tp) && Number.isFinite(td) && tp > 0 && td > 0 && Math.max(tp, td) % Math.min(tp, td) !== 0) {
                add(`${decode.path}.args[--tensor-parallel-size]`, `prefill TP ${tp} and decode TP ${td} do not divide one another; vLLM's NIXL connector splits KV heads between ranks by an integer ratio`, "use TP sizes where one divides the other");
            }
        }
    }
    return out;
});

/** A failed KV load is an error, and the handshake address a peer is told is routable. */
export const pdFailLoudly = stackPolicy({
    name: "pd-kv-load-fails-loudly",
    description: "Disaggregated vLLM workers must set kv_transfer_config kv_load_failure_policy \"fail\" (the default \"recompute\" silently re-runs the prefill on decode, vllm-project/vllm@v0.28.0 vllm/config/kv_transfer.py), and every handshake address a peer is told (vLLM VLLM_NIXL_SIDE_CHANNEL_HOST, default localhost; SGLang --dist-init-addr / SGLANG_HOST_IP / HOST_IP; Mooncake MOONCAKE_LOCAL_HOSTNAME) must be routable: set to the pod IP (downward API) or a real address, never loopback or a wildcard.",
    remediationSteps: "Add \"kv_load_failure_policy\": \"fail\" to --kv-transfer-config; set VLLM_NIXL_SIDE_CHANNEL_HOST from fieldRef status.podIP (lib/dgd.ts).",
}, (v) => {
    const out: Out = [];
    for (const c of v.containers) {
        if (c.init) continue;
        const add = (field: string, problem: string, fix: string) => out.push({ subject: containerLabel(c), finding: { field, problem, fix }, urn: c.resource.urn });
        const mc = c.env.get("MOONCAKE_LOCAL_HOSTNAME");
        const mp = addressProblem(mc, c);
        if (mp) add(mc!.field, `MOONCAKE_LOCAL_HOSTNAME ${mp}`, "set it from fieldRef status.podIP");
        if (c.kind !== "DynamoGraphDeployment" || c.container !== "main" || (c.role !== "prefill" && c.role !== "decode")) continue;
        const engine = engineOf(c);
        if (engine === "vllm") {
            const kvt = json(flagValue(c, "--kv-transfer-config"));
            if (vllmPdConnector(c)) {
                const policy = kvt?.kv_load_failure_policy ?? "recompute";
                if (policy !== "fail") add(`${c.path}.args[--kv-transfer-config].kv_load_failure_policy`, `is ${JSON.stringify(policy)}${kvt?.kv_load_failure_policy === undefined ? " (vLLM's default)" : ""}: a failed KV read silently re-runs the prefill on the decode worker`, "set \"kv_load_failure_policy\": \"fail\"");
            }
            if (vllmPdConnector(c)?.kv_connector === "NixlConnector") {
                const host = c.env.get("VLLM_NIXL_SIDE_CHANNEL_HOST");
                if (!host) add(`${c.path}.env[VLLM_NIXL_SIDE_CHANNEL_HOST]`, "is unset, so vLLM advertises \"localhost\" (Dynamo overrides it only for a top-level NixlConnector, falling back to 127.0.0.1): the peer's handshake goes to itself", "set VLLM_NIXL_SIDE_CHANNEL_HOST from fieldRef status.podIP");
                else { const p = addressProblem(host, c); if (p) add(host.field, `VLLM_NIXL_SIDE_CHANNEL_HOST ${p}`, "set it from fieldRef status.podIP"); }
            }
        }
        if (engine === "sglang") {
            const dia = flagValue(c, "--dist-init-addr");
            if (dia !== undefined && unroutable(hostOf(dia))) add(`${c.path}.args[--dist-init-addr]`, `is ${JSON.stringify(dia)}; Dynamo advertises its host as the prefill bootstrap address, which a peer cannot reach`, "use the pod IP ($(POD_IP) from the downward API) or drop the flag");
            for (const n of ["SGLANG_HOST_IP", "HOST_IP"]) { const p = addressProblem(c.env.get(n), c); if (p) add(c.env.get(n)!.field, `${n} ${p}`, `set ${n} from fieldRef status.podIP or remove it`); }
        }
    }
    return out;
});

/** The prefill/decode compatibility policies. */
export const pdCompatPolicies: StackValidationPolicy[] = [pdSettingsMatch, pdFailLoudly];
