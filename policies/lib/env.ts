/**
 * Parsers for transport environment variables, reading values the way UCX, NCCL, vLLM and Mooncake read them
 * (not substring matches): UCX allow-lists with `^` negation and `all`, `dev:port` device entries, `:aux`
 * transport suffixes, NCCL's `^`/`=` HCA lists with prefix matching and `hca:port[:rail[:plane]]` entries.
 */

/** A UCX allow-list value (`UCX_TLS`, `UCX_NET_DEVICES`; ucs_config allow-list type). */
export interface UcxList {
    /** Leading `^`: every entry is excluded, everything else allowed. */
    negate: boolean;
    /** The list allows everything (`all`, or an empty negated list). */
    all: boolean;
    /** Entries, trimmed, lower-cased, empty ones dropped. */
    items: string[];
}

/** Parses a UCX allow-list: `^` negates the whole list, `all` allows everything, entries are comma separated. */
export function parseUcxList(value: string): UcxList {
    let v = value.trim();
    const negate = v.startsWith("^");
    if (negate) v = v.slice(1);
    const items = v
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s.length > 0);
    const all = (!negate && items.includes("all")) || (negate && items.length === 0);
    return { negate, all, items };
}

/** Transport name of a `UCX_TLS` entry without the `:aux` suffix (`ud_v:aux` -> `ud_v`). */
export function tlsName(entry: string): string {
    return entry.replace(/:aux$/, "");
}

/** UCX transport aliases by family (UCX docs "UCX_TLS"; `rc_x`/`rc_mlx5` accelerated, `rc_v`/`rc_verbs` verbs). */
export const UCX_RDMA_FAMILIES: Record<string, string[]> = {
    rc: ["rc", "rc_v", "rc_verbs", "rc_x", "rc_mlx5"],
    dc: ["dc", "dc_x", "dc_mlx5"],
    ud: ["ud", "ud_v", "ud_verbs", "ud_x", "ud_mlx5"],
    srd: ["srd"],
};
/** `ib` selects every InfiniBand transport family. */
const IB_ALIAS = "ib";
/** CUDA memory transports (GPU buffers); `cuda` selects both. */
export const UCX_CUDA = ["cuda", "cuda_copy", "cuda_ipc"];

/** What a `UCX_TLS` value lets UCX use. */
export interface UcxTlsEffect {
    tcp: boolean;
    rdma: boolean;
    cuda: boolean;
}

/** Evaluates `UCX_TLS` as UCX does. Unset means every transport (UCX default), including tcp. */
export function ucxTlsEffect(value: string | undefined): UcxTlsEffect {
    if (value === undefined) return { tcp: true, rdma: true, cuda: true };
    const l = parseUcxList(value);
    const names = new Set(l.items.map(tlsName));
    if (l.all) return { tcp: true, rdma: true, cuda: true };
    const rdmaMembers = Object.entries(UCX_RDMA_FAMILIES)
        .filter(([f]) => f !== "srd")
        .flatMap(([, m]) => m);
    if (l.negate) {
        const familyExcluded = (f: string) =>
            names.has(f) || (f !== "srd" && names.has(IB_ALIAS)) || UCX_RDMA_FAMILIES[f].every((m) => names.has(m));
        return {
            tcp: !names.has("tcp"),
            rdma: Object.keys(UCX_RDMA_FAMILIES).some((f) => !familyExcluded(f)),
            cuda: !(names.has("cuda") || (names.has("cuda_copy") && names.has("cuda_ipc"))),
        };
    }
    return {
        tcp: names.has("tcp"),
        rdma: names.has(IB_ALIAS) || rdmaMembers.some((m) => names.has(m)) || names.has("srd"),
        cuda: UCX_CUDA.some((m) => names.has(m)),
    };
}

/** One `dev[:port]` entry of `UCX_NET_DEVICES` / `PREFLIGHT_HCAS`. */
export interface DeviceEntry {
    device: string;
    port?: number;
    raw: string;
}

/** Splits `mlx5_0:1` into device and port. */
export function parseDeviceEntry(raw: string): DeviceEntry {
    const m = /^([^:]+)(?::(\d+))?$/.exec(raw.trim());
    if (!m) return { device: raw.trim(), raw };
    return { device: m[1], port: m[2] === undefined ? undefined : Number(m[2]), raw };
}

/** `UCX_NET_DEVICES` as UCX reads it. */
export function parseUcxNetDevices(value: string): { list: UcxList; devices: DeviceEntry[] } {
    const list = parseUcxList(value);
    return { list, devices: list.items.map(parseDeviceEntry) };
}

/** One `NCCL_IB_HCA` entry: `hca[:port[:rail[:plane]]]`. */
export interface NcclHcaEntry {
    hca: string;
    port?: number;
    raw: string;
}

/** `NCCL_IB_HCA` as NCCL reads it (src/misc/utils.cc): `^` excludes, `=` exact match, otherwise prefix match. */
export interface NcclHcaList {
    exclude: boolean;
    exact: boolean;
    entries: NcclHcaEntry[];
}

/**
 * Pure: parses an `NCCL_IB_HCA` value as NCCL reads it (the variable: NVIDIA/nccl@v2.28.3-1:src/transport/net_ib.cc,
 * upstream/libraries.ts; the list syntax: NVIDIA/nccl src/misc/utils.cc, as lib/rails.ts cites it): a leading `^`
 * excludes the listed HCAs, then a leading `=` makes names match exactly
 * (otherwise each entry is a prefix: `mlx5_1` also selects `mlx5_10`); entries are comma separated, `hca[:port]`,
 * trimmed, empty ones dropped.
 * @returns `{ exclude, exact, entries }`, each entry `{ hca, port, raw }`; `port` is undefined when absent or empty,
 *   NaN when not a number. Never throws.
 */
export function parseNcclIbHca(value: string): NcclHcaList {
    let v = value.trim();
    const exclude = v.startsWith("^");
    if (exclude) v = v.slice(1);
    const exact = v.startsWith("=");
    if (exact) v = v.slice(1);
    const entries = v
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
        .map((raw) => {
            const [hca, port] = raw.split(":");
            return { hca, port: port === undefined || port === "" ? undefined : Number(port), raw };
        });
    return { exclude, exact, entries };
}

/** HCAs among `known` that an `NCCL_IB_HCA` entry selects (exact or prefix). */
export function ncclMatches(list: NcclHcaList, entry: NcclHcaEntry, known: string[]): string[] {
    return known.filter((k) => (list.exact ? k === entry.hca : k.startsWith(entry.hca)));
}

/** NCCL reads integer flags with strtol: any non-zero integer is true (`NCCL_IB_DISABLE=1`). */
export function ncclFlagSet(value: string | undefined): boolean {
    if (value === undefined) return false;
    const n = parseInt(value.trim(), 10);
    return Number.isFinite(n) && n !== 0;
}

/** Boolean-ish environment flags (`MC_FORCE_TCP`, `DYN_KVBM_NIXL_BACKEND_LIBFABRIC`): 1/true/yes/on. */
export function truthy(value: string | undefined): boolean {
    if (value === undefined) return false;
    return ["1", "true", "yes", "on", "y"].includes(value.trim().toLowerCase());
}

/** Normalises a PCI address to `dddd:bb:dd.f` lower case (`1B:00.0` -> `0000:1b:00.0`). */
export function normalizeBdf(bdf: string): string {
    const b = bdf.trim().toLowerCase();
    return /^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/.test(b) ? `0000:${b}` : b;
}

/** `VLLM_GPU_NIC_PCIE_MAPPING` (`<gpu_bdf>=<nic_bdf>,...`, vllm-project/vllm PR #42083) as GPU -> NIC pairs. */
export function parseGpuNicMapping(value: string): { pairs: Array<{ gpu: string; nic: string }>; malformed: string[] } {
    const pairs: Array<{ gpu: string; nic: string }> = [];
    const malformed: string[] = [];
    for (const raw of value
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)) {
        const [gpu, nic, extra] = raw.split("=");
        if (!gpu || !nic || extra !== undefined) malformed.push(raw);
        else pairs.push({ gpu: normalizeBdf(gpu), nic: normalizeBdf(nic) });
    }
    return { pairs, malformed };
}

/** `VLLM_NIC_SELECTION_VARS` (`VAR:port,...`): the variables vLLM overrides per rank. */
export function parseNicSelectionVars(value: string): Array<{ name: string; port?: number }> {
    return value
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
        .map((raw) => {
            const [name, port] = raw.split(":");
            return { name, port: port === undefined ? undefined : Number(port) };
        });
}

/** Mooncake device list (`MOONCAKE_DEVICE`, JSON `device_name`, SGLang `--disaggregation-ib-device`): comma list. */
export function parseDeviceList(value: string): string[] {
    return value
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
}
