import type { Source } from "./types";

/**
 * Versions that talk to each other: which release of a wire-level library each pinned image carries, and the rules
 * upstream states for the pairs that exchange data (Mooncake master/store and the Mooncake client inside each engine;
 * NIXL at both ends of a prefill/decode pair; the Dynamo router (frontend) and its workers). Checked by
 * upstream/check/versions.ts over the rendered objects. A version is only recorded when it was read at the pinned
 * tag; `version: undefined` says it could not be read, and a pair that needs it is reported as unproven.
 */

/** A wire-level library whose two ends must agree. */
export type WireLibrary = "mooncake" | "nixl" | "dynamo";

/** What one image carries of a wire-level library. */
export interface BundledVersionFact {
    /** `repository:tag`, exactly as rendered. */
    readonly image: string;
    readonly library: WireLibrary;
    /** The release, as upstream tags it (`v0.3.12.post1`, `1.3.2`, `1.5.0`); undefined when not read at the pin. */
    readonly version?: string;
    readonly source: Source;
    readonly note?: string;
}

const DYN = "ai-dynamo/dynamo@v1.5.0";
const COMPAT: Source = `${DYN}:docs/fern/pages/reference/general/compatibility.mdx`;

/**
 * Dynamo 1.5.0's compatibility page: "SGLang 0.5.18 (NIXL 1.4.0), TensorRT-LLM 1.3.0rc25 (NIXL 1.3.1), vLLM 0.28.0
 * (NIXL 1.3.2)" (docs.nvidia.com/dynamo/v1.5.0/reference/compatibility); the Dynamo runtime in each image is the
 * release itself. The Mooncake wheel the runtime images inherit from their upstream engine images is not named there,
 * and no file we could read at the tag names it. The Mooncake master and store run the endpoint's own runtime image, so
 * the `mooncake-master-client` pair is proven by identity, not by release.
 */
function dynamoImage(engine: "vllm" | "sglang" | "tensorrtllm", nixl: string, mooncake: boolean): BundledVersionFact[] {
    const out: BundledVersionFact[] = [];
    for (const tag of ["1.5.0", "1.5.0-efa"]) {
        const image = `nvcr.io/nvidia/ai-dynamo/${engine}-runtime:${tag}`;
        out.push({ image, library: "nixl", version: nixl, source: COMPAT });
        out.push({ image, library: "dynamo", version: "1.5.0", source: COMPAT });
        if (mooncake) {
            out.push({
                image,
                library: "mooncake",
                source: COMPAT,
                note: "mooncake-transfer-engine is inherited from the upstream engine image (container/README.md, container/context.yaml); the release is not recorded at the tag",
            });
        }
    }
    return out;
}

export const bundledVersions: readonly BundledVersionFact[] = [
    ...dynamoImage("vllm", "1.3.2", true),
    ...dynamoImage("sglang", "1.4.0", true),
    ...dynamoImage("tensorrtllm", "1.3.1", false),
    { image: "nvcr.io/nvidia/ai-dynamo/dynamo-planner:1.5.0", library: "dynamo", version: "1.5.0", source: COMPAT },
];

/** How two ends of a pair must relate. */
export interface VersionPairFact {
    readonly id: string;
    readonly library: WireLibrary;
    /** `same-release`: both ends the same release; `same-minor`: same major.minor. */
    readonly rule: "same-release" | "same-minor";
    /** The ends, in words. */
    readonly ends: string;
    readonly source: Source;
    readonly note?: string;
}

export const versionPairs: readonly VersionPairFact[] = [
    {
        id: "mooncake-master-client",
        library: "mooncake",
        rule: "same-release",
        ends: "Mooncake master and store service vs the Mooncake client in each engine image of the endpoint",
        source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/include/rpc_service.h",
        note: "client and master speak coro_rpc with struct-serialised requests that change between releases; Mooncake states no cross-release compatibility",
    },
    {
        id: "nixl-prefill-decode",
        library: "nixl",
        rule: "same-release",
        ends: "NIXL in the prefill image vs NIXL in the decode image of one endpoint",
        source: "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py",
        note: "vLLM's handshake (compute_nixl_compatibility_hash) hashes the vLLM version and NIXL_CONNECTOR_VERSION, a constant of vLLM's connector, plus model/dtype/KV-head/layer/attention-backend/cache-dtype factors, and refuses a mismatch (vllm-project/vllm PR #29503): it does NOT cover the NIXL library release, so vLLM itself would pair two NIXL releases. The same-release rule on the library is ours (closed world): the serialized NIXL agent metadata both ends load (nixl_wrapper.add_remote_agent) is not promised compatible across releases; SGLang and TRT-LLM exchange the same release-specific agent metadata",
    },
    {
        id: "dynamo-router-workers",
        library: "dynamo",
        rule: "same-release",
        ends: "Dynamo in the frontend (KV router) vs Dynamo in every worker and the planner of the graph",
        source: `${DYN}:docs/fern/pages/reference/general/compatibility.mdx`,
        note: "the router decodes the workers' KV events, runtime config and request-plane codec of its own release; Dynamo ships frontend and workers as one release",
    },
];

/** The Mooncake release whose master first carries `--enable_kv_events` (kvcache-ai/Mooncake PR #2214). */
export const MOONCAKE_MASTER_KV_EVENTS_SINCE = "v0.3.12";

/**
 * Compares two Mooncake-style release tags (`v0.3.12.post1`): negative when a < b. Unparseable parts compare as 0.
 * @returns a number whose sign orders a and b
 */
export function compareRelease(a: string, b: string): number {
    const parts = (v: string) =>
        v
            .replace(/^v/, "")
            .split(/[.]/)
            .map((p) => (p.startsWith("post") ? Number(p.slice(4)) / 1000 : Number(p) || 0));
    const x = parts(a),
        y = parts(b);
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
        const d = (x[i] ?? 0) - (y[i] ?? 0);
        if (d !== 0) return d;
    }
    return 0;
}

/** The recorded release of `library` in `image`, or undefined when unknown. */
export function bundledVersion(
    image: string,
    library: WireLibrary,
    facts: readonly BundledVersionFact[] = bundledVersions,
): BundledVersionFact | undefined {
    return facts.find((f) => f.image === image && f.library === library);
}

/** True when the Mooncake master in `image` is proven to publish KV events (recorded release >= {@link MOONCAKE_MASTER_KV_EVENTS_SINCE}). */
export function masterPublishesKvEvents(image: string, facts: readonly BundledVersionFact[] = bundledVersions): boolean {
    const v = bundledVersion(image, "mooncake", facts)?.version;
    return !!v && compareRelease(v, MOONCAKE_MASTER_KV_EVENTS_SINCE) >= 0;
}
