import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Client } from "pg";
import { z } from "zod";
import type { Queryable } from "../ledger/ledger";
import { reconcile } from "../ledger/reconcile";
import { spokeUsageStatus } from "../ledger/status";
import { FAILED_BATCH_PREFIX, FailedBatchSchema } from "../usage-consumer/failed-batches";
import { type BatchOutcome, processBatch } from "../usage-consumer/handler";
import { INGEST_ROLE, loadLedgerOpsEnv, REPORTER_ROLE } from "./config";
import { secretString } from "./secrets";

/**
 * The operator's path to the usage ledger. The ledger database has no route from outside its VPC (no bastion, no
 * public endpoint: components/hub/ledger/network.ts), so `npm run status` and `npm run replay-usage -- --apply` do
 * not connect to it: they invoke this Lambda (in the ledger's VPC, beside the consumer), which runs exactly two
 * operations, no SQL from the caller:
 * - `status`: the ledger side of each spoke's status, read as {@link REPORTER_ROLE} (SELECT only);
 * - `replay`: ingests one stored failed batch as {@link INGEST_ROLE}, exactly as the consumer would
 *   (services/usage-consumer/handler.ts `processBatch`: idempotent by `(spoke, requestId)`, malformed records
 *   quarantined), attributing records by the hub's own stream -> spoke map (`STREAM_SPOKES`), never the batch's.
 *   The caller names the batch only by its object key under `failed/` of the failure bucket (`FAILED_BATCH_BUCKET`);
 *   the function reads the object itself (only the consumer writes there), so an invoker cannot hand it made-up
 *   records to bill.
 * Who may invoke it is IAM's `lambda:InvokeFunction` (the hub deployers; test/aws-simulate.test.ts); the inputs are
 * bounded anyway (`status`: the hub's own spokes, a window of at most {@link STATUS_MAX_WINDOW_DAYS} days).
 */

/** How far back `status` may reconcile (days): the failure bucket's retention (components/hub/ledger/failures.ts). */
export const STATUS_MAX_WINDOW_DAYS = 35;

/** A failed batch's object key: under {@link FAILED_BATCH_PREFIX}, the characters `failedBatchKey` writes, `.json`. */
const FAILED_KEY = z
    .string()
    .max(1024)
    .regex(/^[A-Za-z0-9._/-]+\.json$/, "must be a failed batch's object key")
    .refine((k) => k.startsWith(FAILED_BATCH_PREFIX) && !k.split("/").some((p) => p === "" || p === "." || p === ".."), {
        message: `must be an object key under ${FAILED_BATCH_PREFIX} (no empty, . or .. segment)`,
    });

const SPOKE = z.string().regex(/^[a-z0-9][a-z0-9-]*$/);

/** One request to the ledger Lambda (the Invoke payload). */
export const LedgerOpsRequestSchema = z.discriminatedUnion("op", [
    z.object({
        op: z.literal("status"),
        spokes: z.array(SPOKE).min(1).max(1000),
        /** Start of the reconciliation window (ISO-8601 UTC, a full hour). */
        from: z.iso.datetime(),
    }),
    /** A stored failed batch, by its object key in the failure bucket (never its records). */
    z.object({ op: z.literal("replay"), key: FAILED_KEY }).strict(),
]);
export type LedgerOpsRequest = z.infer<typeof LedgerOpsRequestSchema>;

/** The ledger side of one spoke's status. Times are ISO-8601 UTC or null when never. */
export interface SpokeLedger {
    spoke: string;
    /** Newest `received_at` / `ended_at` of the spoke's events. */
    lastUsageReceivedAt: string | null;
    lastUsageEndedAt: string | null;
    /** Events the spoke quarantined (all time). */
    quarantined: number;
    /** The last scheduled reconciliation recorded for the spoke. */
    lastReconciliation: { ranAt: string; missing: number } | null;
    /** Reconciliation from `from` to now: events sent, missing, redelivered. */
    reconciliation: { sent: number; missing: number; duplicates: number };
}

/** The response of each operation. */
export type LedgerOpsResponse =
    | { op: "status"; spokes: SpokeLedger[] }
    | { op: "replay"; key: string; records: number; outcome: BatchOutcome };

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

/**
 * Reads the ledger side of each spoke's status (read-only).
 * @throws the driver's error
 */
export async function readSpokeLedger(db: Queryable, q: { spokes: readonly string[]; from: string }): Promise<SpokeLedger[]> {
    const usage = new Map((await spokeUsageStatus(db, { spokes: q.spokes })).map((u) => [u.spoke, u]));
    const out: SpokeLedger[] = [];
    for (const spoke of [...q.spokes].sort()) {
        const u = await db.query("SELECT max(received_at) AS received, max(ended_at) AS ended FROM usage_events WHERE spoke = $1", [spoke]);
        const rows = await reconcile(db, { spoke, from: q.from });
        const last = usage.get(spoke)?.lastReconciliation;
        out.push({
            spoke,
            lastUsageReceivedAt: iso(u.rows[0]?.received),
            lastUsageEndedAt: iso(u.rows[0]?.ended),
            quarantined: usage.get(spoke)?.quarantined ?? 0,
            lastReconciliation: last ? { ranAt: last.ranAt, missing: last.missing } : null,
            reconciliation: {
                sent: rows.reduce((n, r) => n + r.sent, 0),
                missing: rows.reduce((n, r) => n + r.missing, 0),
                duplicates: rows.reduce((n, r) => n + r.duplicates, 0),
            },
        });
    }
    return out;
}

/**
 * Runs one validated request. `connect(role)` opens a connection as that login role; `readBatch(key)` reads an object
 * of the failure bucket (its text); `streamSpokes` is the hub's stream -> spoke map, whose spokes are the only ones
 * `status` answers for. `now` bounds `status`'s window.
 * @throws Error for a request that is not one of the two operations (zod's first issue), a `status` of a spoke the hub
 *   does not serve or a window over {@link STATUS_MAX_WINDOW_DAYS} days, an object that is not a stored batch; or the
 *   driver's / S3's error
 */
export async function runLedgerOp(
    request: unknown,
    x: {
        connect: (role: typeof INGEST_ROLE | typeof REPORTER_ROLE) => Promise<Queryable & { end(): Promise<void> }>;
        streamSpokes: Record<string, string>;
        readBatch: (key: string) => Promise<string>;
        now?: Date;
    },
): Promise<LedgerOpsResponse> {
    const parsed = LedgerOpsRequestSchema.safeParse(request);
    if (!parsed.success) {
        const i = parsed.error.issues[0];
        throw new Error(`not a ledger operation: ${i?.path.join(".") || "(root)"}: ${i?.message}`);
    }
    const req = parsed.data;
    if (req.op === "status") {
        const served = new Set(Object.values(x.streamSpokes));
        const unknown = req.spokes.filter((s) => !served.has(s));
        if (unknown.length) throw new Error(`not a ledger operation: spokes: ${unknown.join(", ")} not served by this hub`);
        if (new Set(req.spokes).size !== req.spokes.length) throw new Error("not a ledger operation: spokes: a spoke is named twice");
        const now = (x.now ?? new Date()).getTime();
        const from = Date.parse(req.from);
        if (from < now - STATUS_MAX_WINDOW_DAYS * 86_400_000 || from > now)
            throw new Error(`not a ledger operation: from: must be within the last ${STATUS_MAX_WINDOW_DAYS} days`);
    }
    let batch: ReturnType<typeof FailedBatchSchema.parse> | undefined;
    if (req.op === "replay") {
        const text = await x.readBatch(req.key);
        try {
            batch = FailedBatchSchema.parse(JSON.parse(text));
        } catch (e) {
            throw new Error(`${req.key} is not a stored usage batch: ${(e as Error).message.split("\n")[0]}`);
        }
    }
    const db = await x.connect(req.op === "status" ? REPORTER_ROLE : INGEST_ROLE);
    try {
        if (req.op === "status") return { op: "status", spokes: await readSpokeLedger(db, req) };
        const records = batch!.records;
        return {
            op: "replay",
            key: req.key,
            records: records.length,
            outcome: await processBatch(db, { Records: records }, x.streamSpokes),
        };
    } finally {
        await db.end().catch(() => undefined);
    }
}

/**
 * Reads one stored failed batch's text from the failure bucket, with `ExpectedBucketOwner: bucket.owner` (the hub's
 * account: S3 refuses the read when the bucket of that name belongs to another account).
 * @throws the S3 client's error
 */
export async function readFailedBatch(s3: Pick<S3Client, "send">, bucket: { bucket: string; owner: string }, key: string): Promise<string> {
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket.bucket, ExpectedBucketOwner: bucket.owner, Key: key }));
    return await got.Body!.transformToString();
}

/**
 * The Lambda entry (components/hub/ledger/functions.ts): environment `LEDGER_OPS_ENV` (services/reconciler/config.ts),
 * one connection per invocation, TLS verified against the RDS CAs; a replayed batch read from `FAILED_BATCH_BUCKET`.
 * @throws on an invalid request or a database error (Invoke answers with `X-Amz-Function-Error`)
 */
export async function handler(event: unknown): Promise<LedgerOpsResponse> {
    const env = loadLedgerOpsEnv(process.env);
    return runLedgerOp(event, {
        streamSpokes: env.STREAM_SPOKES,
        // The Lambda Node.js runtime provides the AWS SDK v3 (external in the bundle, as services/reconciler/secrets.ts).
        readBatch: async (key) => {
            const s3 = new S3Client({});
            try {
                return await readFailedBatch(s3, { bucket: env.FAILED_BATCH_BUCKET, owner: env.FAILED_BATCH_BUCKET_OWNER }, key);
            } finally {
                s3.destroy();
            }
        },
        connect: async (role) => {
            const client = new Client({
                host: env.PGHOST,
                port: env.PGPORT,
                database: env.PGDATABASE,
                user: role,
                password: await secretString(role === INGEST_ROLE ? env.INGEST_SECRET_ARN : env.REPORTER_SECRET_ARN),
                ssl: { rejectUnauthorized: true },
                connectionTimeoutMillis: 10_000,
                statement_timeout: 120_000,
            });
            await client.connect();
            return client;
        },
    });
}
