import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { UsageEvent } from "../shared/usage";
import type { PendingEvent } from "./normalise";
import { backoffMs, Shipper, type Transport } from "./shipper";
import { encodeLine, Spool, SpoolFullError } from "./spool";

function pending(i: number): PendingEvent {
    return {
        requestId: `r-${i}`,
        spoke: "hn1",
        tenant: "acme",
        team: "search",
        keyId: "k",
        model: "m",
        endpoint: "e",
        inputTokens: i,
        outputTokens: 1,
        cachedInputTokens: 0,
        status: 200,
        stream: false,
        truncated: false,
        usageSource: "reported",
        startedAt: "2026-11-29T09:00:00.000Z",
        endedAt: "2026-11-29T09:00:01.000Z",
    };
}
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

let dir: string;
beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "spool-test-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

async function drainAll(s: Spool): Promise<UsageEvent[]> {
    const out: UsageEvent[] = [];
    for (;;) {
        const b = await s.readBatch(7, 1 << 20);
        if (!b) return out;
        out.push(...b.events);
        await s.commit(b);
    }
}

describe("spool", () => {
    it("stamps consecutive seqs and its source; concurrent appends are group-committed in order", async () => {
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        const results = await Promise.all(range(0, 10).map((i) => s.append([pending(i * 2), pending(i * 2 + 1)])));
        expect(results.flat().map((e) => e.seq)).toEqual(range(0, 20));
        expect(results[0][0].source).toMatch(/^metering-0\.[0-9a-f]{8}$/);
        expect((await drainAll(s)).map((e) => e.requestId)).toEqual(range(0, 20).map((i) => `r-${i}`));
        await s.close();
    });

    it("recovers after a crash: torn tail truncated, seqs continue, unshipped events kept, source kept", async () => {
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        await s.append(range(0, 5).map(pending));
        const b = await s.readBatch(2, 1 << 20);
        await s.commit(b!);
        const source = s.source;
        await s.close();
        // A write that never completed its fsync: half a line at the end of the active segment.
        const seg = path.join(dir, "segments", fs.readdirSync(path.join(dir, "segments"))[0]);
        const half = encodeLine({ ...pending(99), seq: 5, source }).subarray(0, 40);
        fs.appendFileSync(seg, half);
        const r = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        expect(r.source).toBe(source);
        expect(r.nextSequence).toBe(5);
        expect(r.shippedThroughSeq).toBe(1);
        const more = await r.append([pending(5)]);
        expect(more[0].seq).toBe(5);
        expect((await drainAll(r)).map((e) => e.seq)).toEqual([2, 3, 4, 5]);
        await r.close();
    });

    it("is bounded: a full spool refuses appends (nothing written) and accepts again after shipping frees segments", async () => {
        const line = encodeLine({ ...pending(0), seq: 0, source: "metering-0.00000000" }).length;
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: line * 10 + 40, segmentBytes: line * 4 });
        expect(line).toBe(355);
        await s.append(range(0, 9).map(pending));
        await expect(s.append(range(9, 12).map(pending))).rejects.toBeInstanceOf(SpoolFullError);
        expect(s.nextSequence).toBe(9);
        expect((await drainAll(s)).length).toBe(9);
        expect(s.usedBytes).toBe(0);
        expect((await s.append(range(9, 12).map(pending))).map((e) => e.seq)).toEqual([9, 10, 11]);
        await s.close();
    });

    it("rotates segments and continues seqs across them after restart", async () => {
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20, segmentBytes: 1024 });
        for (let i = 0; i < 20; i++) await s.append([pending(i)]);
        const segs = fs.readdirSync(path.join(dir, "segments")).sort();
        expect(segs.length).toBeGreaterThan(3);
        expect(segs[0]).toBe("00000000000000000000.log");
        await s.close();
        const r = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20, segmentBytes: 1024 });
        expect(r.nextSequence).toBe(20);
        expect((await drainAll(r)).map((e) => e.seq)).toEqual(range(0, 20));
        expect(fs.readdirSync(path.join(dir, "segments"))).toEqual([segs[segs.length - 1]]); // shipped segments deleted
        await r.close();
    });

    it("a corrupt line in the middle is quarantined with its reason, not shipped, not silently dropped", async () => {
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        await s.append(range(0, 3).map(pending));
        await s.close();
        const seg = path.join(dir, "segments", fs.readdirSync(path.join(dir, "segments"))[0]);
        const text = fs.readFileSync(seg, "utf8").split("\n");
        text[1] = text[1].replace('"inputTokens":1', '"inputTokens":9');
        fs.writeFileSync(seg, text.join("\n"));
        const r = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        expect((await drainAll(r)).map((e) => e.seq)).toEqual([0, 2]);
        const q = fs
            .readFileSync(path.join(dir, "quarantine.jsonl"), "utf8")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l));
        expect(q.length).toBe(1);
        expect(q[0].reason).toMatch(/^spool line CRC mismatch \(segment 00000000000000000000\.log offset \d+\)$/);
        await r.close();
    });
});

describe("shipper", () => {
    it("retries refused records and whole-call failures with backoff until everything is accepted once", async () => {
        const s = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        const accepted: number[] = [];
        let calls = 0;
        const flaky: Transport = {
            async put(events) {
                calls++;
                if (calls % 3 === 1) throw new Error("hub unreachable");
                // Refuse every other record once (throttling), as PutRecords does per record.
                const failed: number[] = [];
                events.forEach((e, i) => {
                    if (calls % 3 === 2 && i % 2 === 1) failed.push(i);
                    else accepted.push(e.seq);
                });
                return { retry: failed, poison: [] };
            },
        };
        const sh = new Shipper(s, flaky, { batchEvents: 10, minBackoffMs: 1, maxBackoffMs: 4, idleMs: 5 });
        sh.start();
        await s.append(range(0, 45).map(pending));
        await sh.drained(10_000);
        await sh.stop();
        expect([...accepted].sort((a, b) => a - b)).toEqual(range(0, 45));
        expect(sh.failedAttempts).toBeGreaterThan(5);
        await s.close();
    });

    it("backoff is full-jitter exponential, capped", () => {
        expect(backoffMs(0, 200, 30_000, () => 0.5)).toBe(100);
        expect(backoffMs(3, 200, 30_000, () => 0.5)).toBe(800);
        expect(backoffMs(20, 200, 30_000, () => 0.999)).toBe(29_970);
    });
});
