import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** Label value for decisions that are not about a limit tier (401, 403, 503, ...). */
export const NO_TIER = "none";

/**
 * The auth service's Prometheus metrics, in their own registry (one per service instance, so tests can run
 * several instances in one process). Names follow Prometheus conventions: base units (seconds), `_total` for
 * counters.
 */
export class AuthMetrics {
    readonly registry = new Registry();

    /** Decisions by HTTP status, limit tier (`model|team|key|none`) and reason (error code or `allowed`). */
    readonly decisions = new Counter({
        name: "auth_decisions_total",
        help: "ext_authz decisions by HTTP status code, limit tier and reason",
        labelNames: ["code", "tier", "reason"] as const,
        registers: [this.registry],
    });

    /** Whole check latency, request received to response written. */
    readonly checkDuration = new Histogram({
        name: "auth_check_duration_seconds",
        help: "ext_authz check latency in seconds",
        buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
        registers: [this.registry],
    });

    /** Latency of each Redis script call (admission check, readiness ping). */
    readonly redisLatency = new Histogram({
        name: "auth_redis_latency_seconds",
        help: "Redis call latency in seconds (op check: one admission script call, which carries every check batched with it)",
        labelNames: ["op", "result"] as const,
        buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1],
        registers: [this.registry],
    });

    /** Allowed or limit-denied checks by how they were decided: `grant` (no Redis call) or `redis`. */
    readonly admissions = new Counter({
        name: "auth_admissions_total",
        help: "Limit decisions by path: from a grant held by this replica (grant) or by a Redis check (redis)",
        labelNames: ["path"] as const,
        registers: [this.registry],
    });

    /** Grant slots taken ahead (`granted`), given back unused (`returned`), or not given back (`lost`: they expire by the lease TTL). */
    readonly grantSlots = new Counter({
        name: "auth_grant_slots_total",
        help: "Grant slots granted, returned unused, or lost (left to expire by the lease TTL because Redis failed)",
        labelNames: ["result"] as const,
        registers: [this.registry],
    });

    /** Unused grant slots this replica holds now. Computed at scrape time. */
    readonly grantHeld: Gauge;

    /** Revision being served; 0 while no valid bundle was ever loaded. */
    readonly bundleRevision = new Gauge({
        name: "auth_bundle_revision",
        help: "Policy bundle revision being served (0 = none loaded, all requests denied)",
        registers: [this.registry],
    });

    /**
     * Seconds since the served revision was last confirmed current by the hub (grows during a hub outage); NaN
     * while no bundle is loaded. Computed at scrape time.
     */
    readonly bundleAge: Gauge;

    /** Bundle sync attempts: `updated`, `unchanged`, `rejected` (with reason) or `error` (hub unreachable). */
    readonly bundleSyncs = new Counter({
        name: "auth_bundle_syncs_total",
        help: "Policy bundle sync attempts by result and reason",
        labelNames: ["result", "reason"] as const,
        registers: [this.registry],
    });

    /**
     * @param bundleAgeSeconds read at each scrape; undefined while no bundle is loaded.
     * @param grantHeldSlots read at each scrape.
     */
    constructor(bundleAgeSeconds: () => number | undefined, grantHeldSlots: () => number = () => 0) {
        this.grantHeld = new Gauge({
            name: "auth_grant_held_slots",
            help: "Unused grant slots (rps slot plus concurrency lease in every tier) held by this replica",
            registers: [this.registry],
            collect() {
                this.set(grantHeldSlots());
            },
        });
        this.bundleAge = new Gauge({
            name: "auth_bundle_age_seconds",
            help: "Seconds since the served policy bundle was last confirmed current by the hub (NaN: none loaded)",
            registers: [this.registry],
            collect() {
                this.set(bundleAgeSeconds() ?? NaN);
            },
        });
        collectDefaultMetrics({ register: this.registry });
    }
}
