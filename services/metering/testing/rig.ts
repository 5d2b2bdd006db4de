import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import type { Client } from "pg";
import { migrate } from "../../ledger/ledger";
import { startPostgres, type TestPostgres } from "../../ledger/testing/postgres";
import { processBatch } from "../../usage-consumer/handler";
import { pollStream, startKinesis, type TestKinesis } from "../../usage-consumer/testing/kinesis";

/**
 * The hub half of the metering pipeline on loopback, for tests and `npm run chaos`: a throwaway PostgreSQL
 * with the ledger schema and a Kinesis-compatible server (kinesalite), plus the consumer logic as the Lambda
 * runs it. `stop()` stops both and removes the temp directories made with {@link Rig.tempDir}.
 */
export interface Rig {
    pg: TestPostgres;
    db: Client;
    kin: TestKinesis;
    /** Creates a one-shard stream with a unique name. */
    stream(prefix: string): Promise<{ name: string; arn: string }>;
    /**
     * Runs the consumer over the whole stream from TRIM_HORIZON (every batch handed over `times` times: Lambda
     * retries), as spoke `spoke`'s stream. @returns records read (per pass)
     */
    consume(stream: { name: string; arn: string }, spoke: string, times?: number): Promise<number>;
    tempDir(prefix: string): string;
    stop(): Promise<void>;
}

let streams = 0;

export async function startRig(): Promise<Rig> {
    const [pg, kin] = await Promise.all([startPostgres(), startKinesis()]);
    const db = await pg.connect();
    await migrate(db);
    const dirs: string[] = [];
    return {
        pg,
        db,
        kin,
        async stream(prefix) {
            const name = `${prefix}-${process.pid}-${++streams}`;
            return { name, arn: await kin.createStream(name, 1) };
        },
        async consume(stream, spoke, times = 1) {
            return pollStream(kin.client, stream.name, stream.arn, 500, async (e) => {
                for (let i = 0; i < times; i++) await processBatch(db, e, { [stream.arn]: spoke });
            });
        },
        tempDir(prefix) {
            const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
            dirs.push(d);
            return d;
        },
        async stop() {
            await db.end().catch(() => undefined);
            await Promise.all([pg.stop(), kin.stop()]);
            for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
        },
    };
}

/** Empties the ledger (a scenario starts from nothing). */
export async function truncateLedger(db: Client): Promise<void> {
    await db.query("TRUNCATE usage_events, usage_hourly, usage_receipts, usage_quarantine, usage_spoke_quarantine");
}

/**
 * What the ledger holds: events counted, requests in the hourly aggregates (must equal `events`: more means a
 * double count), spoke-quarantine markers, and the request ids counted.
 */
export async function ledgerState(db: Client): Promise<{ events: number; aggregated: number; quarantined: number; ids: Set<string> }> {
    const ids = new Set((await db.query("SELECT request_id FROM usage_events")).rows.map((r) => r.request_id as string));
    const aggregated = Number((await db.query("SELECT COALESCE(sum(requests), 0)::bigint AS n FROM usage_hourly")).rows[0].n);
    const quarantined = (await db.query("SELECT count(*)::int AS n FROM usage_spoke_quarantine")).rows[0].n;
    return { events: ids.size, aggregated, quarantined, ids };
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => {
            const p = (s.address() as net.AddressInfo).port;
            s.close(() => resolve(p));
        });
    });
}
