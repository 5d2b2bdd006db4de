// First: on --help it exits before the imports below load.
import { HELP } from "./help/status";
import {
    GetBucketLoggingCommand,
    type GetBucketLoggingCommandOutput,
    GetObjectCommand,
    ListBucketsCommand,
    ListObjectsV2Command,
    S3Client,
} from "@aws-sdk/client-s3";
import { rolloutStatusLines } from "../lib/rollout";
import { readHubOutputs } from "./hub-outputs";
import { placementLines } from "./placement-view";
import { Client } from "pg";
import { AckSchema, bundlePaths, CurrentPointerSchema } from "../services/shared/bundle";
import type { Queryable } from "../services/ledger/ledger";
import { readSpokeLedger, type SpokeLedger } from "../services/reconciler/ops";
import { InvokeCommand, LambdaInvoker } from "./lambda-invoke";
import { exitOnHelp } from "./cli";
import { ACCESS_LOG_PARTITION_DATE_SOURCE, accessLogBucketOf, POLICY_BUCKET_LOG_PREFIX } from "../lib/hub-bucket-names";

/**
 * `npm run status [-- --hub <stack>]`: where each spoke stands, read from the hub's own state (never from a spoke):
 * - the policy bundle: the revision the hub published (`spokes/<spoke>/current.json` in the policy bucket, and when),
 *   the highest revision the spoke ACKed (`spokes/<spoke>/acks/<rev>.json`, and when);
 * - usage: when the ledger last received an event from the spoke and the newest `endedAt` it holds (usage lag);
 * - quarantined usage (events Kinesis would not take, shipped as markers) and the last scheduled reconciliation the
 *   hub recorded (`reconciliation_runs`, services/ledger/status.ts);
 * - reconciliation over the last `--window-hours` (default 24), computed now: events the spoke's sequence numbers
 *   say it sent that never arrived, and duplicates.
 * Exits 1 when a spoke is behind: its ACKed revision is older than the published one for longer than
 * `--max-behind-seconds` (default 900), or the reconciliation window has missing events. Exit 2 on a usage error.
 *
 * Hub outputs: `pulumi stack output --json --stack <hub>` (needs the Pulumi CLI and the backend), or `--outputs FILE`
 * with that JSON (or `out/<hub>/outputs.json` of the offline render). Ledger: the hub's ledger Lambda
 * (services/reconciler/ops.ts; the database has no route from outside its VPC), or `DATABASE_URL` / the libpq
 * variables for a database the caller can reach. Bucket: the AWS SDK's default credentials; `--s3-endpoint URL` for an S3-compatible server.
 */

/** Where one spoke stands. Times are ISO-8601 UTC or null when never. */
export interface SpokeStatus {
    spoke: string;
    /** Revision in the hub's `current.json`, and when the hub wrote it. */
    publishedRevision: number | null;
    publishedAt: string | null;
    /** Highest revision the spoke ACKed, and when it ACKed it. */
    ackedRevision: number | null;
    ackedAt: string | null;
    /** Seconds the spoke has been behind the published revision (0 when current). */
    behindSeconds: number;
    /** Newest `received_at` / `ended_at` of the spoke's usage in the ledger. */
    lastUsageReceivedAt: string | null;
    lastUsageEndedAt: string | null;
    /** Seconds from the newest usage `ended_at` to now (null without usage). */
    usageLagSeconds: number | null;
    /** Usage events the spoke quarantined (all time). */
    quarantined: number;
    /** The last scheduled reconciliation the hub recorded: when, and events missing in its window. */
    lastReconciliation: { ranAt: string; missing: number } | null;
    /** Reconciliation over the window: events the spoke sent that never arrived, and redeliveries. */
    reconciliation: { windowHours: number; sent: number; missing: number; duplicates: number };
    /** Why the spoke counts as behind (empty: healthy). */
    problems: string[];
}

export interface StatusOptions {
    /**
     * Spoke name -> policy bucket, its owner (the hub's account, sent as `ExpectedBucketOwner` with every request) and
     * region (hub output `spokeContracts.<spoke>.policy`).
     */
    spokes: Record<string, { bucket: string; owner: string; region: string }>;
    s3: (region: string) => S3Client;
    /**
     * The ledger side: a connection the caller can reach (`--local`, tests, DATABASE_URL), or the hub's ledger
     * Lambda (services/reconciler/ops.ts through {@link ledgerFromLambda}: the ledger has no route from outside its VPC).
     */
    ledger: LedgerReader;
    now: Date;
    maxBehindSeconds: number;
    windowHours: number;
}

/** A hub bucket and the account that must own it. */
interface OwnedBucket {
    bucket: string;
    owner: string;
}

async function getJson(s3: S3Client, b: OwnedBucket, key: string): Promise<{ body: unknown; lastModified?: Date } | undefined> {
    try {
        const r = await s3.send(new GetObjectCommand({ Bucket: b.bucket, ExpectedBucketOwner: b.owner, Key: key }));
        return { body: JSON.parse(await r.Body!.transformToString()), lastModified: r.LastModified };
    } catch (e) {
        if ((e as { name?: string }).name === "NoSuchKey") return undefined;
        throw e;
    }
}

async function listKeys(s3: S3Client, b: OwnedBucket, prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
        const r = await s3.send(
            new ListObjectsV2Command({ Bucket: b.bucket, ExpectedBucketOwner: b.owner, Prefix: prefix, ContinuationToken: token }),
        );
        for (const o of r.Contents ?? []) if (o.Key) keys.push(o.Key);
        token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return keys;
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

/** The ledger side of every spoke's status (services/reconciler/ops.ts {@link readSpokeLedger}). */
export type LedgerReader = (q: { spokes: string[]; from: string }) => Promise<SpokeLedger[]>;

/** Reads the ledger over a connection the caller can reach. */
export const ledgerFromDb =
    (db: Queryable): LedgerReader =>
    (q) =>
        readSpokeLedger(db, q);

/**
 * Reads the ledger through the hub's ledger Lambda (hub output `usageLedger.opsFunction`), as the operator:
 * `lambda:InvokeFunction` on that one function (tools/aws-calls.ts).
 */
export const ledgerFromLambda =
    (lambda: LambdaInvoker, functionName: string): LedgerReader =>
    async (q) => {
        const r = (await lambda.send(new InvokeCommand({ FunctionName: functionName, Payload: { op: "status", ...q } }))) as {
            spokes?: SpokeLedger[];
        };
        if (!Array.isArray(r?.spokes)) throw new Error(`${functionName} answered no spokes`);
        return r.spokes;
    };

/**
 * Reads every spoke's status from the hub's bucket and ledger.
 * @throws the S3 or PostgreSQL client's error when either cannot be read (never reported as "healthy")
 */
export async function collectStatus(o: StatusOptions): Promise<SpokeStatus[]> {
    const out: SpokeStatus[] = [];
    const from = new Date(o.now.getTime() - o.windowHours * 3600_000);
    from.setUTCMinutes(0, 0, 0);
    const ledger = new Map((await o.ledger({ spokes: Object.keys(o.spokes), from: from.toISOString() })).map((u) => [u.spoke, u]));
    for (const spoke of Object.keys(o.spokes).sort()) {
        const { region, ...bucket } = o.spokes[spoke];
        const s3 = o.s3(region);
        const problems: string[] = [];
        const current = await getJson(s3, bucket, bundlePaths.current(spoke));
        const pointer = current ? CurrentPointerSchema.safeParse(current.body) : undefined;
        if (!current) problems.push("the hub has published no bundle (no current.json)");
        else if (!pointer?.success) problems.push("current.json is malformed");
        const publishedRevision = pointer?.success ? pointer.data.revision : null;

        let acked: { revision: number; at: string } | null = null;
        for (const key of await listKeys(s3, bucket, `${bundlePaths.prefix(spoke)}acks/`)) {
            const a = await getJson(s3, bucket, key);
            const ack = a && AckSchema.safeParse(a.body);
            if (ack?.success && ack.data.spoke === spoke && (!acked || ack.data.revision > acked.revision))
                acked = { revision: ack.data.revision, at: ack.data.at };
        }
        let behindSeconds = 0;
        if (publishedRevision !== null && (acked?.revision ?? 0) < publishedRevision) {
            const since = current?.lastModified ?? o.now;
            behindSeconds = Math.max(0, Math.round((o.now.getTime() - since.getTime()) / 1000));
            if (behindSeconds > o.maxBehindSeconds) {
                problems.push(
                    `serves revision ${acked?.revision ?? "none"} of ${publishedRevision}, behind for ${behindSeconds} s (limit ${o.maxBehindSeconds} s)`,
                );
            }
        }

        const l = ledger.get(spoke);
        if (!l) throw new Error(`the ledger returned no status for spoke ${spoke}`);
        const reconciliation = { windowHours: o.windowHours, ...l.reconciliation };
        if (reconciliation.missing > 0)
            problems.push(`${reconciliation.missing} usage event(s) sent in the last ${o.windowHours} h never reached the ledger`);
        out.push({
            spoke,
            publishedRevision,
            publishedAt: iso(current?.lastModified),
            ackedRevision: acked?.revision ?? null,
            ackedAt: acked?.at ?? null,
            behindSeconds,
            lastUsageReceivedAt: l.lastUsageReceivedAt,
            lastUsageEndedAt: l.lastUsageEndedAt,
            usageLagSeconds: l.lastUsageEndedAt ? Math.round((o.now.getTime() - new Date(l.lastUsageEndedAt).getTime()) / 1000) : null,
            quarantined: l.quarantined,
            lastReconciliation: l.lastReconciliation,
            reconciliation,
            problems,
        });
    }
    return out;
}

/** Hours after which the policy bucket's newest server access log counts as late (delivery is best effort, usually within hours). */
export const ACCESS_LOG_MAX_AGE_HOURS = 24;

/**
 * How far a creation time S3 gives may lie ahead of this machine's clock and still count as clock skew: SigV4's own
 * allowance (S3 answers `RequestTimeTooSkewed` with `MaxAllowedSkewMilliseconds` 900000). A later one means this clock
 * is wrong, and is reported. Like every age in this command, the rest is measured on this machine's clock.
 */
const CLOCK_SKEW_MS = 15 * 60_000;

/**
 * Pure: when the hub's server access logging started, as far as S3 says: the log bucket's `CreationDate` in a
 * `ListBuckets` answer (components/hub/AccessLogs.ts creates the log bucket and turns logging on in the same update,
 * the logging after the bucket), or undefined when the answer does not list `logBucket`. `ListBuckets` lists only the
 * buckets of the caller's account, so a bucket of that name owned by anyone else is never found. S3 documents that
 * `CreationDate` "can change when making changes to your bucket, such as editing its bucket policy" (S3 API reference,
 * data type Bucket): it is the latest of the creation and such changes, never earlier than either.
 */
export function logBucketCreatedAt(buckets: ReadonlyArray<{ Name?: string; CreationDate?: Date }>, logBucket: string): Date | undefined {
    const b = buckets.find((x) => x.Name === logBucket);
    return b?.CreationDate ? new Date(b.CreationDate) : undefined;
}

/**
 * The log bucket's `CreationDate` ({@link logBucketCreatedAt}) from S3 `ListBuckets` (IAM action
 * `s3:ListAllMyBuckets`, tools/aws-calls.ts), asked for bucket names beginning with `logBucket` (`Prefix`) a page at a
 * time (S3 API reference, ListBuckets: paginated requests recommended).
 * @throws the S3 client's error when the buckets cannot be listed
 */
export async function listLogBucketCreatedAt(s3: S3Client, logBucket: string): Promise<Date | undefined> {
    const buckets: Array<{ Name?: string; CreationDate?: Date }> = [];
    let token: string | undefined;
    do {
        const r = await s3.send(new ListBucketsCommand({ Prefix: logBucket, MaxBuckets: 1000, ContinuationToken: token }));
        buckets.push(...(r.Buckets ?? []));
        token = r.ContinuationToken;
    } while (token);
    return logBucketCreatedAt(buckets, logBucket);
}

/**
 * Pure: why a `GetBucketLogging` answer for the policy bucket is not the logging components/hub/AccessLogs.ts configures
 * (programs/hub.ts), or undefined: `LoggingEnabled` with `TargetBucket` `logBucket`, `TargetPrefix`
 * {@link POLICY_BUCKET_LOG_PREFIX}, no `TargetGrants` (the log bucket enforces bucket-owner ownership, which supports
 * none) and `TargetObjectKeyFormat` `PartitionedPrefix` with `PartitionDateSource` {@link ACCESS_LOG_PARTITION_DATE_SOURCE}
 * (the keys this command lists). Response shape: S3 API reference, GetBucketLogging (no `LoggingEnabled`: logging off).
 */
export function policyBucketLoggingIssue(
    answer: Pick<GetBucketLoggingCommandOutput, "LoggingEnabled">,
    policyBucket: string,
    logBucket: string,
): string | undefined {
    const l = answer.LoggingEnabled;
    if (!l) return `server access logging of ${policyBucket} is off (GetBucketLogging: no LoggingEnabled)`;
    const found: string[] = [];
    if (l.TargetBucket !== logBucket) found.push(`target bucket ${l.TargetBucket ?? "(none)"}, not ${logBucket}`);
    if (l.TargetPrefix !== POLICY_BUCKET_LOG_PREFIX)
        found.push(`target prefix ${JSON.stringify(l.TargetPrefix ?? "")}, not ${JSON.stringify(POLICY_BUCKET_LOG_PREFIX)}`);
    if (l.TargetGrants?.length) found.push(`${l.TargetGrants.length} target grant(s), none expected`);
    const f = l.TargetObjectKeyFormat;
    const source = f?.PartitionedPrefix?.PartitionDateSource;
    if (!f?.PartitionedPrefix || f.SimplePrefix || source !== ACCESS_LOG_PARTITION_DATE_SOURCE)
        found.push(
            `key format ${f?.PartitionedPrefix ? `partitioned by ${source ?? "(no date source)"}` : "simple"}${f?.PartitionedPrefix && f.SimplePrefix ? " and simple" : ""}, not partitioned by ${ACCESS_LOG_PARTITION_DATE_SOURCE}`,
        );
    return found.length ? `server access logging of ${policyBucket} is not the hub's: ${found.join("; ")}` : undefined;
}

/**
 * The state of the policy bucket's S3 server access logs: `ok` (a log object younger than
 * {@link ACCESS_LOG_MAX_AGE_HOURS}), `waiting` (none yet on a hub whose logging started less than that ago: information,
 * not a failure) or `problem` (with why).
 */
export type AccessLogState = { state: "ok" } | { state: "waiting"; info: string } | { state: "problem"; problem: string };

/**
 * Whether the policy bucket's S3 server access logs keep arriving. The newest log object under its prefix
 * (`policy-bundles/<account>/<region>/<bucket>/<yyyy>/<mm>/<dd>/`, components/hub/AccessLogs.ts, date-partitioned by
 * event time) from today or yesterday (UTC) must be younger than {@link ACCESS_LOG_MAX_AGE_HOURS}. Only the policy bucket
 * is checked: the spokes read it all the time (and this command just did), so a day without a log object means
 * delivery stopped (logging turned off, the log bucket's policy changed); the failure bucket may rightly see no request
 * for days.
 *
 * Without a recent log object it is `waiting`, not a problem, only while all of these hold (closed world: anything
 * not established is a problem): no log object of the policy bucket exists at all (within the log bucket's retention;
 * a hub whose logs once arrived is not waiting for its first ones), `loggingSince()` gives a time (a new hub: the log
 * bucket's creation, {@link listLogBucketCreatedAt}) and that time is less than {@link ACCESS_LOG_MAX_AGE_HOURS} before
 * `now` and not after it beyond clock skew. S3 delivers server access logs best effort, usually within a few hours (S3
 * user guide, "Best-effort server log delivery"), so a hub with logging on for longer and no log is reported.
 * `loggingSince` is asked only when no recent log object exists; its error is reported as a problem. Because the
 * bucket's `CreationDate` moves forward on some changes (editing its bucket policy), a young creation date alone does
 * not prove a new hub: waiting also needs the policy bucket's logging to be the hub's, as S3 `GetBucketLogging` says
 * (IAM action `s3:GetBucketLogging`, `ExpectedBucketOwner` the hub's account; {@link policyBucketLoggingIssue}). Any
 * other answer, an error or a refusal included, is a problem naming what was found.
 * @throws the S3 client's error when the log bucket cannot be listed
 */
export async function accessLogState(o: {
    s3: S3Client;
    /** The log bucket and the hub's account, which owns it and the policy bucket. */
    logBucket: string;
    owner: string;
    policyBucket: string;
    region: string;
    now: Date;
    /** When server access logging of the policy bucket started, or undefined when unknown. */
    loggingSince: () => Promise<Date | undefined>;
}): Promise<AccessLogState> {
    const prefix = `${POLICY_BUCKET_LOG_PREFIX}${o.owner}/${o.region}/${o.policyBucket}/`;
    const day = (d: Date) =>
        `${prefix}${d.getUTCFullYear()}/${String(d.getUTCMonth() + 1).padStart(2, "0")}/${String(d.getUTCDate()).padStart(2, "0")}/`;
    let newest: Date | undefined;
    for (const p of [day(new Date(o.now.getTime() - 86_400_000)), day(o.now)]) {
        let token: string | undefined;
        do {
            const r = await o.s3.send(
                new ListObjectsV2Command({ Bucket: o.logBucket, ExpectedBucketOwner: o.owner, Prefix: p, ContinuationToken: token }),
            );
            for (const obj of r.Contents ?? []) if (obj.LastModified && (!newest || obj.LastModified > newest)) newest = obj.LastModified;
            token = r.IsTruncated ? r.NextContinuationToken : undefined;
        } while (token);
    }
    const limitMs = ACCESS_LOG_MAX_AGE_HOURS * 3600_000;
    if (newest && newest.getTime() >= o.now.getTime() - limitMs) return { state: "ok" };
    const late = `access logs of ${o.policyBucket}: ${newest ? `the newest in ${o.logBucket} is from ${newest.toISOString()}` : `none in ${o.logBucket} from today or yesterday (UTC)`}, older than ${ACCESS_LOG_MAX_AGE_HOURS} h`;
    const hint = `is server access logging still on and the log bucket's policy the hub's? (docs/architecture.md, "Audit of the hub's data buckets")`;
    if (newest) return { state: "problem", problem: `${late}: ${hint}` };
    const any = await o.s3.send(
        new ListObjectsV2Command({ Bucket: o.logBucket, ExpectedBucketOwner: o.owner, Prefix: prefix, MaxKeys: 1 }),
    );
    if ((any.Contents ?? []).length) return { state: "problem", problem: `${late} (older ones exist, so logs did arrive once): ${hint}` };
    let since: Date | undefined;
    try {
        since = await o.loggingSince();
    } catch (e) {
        return { state: "problem", problem: `${late}, and when logging started is unknown (${(e as Error).message}): ${hint}` };
    }
    if (!since || Number.isNaN(since.getTime()))
        return {
            state: "problem",
            problem: `${late}, and when logging started is unknown (${o.logBucket} not among this account's buckets): ${hint}`,
        };
    const age = o.now.getTime() - since.getTime();
    if (age < -CLOCK_SKEW_MS)
        return { state: "problem", problem: `${late}, and logging started at ${since.toISOString()}, after this machine's clock: ${hint}` };
    if (age >= limitMs) return { state: "problem", problem: `${late}, and logging has been on since ${since.toISOString()}: ${hint}` };
    // Only here, on the way to `waiting`: the creation date is young, but is logging really on, to the hub's log bucket?
    let logging: GetBucketLoggingCommandOutput;
    try {
        logging = await o.s3.send(new GetBucketLoggingCommand({ Bucket: o.policyBucket, ExpectedBucketOwner: o.owner }));
    } catch (e) {
        return {
            state: "problem",
            problem: `${late}, and the logging of ${o.policyBucket} could not be read (GetBucketLogging: ${(e as Error).name}: ${(e as Error).message}): ${hint}`,
        };
    }
    const issue = policyBucketLoggingIssue(logging, o.policyBucket, o.logBucket);
    if (issue) return { state: "problem", problem: `${late}, and ${issue}: ${hint}` };
    return {
        state: "waiting",
        info: `access logs of ${o.policyBucket}: waiting for the first access logs (logging on since ${since.toISOString()}, S3 delivers within hours; a problem if none by ${new Date(since.getTime() + limitMs).toISOString()})`,
    };
}

/** A bare Lambda function name (AWS Lambda API reference, `FunctionName`: letters, digits, `-`, `_`; 64 at most). */
const BARE_FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** An AWS region name (`ap-southeast-1`, `us-gov-west-1`). */
const REGION_NAME = /^[a-z]{2}(-[a-z]+)+-\d$/;

/**
 * The hub's ledger Lambda (hub output `usageLedger.opsFunction`: `{ name, region }`), or `override` (`--ledger-function`).
 * The outputs file is not signed, so its name must be a bare function name: never an ARN (which could name another
 * account's function, handed the operator's status queries and batch keys under the operator's credentials) nor a
 * partial one; the invocation then stays in the operator's own account.
 * @throws Error naming the missing or refused output
 */
export function ledgerFunctionFromHubOutputs(json: unknown, source: string, override?: string): { name: string; region?: string } {
    const root = (json as { outputs?: unknown })?.outputs ?? json;
    const fn = (root as { usageLedger?: { opsFunction?: { name?: unknown; region?: unknown } } })?.usageLedger?.opsFunction;
    const region = typeof fn?.region === "string" && fn.region !== "[unknown]" ? fn.region : undefined;
    if (region !== undefined && !REGION_NAME.test(region))
        throw new Error(`${source}: usageLedger.opsFunction.region "${region}" is not an AWS region name`);
    if (override) return { name: override, region };
    if (typeof fn?.name !== "string" || fn.name === "[unknown]")
        throw new Error(`${source}: no usageLedger.opsFunction output (a hub deployed before the ledger Lambda?); pass --ledger-function`);
    if (!BARE_FUNCTION_NAME.test(fn.name))
        throw new Error(
            `${source}: usageLedger.opsFunction.name "${fn.name}" is not a bare function name (no ARN, no account): pass --ledger-function`,
        );
    return { name: fn.name, region };
}

/** A table a reviewer reads at a glance, one line per spoke, problems below it. */
export function formatStatus(rows: SpokeStatus[]): string {
    const head = [
        "spoke",
        "published",
        "acked",
        "acked at",
        "behind s",
        "last usage",
        "lag s",
        "missing",
        "dup",
        "quarantined",
        "last reconciliation",
        "state",
    ];
    const body = rows.map((r) => [
        r.spoke,
        String(r.publishedRevision ?? "-"),
        String(r.ackedRevision ?? "-"),
        r.ackedAt ?? "-",
        String(r.behindSeconds),
        r.lastUsageReceivedAt ?? "-",
        r.usageLagSeconds === null ? "-" : String(r.usageLagSeconds),
        String(r.reconciliation.missing),
        String(r.reconciliation.duplicates),
        String(r.quarantined),
        r.lastReconciliation ? `${r.lastReconciliation.ranAt} (${r.lastReconciliation.missing} missing)` : "never",
        r.problems.length ? "BEHIND" : "ok",
    ]);
    const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
    const line = (cells: string[]) =>
        cells
            .map((c, i) => c.padEnd(widths[i]))
            .join("  ")
            .trimEnd();
    const problems = rows.flatMap((r) => r.problems.map((p) => `${r.spoke}: ${p}`));
    return `${[line(head), ...body.map(line), ...(problems.length ? ["", ...problems] : [])].join("\n")}\n`;
}

/** The spokes and their policy buckets from hub outputs (`pulumi stack output --json`, or the render's outputs.json). */
export function spokesFromHubOutputs(json: unknown, source: string): StatusOptions["spokes"] {
    const root = (json as { outputs?: unknown })?.outputs ?? json;
    const contracts = (
        root as {
            spokeContracts?: Record<string, { policy?: { bucket?: string; bucketOwner?: string; kmsKeyArn?: string; region?: string } }>;
        }
    )?.spokeContracts;
    if ((contracts as unknown) === "[unknown]")
        throw new Error(
            `${source}: spokeContracts is unknown (rendered with --preview?); use the outputs of a normal render or of the deployed hub`,
        );
    if (!contracts || typeof contracts !== "object") throw new Error(`${source}: no spokeContracts output (is this a hub stack?)`);
    const spokes: StatusOptions["spokes"] = {};
    for (const [name, c] of Object.entries(contracts)) {
        if (!c.policy?.bucket || !c.policy.region) throw new Error(`${source}: spokeContracts.${name}.policy has no bucket/region`);
        // The owner: `bucketOwner`, or for a hub that does not publish it yet the account of the bucket's key (config/contract.ts).
        const owner = c.policy.bucketOwner ?? c.policy.kmsKeyArn?.split(":")[4];
        if (!owner || !/^\d{12}$/.test(owner)) throw new Error(`${source}: spokeContracts.${name}.policy names no bucket owner`);
        spokes[name] = { bucket: c.policy.bucket, owner, region: c.policy.region };
    }
    return spokes;
}

/**
 * `--local`: the same status against throwaway stand-ins of the hub's state on loopback, to see what the command
 * shows before a hub exists: PostgreSQL with the ledger schema (services/ledger/testing/postgres.ts, the server the
 * tests use) and an S3 API (s3rver) holding the policy bucket. Sample data: every spoke published revision 2 and
 * ACKed it and sent ten usage events, except the last spoke, which still serves revision 1 and whose events 3 and 4
 * never arrived (the reconciliation counts them). Everything is removed afterwards.
 */
async function runLocal(spokes: StatusOptions["spokes"], json: boolean, maxBehindSeconds: number, windowHours: number): Promise<number> {
    /* eslint-disable @typescript-eslint/no-require-imports */
    const { startPostgres } = require("../services/ledger/testing/postgres") as typeof import("../services/ledger/testing/postgres");
    const { startS3, BUCKET, BUCKET_OWNER_ACCOUNT } =
        require("../services/auth/test/harness") as typeof import("../services/auth/test/harness");
    const { migrate, ingestBatch } = require("../services/ledger/ledger") as typeof import("../services/ledger/ledger");
    /* eslint-enable @typescript-eslint/no-require-imports */
    const names = Object.keys(spokes).sort();
    const pg = await startPostgres();
    const s3 = await startS3();
    const db = await pg.connect();
    try {
        await migrate(db);
        // The sample revision 2 is published now (the stand-in stamps it); the status is read as it would be
        // maxBehindSeconds + 2 min later, so a spoke that never ACKed it shows the behind rule at work.
        const now = new Date(Date.now() + (maxBehindSeconds + 120) * 1000);
        const at = (s: number) => new Date(now.getTime() - s * 1000).toISOString();
        for (const [i, spoke] of names.entries()) {
            const last = i === names.length - 1 && names.length > 1;
            await s3.put(
                bundlePaths.current(spoke),
                JSON.stringify({ revision: 2, key: bundlePaths.bundle(spoke, 2), contentHash: "sample" }),
            );
            await s3.put(bundlePaths.ack(spoke, 1), JSON.stringify({ spoke, revision: 1, contentHash: "sample", at: at(7200) }));
            if (!last) await s3.put(bundlePaths.ack(spoke, 2), JSON.stringify({ spoke, revision: 2, contentHash: "sample", at: at(60) }));
            const seqs = [...Array(10).keys()].filter((q) => !last || (q !== 3 && q !== 4));
            await ingestBatch(
                db,
                seqs.map((seq) => ({
                    requestId: `${spoke}-sample-${seq}`,
                    spoke,
                    tenant: "sample",
                    team: "sample",
                    keyId: "sample",
                    model: "sample",
                    endpoint: "sample",
                    inputTokens: 100,
                    outputTokens: 20,
                    cachedInputTokens: 0,
                    status: 200,
                    stream: false,
                    truncated: false,
                    usageSource: "reported" as const,
                    startedAt: at(300 - seq),
                    endedAt: at(299 - seq),
                    seq,
                    source: "metering-0.sample",
                })),
            );
        }
        process.stderr.write(
            `status --local: ledger ${pg.url}, policy bucket at ${s3.endpoint} (s3rver); sample data for ${names.join(", ")}` +
                `${names.length > 1 ? `: ${names[names.length - 1]} still serves revision 1 and lost 2 usage events` : ""}\n` +
                `times below are read as at ${now.toISOString()} (a simulated clock, ${maxBehindSeconds + 120} s ahead of this machine's), so the behind rule shows\n\n`,
        );
        const rows = await collectStatus({
            spokes: Object.fromEntries(names.map((n) => [n, { bucket: BUCKET, owner: BUCKET_OWNER_ACCOUNT, region: "us-east-1" }])),
            s3: () => s3.client,
            ledger: ledgerFromDb(db),
            now,
            maxBehindSeconds,
            windowHours,
        });
        process.stdout.write(json ? `${JSON.stringify(rows, null, 2)}\n` : formatStatus(rows));
        return rows.some((r) => r.problems.length) ? 1 : 0;
    } finally {
        await db.end();
        await s3.destroy();
        await pg.stop();
    }
}

async function main(argv: string[]): Promise<number> {
    exitOnHelp(argv, HELP);
    const opt = (k: string) => {
        const i = argv.indexOf(`--${k}`);
        return i >= 0 ? argv[i + 1] : undefined;
    };
    const num = (k: string, d: number) => {
        const v = opt(k);
        if (v === undefined) return d;
        const n = Number(v);
        if (!Number.isFinite(n) || n <= 0) throw new Error(`--${k} must be a positive number, got ${JSON.stringify(v)}`);
        return n;
    };
    const hub = opt("hub") ?? "hub-prod";
    // --local reads the spokes from the offline render unless told otherwise.
    const file = opt("outputs") ?? (argv.includes("--local") ? `out/${hub}/outputs.json` : undefined);
    const maxBehindSeconds = num("max-behind-seconds", 900);
    const windowHours = num("window-hours", 24);
    const json = readHubOutputs(file, hub);
    const spokes = spokesFromHubOutputs(json, file ?? `pulumi stack output --stack ${hub}`);
    // Rollouts in flight (lib/rollout.ts): step, weights, last gate verdict, from the placement contracts.
    const rollouts = rolloutStatusLines(((json as { outputs?: unknown })?.outputs ?? (json as any))?.spokeContracts);
    if (rollouts.length && !argv.includes("--json")) process.stdout.write(`rollouts:\n${rollouts.map((l) => `  ${l}`).join("\n")}\n\n`);
    // Every spoke each model is placed on, its fallbacks and the global hostname (tools/placement-view.ts).
    if (!argv.includes("--json")) {
        const lines = placementLines(json);
        if (lines.length) process.stdout.write(`${lines.join("\n")}\n\n`);
    }
    if (argv.includes("--local")) return runLocal(spokes, argv.includes("--json"), maxBehindSeconds, windowHours);
    const endpoint = opt("s3-endpoint");
    const clients = new Map<string, S3Client>();
    const s3 = (region: string) => {
        if (!clients.has(region)) clients.set(region, new S3Client({ region, ...(endpoint ? { endpoint, forcePathStyle: true } : {}) }));
        return clients.get(region)!;
    };
    // The ledger: through the hub's ledger Lambda (the database has no route from outside its VPC), unless the
    // caller names a database it can reach (DATABASE_URL / PGHOST).
    const direct = !!(process.env.DATABASE_URL || process.env.PGHOST);
    let db: Client | undefined;
    let ledger: LedgerReader;
    if (direct) {
        db = new Client(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
        await db.connect().catch((e: Error) => {
            throw new Error(
                `cannot reach the usage ledger (${process.env.DATABASE_URL ? "DATABASE_URL" : `PGHOST=${process.env.PGHOST}`}): ${e.message}. Unset DATABASE_URL and PGHOST to read it through the hub's ledger Lambda.`,
            );
        });
        ledger = ledgerFromDb(db);
    } else {
        const fn = ledgerFunctionFromHubOutputs(json, file ?? `pulumi stack output --stack ${hub}`, opt("ledger-function"));
        const region = opt("region") ?? fn.region ?? process.env.AWS_REGION;
        if (!region) throw new Error("no region for the ledger Lambda: pass --region or set AWS_REGION");
        ledger = ledgerFromLambda(new LambdaInvoker(region, s3(region), opt("lambda-endpoint")), fn.name);
    }
    try {
        const rows = await collectStatus({
            spokes,
            s3,
            ledger,
            now: new Date(),
            maxBehindSeconds,
            windowHours,
        });
        process.stdout.write(argv.includes("--json") ? `${JSON.stringify(rows, null, 2)}\n` : formatStatus(rows));
        // The hub's own audit trail: the policy bucket's access logs still arrive (one policy bucket for every spoke).
        const policy = Object.values(spokes)[0];
        const logBucket = policy && (opt("access-log-bucket") ?? accessLogBucketOf(policy.bucket));
        let logProblem: string | undefined;
        if (policy && logBucket) {
            const logs = await accessLogState({
                s3: s3(policy.region),
                logBucket,
                owner: policy.owner,
                policyBucket: policy.bucket,
                region: policy.region,
                now: new Date(),
                loggingSince: () => listLogBucketCreatedAt(s3(policy.region), logBucket),
            });
            if (logs.state === "problem") logProblem = logs.problem;
            else if (logs.state === "waiting") process.stderr.write(`\n${logs.info}\n`);
        } else if (policy)
            logProblem = `no access log bucket for ${policy.bucket} (not a hub policy bucket name): pass --access-log-bucket`;
        if (logProblem) process.stderr.write(`\n${logProblem}\n`);
        return rows.some((r) => r.problems.length) || logProblem ? 1 : 0;
    } finally {
        await db?.end();
        for (const c of clients.values()) c.destroy();
    }
}

if (require.main === module) {
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (e) => {
            process.stderr.write(`status: ${(e as Error).message}\n`);
            process.exit(2);
        },
    );
}
