import type { UsageEvent } from "../../shared/usage";
import { BYTES_PER_TOKEN, sseChunkOverheadBytes } from "../estimate";
import type { AccessLogRecord } from "../normalise";

/** Deterministic PRNG (mulberry32) so every run generates the same traffic. */
export function prng(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

const KEYS = [
    { tenant: "acme", team: "search", keyId: "acme-search-prod" },
    { tenant: "acme", team: "agents", keyId: "acme-agents-prod" },
    { tenant: "globex", team: "research", keyId: "globex-research-prod" },
];
const MODELS = ["meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-32B"];

export type Kind = "reported" | "reported-stream" | "truncated-stream" | "no-response" | "upstream-error" | "auth-refused";

/** One synthetic request: the access-log record the gateway would emit, and what the ledger must count. */
export interface SyntheticRequest {
    kind: Kind;
    record: AccessLogRecord;
    /** Usage the ledger must hold for it (without seq/source); undefined for requests that are not metered. */
    expected?: Omit<UsageEvent, "seq" | "source">;
}

/**
 * `n` requests for `spoke` spread over two hours, mixed: reported (plain and streamed), streams cut before
 * the usage chunk (flag DC, no token metadata, bytes chosen so the estimate is exact), no response at all
 * (status 0), upstream 503s, and auth refusals (not metered). Ground truth comes from the generator, not
 * from the normaliser.
 */
export function syntheticRequests(n: number, spoke: string, seed = 42, startMs = Date.UTC(2026, 10, 29, 9, 0, 0)): SyntheticRequest[] {
    const rnd = prng(seed);
    const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)];
    const out: SyntheticRequest[] = [];
    for (let i = 0; i < n; i++) {
        const k = pick(KEYS),
            model = pick(MODELS);
        const started = startMs + Math.floor((i / n) * 2 * 3600_000);
        const duration = 50 + Math.floor(rnd() * 20_000);
        const r = rnd();
        const kind: Kind =
            r < 0.35
                ? "reported"
                : r < 0.7
                  ? "reported-stream"
                  : r < 0.85
                    ? "truncated-stream"
                    : r < 0.9
                      ? "no-response"
                      : r < 0.95
                        ? "upstream-error"
                        : "auth-refused";
        const requestId = `${spoke}-req-${seed}-${i}`;
        const prompt = 1 + Math.floor(rnd() * 8000),
            completion = 1 + Math.floor(rnd() * 2000),
            cached = Math.floor(rnd() * prompt);
        const stream = kind === "reported-stream" || kind === "truncated-stream";
        const base: AccessLogRecord = {
            requestId,
            startTime: new Date(started).toISOString(),
            durationMs: String(duration),
            method: "POST",
            path: "/v1/chat/completions",
            status: "200",
            responseFlags: "-",
            responseCodeDetails: "via_upstream",
            bytesReceived: String(prompt * BYTES_PER_TOKEN),
            bytesSent: "1234",
            tenant: k.tenant,
            team: k.team,
            keyId: k.keyId,
            model,
            lease: `lease-${i}`,
            routeName: `route-${model.length}`,
            backendName: `inference/${model.includes("Llama") ? "llama-70b" : "qwen3-32b"}`,
            inputTokens: "-",
            cachedInputTokens: "-",
            outputTokens: "-",
            totalTokens: "-",
            contentType: stream ? "text/event-stream" : "application/json",
        };
        const common = {
            requestId,
            spoke,
            tenant: k.tenant,
            team: k.team,
            keyId: k.keyId,
            model,
            endpoint: String(base.backendName),
            stream,
            startedAt: new Date(started).toISOString(),
            endedAt: new Date(started + duration).toISOString(),
        };
        if (kind === "reported" || kind === "reported-stream") {
            Object.assign(base, {
                inputTokens: String(prompt),
                cachedInputTokens: String(cached),
                outputTokens: String(completion),
                totalTokens: String(prompt + completion),
            });
            out.push({
                kind,
                record: base,
                expected: {
                    ...common,
                    status: 200,
                    inputTokens: prompt,
                    outputTokens: completion,
                    cachedInputTokens: cached,
                    truncated: false,
                    usageSource: "reported",
                },
            });
        } else if (kind === "truncated-stream") {
            const chunks = Math.floor(completion / 2);
            Object.assign(base, {
                responseFlags: "DC",
                responseCodeDetails: "downstream_remote_disconnect",
                bytesSent: String(chunks * (sseChunkOverheadBytes(model) + BYTES_PER_TOKEN)),
            });
            out.push({
                kind,
                record: base,
                expected: {
                    ...common,
                    status: 200,
                    inputTokens: prompt,
                    outputTokens: chunks,
                    cachedInputTokens: 0,
                    truncated: true,
                    usageSource: "estimated",
                },
            });
        } else if (kind === "no-response") {
            Object.assign(base, { status: "0", responseFlags: "DC", bytesSent: "0", contentType: "-" });
            out.push({
                kind,
                record: base,
                expected: {
                    ...common,
                    stream: false,
                    status: 499,
                    inputTokens: prompt,
                    outputTokens: 0,
                    cachedInputTokens: 0,
                    truncated: true,
                    usageSource: "estimated",
                },
            });
        } else if (kind === "upstream-error") {
            Object.assign(base, { status: "503", responseFlags: "UF", bytesSent: "95", contentType: "application/json" });
            out.push({
                kind,
                record: base,
                expected: {
                    ...common,
                    stream: false,
                    status: 503,
                    inputTokens: 0,
                    outputTokens: 0,
                    cachedInputTokens: 0,
                    truncated: false,
                    usageSource: "estimated",
                },
            });
        } else {
            Object.assign(base, {
                status: "429",
                responseCodeDetails: "ext_authz_denied",
                tenant: "-",
                team: "-",
                keyId: "-",
                model: "-",
                lease: "-",
                bytesSent: "80",
            });
            out.push({ kind, record: base });
        }
    }
    return out;
}
