import { createHash } from "node:crypto";
import * as fsp from "node:fs/promises";
import type { Redis, RedisOptions } from "ioredis";
import * as path from "node:path";
import { type Bundle, bundlePaths, CurrentPointerSchema, verifyBundle } from "../shared/bundle";
import { type Tier, type TierIds, tierIds, windowStart } from "../shared/identity";
import { releaseLease, runScript, TIERS, tokenKeys } from "../shared/limits";
import type { UsageEvent } from "../shared/usage";
import { backoffMs } from "./shipper";
import type { Spool, SpoolPosition } from "./spool";

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
    constructor(
        private readonly getObject: (key: string) => Promise<string>,
        private readonly spoke: string,
        private readonly publicKey: string,
    ) {}

    windowSeconds(ids: TierIds): Record<Tier, number> {
        return this.current.windowSeconds(ids);
    }

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
    /** Releases the request's concurrency lease in all three tiers (idempotent). @throws the Redis client's error */
    releaseLease(event: UsageEvent, lease: string): Promise<void>;
    /**
     * Adds the request's input + output tokens to each tier's window, at most once per `(spoke, requestId)`.
     * @returns false when this request's tokens were already added (a redelivery)
     * @throws the Redis client's error (nothing was added then)
     */
    addTokensOnce(event: UsageEvent): Promise<boolean>;
}

/**
 * Redis key marking that a request's tokens were added: keyed like the ledger, `(spoke, requestId)`
 * (request ids over 200 characters by their SHA-256). Same hash tag as nothing else: a standalone Redis.
 */
export function appliedKey(spoke: string, requestId: string): string {
    const id = requestId.length <= 200 ? requestId : `sha256:${createHash("sha256").update(requestId).digest("hex")}`;
    return `usage:applied:${spoke}:${id}`;
}

/**
 * Adds tokens once. KEYS[1] the {@link appliedKey}, KEYS[2..] the token-window counters (services/shared/limits.ts
 * `tokenKeys`). ARGV[1] tokens, ARGV[2..] each counter's expiry (unix seconds), last ARGV the marker's expiry (the
 * latest counter expiry: the marker lives exactly as long as a counter it protects; a redelivery after that finds
 * every counter of its windows expired, and EXPIREAT in the past deletes what INCRBY would create).
 * SET NX and the INCRBYs run in one script, atomically: a crash leaves either both or neither.
 * Returns 1 when added, 0 when the request was already counted.
 */
export const ADD_TOKENS_ONCE_LUA = `
if not redis.call('SET', KEYS[1], '1', 'NX') then return 0 end
redis.call('EXPIREAT', KEYS[1], ARGV[#ARGV])
for i = 2, #KEYS do
  redis.call('INCRBY', KEYS[i], ARGV[1])
  redis.call('EXPIREAT', KEYS[i], ARGV[i])
end
return 1
`;

/**
 * The real sink: releases the request's concurrency lease in all three tiers and adds input + output tokens
 * to each tier's token window containing the request's end (services/shared/limits.ts key layout), once.
 */
export class RedisLimits implements LimitsSink {
    constructor(
        private readonly redis: Redis,
        private readonly windows: WindowSource,
    ) {}

    async releaseLease(event: UsageEvent, lease: string): Promise<void> {
        await releaseLease(this.redis, tierIds(event), lease);
    }

    async addTokensOnce(event: UsageEvent): Promise<boolean> {
        const tokens = event.inputTokens + event.outputTokens;
        if (tokens <= 0) return true;
        const ids = tierIds(event);
        const end = Date.parse(event.endedAt);
        const ws = this.windows.windowSeconds(ids);
        const expireAt = TIERS.map((t) => windowStart(end, ws[t]) + 2 * ws[t]);
        const r = await runScript(
            this.redis,
            ADD_TOKENS_ONCE_LUA,
            [appliedKey(event.spoke, event.requestId), ...tokenKeys(ids, end, ws)],
            [tokens, ...expireAt, Math.max(...expireAt)],
        );
        return Number(r) === 1;
    }

    /** Lease release (when given) and token addition of one request. */
    async apply(event: UsageEvent, lease: string | undefined): Promise<void> {
        if (lease) await this.releaseLease(event, lease);
        await this.addTokensOnce(event);
    }
}

export interface LimitsApplierOptions {
    /** Events per Redis round of scripts. Default 200. */
    batchEvents?: number;
    /** Poll interval when caught up, ms. Default 200. */
    idleMs?: number;
    /** Retry delay cap while Redis fails, ms. Default 5 s. */
    maxBackoffMs?: number;
    /** Test fault injection: called after a batch's tokens were added, before the cursor is written. */
    afterTokens?: () => void;
    log?: (msg: string, fields?: Record<string, unknown>) => void;
}

interface ApplierCursor extends SpoolPosition {
    appliedThroughSeq: number;
}

/**
 * Token accounting from the spool, exactly once across redelivery, restart and `kill -9`: reads every durable
 * event after its own cursor (`<spool dir>/limits-cursor.json`), adds its tokens with {@link ADD_TOKENS_ONCE_LUA}
 * (de-duplicated in Redis by `(spoke, requestId)`, so a request re-spooled after a restart, or a batch re-read
 * after a crash before the cursor write, adds nothing), then moves the cursor. Redis down: it waits and retries
 * (the spool keeps those segments, up to `maxRetainBytes`), so an outage costs lag, not counts.
 * The cursor is written atomically without fsync: after a power loss re-reading is harmless.
 */
export class LimitsApplier {
    applied = 0;
    duplicates = 0;
    failures = 0;
    /** Events skipped because their segment was deleted while Redis was down beyond the retention bound. */
    skipped = 0;
    private cursor!: ApplierCursor;
    private stopped = true;
    private loopDone: Promise<void> = Promise.resolve();
    private wake: (() => void) | undefined;
    private readonly file: string;

    constructor(
        private readonly spool: Spool,
        private readonly sink: LimitsSink,
        dir: string,
        private readonly o: LimitsApplierOptions = {},
    ) {
        this.file = path.join(dir, "limits-cursor.json");
        spool.on("append", () => this.wake?.());
    }

    /** Highest seq whose tokens were added (-1: none). */
    get appliedThroughSeq(): number {
        return this.cursor?.appliedThroughSeq ?? -1;
    }

    /** Loads the cursor (a spool without one starts at the ship cursor) and starts the loop. */
    async start(): Promise<void> {
        if (!this.stopped) return;
        try {
            this.cursor = JSON.parse(await fsp.readFile(this.file, "utf8")) as ApplierCursor;
        } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
            this.cursor = { ...this.spool.shipPosition, appliedThroughSeq: this.spool.shippedThroughSeq };
        }
        this.spool.retainFrom(() => this.cursor.segment);
        this.stopped = false;
        this.loopDone = this.loop();
    }

    async stop(): Promise<void> {
        this.stopped = true;
        this.wake?.();
        await this.loopDone;
    }

    /** Resolves when every event appended so far has had its tokens added (tests). */
    async caughtUp(timeoutMs = 30_000): Promise<void> {
        const deadline = Date.now() + timeoutMs;
        while (this.appliedThroughSeq < this.spool.nextSequence - 1) {
            if (Date.now() > deadline)
                throw new Error(`limits applier: applied through ${this.appliedThroughSeq}, next seq ${this.spool.nextSequence}`);
            await new Promise((r) => setTimeout(r, 10));
        }
    }

    private sleep(ms: number): Promise<void> {
        return new Promise((resolve) => {
            const t = setTimeout(() => {
                this.wake = undefined;
                resolve();
            }, ms);
            this.wake = () => {
                clearTimeout(t);
                this.wake = undefined;
                resolve();
            };
        });
    }

    private async loop(): Promise<void> {
        let attempt = 0;
        while (!this.stopped) {
            try {
                const b = await this.spool.readFrom(this.cursor, this.o.batchEvents ?? 200, 1 << 20);
                if (!b) {
                    await this.sleep(this.o.idleMs ?? 200);
                    continue;
                }
                if (b.skippedToSeq !== undefined && b.skippedToSeq > this.cursor.appliedThroughSeq + 1) {
                    const n = b.skippedToSeq - this.cursor.appliedThroughSeq - 1;
                    this.skipped += n;
                    this.o.log?.(
                        "token accounting skipped events whose spool segment was deleted (Redis down beyond the retention bound)",
                        { level: "error", alert: "MeteringTokensSkipped", events: n },
                    );
                }
                const done = await Promise.all(b.events.map((e) => this.sink.addTokensOnce(e)));
                for (const d of done) {
                    if (d) this.applied++;
                    else this.duplicates++;
                }
                this.o.afterTokens?.();
                this.cursor = { ...b.end, appliedThroughSeq: Math.max(this.cursor.appliedThroughSeq, b.events[b.events.length - 1].seq) };
                await fsp.writeFile(`${this.file}.tmp`, JSON.stringify(this.cursor));
                await fsp.rename(`${this.file}.tmp`, this.file);
                attempt = 0;
            } catch (e) {
                this.failures++;
                if (this.failures === 1 || this.failures % 100 === 0)
                    this.o.log?.("token accounting failed; retrying", { error: (e as Error).message, failures: this.failures });
                await this.sleep(backoffMs(attempt++, 50, this.o.maxBackoffMs ?? 5000));
            }
        }
    }
}

/**
 * ioredis options for metering's connection to the auth service's Redis, bounded (ioredis 6.0.0
 * `built/redis/RedisOptions.d.ts`): `commandTimeout` fails a command; `socketTimeout` destroys a socket that
 * received nothing for that long while a command waits (a silent connection is dropped and replaced by the
 * reconnect strategy, instead of timing out every command until the kernel gives up on it); `connectTimeout`
 * bounds the TCP connect; `keepAlive` is the first TCP keepalive probe delay; no offline queue, one retry.
 */
export function meteringRedisOptions(commandTimeoutMs: number): RedisOptions {
    return {
        commandTimeout: commandTimeoutMs,
        socketTimeout: Math.max(2 * commandTimeoutMs, 1000),
        connectTimeout: Math.max(2 * commandTimeoutMs, 2000),
        keepAlive: 10_000,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        lazyConnect: false,
        retryStrategy: (n: number) => Math.min(50 * 2 ** Math.min(n, 5), 1000),
    };
}
