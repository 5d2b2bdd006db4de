import type { AccessLogRecord } from "./normalise";

/**
 * OTLP/HTTP JSON logs (`ExportLogsServiceRequest`, opentelemetry-proto logs/v1 and collector/logs/v1), the
 * subset the metering service reads. The collector's `otlphttp` exporter with `encoding: json` sends this.
 */
interface AnyValue {
    stringValue?: string;
    intValue?: string | number;
    doubleValue?: number;
    boolValue?: boolean;
}
interface KeyValue {
    key: string;
    value?: AnyValue;
}
interface LogRecord {
    attributes?: KeyValue[];
    body?: AnyValue;
}
export interface ExportLogsServiceRequest {
    resourceLogs?: Array<{ resource?: { attributes?: KeyValue[] }; scopeLogs?: Array<{ logRecords?: LogRecord[] }> }>;
}

/** One log record extracted from a request: its attributes flattened, or why it could not be read. */
export type ExtractedRecord = { ok: true; record: AccessLogRecord; raw: unknown } | { ok: false; reason: string; raw: unknown };

function scalar(v: AnyValue | undefined): string | number | boolean | undefined {
    if (!v) return undefined;
    if (v.stringValue !== undefined) return v.stringValue;
    if (v.intValue !== undefined) return String(v.intValue);
    if (v.doubleValue !== undefined) return v.doubleValue;
    if (v.boolValue !== undefined) return v.boolValue;
    return undefined;
}

/**
 * Flattens every log record of an OTLP JSON logs request. Attributes (Envoy Gateway's JSON format) are the
 * record; when a record has no `requestId` attribute but a JSON-object string body, the body is used instead
 * (a gateway configured with a JSON text body). Never throws: an unreadable record comes back `ok: false`.
 * @throws Error only when `doc` is not an object with a `resourceLogs` array (the whole request is malformed)
 */
export function extractRecords(doc: unknown): ExtractedRecord[] {
    if (!doc || typeof doc !== "object" || !Array.isArray((doc as ExportLogsServiceRequest).resourceLogs)) {
        throw new Error("not an OTLP ExportLogsServiceRequest: no resourceLogs array");
    }
    const out: ExtractedRecord[] = [];
    for (const rl of (doc as ExportLogsServiceRequest).resourceLogs ?? []) {
        for (const sl of rl?.scopeLogs ?? []) {
            for (const lr of sl?.logRecords ?? []) {
                if (!lr || typeof lr !== "object") {
                    out.push({ ok: false, reason: "log record is not an object", raw: lr });
                    continue;
                }
                const record: AccessLogRecord = {};
                for (const kv of Array.isArray(lr.attributes) ? lr.attributes : []) {
                    if (kv && typeof kv.key === "string") record[kv.key] = scalar(kv.value);
                }
                if (record.requestId === undefined && typeof lr.body?.stringValue === "string") {
                    try {
                        const body = JSON.parse(lr.body.stringValue);
                        if (body && typeof body === "object" && !Array.isArray(body)) {
                            out.push({ ok: true, record: { ...record, ...(body as AccessLogRecord) }, raw: lr });
                            continue;
                        }
                    } catch {
                        /* not JSON: fall through with the attributes */
                    }
                }
                out.push({ ok: true, record, raw: lr });
            }
        }
    }
    return out;
}

/** Builds an OTLP JSON logs request carrying `records` as string attributes (what Envoy Gateway sends). */
export function toOtlpRequest(records: readonly AccessLogRecord[]): ExportLogsServiceRequest {
    return {
        resourceLogs: [
            {
                resource: { attributes: [{ key: "service.name", value: { stringValue: "llm-gateway-access-log" } }] },
                scopeLogs: [
                    {
                        logRecords: records.map((r) => ({
                            attributes: Object.entries(r)
                                .filter(([, v]) => v !== undefined)
                                .map(([key, v]) => ({ key, value: { stringValue: String(v) } })),
                        })),
                    },
                ],
            },
        ],
    };
}
