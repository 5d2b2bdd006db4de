import { z } from "zod";

/**
 * One tier's limits (platform+model, team or API key). Every request must pass all three tiers.
 * Checked by the spoke's auth service before any GPU work: rps and concurrency synchronously
 * (Redis), tokens against counters fed by usage events (so a tier may overshoot by one window's lag).
 */
export const LimitSetSchema = z
    .object({
        /** Sustained requests per second (token bucket refill rate). */
        requestsPerSecond: z.number().positive(),
        /** Requests in flight at once (leases released by the usage event or by TTL). */
        concurrentRequests: z.number().int().positive(),
        /** Input + output tokens allowed per window. */
        tokensPerWindow: z.number().int().positive(),
        /** Token window length in seconds. */
        windowSeconds: z.number().int().positive().default(60),
    })
    .strict();

/** One tier's limits as parsed ({@link LimitSetSchema}). */
export type LimitSet = z.infer<typeof LimitSetSchema>;
