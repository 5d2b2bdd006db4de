import type { UsageEvent } from "../../shared/usage";

/**
 * Usage event number `i` of a varied test stream (spoke hn1, tenant acme, hour 2026-11-29T09-10): two teams,
 * three keys, growing token counts, every 2nd streamed, every 5th truncated, every `estimatedEvery`-th estimated,
 * and every 4th ending exactly on the 10:00 hour boundary. `seq` is `i`. `over` replaces any field.
 */
export function mixedEvent(i: number, over: Partial<UsageEvent> = {}, estimatedEvery = 5): UsageEvent {
    return {
        requestId: `r-${i}`,
        spoke: "hn1",
        tenant: "acme",
        team: i % 2 ? "search" : "agents",
        keyId: `k-${i % 3}`,
        model: "m",
        endpoint: "e",
        inputTokens: 100 + i,
        outputTokens: 10 + i,
        cachedInputTokens: i,
        status: 200,
        stream: i % 2 === 0,
        truncated: i % 5 === 0,
        usageSource: i % estimatedEvery === 0 ? "estimated" : "reported",
        startedAt: "2026-11-29T09:58:00.000Z",
        endedAt: i % 4 === 0 ? "2026-11-29T10:00:00.000Z" : "2026-11-29T09:59:59.999Z",
        seq: i,
        source: "metering-0.aaaa0000",
        ...over,
    };
}

/**
 * One uniform usage event (tenant acme, team search, key k, 10 + 5 tokens, reported, not streamed) of `spoke`
 * (default hn1) with sequence number `seq` and request id `<spoke>-r-<seq>`; `over` replaces any other field (the
 * times, say).
 */
export function plainEvent(seq: number, over: Partial<UsageEvent> & { spoke?: string } = {}): UsageEvent {
    const spoke = over.spoke ?? "hn1";
    const endedAt = over.endedAt ?? new Date().toISOString();
    return {
        requestId: `${spoke}-r-${seq}`,
        spoke,
        tenant: "acme",
        team: "search",
        keyId: "k",
        model: "m",
        endpoint: "e",
        inputTokens: 10,
        outputTokens: 5,
        cachedInputTokens: 0,
        status: 200,
        stream: false,
        truncated: false,
        usageSource: "reported",
        startedAt: endedAt,
        endedAt,
        seq,
        source: "metering-0.aaaa0000",
        ...over,
    };
}

/** The integers a, a + 1, …, b - 1. */
export const range = (a: number, b: number): number[] => Array.from({ length: b - a }, (_, i) => a + i);
