import * as http from "node:http";
import { Counter, Gauge, Registry } from "prom-client";
import { promisify } from "node:util";
import { gunzip as gunzipCb } from "node:zlib";
import type { UsageEvent } from "../shared/usage";
import type { LimitsApplier, LimitsSink } from "./limits";
import { normalise, type PendingEvent } from "./normalise";
import { extractRecords, type ExtractedRecord } from "./otlp";
import type { Shipper } from "./shipper";
import { type Spool, SpoolFullError } from "./spool";

const gunzip = promisify(gunzipCb);

/** Outcome of one batch of access-log records. */
export interface IngestOutcome {
    /** Usage events spooled (fsynced). */
    spooled: number;
    /** Records whose request id was spooled recently already (a sender retry): acknowledged, not spooled again. */
    duplicates: number;
    /** Records that are not metered requests (refused by auth, no model). */
    ignored: number;
    /** Records of requests a peer spoke served (the route's fallback): metered there; only their lease is released here. */
    forwarded: number;
    /** Records stored in the quarantine with a reason. */
    quarantined: number;
    /** First quarantine reasons (for the OTLP partial-success message). */
    reasons: string[];
}

export interface MeteringServiceOptions {
    spoke: string;
    spool: Spool;
    /**
     * Lease release at intake (idempotent, best effort: a lease not released expires by its TTL); omitted = none.
     * Token accounting is not done here but by a {@link LimitsApplier} reading the spool, exactly once.
     */
    limits?: LimitsSink;
    /**
     * Request ids remembered to absorb sender retries without re-spooling (bounded LRU, in memory). Default 100k.
     * Only saves spool space: after a restart a retry is spooled again, and the ledger and the token counters
     * de-duplicate it by `(spoke, requestId)`.
     */
    dedupeWindow?: number;
    /** Test fault injection: called after a batch is durable in the spool, before it is acknowledged. */
    afterSpool?: () => void;
    log?: (msg: string, fields?: Record<string, unknown>) => void;
}

/**
 * The spoke's metering: access-log records in, durable usage events out. Acknowledges a batch only after
 * every event of it is fsynced to the spool (or the record is quarantined), then releases the requests'
 * leases in Redis without holding up the acknowledgement. Tokens are added from the spool by
 * {@link LimitsApplier}, exactly once per `(spoke, requestId)`.
 */
export class MeteringService {
    readonly registry = new Registry();
    private readonly recent = new Map<string, true>();
    private readonly inflight = new Set<Promise<void>>();
    private readonly records: Counter<"outcome">;
    private readonly limitErrors: Counter;
    limitsFailures = 0;

    constructor(private readonly o: MeteringServiceOptions) {
        this.records = new Counter({
            name: "metering_records_total",
            help: "Access-log records by outcome (spooled, duplicate, ignored, forwarded, quarantined)",
            labelNames: ["outcome"],
            registers: [this.registry],
        });
        this.limitErrors = new Counter({
            name: "metering_limits_errors_total",
            help: "Lease releases that failed (Redis); the lease then expires by its TTL",
            registers: [this.registry],
        });
        const spool = o.spool;
        new Gauge({
            name: "metering_spool_bytes",
            help: "Bytes on the spool volume (segments + quarantine)",
            registers: [this.registry],
            collect() {
                this.set(spool.bytes);
            },
        });
        new Gauge({
            name: "metering_spool_unshipped_bytes",
            help: "Bytes of events not yet acknowledged by the hub",
            registers: [this.registry],
            collect() {
                this.set(spool.unshippedBytes);
            },
        });
        new Gauge({
            name: "metering_spool_next_seq",
            help: "Next sequence number this instance assigns",
            registers: [this.registry],
            collect() {
                this.set(spool.nextSequence);
            },
        });
        new Gauge({
            name: "metering_shipped_through_seq",
            help: "Highest sequence number the hub acknowledged",
            registers: [this.registry],
            collect() {
                this.set(spool.shippedThroughSeq);
            },
        });
    }

    /** Registers shipper metrics on this service's registry. */
    observeShipper(shipper: Shipper): void {
        new Gauge({
            name: "metering_ship_consecutive_failures",
            help: "Failed ship attempts since the last success",
            registers: [this.registry],
            collect() {
                this.set(shipper.consecutiveFailures);
            },
        });
        new Gauge({
            name: "metering_shipped_events",
            help: "Events the hub accepted since start",
            registers: [this.registry],
            collect() {
                this.set(shipper.shippedEvents);
            },
        });
        const poisoned = new Counter({
            name: "metering_poisoned_events_total",
            help: "Usage events quarantined on the spoke because Kinesis will not take them (reason: too-large, refused); alert on any increase",
            labelNames: ["reason"],
            registers: [this.registry],
        });
        poisoned.inc({ reason: "too-large" }, 0);
        poisoned.inc({ reason: "refused" }, 0);
        shipper.onPoison((reason) => poisoned.inc({ reason }));
    }

    /** Registers token-accounting metrics on this service's registry. */
    observeApplier(a: LimitsApplier): void {
        new Gauge({
            name: "metering_tokens_applied_through_seq",
            help: "Highest spool seq whose tokens were added to the Redis token windows",
            registers: [this.registry],
            collect() {
                this.set(a.appliedThroughSeq);
            },
        });
        new Gauge({
            name: "metering_tokens_duplicates",
            help: "Events whose tokens were already counted (redeliveries absorbed by the Redis de-duplication) since start",
            registers: [this.registry],
            collect() {
                this.set(a.duplicates);
            },
        });
        new Gauge({
            name: "metering_tokens_failures",
            help: "Failed token-accounting attempts (Redis) since start; retried",
            registers: [this.registry],
            collect() {
                this.set(a.failures);
            },
        });
        new Gauge({
            name: "metering_tokens_skipped",
            help: "Events skipped by token accounting (Redis down beyond the spool's retention bound) since start",
            registers: [this.registry],
            collect() {
                this.set(a.skipped);
            },
        });
    }

    /**
     * Normalises, quarantines and spools one batch. Resolves only when all of it is durable.
     * @throws SpoolFullError / the file system's error: nothing new is acknowledged, the sender retries
     */
    async ingest(records: ExtractedRecord[]): Promise<IngestOutcome> {
        const out: IngestOutcome = { spooled: 0, duplicates: 0, ignored: 0, forwarded: 0, quarantined: 0, reasons: [] };
        const forwardedLeases: Array<{ event: UsageEvent; lease: string }> = [];
        const events: PendingEvent[] = [];
        const leases = new Map<string, string>();
        const bad: Array<{ reason: string; record: unknown }> = [];
        const batchIds = new Set<string>();
        for (const r of records) {
            if (!r.ok) {
                bad.push({ reason: r.reason, record: r.raw });
                continue;
            }
            const n = normalise(r.record, this.o.spoke);
            if (n.kind === "quarantine") bad.push({ reason: n.reason, record: r.record });
            else if (n.kind === "ignored") out.ignored++;
            else if (n.kind === "forwarded") {
                out.forwarded++;
                // Not spooled, never shipped: only the lease this spoke's auth took is given back. seq/source are unused
                // by a release (it reads the tier ids only).
                if (n.lease) forwardedLeases.push({ event: { ...n.event, seq: -1, source: "forwarded" }, lease: n.lease });
            } else if (this.recent.has(n.event.requestId) || batchIds.has(n.event.requestId)) out.duplicates++;
            else {
                batchIds.add(n.event.requestId);
                events.push(n.event);
                if (n.lease) leases.set(n.event.requestId, n.lease);
            }
        }
        await this.o.spool.quarantine(bad);
        out.quarantined = bad.length;
        out.reasons = [...new Set(bad.map((b) => b.reason))].slice(0, 5);
        const stamped = await this.o.spool.append(events);
        this.o.afterSpool?.();
        out.spooled = stamped.length;
        for (const e of stamped) this.remember(e.requestId);
        this.records.inc({ outcome: "spooled" }, out.spooled);
        this.records.inc({ outcome: "duplicate" }, out.duplicates);
        this.records.inc({ outcome: "ignored" }, out.ignored);
        this.records.inc({ outcome: "forwarded" }, out.forwarded);
        this.records.inc({ outcome: "quarantined" }, out.quarantined);
        if (this.o.limits && leases.size) this.track(this.releaseLeases(stamped, leases));
        if (this.o.limits && forwardedLeases.length)
            this.track(
                this.releaseLeases(
                    forwardedLeases.map((f) => f.event),
                    new Map(forwardedLeases.map((f) => [f.event.requestId, f.lease])),
                ),
            );
        return out;
    }

    /** Stores an unreadable request body in the quarantine (durably) with the reason. */
    async quarantineBody(reason: string, body: string): Promise<void> {
        await this.o.spool.quarantine([{ reason, record: body }]);
        this.records.inc({ outcome: "quarantined" });
    }

    /** Resolves when all lease releases started so far have finished. */
    async idle(): Promise<void> {
        while (this.inflight.size) await Promise.all([...this.inflight]);
    }

    private track(p: Promise<void>): void {
        this.inflight.add(p);
        void p.finally(() => this.inflight.delete(p));
    }

    private async releaseLeases(events: UsageEvent[], leases: Map<string, string>): Promise<void> {
        for (const e of events) {
            const lease = leases.get(e.requestId);
            if (!lease) continue;
            try {
                await this.o.limits!.releaseLease(e, lease);
            } catch (err) {
                this.limitsFailures++;
                this.limitErrors.inc();
                if (this.limitsFailures === 1 || this.limitsFailures % 1000 === 0)
                    this.o.log?.("limits update failed", { error: (err as Error).message, failures: this.limitsFailures });
            }
        }
    }

    private remember(id: string): void {
        this.recent.set(id, true);
        const max = this.o.dedupeWindow ?? 100_000;
        while (this.recent.size > max) this.recent.delete(this.recent.keys().next().value as string);
    }
}

export interface ServerOptions {
    /** Largest accepted request body (after decompression), bytes. Default 16 MiB. */
    maxBodyBytes?: number;
    /** Spool fill ratio above which /readyz fails, so the collector sends to another replica. Default 0.95. */
    readyBelowRatio?: number;
    maxSpoolBytes: number;
    /**
     * Whole request (headers and body) must arrive within this, ms (Node `http.Server` `requestTimeout`;
     * answered 408 and closed). Default 30 s: a collector batch of 16 MiB arrives in well under a second on the
     * cluster network, so only a stalled or slow-loris sender hits it.
     */
    requestTimeoutMs?: number;
    /** Request headers must arrive within this, ms (`headersTimeout`). Default 10 s. */
    headersTimeoutMs?: number;
    /**
     * Idle keep-alive connection closed after this, ms (`keepAliveTimeout`). Default 65 s, above the collector's
     * HTTP client idle timeout (Go `net/http` `IdleConnTimeout` default 90 s is longer; the client retries a
     * connection the server closed), so idle connections do not pile up.
     */
    keepAliveTimeoutMs?: number;
}

class HttpError extends Error {
    constructor(
        readonly status: number,
        message: string,
    ) {
        super(message);
    }
}

async function readBody(req: http.IncomingMessage, max: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of req) {
        n += (c as Buffer).length;
        if (n > max) throw new HttpError(413, `body over ${max} bytes`);
        chunks.push(c as Buffer);
    }
    const raw = Buffer.concat(chunks);
    const enc = String(req.headers["content-encoding"] ?? "identity").toLowerCase();
    if (enc === "gzip") {
        const out = await gunzip(raw, { maxOutputLength: max }).catch((e) => {
            throw new HttpError(400, `gzip: ${(e as Error).message}`);
        });
        return out;
    }
    if (enc !== "identity") throw new HttpError(415, `content-encoding ${enc} not supported (identity, gzip)`);
    return raw;
}

/**
 * HTTP front of the metering service:
 * - `POST /v1/logs` OTLP/HTTP JSON logs (collector `otlphttp` exporter, `encoding: json`). 200 after the
 *   spool fsync, with OTLP `partialSuccess` naming quarantined records; 503 + Retry-After when the spool is
 *   full or the disk fails (the collector retries 503: retryable per the OTLP/HTTP spec); 400 only for a body
 *   that is not OTLP JSON at all, after storing it in the quarantine.
 * - `GET /healthz`, `GET /readyz` (fails while the spool is nearly full), `GET /metrics` (Prometheus).
 * Bounded: headers, whole-request and keep-alive timeouts ({@link ServerOptions}), body size (413 beyond
 * `maxBodyBytes`, also after gzip decompression).
 */
export function createServer(svc: MeteringService, spool: Spool, opts: ServerOptions): http.Server {
    const max = opts.maxBodyBytes ?? 16 * 1024 * 1024;
    const readyBelow = (opts.readyBelowRatio ?? 0.95) * opts.maxSpoolBytes;
    const send = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
        const text = typeof body === "string" ? body : JSON.stringify(body);
        res.writeHead(status, { "content-type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json", ...headers });
        res.end(text);
    };
    const requestTimeout = opts.requestTimeoutMs ?? 30_000;
    const headersTimeout = Math.min(opts.headersTimeoutMs ?? 10_000, requestTimeout);
    return http.createServer(
        {
            requestTimeout,
            headersTimeout,
            keepAliveTimeout: opts.keepAliveTimeoutMs ?? 65_000,
            // Node checks the two timeouts above on this interval (default 30 s): check often enough to enforce them.
            connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(headersTimeout / 4))),
        },
        async (req, res) => {
            const url = (req.url ?? "/").split("?")[0];
            try {
                if (req.method === "GET" && url === "/healthz") return send(res, 200, "ok\n");
                if (req.method === "GET" && url === "/readyz") {
                    return spool.usedBytes < readyBelow
                        ? send(res, 200, "ready\n")
                        : send(res, 503, `spool ${spool.usedBytes}/${opts.maxSpoolBytes} bytes\n`);
                }
                if (req.method === "GET" && url === "/metrics")
                    return send(res, 200, await svc.registry.metrics(), { "content-type": svc.registry.contentType });
                if (url !== "/v1/logs") return send(res, 404, { message: "not found" });
                if (req.method !== "POST") return send(res, 405, { message: "POST only" }, { allow: "POST" });
                const ct = String(req.headers["content-type"] ?? "");
                if (!ct.startsWith("application/json"))
                    throw new HttpError(415, `content-type ${ct || "(none)"}: send OTLP JSON (otlphttp encoding: json)`);
                const body = await readBody(req, max);
                let records: ReturnType<typeof extractRecords>;
                try {
                    records = extractRecords(JSON.parse(body.toString("utf8")));
                } catch (e) {
                    await svc.quarantineBody(`unreadable OTLP request: ${(e as Error).message}`, body.toString("utf8"));
                    throw new HttpError(400, `${(e as Error).message} (stored in quarantine)`);
                }
                const out = await svc.ingest(records);
                if (out.quarantined) {
                    return send(res, 200, {
                        partialSuccess: {
                            rejectedLogRecords: String(out.quarantined),
                            errorMessage: `quarantined: ${out.reasons.join("; ")}`,
                        },
                    });
                }
                return send(res, 200, {});
            } catch (e) {
                if (e instanceof HttpError) return send(res, e.status, { message: e.message });
                if (e instanceof SpoolFullError) return send(res, 503, { message: e.message }, { "retry-after": "5" });
                return send(res, 503, { message: `spool write failed: ${(e as Error).message}` }, { "retry-after": "1" });
            }
        },
    );
}
