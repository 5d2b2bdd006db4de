/**
 * Images allowed to run RDMA workloads (prefill/decode/KV-pool engines, Mooncake stores, which run their endpoint's engine image). An image enters this
 * list only after CI ran it on an RDMA node and recorded: `ucx_info -v` >= 1.19 (UCX 1.18 error handling costs
 * ~10x, ai-dynamo/nixl PR #579/#610), `ucx_info -d` lists rc_mlx5/dc_mlx5 (a UCX built without verbs picks tcp,
 * ai-dynamo/dynamo PR #1314), a NIXL version not on the known-bad list (nixl 0.10.0 cross-NUMA regression,
 * vllm-project/vllm #35799), and whether its Mooncake was built with the EFA transport (kvcache-ai/Mooncake#2070).
 *
 * Kept in step with config/versions.ts (test/policies checks that every pinned engine and Mooncake image is here);
 * repeated rather than imported because the policy pack ships on its own.
 */
export interface AllowedImage {
    /** Registry/repository without tag (`docker.io/` prefix optional). */
    repository: string;
    tags: string[];
    /** The image's Mooncake carries the EFA transport (required for MOONCAKE_PROTOCOL=efa). */
    mooncakeEfa: boolean;
}

export const ALLOWED_RDMA_IMAGES: AllowedImage[] = [
    // `-efa`: Dynamo's AWS variant of the same release (EFA installer stage: libfabric with the EFA provider,
    // aws-ofi-nccl; ai-dynamo/dynamo@v1.5.0 container/render.py --make-efa, docs rdma-setup/efa-on-aws).
    { repository: "nvcr.io/nvidia/ai-dynamo/vllm-runtime", tags: ["1.5.0", "1.5.0-efa"], mooncakeEfa: false },
    { repository: "nvcr.io/nvidia/ai-dynamo/sglang-runtime", tags: ["1.5.0", "1.5.0-efa"], mooncakeEfa: false },
    { repository: "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime", tags: ["1.5.0", "1.5.0-efa"], mooncakeEfa: false },
];

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
    const list = [...ALLOWED_RDMA_IMAGES, ...extra.map((e) => { const s = splitImage(e); return { repository: s.repository, tags: s.tag ? [s.tag] : [], mooncakeEfa: false }; })];
    return list.find((a) => splitImage(a.repository).repository === repository && tag !== undefined && a.tags.includes(tag));
}
