import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import * as path from "node:path";
import { AckSchema, bundlePaths, CurrentPointerSchema, verifyBundle } from "../shared/bundle";
import { expectBucketOwner } from "../shared/bucket-owner";
import { boundedRequestHandler } from "../shared/net";
import type { AuthConfig } from "./config";
import { errorMessage, type Logger } from "./log";
import type { AuthMetrics } from "./metrics";
import { PolicyIndex } from "./policy";

/** Result of one {@link BundleStore.syncOnce}. */
export type SyncResult = "updated" | "unchanged" | "rejected" | "error";

/** What {@link BundleStore} needs. */
export interface BundleStoreOptions {
    s3: S3Client;
    bucket: string;
    spoke: string;
    /** Hub's base64 raw Ed25519 public key. */
    publicKey: string;
    cachePath: string;
    pollIntervalMs: number;
    /**
     * Deadline of one whole sync (pointer, bundle, ACK), ms; default = pollIntervalMs. Each S3 call is aborted
     * when it runs out, so a hung connection can never stall the poll loop.
     */
    syncDeadlineMs?: number;
    metrics: AuthMetrics;
    log: Logger;
    /** Clock, ms since the Unix epoch. */
    now: () => number;
}

/**
 * S3 client for the hub's policy bucket. Credentials come from the SDK's default chain (IRSA / pod identity /
 * env). Timeouts are short and enforced ({@link boundedRequestHandler}: connect, response headers, and silence
 * while the body streams, each `s3.timeoutMs`) because a slow hub only delays the next revision: the
 * last-known-good keeps serving. A timed-out connection is destroyed, so the retry opens a fresh one. Every request
 * carries `ExpectedBucketOwner: s3.expectedBucketOwner` (the hub's account, {@link expectBucketOwner}): the client
 * serves the hub's policy bucket only.
 */
export function createS3Client(s3: AuthConfig["s3"]): S3Client {
    const client = new S3Client({
        region: s3.region,
        endpoint: s3.endpoint,
        forcePathStyle: s3.forcePathStyle,
        maxAttempts: 2,
        requestHandler: boundedRequestHandler({
            connectTimeoutMs: Math.min(2_000, s3.timeoutMs),
            requestTimeoutMs: s3.timeoutMs,
            socketTimeoutMs: s3.timeoutMs,
        }),
    });
    return expectBucketOwner(client, s3.expectedBucketOwner);
}

/**
 * Holds the policy bundle the auth service serves.
 *
 * Sync: read `spokes/<spoke>/current.json` → read the bundle it names → verify signature, content hash and
 * spoke ({@link verifyBundle}) and that it matches the pointer → index it ({@link PolicyIndex}) → write the
 * signed document to the cache file (temp file + fsync + rename, so a crash never leaves a torn file) → serve
 * it → ACK `spokes/<spoke>/acks/<revision>.json`.
 *
 * Invariants: the served revision never decreases (a pointer to a lower revision is rejected, and so is a
 * different bundle under the served revision); anything that fails verification is rejected and the
 * last-known-good keeps serving; at startup the cache file is re-verified before use, so a tampered cache
 * is as harmless as a tampered bucket. While nothing valid was ever loaded, {@link current} is undefined and
 * the service denies every request.
 */
export class BundleStore {
    private served: PolicyIndex | undefined;
    /** When the hub last confirmed the served revision as current, ms since the epoch. */
    private confirmedAtMs: number | undefined;
    private ackedRevision = 0;
    private inFlight: Promise<SyncResult> | undefined;
    /** Aborts the S3 calls of the sync in progress when its deadline passes. */
    private signal: AbortSignal | undefined;
    private timer: NodeJS.Timeout | undefined;
    private stopped = false;

    constructor(private readonly o: BundleStoreOptions) {}

    /** The bundle being served, or undefined when no valid bundle was ever loaded. */
    current(): PolicyIndex | undefined {
        return this.served;
    }

    /** Seconds since the hub last confirmed the served revision; undefined when none is loaded. */
    ageSeconds(): number | undefined {
        return this.confirmedAtMs === undefined ? undefined : Math.max(0, (this.o.now() - this.confirmedAtMs) / 1000);
    }

    /**
     * Loads the cache file (re-verified), syncs once with the hub, then polls every `pollIntervalMs`.
     * Never throws: a missing or invalid cache and an unreachable hub are logged and leave the service denying.
     */
    async start(): Promise<void> {
        this.stopped = false;
        await this.loadCache();
        await this.syncOnce();
        this.schedule();
    }

    /** Stops polling; waits for a sync in progress. */
    async stop(): Promise<void> {
        this.stopped = true;
        if (this.timer) clearTimeout(this.timer);
        this.timer = undefined;
        await this.inFlight;
    }

    /**
     * Fixed-rate polling: each sync starts `pollIntervalMs` after the previous one started (or when it ends, if
     * it took longer), and a sync is cut off at its deadline. So after a partition heals, the next poll (at
     * most one interval away) reads the hub again, whatever the partition did to the connection.
     */
    private schedule(lastStartMs = Date.now()): void {
        if (this.stopped) return;
        const delay = Math.max(0, lastStartMs + this.o.pollIntervalMs - Date.now());
        this.timer = setTimeout(() => {
            const started = Date.now();
            void this.syncOnce().finally(() => this.schedule(started));
        }, delay);
    }

    /**
     * Adopts the cache file if it verifies and is newer than what is served.
     * @returns whether it was adopted. Never throws.
     */
    async loadCache(): Promise<boolean> {
        let raw: string;
        let mtimeMs: number;
        try {
            raw = await fs.readFile(this.o.cachePath, "utf8");
            mtimeMs = (await fs.stat(this.o.cachePath)).mtimeMs;
        } catch (err) {
            this.o.log("info", "no policy bundle cache file", { path: this.o.cachePath, error: errorMessage(err) });
            return false;
        }
        try {
            const index = new PolicyIndex(verifyBundle(raw, this.o.publicKey, this.o.spoke));
            if (this.served && index.revision <= this.served.revision) return false;
            this.adopt(index, Math.min(mtimeMs, this.o.now()));
            this.o.log("info", "serving policy bundle from cache file", { revision: index.revision, path: this.o.cachePath });
            return true;
        } catch (err) {
            this.o.metrics.bundleSyncs.inc({ result: "rejected", reason: "cache_invalid" });
            this.o.log("warn", "policy bundle cache file rejected", { path: this.o.cachePath, error: errorMessage(err) });
            return false;
        }
    }

    /** One sync with the hub, bounded by its deadline. Concurrent calls share one run. Never throws. */
    syncOnce(): Promise<SyncResult> {
        if (!this.inFlight) {
            this.signal = AbortSignal.timeout(this.o.syncDeadlineMs ?? this.o.pollIntervalMs);
            this.inFlight = this.sync().finally(() => {
                this.inFlight = undefined;
            });
        }
        return this.inFlight;
    }

    private async sync(): Promise<SyncResult> {
        const { spoke } = this.o;
        let pointerText: string;
        try {
            pointerText = await this.get(bundlePaths.current(spoke));
        } catch (err) {
            return this.failed("error", "hub_unreachable", "cannot read current policy pointer", err);
        }
        let pointer: ReturnType<typeof CurrentPointerSchema.parse>;
        try {
            pointer = CurrentPointerSchema.parse(JSON.parse(pointerText));
        } catch (err) {
            return this.failed("rejected", "invalid_pointer", "current policy pointer is invalid", err);
        }
        const served = this.served;
        if (served && pointer.revision < served.revision) {
            return this.failed("rejected", "rollback", `pointer names revision ${pointer.revision}, lower than served ${served.revision}`);
        }
        if (served && pointer.revision === served.revision) {
            if (pointer.contentHash !== served.contentHash) {
                return this.failed("rejected", "hash_mismatch", `pointer content hash differs from served revision ${served.revision}`);
            }
            this.confirmedAtMs = this.o.now();
            await this.touchCache();
            await this.ack();
            this.o.metrics.bundleSyncs.inc({ result: "unchanged", reason: "" });
            return "unchanged";
        }
        let bundleText: string;
        try {
            bundleText = await this.get(pointer.key);
        } catch (err) {
            return this.failed("error", "hub_unreachable", `cannot read policy bundle revision ${pointer.revision}`, err);
        }
        let index: PolicyIndex;
        try {
            const bundle = verifyBundle(bundleText, this.o.publicKey, spoke);
            if (bundle.revision !== pointer.revision)
                throw new Error(`bundle revision ${bundle.revision} != pointer revision ${pointer.revision}`);
            if (bundle.contentHash !== pointer.contentHash)
                throw new Error(`bundle content hash != pointer content hash (revision ${pointer.revision})`);
            index = new PolicyIndex(bundle);
        } catch (err) {
            return this.failed("rejected", "verify_failed", `policy bundle revision ${pointer.revision} rejected`, err);
        }
        try {
            await this.writeCache(bundleText);
        } catch (err) {
            // Serving the newer (verified) revision beats holding on to an older one because of a local disk
            // problem; only a restart during this condition would fall back to the older cache.
            this.o.log("error", "cannot write policy bundle cache file", { path: this.o.cachePath, error: errorMessage(err) });
        }
        this.adopt(index, this.o.now());
        this.o.log("info", "policy bundle updated", { revision: index.revision, previous: served?.revision ?? null });
        await this.ack();
        this.o.metrics.bundleSyncs.inc({ result: "updated", reason: "" });
        return "updated";
    }

    private adopt(index: PolicyIndex, confirmedAtMs: number): void {
        this.served = index;
        this.confirmedAtMs = confirmedAtMs;
        this.o.metrics.bundleRevision.set(index.revision);
    }

    private failed(result: "error" | "rejected", reason: string, msg: string, err?: unknown): SyncResult {
        this.o.metrics.bundleSyncs.inc({ result, reason });
        this.o.log(result === "error" ? "warn" : "error", msg, {
            reason,
            servedRevision: this.served?.revision ?? null,
            ...(err === undefined ? {} : { error: errorMessage(err) }),
        });
        return result;
    }

    private async get(key: string): Promise<string> {
        const r = await this.o.s3.send(new GetObjectCommand({ Bucket: this.o.bucket, Key: key }), { abortSignal: this.signal });
        if (!r.Body) throw new Error(`s3://${this.o.bucket}/${key}: empty body`);
        return r.Body.transformToString("utf8");
    }

    /** Writes the ACK for the served revision once per process (again after a failure). Never throws. */
    private async ack(): Promise<void> {
        const s = this.served;
        if (!s || this.ackedRevision === s.revision) return;
        const ack = AckSchema.parse({
            spoke: this.o.spoke,
            revision: s.revision,
            contentHash: s.contentHash,
            at: new Date(this.o.now()).toISOString(),
        });
        try {
            await this.o.s3.send(
                new PutObjectCommand({
                    Bucket: this.o.bucket,
                    Key: bundlePaths.ack(this.o.spoke, s.revision),
                    Body: JSON.stringify(ack),
                    ContentType: "application/json",
                }),
                { abortSignal: this.signal },
            );
            this.ackedRevision = s.revision;
        } catch (err) {
            this.o.log("warn", "cannot write policy bundle ACK; retrying at the next sync", {
                revision: s.revision,
                error: errorMessage(err),
            });
        }
    }

    /** Temp file in the same directory + fsync + rename: readers see the old or the new file, never a torn one. */
    private async writeCache(text: string): Promise<void> {
        const dir = path.dirname(this.o.cachePath);
        await fs.mkdir(dir, { recursive: true });
        const tmp = path.join(dir, `.${path.basename(this.o.cachePath)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
        const fh = await fs.open(tmp, "w", 0o600);
        try {
            await fh.writeFile(text, "utf8");
            await fh.sync();
        } finally {
            await fh.close();
        }
        try {
            await fs.rename(tmp, this.o.cachePath);
        } catch (err) {
            await fs.rm(tmp, { force: true });
            throw err;
        }
    }

    /** Records the hub's confirmation in the cache file's mtime, so the bundle age survives a restart. */
    private async touchCache(): Promise<void> {
        const t = new Date(this.o.now());
        try {
            await fs.utimes(this.o.cachePath, t, t);
        } catch (err) {
            this.o.log("warn", "cannot touch policy bundle cache file", { path: this.o.cachePath, error: errorMessage(err) });
        }
    }
}
