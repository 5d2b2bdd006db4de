import { hash } from "node:crypto";
import type { Bundle } from "../shared/bundle";
import type { TierLimit, TierLimits } from "../shared/limits";

/** An API key as the auth service resolves it: who it belongs to and what it may do. */
export interface ResolvedKey {
    keyId: string;
    tenant: string;
    team: string;
    /** Expiry, ms since the Unix epoch. */
    expiresAtMs: number;
    /** Models the key may call that this spoke also has platform limits for. */
    models: ReadonlySet<string>;
    /** The three tiers' limits per model of `models`: one object per (key, model) and revision. */
    limitsByModel: ReadonlyMap<string, TierLimits>;
    keyLimits: TierLimit;
    teamLimits: TierLimit;
    /** Serving entitlement (services/shared/bundle.ts `apiKeys[].serving`), defaulted for a key without one. */
    serving: KeyServing;
}

/** What the auth decision enforces for one key: hint ceilings and the cache scope per model. */
export interface KeyServing {
    priority: number;
    strictPriority: number;
    maxOutputLengthHint: number;
    cacheScopes: Readonly<Record<string, string>>;
}

/** Why a request is refused before any limit is checked. */
export interface Refusal {
    status: 401 | 403;
    code: "invalid_api_key" | "expired_api_key" | "model_not_allowed";
    message: string;
}

/**
 * Hex SHA-256 of an API key (UTF-8), the form the bundle stores (`apiKeys[].sha256`). One-shot `crypto.hash`
 * (Node ≥ 20.12), which skips the Hash object of `createHash` on every check. Not cached: a cache keyed by
 * the raw key would keep every bearer secret seen in the heap, and an attacker's random keys would churn it;
 * the hash costs about a microsecond of the check.
 */
export function hashApiKey(apiKey: string): string {
    return hash("sha256", apiKey, "hex");
}

/**
 * Extracts the API key from an `Authorization: Bearer <key>` header (scheme case-insensitive, RFC 6750 §2.1).
 * @returns the key, or undefined when the header is missing or not a bearer credential.
 */
export function bearerToken(header: string | undefined): string | undefined {
    const m = header === undefined ? null : /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
    return m ? m[1] : undefined;
}

/**
 * A verified bundle's policy, indexed for per-request lookups (key hash → key, team, limits).
 *
 * Built once per accepted bundle revision. A structurally inconsistent policy (duplicate key hash or id, a key
 * whose tenant/team is missing, an unparsable expiry) throws, so the bundle is rejected like a tampered one
 * and the last-known-good revision keeps serving.
 */
export class PolicyIndex {
    readonly revision: number;
    readonly contentHash: string;
    private readonly byHash = new Map<string, ResolvedKey>();
    private readonly modelLimits = new Map<string, TierLimit>();

    /** @throws Error naming the first inconsistency found in `bundle.policy`. */
    constructor(bundle: Bundle) {
        this.revision = bundle.revision;
        this.contentHash = bundle.contentHash;
        const { policy } = bundle;
        for (const m of policy.models) {
            if (this.modelLimits.has(m.id)) throw new Error(`policy revision ${bundle.revision}: model "${m.id}" listed twice`);
            this.modelLimits.set(m.id, m.limits);
        }
        const teams = new Map<string, TierLimit>();
        for (const t of policy.tenants) for (const team of t.teams) teams.set(`${t.id}/${team.id}`, team.limits);
        const ids = new Set<string>();
        for (const k of policy.apiKeys) {
            if (ids.has(k.id)) throw new Error(`policy revision ${bundle.revision}: API key id "${k.id}" listed twice`);
            ids.add(k.id);
            if (this.byHash.has(k.sha256))
                throw new Error(`policy revision ${bundle.revision}: API key "${k.id}" has the same hash as another key`);
            const teamLimits = teams.get(`${k.tenant}/${k.team}`);
            if (!teamLimits)
                throw new Error(`policy revision ${bundle.revision}: API key "${k.id}" names unknown team "${k.tenant}/${k.team}"`);
            const expiresAtMs = Date.parse(k.expiresAt);
            if (Number.isNaN(expiresAtMs))
                throw new Error(`policy revision ${bundle.revision}: API key "${k.id}" has unparsable expiresAt`);
            const models = new Set(k.models.filter((m) => this.modelLimits.has(m)));
            this.byHash.set(k.sha256, {
                keyId: k.id,
                tenant: k.tenant,
                team: k.team,
                expiresAtMs,
                models,
                limitsByModel: new Map([...models].map((m) => [m, { model: this.modelLimits.get(m)!, team: teamLimits, key: k.limits }])),
                keyLimits: k.limits,
                teamLimits,
                serving: k.serving ?? { priority: 0, strictPriority: 0, maxOutputLengthHint: 0, cacheScopes: {} },
            });
        }
    }

    /**
     * Resolves the bearer token to a live API key.
     * @param apiKey the bearer token, or undefined when the request had none.
     * @param nowMs ms since the Unix epoch, compared with the key's `expiresAt`.
     */
    authenticate(apiKey: string | undefined, nowMs: number): ResolvedKey | Refusal {
        const key = apiKey === undefined ? undefined : this.byHash.get(hashApiKey(apiKey));
        if (!key)
            return {
                status: 401,
                code: "invalid_api_key",
                message: "Invalid or missing API key. Send it as 'Authorization: Bearer <key>'.",
            };
        if (nowMs >= key.expiresAtMs) return { status: 401, code: "expired_api_key", message: "The API key has expired." };
        return key;
    }

    /**
     * Model access for an authenticated key: allowed only if the key lists the model and this spoke's bundle has
     * platform limits for it.
     * @returns the three tiers' limits (the same object for every check of this key and model in this revision:
     *   callers may key caches on it), or a 403 refusal.
     */
    authorizeModel(key: ResolvedKey, model: string): TierLimits | Refusal {
        const limits = key.limitsByModel.get(model);
        if (!limits) return { status: 403, code: "model_not_allowed", message: `The API key is not allowed to use model '${model}' here.` };
        return limits;
    }
}

/** Type guard for the refusal branch of {@link PolicyIndex.authenticate} / {@link PolicyIndex.authorizeModel}. */
export function isRefusal(x: object): x is Refusal {
    return "status" in x && "code" in x;
}
