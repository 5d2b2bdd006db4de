import { KinesisClient } from "@aws-sdk/client-kinesis";
import { S3Client } from "@aws-sdk/client-s3";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { readHubOutputs } from "./hub-outputs";
import { Client } from "pg";
import { FAILED_BATCH_PREFIX } from "../services/usage-consumer/failed-batches";
import { type ReplayedBatch, replayFailedBatches } from "../services/usage-consumer/replay";
import { type RescuedStream, rescueStreams } from "../services/usage-consumer/rescue";
import type { BatchOutcome } from "../services/usage-consumer/handler";
import type { LedgerOpsResponse } from "../services/reconciler/ops";
import { InvokeCommand, LambdaInvoker } from "./lambda-invoke";
import { ledgerFunctionFromHubOutputs } from "./status";
import { exitOnHelp } from "./cli";

/**
 * `npm run replay-usage`: ingests the usage batches the consumer could not ingest (their records, kept in the hub's
 * failure bucket by services/usage-consumer/failed-batches.ts) into the usage ledger. Dry run by default (lists the
 * stored batches and their record counts, connects to no database); `--apply` ingests each batch exactly as the
 * consumer would (idempotent by `(spoke, requestId)`: a batch that later succeeded on retry is counted once) and
 * deletes its object. Exit 0 when done, 2 on a usage or runtime error.
 */

const HELP = `
usage: npm run replay-usage [-- --hub STACK] [--outputs FILE] [--bucket NAME --bucket-owner ACCOUNT] [--region REGION] [--apply]

Replays usage batches the hub's usage consumer failed to ingest. The consumer writes a failing batch's records
to the failure bucket (hub output usageLedger.failedBatchBucket, prefix ${FAILED_BATCH_PREFIX}) before it fails the
batch; the alarms platform-usage-consumer-errors and platform-usage-failure-queue say when there are some.
Fix the cause first (database reachable, ledger migrated), then replay. Dry run unless --apply.

Ingestion is idempotent by (spoke, requestId): a batch that later succeeded on retry, or one replayed twice,
is counted once; malformed records are quarantined as the consumer does.

Usage the consumer never ran on (Lambda could not invoke it) leaves only shard and sequence pointers in the failure
queue; its records leave the stream 24 h after the platform-usage-failure-queue alarm fires (the event source
mapping gives up at the stream's retention less 24 h). Within that window, --rescue-stream copies what is still in
the spokes' streams into the failure bucket (the consumer's format, under the ledger key); then replay as above.

Options:
  --rescue-stream    copy the records still in every spoke's stream into the failure bucket (with --apply; a dry run
                     counts them); ingesting them again is idempotent
  --since ISO-TIME   with --rescue-stream: only records that arrived at or after this time (the failure message's
                     KinesisBatchInfo.approximateArrivalOfFirstRecord)
  --kinesis-endpoint URL  a Kinesis-compatible server instead of AWS Kinesis
  --hub STACK        hub stack whose outputs name the bucket (default hub-prod; needs the Pulumi CLI)
  --outputs FILE     hub outputs JSON (\`pulumi stack output --json\`) instead of asking Pulumi
  --bucket NAME      the failure bucket, instead of hub outputs (with --bucket-owner)
  --bucket-owner ACCOUNT  the hub's account id, which must own the bucket (default: hub output
                     usageLedger.failedBatchBucketOwner); every S3 request carries it (ExpectedBucketOwner), so a
                     bucket of that name in another account is never read, written or emptied
  --region REGION    the hub's region (default AWS_REGION, then the outputs' usage streams)
  --prefix PREFIX    only objects under PREFIX (default ${FAILED_BATCH_PREFIX})
  --s3-endpoint URL  an S3-compatible server instead of AWS S3
  --ledger-function NAME  the ledger Lambda instead of hub output usageLedger.opsFunction
  --lambda-endpoint URL   a Lambda-compatible server instead of AWS Lambda
  --apply            ingest and delete; without it nothing is written anywhere
  --json             one JSON document instead of text
  -h, --help         this text

The ledger (with --apply) has no route from outside its VPC: each batch is ingested by the hub's ledger Lambda
(hub output usageLedger.opsFunction, or --ledger-function; lambda:InvokeFunction, which the hub deployers hold),
as ledger_ingest, the records attributed by the hub's own stream -> spoke map. The tool sends the batch's object
key only (under ${FAILED_BATCH_PREFIX}); the function reads the batch from the failure bucket itself, so --prefix
and --bucket other than the hub's failure bucket do not apply to it. With DATABASE_URL or PGHOST set, the
tool connects to that database instead (a ledger you can reach), as ledger_ingest, over TLS.
The bucket: the AWS SDK's default credentials (a hub deployer; S3 decrypts with the ledger key).

Examples:
  npm run replay-usage -- --hub hub-prod
  DATABASE_URL=postgres://... npm run replay-usage -- --bucket platform-usage-failed-batches-123456789012-ap-southeast-1 --bucket-owner 123456789012 --region ap-southeast-1 --apply
  npm run replay-usage -- --hub hub-prod --rescue-stream --since 2026-11-29T09:00:00Z --apply
`;

/**
 * The failure bucket, its owner and region from hub outputs (`pulumi stack output --json`). The owner is
 * `usageLedger.failedBatchBucketOwner`, or for a hub that does not publish it yet the account of the ledger key
 * `usageLedger.failedBatchKeyArn` (components/hub/UsageLedger.ts creates both in the hub's account).
 * @throws Error naming what is missing
 */
export function failureBucketFromHubOutputs(json: unknown, source: string): { bucket: string; owner: string; region?: string } {
    const root = (json as { outputs?: unknown })?.outputs ?? json;
    const ledger = (
        root as {
            usageLedger?: {
                failedBatchBucket?: unknown;
                failedBatchBucketOwner?: unknown;
                failedBatchKeyArn?: unknown;
                streams?: Record<string, { region?: string }>;
            };
        }
    )?.usageLedger;
    if (!ledger || typeof ledger.failedBatchBucket !== "string" || ledger.failedBatchBucket === "[unknown]") {
        throw new Error(
            `${source}: no usageLedger.failedBatchBucket output (a hub deployed before failed batches were kept?); pass --bucket`,
        );
    }
    const region = Object.values(ledger.streams ?? {}).find((s) => typeof s?.region === "string")?.region;
    const owner =
        typeof ledger.failedBatchBucketOwner === "string"
            ? ledger.failedBatchBucketOwner
            : typeof ledger.failedBatchKeyArn === "string"
              ? ledger.failedBatchKeyArn.split(":")[4]
              : undefined;
    if (!owner || !/^\d{12}$/.test(owner))
        throw new Error(
            `${source}: no usageLedger.failedBatchBucketOwner output (nor an account in failedBatchKeyArn); pass --bucket-owner`,
        );
    return { bucket: ledger.failedBatchBucket, owner, region };
}

/**
 * What a rescue needs from the hub outputs: each spoke's stream (usageLedger.streams) and the ledger key.
 * @throws Error naming what is missing
 */
export function rescueTargetsFromHubOutputs(json: unknown, source: string): { streamSpokes: Record<string, string>; kmsKeyArn: string } {
    const root = (json as { outputs?: unknown })?.outputs ?? json;
    const ledger = (root as { usageLedger?: { streams?: Record<string, { streamArn?: string }>; failedBatchKeyArn?: unknown } })
        ?.usageLedger;
    const streamSpokes = Object.fromEntries(
        Object.entries(ledger?.streams ?? {}).flatMap(([spoke, s]) => (typeof s?.streamArn === "string" ? [[s.streamArn, spoke]] : [])),
    );
    if (!Object.keys(streamSpokes).length) throw new Error(`${source}: no usageLedger.streams output`);
    if (typeof ledger?.failedBatchKeyArn !== "string")
        throw new Error(`${source}: no usageLedger.failedBatchKeyArn output (a hub deployed before rescues); run the hub's up first`);
    return { streamSpokes, kmsKeyArn: ledger.failedBatchKeyArn };
}

/** Pure: the text report of a rescue. */
export function formatRescue(rows: RescuedStream[], dryRun: boolean): string {
    const lines = rows.map(
        (r) => `${r.spoke} (${r.streamArn}): ${r.shards} shards, ${r.records} records${dryRun ? "" : `, ${r.keys.length} objects`}`,
    );
    const records = rows.reduce((n, r) => n + r.records, 0);
    return `${[...lines, dryRun ? `${records} records still in the streams (dry run: nothing copied; --apply to keep them in the failure bucket)` : `${records} records kept in the failure bucket: now replay them (npm run replay-usage -- --apply)`].join("\n")}\n`;
}

/** Pure: the text report of a replay. */
export function formatReplay(rows: ReplayedBatch[], dryRun: boolean): string {
    const records = rows.reduce((n, r) => n + r.records, 0);
    const lines = rows.map((r) =>
        r.outcome
            ? `${r.key}: ${r.records} records, ${r.outcome.inserted} new events, ${r.outcome.quarantined} quarantined${r.deleted ? ", deleted" : ""}`
            : `${r.key}: ${r.records} records`,
    );
    const summary = dryRun
        ? `${rows.length} failed batches, ${records} records (dry run: nothing ingested; --apply to replay)`
        : `${rows.length} batches replayed, ${records} records, ${rows.reduce((n, r) => n + (r.outcome?.inserted ?? 0), 0)} events were missing from the ledger`;
    return `${[...lines, summary].join("\n")}\n`;
}

/**
 * Ingests a stored batch through the hub's ledger Lambda (services/reconciler/ops.ts `replay`): the payload names the
 * object's key only; the function reads the batch from the failure bucket itself (so no invoker can hand it records).
 * @throws the invocation's error (the batch's object stays for the next run)
 */
export function ingestViaLambda(lambda: Pick<LambdaInvoker, "send">, functionName: string) {
    return async (key: string): Promise<BatchOutcome> => {
        const r = (await lambda.send(
            new InvokeCommand({ FunctionName: functionName, Payload: { op: "replay", key } }),
        )) as LedgerOpsResponse;
        if (r?.op !== "replay" || r.key !== key) throw new Error(`${functionName} answered no replay outcome for ${key}`);
        return r.outcome;
    };
}

async function main(argv: string[]): Promise<number> {
    exitOnHelp(argv, HELP);
    const opt = (k: string) => {
        const i = argv.indexOf(`--${k}`);
        if (i < 0) return undefined;
        const v = argv[i + 1];
        if (v === undefined || v.startsWith("--")) throw new Error(`--${k} needs a value`);
        return v;
    };
    const valued = [
        "--hub",
        "--outputs",
        "--bucket",
        "--bucket-owner",
        "--region",
        "--prefix",
        "--s3-endpoint",
        "--ledger-function",
        "--lambda-endpoint",
        "--since",
        "--kinesis-endpoint",
    ];
    const known = new Set([...valued, "--apply", "--json", "--rescue-stream"]);
    const unknown = argv.filter((a, i) => a.startsWith("--") && !known.has(a) && !(i > 0 && valued.includes(argv[i - 1])));
    if (unknown.length) throw new Error(`unknown option ${unknown[0]} (see --help)`);
    const dryRun = !argv.includes("--apply");
    let bucket = opt("bucket");
    let owner = opt("bucket-owner");
    if (owner !== undefined && !/^\d{12}$/.test(owner)) throw new Error(`--bucket-owner ${owner} is not a 12-digit AWS account id`);
    if (bucket && !owner) throw new Error("--bucket needs --bucket-owner (the hub's account id, which must own the bucket)");
    let region = opt("region") ?? process.env.AWS_REGION;
    const rescue = argv.includes("--rescue-stream");
    const direct = !!(process.env.DATABASE_URL || process.env.PGHOST);
    // The hub outputs, read once: the bucket (unless --bucket) and the ledger Lambda (unless --ledger-function).
    const hub = opt("hub") ?? "hub-prod";
    const file = opt("outputs");
    const source = file ?? `pulumi stack output --stack ${hub}`;
    let outputs: unknown;
    const hubOutputs = () => {
        outputs ??= readHubOutputs(file, hub, "--outputs FILE or --bucket");
        return outputs;
    };
    if (!bucket) {
        const found = failureBucketFromHubOutputs(hubOutputs(), source);
        bucket = found.bucket;
        owner ??= found.owner;
        region ??= found.region;
    }
    // A rescue only copies stream records into the bucket: it needs no ledger.
    const fnName =
        !dryRun && !direct && !rescue ? (opt("ledger-function") ?? ledgerFunctionFromHubOutputs(hubOutputs(), source).name) : undefined;
    if (!region) throw new Error("no region: pass --region or set AWS_REGION");
    const endpoint = opt("s3-endpoint");
    const s3 = new S3Client({ region, ...(endpoint ? { endpoint, forcePathStyle: true } : {}) });
    if (rescue) {
        const since = opt("since");
        if (since !== undefined && Number.isNaN(Date.parse(since))) throw new Error(`--since ${since} is not an ISO-8601 time`);
        const targets = rescueTargetsFromHubOutputs(hubOutputs(), source);
        const kinesisEndpoint = opt("kinesis-endpoint");
        // HTTP/1.1: the client's default HTTP/2 handler is for SubscribeToShard, which a rescue does not use.
        const kinesis = new KinesisClient({
            region,
            requestHandler: new NodeHttpHandler(),
            ...(kinesisEndpoint ? { endpoint: kinesisEndpoint } : {}),
        });
        try {
            const rows = await rescueStreams({
                kinesis,
                store: { s3, bucket, bucketOwner: owner!, kmsKeyArn: targets.kmsKeyArn },
                streamSpokes: targets.streamSpokes,
                since: since ? new Date(since) : undefined,
                dryRun,
            });
            process.stdout.write(
                argv.includes("--json") ? `${JSON.stringify({ dryRun, bucket, streams: rows }, null, 2)}\n` : formatRescue(rows, dryRun),
            );
            return 0;
        } finally {
            kinesis.destroy();
            s3.destroy();
        }
    }
    let db: Client | undefined;
    try {
        const ingest = fnName ? ingestViaLambda(new LambdaInvoker(region, s3, opt("lambda-endpoint")), fnName) : undefined;
        if (!dryRun && direct) {
            db = new Client(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
            await db.connect().catch((e: Error) => {
                throw new Error(
                    `cannot reach the usage ledger (${process.env.DATABASE_URL ? "DATABASE_URL" : `PGHOST=${process.env.PGHOST ?? "(unset: localhost)"}`}): ${e.message}. Set DATABASE_URL or the libpq variables (PGHOST, PGUSER, PGPASSWORD, PGDATABASE) to a ledger you can reach, or unset both to go through the hub's ledger Lambda.`,
                );
            });
        }
        const rows = await replayFailedBatches({ s3, bucket, bucketOwner: owner!, prefix: opt("prefix"), db, ingest, dryRun });
        process.stdout.write(
            argv.includes("--json") ? `${JSON.stringify({ dryRun, bucket, batches: rows }, null, 2)}\n` : formatReplay(rows, dryRun),
        );
        return 0;
    } finally {
        await db?.end();
        s3.destroy();
    }
}

if (require.main === module) {
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (e) => {
            process.stderr.write(`replay-usage: ${(e as Error).message}\n`);
            process.exit(2);
        },
    );
}
