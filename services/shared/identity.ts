/**
 * Names shared by the gateway (Envoy Gateway / AI Gateway objects), the auth service and the metering
 * service. One place, so the ClientTrafficPolicy strip list, the ext_authz `headersToBackend` list and the
 * access-log format can never drift apart.
 */
import { DYNAMO_REQUEST_HEADERS } from "../../upstream/dynamo-headers";

/** Prefix of every trusted identity header. The gateway strips all client-sent headers with this prefix. */
export const IDENTITY_HEADER_PREFIX = "x-platform-";

/** Trusted headers the auth service sets on an allowed request (overwriting anything the client sent). */
export const IDENTITY_HEADERS = {
    tenant: "x-platform-tenant",
    team: "x-platform-team",
    keyId: "x-platform-key-id",
    model: "x-platform-model",
    /** Concurrency lease id; the metering service releases it when the request's usage record arrives. */
    lease: "x-platform-lease",
    /** Policy bundle revision the decision was made with. */
    revision: "x-platform-policy-revision",
} as const;

/**
 * Headers the Dynamo frontend reads into `nvext` before the router sees the request, each overriding the body
 * (ai-dynamo/dynamo@v1.5.0:lib/llm/src/protocols/common/extensions.rs#apply_header_routing_overrides): the auth
 * service sets them on every allowed model request (the clamped priority and tier, the derived cache salt), and the
 * gateway strips client-sent copies early, so only the platform's values reach the router and the engines. Names from
 * their one definition with its source, upstream/dynamo-headers.ts.
 */
export const DYNAMO_HEADERS = {
    /** -> `nvext.agent_hints.priority` (i32). */
    priority: DYNAMO_REQUEST_HEADERS.priority.header,
    /** -> `nvext.agent_hints.strict_priority` (u32, router queue tier). */
    strictPriority: DYNAMO_REQUEST_HEADERS.strictPriority.header,
    /** -> `nvext.cache_salt` (`HEADER_TENANT_ID`): the salt, not the tenant's name. */
    cacheSalt: DYNAMO_REQUEST_HEADERS.cacheSalt.header,
} as const;

/**
 * Prefix of every header the Dynamo frontend reads as a routing override (`x-dynamo-worker-instance-id`,
 * `x-dynamo-prefill-instance-id`, `x-dynamo-dp-rank`, `x-dynamo-prefill-dp-rank`, plus {@link DYNAMO_HEADERS}'s two
 * priority headers; ai-dynamo/dynamo@v1.5.0:lib/llm/src/protocols/common/extensions.rs#apply_header_routing_overrides):
 * a client-sent one would pin its request to a worker of its choice, around the KV router. Stripped by prefix before
 * ext_authz, so a header upstream adds later is covered; the auth service sets its own priority headers afterwards.
 */
export const DYNAMO_HEADER_PREFIX = "x-dynamo-";

/** Header the AI Gateway sets from the body's `model` (envoyproxy/ai-gateway); also stripped early. */
export const AI_GATEWAY_MODEL_HEADER = "x-ai-eg-model";

/** Dynamic metadata namespace where the AI Gateway writes token counts (ai-gateway internal/extproc). */
export const AI_GATEWAY_METADATA_NAMESPACE = "io.envoy.ai_gateway";

/** `llmRequestCosts` metadata keys the AIGatewayRoutes declare and the access log reads. */
export const TOKEN_METADATA_KEYS = {
    input: "llm_input_token",
    cachedInput: "llm_cached_input_token",
    output: "llm_output_token",
    total: "llm_total_token",
} as const;

/** The three limit tiers, in the order they are checked. */
export type Tier = "model" | "team" | "key";

/** Identifiers of the three tiers for one request. */
export interface TierIds {
    model: string;
    team: string;
    key: string;
}

/** Tier ids for a request: platform+model, team (`tenant/team`), API key. */
export function tierIds(x: { model: string; tenant: string; team: string; keyId: string }): TierIds {
    return { model: x.model, team: `${x.tenant}/${x.team}`, key: x.keyId };
}

/**
 * Redis key layout (all keys of one spoke share a `{tier:id}` hash tag so each tier's keys live in one slot):
 * - `rl:{<tier>:<id>}:rps`          requests-per-second limiter state
 * - `rl:{<tier>:<id>}:cc`           HASH of concurrency lease counters (the current layout): `n` leases held,
 *                                   `<expiry ms>` leases held per expiry bucket, `e` earliest bucket; in the key
 *                                   tier's, `h.<expiry>.<token>`: which leases of one admission are still held
 * - `rl:{<tier>:<id>}:conc`         ZSET of concurrency leases (the earlier layout, still read and released
 *                                   during a migration): member = lease id, score = expiry (ms since epoch)
 * - `rl:lease:<lease base>`         the same for `c.` leases (`mixed` store; one bit each; no hash tag)
 * - `rl:{<tier>:<id>}:tok:<start>`  tokens used in the window starting at <start> (seconds since epoch)
 */
export const redisKeys = {
    rps: (tier: Tier, id: string) => `rl:{${tier}:${id}}:rps`,
    counters: (tier: Tier, id: string) => `rl:{${tier}:${id}}:cc`,
    concurrency: (tier: Tier, id: string) => `rl:{${tier}:${id}}:conc`,
    lease: (base: string) => `rl:lease:${base}`,
    tokens: (tier: Tier, id: string, windowStart: number) => `rl:{${tier}:${id}}:tok:${windowStart}`,
};

/** Start (seconds since epoch) of the fixed token window containing `nowMs`. */
export function windowStart(nowMs: number, windowSeconds: number): number {
    const s = Math.floor(nowMs / 1000);
    return s - (s % windowSeconds);
}
