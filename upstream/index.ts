/**
 * Upstream facts per pinned version (DESIGN §2, §7). Plain data with sources; see ./types.ts.
 * Engine side: vllm.ts, sglang.ts, trtllm.ts, dynamo.ts, mooncake.ts, libraries.ts; images.ts (variants and what they
 * provide); refused.ts (combinations upstream refuses). Chart values keys: ./charts.
 */
import type { ComponentFacts, EntrypointFacts } from "./types";
import { dynamoEntrypoints, dynamoFrontend, dynamoPlanner, dynamoSglang, dynamoTrtllm, dynamoVllm } from "./dynamo";
import { libfabric, libraryEntrypoints, nccl, nixl, platformPreflight, python, ucx } from "./libraries";
import { mooncakeClient, mooncakeEntrypoints, mooncakeMaster, mooncakeStoreService, mooncakeTransferEngine } from "./mooncake";
import { sglang } from "./sglang";
import { trtllm } from "./trtllm";
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
export * from "./gateway";
export * from "./pairs";
export * from "./kv-transport";

/** Every component's facts, by component id. */
export const components: Readonly<Record<string, ComponentFacts>> = Object.fromEntries([
    vllm, sglang, trtllm, dynamoFrontend, dynamoPlanner, dynamoVllm, dynamoSglang, dynamoTrtllm,
    mooncakeMaster, mooncakeStoreService, mooncakeClient, mooncakeTransferEngine, ucx, nixl, nccl, libfabric, python, platformPreflight,
].map((c) => [c.component, c]));

/** Every known entry point. */
export const entrypoints: readonly EntrypointFacts[] = [...dynamoEntrypoints, ...mooncakeEntrypoints, ...libraryEntrypoints];
