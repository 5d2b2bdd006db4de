import { describe, expect, it } from "vitest";
import { ACCESS_LOG_FIELDS, meteringAccessLogSetting } from "../shared/accesslog";
import { UsageEventSchema } from "../shared/usage";
import { BYTES_PER_TOKEN, estimateCompletionTokens, estimatePromptTokens, sseChunkOverheadBytes } from "./estimate";
import { type AccessLogRecord, normalise } from "./normalise";
import { extractRecords, toOtlpRequest } from "./otlp";
import { syntheticRequests } from "./testing/synthetic";

const LLAMA = "meta-llama/Llama-3.3-70B-Instruct";

function record(over: AccessLogRecord = {}): AccessLogRecord {
    return {
        requestId: "req-1",
        startTime: "2026-11-29T09:15:00.000Z",
        durationMs: "2500",
        method: "POST",
        path: "/v1/chat/completions",
        status: "200",
        responseFlags: "-",
        responseCodeDetails: "via_upstream",
        bytesReceived: "4000",
        bytesSent: "900",
        tenant: "acme",
        team: "search",
        keyId: "acme-search-prod",
        model: LLAMA,
        lease: "lease-1",
        routeName: "llama",
        backendName: "inference/llama-70b",
        inputTokens: "120",
        cachedInputTokens: "100",
        outputTokens: "30",
        totalTokens: "150",
        contentType: "application/json",
        ...over,
    };
}

describe("estimator", () => {
    it("prompt: ceil(bytes / 4)", () => {
        expect(estimatePromptTokens(4000)).toBe(1000);
        expect(estimatePromptTokens(4001)).toBe(1001);
        expect(estimatePromptTokens(0)).toBe(0);
    });

    it("streamed completion: one token per OpenAI chunk, measured on a real chunk stream", () => {
        // 37 chunks, each with a 4-byte token, framed exactly as vLLM/SGLang frame chat.completion.chunk.
        const chunk = (content: string) =>
            `data: ${JSON.stringify({ id: `chatcmpl-${"a1".repeat(16)}`, object: "chat.completion.chunk", created: 1764407700, model: LLAMA, choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }] })}\n\n`;
        const body = Array.from({ length: 37 }, (_, i) => chunk(["The ", "cat ", "sat ", "mat."][i % 4])).join("");
        expect(Buffer.byteLength(chunk(""))).toBe(sseChunkOverheadBytes(LLAMA));
        expect(estimateCompletionTokens(Buffer.byteLength(body), LLAMA, true)).toBe(37);
        expect(sseChunkOverheadBytes(LLAMA)).toBe(240);
    });

    it("non-streamed completion: bytes beyond the envelope at 4 bytes/token", () => {
        expect(estimateCompletionTokens(300 + 4 * 250, LLAMA, false)).toBe(250);
        expect(estimateCompletionTokens(100, LLAMA, false)).toBe(0);
    });
});

describe("normalise", () => {
    it("a complete response is reported usage with the gateway's token counts", () => {
        const n = normalise(record(), "hn1");
        expect(n).toEqual({
            kind: "event",
            lease: "lease-1",
            event: {
                requestId: "req-1",
                spoke: "hn1",
                tenant: "acme",
                team: "search",
                keyId: "acme-search-prod",
                model: LLAMA,
                endpoint: "inference/llama-70b",
                inputTokens: 120,
                outputTokens: 30,
                cachedInputTokens: 100,
                status: 200,
                stream: false,
                truncated: false,
                usageSource: "reported",
                startedAt: "2026-11-29T09:15:00.000Z",
                endedAt: "2026-11-29T09:15:02.500Z",
            },
        });
        expect(UsageEventSchema.safeParse({ ...(n as { event: object }).event, seq: 0, source: "m-0.x" }).success).toBe(true);
    });

    it("a stream cut before its usage chunk is estimated, marked truncated, never zero", () => {
        const bytesSent = 25 * (sseChunkOverheadBytes(LLAMA) + BYTES_PER_TOKEN);
        const n = normalise(
            record({
                contentType: "text/event-stream",
                responseFlags: "DC",
                inputTokens: "-",
                outputTokens: "-",
                cachedInputTokens: "-",
                totalTokens: "-",
                bytesSent: String(bytesSent),
            }),
            "hn1",
        );
        expect(n.kind).toBe("event");
        const e = (n as { event: Record<string, unknown> }).event;
        expect([e.inputTokens, e.outputTokens, e.cachedInputTokens, e.truncated, e.usageSource, e.stream, e.status]).toEqual([
            1000,
            25,
            0,
            true,
            "estimated",
            true,
            200,
        ]);
    });

    it("a stream whose usage was parsed before a late disconnect stays reported (AI Gateway >= v1.2)", () => {
        const n = normalise(record({ contentType: "text/event-stream; charset=utf-8", responseFlags: "DC" }), "hn1") as {
            event: Record<string, unknown>;
        };
        expect([n.event.usageSource, n.event.truncated, n.event.stream, n.event.inputTokens]).toEqual(["reported", false, true, 120]);
    });

    it("no response at all (status 0) is 499, truncated, prompt estimated", () => {
        const n = normalise(
            record({ status: "0", responseFlags: "DC", inputTokens: "-", outputTokens: "-", bytesSent: "0", contentType: "-" }),
            "hn1",
        ) as { event: Record<string, unknown> };
        expect([n.event.status, n.event.truncated, n.event.inputTokens, n.event.outputTokens, n.event.stream]).toEqual([
            499,
            true,
            1000,
            0,
            false,
        ]);
    });

    it("an upstream error without usage counts the request with zero tokens", () => {
        const n = normalise(record({ status: "503", responseFlags: "UF", inputTokens: "-", outputTokens: "-" }), "hn1") as {
            event: Record<string, unknown>;
        };
        expect([n.event.status, n.event.inputTokens, n.event.outputTokens, n.event.truncated, n.event.usageSource]).toEqual([
            503,
            0,
            0,
            false,
            "estimated",
        ]);
    });

    it("auth refusals are not metered; requests without a model are not inference", () => {
        expect(
            normalise(record({ status: "429", responseCodeDetails: "ext_authz_denied", tenant: "-", team: "-", keyId: "-" }), "hn1"),
        ).toEqual({ kind: "ignored", reason: "refused by auth before any work" });
        expect(normalise(record({ model: "-" }), "hn1")).toEqual({ kind: "ignored", reason: "no model: not an inference request" });
    });

    it("malformed records are quarantined with a reason naming the field and its Envoy operator", () => {
        expect(normalise(record({ requestId: "-" }), "hn1")).toEqual({
            kind: "quarantine",
            reason: "missing requestId (%REQ(X-REQUEST-ID)%)",
        });
        expect(normalise(record({ status: "abc" }), "hn1")).toEqual({
            kind: "quarantine",
            reason: 'invalid status (%RESPONSE_CODE%): "abc"',
        });
        expect(normalise(record({ outputTokens: "12.5" }), "hn1")).toEqual({
            kind: "quarantine",
            reason: `invalid outputTokens (${ACCESS_LOG_FIELDS.outputTokens}): "12.5"`,
        });
        expect(normalise(record({ startTime: "yesterday" }), "hn1")).toEqual({
            kind: "quarantine",
            reason: 'invalid startTime (%START_TIME%): "yesterday"',
        });
        expect(normalise(record({ team: "-" }), "hn1")).toEqual({ kind: "quarantine", reason: "missing team (%REQ(X-PLATFORM-TEAM)%)" });
        expect(normalise(record({ tenant: "-", team: "-", keyId: "-" }), "hn1")).toEqual({
            kind: "quarantine",
            reason: "missing identity (tenant, team, keyId): the request reached a route without the auth service's headers",
        });
    });

    it("the synthetic traffic's ground truth equals what the normaliser produces", () => {
        const reqs = syntheticRequests(2000, "hn1", 7);
        const kinds = new Map<string, number>();
        for (const r of reqs) {
            kinds.set(r.kind, (kinds.get(r.kind) ?? 0) + 1);
            const n = normalise(r.record, "hn1");
            if (r.expected) expect(n).toEqual({ kind: "event", event: r.expected, lease: r.record.lease });
            else expect(n.kind).toBe("ignored");
        }
        expect(kinds.size).toBe(6);
    });
});

describe("OTLP JSON", () => {
    it("round-trips records as string attributes, as Envoy Gateway's JSON format sends them", () => {
        const recs = [record(), record({ requestId: "req-2" })];
        const out = extractRecords(JSON.parse(JSON.stringify(toOtlpRequest(recs))));
        expect(out.map((x) => x.ok && x.record.requestId)).toEqual(["req-1", "req-2"]);
        expect(out[0].ok && out[0].record.inputTokens).toBe("120");
    });

    it("reads intValue attributes and a JSON text body", () => {
        const doc = {
            resourceLogs: [
                {
                    scopeLogs: [
                        {
                            logRecords: [
                                {
                                    attributes: [
                                        { key: "requestId", value: { stringValue: "a" } },
                                        { key: "status", value: { intValue: "200" } },
                                    ],
                                },
                                { body: { stringValue: JSON.stringify({ requestId: "b", status: "201" }) } },
                                "garbage",
                            ],
                        },
                    ],
                },
            ],
        };
        const out = extractRecords(doc);
        expect(out.slice(0, 2).map((x) => x.ok && [x.record.requestId, x.record.status])).toEqual([
            ["a", "200"],
            ["b", "201"],
        ]);
        expect(out[2]).toEqual({ ok: false, reason: "log record is not an object", raw: "garbage" });
        expect(() => extractRecords({ nope: 1 })).toThrow("no resourceLogs array");
    });

    it("the gateway's access-log setting carries every field to the metering collector", () => {
        const s = meteringAccessLogSetting();
        expect(s.format).toEqual({ type: "JSON", json: ACCESS_LOG_FIELDS });
        expect(s.sinks).toEqual([
            {
                type: "OpenTelemetry",
                openTelemetry: {
                    backendRefs: [{ group: "", kind: "Service", name: "metering-collector", namespace: "platform-system", port: 4317 }],
                    resources: { "service.name": "llm-gateway-access-log" },
                },
            },
        ]);
    });
});
