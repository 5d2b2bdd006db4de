import { KinesisClient, PutRecordsCommand, type PutRecordsCommandOutput } from "@aws-sdk/client-kinesis";
import { boundedRequestHandler } from "../shared/net";
import { createHash } from "node:crypto";
import type { QuarantineMarker, UsageEvent } from "../shared/usage";
import type { Spool } from "./spool";

/** One Kinesis record the shipper sends: a usage event, or the marker of one that was quarantined. */
export type ShipRecord = UsageEvent | QuarantineMarker;

/** Where shipped events go. The hub's Kinesis stream in production; a fake in unit tests. */
export interface Transport {
    /**
     * Sends records.
     * @returns per record (indexes into `records`) what did not go: `retry` (throttled, internal failure: send
     *   again) or `poison` with a reason (the stream will never take this record: quarantine it)
     * @throws when the whole call failed (network, timeout, auth, throttling of the call); everything is retried
     */
    put(records: ShipRecord[]): Promise<PutOutcome>;
}

/** Per-record outcome of {@link Transport.put}; indexes not listed were accepted. */
export interface PutOutcome {
    retry: number[];
    poison: Array<{ index: number; reason: string }>;
    /** Not attempted because the call failed on a poison record: resent at once, without backoff. */
    unsent?: number[];
}

/**
 * Kinesis limits (Amazon Kinesis Data Streams API Reference, `PutRecords` and `PutRecordsRequestEntry`):
 * 500 records and 5 MiB per call including partition keys; a record's data blob (before base64) plus its
 * partition key must not exceed the maximum record size, 1 MiB (`Data` length ≤ 1,048,576); partition key 1-256
 * characters. Streams may raise their record size (`MaxRecordSizeInKiB`), never below 1 MiB, so 1 MiB is safe.
 */
export const KINESIS_MAX_RECORDS = 500;
export const KINESIS_MAX_BATCH_BYTES = 5 * 1024 * 1024;
export const KINESIS_MAX_RECORD_BYTES = 1024 * 1024;

/** Partition key: the request id (duplicates of a request land on one shard), hashed if over 256 chars. */
export function partitionKey(e: ShipRecord): string {
    return e.requestId.length <= 256 ? e.requestId : createHash("sha256").update(e.requestId).digest("hex");
}

/** The Kinesis record of a ship record: JSON data and partition key. */
export function kinesisRecord(e: ShipRecord): { Data: Buffer; PartitionKey: string } {
    return { Data: Buffer.from(JSON.stringify(e), "utf8"), PartitionKey: partitionKey(e) };
}

/** Bytes Kinesis counts against the record limit: data blob + partition key (UTF-8). */
export function kinesisRecordBytes(e: ShipRecord): number {
    const r = kinesisRecord(e);
    return r.Data.length + Buffer.byteLength(r.PartitionKey, "utf8");
}

/**
 * Marker shipped in place of a poison event (services/shared/usage.ts `QuarantineMarkerSchema`): fits any record
 * limit (request id hashed beyond 1,024 characters, reason cut at 2,000).
 */
export function quarantineMarker(e: UsageEvent, reason: string, bytes: number): QuarantineMarker {
    const requestId = e.requestId.length <= 1024 ? e.requestId : `sha256:${createHash("sha256").update(e.requestId).digest("hex")}`;
    return {
        kind: "quarantined",
        requestId,
        spoke: e.spoke,
        source: e.source,
        seq: e.seq,
        endedAt: e.endedAt,
        reason: reason.slice(0, 2000),
        bytes,
    };
}

export interface KinesisTransportOptions {
    streamName: string;
    region: string;
    /** Endpoint override (tests: the in-process Kinesis-compatible server). */
    endpoint?: string;
    /** Static credentials (tests); production uses the SDK's default chain (the spoke identity). */
    credentials?: { accessKeyId: string; secretAccessKey: string };
    /** Whole-call timeout, ms, enforced (the socket is destroyed and the call fails). Default 10 s. */
    requestTimeoutMs?: number;
    /** TCP connect timeout, ms. Default 3 s. */
    connectionTimeoutMs?: number;
    /** Socket inactivity timeout, ms (no byte in either direction). Default: the request timeout. */
    socketTimeoutMs?: number;
    /** First TCP keepalive probe after this idle time, ms. Default 15 s. */
    keepAliveMs?: number;
}

/**
 * Ships to the hub's usage stream with `PutRecords`, HTTP/1.1 keep-alive (PutRecords needs no HTTP/2).
 *
 * Bounded: with the pinned `@smithy/node-http-handler` (4.14.2, `dist-cjs/index.js` `setRequestTimeout`) a
 * `requestTimeout` only logs a warning unless `throwOnRequestTimeout: true` is set; with it the handler destroys
 * the request's socket and rejects, so a connection that went silent is dropped and the next attempt opens a
 * new one. `connectionTimeout` bounds the TCP connect, `socketTimeout` the inactivity of a socket, and the
 * agent's `keepAlive`/`keepAliveMsecs` turns on TCP keepalive (Node `http.Agent`) so the kernel also notices a
 * dead peer on an idle pooled socket.
 */
export class KinesisTransport implements Transport {
    private readonly client: KinesisClient;

    constructor(private readonly opts: KinesisTransportOptions) {
        this.client = new KinesisClient({
            region: opts.region,
            endpoint: opts.endpoint,
            credentials: opts.credentials,
            maxAttempts: 1, // the shipper owns retries and backoff
            // Timeouts really enforced (throwOnRequestTimeout), keepalive (services/shared/net.ts).
            requestHandler: boundedRequestHandler({
                requestTimeoutMs: opts.requestTimeoutMs ?? 10_000,
                connectTimeoutMs: opts.connectionTimeoutMs ?? 3_000,
                socketTimeoutMs: opts.socketTimeoutMs,
                keepAliveMs: opts.keepAliveMs ?? 15_000,
                maxSockets: 8,
            }),
        });
    }

    async put(records: ShipRecord[]): Promise<PutOutcome> {
        let out: PutRecordsCommandOutput;
        try {
            out = await this.client.send(new PutRecordsCommand({ StreamName: this.opts.streamName, Records: records.map(kinesisRecord) }));
        } catch (e) {
            // A record the service's validation refuses fails the whole call (ValidationException naming
            // `records.<n>.member...`, 1-based): those records are poison, the others are resent at once.
            const err = e as Error;
            if (err.name === "ValidationException") {
                const idx = [...new Set([...err.message.matchAll(/records\.(\d+)\.member/g)].map((m) => Number(m[1]) - 1))].filter(
                    (i) => i >= 0 && i < records.length,
                );
                if (idx.length)
                    return {
                        retry: [],
                        unsent: records.map((_, i) => i).filter((i) => !idx.includes(i)),
                        poison: idx.map((index) => ({ index, reason: `Kinesis ValidationException: ${err.message.slice(0, 500)}` })),
                    };
            }
            throw e;
        }
        const results = out.Records ?? [];
        if (results.length !== records.length)
            throw new Error(`PutRecords returned ${results.length} results for ${records.length} records`);
        const outcome: PutOutcome = { retry: [], poison: [] };
        // FailedRecordCount > 0 names the records by their ErrorCode. Per-record ErrorCode: ProvisionedThroughputExceededException / InternalFailure (and KMS errors): retry.
        results.forEach((r, i) => {
            if (r.ErrorCode) outcome.retry.push(i);
        });
        return outcome;
    }

    destroy(): void {
        this.client.destroy();
    }
}

export interface ShipperOptions {
    /** Events per call (≤ 500). */
    batchEvents?: number;
    /** Bytes read from the spool per batch (< 5 MiB). */
    batchBytes?: number;
    /** First retry delay, ms. Default 200. */
    minBackoffMs?: number;
    /** Retry delay cap, ms. Default 30 s: a hub outage of hours costs one attempt per ≤ 30 s. */
    maxBackoffMs?: number;
    /** Poll interval when the spool is empty and no append arrives, ms. Default 1 s. */
    idleMs?: number;
    /** Largest Kinesis record (data + partition key), bytes. Default {@link KINESIS_MAX_RECORD_BYTES}. */
    maxRecordBytes?: number;
    /** Test fault injection: called after the hub accepted a batch, before the cursor is committed. */
    afterPut?: () => void;
    log?: (msg: string, fields?: Record<string, unknown>) => void;
}

/** Full-jitter exponential backoff (AWS Architecture Blog, "Exponential Backoff and Jitter"): U(0, min(cap, base * 2^n)). */
export function backoffMs(attempt: number, minMs: number, maxMs: number, rand: () => number = Math.random): number {
    const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
    return Math.max(1, Math.floor(rand() * ceiling));
}

/**
 * Drains the spool to the transport, in order, forever: read a batch after the cursor, put it (retrying
 * only the records the transport refused, with backoff, without limit), then commit the cursor. A crash
 * between put and commit resends that batch: the ledger counts each (spoke, requestId) once.
 *
 * Poison records never block the stream: an event whose Kinesis record is over the record limit, or that the
 * stream refuses as invalid, is written to the spoke's quarantine (`poison: ...` in `quarantine.jsonl`, durable
 * before the cursor moves), counted in {@link Shipper.poisoned}, logged at `level: error` with
 * `alert: MeteringPoisonRecord`, and replaced in the batch by a {@link quarantineMarker} so the hub's
 * reconciliation lists it as quarantined (not as a gap, not as lost).
 */
export class Shipper {
    shippedEvents = 0;
    failedAttempts = 0;
    consecutiveFailures = 0;
    /** Events quarantined here because Kinesis cannot take them. */
    poisoned = 0;
    lastError: string | undefined;
    lastSuccessAt: number | undefined;
    private stopped = true;
    private loopDone: Promise<void> = Promise.resolve();
    private wake: (() => void) | undefined;
    private readonly o: Required<Omit<ShipperOptions, "log" | "afterPut">> & Pick<ShipperOptions, "log" | "afterPut">;
    private readonly poisonListeners: Array<(reason: string) => void> = [];

    constructor(
        private readonly spool: Spool,
        private transport: Transport,
        opts: ShipperOptions = {},
    ) {
        this.o = {
            batchEvents: Math.min(opts.batchEvents ?? KINESIS_MAX_RECORDS, KINESIS_MAX_RECORDS),
            batchBytes: Math.min(opts.batchBytes ?? 4 * 1024 * 1024, KINESIS_MAX_BATCH_BYTES - 512 * 1024),
            minBackoffMs: opts.minBackoffMs ?? 200,
            maxBackoffMs: opts.maxBackoffMs ?? 30_000,
            idleMs: opts.idleMs ?? 1000,
            maxRecordBytes: opts.maxRecordBytes ?? KINESIS_MAX_RECORD_BYTES,
            log: opts.log,
            afterPut: opts.afterPut,
        };
        spool.on("append", () => this.wake?.());
    }

    /** Replaces the transport (tests: "the hub comes back" at a new address). */
    setTransport(t: Transport): void {
        this.transport = t;
        this.wake?.();
    }

    /** Called with the reason kind (`too-large`, `refused`) for every quarantined event (metrics). */
    onPoison(fn: (reason: string) => void): void {
        this.poisonListeners.push(fn);
    }

    start(): void {
        if (!this.stopped) return;
        this.stopped = false;
        this.loopDone = this.loop();
    }

    /** Stops after the current attempt; what was not committed stays in the spool. */
    async stop(): Promise<void> {
        this.stopped = true;
        this.wake?.();
        await this.loopDone;
    }

    /** Resolves when everything appended so far is shipped (tests, graceful drain). */
    async drained(timeoutMs = 60_000): Promise<void> {
        const deadline = Date.now() + timeoutMs;
        while (this.spool.shippedThroughSeq < this.spool.nextSequence - 1) {
            if (Date.now() > deadline)
                throw new Error(
                    `shipper: not drained after ${timeoutMs} ms (shipped through ${this.spool.shippedThroughSeq}, next seq ${this.spool.nextSequence}; last error: ${this.lastError})`,
                );
            await new Promise((r) => setTimeout(r, 10));
        }
    }

    private sleep(ms: number): Promise<void> {
        return new Promise((resolve) => {
            const t = setTimeout(() => {
                this.wake = undefined;
                resolve();
            }, ms);
            this.wake = () => {
                clearTimeout(t);
                this.wake = undefined;
                resolve();
            };
        });
    }

    /** Quarantines `e` durably and returns the marker that replaces it. @throws the spool's error */
    private async poison(e: UsageEvent, kind: "too-large" | "refused", reason: string, bytes: number): Promise<QuarantineMarker> {
        await this.spool.quarantine([{ reason: `poison: ${reason} (seq ${e.seq}, source ${e.source})`, record: e }]);
        this.poisoned++;
        for (const fn of this.poisonListeners) fn(kind);
        this.o.log?.("usage event quarantined: Kinesis will not take it", {
            level: "error",
            alert: "MeteringPoisonRecord",
            requestId: e.requestId.slice(0, 256),
            spoke: e.spoke,
            source: e.source,
            seq: e.seq,
            bytes,
            reason,
        });
        return quarantineMarker(e, reason, bytes);
    }

    private async loop(): Promise<void> {
        while (!this.stopped) {
            let batch: Awaited<ReturnType<Spool["readBatch"]>>;
            try {
                batch = await this.spool.readBatch(this.o.batchEvents, this.o.batchBytes);
            } catch (e) {
                this.o.log?.("spool read failed", { error: (e as Error).message });
                await this.sleep(this.o.maxBackoffMs);
                continue;
            }
            if (!batch) {
                await this.sleep(this.o.idleMs);
                continue;
            }
            let pending: ShipRecord[] = batch.events;
            while (pending.length && !this.stopped) {
                try {
                    // Records over the limit are never sent: Kinesis would refuse the whole call.
                    for (let i = 0; i < pending.length; i++) {
                        const r = pending[i];
                        if ("kind" in r) continue;
                        const bytes = kinesisRecordBytes(r);
                        if (bytes > this.o.maxRecordBytes)
                            pending[i] = await this.poison(
                                r,
                                "too-large",
                                `record is ${bytes} bytes (data + partition key), over the Kinesis record limit of ${this.o.maxRecordBytes}`,
                                bytes,
                            );
                    }
                    const out = await this.transport.put(pending);
                    const poison = new Map(out.poison.map((p) => [p.index, p.reason]));
                    for (const [i, reason] of poison) {
                        const r = pending[i];
                        // A marker itself refused (cannot happen within the limits): keep retrying it, never drop.
                        if ("kind" in r) {
                            out.retry.push(i);
                            continue;
                        }
                        pending[i] = await this.poison(r, "refused", reason, kinesisRecordBytes(r));
                    }
                    // Resend: throttled records, markers that replaced poison, records a poison call did not carry.
                    const again = new Set([...out.retry, ...poison.keys(), ...(out.unsent ?? [])]);
                    this.shippedEvents += pending.length - again.size;
                    pending = pending.filter((_, i) => again.has(i));
                    const throttled = out.retry.length;
                    if (throttled) throw new Error(`${throttled} record(s) refused (throttled or internal failure)`);
                    this.consecutiveFailures = 0;
                    this.lastSuccessAt = Date.now();
                } catch (e) {
                    this.failedAttempts++;
                    this.lastError = (e as Error).message || String(e);
                    const delay = backoffMs(this.consecutiveFailures++, this.o.minBackoffMs, this.o.maxBackoffMs);
                    if (this.consecutiveFailures === 1 || this.consecutiveFailures % 100 === 0) {
                        this.o.log?.("ship failed; retrying", {
                            error: this.lastError,
                            consecutiveFailures: this.consecutiveFailures,
                            retryInMs: delay,
                        });
                    }
                    await this.sleep(delay);
                }
            }
            if (pending.length) break; // stopped mid-batch: the cursor stays, the batch is resent after restart
            this.o.afterPut?.();
            try {
                await this.spool.commit(batch);
            } catch (e) {
                this.o.log?.("cursor commit failed", { error: (e as Error).message });
                await this.sleep(this.o.maxBackoffMs);
            }
        }
    }
}
