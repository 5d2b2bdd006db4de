import { PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { z } from "zod";
import { FAILED_BATCH_PREFIX } from "./config";
import type { KinesisStreamEvent } from "./handler";

/**
 * Failed usage batches, kept with their records. A Kinesis event source mapping's SQS failure destination receives
 * only the batch's shard and sequence range (AWS Lambda developer guide, "Retain discarded batch records for a Kinesis
 * Data Streams event source"); once the stream's retention passes, the records are gone. So before the consumer
 * gives a batch back to Lambda as failed, it writes the batch's records to the failure bucket under
 * {@link FAILED_BATCH_PREFIX}, encrypted with the ledger's KMS key; `npm run replay-usage` (tools/replay-usage.ts)
 * ingests them again. Ingestion is idempotent by `(spoke, requestId)` (services/ledger/schema.sql), so a batch that
 * later succeeded on retry, or one replayed twice, is counted once.
 */

export { FAILED_BATCH_PREFIX };

/** One failed batch as stored: the Lambda event's records, verbatim, and the stream -> spoke map they were read with. */
export const FailedBatchSchema = z.object({
    version: z.literal(1),
    /** When the consumer stored it (ISO-8601 UTC). */
    failedAt: z.string(),
    /** The error that failed the batch (first line). */
    error: z.string(),
    /** Stream ARN -> the only spoke allowed to write it (as the consumer's `STREAM_SPOKES`). */
    streamSpokes: z.record(z.string(), z.string()),
    records: z
        .array(
            z.object({
                eventID: z.string(),
                eventSourceARN: z.string(),
                kinesis: z.object({ data: z.string(), partitionKey: z.string(), sequenceNumber: z.string() }),
            }),
        )
        .min(1),
});
export type FailedBatch = z.infer<typeof FailedBatchSchema>;

/**
 * Pure: the object key of a failed batch, `failed/<spoke>/<shard>/<first sequence>-<last sequence>.json`: the same
 * batch failing again overwrites its own object (no pile-up while the database is down); a bisected half gets its own.
 * `<spoke>` is `unknown` for a stream the consumer does not know. Kinesis `eventID` is `<shardId>:<sequenceNumber>`.
 * @throws Error for an empty batch
 */
export function failedBatchKey(event: KinesisStreamEvent, streamSpokes: Record<string, string>): string {
    const first = event.Records[0],
        last = event.Records[event.Records.length - 1];
    if (!first || !last) throw new Error("an empty batch has no failed-batch key");
    const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, "_");
    const spoke = streamSpokes[first.eventSourceARN] ?? "unknown";
    const shard = first.eventID.includes(":") ? first.eventID.split(":")[0] : "shard";
    return `${FAILED_BATCH_PREFIX}${safe(spoke)}/${safe(shard)}/${safe(first.kinesis.sequenceNumber)}-${safe(last.kinesis.sequenceNumber)}.json`;
}

/** Where failed batches go: the bucket and the KMS key every object is encrypted with (named in the request). */
export interface FailureStore {
    s3: Pick<S3Client, "send">;
    bucket: string;
    /** The hub's account, which owns {@link bucket}: sent as `ExpectedBucketOwner` (S3 refuses the upload to a bucket of another account). */
    bucketOwner: string;
    /** The ledger key's ARN: sent as `x-amz-server-side-encryption-aws-kms-key-id` (the bucket policy requires it). */
    kmsKeyArn: string;
}

/**
 * Writes a failed batch's records to the failure bucket (SSE-KMS with the ledger key, named in the request).
 * @returns the object key
 * @throws the S3 client's error (the caller still fails the batch, so Lambda retries it and keeps the SQS pointer)
 */
export async function keepFailedBatch(
    store: FailureStore,
    event: KinesisStreamEvent,
    streamSpokes: Record<string, string>,
    error: unknown,
    now = new Date(),
): Promise<string> {
    const key = failedBatchKey(event, streamSpokes);
    const used = new Set(event.Records.map((r) => r.eventSourceARN));
    const doc: FailedBatch = {
        version: 1,
        failedAt: now.toISOString(),
        error: String((error as Error)?.message ?? error).split("\n")[0],
        streamSpokes: Object.fromEntries(Object.entries(streamSpokes).filter(([arn]) => used.has(arn))),
        records: event.Records.map((r) => ({
            eventID: r.eventID,
            eventSourceARN: r.eventSourceARN,
            kinesis: { data: r.kinesis.data, partitionKey: r.kinesis.partitionKey, sequenceNumber: r.kinesis.sequenceNumber },
        })),
    };
    await store.s3.send(
        new PutObjectCommand({
            Bucket: store.bucket,
            ExpectedBucketOwner: store.bucketOwner,
            Key: key,
            Body: JSON.stringify(doc),
            ContentType: "application/json",
            ServerSideEncryption: "aws:kms",
            SSEKMSKeyId: store.kmsKeyArn,
        }),
    );
    return key;
}
