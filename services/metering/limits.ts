import type { Redis } from "ioredis";
import { Bundle, bundlePaths, CurrentPointerSchema, verifyBundle } from "../shared/bundle";
import { Tier, TierIds, tierIds } from "../shared/identity";
import { addTokens, releaseLease } from "../shared/limits";
import type { UsageEvent } from "../shared/usage";

/**
 * Token windows per tier. The auth service checks the counter of the window containing "now" for each tier's
 * `limits.windowSeconds` (services/shared/limits.ts), so metering must add tokens to windows of the same
 * length: it reads them from the same signed policy bundle.
 */
export interface WindowSource {
    windowSeconds(ids: TierIds): Record<Tier, number>;
}

/** `LimitSetSchema.windowSeconds` default (config/limits.ts), used for an id the bundle does not know. */
export const DEFAULT_WINDOW_SECONDS = 60;

/** Window lengths from one verified bundle's policy. */
export class PolicyWindows implements WindowSource {
    private readonly models = new Map<string, number>();
    private readonly teams = new Map<string, number>();
    private readonly keys = new Map<string, number>();

    constructor(readonly bundle: Pick<Bundle, "revision" | "policy">) {
        for (const m of bundle.policy.models) this.models.set(m.id, m.limits.windowSeconds);
        for (const t of bundle.policy.tenants) for (const x of t.teams) this.teams.set(`${t.id}/${x.id}`, x.limits.windowSeconds);
        for (const k of bundle.policy.apiKeys) this.keys.set(k.id, k.limits.windowSeconds);
    }

    windowSeconds(ids: TierIds): Record<Tier, number> {
        return {
            model: this.models.get(ids.model) ?? DEFAULT_WINDOW_SECONDS,
            team: this.teams.get(ids.team) ?? DEFAULT_WINDOW_SECONDS,
            key: this.keys.get(ids.key) ?? DEFAULT_WINDOW_SECONDS,
        };
    }
}

/** Before any bundle is loaded: the schema default for every tier. */
export const defaultWindows: WindowSource = {
    windowSeconds: () => ({ model: DEFAULT_WINDOW_SECONDS, team: DEFAULT_WINDOW_SECONDS, key: DEFAULT_WINDOW_SECONDS }),
};

/**
 * Keeps {@link PolicyWindows} current from the hub's policy bucket: reads `spokes/<spoke>/current.json`, then
 * the bundle it names, verifies the signature with the hub's public key (services/shared/bundle.ts), and
 * only moves forward in revision. Failures keep the last good windows.
 */
export class BundleWindows implements WindowSource {
    private current: WindowSource = defaultWindows;
    revision = 0;

    /**
     * @param getObject reads an object of the policy bucket as text (S3 GetObject in production)
     * @param publicKey hub's raw Ed25519 public key, base64
     */
    constructor(private readonly getObject: (key: string) => Promise<string>, private readonly spoke: string, private readonly publicKey: string) {}

    windowSeconds(ids: TierIds): Record<Tier, number> { return this.current.windowSeconds(ids); }

    /**
     * Loads the current revision if newer.
     * @returns true when a new revision was applied
     * @throws Error when the pointer or bundle cannot be read or does not verify (the old windows stay)
     */
    async refresh(): Promise<boolean> {
        const ptr = CurrentPointerSchema.parse(JSON.parse(await this.getObject(bundlePaths.current(this.spoke))));
        if (ptr.revision <= this.revision) return false;
        const bundle = verifyBundle(await this.getObject(ptr.key), this.publicKey, this.spoke);
        if (bundle.revision <= this.revision) return false;
        this.current = new PolicyWindows(bundle);
        this.revision = bundle.revision;
        return true;
    }
}

/** Applies a metered request to the spoke's limit state in Redis. */
export interface LimitsSink {
    /** @throws the Redis client's error */
    apply(event: UsageEvent, lease: string | undefined): Promise<void>;
}

/**
 * The real sink: releases the request's concurrency lease in all three tiers and adds input + output tokens
 * to each tier's token window containing the request's end (services/shared/limits.ts).
 */
export class RedisLimits implements LimitsSink {
    constructor(private readonly redis: Redis, private readonly windows: WindowSource) {}

    async apply(event: UsageEvent, lease: string | undefined): Promise<void> {
        const ids = tierIds(event);
        if (lease) await releaseLease(this.redis, ids, lease);
        const tokens = event.inputTokens + event.outputTokens;
        if (tokens > 0) await addTokens(this.redis, ids, tokens, Date.parse(event.endedAt), this.windows.windowSeconds(ids));
    }
}
