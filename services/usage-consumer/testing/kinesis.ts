import {
    CreateStreamCommand,
    DescribeStreamSummaryCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    KinesisClient,
    ListShardsCommand,
} from "@aws-sdk/client-kinesis";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import kinesalite from "kinesalite";
import type { KinesisStreamEvent } from "../handler";

/**
 * An in-process Kinesis-compatible server (kinesalite, in-memory) on 127.0.0.1, for tests of the transport.
 * `stop()` closes it; `endpoint` is what the SDK's `endpoint` option takes.
 */
export interface TestKinesis {
    endpoint: string;
    port: number;
    client: KinesisClient;
    /** Creates a stream and waits until it is ACTIVE. @returns its ARN */
    createStream(name: string, shards: number): Promise<string>;
    stop(): Promise<void>;
}

/** Static test credentials; kinesalite does not check signatures. */
export const TEST_CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };
export const TEST_REGION = "us-east-1";

/** @param port fixed port (to bring "the hub" back at the same address); 0 = any free port */
export async function startKinesis(port = 0): Promise<TestKinesis> {
    const server: Server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 20 });
    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => resolve());
    });
    const actual = (server.address() as AddressInfo).port;
    const endpoint = `http://127.0.0.1:${actual}`;
    const client = new KinesisClient({
        endpoint,
        region: TEST_REGION,
        credentials: TEST_CREDENTIALS,
        requestHandler: new NodeHttpHandler(),
    });
    return {
        endpoint,
        port: actual,
        client,
        async createStream(name, shards) {
            await client.send(new CreateStreamCommand({ StreamName: name, ShardCount: shards }));
            for (let i = 0; i < 100; i++) {
                const d = await client.send(new DescribeStreamSummaryCommand({ StreamName: name }));
                if (d.StreamDescriptionSummary?.StreamStatus === "ACTIVE") return d.StreamDescriptionSummary.StreamARN!;
                await new Promise((r) => setTimeout(r, 20));
            }
            throw new Error(`stream ${name} did not become ACTIVE`);
        },
        async stop() {
            client.destroy();
            await new Promise<void>((r) => server.close(() => r()));
        },
    };
}

/**
 * What a Lambda event source mapping does, minus the service: reads every shard of `stream` from
 * TRIM_HORIZON and hands batches of up to `batchSize` records to `onBatch` in the Lambda event shape.
 * @returns the number of records read
 */
export async function pollStream(
    client: KinesisClient,
    stream: string,
    streamArn: string,
    batchSize: number,
    onBatch: (e: KinesisStreamEvent) => Promise<void>,
): Promise<number> {
    const shards = (await client.send(new ListShardsCommand({ StreamName: stream }))).Shards ?? [];
    let total = 0;
    for (const sh of shards) {
        let it = (
            await client.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: sh.ShardId!, ShardIteratorType: "TRIM_HORIZON" }))
        ).ShardIterator;
        while (it) {
            const r = await client.send(new GetRecordsCommand({ ShardIterator: it, Limit: batchSize }));
            const recs = r.Records ?? [];
            if (recs.length === 0) break;
            total += recs.length;
            await onBatch({
                Records: recs.map((x) => ({
                    eventID: `${sh.ShardId}:${x.SequenceNumber}`,
                    eventSourceARN: streamArn,
                    kinesis: {
                        data: Buffer.from(x.Data!).toString("base64"),
                        partitionKey: x.PartitionKey!,
                        sequenceNumber: x.SequenceNumber!,
                    },
                })),
            });
            it = r.NextShardIterator;
        }
    }
    return total;
}
