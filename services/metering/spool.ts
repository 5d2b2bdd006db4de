import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import { crc32 } from "node:zlib";
import type { UsageEvent } from "../shared/usage";
import type { PendingEvent } from "./normalise";

/** Options of {@link Spool.open}. */
export interface SpoolOptions {
    /** Directory of the spool (created if missing): `spool.json`, `segments/`, `cursor.json`, `quarantine.jsonl`. */
    dir: string;
    /** Metering instance name (pod name of the StatefulSet, stable across restarts). */
    instance: string;
    /** Upper bound of unshipped events + quarantine, bytes (disk use ≤ maxBytes + segmentBytes). */
    maxBytes: number;
    /** Segment size at which a new segment is started. Default 16 MiB. */
    segmentBytes?: number;
    /** fdatasync before acknowledging. Default true; only the benchmark's comparison turns it off. */
    fsync?: boolean;
    /**
     * Shipped segments kept for a lagging second reader ({@link Spool.retainFrom}: token accounting while Redis
     * is down), at most this many bytes; beyond it they are deleted and that reader skips ahead. Default maxBytes / 4.
     */
    maxRetainBytes?: number;
}

/** Thrown by append when the spool has no room: the caller answers 503 so the sender retries later. */
export class SpoolFullError extends Error {
    constructor(
        readonly bytes: number,
        readonly maxBytes: number,
    ) {
        super(`spool full: ${bytes} of ${maxBytes} bytes used (hub unreachable for too long, or shipping too slow)`);
    }
}

/** Position in the spool: segment file name and byte offset. */
export interface SpoolPosition {
    segment: string;
    offset: number;
}

/** Events read for shipping, and where the spool resumes once they are committed. */
export interface SpoolBatch {
    events: UsageEvent[];
    end: SpoolPosition;
}

/** Events read by a second reader ({@link Spool.readFrom}). */
export interface ReaderBatch extends SpoolBatch {
    /** Set when the reader's segment was deleted: events from `skippedFromSeq` up to the first returned were skipped. */
    skippedToSeq?: number;
}

interface Cursor extends SpoolPosition {
    shippedThroughSeq: number;
}

interface PendingAppend {
    events: PendingEvent[];
    resolve: (e: UsageEvent[]) => void;
    reject: (e: Error) => void;
}

const SEGMENT_RE = /^(\d{20})\.log$/;
const segName = (firstSeq: number) => `${String(firstSeq).padStart(20, "0")}.log`;

/** Encodes one spool line: `crc32(json)` as 8 hex digits, a space, the JSON, a newline. */
export function encodeLine(event: UsageEvent): Buffer {
    const json = Buffer.from(JSON.stringify(event), "utf8");
    return Buffer.concat([Buffer.from(`${crc32(json).toString(16).padStart(8, "0")} `, "ascii"), json, Buffer.from("\n")]);
}

/** Decodes one line (without its newline). @returns the event, or an error reason. */
export function decodeLine(line: Buffer): UsageEvent | string {
    if (line.length < 10 || line[8] !== 0x20) return "malformed spool line";
    const json = line.subarray(9);
    const want = parseInt(line.subarray(0, 8).toString("ascii"), 16);
    if (crc32(json) !== want) return "spool line CRC mismatch";
    try {
        return JSON.parse(json.toString("utf8")) as UsageEvent;
    } catch {
        return "spool line is not JSON";
    }
}

async function fsyncDir(dir: string): Promise<void> {
    const h = await fsp.open(dir, "r");
    try {
        await h.sync();
    } finally {
        await h.close();
    }
}

/** Writes a small JSON file atomically: temp file, fsync, rename, fsync directory. */
async function writeJsonAtomic(file: string, value: unknown, sync: boolean): Promise<void> {
    const tmp = `${file}.tmp`;
    const h = await fsp.open(tmp, "w");
    try {
        await h.writeFile(JSON.stringify(value));
        if (sync) await h.datasync();
    } finally {
        await h.close();
    }
    await fsp.rename(tmp, file);
    if (sync) await fsyncDir(path.dirname(file));
}

/**
 * Durable local spool for usage events (one per metering instance, on its PersistentVolume).
 *
 * Layout under `dir`:
 * - `spool.json`               `{ spoolId, createdAt }`, created once; `source` = `<instance>.<spoolId>`, so a
 *                              new volume starts a new sequence (seq 0) under a new source
 * - `segments/<20-digit first seq>.log`  append-only segments; one event per line: `<crc32 hex8> <json>\n`
 * - `cursor.json`              `{ segment, offset, shippedThroughSeq }`: everything before is at the hub
 * - `quarantine.jsonl`         records that could not become usage events, with the reason
 *
 * Durability: {@link Spool.append} resolves only after `fdatasync` of the segment (and of the directory when a
 * segment was created), so an acknowledged event survives `kill -9` and power loss. Concurrent appends are
 * group-committed: one write and one fsync for everything queued while the previous fsync ran.
 * Recovery ({@link Spool.open}): a torn tail (a write that never finished its fsync, so was never
 * acknowledged) is truncated; sequence numbers continue after the last durable event.
 * Bound: unshipped events + quarantine never exceed `maxBytes` (the disk holds at most one more segment of
 * shipped events); a full spool refuses appends ({@link SpoolFullError}), it never drops.
 *
 * Construct with {@link Spool.open} (the constructor is private). Emits `"append"` after each group commit
 * resolved its appends (a shipper waiting for work listens to it).
 * @throws SpoolFullError from {@link Spool.append} and {@link Spool.quarantine} when the events do not fit in `maxBytes`
 * @throws Error from {@link Spool.open} when the directory is not writable or the cursor names a missing segment, from
 *   {@link Spool.readFrom} when a reader position names a segment that is not in the spool and is not older than its
 *   oldest (a deleted one restarts the reader instead), from {@link Spool.append} when the
 *   spool is closed; SyntaxError from {@link Spool.open} when `spool.json` or `cursor.json` is not JSON; the file
 *   system's error (`NodeJS.ErrnoException`) when a read, write or fsync fails
 */
export class Spool extends EventEmitter {
    /** Metering instance + spool id: the `source` of every event this spool stamps. */
    readonly source: string;
    private readonly segDir: string;
    private readonly segmentBytes: number;
    private readonly sync: boolean;
    private segments: Array<{ name: string; size: number }> = [];
    private active!: fsp.FileHandle;
    private nextSeq = 0;
    private cursor!: Cursor;
    private quarantineBytes = 0;
    private queue: PendingAppend[] = [];
    private flushing = false;
    private closed = false;
    private retainFloor: (() => string | undefined) | undefined;

    private constructor(
        private readonly opts: SpoolOptions,
        spoolId: string,
    ) {
        super();
        this.source = `${opts.instance}.${spoolId}`;
        this.segDir = path.join(opts.dir, "segments");
        this.segmentBytes = opts.segmentBytes ?? 16 * 1024 * 1024;
        this.sync = opts.fsync ?? true;
    }

    /**
     * Opens (creating if needed) and recovers a spool.
     * @throws Error when the directory is not writable or the cursor names a segment that does not exist
     */
    static async open(opts: SpoolOptions): Promise<Spool> {
        await fsp.mkdir(path.join(opts.dir, "segments"), { recursive: true });
        const metaFile = path.join(opts.dir, "spool.json");
        let meta: { spoolId: string };
        try {
            meta = JSON.parse(await fsp.readFile(metaFile, "utf8"));
        } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
            meta = { spoolId: randomBytes(4).toString("hex") };
            await writeJsonAtomic(metaFile, { ...meta, createdAt: new Date().toISOString() }, true);
        }
        const s = new Spool(opts, meta.spoolId);
        await s.recover();
        return s;
    }

    private async recover(): Promise<void> {
        const names = (await fsp.readdir(this.segDir)).filter((n) => SEGMENT_RE.test(n)).sort();
        for (const n of names) this.segments.push({ name: n, size: (await fsp.stat(path.join(this.segDir, n))).size });
        try {
            this.cursor = JSON.parse(await fsp.readFile(path.join(this.opts.dir, "cursor.json"), "utf8"));
        } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
            this.cursor = { segment: this.segments[0]?.name ?? segName(0), offset: 0, shippedThroughSeq: -1 };
        }
        if (this.segments.length === 0) {
            this.segments.push({ name: this.cursor.segment, size: 0 });
            await fsp.writeFile(path.join(this.segDir, this.cursor.segment), "");
            await fsyncDir(this.segDir);
        }
        if (!this.segments.some((x) => x.name === this.cursor.segment)) {
            throw new Error(`spool ${this.opts.dir}: cursor names segment ${this.cursor.segment}, which does not exist`);
        }
        // Torn tail: keep everything up to the end of the last line that decodes; drop the rest.
        const last = this.segments[this.segments.length - 1];
        const file = path.join(this.segDir, last.name);
        const buf = await fsp.readFile(file);
        let goodEnd = 0,
            lastSeq = -1,
            pos = 0;
        while (pos < buf.length) {
            const nl = buf.indexOf(0x0a, pos);
            if (nl < 0) break;
            const ev = decodeLine(buf.subarray(pos, nl));
            if (typeof ev !== "string") {
                goodEnd = nl + 1;
                lastSeq = ev.seq;
            }
            pos = nl + 1;
        }
        if (goodEnd < buf.length) {
            await fsp.truncate(file, goodEnd);
            last.size = goodEnd;
        }
        if (this.cursor.segment === last.name && this.cursor.offset > goodEnd) this.cursor.offset = goodEnd;
        this.nextSeq = Math.max(Number(SEGMENT_RE.exec(last.name)![1]), lastSeq + 1, this.cursor.shippedThroughSeq + 1);
        this.active = await fsp.open(file, "a");
        try {
            this.quarantineBytes = (await fsp.stat(path.join(this.opts.dir, "quarantine.jsonl"))).size;
        } catch {
            this.quarantineBytes = 0;
        }
    }

    /**
     * Bytes counted against `maxBytes`: unshipped events + quarantine. Shipped events still in the active
     * segment are reclaimed at the next rotation, so the volume needs `maxBytes + segmentBytes`.
     */
    get usedBytes(): number {
        return this.unshippedBytes + this.quarantineBytes;
    }

    /** Bytes on disk (segments + quarantine). */
    get bytes(): number {
        return this.segments.reduce((n, s) => n + s.size, 0) + this.quarantineBytes;
    }

    /** Bytes of events not yet shipped (after the cursor). */
    get unshippedBytes(): number {
        let n = 0,
            after = false;
        for (const s of this.segments) {
            if (s.name === this.cursor.segment) {
                n += s.size - this.cursor.offset;
                after = true;
            } else if (after) n += s.size;
        }
        return n;
    }

    /** The seq the next appended event gets. */
    get nextSequence(): number {
        return this.nextSeq;
    }

    /** Highest seq the hub has acknowledged (-1: none yet). */
    get shippedThroughSeq(): number {
        return this.cursor.shippedThroughSeq;
    }

    /**
     * Stamps `events` with consecutive seqs and this spool's source, appends them, and resolves after fsync.
     * @throws SpoolFullError when they do not fit in `maxBytes` (nothing of this call is written)
     * @throws the file system's error when the write or fsync fails (nothing of this call is kept; the seqs are reused)
     */
    append(events: PendingEvent[]): Promise<UsageEvent[]> {
        if (this.closed) return Promise.reject(new Error("spool is closed"));
        if (events.length === 0) return Promise.resolve([]);
        return new Promise((resolve, reject) => {
            this.queue.push({ events, resolve, reject });
            void this.flush();
        });
    }

    private async flush(): Promise<void> {
        if (this.flushing) return;
        this.flushing = true;
        try {
            while (this.queue.length) await this.commitGroup(this.queue.splice(0));
        } finally {
            this.flushing = false;
        }
    }

    private async commitGroup(group: PendingAppend[]): Promise<void> {
        const seq0 = this.nextSeq;
        const accepted: Array<{ p: PendingAppend; stamped: UsageEvent[] }> = [];
        const chunks: Buffer[] = [];
        let size = 0;
        for (const p of group) {
            const stamped = p.events.map((e, i) => ({ ...e, seq: this.nextSeq + i, source: this.source }));
            const lines = stamped.map(encodeLine);
            const n = lines.reduce((a, b) => a + b.length, 0);
            if (this.usedBytes + size + n > this.opts.maxBytes) {
                p.reject(new SpoolFullError(this.usedBytes + size, this.opts.maxBytes));
                continue;
            }
            this.nextSeq += stamped.length;
            chunks.push(...lines);
            size += n;
            accepted.push({ p, stamped });
        }
        if (accepted.length === 0) return;
        let seg = this.segments[this.segments.length - 1];
        try {
            if (seg.size > 0 && seg.size + size > this.segmentBytes) seg = await this.rotate(seq0);
            await this.active.write(Buffer.concat(chunks, size));
            if (this.sync) await this.active.datasync();
            seg.size += size;
        } catch (e) {
            this.nextSeq = seq0;
            await this.active.truncate(seg.size).catch(() => undefined);
            for (const a of accepted) a.p.reject(e as Error);
            return;
        }
        for (const a of accepted) a.p.resolve(a.stamped);
        this.emit("append");
    }

    private async rotate(firstSeq: number): Promise<{ name: string; size: number }> {
        const name = segName(firstSeq);
        const h = await fsp.open(path.join(this.segDir, name), "a");
        if (this.sync) await fsyncDir(this.segDir);
        await this.active.close();
        this.active = h;
        const seg = { name, size: 0 };
        this.segments.push(seg);
        return seg;
    }

    /**
     * Appends records that could not become usage events, with their reason, and fsyncs. Never silently drops.
     * @throws SpoolFullError when they do not fit; the file system's error when the write fails
     */
    async quarantine(items: Array<{ reason: string; record: unknown }>): Promise<void> {
        if (items.length === 0) return;
        const at = new Date().toISOString();
        const buf = Buffer.from(items.map((i) => `${JSON.stringify({ at, reason: i.reason, record: i.record })}\n`).join(""), "utf8");
        if (this.usedBytes + buf.length > this.opts.maxBytes) throw new SpoolFullError(this.usedBytes, this.opts.maxBytes);
        const h = await fsp.open(path.join(this.opts.dir, "quarantine.jsonl"), "a");
        try {
            await h.write(buf);
            if (this.sync) await h.datasync();
        } finally {
            await h.close();
        }
        this.quarantineBytes += buf.length;
    }

    /**
     * Reads up to `maxEvents` events / about `maxBytes` bytes after the cursor (only fsynced data). Lines that
     * fail their CRC (media corruption) are moved to the quarantine with the reason and skipped.
     * @returns undefined when everything is shipped
     */
    async readBatch(maxEvents: number, maxBytes: number): Promise<SpoolBatch | undefined> {
        let pos: SpoolPosition = { segment: this.cursor.segment, offset: this.cursor.offset };
        for (;;) {
            const i = this.segments.findIndex((s) => s.name === pos.segment);
            const seg = this.segments[i];
            const isLast = i === this.segments.length - 1;
            if (pos.offset >= seg.size) {
                if (isLast) return undefined;
                pos = { segment: this.segments[i + 1].name, offset: 0 };
                continue;
            }
            const len = Math.min(seg.size - pos.offset, Math.max(maxBytes, 64 * 1024));
            const buf = Buffer.alloc(len);
            const h = await fsp.open(path.join(this.segDir, seg.name), "r");
            try {
                await h.read(buf, 0, len, pos.offset);
            } finally {
                await h.close();
            }
            const events: UsageEvent[] = [];
            const bad: Array<{ reason: string; record: unknown }> = [];
            let p = 0;
            while (p < len && events.length < maxEvents && p < maxBytes) {
                const nl = buf.indexOf(0x0a, p);
                if (nl < 0) break;
                const ev = decodeLine(buf.subarray(p, nl));
                if (typeof ev === "string")
                    bad.push({
                        reason: `${ev} (segment ${seg.name} offset ${pos.offset + p})`,
                        record: buf.subarray(p, nl).toString("utf8"),
                    });
                else events.push(ev);
                p = nl + 1;
            }
            if (p === 0) {
                // A single line longer than the read: only possible with corruption of the newline bytes.
                bad.push({ reason: `unterminated spool line (segment ${seg.name} offset ${pos.offset})`, record: buf.toString("utf8") });
                p = len;
            }
            await this.quarantine(bad);
            const end = { segment: seg.name, offset: pos.offset + p };
            if (events.length) return { events, end };
            await this.commit({ events: [], end });
            pos = end;
        }
    }

    /**
     * Keeps segments from the one `floor` names (a second reader's position) until that reader passes them,
     * within `maxRetainBytes` of shipped data.
     */
    retainFrom(floor: () => string | undefined): void {
        this.retainFloor = floor;
    }

    /** Position of the first durable event (start of the oldest segment on disk). */
    get start(): SpoolPosition {
        return { segment: this.segments[0].name, offset: 0 };
    }

    /** Ship cursor position (a second reader without its own cursor starts here). */
    get shipPosition(): SpoolPosition {
        return { segment: this.cursor.segment, offset: this.cursor.offset };
    }

    /**
     * A second reader (token accounting): up to `maxEvents` durable events after `from`, without touching the
     * ship cursor; lines that fail their CRC are skipped (the shipper quarantines them). When `from` names a
     * segment that was deleted, reading restarts at the oldest segment and `skippedToSeq` says so.
     * @returns undefined when `from` is at the end of the durable data
     */
    async readFrom(from: SpoolPosition, maxEvents: number, maxBytes: number): Promise<ReaderBatch | undefined> {
        let pos = from;
        let skippedToSeq: number | undefined;
        if (!this.segments.some((x) => x.name === pos.segment)) {
            if (pos.segment < this.segments[0].name) {
                pos = this.start;
                skippedToSeq = Number(SEGMENT_RE.exec(pos.segment)![1]);
            } else throw new Error(`spool ${this.opts.dir}: reader position names segment ${pos.segment}, which does not exist`);
        }
        for (;;) {
            const i = this.segments.findIndex((x) => x.name === pos.segment);
            const seg = this.segments[i];
            if (pos.offset >= seg.size) {
                if (i === this.segments.length - 1) return undefined;
                pos = { segment: this.segments[i + 1].name, offset: 0 };
                continue;
            }
            const len = Math.min(seg.size - pos.offset, Math.max(maxBytes, 64 * 1024));
            const buf = Buffer.alloc(len);
            const h = await fsp.open(path.join(this.segDir, seg.name), "r");
            try {
                await h.read(buf, 0, len, pos.offset);
            } finally {
                await h.close();
            }
            const events: UsageEvent[] = [];
            let p = 0;
            while (p < len && events.length < maxEvents && p < maxBytes) {
                const nl = buf.indexOf(0x0a, p);
                if (nl < 0) break;
                const ev = decodeLine(buf.subarray(p, nl));
                if (typeof ev !== "string") events.push(ev);
                p = nl + 1;
            }
            if (p === 0) p = len;
            const end = { segment: seg.name, offset: pos.offset + p };
            if (events.length) return { events, end, skippedToSeq };
            pos = end;
        }
    }

    /**
     * Marks everything before `batch.end` shipped (cursor written atomically and fsynced), then deletes
     * segments that are entirely shipped (never the active one).
     */
    async commit(batch: SpoolBatch): Promise<void> {
        const lastSeq = batch.events.length ? batch.events[batch.events.length - 1].seq : this.cursor.shippedThroughSeq;
        this.cursor = { ...batch.end, shippedThroughSeq: Math.max(this.cursor.shippedThroughSeq, lastSeq) };
        await writeJsonAtomic(path.join(this.opts.dir, "cursor.json"), this.cursor, this.sync);
        let idx = this.segments.findIndex((s) => s.name === this.cursor.segment);
        const floor = this.retainFloor?.();
        const floorIdx = floor === undefined ? -1 : this.segments.findIndex((s) => s.name === floor);
        if (floorIdx >= 0 && floorIdx < idx) {
            const retained = this.segments.slice(floorIdx, idx).reduce((n, s) => n + s.size, 0);
            if (retained <= (this.opts.maxRetainBytes ?? this.opts.maxBytes / 4)) idx = floorIdx;
        }
        const done = this.segments.slice(0, idx);
        if (done.length) {
            for (const s of done) await fsp.unlink(path.join(this.segDir, s.name)).catch(() => undefined);
            this.segments = this.segments.slice(idx);
            if (this.sync) await fsyncDir(this.segDir);
        }
    }

    /** Waits for queued appends, then closes the active segment. */
    async close(): Promise<void> {
        this.closed = true;
        while (this.flushing || this.queue.length) await new Promise((r) => setTimeout(r, 5));
        await this.active.close();
    }
}

/** Synchronous directory check used by the health endpoint: true when the spool directory is writable. */
export function spoolWritable(dir: string): boolean {
    try {
        fs.accessSync(dir, fs.constants.W_OK);
        return true;
    } catch {
        return false;
    }
}
