import { PEER_PREFIX } from "../shared/peer";
import { ACCESS_LOG_FIELDS } from "../shared/accesslog";
import type { UsageEvent } from "../shared/usage";
import { estimateCompletionTokens, estimatePromptTokens } from "./estimate";

/** One access-log record: ACCESS_LOG_FIELDS name -> formatted value (Envoy prints `-` for "no value"). */
export type AccessLogRecord = Record<string, string | number | boolean | undefined>;

/** A usage event before the spool stamps it with `seq` and `source`. */
export type PendingEvent = Omit<UsageEvent, "seq" | "source">;

/** What one access-log record becomes. */
export type Normalised =
    /** Billable request. `lease` is the concurrency lease to release (absent when auth issued none). */
    | { kind: "event"; event: PendingEvent; lease?: string }
    /** Not a metered request (refused by auth before any work, or no model). Counted, not stored. */
    | { kind: "ignored"; reason: string }
    /**
     * Served by a peer spoke's gateway (the route's fallback): metered there, by the spoke that served it, never here.
     * Counted, not stored; `lease` is this spoke's concurrency lease to release.
     */
    | { kind: "forwarded"; peer: string; event: PendingEvent; lease?: string }
    /** Malformed: stored in the quarantine with the reason, never silently dropped. */
    | { kind: "quarantine"; reason: string };

/**
 * Envoy response flags that mean the exchange was cut (envoy docs, access log `%RESPONSE_FLAGS%`):
 * DC downstream connection termination, UC upstream connection termination, UR upstream remote reset,
 * LR local reset, UT upstream request timeout, SI stream idle timeout, DT downstream request timeout,
 * UO upstream overflow, DPE downstream protocol error, UPE upstream protocol error, UMSDR upstream max
 * stream duration reached, OM overload manager.
 */
export const ABORT_FLAGS = new Set(["DC", "UC", "UR", "LR", "UT", "SI", "DT", "UO", "DPE", "UPE", "UMSDR", "OM"]);

/** Status recorded when Envoy sent no response at all (`%RESPONSE_CODE%` = 0): 499, client closed request. */
export const NO_RESPONSE_STATUS = 499;

/** Statuses the auth service answers before any GPU work. */
const AUTH_REFUSALS = new Set([401, 403, 429]);

/**
 * The peer spoke a record's AI Gateway backend names, or undefined for a local backend. The AI Gateway's
 * `backend_name` is `<namespace>/<AIServiceBackend>/route/<route>/rule/<i>/ref/<j>`
 * (envoyproxy/ai-gateway@v1.1.0:internal/internalapi/internalapi.go `PerRouteRuleRefBackendName`); peer
 * AIServiceBackends are named `peer-<spoke>` (services/shared/peer.ts), a prefix no endpoint may use (config/failover.ts).
 */
export function peerOfBackend(backendName: string | undefined): string | undefined {
    const name = backendName?.split("/")[1];
    return name?.startsWith(PEER_PREFIX) && name.length > PEER_PREFIX.length ? name.slice(PEER_PREFIX.length) : undefined;
}

function present(v: AccessLogRecord[string]): string | undefined {
    if (v === undefined || v === null) return undefined;
    const s = String(v).trim();
    return s === "" || s === "-" ? undefined : s;
}

function nonNegativeInt(v: AccessLogRecord[string]): number | undefined | "bad" {
    const s = present(v);
    if (s === undefined) return undefined;
    return /^\d{1,15}$/.test(s) ? Number(s) : "bad";
}

/** Field name as the gateway configures it, for reasons: `inputTokens (%DYNAMIC_METADATA(...)%)`. */
function field(name: string): string {
    return ACCESS_LOG_FIELDS[name] ? `${name} (${ACCESS_LOG_FIELDS[name]})` : name;
}

/**
 * Normalises one access-log record into the usage event of Pure.
 *
 * - Token metadata present (input and output) -> `usageSource: reported`; the stream ended normally or the
 *   usage chunk had been parsed before a late disconnect (AI Gateway >= v1.2).
 * - No token metadata on a response that started (status < 400, or 0 = none sent) -> estimated from bytes
 *   (estimate.ts), `usageSource: estimated`; `truncated: true` for a stream (cut before its usage chunk) and
 *   for any response with an abort flag or no response at all. Never recorded as zero tokens for a request
 *   that had a body.
 * - No token metadata on an error response (status >= 400): counted as a request with zero tokens
 *   (`estimated`, not truncated): the engine produced nothing billable.
 *
 * A record whose backend is a peer spoke's gateway (the route fell back) is `forwarded`: the peer meters it, with its
 * own request id, so it is never counted here even though both spokes log it.
 *
 * @param spoke this spoke's name (the event's `spoke`)
 */
export function normalise(rec: AccessLogRecord, spoke: string): Normalised {
    const q = (reason: string): Normalised => ({ kind: "quarantine", reason });
    const requestId = present(rec.requestId);
    if (!requestId) return q(`missing ${field("requestId")}`);

    const statusRaw = nonNegativeInt(rec.status);
    if (statusRaw === undefined || statusRaw === "bad" || (statusRaw !== 0 && (statusRaw < 100 || statusRaw > 599))) {
        return q(`invalid ${field("status")}: ${JSON.stringify(rec.status)}`);
    }
    const tenant = present(rec.tenant),
        team = present(rec.team),
        keyId = present(rec.keyId),
        model = present(rec.model);
    const details = present(rec.responseCodeDetails) ?? "";
    if (!tenant && !team && !keyId) {
        if (AUTH_REFUSALS.has(statusRaw) || details.startsWith("ext_authz"))
            return { kind: "ignored", reason: "refused by auth before any work" };
        return q("missing identity (tenant, team, keyId): the request reached a route without the auth service's headers");
    }
    for (const [name, v] of [
        ["tenant", tenant],
        ["team", team],
        ["keyId", keyId],
    ] as const) {
        if (!v) return q(`missing ${field(name)}`);
    }
    if (!model) return { kind: "ignored", reason: "no model: not an inference request" };

    const startMs = Date.parse(String(present(rec.startTime) ?? ""));
    if (Number.isNaN(startMs)) return q(`invalid ${field("startTime")}: ${JSON.stringify(rec.startTime)}`);
    const duration = nonNegativeInt(rec.durationMs);
    if (duration === undefined || duration === "bad") return q(`invalid ${field("durationMs")}: ${JSON.stringify(rec.durationMs)}`);
    const bytesReceived = nonNegativeInt(rec.bytesReceived),
        bytesSent = nonNegativeInt(rec.bytesSent);
    if (bytesReceived === "bad" || bytesSent === "bad")
        return q(
            `invalid byte counts: ${field("bytesReceived")}=${JSON.stringify(rec.bytesReceived)}, ${field("bytesSent")}=${JSON.stringify(rec.bytesSent)}`,
        );

    const tokens: Record<string, number | undefined> = {};
    for (const name of ["inputTokens", "outputTokens", "cachedInputTokens"]) {
        const v = nonNegativeInt(rec[name]);
        if (v === "bad") return q(`invalid ${field(name)}: ${JSON.stringify(rec[name])}`);
        tokens[name] = v;
    }

    const stream = String(present(rec.contentType) ?? "")
        .toLowerCase()
        .startsWith("text/event-stream");
    const flags = String(present(rec.responseFlags) ?? "")
        .split(",")
        .map((f) => f.trim())
        .filter(Boolean);
    const aborted = statusRaw === 0 || flags.some((f) => ABORT_FLAGS.has(f));
    const status = statusRaw === 0 ? NO_RESPONSE_STATUS : statusRaw;
    const endpoint = present(rec.backendName) ?? present(rec.routeName) ?? model;

    const base = {
        requestId,
        spoke,
        tenant: tenant!,
        team: team!,
        keyId: keyId!,
        model,
        endpoint,
        status,
        stream,
        startedAt: new Date(startMs).toISOString(),
        endedAt: new Date(startMs + duration).toISOString(),
    };
    const lease = present(rec.lease);
    const peer = peerOfBackend(present(rec.backendName));
    if (peer)
        return {
            kind: "forwarded",
            peer,
            event: { ...base, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, truncated: false, usageSource: "estimated" },
            ...(lease ? { lease } : {}),
        };
    const withLease = (event: PendingEvent): Normalised => (lease ? { kind: "event", event, lease } : { kind: "event", event });

    if (tokens.inputTokens !== undefined && tokens.outputTokens !== undefined) {
        return withLease({
            ...base,
            inputTokens: tokens.inputTokens,
            outputTokens: tokens.outputTokens,
            cachedInputTokens: Math.min(tokens.cachedInputTokens ?? 0, tokens.inputTokens),
            truncated: false,
            usageSource: "reported",
        });
    }
    if (statusRaw >= 400) {
        return withLease({ ...base, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, truncated: false, usageSource: "estimated" });
    }
    return withLease({
        ...base,
        inputTokens: estimatePromptTokens(bytesReceived ?? 0),
        outputTokens: estimateCompletionTokens(bytesSent ?? 0, model, stream),
        cachedInputTokens: 0,
        truncated: stream || aborted,
        usageSource: "estimated",
    });
}
