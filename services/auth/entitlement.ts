import { createHmac } from "node:crypto";
import type { KeyServing } from "./policy";

/**
 * The client's own `nvext.agent_hints`, as far as the entitlement cares (ai-dynamo/dynamo@v1.5.0:
 * lib/llm/src/protocols/common/extensions.rs `AgentHints`: `priority` i32, `strict_priority` u32, `osl` u32).
 * A field that is not an integer is treated as absent: the Dynamo frontend refuses such a body itself.
 */
export interface ClientHints {
    priority?: number;
    strictPriority?: number;
    osl?: number;
}

/** What the decision sends on: the effective priority and tier (header values), or a refusal message. */
export type Entitled = { priority: number; strictPriority: number } | { refused: string };

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);

/** Reads `nvext.agent_hints` from a parsed request body; `{}` when there is none. */
export function clientHints(doc: unknown): ClientHints {
    const nvext = (doc as { nvext?: unknown }).nvext;
    if (nvext === null || typeof nvext !== "object") return {};
    const h = (nvext as { agent_hints?: unknown }).agent_hints;
    if (h === null || typeof h !== "object") return {};
    const { priority, strict_priority, osl } = h as Record<string, unknown>;
    return {
        priority: isInt(priority) ? priority : undefined,
        strictPriority: isInt(strict_priority) ? strict_priority : undefined,
        osl: isInt(osl) ? osl : undefined,
    };
}

/**
 * Clamps the client's hints to the key's entitlement, never raising them: priority and tier are
 * `min(client, ceiling)` (the ceiling when the client sent none; a tier never below 0, Dynamo's u32). An
 * expected-output-length hint above the ceiling is refused: the pinned gateway cannot rewrite the body and the
 * Dynamo frontend reads `osl` from the body only (docs/serving-policy.md).
 */
export function entitle(hints: ClientHints, serving: KeyServing): Entitled {
    if (hints.osl !== undefined && hints.osl > serving.maxOutputLengthHint)
        return {
            refused: `nvext.agent_hints.osl ${hints.osl} is above this API key's output-length-hint ceiling of ${serving.maxOutputLengthHint} tokens.`,
        };
    return {
        priority: hints.priority === undefined ? serving.priority : Math.min(hints.priority, serving.priority),
        strictPriority:
            hints.strictPriority === undefined
                ? serving.strictPriority
                : Math.max(0, Math.min(hints.strictPriority, serving.strictPriority)),
    };
}

/**
 * The cache salt of a cache scope (`tenant:<t>`, `team:<t>/<team>`, `shared:<group>`): HMAC-SHA256 under the
 * service's secret key, base64url, 32 characters (192 bits). Deterministic per key and scope, so every replica
 * of the auth service salts a tenant alike, and not computable without the key.
 */
export function cacheSalt(key: Buffer, scope: string): string {
    return createHmac("sha256", key).update(scope).digest("base64url").slice(0, 32);
}
