import { KinesisClient, PutRecordsCommand } from "@aws-sdk/client-kinesis";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { createHash } from "crypto";
import type { UsageEvent } from "../shared/usage";
import type { Spool } from "./spool";

/** Where shipped events go. The hub's Kinesis stream in production; a fake in unit tests. */
export interface Transport {
    /**
     * Sends events. @returns indexes (into `events`) of those not accepted, to be retried.
     * @throws when the whole call failed (network, auth, throttling of the call); everything is retried
     */
    put(events: UsageEvent[]): Promise<number[]>;
}

/** Kinesis `PutRecords` limits (AWS Kinesis API reference): 500 records and 5 MiB per call, 256-char partition key. */
export const KINESIS_MAX_RECORDS = 500;
export const KINESIS_MAX_BATCH_BYTES = 5 * 1024 * 1024;

/** Partition key: the request id (duplicates of a request land on one shard), hashed if over 256 chars. */
export function partitionKey(e: UsageEvent): string {
    return e.requestId.length <= 256 ? e.requestId : createHash("sha256").update(e.requestId).digest("hex");
}

export interface KinesisTransportOptions {
    streamName: string;
    region: string;
    /** Endpoint override (tests: the in-process Kinesis-compatible server). */
    endpoint?: string;
    /** Static credentials (tests); production uses the SDK's default chain (the spoke identity). */
    credentials?: { accessKeyId: string; secretAccessKey: string };
    /** Per-call timeout, ms. Default 10 s. */
    requestTimeoutMs?: number;
}

/** Ships to the hub's usage stream with `PutRecords`. HTTP/1.1 keep-alive (PutRecords needs no HTTP/2). */
export class KinesisTransport implements Transport {
    private readonly client: KinesisClient;

    constructor(private readonly opts: KinesisTransportOptions) {
        this.client = new KinesisClient({
            region: opts.region,
            endpoint: opts.endpoint,
            credentials: opts.credentials,
            maxAttempts: 1, // the shipper owns retries and backoff
            requestHandler: new NodeHttpHandler({ requestTimeout: opts.requestTimeoutMs ?? 10_000, connectionTimeout: 3_000 }),
        });
    }

    async put(events: UsageEvent[]): Promise<number[]> {
        const out = await this.client.send(new PutRecordsCommand({
            StreamName: this.opts.streamName,
            Records: events.map((e) => ({ Data: Buffer.from(JSON.stringify(e), "utf8"), PartitionKey: partitionKey(e) })),
        }));
        const failed: number[] = [];
        (out.Records ?? []).forEach((r, i) => { if (r.ErrorCode) failed.push(i); });
        if ((out.Records ?? []).length !== events.length) throw new Error(`PutRecords returned ${out.Records?.length ?? 0} results for ${events.length} records`);
        return failed;
    }

    destroy(): void { this.client.destroy(); }
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
 */
export class Shipper {
    shippedEvents = 0;
    failedAttempts = 0;
    consecutiveFailures = 0;
    lastError: string | undefined;
    lastSuccessAt: number | undefined;
    private stopped = true;
    private loopDone: Promise<void> = Promise.resolve();
    private wake: (() => void) | undefined;
    private readonly o: Required<Omit<ShipperOptions, "log">> & Pick<ShipperOptions, "log">;

    constructor(private readonly spool: Spool, private transport: Transport, opts: ShipperOptions = {}) {
        this.o = {
            batchEvents: Math.min(opts.batchEvents ?? KINESIS_MAX_RECORDS, KINESIS_MAX_RECORDS),
            batchBytes: Math.min(opts.batchBytes ?? 4 * 1024 * 1024, KINESIS_MAX_BATCH_BYTES - 512 * 1024),
            minBackoffMs: opts.minBackoffMs ?? 200,
            maxBackoffMs: opts.maxBackoffMs ?? 30_000,
            idleMs: opts.idleMs ?? 1000,
            log: opts.log,
        };
        spool.on("append", () => this.wake?.());
    }

    /** Replaces the transport (tests: "the hub comes back" at a new address). */
    setTransport(t: Transport): void { this.transport = t; this.wake?.(); }

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
            if (Date.now() > deadline) throw new Error(`shipper: not drained after ${timeoutMs} ms (shipped through ${this.spool.shippedThroughSeq}, next seq ${this.spool.nextSequence}; last error: ${this.lastError})`);
            await new Promise((r) => setTimeout(r, 10));
        }
    }

    private sleep(ms: number): Promise<void> {
        return new Promise((resolve) => {
            const t = setTimeout(() => { this.wake = undefined; resolve(); }, ms);
            this.wake = () => { clearTimeout(t); this.wake = undefined; resolve(); };
        });
    }

    private async loop(): Promise<void> {
        while (!this.stopped) {
            let batch;
            try {
                batch = await this.spool.readBatch(this.o.batchEvents, this.o.batchBytes);
            } catch (e) {
                this.o.log?.("spool read failed", { error: (e as Error).message });
                await this.sleep(this.o.maxBackoffMs);
                continue;
            }
            if (!batch) { await this.sleep(this.o.idleMs); continue; }
            let pending = batch.events;
            while (pending.length && !this.stopped) {
                try {
                    const failed = await this.transport.put(pending);
                    this.shippedEvents += pending.length - failed.length;
                    pending = failed.map((i) => pending[i]);
                    if (pending.length) throw new Error(`${pending.length} record(s) refused (throttled)`);
                    this.consecutiveFailures = 0;
                    this.lastSuccessAt = Date.now();
                } catch (e) {
                    this.failedAttempts++;
                    this.lastError = (e as Error).message || String(e);
                    const delay = backoffMs(this.consecutiveFailures++, this.o.minBackoffMs, this.o.maxBackoffMs);
                    if (this.consecutiveFailures === 1 || this.consecutiveFailures % 100 === 0) {
                        this.o.log?.("ship failed; retrying", { error: this.lastError, consecutiveFailures: this.consecutiveFailures, retryInMs: delay });
                    }
                    await this.sleep(delay);
                }
            }
            if (pending.length) break; // stopped mid-batch: the cursor stays, the batch is resent after restart
            try {
                await this.spool.commit(batch);
            } catch (e) {
                this.o.log?.("cursor commit failed", { error: (e as Error).message });
                await this.sleep(this.o.maxBackoffMs);
            }
        }
    }
}
