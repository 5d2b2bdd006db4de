import { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compactHourly, hourlyAggregates, ingestBatch, migrate, rollupHourly } from "../ledger/ledger";
import { reconcile } from "../ledger/reconcile";
import { runReconciliation, spokeUsageStatus } from "../ledger/status";
import { startPostgres, type TestPostgres } from "../ledger/testing/postgres";
import type { UsageEvent } from "../shared/usage";
import { processBatch } from "../usage-consumer/handler";
import { ALL_SPOKES, GAP_METRIC, gapMetrics, reconcileWindow } from "./metric";
import { applyRoles, INGEST_ROLE, REPORTER_ROLE, roleStatements, scramVerifier } from "./roles";

function ev(i: number, over: Partial<UsageEvent> = {}): UsageEvent {
    return {
        requestId: `r-${i}`,
        spoke: "hn1",
        tenant: "acme",
        team: "search",
        keyId: "k-1",
        model: "m",
        endpoint: "e",
        inputTokens: 100,
        outputTokens: 10,
        cachedInputTokens: 0,
        status: 200,
        stream: true,
        truncated: false,
        usageSource: "reported",
        startedAt: "2026-11-29T09:58:00.000Z",
        endedAt: "2026-11-29T09:59:59.999Z",
        seq: i,
        source: "metering-0.aaaa0000",
        ...over,
    };
}
const STREAM = "arn:aws:kinesis:ap-southeast-1:123456789012:stream/platform-usage-hn1";
const batch = (events: unknown[]) => ({
    Records: events.map((e, i) => ({
        eventID: `shardId-0:${i}`,
        eventSourceARN: STREAM,
        kinesis: { data: Buffer.from(JSON.stringify(e)).toString("base64"), partitionKey: "p", sequenceNumber: String(i) },
    })),
});

describe("ledger roles: the consumer only appends, the reconciliation reads and rolls hours up (real PostgreSQL)", () => {
    let pg: TestPostgres;
    let admin: Client;
    const as = async (user: string) => {
        const c = new Client({ connectionString: pg.url.replace(/\/\/[^@]+@/, `//${user}@`) });
        await c.connect();
        return c;
    };
    beforeAll(async () => {
        pg = await startPostgres();
        admin = await pg.connect();
        // What the migrator Lambda does as the master user: schema, then roles (twice: idempotent).
        await migrate(admin);
        for (let i = 0; i < 2; i++)
            await applyRoles(admin, { ingest: "pw-ingest", reporter: "pw-reporter" }, (s) => admin.escapeLiteral(s));
    });
    afterAll(async () => {
        await admin?.end();
        await pg?.stop();
    });

    it("ledger_ingest runs the consumer's whole batch (quarantine + idempotent ingest) and nothing else", async () => {
        const db = await as(INGEST_ROLE);
        try {
            const out = await processBatch(db, batch([ev(0), ev(1), ev(3), "not json"]), { [STREAM]: "hn1" });
            expect(out).toMatchObject({ received: 3, inserted: 3, quarantined: 1 }); // "not json" is a JSON string, not an event
            // A record that does not parse is quarantined (INSERT + sequence on usage_quarantine).
            const bad = {
                Records: [
                    {
                        eventID: "shardId-0:99",
                        eventSourceARN: STREAM,
                        kinesis: { data: Buffer.from("{").toString("base64"), partitionKey: "p", sequenceNumber: "99" },
                    },
                ],
            };
            expect((await processBatch(db, bad, { [STREAM]: "hn1" })).quarantined).toBe(1);
            // No DDL, no DELETE: SQLSTATE 42501 insufficient_privilege.
            await expect(db.query("CREATE TABLE usage_x (a int)")).rejects.toMatchObject({ code: "42501" });
            await expect(migrate(db)).rejects.toMatchObject({ code: "42501" });
            await expect(db.query("DELETE FROM usage_events")).rejects.toMatchObject({ code: "42501" });
            await expect(db.query("TRUNCATE usage_events")).rejects.toMatchObject({ code: "42501" });
            // Append-only: nothing counted can be rewritten, the watermark cannot be moved, no rollup.
            for (const sql of [
                "UPDATE usage_events SET input_tokens = 0",
                "UPDATE usage_hourly SET requests = 0",
                "UPDATE usage_receipts SET seq = 0",
                "UPDATE usage_rollup SET rolled_until = now()",
                "SELECT * FROM usage_hourly_rollup(now())",
                "SELECT * FROM usage_hourly_compact(now(), now())",
            ]) {
                await expect(db.query(sql), sql).rejects.toMatchObject({ code: "42501" });
            }
        } finally {
            await db.end();
        }
    });

    it("ledger_reporter reads the reconciliation, records its run and cannot write the ledger", async () => {
        const db = await as(REPORTER_ROLE);
        try {
            const rows = await reconcile(db, { spoke: "hn1" });
            expect(rows.map((r) => [r.spoke, r.received, r.missing])).toEqual([["hn1", 3, 1]]); // seq 2 never arrived
            // The scheduled Lambda's path: the run lands in reconciliation_runs, which `npm run status` reads.
            const run = await runReconciliation(db, { spoke: "hn1" });
            expect(run.missing).toBe(1);
            expect((await spokeUsageStatus(db, { spokes: ["hn1"] }))[0].lastReconciliation).toMatchObject({ missing: 1 });
            await expect(db.query("DELETE FROM reconciliation_runs")).rejects.toMatchObject({ code: "42501" });
            await expect(db.query("INSERT INTO usage_quarantine (origin, reason, payload) VALUES ('x', 'y', 'z')")).rejects.toMatchObject({
                code: "42501",
            });
            await expect(db.query("UPDATE usage_hourly SET requests = 0")).rejects.toMatchObject({ code: "42501" });
            await expect(db.query("DELETE FROM usage_hourly")).rejects.toMatchObject({ code: "42501" });
            await expect(db.query("UPDATE usage_rollup SET rolled_until = now()")).rejects.toMatchObject({ code: "42501" });
            // Its one write to the ledger: rolling closed hours up and folding deltas, through the SECURITY DEFINER
            // functions, which keep every aggregate as it was.
            await ingestBatch(admin, [ev(4)]); // seq 4 after the run above: no gap in this test's later reads
            const want = await hourlyAggregates(db);
            expect(want.reduce((n, a) => n + a.requests, 0)).toBe(4);
            // The events are of an hour before the migration, so late: one delta per batch that counted some.
            expect(await rollupHourly(db, new Date().toISOString())).toMatchObject({ groups: 0 });
            expect(await compactHourly(db, { from: "2026-11-29T09:00:00Z", to: "2026-11-29T10:00:00Z" })).toEqual({ groups: 1, deltas: 2 });
            expect(await hourlyAggregates(db)).toEqual(want);
        } finally {
            await db.end();
        }
    });

    it("role statements carry SCRAM verifiers, never the plaintext passwords, and grant no DELETE, TRUNCATE or DDL", () => {
        const sql = roleStatements({ ingest: "plain-ingest-pw", reporter: "plain-reporter-pw" }, (s) => `'${s.replace(/'/g, "''")}'`).join(
            ";\n",
        );
        expect(sql).not.toContain("plain-ingest-pw");
        expect(sql).not.toContain("plain-reporter-pw");
        expect(sql.match(/PASSWORD 'SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+'/g)).toHaveLength(2);
        expect(sql).not.toMatch(/GRANT[^;]*(DELETE|TRUNCATE|CREATE|ALL)/);
        expect(() => scramVerifier("pässword")).toThrow(/printable ASCII/);
    });

    it("the verifier is the one PostgreSQL itself computes for the password (same salt and iterations), and it is what the role stores", async () => {
        // PostgreSQL hashes a plaintext password with its own SCRAM code (password_encryption = scram-sha-256); the
        // verifier computed client-side with that salt must be identical.
        await admin.query("SET password_encryption = 'scram-sha-256'");
        await admin.query("DROP ROLE IF EXISTS scram_probe");
        await admin.query("CREATE ROLE scram_probe LOGIN PASSWORD 'Abc123xyz-probe'");
        const stored: string = (await admin.query("SELECT rolpassword FROM pg_authid WHERE rolname = 'scram_probe'")).rows[0].rolpassword;
        const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(stored)!;
        expect(scramVerifier("Abc123xyz-probe", Buffer.from(m[2], "base64"), Number(m[1]))).toBe(stored);
        await admin.query("DROP ROLE scram_probe");
        // applyRoles stored a verifier for each login role (not a plaintext or MD5 password).
        const roles = await admin.query(
            `SELECT rolname, rolpassword FROM pg_authid WHERE rolname IN ('${INGEST_ROLE}', '${REPORTER_ROLE}') ORDER BY rolname`,
        );
        expect(roles.rows.map((r) => [r.rolname, /^SCRAM-SHA-256\$4096:/.test(r.rolpassword)])).toEqual([
            [INGEST_ROLE, true],
            [REPORTER_ROLE, true],
        ]);
    });
});

describe("gap metric (services/reconciler/metric.ts)", () => {
    const row = (spoke: string, hour: string, missing: number) => ({
        spoke,
        hour,
        received: 10,
        counted: 10,
        duplicates: 0,
        missing,
        quarantined: 0,
        sent: 10 + missing,
        gaps: [],
    });
    it("one datum per spoke (0 when nothing is missing) and the total under Spoke=all", () => {
        const data = gapMetrics(
            [
                row("hn1", "2026-11-29T09:00:00.000Z", 2),
                row("hn1", "2026-11-29T10:00:00.000Z", 3),
                row("sg1", "2026-11-29T10:00:00.000Z", 0),
            ],
            ["hcm1", "hn1", "sg1"],
        );
        expect(data.map((d) => [d.MetricName, d.Dimensions[0].Value, d.Value, d.Unit])).toEqual([
            [GAP_METRIC, "hcm1", 0, "Count"],
            [GAP_METRIC, "hn1", 5, "Count"],
            [GAP_METRIC, "sg1", 0, "Count"],
            [GAP_METRIC, ALL_SPOKES, 5, "Count"],
        ]);
    });
    it("the window ends at the start of the current hour", () => {
        expect(reconcileWindow(new Date("2026-11-30T10:42:13Z"), 48)).toEqual({
            from: "2026-11-28T10:00:00.000Z",
            to: "2026-11-30T10:00:00.000Z",
        });
    });
});
