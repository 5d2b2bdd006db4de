import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import type { Queryable } from "../ledger/ledger";
import { FAILED_BATCH_PREFIX, type FailedBatch, FailedBatchSchema } from "./failed-batches";
import { type BatchOutcome, processBatch } from "./handler";

/** What a replay found and did with one stored batch. */
export interface ReplayedBatch {
    key: string;
    records: number;
    /** The ingest outcome; undefined in a dry run. */
    outcome?: BatchOutcome;
    /** Whether the object was deleted after its batch was ingested. */
    deleted: boolean;
}

/**
 * Replays stored failed batches into the ledger: each object under `prefix` (default {@link FAILED_BATCH_PREFIX})
 * is read, validated ({@link FailedBatchSchema}) and, unless `dryRun`, ingested exactly as the consumer would
 * ({@link processBatch}: idempotent, malformed records quarantined; over `db`, or by `ingest`: the hub's ledger Lambda)
 * and then deleted. A dry run only reads and counts.
 * @throws Error naming the object that is not a stored batch, or the driver's / S3 client's error (objects already
 *   replayed stay deleted; the rest stay for the next run)
 */
export async function replayFailedBatches(x: {
    s3: Pick<S3Client, "send">;
    bucket: string;
    /** The hub's account, which owns {@link bucket}: every request carries it as `ExpectedBucketOwner`. */
    bucketOwner: string;
    prefix?: string;
    /** A ledger connection the caller can reach; or {@link ingest}. */
    db?: Queryable;
    /**
     * Ingests one stored batch elsewhere, named by its object key: the hub's ledger Lambda (services/reconciler/ops.ts),
     * which the operator invokes and which reads the object itself.
     */
    ingest?: (key: string) => Promise<BatchOutcome>;
    dryRun: boolean;
}): Promise<ReplayedBatch[]> {
    const prefix = x.prefix ?? FAILED_BATCH_PREFIX;
    if (!x.dryRun && !x.db && !x.ingest) throw new Error("replaying needs the ledger (a database connection or the ledger Lambda)");
    const out: ReplayedBatch[] = [];
    let token: string | undefined;
    do {
        const page = await x.s3.send(
            new ListObjectsV2Command({ Bucket: x.bucket, ExpectedBucketOwner: x.bucketOwner, Prefix: prefix, ContinuationToken: token }),
        );
        for (const o of page.Contents ?? []) {
            if (!o.Key) continue;
            const got = await x.s3.send(new GetObjectCommand({ Bucket: x.bucket, ExpectedBucketOwner: x.bucketOwner, Key: o.Key }));
            const text = await got.Body!.transformToString();
            let batch: FailedBatch;
            try {
                batch = FailedBatchSchema.parse(JSON.parse(text));
            } catch (e) {
                throw new Error(`s3://${x.bucket}/${o.Key} is not a stored usage batch: ${(e as Error).message.split("\n")[0]}`);
            }
            if (x.dryRun) {
                out.push({ key: o.Key, records: batch.records.length, deleted: false });
                continue;
            }
            const outcome = x.ingest ? await x.ingest(o.Key) : await processBatch(x.db!, { Records: batch.records }, batch.streamSpokes);
            await x.s3.send(new DeleteObjectCommand({ Bucket: x.bucket, ExpectedBucketOwner: x.bucketOwner, Key: o.Key }));
            out.push({ key: o.Key, records: batch.records.length, outcome, deleted: true });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out;
}
