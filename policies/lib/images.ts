import { images } from "../../upstream/images";

/**
 * Images allowed to run RDMA workloads (prefill/decode/KV-pool engines, and Mooncake stores, which run their endpoint's engine image): the image variants of
 * upstream/images.ts (the only copy of image tags and what each carries) that provide UCX, read from each image's
 * Dockerfile at the pinned tag. An image enters upstream/images.ts only after CI ran it on an RDMA node and recorded:
 * `ucx_info -v` >= 1.19 (UCX 1.18 error handling costs ~10x, ai-dynamo/nixl PR #579/#610), `ucx_info -d` lists
 * rc_mlx5/dc_mlx5 (a UCX built without verbs picks tcp, ai-dynamo/dynamo PR #1314), a NIXL version not on the
 * known-bad list (nixl 0.10.0 cross-NUMA regression, vllm-project/vllm #35799), and whether its Mooncake was built
 * with the EFA transport (`provides` lists `mooncake-efa`, kvcache-ai/Mooncake#2070).
 */
export interface AllowedImage {
    /** Registry/repository without tag (`docker.io/` prefix optional). */
    repository: string;
    tags: string[];
    /** The image's Mooncake carries the EFA transport (required for MOONCAKE_PROTOCOL=efa). */
    mooncakeEfa: boolean;
}

/** What upstream/images.ts provides an image must list to run RDMA workloads. */
export const RDMA_IMAGE_NEEDS = "ucx";

/** {@link AllowedImage}s derived from upstream/images.ts (one entry per image variant). */
export function allowedRdmaImages(facts: typeof images = images): AllowedImage[] {
    return facts
        .filter((i) => i.provides.includes(RDMA_IMAGE_NEEDS))
        .map((i) => ({ repository: splitImage(i.repository).repository, tags: [i.tag], mooncakeEfa: i.provides.includes("mooncake-efa") }));
}

/** {@link allowedRdmaImages} of upstream/images.ts: the image variants RDMA workloads may run. */
export const ALLOWED_RDMA_IMAGES: AllowedImage[] = allowedRdmaImages();

/** `repository` and `tag` of an image reference, `docker.io/` and `docker.io/library/` removed. */
export function splitImage(image: string): { repository: string; tag?: string; digest?: string } {
    const [ref, digest] = image.split("@");
    const slash = ref.lastIndexOf("/");
    const colon = ref.lastIndexOf(":");
    const repo = colon > slash ? ref.slice(0, colon) : ref;
    const tag = colon > slash ? ref.slice(colon + 1) : undefined;
    return { repository: repo.replace(/^docker\.io\/(library\/)?/, ""), tag, digest };
}

/** The allow-list entry an image matches (same repository and tag), if any. */
export function allowedImage(image: string, extra: string[] = []): AllowedImage | undefined {
    const { repository, tag } = splitImage(image);
    const list = [
        ...ALLOWED_RDMA_IMAGES,
        ...extra.map((e) => {
            const s = splitImage(e);
            return { repository: s.repository, tags: s.tag ? [s.tag] : [], mooncakeEfa: false };
        }),
    ];
    return list.find((a) => splitImage(a.repository).repository === repository && tag !== undefined && a.tags.includes(tag));
}
