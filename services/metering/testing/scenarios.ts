import * as fs from "fs";
import * as path from "path";
import { reconcile } from "../../ledger/reconcile";
import type { ChaosFigure } from "../../shared/chaos";
import { TEST_CREDENTIALS, TEST_REGION } from "../../usage-consumer/testing/kinesis";
import type { PendingEvent } from "../normalise";
import { KinesisTransport, Shipper } from "../shipper";
import { Spool } from "../spool";
import { ledgerState, Rig, truncateLedger } from "./rig";
import { startSilentProxy } from "./silent-proxy";

/**
 * Fault scenarios of the metering pipeline, shared by the tests (which assert on the figures) and
 * `npm run chaos` (which prints them). Each runs against real local servers of a {@link Rig}.
 */

/** A pending usage event ending now (token windows of the auth service are current). */
export function pendingEvent(prefix: string, i: number, over: Partial<PendingEvent> = {}): PendingEvent {
    const end = Date.now();
    return {
        requestId: `${prefix}-${i}`, spoke: "hn1", tenant: "acme", team: "search", keyId: `key-${i % 3}`, model: "meta-llama/Llama-3.3-70B-Instruct",
        endpoint: "inference/llama-70b", inputTokens: 100 + i, outputTokens: 10 + (i % 50), cachedInputTokens: 0, status: 200, stream: true, truncated: false,
        usageSource: "reported", startedAt: new Date(end - 1500).toISOString(), endedAt: new Date(end).toISOString(), ...over,
    };
}

/** Figure of a run: events lost / counted twice, given what the spoke acknowledged. */
async function figure(rig: Rig, expectedIds: string[], quarantinedIds: string[], recoverySeconds: number | null, detail: string): Promise<ChaosFigure & { quarantined: number }> {
    const st = await ledgerState(rig.db);
    const quarantinedHub = (await rig.db.query("SELECT request_id FROM usage_spoke_quarantine")).rows.map((r) => r.request_id as string);
    const accounted = new Set([...st.ids, ...quarantinedHub]);
    const lost = expectedIds.filter((id) => !accounted.has(id)).length;
    const wrongQuarantine = quarantinedIds.filter((id) => !quarantinedHub.includes(id)).length;
    const doubleCounted = Math.max(0, st.aggregated - st.events) + [...st.ids].filter((id) => quarantinedHub.includes(id)).length;
    return { recoverySeconds, lost: lost + wrongQuarantine, doubleCounted, quarantined: quarantinedHub.length, detail };
}

export interface SilentKinesisOptions {
    /** How long the partition lasts, ms. Default 3 s. */
    silenceMs?: number;
    /** Shipper request timeout, ms. Default 1 s. */
    requestTimeoutMs?: number;
    /** Give up waiting for the drain after this, ms. Default 20 s. */
    drainTimeoutMs?: number;
}

/**
 * Kinesis goes silent (connections open, nothing answers) while the spoke keeps spooling, then heals.
 * Figure: seconds from the heal until the spool is drained, events lost / double counted in the ledger.
 * `reconnected`: connections the shipper opened after the heal (it must give up the dead one).
 */
export async function kinesisSilentThenHealed(rig: Rig, o: SilentKinesisOptions = {}): Promise<ChaosFigure & { drained: boolean; reconnected: number }> {
    await truncateLedger(rig.db);
    const stream = await rig.stream("usage-silent");
    const kinPort = Number(new URL(rig.kin.endpoint).port);
    const proxy = await startSilentProxy({ host: "127.0.0.1", port: kinPort });
    const spool = await Spool.open({ dir: rig.tempDir("chaos-silent-"), instance: "metering-0", maxBytes: 64 << 20 });
    const transport = new KinesisTransport({
        streamName: stream.name, region: TEST_REGION, credentials: TEST_CREDENTIALS, endpoint: proxy.endpoint,
        requestTimeoutMs: o.requestTimeoutMs ?? 1000, connectionTimeoutMs: 500,
    });
    const shipper = new Shipper(spool, transport, { minBackoffMs: 50, maxBackoffMs: 500, idleMs: 20 });
    const ids: string[] = [];
    let drained = false, recoverySeconds: number | null = null, reconnected = 0;
    try {
        shipper.start();
        const first = await spool.append(Array.from({ length: 50 }, (_, i) => pendingEvent("silent", i)));
        ids.push(...first.map((e) => e.requestId));
        await shipper.drained(10_000);
        proxy.silence();
        // Traffic during the partition: the shipper's connection is now dead but open.
        for (let b = 0; b < 5; b++) {
            const st = await spool.append(Array.from({ length: 40 }, (_, i) => pendingEvent("silent", 50 + b * 40 + i)));
            ids.push(...st.map((e) => e.requestId));
            await new Promise((r) => setTimeout(r, (o.silenceMs ?? 3000) / 5));
        }
        const before = proxy.accepted;
        proxy.heal();
        const healedAt = Date.now();
        try {
            await shipper.drained(o.drainTimeoutMs ?? 20_000);
            drained = true;
            recoverySeconds = (Date.now() - healedAt) / 1000;
        } catch { /* figure shows it */ }
        reconnected = proxy.accepted - before;
    } finally {
        await shipper.stop();
        await spool.close();
        transport.destroy();
        await proxy.close();
    }
    await rig.consume(stream, "hn1", 2);
    const f = await figure(rig, ids, [], recoverySeconds, "");
    return { ...f, drained, reconnected, detail: `partition ${o.silenceMs ?? 3000} ms, ${ids.length} events, ${drained ? "drained" : "NOT drained"}, ${reconnected} new connection(s) after heal` };
}

/**
 * A batch holds one event over Kinesis' 1 MiB record limit (and, with `viaService`, one the service itself
 * refuses because the pre-check is turned off). Figure: the rest ships, the poison is quarantined on the spoke
 * and reported to the hub as quarantined; 0 lost, 0 double counted.
 */
export async function poisonRecordInBatch(rig: Rig, opts: { viaService?: boolean } = {}): Promise<ChaosFigure & { quarantined: number; spokeQuarantine: Array<{ reason: string; record: { requestId: string } }>; poisoned: number; missing: number }> {
    await truncateLedger(rig.db);
    const stream = await rig.stream("usage-poison");
    const dir = rig.tempDir("chaos-poison-");
    const spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 64 << 20 });
    const transport = new KinesisTransport({ streamName: stream.name, region: TEST_REGION, credentials: TEST_CREDENTIALS, endpoint: rig.kin.endpoint });
    const logs: Array<Record<string, unknown>> = [];
    const shipper = new Shipper(spool, transport, {
        minBackoffMs: 20, maxBackoffMs: 200, idleMs: 20, maxRecordBytes: opts.viaService ? 64 << 20 : undefined,
        log: (msg, f) => logs.push({ msg, ...f }),
    });
    const huge = "x".repeat(1024 * 1024 + 10);
    const events = Array.from({ length: 30 }, (_, i) => pendingEvent("poison", i, i === 7 ? { endpoint: huge } : {}));
    let drained = false;
    try {
        await spool.append(events.slice(0, 20));
        await spool.append(events.slice(20));
        shipper.start();
        try { await shipper.drained(15_000); drained = true; } catch { /* figure shows it */ }
    } finally {
        await shipper.stop();
        await spool.close();
        transport.destroy();
    }
    await rig.consume(stream, "hn1", 2);
    const ids = events.map((e) => e.requestId);
    const f = await figure(rig, ids, ["poison-7"], null, "");
    const q = fs.existsSync(path.join(dir, "quarantine.jsonl"))
        ? fs.readFileSync(path.join(dir, "quarantine.jsonl"), "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];
    const missing = (await reconcile(rig.db, { spoke: "hn1" })).reduce((n, r) => n + r.missing, 0);
    const alerts = logs.filter((l) => l.alert === "MeteringPoisonRecord").length;
    return {
        ...f, lost: f.lost + (drained ? 0 : 1), spokeQuarantine: q, poisoned: shipper.poisoned, missing,
        detail: `${events.length} events, 1 over 1 MiB${opts.viaService ? " (refused by the service)" : ""}: ${drained ? "rest shipped" : "stream BLOCKED"}, ${f.quarantined} quarantined at the hub, ${alerts} alert log line(s), reconciliation missing ${missing}`,
    };
}
