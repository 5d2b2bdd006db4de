import type { ImageFacts, ImageRequirementFact, Source } from "./types";
import { valkeyImages } from "./valkey";

/**
 * Image variants the product runs and what each carries. Dynamo 1.5.0 runtime images: plain `<engine>-runtime:1.5.0`
 * and the AWS EFA variant `-efa`, which adds the EFA installer stage (libfabric with the EFA provider, `fi_info`,
 * aws-ofi-nccl) on top of `runtime` (ai-dynamo/dynamo@v1.5.0:container/templates/aws.Dockerfile, built with
 * `render.py --make-efa` + `docker build --target aws`; docs/fern/pages/kubernetes/installation/rdma-setup/efa-on-aws.mdx
 * Step 3). The plain tag has no aws-ofi-nccl, so `NCCL_NET=Libfabric` cannot load there.
 */
const D = "ai-dynamo/dynamo@v1.5.0";
const RUNTIME: Source = `${D}:container/templates/runtime.Dockerfile`;
const AWS: Source = `${D}:container/templates/aws.Dockerfile`;

const MOONCAKE = ["mooncake-master", "mooncake-store-service", "mooncake-client", "mooncake-transfer-engine"];
const common = ["python", "ucx", "nixl", "nccl", "platform-preflight", "huggingface-hub", "platform-model-cache"];
const rdmaTools = ["ucx", "ucx_info", "nixl", "nccl", "ibv_devinfo"];
const efaTools = ["libfabric", "fi_info", "efa-installer", "aws-ofi-nccl"];

function runtime(engine: "vllm" | "sglang" | "tensorrtllm", engineComponents: string[], extra: string[] = []): ImageFacts[] {
    const repository = `nvcr.io/nvidia/ai-dynamo/${engine}-runtime`;
    const components = ["dynamo-frontend", ...engineComponents, ...common];
    return [
        { repository, tag: "1.5.0", components, provides: [...rdmaTools, ...extra], source: RUNTIME },
        {
            repository,
            tag: "1.5.0-efa",
            components: [...components, "libfabric"],
            provides: [...rdmaTools, ...extra, ...efaTools],
            source: AWS,
        },
    ];
}

export const images: readonly ImageFacts[] = [
    // The mooncake-transfer-engine wheel both images carry ships the `mooncake_master` console script and
    // `mooncake.mooncake_store_service` (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/pyproject.toml
    // [project.scripts]), so the endpoint's Mooncake master and store run its own runtime image.
    // KVBM ships in the vLLM and TensorRT-LLM runtime images (upstream/kvbm.ts); only its vLLM connector is rendered.
    ...runtime("vllm", ["dynamo-vllm", "vllm", "kvbm", ...MOONCAKE], ["mooncake-transfer-engine", "mooncake_master"]),
    // SGLang's HiCache Mooncake backend imports the bundled mooncake-transfer-engine (Dynamo hicache guide: SGLang >= 0.5.13).
    ...runtime("sglang", ["dynamo-sglang", "sglang", ...MOONCAKE], ["mooncake-transfer-engine", "mooncake_master"]),
    ...runtime("tensorrtllm", ["dynamo-trtllm", "trtllm"]),
    {
        repository: "nvcr.io/nvidia/ai-dynamo/dynamo-planner",
        tag: "1.5.0",
        components: ["dynamo-planner", "python"],
        provides: [],
        source: `${D}:container/templates/planner.Dockerfile`,
        note: "dedicated planner image since 1.1.0 (ai-dynamo/dynamo PR #8407)",
    },
    // The spoke's limit-counter store (upstream/valkey.ts).
    ...valkeyImages,
];

/** What a configuration needs from its image. */
export const imageRequirements: readonly ImageRequirementFact[] = [
    {
        id: "nccl-net-libfabric",
        when: { env: ["NCCL_NET", "Libfabric"] },
        needs: ["aws-ofi-nccl"],
        source: "aws/aws-ofi-nccl@v1.16.0:src/nccl_ofi_net.cpp",
        note: "NCCL_NET names the aws-ofi-nccl plugin; without it NCCL init fails",
    },
    {
        id: "fi-provider-efa",
        when: { env: ["FI_PROVIDER", "efa"] },
        needs: ["libfabric", "efa-installer"],
        source: "ofiwg/libfabric@v2.4.0:src/fabric.c",
    },
    {
        id: "nixl-libfabric-sglang",
        when: { env: ["SGLANG_DISAGGREGATION_NIXL_BACKEND", "LIBFABRIC"] },
        needs: ["libfabric"],
        source: "ai-dynamo/nixl@v1.4.0:src/plugins/libfabric/README.md",
    },
    {
        id: "nixl-libfabric-trtllm",
        when: { env: ["TRTLLM_NIXL_KVCACHE_BACKEND", "LIBFABRIC"] },
        needs: ["libfabric"],
        source: "ai-dynamo/nixl@v1.3.1:src/plugins/libfabric/README.md",
    },
    {
        id: "nixl-libfabric-vllm",
        when: { nixlBackend: "LIBFABRIC" },
        needs: ["libfabric"],
        source: "ai-dynamo/nixl@v1.3.2:src/plugins/libfabric/README.md",
    },
    {
        id: "preflight-efa",
        when: { env: ["PREFLIGHT_FABRIC", "efa"] },
        needs: ["fi_info"],
        source: "inference-platform/platform@0.1.0:lib/preflight.ts",
        note: "the preflight fails the pod when fi_info is neither on PATH nor in /opt/amazon/efa/bin, so the image must carry it",
    },
    {
        id: "vllm-mooncake-store",
        when: { kvConnector: "MooncakeStoreConnector" },
        needs: ["mooncake-transfer-engine"],
        source: "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py",
    },
    {
        id: "sglang-hicache-mooncake",
        when: { flag: ["--hicache-storage-backend", "mooncake"] },
        needs: ["mooncake-transfer-engine"],
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py",
    },
];
