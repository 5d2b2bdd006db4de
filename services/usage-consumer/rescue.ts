import { GetRecordsCommand, GetShardIteratorCommand, type KinesisClient, ListShardsCommand } from "@aws-sdk/client-kinesis";
import { type FailureStore, keepFailedBatch } from "./failed-batches";
import type { KinesisStreamEvent } from "./handler";

/**
 * Rescue of usage the consumer never ran on. When Lambda cannot invoke the consumer at all (throttled, failing to
 * start), the event source mapping discards a batch once its records reach `maximumRecordAgeInSeconds` and sends only
 * its shard and sequence range to the failure queue (AWS Lambda developer guide, "Retain discarded batch records for a
 * Kinesis Data Streams event source"): no consumer code ran, so nothing kept the records. The mapping's maximum record
 * age is the stream's retention less 24 h (components/hub/ledger/functions.ts), so when the failure-queue alarm fires
 * the records stay in the stream for 24 h more. This copies them, as they are, into the failure bucket in the format
 * the consumer keeps failed batches in (services/usage-consumer/failed-batches.ts), where they outlive the stream and
 * `npm run replay-usage -- --apply` ingests them; ingestion is idempotent by `(spoke, requestId)`, so records the
 * consumer did ingest are counted once.
 */

/** What a rescue copied from one stream. */
export interface RescuedStream {
    streamArn: string;
    spoke: string;
    shards: number;
    records: number;
    /** Failure-bucket keys written (one per {@link RescueArgs.batchSize} records of a shard). */
    keys: string[];
}

export interface RescueArgs {
    kinesis: Pick<KinesisClient, "send">;
    store: FailureStore;
    /** Stream ARN -> the only spoke allowed to write it (hub output usageLedger.streams). */
    streamSpokes: Record<string, string>;
    /** Copy records that arrived at or after this time (the failure message's `approximateArrivalOfFirstRecord`); default: all. */
    since?: Date;
    /** Records per stored batch (default 500). */
    batchSize?: number;
    /** Read and count only; write nothing. */
    dryRun: boolean;
    now?: Date;
}

/** `arn:aws:kinesis:<region>:<account>:stream/<name>` -> `<name>`. @throws Error for anything else */
export function streamNameOf(streamArn: string): string {
    const m = /^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream\/([A-Za-z0-9_.-]+)$/.exec(streamArn);
    if (!m) throw new Error(`${streamArn} is not a Kinesis stream ARN`);
    return m[1];
}

/**
 * Copies every record still in each stream (from `since`, else from the oldest) into the failure bucket.
 * @throws the Kinesis or S3 client's error (objects already written stay; running again rewrites the same keys)
 */
export async function rescueStreams(x: RescueArgs): Promise<RescuedStream[]> {
    const size = x.batchSize ?? 500;
    const out: RescuedStream[] = [];
    for (const [streamArn, spoke] of Object.entries(x.streamSpokes).sort(([a], [b]) => a.localeCompare(b))) {
        const StreamName = streamNameOf(streamArn);
        const shards: string[] = [];
        let next: string | undefined;
        do {
            const page = await x.kinesis.send(new ListShardsCommand(next ? { NextToken: next } : { StreamName }));
            shards.push(...(page.Shards ?? []).map((s) => s.ShardId!).filter(Boolean));
            next = page.NextToken;
        } while (next);
        const row: RescuedStream = { streamArn, spoke, shards: shards.length, records: 0, keys: [] };
        for (const ShardId of shards) {
            let iterator = (
                await x.kinesis.send(
                    new GetShardIteratorCommand(
                        x.since
                            ? { StreamName, ShardId, ShardIteratorType: "AT_TIMESTAMP", Timestamp: x.since }
                            : { StreamName, ShardId, ShardIteratorType: "TRIM_HORIZON" },
                    ),
                )
            ).ShardIterator;
            let pending: KinesisStreamEvent["Records"] = [];
            const flush = async () => {
                if (!pending.length) return;
                row.records += pending.length;
                if (!x.dryRun)
                    row.keys.push(
                        await keepFailedBatch(
                            x.store,
                            { Records: pending },
                            { [streamArn]: spoke },
                            new Error("rescued from the stream: the event source mapping discarded the batch before the consumer ran"),
                            x.now,
                        ),
                    );
                pending = [];
            };
            while (iterator) {
                const got = await x.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
                for (const r of got.Records ?? []) {
                    pending.push({
                        eventID: `${ShardId}:${r.SequenceNumber}`,
                        eventSourceARN: streamArn,
                        kinesis: {
                            data: Buffer.from(r.Data ?? new Uint8Array()).toString("base64"),
                            partitionKey: r.PartitionKey ?? "",
                            sequenceNumber: r.SequenceNumber ?? "",
                        },
                    });
                    if (pending.length >= size) await flush();
                }
                // At the tip of an open shard: nothing more to copy now (a closed shard ends with no next iterator).
                if (!got.Records?.length && (got.MillisBehindLatest ?? 0) === 0) break;
                iterator = got.NextShardIterator;
            }
            await flush();
        }
        out.push(row);
    }
    return out;
}
