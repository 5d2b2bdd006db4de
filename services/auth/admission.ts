import type { Redis } from "ioredis";
import { performance } from "node:perf_hooks";
import type { TierIds } from "../shared/identity";
import {
    AdmissionBatcher,
    admissionKeys,
    checkAndAcquire,
    grantLeaseIds,
    type LeaseStore,
    type LimitDecision,
    MAX_GRANT,
    newLeaseToken,
    parseCounterLease,
    returnGrant,
    returnSlots,
    TIERS,
    type TierLimits,
} from "../shared/limits";

/**
 * Admission with grants: the limits stay in Redis, but a busy (API key, model) pair is admitted from slots
 * taken ahead of time, so its checks need no Redis round trip.
 *
 * Why: the check runs on every request, and one Redis script call per request costs more than the rest of
 * the check together (measured: ~40 µs of Redis CPU and ~30 µs of client CPU per check, against ~45 µs for
 * parsing, hashing and answering). With grants, a pair that sends many requests costs one script call per
 * grant, not per request.
 *
 * How:
 * - A check whose pair holds no grant is an ordinary atomic Redis check (`checkAndAcquire`, batched per
 *   event-loop iteration). It also asks for a grant: as many more slots as the pair used in the last
 *   `holdMs`, but only when that is at least {@link MIN_DEMAND}. The Redis script takes them in the same
 *   commit: an rps slot and a concurrency lease in all three tiers each, exactly as that many requests
 *   arriving then would. It never takes more than a quarter of what any tier has left (`GRANT_SHARE`).
 * - A later check of the pair takes one slot from its grant in this process: no Redis call. The grant is
 *   refilled in the background when less than half of a hold period's demand is left, not counting slots of lots
 *   within a quarter of a hold period of their expiry (so a steady pair does not wait for a Redis round trip at
 *   each expiry).
 * - Unused slots are given back after `holdMs`: their leases leave the lease counters and the rps arrival times move
 *   back. A grant never crosses a token window's end (the token check was made for that window).
 *
 * What this changes, and bounds, compared with one Redis check per request:
 * - Concurrency: never more than the limit. A lease is in Redis from the moment it is granted, so unused
 *   granted leases count as in use: other replicas may see up to a quarter of the free slots held for at most
 *   `holdMs` (under-admission, never over).
 * - Requests per second: a slot is accounted when granted and used up to `holdMs` later, so over any interval
 *   of t seconds a tier admits at most `burst + rps × (t + holdMs / 1000)`, against `burst + rps × t` exactly:
 *   at most `rps × holdMs / 1000` more (1 request per second of limit per 20 ms of hold).
 * - Tokens per window: the counter is read when the grant is taken, so a tier over its token budget may still
 *   admit for up to `holdMs` (token counters already lag by the usage pipeline).
 * - Near a limit a grant shrinks to the request's own slot (the quarter rule), so the pair is checked in Redis
 *   per request, exactly as before. A pair with little traffic never gets a grant.
 * - Exact at the limit: a slot this replica holds for the pair is never left unused while a request of the
 *   pair is refused. A Redis check refused for rps or concurrency takes a slot of the pair's grant instead, also
 *   one from a grant call that was in flight alongside it (a background refill can take the last free slot just
 *   before the check; without this, 50 simultaneous requests against a limit of 5 could admit 4). Across
 *   replicas, slots held by another replica's grant still count as in use for up to `holdMs` (see above).
 * - Fail closed: with the Redis connection not ready, no check is admitted from a grant; a grant also expires
 *   after `holdMs` if Redis went silent unnoticed. A killed replica leaks its unused leases until their TTL,
 *   at most one grant per busy pair (the quarter rule bounds it).
 * - Lease TTL: a granted lease is scored `now + leaseTtlMs` when granted, so a request admitted from a grant
 *   keeps its lease for at least `leaseTtlMs - holdMs`.
 */

/**
 * `admissionKeys(ids)` per tier ids object: the server keeps one `TierIds` per (key, model) and revision, so a
 * quiet pair, forgotten between its checks, gets its key strings (and their token-window keys) back without
 * building them again.
 */
const fixedKeys = new WeakMap<TierIds, readonly string[]>();
function keysOfIds(ids: TierIds): readonly string[] {
    let k = fixedKeys.get(ids);
    if (!k) {
        k = admissionKeys(ids);
        fixedKeys.set(ids, k);
    }
    return k;
}

/** Grants are asked for only by pairs with at least this many checks in the last hold period. */
export const MIN_DEMAND = 2;

/** Options of {@link GrantAdmission}. */
export interface GrantOptions {
    /**
     * Longest a granted slot waits in this process before it is given back, ms; 0 turns grants off (every
     * check is one Redis check, as before).
     */
    holdMs: number;
    /** Most slots one grant takes (≤ `MAX_GRANT` of services/shared/limits.ts). */
    maxGrant: number;
    /** Concurrency lease TTL, ms (`AUTH_LEASE_TTL_SECONDS`). */
    leaseTtlMs: number;
    /** Wall clock for the limit arithmetic in Redis, ms since the Unix epoch (injected by tests). */
    now: () => number;
    /** Send the Redis checks of one event-loop iteration as one script call (`AUTH_REDIS_BATCH_CHECKS`). */
    batch: boolean;
    /**
     * With `batch`: under load, how long the next script call may wait for more checks, ms (`AUTH_REDIS_BATCH_HOLD_MS`;
     * services/shared/limits.ts AdmissionBatcher `holdMs`). Default 0 (never).
     */
    batchHoldMs?: number;
    /** Where leases are written (`AUTH_LEASE_STORE`; services/shared/limits.ts `LeaseStore`). Default `counters`. */
    store?: LeaseStore;
    /** Called with what happened, for metrics and logs. */
    events?: GrantEvents;
}

/** Hooks for metrics. */
export interface GrantEvents {
    /** A check was decided: from a grant (`grant`) or by a Redis check (`redis`). */
    admitted?(path: "grant" | "redis"): void;
    /** `slots` granted slots were added to a grant (beyond the request's own, for a check). */
    granted?(slots: number): void;
    /** `slots` unused slots were given back (`returned`) or could not be (`lost`: they expire by their TTL). */
    returned?(slots: number, result: "returned" | "lost", err?: unknown): void;
    /**
     * Latency of a Redis admission call, seconds: one script call, which carries every check batched with it
     * (`batch`), so one observation per call, not per check.
     */
    redisCall?(seconds: number, ok: boolean): void;
}

/**
 * Slots taken in one Redis call: slots `next` … `end - 1` of the admission whose lease id is `base` (slot 0 is
 * `base` itself, slot i is `<base>.<i>`: services/shared/limits.ts `grantLeaseIds`).
 */
interface Lot {
    base: string;
    /** Expiry bucket of counter leases (ms), or 0 for ZSET leases. */
    bucketMs: number;
    /** Next unused slot. */
    next: number;
    /** One past the last slot. */
    end: number;
    /** When the unused rest is given back: `performance.now()` ms. */
    expiresAt: number;
}

/** Per (key, model) pair. */
interface Pair {
    key: string;
    ids: TierIds;
    /** `admissionKeys(ids)`, built once per pair. */
    fixed: readonly string[];
    /** The limits the lots were taken under (a new policy revision drops the lots). */
    limits: TierLimits;
    revision: number;
    lots: Lot[];
    /** Unused slots over all lots. */
    available: number;
    /** Checks in the current demand period and in the one before (periods are `holdMs` long). */
    demand: number;
    lastDemand: number;
    periodStart: number;
    /** The grant call in flight for this pair (a check's or a refill's); checks that find no slot wait for it. */
    pending?: Promise<void>;
    /** The newest give-back of this pair's unused slots in flight; a refused check waits for it and asks again. */
    returning?: Promise<void>;
    /** No background refill before this time (`performance.now()` ms): the last one was denied. */
    quietUntil: number;
}

/**
 * Three-tier admission for the auth service: {@link checkAndAcquire} per request, or from grants for busy
 * (key, model) pairs (see the module comment for the exact bounds). One instance per Redis connection.
 */
export class GrantAdmission {
    private readonly pairs = new Map<string, Pair>();
    private readonly batcher?: AdmissionBatcher;
    private readonly sweeper?: NodeJS.Timeout;
    private closed = false;
    /** Background Redis calls in flight (refills, returns), awaited by {@link close}. */
    private readonly inFlight = new Set<Promise<unknown>>();

    /** @throws RangeError for a `maxGrant` outside 1..MAX_GRANT or a negative `holdMs`. */
    constructor(
        private readonly redis: Redis,
        private readonly o: GrantOptions,
    ) {
        if (!(o.holdMs >= 0)) throw new RangeError(`holdMs must be >= 0, got ${o.holdMs}`);
        if (!Number.isInteger(o.maxGrant) || o.maxGrant < 1 || o.maxGrant > MAX_GRANT)
            throw new RangeError(`maxGrant must be an integer in 1..${MAX_GRANT}, got ${o.maxGrant}`);
        const events = o.events;
        if (o.batch)
            this.batcher = new AdmissionBatcher(
                redis,
                undefined,
                undefined,
                events?.redisCall && ((s, ok) => events.redisCall?.(s, ok)),
                o.batchHoldMs ?? 0,
            );
        if (o.holdMs > 0) {
            this.sweeper = setInterval(() => this.sweep(), o.holdMs);
            this.sweeper.unref();
        }
    }

    /**
     * Decides one request. Synchronous (a plain value) when it is admitted from a grant, a promise when Redis
     * decides.
     * @param pairKey identifies the (tenant, team, key, model) of `ids` (any unique string for them).
     * @param revision the policy revision `limits` come from.
     * @throws (the promise rejects with) the Redis client's error when Redis is unreachable or times out.
     */
    admit(pairKey: string, ids: TierIds, limits: TierLimits, revision: number): LimitDecision | Promise<LimitDecision> {
        if (this.o.holdMs <= 0) {
            return this.redisCheck(ids, limits, 1, keysOfIds(ids)).then((d) => {
                this.o.events?.admitted?.("redis");
                return d;
            });
        }
        const t = performance.now();
        let p = this.pairs.get(pairKey);
        if (!p) {
            p = {
                key: pairKey,
                ids,
                fixed: keysOfIds(ids),
                limits,
                revision,
                lots: [],
                available: 0,
                demand: 0,
                lastDemand: 0,
                periodStart: t,
                quietUntil: 0,
            };
            this.pairs.set(pairKey, p);
        } else if (p.revision !== revision) {
            this.giveBack(p, true);
            p.limits = limits;
            p.revision = revision;
        }
        if (t - p.periodStart >= this.o.holdMs) {
            p.lastDemand = t - p.periodStart >= 2 * this.o.holdMs ? 0 : p.demand;
            p.demand = 0;
            p.periodStart = t;
        }
        p.demand++;
        const local = this.fromGrant(p, t);
        if (local) return local;
        // A grant is on its way: wait for it rather than sending a check of our own (one Redis call for the
        // burst instead of one each); a check it does not cover goes to Redis after all.
        const pair = p;
        if (p.pending) return p.pending.then(() => this.fromGrant(pair, performance.now()) ?? this.claim(pair, limits, revision));
        return this.claim(p, limits, revision);
    }

    /** A slot of the pair's grant, if it has one and Redis is connected (fail closed otherwise). */
    private fromGrant(p: Pair, t: number): LimitDecision | undefined {
        if (p.available <= 0 || this.redis.status !== "ready") return undefined;
        const lease = this.take(p, t);
        if (lease === undefined) return undefined;
        this.maybeRefill(p, t);
        this.o.events?.admitted?.("grant");
        return { allowed: true, leaseId: lease, granted: 1 };
    }

    /**
     * The Redis check of one request; asks for a grant too when the pair is busy and no grant call is in
     * flight (a second one would only take slots the first already covers).
     */
    private claim(p: Pair, limits: TierLimits, revision: number): Promise<LimitDecision> {
        const want = p.pending ? 1 : 1 + this.wanted(p);
        let own: Promise<void> | undefined;
        const call = this.redisCheck(p.ids, limits, want, p.fixed).then((d): LimitDecision | Promise<LimitDecision> => {
            this.o.events?.admitted?.("redis");
            if (d.allowed) {
                if (d.granted > 1) this.addLot(p, d.leaseId, 1, d.granted, revision, limits);
                return d.granted === 1 ? d : { allowed: true, leaseId: d.leaseId, granted: 1 };
            }
            if (d.dimension === "tokens") return d;
            // Refused for rps or concurrency: a slot this replica holds for the pair is this request's (exact at
            // the limit), also one a grant call in flight alongside this check brings.
            const local = this.fromGrant(p, performance.now());
            if (local) return local;
            const pending = p.pending;
            if (pending && pending !== own)
                return pending.then(() => this.fromGrant(p, performance.now()) ?? this.afterReturn(p, limits, d));
            return this.afterReturn(p, limits, d);
        });
        if (want > 1) own = this.setPending(p, call);
        return call;
    }

    /**
     * A refusal for rps or concurrency while this replica gives back slots of the same pair (an expired lot, taken
     * back on the way by {@link take} or the sweeper): those slots still counted in Redis when it decided. Waits for
     * the give-back and asks Redis once more for this one request, so N requests against a limit of N admit N even
     * when the event loop runs late. Without a give-back in flight, the refusal stands.
     */
    private afterReturn(p: Pair, limits: TierLimits, refused: LimitDecision): LimitDecision | Promise<LimitDecision> {
        this.giveBack(p, performance.now());
        const returning = p.returning;
        if (!returning) return refused;
        return returning.then(() =>
            this.redisCheck(p.ids, limits, 1, p.fixed).then((d) => {
                this.o.events?.admitted?.("redis");
                return d.allowed ? { allowed: true, leaseId: d.leaseId, granted: 1 } : d;
            }),
        );
    }

    /** Marks `call` as the pair's grant call in flight until it settles. */
    private setPending(p: Pair, call: Promise<unknown>): Promise<void> {
        const pending: Promise<void> = call
            .then(
                () => undefined,
                () => undefined,
            )
            .finally(() => {
                if (p.pending === pending) p.pending = undefined;
            });
        p.pending = pending;
        this.track(pending);
        return pending;
    }

    /** Unused slots held now, over all pairs (tests, metrics). */
    heldSlots(): number {
        let n = 0;
        for (const p of this.pairs.values()) n += p.available;
        return n;
    }

    /** Stops the sweeper and gives every unused slot back (best effort, bounded by the Redis command timeout). */
    async close(): Promise<void> {
        this.closed = true;
        if (this.sweeper) clearInterval(this.sweeper);
        for (const p of this.pairs.values()) this.giveBack(p, true);
        this.pairs.clear();
        await Promise.allSettled([...this.inFlight]);
    }

    private redisCheck(ids: TierIds, limits: TierLimits, want: number, fixed: readonly string[]): Promise<LimitDecision> {
        const now = this.o.now();
        const store = this.o.store ?? "counters";
        // batched: the batcher reports each script call's latency once (events.redisCall), whatever it carries
        if (this.batcher) return this.batcher.check(ids, limits, newLeaseToken(), now, this.o.leaseTtlMs, want, store, fixed);
        const started = performance.now();
        const call = checkAndAcquire(this.redis, ids, limits, newLeaseToken(), now, this.o.leaseTtlMs, want, store);
        const events = this.o.events;
        if (!events?.redisCall) return call;
        return call.then(
            (d) => {
                events.redisCall!((performance.now() - started) / 1000, true);
                return d;
            },
            (err: unknown) => {
                events.redisCall!((performance.now() - started) / 1000, false);
                throw err;
            },
        );
    }

    /** How many slots beyond the request's own to ask for: the last hold period's demand, if busy enough. */
    private wanted(p: Pair): number {
        const d = Math.max(p.lastDemand, p.demand);
        return d >= MIN_DEMAND ? Math.min(this.o.maxGrant - 1, d) : 0;
    }

    /** One unused lease of the oldest live lot; gives back expired lots on the way. */
    private take(p: Pair, t: number): string | undefined {
        while (p.lots.length) {
            const lot = p.lots[0];
            if (lot.expiresAt > t && lot.next < lot.end) {
                p.available--;
                const slot = lot.next++;
                return slot === 0 ? lot.base : `${lot.base}.${slot}`;
            }
            p.lots.shift();
            this.returnLot(p, lot);
        }
        return undefined;
    }

    /** Adds slots `from` … `end - 1` of admission `base` to the pair's grant. */
    private addLot(p: Pair, base: string, from: number, end: number, revision: number, limits: TierLimits): void {
        if (end <= from) return;
        const lot: Lot = { base, bucketMs: parseCounterLease(base)?.bucketMs ?? 0, next: from, end, expiresAt: 0 };
        // A lot taken under an older revision, for a pair the sweeper forgot meanwhile, or after close(), goes
        // straight back.
        if (this.closed || revision !== p.revision || this.pairs.get(p.key) !== p) {
            this.returnSlots(p.ids, limits, lot);
            return;
        }
        const now = this.o.now();
        // Never across the end of a token window: the token check was made for the window of `now`.
        let hold = this.o.holdMs;
        for (const tier of TIERS) {
            const w = limits[tier].windowSeconds * 1000;
            hold = Math.min(hold, w - (now % w));
        }
        lot.expiresAt = performance.now() + hold;
        p.lots.push(lot);
        p.available += end - from;
        this.o.events?.granted?.(end - from);
    }

    /**
     * Refill in the background when less than half of a hold period's demand is left, not counting the slots of
     * lots that expire within a quarter of a hold period: a lot running out of time is replaced before it expires,
     * so the first check after its expiry does not wait for a Redis round trip.
     */
    private maybeRefill(p: Pair, t: number): void {
        if (p.pending || t < p.quietUntil || this.closed) return;
        const want = this.wanted(p);
        if (want === 0) return;
        if (p.available * 2 >= want) {
            const soon = t + this.o.holdMs / 4;
            let usable = 0;
            for (const lot of p.lots) if (lot.expiresAt > soon) usable += lot.end - lot.next;
            if (usable * 2 >= want) return;
        }
        const revision = p.revision;
        const limits = p.limits;
        this.setPending(
            p,
            this.redisCheck(p.ids, limits, want, p.fixed).then(
                (d) => {
                    if (d.allowed) this.addLot(p, d.leaseId, 0, d.granted, revision, limits);
                    else p.quietUntil = performance.now() + this.o.holdMs;
                },
                () => {
                    p.quietUntil = performance.now() + this.o.holdMs;
                },
            ),
        );
    }

    /** Gives back the lots of `p` that expired by `t` (`performance.now()` ms), or all of them (`true`). */
    private giveBack(p: Pair, t: number | true): void {
        // the sweeper visits every pair each hold period: a pair without lots (a quiet key's) allocates nothing
        if (p.lots.length === 0) return;
        const keep: Lot[] = [];
        for (const lot of p.lots) {
            if (t === true || lot.expiresAt <= t || lot.next >= lot.end) this.returnLot(p, lot);
            else keep.push(lot);
        }
        p.lots = keep;
    }

    private returnLot(p: Pair, lot: Lot): void {
        p.available -= lot.end - lot.next;
        const call = this.returnSlots(p.ids, p.limits, lot);
        if (!call) return;
        const returning: Promise<void> = call.finally(() => {
            if (p.returning === returning) p.returning = undefined;
        });
        p.returning = returning;
    }

    /** Gives the unused slots of `lot` back in Redis (and marks them used here); settles when Redis answered. */
    private returnSlots(ids: TierIds, limits: TierLimits, lot: Lot): Promise<void> | undefined {
        const n = lot.end - lot.next;
        if (n <= 0) return undefined;
        const slots: number[] = [];
        for (let i = lot.next; i < lot.end; i++) slots.push(i);
        lot.next = lot.end;
        const call = lot.bucketMs
            ? returnSlots(this.redis, ids, limits, lot.base, lot.bucketMs, slots, this.o.now())
            : returnGrant(this.redis, ids, limits, grantLeaseIds(lot.base, lot.end).slice(slots[0]), this.o.now());
        const settled = call.then(
            () => this.o.events?.returned?.(n, "returned"),
            (err: unknown) => this.o.events?.returned?.(n, "lost", err),
        );
        this.track(settled);
        return settled;
    }

    /** Every `holdMs`: gives back expired lots, forgets pairs idle for two periods. */
    private sweep(): void {
        const t = performance.now();
        for (const [k, p] of this.pairs) {
            this.giveBack(p, t);
            if (p.lots.length === 0 && !p.pending && t - p.periodStart >= 2 * this.o.holdMs) this.pairs.delete(k);
        }
    }

    private track(p: Promise<unknown>): void {
        this.inFlight.add(p);
        void p.finally(() => this.inFlight.delete(p));
    }
}
