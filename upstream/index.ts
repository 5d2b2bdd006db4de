/**
 * Upstream facts per pinned version (DESIGN §2, §7). Plain data with sources; see ./types.ts.
 */
export * from "./types";
export { charts } from "./charts";
