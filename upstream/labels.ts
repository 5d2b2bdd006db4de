/**
 * The platform's own label and annotation keys that the upstream rules (upstream/check) read on rendered objects.
 * Defined here, once, because upstream/ imports nothing outside itself; lib/labels.ts and config/endpoint.ts re-export
 * them for the program and the policy pack.
 */

/** Prefix of every label, annotation and tag key the platform writes. */
export const LABEL_PREFIX = "inference-platform.io";

/** Pod label naming the endpoint a graph component serves (selectors, dashboards, the version-pair rules). */
export const ENDPOINT_LABEL = `${LABEL_PREFIX}/endpoint`;

/**
 * DynamoGraphDeployment annotation: how many KV cache scopes call the endpoint's model (config/endpoint.ts
 * `cacheScopes`, written by lib/dgd.ts, read by upstream/check/activation.ts `cache-salt`).
 */
export const CACHE_SCOPES_ANNOTATION = `${LABEL_PREFIX}/kv-cache-scopes`;

/**
 * Workload annotation carrying a graph's reviewed KV-transport exceptions as JSON (lib/dgd.ts writes it from the stack
 * file's `kvExceptions`; upstream/check/kv-closed-world.ts reads it; lib/labels.ts re-exports it).
 */
export const KV_EXCEPTIONS_ANNOTATION = `${LABEL_PREFIX}/kv-exceptions`;
