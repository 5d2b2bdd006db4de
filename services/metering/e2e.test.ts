import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import type { AddressInfo } from "node:net";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import type { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectedAggregates, hourlyAggregates, migrate } from "../ledger/ledger";
import { reconcile } from "../ledger/reconcile";
import { startPostgres, type TestPostgres } from "../ledger/testing/postgres";
import type { UsageEvent } from "../shared/usage";
import { processBatch } from "../usage-consumer/handler";
import { pollStream, startKinesis, TEST_CREDENTIALS, TEST_REGION, type TestKinesis } from "../usage-consumer/testing/kinesis";
import { LimitsApplier, type LimitsSink } from "./limits";
import { toOtlpRequest } from "./otlp";
import { createServer, MeteringService } from "./service";
import { KinesisTransport, Shipper } from "./shipper";
import { Spool } from "./spool";
import { syntheticRequests, type SyntheticRequest } from "./testing/synthetic";

/**
 * End to end with real parts: access-log records -> metering HTTP (OTLP JSON) -> fsynced spool -> shipper ->
 * Kinesis-compatible server (kinesalite) -> consumer logic as the Lambda runs it -> PostgreSQL ledger.
 */

let pg: TestPostgres;
let db: Client;
let kin: TestKinesis;
const tmp: string[] = [];

beforeAll(async () => {
    [pg, kin] = await Promise.all([startPostgres(), startKinesis()]);
    db = await pg.connect();
    await migrate(db);
});
afterAll(async () => {
    await db?.end();
    await Promise.all([pg?.stop(), kin?.stop()]);
    for (const d of tmp) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), "metering-e2e-"));
    tmp.push(d);
    return d;
}

/** A loopback port nothing listens on: "the hub is down". */
async function closedPort(): Promise<number> {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
    const port = (s.address() as AddressInfo).port;
    await new Promise<void>((r) => s.close(() => r()));
    return port;
}

async function post(port: number, reqs: SyntheticRequest[]): Promise<{ status: number; body: string }> {
    const res = await fetch(`http://127.0.0.1:${port}/v1/logs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(toOtlpRequest(reqs.map((r) => r.record))),
    });
    return { status: res.status, body: await res.text() };
}

/** Runs the consumer over the whole stream: every batch twice (Lambda retry), then again in overlapping batches. */
async function consume(stream: string, arn: string): Promise<number> {
    const spokes = { [arn]: "hn1" };
    const n = await pollStream(kin.client, stream, arn, 500, async (e) => {
        await processBatch(db, e, spokes);
        await processBatch(db, e, spokes);
    });
    await pollStream(kin.client, stream, arn, 333, async (e) => {
        await processBatch(db, e, spokes);
    });
    return n;
}

async function ledgerFor(prefix: string): Promise<number> {
    return (await db.query("SELECT count(*)::int AS n FROM usage_events WHERE request_id LIKE $1", [`${prefix}%`])).rows[0].n;
}

describe("metering end to end", () => {
    it("10k synthetic requests (streaming, truncated, duplicated) with the hub down, then back: ledger aggregates match exactly", async () => {
        await db.query("TRUNCATE usage_events, usage_hourly, usage_receipts, usage_quarantine");
        const stream = "usage-hn1",
            arn = await kin.createStream(stream, 2);
        const reqs = syntheticRequests(10_000, "hn1", 42);
        const leases: string[] = [];
        let tokens = 0;
        const counted = new Set<string>();
        const limits: LimitsSink = {
            async releaseLease(_e, lease) {
                leases.push(lease);
            },
            async addTokensOnce(e) {
                if (counted.has(e.requestId)) return false;
                counted.add(e.requestId);
                tokens += e.inputTokens + e.outputTokens;
                return true;
            },
        };

        const dir = tempDir();
        const spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 64 * 1024 * 1024 });
        const svc = new MeteringService({ spoke: "hn1", spool, limits });
        const applier = new LimitsApplier(spool, limits, dir, { idleMs: 10 });
        await applier.start();
        const down = new KinesisTransport({
            streamName: stream,
            region: TEST_REGION,
            credentials: TEST_CREDENTIALS,
            endpoint: `http://127.0.0.1:${await closedPort()}`,
            requestTimeoutMs: 500,
        });
        const shipper = new Shipper(spool, down, { minBackoffMs: 5, maxBackoffMs: 50, idleMs: 10 });
        shipper.start();
        const server = createServer(svc, spool, { maxSpoolBytes: 64 * 1024 * 1024 });
        await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
        const port = (server.address() as AddressInfo).port;

        // The collector sends batches of 200; every 7th batch is sent twice (a retry after a lost response).
        for (let i = 0, b = 0; i < reqs.length; i += 200, b++) {
            const batch = reqs.slice(i, i + 200);
            expect((await post(port, batch)).status).toBe(200);
            if (b % 7 === 3) expect((await post(port, batch)).status).toBe(200);
        }
        const metered = reqs.filter((r) => r.expected);
        expect(spool.nextSequence).toBe(metered.length);
        expect(shipper.shippedEvents).toBe(0);
        expect(shipper.failedAttempts).toBeGreaterThan(0);

        // The hub comes back: the spool drains.
        const up = new KinesisTransport({ streamName: stream, region: TEST_REGION, credentials: TEST_CREDENTIALS, endpoint: kin.endpoint });
        shipper.setTransport(up);
        await shipper.drained(30_000);
        await shipper.stop();
        await applier.caughtUp();
        await applier.stop();
        await svc.idle();
        await new Promise<void>((r) => server.close(() => r()));
        await spool.close();
        down.destroy();
        up.destroy();

        expect(await consume(stream, arn)).toBe(metered.length);
        const expected = metered.map((r) => r.expected!) as UsageEvent[];
        expect(await hourlyAggregates(db)).toEqual(expectedAggregates(expected));
        expect(await ledgerFor("hn1-req-42-")).toBe(metered.length);
        const truncated = metered.filter((r) => r.expected!.truncated);
        expect(
            (
                await db.query(
                    "SELECT count(*)::int AS n FROM usage_events WHERE truncated AND usage_source = 'estimated' AND output_tokens + input_tokens > 0",
                )
            ).rows[0].n,
        ).toBe(truncated.length);
        expect(truncated.length).toBeGreaterThan(1500);
        // Every metered request released its lease once and added its tokens once.
        expect(leases.length).toBe(metered.length);
        expect(new Set(leases).size).toBe(metered.length);
        expect(tokens).toBe(expected.reduce((n, e) => n + e.inputTokens + e.outputTokens, 0));
        // Reconciliation: what the spoke sent is what arrived, no gaps.
        const rep = await reconcile(db, { spoke: "hn1" });
        expect(rep.map((r) => r.missing)).toEqual([0, 0, 0]);
        expect(rep.reduce((n, r) => n + r.sent, 0)).toBe(metered.length);
        expect(rep.reduce((n, r) => n + r.counted, 0)).toBe(metered.length);
    });

    it("kill -9 between spool write and ship, and again mid-shipping: restart loses nothing, counts nothing twice", async () => {
        const stream = "usage-hn1-kill",
            arn = await kin.createStream(stream, 1);
        const dir = tempDir();
        const port = await closedPort();
        const env = (kinesisEndpoint: string) => ({
            ...process.env,
            METERING_SPOKE: "hn1",
            METERING_INSTANCE: "metering-0",
            METERING_SPOOL_DIR: dir,
            METERING_STREAM_NAME: stream,
            METERING_STREAM_REGION: TEST_REGION,
            METERING_KINESIS_ENDPOINT: kinesisEndpoint,
            METERING_PORT: String(port),
            METERING_BIND_ADDRESS: "127.0.0.1",
            AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
            AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
            AWS_REGION: TEST_REGION,
        });
        const start = async (endpoint: string): Promise<ChildProcess> => {
            const child = spawn(
                process.execPath,
                ["-r", path.join(__dirname, "..", "..", "tools", "register-esbuild.js"), path.join(__dirname, "main.ts")],
                { env: env(endpoint), stdio: "ignore" },
            );
            const deadline = Date.now() + 30_000;
            for (;;) {
                try {
                    if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return child;
                } catch {
                    /* not up yet */
                }
                if (Date.now() > deadline || child.exitCode !== null) throw new Error("metering did not start");
                await new Promise((r) => setTimeout(r, 100));
            }
        };
        const kill9 = (c: ChildProcess) =>
            new Promise<void>((r) => {
                c.once("exit", () => r());
                c.kill("SIGKILL");
            });
        const metric = async (name: string) =>
            Number(new RegExp(`^${name} (-?\\d+)`, "m").exec(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())![1]);

        const reqs = syntheticRequests(1000, "hn1", 9).filter((r) => r.expected);
        // Hub down: everything acknowledged is only in the spool when the process dies.
        let child = await start(`http://127.0.0.1:${await closedPort()}`);
        for (let i = 0; i < 400; i += 100) expect((await post(port, reqs.slice(i, i + 100))).status).toBe(200);
        expect(await metric("metering_shipped_through_seq")).toBe(-1);
        await kill9(child);

        // Restart with the hub up, more traffic, kill -9 again while it ships.
        child = await start(kin.endpoint);
        for (let i = 400; i < reqs.length; i += 100) expect((await post(port, reqs.slice(i, i + 100))).status).toBe(200);
        await kill9(child);

        child = await start(kin.endpoint);
        const deadline = Date.now() + 30_000;
        while ((await metric("metering_shipped_through_seq")) < reqs.length - 1) {
            if (Date.now() > deadline) throw new Error("not drained");
            await new Promise((r) => setTimeout(r, 100));
        }
        expect(await metric("metering_spool_next_seq")).toBe(reqs.length);
        await new Promise<void>((r) => {
            child.once("exit", () => r());
            child.kill("SIGTERM");
        });
        expect(child.exitCode).toBe(0);

        const delivered = await consume(stream, arn);
        expect(delivered).toBeGreaterThanOrEqual(reqs.length);
        expect(await ledgerFor("hn1-req-9-")).toBe(reqs.length);
        const rows = (
            await db.query(
                "SELECT request_id, input_tokens, output_tokens, truncated FROM usage_events WHERE request_id LIKE 'hn1-req-9-%'",
            )
        ).rows;
        const byId = new Map(rows.map((r) => [r.request_id, r]));
        for (const r of reqs) {
            const row = byId.get(r.expected!.requestId)!;
            expect([Number(row.input_tokens), Number(row.output_tokens), row.truncated]).toEqual([
                r.expected!.inputTokens,
                r.expected!.outputTokens,
                r.expected!.truncated,
            ]);
        }
        const rep = await reconcile(db, { spoke: "hn1" });
        expect(rep.reduce((n, r) => n + r.missing, 0)).toBe(0);
    });

    it("a malformed access-log record is quarantined with its reason at the spoke, the rest of the batch is spooled", async () => {
        const dir = tempDir();
        const spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
        const svc = new MeteringService({ spoke: "hn1", spool });
        const server = createServer(svc, spool, { maxSpoolBytes: 1 << 20 });
        await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
        const port = (server.address() as AddressInfo).port;
        const [a, b] = syntheticRequests(2, "hn1", 1)
            .filter((r) => r.expected)
            .concat(syntheticRequests(20, "hn1", 2).filter((r) => r.expected))
            .slice(0, 2);
        const broken = { ...b, record: { ...b.record, requestId: "-" } };
        const res = await post(port, [a, broken]);
        expect(res.status).toBe(200);
        expect(JSON.parse(res.body)).toEqual({
            partialSuccess: { rejectedLogRecords: "1", errorMessage: "quarantined: missing requestId (%REQ(X-REQUEST-ID)%)" },
        });
        const garbage = await fetch(`http://127.0.0.1:${port}/v1/logs`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: "{oops",
        });
        expect(garbage.status).toBe(400);
        expect(spool.nextSequence).toBe(1);
        const q = fs
            .readFileSync(path.join(dir, "quarantine.jsonl"), "utf8")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l));
        expect(q.map((x) => x.reason.split(":")[0])).toEqual(["missing requestId (%REQ(X-REQUEST-ID)%)", "unreadable OTLP request"]);
        expect(q[0].record.team).toBe(b.record.team);
        expect(q[1].record).toBe("{oops");
        await new Promise<void>((r) => server.close(() => r()));
        await spool.close();
    });
});
