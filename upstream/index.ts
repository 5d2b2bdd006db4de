/**
 * Upstream facts per pinned version. Plain data with sources; see ./types.ts.
 * Engine side: vllm.ts, sglang.ts, trtllm.ts, dynamo.ts, mooncake.ts, libraries.ts; images.ts (variants and what they
 * provide); refused.ts (combinations upstream refuses); activation.ts (what each feature needs to take effect and for its
 * peers to accept it); compat.ts (the wire-level library releases each image carries and the pairs that must agree).
 * Chart values keys: ./charts. Rules over rendered objects: ./check.
 */
import type { ComponentFacts, EntrypointFacts } from "./types";
import { dynamoEntrypoints, dynamoFrontend, dynamoPlanner, dynamoSglang, dynamoTrtllm, dynamoVllm } from "./dynamo";
import { libfabric, libraryEntrypoints, nccl, nixl, platformPreflight, python, ucx } from "./libraries";
import { mooncakeClient, mooncakeEntrypoints, mooncakeMaster, mooncakeStoreService, mooncakeTransferEngine } from "./mooncake";
import { huggingfaceHub, kvbm, kvbmEntrypoints, platformModelCache } from "./kvbm";
import { sglang } from "./sglang";
import { trtllm } from "./trtllm";
import { valkeyEntrypoints, valkeyServer } from "./valkey";
import { vllm } from "./vllm";

export * from "./types";
export { charts } from "./charts";
export * from "./vllm";
export * from "./sglang";
export * from "./trtllm";
export * from "./dynamo";
export * from "./mooncake";
export * from "./libraries";
export * from "./images";
export * from "./refused";
export * from "./activation";
export * from "./compat";
export * from "./gateway";
export * from "./rdma-device-plugin";
export * from "./network-attachment";
export * from "./pairs";
export * from "./kv-transport";
export * from "./kvbm";
export * from "./valkey";

/** Every component's facts, by component id. */
export const components: Readonly<Record<string, ComponentFacts>> = Object.fromEntries(
    [
        vllm,
        sglang,
        trtllm,
        dynamoFrontend,
        dynamoPlanner,
        dynamoVllm,
        dynamoSglang,
        dynamoTrtllm,
        mooncakeMaster,
        mooncakeStoreService,
        mooncakeClient,
        mooncakeTransferEngine,
        ucx,
        nixl,
        nccl,
        libfabric,
        python,
        platformPreflight,
        kvbm,
        huggingfaceHub,
        platformModelCache,
        valkeyServer,
    ].map((c) => [c.component, c]),
);

/** Every known entry point. */
export const entrypoints: readonly EntrypointFacts[] = [
    ...dynamoEntrypoints,
    ...mooncakeEntrypoints,
    ...libraryEntrypoints,
    ...kvbmEntrypoints,
    ...valkeyEntrypoints,
];
export * from "./failover";
