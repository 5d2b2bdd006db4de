import { z } from "zod";

/**
 * The usage event (spoke -> hub) One per request, after the response. At-least-once transport;
 * the hub ledger counts each `(spoke, requestId)` exactly once. `seq` is the spoke's per-metering-instance
 * sequence number, used by the reconciliation report to list gaps.
 */
export const UsageEventSchema = z
    .object({
        requestId: z.string().min(1),
        spoke: z.string().min(1),
        tenant: z.string().min(1),
        team: z.string().min(1),
        keyId: z.string().min(1),
        model: z.string().min(1),
        endpoint: z.string().min(1),
        inputTokens: z.number().int().min(0),
        outputTokens: z.number().int().min(0),
        cachedInputTokens: z.number().int().min(0),
        /** HTTP status returned to the client. */
        status: z.number().int().min(100).max(599),
        stream: z.boolean(),
        /** True when a stream was cut before its final usage chunk. */
        truncated: z.boolean(),
        /** `reported` by the engine's usage chunk / AI Gateway metadata, or `estimated` for truncated streams. */
        usageSource: z.enum(["reported", "estimated"]),
        startedAt: z.string().datetime({ offset: true }),
        endedAt: z.string().datetime({ offset: true }),
        /** Monotonic per (spoke, metering instance) sequence number, for gap detection. */
        seq: z.number().int().min(0),
        /** Metering instance (pod) that produced `seq`. */
        source: z.string().min(1),
    })
    .strict();

export type UsageEvent = z.infer<typeof UsageEventSchema>;

/**
 * What the spoke ships in place of a usage event Kinesis cannot take (over the 1 MiB record limit, or refused
 * per record as invalid): a small record that always fits, so the hub learns of the event, its place in the
 * spoke's sequence (no false gap) and why it is missing from the ledger. The full event stays in the spoke's
 * quarantine (`<spool dir>/quarantine.jsonl`, reason prefixed `poison:`) for an operator to replay or bill by hand.
 * The consumer stores it in `usage_spoke_quarantine`; the reconciliation report lists it as `quarantined`.
 */
export const QuarantineMarkerSchema = z
    .object({
        kind: z.literal("quarantined"),
        /** The event's request id, or `sha256:<hex>` of it when it is longer than 1,024 characters. */
        requestId: z.string().min(1).max(1100),
        spoke: z.string().min(1),
        source: z.string().min(1),
        seq: z.number().int().min(0),
        /** The event's `endedAt` (its billing hour). */
        endedAt: z.string().datetime({ offset: true }),
        reason: z.string().min(1).max(2000),
        /** Size of the event's Kinesis record (data + partition key), bytes. */
        bytes: z.number().int().min(0),
    })
    .strict();

export type QuarantineMarker = z.infer<typeof QuarantineMarkerSchema>;
