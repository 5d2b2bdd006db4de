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
import {
    ACCESS_LOG_MAX_AGE_HOURS,
    accessLogState,
    collectStatus,
    formatStatus,
    ledgerFromDb,
    listLogBucketCreatedAt,
    spokesFromHubOutputs,
} from "../tools/status";
import { ROOT } from "./helpers";
import { ESBUILD_LOADER } from "./loader";
import { type LoggingStandIn, startLoggingStandIn } from "./s3-logging-stand-in";

const ledger = useLedgerDb();
let s3: S3Server;
/** What `npm run status` reads through: refused by the stand-in without the hub's account as the expected owner. */
let checked: S3Client;
/**
 * s3rver does not answer GetBucketLogging: the stand-in does (AWS's documented shapes), in front of it; `viaLogging`
 * reads through it, owner-checked. It starts with the policy bucket's logging as components/hub/AccessLogs.ts sets it,
 * to the stand-in's one bucket playing the log bucket.
 */
let logging: LoggingStandIn;
let viaLogging: S3Client;
const HUB_LOGGING = { on: { targetBucket: BUCKET, targetPrefix: "policy-bundles/", keyFormat: { partitioned: "EventTime" } } } as const;
beforeAll(async () => {
    s3 = await startS3();
    checked = ownerCheckedClient(s3.endpoint).client;
    logging = await startLoggingStandIn(s3.endpoint, BUCKET_OWNER_ACCOUNT, HUB_LOGGING);
    viaLogging = ownerCheckedClient(logging.endpoint).client;
});
afterAll(async () => {
    checked?.destroy();
    viaLogging?.destroy();
    await logging?.close();
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
    const policyBucket = "platform-policy-bundles-123456789012-us-east-1";
    const hours = (d: Date, h: number) => new Date(d.getTime() + h * 3600_000);
    const problem = (r: Awaited<ReturnType<typeof accessLogState>>) => (r.state === "problem" ? r.problem : `not a problem: ${r.state}`);
    /** Fails the test when asked: with a recent log the start of logging must not matter. */
    const neverAsked = async (): Promise<Date> => {
        throw new Error("loggingSince asked although a recent log exists");
    };

    it("no log yet: waiting on a new hub (the log bucket's creation from ListBuckets), a problem once logging is older than the limit or its start unknown; recent logs are fine on an old hub (owner checked)", async () => {
        expect(accessLogBucketOf(policyBucket)).toBe("platform-s3-access-logs-123456789012-us-east-1");
        // The stand-in holds one bucket, created as the server started: it plays the log bucket of a hub deployed just
        // now; the logged bucket's name only shapes the keys. ListBuckets names no bucket and takes no expected owner
        // (it lists only the caller's account's buckets), so it goes through the stand-in's plain client.
        const created = await listLogBucketCreatedAt(s3.client, BUCKET);
        expect(created).toBeInstanceOf(Date);
        const at = new Date();
        expect(at.getTime() - created!.getTime()).toBeLessThan(3600_000);
        expect(await listLogBucketCreatedAt(s3.client, "platform-s3-access-logs-123456789012-us-east-1")).toBeUndefined();
        const o = {
            s3: viaLogging,
            logBucket: BUCKET,
            owner: BUCKET_OWNER_ACCOUNT,
            policyBucket,
            region: "us-east-1",
            loggingSince: () => listLogBucketCreatedAt(s3.client, BUCKET),
        };

        // Fresh hub, no logs: information, not a problem.
        const fresh = await accessLogState({ ...o, now: at });
        expect(fresh).toEqual({
            state: "waiting",
            info: `access logs of ${policyBucket}: waiting for the first access logs (logging on since ${created!.toISOString()}, S3 delivers within hours; a problem if none by ${hours(created!, ACCESS_LOG_MAX_AGE_HOURS).toISOString()})`,
        });
        // Old hub (the same bucket read past the limit), no logs: a problem.
        expect(problem(await accessLogState({ ...o, now: hours(created!, ACCESS_LOG_MAX_AGE_HOURS + 1) }))).toMatch(
            new RegExp(
                `^access logs of ${policyBucket}: none in ${BUCKET} from today or yesterday \\(UTC\\), older than 24 h, and logging has been on since ${created!.toISOString()}: is server access logging still on`,
            ),
        );
        // Start unknown: the log bucket not among the account's buckets, ListBuckets refused, a start after this clock.
        expect(
            problem(await accessLogState({ ...o, now: at, loggingSince: () => listLogBucketCreatedAt(s3.client, "not-the-log-bucket") })),
        ).toMatch(/when logging started is unknown \(policy not among this account's buckets\)/);
        // The owner-checked client refuses ListBuckets (it sends no expected owner): an error of the call, reported.
        expect(problem(await accessLogState({ ...o, now: at, loggingSince: () => listLogBucketCreatedAt(checked, BUCKET) }))).toMatch(
            /when logging started is unknown \(GET \S* sent no x-amz-expected-bucket-owner/,
        );
        expect(problem(await accessLogState({ ...o, now: hours(at, -1) }))).toMatch(/logging started at .*, after this machine's clock/);

        // S3 stamps the object when it is written (its LastModified): a delivery just arrived, in the day of that moment.
        const putAt = new Date();
        const d = `${putAt.getUTCFullYear()}/${String(putAt.getUTCMonth() + 1).padStart(2, "0")}/${String(putAt.getUTCDate()).padStart(2, "0")}`;
        await s3.put(
            `policy-bundles/${BUCKET_OWNER_ACCOUNT}/us-east-1/${policyBucket}/${d}/2026-12-02-05-00-00-0123456789ABCDEF`,
            "log line",
        );
        expect(await accessLogState({ ...o, now: putAt })).toEqual({ state: "ok" });
        // Old hub, recent logs: fine, whenever logging started.
        expect(await accessLogState({ ...o, now: putAt, loggingSince: neverAsked })).toEqual({ state: "ok" });
        // Read just over 24 h after the delivery with nothing new: the object is then in yesterday's prefix, and too old.
        // (Not 25 h: a run in the last hour of a UTC day would read two days on, where yesterday's prefix is no longer
        // the object's. The 5 s cover the write itself; only a delivery in the last 5 s of a UTC day misreads.)
        const later = new Date(putAt.getTime() + 24 * 3600_000 + 5_000);
        expect(problem(await accessLogState({ ...o, now: later }))).toMatch(/the newest in .* is from .*, older than 24 h: is server/);
        // Three days later nothing is in the two days' prefixes, but logs did arrive once: not a new hub, even if the
        // log bucket's creation date moved (S3: it "can change when making changes to your bucket").
        expect(problem(await accessLogState({ ...o, now: hours(at, 72), loggingSince: async () => hours(at, 71) }))).toMatch(
            /none in .* older than 24 h \(older ones exist, so logs did arrive once\)/,
        );
        // Another bucket's logs under the prefix do not count.
        const other = { ...o, policyBucket: "platform-policy-bundles-123456789012-eu-west-1", now: at };
        expect(problem(await accessLogState({ ...other, loggingSince: async () => hours(at, -48) }))).toMatch(
            /none in .*, and logging has been on since/,
        );
        expect((await accessLogState(other)).state).toBe("waiting");
    });
});

describe("npm run status: waiting needs the policy bucket's logging to be the hub's (GetBucketLogging)", () => {
    // No log of this bucket exists (the other test's logs are another bucket's): the waiting path.
    const policyBucket = "platform-policy-bundles-123456789012-ap-southeast-1";
    const problem = (r: Awaited<ReturnType<typeof accessLogState>>) => (r.state === "problem" ? r.problem : `not a problem: ${r.state}`);
    const o = () => ({
        s3: viaLogging,
        logBucket: BUCKET,
        owner: BUCKET_OWNER_ACCOUNT,
        policyBucket,
        region: "ap-southeast-1",
        now: new Date(),
        // A young creation date: what S3 may report after someone edits the log bucket's policy.
        loggingSince: async () => new Date(Date.now() - 3600_000),
    });
    const none = `^access logs of ${policyBucket}: none in ${BUCKET} from today or yesterday \\(UTC\\), older than 24 h, and `;

    it("logging on to the hub's log bucket, prefix and event-time partitioned keys: waiting (asked with the hub's account as expected owner)", async () => {
        logging.answer = HUB_LOGGING;
        const asked = logging.asked.length;
        expect((await accessLogState(o())).state).toBe("waiting");
        expect(logging.asked.slice(asked)).toEqual([policyBucket]);
        // Another expected owner: the stand-in refuses it, as S3 does.
        const other = ownerCheckedClient(logging.endpoint, "210987654321").client;
        try {
            expect(problem(await accessLogState({ ...o(), s3: other, owner: "210987654321" }))).toMatch(/could not be read/);
        } finally {
            other.destroy();
        }
    });

    it("logging off (an empty BucketLoggingStatus): a problem", async () => {
        logging.answer = "off";
        expect(problem(await accessLogState(o()))).toMatch(
            new RegExp(
                `${none}server access logging of ${policyBucket} is off \\(GetBucketLogging: no LoggingEnabled\\): is server access logging still on`,
            ),
        );
    });

    it("logging to another bucket, under another prefix or with other keys: a problem naming what was found", async () => {
        logging.answer = { on: { ...HUB_LOGGING.on, targetBucket: "someone-elses-logs" } };
        expect(problem(await accessLogState(o()))).toMatch(
            new RegExp(
                `${none}server access logging of ${policyBucket} is not the hub's: target bucket someone-elses-logs, not ${BUCKET}: is`,
            ),
        );
        logging.answer = { on: { ...HUB_LOGGING.on, targetPrefix: "elsewhere/" } };
        expect(problem(await accessLogState(o()))).toMatch(/is not the hub's: target prefix "elsewhere\/", not "policy-bundles\/": is/);
        logging.answer = { on: { ...HUB_LOGGING.on, keyFormat: "simple" } };
        expect(problem(await accessLogState(o()))).toMatch(/is not the hub's: key format simple, not partitioned by EventTime: is/);
        logging.answer = { on: { ...HUB_LOGGING.on, keyFormat: { partitioned: "DeliveryTime" } } };
        expect(problem(await accessLogState(o()))).toMatch(/key format partitioned by DeliveryTime, not partitioned by EventTime/);
        logging.answer = { on: { targetBucket: "x", targetPrefix: "", keyFormat: "simple" } };
        expect(problem(await accessLogState(o()))).toMatch(
            /target bucket x, not policy; target prefix "", not "policy-bundles\/"; key format simple/,
        );
        // The hub's target, but the delivered logs readable by someone else (TargetGrants).
        logging.answer = { on: { ...HUB_LOGGING.on, grants: ["79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be"] } };
        expect(problem(await accessLogState(o()))).toMatch(/is not the hub's: 1 target grant\(s\), none expected: is/);
    });

    it("GetBucketLogging refused (403 AccessDenied): a problem", async () => {
        logging.answer = "refused";
        expect(problem(await accessLogState(o()))).toMatch(
            new RegExp(`${none}the logging of ${policyBucket} could not be read \\(GetBucketLogging: AccessDenied: Access Denied\\): is`),
        );
        logging.answer = HUB_LOGGING;
    });

    it("the normal path does not ask: a recent log is ok whatever the logging answer; a hub whose logs once arrived is a problem either way", async () => {
        logging.answer = "refused";
        const asked = logging.asked.length;
        const at = new Date();
        const d = `${at.getUTCFullYear()}/${String(at.getUTCMonth() + 1).padStart(2, "0")}/${String(at.getUTCDate()).padStart(2, "0")}`;
        const seen = "platform-policy-bundles-123456789012-eu-north-1";
        await s3.put(`policy-bundles/${BUCKET_OWNER_ACCOUNT}/eu-north-1/${seen}/${d}/2026-12-02-05-00-00-FEDCBA9876543210`, "log line");
        const p = { ...o(), policyBucket: seen, region: "eu-north-1" };
        expect(await accessLogState(p)).toEqual({ state: "ok" });
        expect(problem(await accessLogState({ ...p, now: new Date(at.getTime() + 72 * 3600_000) }))).toMatch(/older ones exist/);
        expect(logging.asked.length).toBe(asked);
        logging.answer = HUB_LOGGING;
    });
});

describe("npm run status: a new hub's missing access logs are information", () => {
    it("the command prints that it waits for the first access logs and exits 0 when every spoke is current", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-logs-"));
        const file = path.join(dir, "hub.json");
        // The stand-in's one bucket plays the policy bucket and (--access-log-bucket) the log bucket, created just now.
        fs.writeFileSync(
            file,
            JSON.stringify({
                spokeContracts: { ok1: { policy: { bucket: BUCKET, bucketOwner: BUCKET_OWNER_ACCOUNT, region: "us-east-1" } } },
            }),
        );
        await publish("ok1", 1);
        await ack("ok1", 1, new Date().toISOString());
        const pg = ledger.db as unknown as { connectionParameters: { host: string; port: number; user: string; database: string } };
        const url = `postgresql://${pg.connectionParameters.user}@${pg.connectionParameters.host}:${pg.connectionParameters.port}/${pg.connectionParameters.database}`;
        const run = () =>
            new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
                execFile(
                    process.execPath,
                    [
                        "-r",
                        ESBUILD_LOADER,
                        "tools/status.ts",
                        "--outputs",
                        file,
                        "--s3-endpoint",
                        logging.endpoint,
                        "--access-log-bucket",
                        BUCKET,
                    ],
                    {
                        cwd: ROOT,
                        env: { ...process.env, DATABASE_URL: url, AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER" },
                    },
                    (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
                );
            });
        logging.answer = HUB_LOGGING;
        const res = await run();
        // Logging turned off: the same young log bucket no longer makes it information.
        logging.answer = "off";
        const off = await run();
        logging.answer = HUB_LOGGING;
        fs.rmSync(dir, { recursive: true, force: true });
        expect(off.stderr).toMatch(/^access logs of policy: none in policy .*server access logging of policy is off/m);
        expect(off.code).toBe(1);
        expect(res.stdout).toMatch(/^ok1\s+1\s+1\s.*\sok$/m);
        expect(res.stderr).toMatch(
            /^access logs of policy: waiting for the first access logs \(logging on since \S+Z, S3 delivers within hours; a problem if none by \S+Z\)$/m,
        );
        expect(res.code).toBe(0);
    });
});

describe("npm run status on the wrong input", () => {
    it("says a preview render's outputs cannot be used (spokeContracts unknown)", () => {
        expect(() => spokesFromHubOutputs({ outputs: { spokeContracts: "[unknown]" } }, "out/hub-prod/outputs.json")).toThrow(
            "out/hub-prod/outputs.json: spokeContracts is unknown (rendered with --preview?)",
        );
    });
});
