/**
 * The operator's path to the ledger, end to end against real servers: `npm run replay-usage -- --apply` and the
 * status reader invoke the ledger Lambda (services/reconciler/ops.ts) over Lambda's Invoke API, signed with SigV4;
 * a loopback stand-in of that API runs the function's own code against a real PostgreSQL, connecting as the
 * login roles the migrator creates (ledger_reporter for status, ledger_ingest for replay), so the roles' grants are
 * what the operations really get. The failure bucket is an S3 stand-in (s3rver).
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUCKET, BUCKET_OWNER_ACCOUNT, ownerCheckedClient, type S3Server, startS3 } from "../services/auth/test/harness";
import { ingestBatch, migrate } from "../services/ledger/ledger";
import { PG_TEMPLATE_ENV, startPostgres, type TestPostgres } from "../services/ledger/testing/postgres";
import { plainEvent } from "../services/ledger/testing/events";
import type { UsageEvent } from "../services/shared/usage";
import { INVOKE_PAYLOAD_LIMIT_BYTES, InvokeCommand, LambdaInvoker } from "../tools/lambda-invoke";
import { ledgerFromLambda, ledgerFunctionFromHubOutputs } from "../tools/status";
import type { FailedBatch } from "../services/usage-consumer/failed-batches";
import { readFailedBatch, runLedgerOp } from "../services/reconciler/ops";
import { applyRoles } from "../services/reconciler/roles";
import { PG_TEMPLATE_ENV as SETUP_PG_TEMPLATE_ENV } from "./global-setup";

const ROOT = path.join(__dirname, "..");
const LOADER = path.join(ROOT, "tools", "register-esbuild.js");
const FN = "platform-usage-ledger-ops";
const STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/platform-usage-hn1";
const OTHER_STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/platform-usage-sg1";

let pg: TestPostgres;
let admin: Client;
let s3: S3Server;
let lambda: http.Server;
let lambdaUrl: string;
const seen: Array<{ path: string; authorization: string; roles: string[] }> = [];

const ev = (i: number, spoke = "hn1"): UsageEvent =>
    plainEvent(i, {
        spoke,
        startedAt: new Date(Date.now() - 600_000).toISOString(),
        endedAt: new Date(Date.now() - 590_000).toISOString(),
    });
/** The ledger Lambda's S3 client (created on first use). */
let opsS3: S3Client | undefined;

beforeAll(async () => {
    [pg, s3] = await Promise.all([startPostgres(), startS3()]);
    admin = await pg.connect();
    await migrate(admin);
    await applyRoles(admin, { ingest: "pw-ingest", reporter: "pw-reporter" }, (x) => admin.escapeLiteral(x));
    // Lambda's Invoke API on loopback, running the function's code (only its connections point at the test server).
    lambda = http.createServer((req, res) => {
        let body = "";
        req.on("data", (c) => {
            body += c;
        });
        req.on("end", async () => {
            const roles: string[] = [];
            seen.push({ path: req.url ?? "", authorization: String(req.headers.authorization ?? ""), roles });
            try {
                const out = await runLedgerOp(JSON.parse(body), {
                    streamSpokes: { [STREAM]: "hn1", [OTHER_STREAM]: "sg1" },
                    // The function's own read of the failure bucket (here the S3 stand-in's bucket, refusing a read
                    // without the hub's account as the expected owner).
                    readBatch: (key) => {
                        opsS3 ??= ownerCheckedClient(s3.endpoint).client;
                        return readFailedBatch(opsS3, { bucket: BUCKET, owner: BUCKET_OWNER_ACCOUNT }, key);
                    },
                    connect: async (role) => {
                        roles.push(role);
                        const c = new Client({ connectionString: pg.url.replace(/\/\/[^@]+@/, `//${role}@`) });
                        await c.connect();
                        return c;
                    },
                });
                res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(out));
            } catch (e) {
                res.writeHead(200, { "x-amz-function-error": "Unhandled" }).end(
                    JSON.stringify({ errorType: "Error", errorMessage: (e as Error).message }),
                );
            }
        });
    });
    await new Promise<void>((r) => lambda.listen(0, "127.0.0.1", r));
    lambdaUrl = `http://127.0.0.1:${(lambda.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => {
    opsS3?.destroy();
    await new Promise((r) => lambda?.close(r));
    await admin?.end();
    await Promise.all([pg?.stop(), s3?.destroy()]);
});

const invoker = () =>
    new LambdaInvoker(
        "us-east-1",
        new S3Client({ region: "us-east-1", credentials: { accessKeyId: "AKIDOPERATOR", secretAccessKey: "secret" } }),
        lambdaUrl,
    );

function replay(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const env: NodeJS.ProcessEnv = { ...process.env, AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER" };
    delete env.DATABASE_URL;
    delete env.PGHOST;
    return new Promise((resolve) => {
        execFile(
            process.execPath,
            ["-r", LOADER, path.join(ROOT, "tools", "replay-usage.ts"), ...args],
            { cwd: ROOT, env },
            (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
        );
    });
}

describe("the operator's path to the ledger: the ledger Lambda over Lambda's Invoke API", () => {
    it("status reads each spoke's ledger side as ledger_reporter, signed for lambda in the ledger's region", async () => {
        await ingestBatch(
            admin,
            [0, 1, 3].map((i) => ev(i)),
        );
        const from = new Date(Date.now() - 3 * 3600_000);
        from.setUTCMinutes(0, 0, 0);
        seen.length = 0;
        const rows = await ledgerFromLambda(invoker(), FN)({ spokes: ["hn1", "sg1"], from: from.toISOString() });
        expect(rows.map((r) => [r.spoke, r.reconciliation.sent, r.reconciliation.missing])).toEqual([
            ["hn1", 4, 1],
            ["sg1", 0, 0],
        ]);
        expect(rows[0].lastUsageEndedAt).not.toBeNull();
        expect(seen).toHaveLength(1);
        expect(seen[0].path).toBe(`/2015-03-31/functions/${FN}/invocations`);
        expect(seen[0].authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDOPERATOR\/\d{8}\/us-east-1\/lambda\/aws4_request, /);
        expect(seen[0].roles).toEqual(["ledger_reporter"]);
    }, 30_000);

    it("the function runs its two operations only; anything else fails with the function's error", async () => {
        await expect(
            invoker().send(
                new InvokeCommand({
                    FunctionName: FN,
                    Payload: { op: "sql", text: "DELETE FROM usage_events" },
                }),
            ),
        ).rejects.toThrow(/platform-usage-ledger-ops failed \(Unhandled\): not a ledger operation/);
    });

    it("replay takes an object key under failed/ only: records in the payload, or any other key, are refused before the ledger is touched", async () => {
        const forged = {
            version: 1,
            failedAt: "x",
            error: "x",
            streamSpokes: {},
            records: [
                {
                    eventID: "s:1",
                    eventSourceARN: STREAM,
                    kinesis: {
                        data: Buffer.from(JSON.stringify({ ...ev(99), tenant: "victim" })).toString("base64"),
                        partitionKey: "p",
                        sequenceNumber: "1",
                    },
                },
            ],
        };
        seen.length = 0;
        for (const payload of [
            { op: "replay", batch: forged },
            { op: "replay", key: "failed/hn1/x.json", batch: forged },
            { op: "replay", key: "spokes/hn1/current.json" },
            { op: "replay", key: "failed/../spokes/x.json" },
        ])
            await expect(
                invoker().send(new InvokeCommand({ FunctionName: FN, Payload: payload })),
                JSON.stringify(payload).slice(0, 60),
            ).rejects.toThrow(/not a ledger operation/);
        expect(seen.flatMap((s) => s.roles)).toEqual([]);
        const n = await admin.query("SELECT count(*)::int AS n FROM usage_events WHERE tenant = 'victim'");
        expect(n.rows[0].n).toBe(0);
    });

    it("status answers only for the hub's spokes, over at most 35 days", async () => {
        const recent = new Date(Date.now() - 3600_000).toISOString();
        const old = new Date(Date.now() - 36 * 86_400_000).toISOString();
        seen.length = 0;
        await expect(ledgerFromLambda(invoker(), FN)({ spokes: ["hn1", "zz9"], from: recent })).rejects.toThrow(
            /zz9 not served by this hub/,
        );
        await expect(ledgerFromLambda(invoker(), FN)({ spokes: ["hn1"], from: old })).rejects.toThrow(/within the last 35 days/);
        expect(seen.flatMap((s) => s.roles)).toEqual([]);
    });

    it("npm run replay-usage -- --apply ingests each stored batch through it as ledger_ingest, attributed by the hub's own stream map", async () => {
        const doc = (records: UsageEvent[], stream: string, seq0: number): FailedBatch => ({
            version: 1,
            failedAt: new Date().toISOString(),
            error: "database gone",
            // A stored batch's own map is not trusted by the function: this one claims sg1's stream belongs to hn1.
            streamSpokes: { [stream]: "hn1" },
            records: records.map((e, i) => ({
                eventID: `shardId-000000000000:${seq0 + i}`,
                eventSourceARN: stream,
                kinesis: {
                    data: Buffer.from(JSON.stringify(e)).toString("base64"),
                    partitionKey: e.requestId,
                    sequenceNumber: String(seq0 + i),
                },
            })),
        });
        const put = (key: string, b: FailedBatch) =>
            s3.client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: JSON.stringify(b), ContentType: "application/json" }));
        await put("failed/hn1/shardId-000000000000/10-12.json", doc([ev(10), ev(11), ev(0)], STREAM, 10));
        // An hn1 event that arrived on sg1's stream: quarantined, whatever the stored map says.
        await put("failed/sg1/shardId-000000000000/20-20.json", doc([ev(20)], OTHER_STREAM, 20));
        seen.length = 0;
        const r = await replay([
            "--bucket",
            BUCKET,
            "--bucket-owner",
            BUCKET_OWNER_ACCOUNT,
            "--region",
            "us-east-1",
            "--s3-endpoint",
            s3.endpoint,
            "--ledger-function",
            FN,
            "--lambda-endpoint",
            lambdaUrl,
            "--apply",
        ]);
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
        expect(r.stdout).toContain("failed/hn1/shardId-000000000000/10-12.json: 3 records, 2 new events, 0 quarantined, deleted");
        expect(r.stdout).toContain("failed/sg1/shardId-000000000000/20-20.json: 1 records, 0 new events, 1 quarantined, deleted");
        expect(seen.map((s) => s.roles)).toEqual([["ledger_ingest"], ["ledger_ingest"]]);
        const n = await admin.query("SELECT count(*)::int AS n FROM usage_events WHERE spoke = 'hn1'");
        expect(n.rows[0].n).toBe(5);
    }, 60_000);

    it("the unsigned outputs file may name only a bare function name in an AWS region (never an ARN of another account)", () => {
        const outputs = (name: string, region = "us-east-1") => ({ usageLedger: { opsFunction: { name, region, arn: "x" } } });
        expect(ledgerFunctionFromHubOutputs(outputs(FN), "hub.json")).toEqual({ name: FN, region: "us-east-1" });
        for (const name of [
            "arn:aws:lambda:us-east-1:999999999999:function:platform-usage-ledger-ops",
            "999999999999:function:platform-usage-ledger-ops",
            "platform-usage-ledger-ops:live",
            "",
        ])
            expect(() => ledgerFunctionFromHubOutputs(outputs(name), "hub.json"), name).toThrow(/not a bare function name|no usageLedger/);
        expect(() => ledgerFunctionFromHubOutputs(outputs(FN, "https://evil.example"), "hub.json")).toThrow(/not an AWS region name/);
        // The operator's own --ledger-function is taken as given.
        expect(ledgerFunctionFromHubOutputs(outputs("arn:aws:lambda:x"), "hub.json", FN).name).toBe(FN);
    });

    it("without --ledger-function it reads hub output usageLedger.opsFunction, and says when it is missing", async () => {
        const r = await replay([
            "--bucket",
            BUCKET,
            "--bucket-owner",
            BUCKET_OWNER_ACCOUNT,
            "--region",
            "us-east-1",
            "--outputs",
            path.join(ROOT, "package.json"),
            "--apply",
        ]);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(/no usageLedger\.opsFunction output .*pass --ledger-function/);
    }, 30_000);
});

describe("the run's PostgreSQL test servers", () => {
    it("start from one template data directory made once per run, each a cluster of its own", async () => {
        expect(SETUP_PG_TEMPLATE_ENV).toBe(PG_TEMPLATE_ENV);
        const root = process.env[PG_TEMPLATE_ENV];
        expect(root, `${PG_TEMPLATE_ENV} (test/global-setup.ts)`).toBeTruthy();
        const templates = fs.readdirSync(root!).filter((d) => fs.existsSync(path.join(root!, d, "data", "PG_VERSION")));
        expect(templates).toHaveLength(1);
        // The roles this file's server was given (beforeAll) are not in a server started afterwards from the same template.
        expect((await admin.query("SELECT 1 FROM pg_roles WHERE rolname = 'ledger_ingest'")).rowCount).toBe(1);
        const other = await startPostgres();
        try {
            const c = await other.connect();
            expect((await c.query("SELECT 1 FROM pg_roles WHERE rolname = 'ledger_ingest'")).rowCount).toBe(0);
            expect((await c.query("SELECT current_database() AS db")).rows[0].db).toBe("ledger");
            await c.end();
        } finally {
            await other.stop();
        }
        expect(fs.existsSync(path.join(root!, templates[0], "data", "postmaster.pid"))).toBe(false); // never started itself
    });
});

describe("the Lambda invoker's payload limit", () => {
    it("refuses a payload of INVOKE_PAYLOAD_LIMIT_BYTES or more before any call (Lambda wants it smaller), and sends one byte less", async () => {
        // Nothing listens on port 9 of loopback: a call that is made fails in fetch, one refused first never gets there.
        const nowhere = new LambdaInvoker(
            "us-east-1",
            new S3Client({ region: "us-east-1", credentials: { accessKeyId: "AKIDOPERATOR", secretAccessKey: "secret" } }),
            "http://127.0.0.1:9",
        );
        // A JSON string's encoding is its characters plus two quotes.
        const of = (bytes: number) => "x".repeat(bytes - 2);
        await expect(
            nowhere.send(new InvokeCommand({ FunctionName: FN, Payload: of(INVOKE_PAYLOAD_LIMIT_BYTES) as never })),
        ).rejects.toThrow(/not under Lambda's 6291456 byte limit/);
        await expect(
            nowhere.send(new InvokeCommand({ FunctionName: FN, Payload: of(INVOKE_PAYLOAD_LIMIT_BYTES - 1) as never })),
        ).rejects.toThrow(/fetch failed/);
    });
});
