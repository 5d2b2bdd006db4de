/**
 * `npm run status` (tools/status.ts) against the local stand-ins of the hub: an S3 API (s3rver) holding the policy
 * bucket's `current.json` / ACKs (layout services/shared/bundle.ts bundlePaths) and a real PostgreSQL with the
 * ledger schema.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUCKET, BUCKET_OWNER_ACCOUNT, ownerCheckedClient, type S3Server, startS3 } from "../services/auth/test/harness";
import { ingestBatch, recordSpokeQuarantine } from "../services/ledger/ledger";
import { runReconciliation } from "../services/ledger/status";
import { useLedgerDb } from "../services/ledger/testing/ledger-db";
import { plainEvent } from "../services/ledger/testing/events";
import { bundlePaths } from "../services/shared/bundle";
import type { UsageEvent } from "../services/shared/usage";
import { accessLogBucketOf } from "../lib/hub-bucket-names";
import { accessLogProblem, collectStatus, formatStatus, ledgerFromDb, spokesFromHubOutputs } from "../tools/status";
import { ROOT } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

const ledger = useLedgerDb();
let s3: S3Server;
/** What `npm run status` reads through: refused by the stand-in without the hub's account as the expected owner. */
let checked: S3Client;
beforeAll(async () => {
    s3 = await startS3();
    checked = ownerCheckedClient(s3.endpoint).client;
});
afterAll(async () => {
    checked?.destroy();
    await s3?.destroy();
});

const spokes = {
    hn1: { bucket: BUCKET, owner: BUCKET_OWNER_ACCOUNT, region: "us-east-1" },
    sg1: { bucket: BUCKET, owner: BUCKET_OWNER_ACCOUNT, region: "us-east-1" },
};
const client = () => checked;

const ev = (spoke: string, seq: number, endedAt: string): UsageEvent => plainEvent(seq, { spoke, startedAt: endedAt, endedAt });

async function publish(spoke: string, revision: number) {
    await s3.put(bundlePaths.current(spoke), JSON.stringify({ revision, key: bundlePaths.bundle(spoke, revision), contentHash: "h" }));
}
async function ack(spoke: string, revision: number, at: string) {
    await s3.put(bundlePaths.ack(spoke, revision), JSON.stringify({ spoke, revision, contentHash: "h", at }));
}

describe("npm run status", () => {
    it("reports published vs ACKed revision, usage lag and reconciliation; a spoke behind beyond the threshold is flagged", async () => {
        await publish("hn1", 3);
        await ack("hn1", 2, "2026-12-01T09:00:00.000Z");
        await ack("hn1", 3, "2026-12-01T09:05:00.000Z");
        await publish("sg1", 4);
        await ack("sg1", 3, "2026-12-01T08:00:00.000Z");
        const now = new Date();
        const recent = new Date(now.getTime() - 120_000).toISOString();
        // hn1: seqs 0..4 arrive; sg1: seq 0 and 3 arrive, 1 and 2 never do (a gap the reconciliation counts).
        await ingestBatch(
            ledger.db,
            [0, 1, 2, 3, 4].map((i) => ev("hn1", i, recent)),
        );
        await ingestBatch(
            ledger.db,
            [0, 3].map((i) => ev("sg1", i, recent)),
        );

        const later = new Date(now.getTime() + 3600_000); // current.json was written an hour before "now"
        const rows = await collectStatus({
            spokes,
            s3: client,
            ledger: ledgerFromDb(ledger.db),
            now: later,
            maxBehindSeconds: 900,
            windowHours: 24,
        });
        const hn1 = rows.find((r) => r.spoke === "hn1")!;
        expect(hn1).toMatchObject({
            publishedRevision: 3,
            ackedRevision: 3,
            ackedAt: "2026-12-01T09:05:00.000Z",
            behindSeconds: 0,
            problems: [],
        });
        expect(hn1.reconciliation).toEqual({ windowHours: 24, sent: 5, missing: 0, duplicates: 0 });
        expect(hn1).toMatchObject({ quarantined: 0, lastReconciliation: null });
        expect(hn1.usageLagSeconds).toBeGreaterThanOrEqual(3600 + 120 - 2);

        const sg1 = rows.find((r) => r.spoke === "sg1")!;
        expect(sg1).toMatchObject({ publishedRevision: 4, ackedRevision: 3 });
        expect(sg1.behindSeconds).toBeGreaterThan(3500);
        expect(sg1.reconciliation.missing).toBe(2);
        expect(sg1.problems).toHaveLength(2);
        expect(sg1.problems[0]).toMatch(/^serves revision 3 of 4, behind for \d+ s \(limit 900 s\)$/);
        expect(formatStatus(rows)).toMatch(/^sg1 .*BEHIND$/m);

        // A scheduled run recorded by the hub and a quarantined event show up as such.
        await runReconciliation(ledger.db, { spoke: "sg1" });
        await recordSpokeQuarantine(ledger.db, [
            {
                kind: "quarantined",
                requestId: "sg1-r-4",
                spoke: "sg1",
                source: "metering-0.aaaa0000",
                seq: 4,
                endedAt: recent,
                reason: "poison: record over 1 MiB",
                bytes: 1_100_000,
            },
        ]);
        const again = (
            await collectStatus({
                spokes: { sg1: spokes.sg1 },
                s3: client,
                ledger: ledgerFromDb(ledger.db),
                now: later,
                maxBehindSeconds: 900,
                windowHours: 24,
            })
        )[0];
        expect(again.quarantined).toBe(1);
        expect(again.lastReconciliation).toMatchObject({ missing: 2 });
        expect(formatStatus([again])).toContain("(2 missing)");

        // Within the threshold the same lag is not a problem.
        const soon = await collectStatus({
            spokes: { sg1: spokes.sg1 },
            s3: client,
            ledger: ledgerFromDb(ledger.db),
            now,
            maxBehindSeconds: 900,
            windowHours: 24,
        });
        expect(soon[0].problems).toEqual(["2 usage event(s) sent in the last 24 h never reached the ledger"]);
    });

    it("a spoke the hub never published for is reported, not silently healthy", async () => {
        const rows = await collectStatus({
            spokes: { xx9: spokes.hn1 },
            s3: client,
            ledger: ledgerFromDb(ledger.db),
            now: new Date(),
            maxBehindSeconds: 900,
            windowHours: 24,
        });
        expect(rows[0]).toMatchObject({ spoke: "xx9", publishedRevision: null, ackedRevision: null, lastUsageReceivedAt: null });
        expect(rows[0].problems).toEqual(["the hub has published no bundle (no current.json)"]);
    });

    it("reads spokes from hub outputs and names a non-hub file", () => {
        const rendered = {
            outputs: { spokeContracts: { hn1: { policy: { bucket: "b", bucketOwner: BUCKET_OWNER_ACCOUNT, region: "r" } } } },
        };
        expect(spokesFromHubOutputs(rendered, "f")).toEqual({ hn1: { bucket: "b", owner: BUCKET_OWNER_ACCOUNT, region: "r" } });
        expect(() => spokesFromHubOutputs({ spoke: "hn1" }, "out/spoke-hn1/outputs.json")).toThrow(
            "out/spoke-hn1/outputs.json: no spokeContracts output (is this a hub stack?)",
        );
    });

    it("the command exits 1 when a spoke is behind and prints the table", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-"));
        const file = path.join(dir, "hub.json");
        fs.writeFileSync(
            file,
            JSON.stringify({
                spokeContracts: { sg1: { policy: { bucket: BUCKET, bucketOwner: BUCKET_OWNER_ACCOUNT, region: "us-east-1" } } },
            }),
        );
        await publish("sg1", 5);
        await new Promise((r) => setTimeout(r, 1500));
        const pg = ledger.db as unknown as { connectionParameters: { host: string; port: number; user: string; database: string } };
        const url = `postgresql://${pg.connectionParameters.user}@${pg.connectionParameters.host}:${pg.connectionParameters.port}/${pg.connectionParameters.database}`;
        const res = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
            execFile(
                process.execPath,
                ["-r", ESBUILD_LOADER, "tools/status.ts", "--outputs", file, "--s3-endpoint", s3.endpoint, "--max-behind-seconds", "1"],
                {
                    cwd: ROOT,
                    env: { ...process.env, DATABASE_URL: url, AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER" },
                },
                (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
            );
        });
        fs.rmSync(dir, { recursive: true, force: true });
        expect(res.stderr).not.toMatch(/^status:/m);
        expect(res.code).toBe(1);
        expect(res.stdout).toMatch(/^sg1\s+5\s+3\s/m);
        expect(res.stdout).toMatch(/sg1: serves revision 3 of 5, behind for \d+ s \(limit 1 s\)/);
    });
});

describe("npm run status -- --local (no hub needed)", () => {
    it("starts its own ledger and bucket stand-ins and shows a healthy spoke and one behind", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-local-"));
        const file = path.join(dir, "hub.json");
        // The shape of out/hub-prod/outputs.json: the spokes and their policy buckets.
        fs.writeFileSync(
            file,
            JSON.stringify({
                outputs: {
                    spokeContracts: {
                        hn1: { policy: { bucket: "b", bucketOwner: BUCKET_OWNER_ACCOUNT, region: "ap-southeast-1" } },
                        sg1: { policy: { bucket: "b", bucketOwner: BUCKET_OWNER_ACCOUNT, region: "ap-southeast-1" } },
                    },
                },
            }),
        );
        const res = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
            execFile(
                process.execPath,
                ["-r", ESBUILD_LOADER, "tools/status.ts", "--local", "--outputs", file],
                {
                    cwd: ROOT,
                    env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true", DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" },
                },
                (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
            );
        });
        fs.rmSync(dir, { recursive: true, force: true });
        expect(res.stderr).toMatch(
            /^status --local: ledger postgresql:\/\/\S+, policy bucket at http:\/\/127\.0\.0\.1:\d+ \(s3rver\); sample data for hn1, sg1: sg1 still serves revision 1 and lost 2 usage events\n/,
        );
        expect(res.code).toBe(1);
        expect(res.stdout).toMatch(/^hn1\s+2\s+2\s.*\sok$/m);
        expect(res.stdout).toMatch(/^sg1\s+2\s+1\s.*\sBEHIND$/m);
        expect(res.stdout).toContain("sg1: 2 usage event(s) sent in the last 24 h never reached the ledger");
        // The sample is read past the behind limit (900 s by default), so the rule itself shows.
        expect(res.stdout).toMatch(/sg1: serves revision 1 of 2, behind for 10[12]\d s \(limit 900 s\)/);
    });
});

describe("npm run status: the policy bucket's S3 server access logs still arrive", () => {
    it("flags a log prefix whose newest object is older than 24 h, or empty; a fresh one passes (owner checked)", async () => {
        const policyBucket = "platform-policy-bundles-123456789012-us-east-1";
        expect(accessLogBucketOf(policyBucket)).toBe("platform-s3-access-logs-123456789012-us-east-1");
        // The stand-in holds one bucket: it plays the log bucket; the logged bucket's name only shapes the keys.
        const at = new Date();
        const o = { s3: checked, logBucket: BUCKET, owner: BUCKET_OWNER_ACCOUNT, policyBucket, region: "us-east-1" };
        const none = await accessLogProblem({ ...o, now: at });
        expect(none).toMatch(
            /^access logs of platform-policy-bundles-123456789012-us-east-1: none in .* from today or yesterday \(UTC\), older than 24 h/,
        );
        const d = `${at.getUTCFullYear()}/${String(at.getUTCMonth() + 1).padStart(2, "0")}/${String(at.getUTCDate()).padStart(2, "0")}`;
        // S3 stamps the object now (its LastModified): a delivery just arrived.
        await s3.put(
            `policy-bundles/${BUCKET_OWNER_ACCOUNT}/us-east-1/${policyBucket}/${d}/2026-12-02-05-00-00-0123456789ABCDEF`,
            "log line",
        );
        expect(await accessLogProblem({ ...o, now: at })).toBeUndefined();
        // Read 25 h later with nothing new (today's prefix is then tomorrow's: the object is yesterday's, and too old).
        const later = new Date(at.getTime() + 25 * 3600_000);
        expect(await accessLogProblem({ ...o, now: later })).toMatch(/the newest in .* is from .*, older than 24 h/);
        // Another bucket's logs under the prefix do not count.
        expect(await accessLogProblem({ ...o, policyBucket: "platform-policy-bundles-123456789012-eu-west-1", now: at })).toMatch(
            /none in/,
        );
    });
});

describe("npm run status on the wrong input", () => {
    it("says a preview render's outputs cannot be used (spokeContracts unknown)", () => {
        expect(() => spokesFromHubOutputs({ outputs: { spokeContracts: "[unknown]" } }, "out/hub-prod/outputs.json")).toThrow(
            "out/hub-prod/outputs.json: spokeContracts is unknown (rendered with --preview?)",
        );
    });
});
