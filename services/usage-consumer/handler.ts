import { Client } from "pg";
import { discardClient, LEDGER_PG_BOUNDS } from "../ledger/db";
import {
    ingestBatch,
    type IngestResult,
    isIngestRace,
    quarantine,
    type QuarantineItem,
    type Queryable,
    recordSpokeQuarantine,
} from "../ledger/ledger";
import { type QuarantineMarker, QuarantineMarkerSchema, type UsageEvent, UsageEventSchema } from "../shared/usage";
import { type ConsumerEnv, readEnv } from "./config";
import { type FailureStore, keepFailedBatch } from "./failed-batches";

export { type ConsumerEnv, readEnv } from "./config";

/**
 * Usage consumer (hub): a Lambda on the usage Kinesis streams, one event source mapping per spoke stream.
 * Each batch: decode, validate, quarantine what does not parse (with its reason), and ingest the rest into
 * the ledger in one idempotent statement. Any database error throws, so Lambda retries the batch (bisecting
 * it) and after the mapping's retry limit sends the batch's shard/sequence range to the failure destination.
 * That range alone cannot be replayed once the records expire from the stream, so a failing batch's records are first
 * written to the failure bucket (services/usage-consumer/failed-batches.ts), from where `npm run replay-usage`
 * ingests them again; replaying is safe because ingestion is idempotent.
 */

/** The subset of the Lambda Kinesis event the consumer reads (aws-lambda `KinesisStreamEvent`). */
export interface KinesisStreamEvent {
    Records: Array<{
        eventID: string;
        eventSourceARN: string;
        kinesis: { data: string; partitionKey: string; sequenceNumber: string };
    }>;
}

/** Result of one batch, logged as one JSON line. */
export interface BatchOutcome extends IngestResult {
    /** Malformed records stored in `usage_quarantine` (new ones). */
    quarantined: number;
    /** Markers of events the spoke quarantined (Kinesis would not take them), stored in `usage_spoke_quarantine` (new ones). */
    spokeQuarantined: number;
}

/**
 * Pure: splits a Kinesis batch into valid events and quarantine items.
 * @param streamSpokes stream ARN -> the only spoke allowed to write it (each spoke's identity may put only to
 *   its own stream, so an event naming another spoke is forged or misrouted and is quarantined)
 */
export function decodeBatch(
    event: KinesisStreamEvent,
    streamSpokes: Record<string, string>,
): { events: UsageEvent[]; markers: QuarantineMarker[]; bad: QuarantineItem[] } {
    const events: UsageEvent[] = [];
    const markers: QuarantineMarker[] = [];
    const bad: QuarantineItem[] = [];
    for (const r of event.Records) {
        const payload = Buffer.from(r.kinesis.data, "base64").toString("utf8");
        const reject = (reason: string) => bad.push({ origin: r.eventID, reason, payload });
        let doc: unknown;
        try {
            doc = JSON.parse(payload);
        } catch (e) {
            reject(`invalid JSON: ${(e as Error).message}`);
            continue;
        }
        const isMarker = !!doc && typeof doc === "object" && (doc as { kind?: unknown }).kind === "quarantined";
        const parsed = isMarker ? QuarantineMarkerSchema.safeParse(doc) : UsageEventSchema.safeParse(doc);
        if (!parsed.success) {
            reject(`schema: ${parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`);
            continue;
        }
        const owner = streamSpokes[r.eventSourceARN];
        if (owner === undefined) {
            reject(`stream ${r.eventSourceARN} is not a known usage stream`);
            continue;
        }
        if (parsed.data.spoke !== owner) {
            reject(`event names spoke "${parsed.data.spoke}" but arrived on the stream of spoke "${owner}"`);
            continue;
        }
        if ("kind" in parsed.data) markers.push(parsed.data);
        else events.push(parsed.data);
    }
    return { events, markers, bad };
}

/**
 * Processes one batch against an open connection: quarantine and ingest in one transaction. When the ingest meets
 * a request already counted in its optimistic mode (services/ledger/ledger.ts `isIngestRace`: nothing was
 * written, the transaction is aborted), the whole transaction runs once more, the ingest then with ON CONFLICT;
 * every statement in it is idempotent.
 * @throws the driver's error (the transaction is rolled back; Lambda retries the batch)
 */
export async function processBatch(db: Queryable, event: KinesisStreamEvent, streamSpokes: Record<string, string>): Promise<BatchOutcome> {
    const { events, markers, bad } = decodeBatch(event, streamSpokes);
    for (let run = 1; ; run++) {
        await db.query("BEGIN");
        try {
            const quarantined = await quarantine(db, bad);
            const spokeQuarantined = await recordSpokeQuarantine(db, markers);
            const r = await ingestBatch(db, events, { attempts: 1, mode: run === 1 ? undefined : "on-conflict" });
            await db.query("COMMIT");
            return { ...r, quarantined, spokeQuarantined };
        } catch (e) {
            await db.query("ROLLBACK").catch(() => undefined);
            if (run === 1 && isIngestRace(e)) continue;
            throw e;
        }
    }
}

async function fetchPassword(secretArn: string): Promise<string> {
    // Provided by the Lambda Node.js runtime (AWS SDK v3); marked external in the bundle.
    const sm = await import("@aws-sdk/client-secrets-manager");
    const out = await new sm.SecretsManagerClient({}).send(new sm.GetSecretValueCommand({ SecretId: secretArn }));
    if (!out.SecretString) throw new Error(`secret ${secretArn} has no SecretString`);
    return out.SecretString;
}

let cached: { client: Client; env: ConsumerEnv } | undefined;

async function connection(): Promise<{ client: Client; env: ConsumerEnv }> {
    if (cached) return cached;
    const env = readEnv(process.env);
    const client = new Client({
        host: env.host,
        port: env.port,
        database: env.database,
        user: env.user,
        password: await fetchPassword(env.passwordSecretArn),
        // TLS to Aurora, verified against the RDS CAs the runtime ships (NODE_EXTRA_CA_CERTS=/var/runtime/ca-cert.pem).
        ssl: { rejectUnauthorized: true },
        // Bounded on a silent network and a slow server (services/ledger/db.ts).
        ...LEDGER_PG_BOUNDS,
    });
    client.on("error", () => {
        cached = undefined;
    });
    await client.connect();
    // No DDL here: the consumer logs in as ledger_ingest (SELECT/INSERT on the ledger tables only); the schema
    // is applied by the migrator Lambda that `pulumi up` runs before the event source mappings exist
    // (services/reconciler/migrator.ts).
    cached = { client, env };
    return cached;
}

/**
 * One batch as the Lambda runs it: {@link processBatch}; when that fails, the batch's records are written to the
 * failure bucket ({@link keepFailedBatch}) before the error is thrown back to Lambda, so they outlive the stream's
 * retention whatever the retries decide. A failure to write them is logged; the batch fails either way.
 * @throws the processing error (Lambda retries the batch, bisecting it)
 */
export async function consumeBatch(
    db: Queryable,
    event: KinesisStreamEvent,
    streamSpokes: Record<string, string>,
    store: FailureStore,
): Promise<BatchOutcome> {
    try {
        return await processBatch(db, event, streamSpokes);
    } catch (e) {
        const kept = await keepFailedBatch(store, event, streamSpokes, e).then(
            (key) => ({ key }),
            (w: Error) => ({ keepError: w.message }),
        );
        console.error(JSON.stringify({ msg: "usage batch failed", records: event.Records.length, error: (e as Error).message, ...kept }));
        throw e;
    }
}

let failureStore: FailureStore | undefined;

async function store(env: ConsumerEnv): Promise<FailureStore> {
    if (failureStore) return failureStore;
    // Provided by the Lambda Node.js runtime (AWS SDK v3); marked external in the bundle.
    const s3 = await import("@aws-sdk/client-s3");
    failureStore = {
        s3: new s3.S3Client({}),
        bucket: env.failedBatchBucket,
        bucketOwner: env.failedBatchBucketOwner,
        kmsKeyArn: env.failedBatchKmsKeyArn,
    };
    return failureStore;
}

/** Lambda entry point (`index.handler` in the bundle). @throws on any database error, so the batch is retried. */
export async function handler(event: KinesisStreamEvent): Promise<BatchOutcome> {
    const env = readEnv(process.env);
    const failures = await store(env);
    let client: Client;
    try {
        ({ client } = await connection());
    } catch (e) {
        // The database cannot be reached at all: the records are kept all the same.
        await keepFailedBatch(failures, event, env.streamSpokes, e).catch(() => undefined);
        throw e;
    }
    try {
        const out = await consumeBatch(client, event, env.streamSpokes, failures);
        console.log(JSON.stringify({ msg: "usage batch", records: event.Records.length, ...out }));
        return out;
    } catch (e) {
        cached = undefined;
        discardClient(client); // never waits on a peer that stopped answering
        throw e;
    }
}
