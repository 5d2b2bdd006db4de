import { S3Client } from "@aws-sdk/client-s3";
import { boundedRequestHandler } from "../shared/net";
import { Redis } from "ioredis";
import { loadConfig } from "./config";
import { BundleWindows, LimitsApplier, meteringRedisOptions, RedisLimits } from "./limits";
import { policyObjectReader } from "./policy-reader";
import { createServer, MeteringService } from "./service";
import { KinesisTransport, Shipper } from "./shipper";
import { Spool } from "./spool";

/**
 * Entry point of the metering service (container command). Order at start: recover the spool, start
 * shipping what a previous run left, then accept records. On SIGTERM: stop accepting, let in-flight appends
 * finish, stop the shipper (unshipped events stay in the spool for the next start), exit 0.
 */
function log(msg: string, fields: Record<string, unknown> = {}): void {
    process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), msg, ...fields })}\n`);
}

async function main(): Promise<void> {
    const cfg = loadConfig(process.env);
    const spool = await Spool.open({
        dir: cfg.METERING_SPOOL_DIR,
        instance: cfg.METERING_INSTANCE,
        maxBytes: cfg.METERING_SPOOL_MAX_BYTES,
        segmentBytes: cfg.METERING_SPOOL_SEGMENT_BYTES,
    });
    log("spool recovered", {
        source: spool.source,
        nextSeq: spool.nextSequence,
        shippedThroughSeq: spool.shippedThroughSeq,
        unshippedBytes: spool.unshippedBytes,
    });

    const failpoint = (at: string) => () => {
        if (cfg.METERING_FAILPOINT !== at) return;
        log("failpoint: SIGKILL", { at });
        process.kill(process.pid, "SIGKILL");
    };
    const transport = new KinesisTransport({
        streamName: cfg.METERING_STREAM_NAME,
        region: cfg.METERING_STREAM_REGION,
        endpoint: cfg.METERING_KINESIS_ENDPOINT,
        requestTimeoutMs: cfg.METERING_KINESIS_TIMEOUT_MS,
    });
    const shipper = new Shipper(spool, transport, { log, afterPut: failpoint("after-put") });
    shipper.start();

    let limits: RedisLimits | undefined;
    let redis: Redis | undefined;
    let poll: NodeJS.Timeout | undefined;
    if (cfg.METERING_REDIS_URL) {
        redis = new Redis(cfg.METERING_REDIS_URL, meteringRedisOptions(cfg.METERING_REDIS_TIMEOUT_MS));
        redis.on("error", () => undefined); // failures surface per command and in metering_limits_errors_total
        let windows: BundleWindows | undefined;
        if (cfg.METERING_POLICY_BUCKET && cfg.METERING_HUB_PUBLIC_KEY) {
            // Bounded like the Kinesis transport (services/shared/net.ts: throwOnRequestTimeout makes requestTimeout real).
            const s3 = new S3Client({
                region: cfg.METERING_POLICY_REGION,
                maxAttempts: 2,
                requestHandler: boundedRequestHandler({ requestTimeoutMs: 10_000, connectTimeoutMs: 3_000, keepAliveMs: 15_000 }),
            });
            windows = new BundleWindows(
                // The config refuses a policy bucket without its owner (services/metering/config.ts).
                policyObjectReader(s3, cfg.METERING_POLICY_BUCKET, cfg.METERING_POLICY_BUCKET_OWNER!),
                cfg.METERING_SPOKE,
                cfg.METERING_HUB_PUBLIC_KEY,
            );
            const refresh = () =>
                windows!
                    .refresh()
                    .then((changed) => {
                        if (changed) log("token windows updated", { revision: windows!.revision });
                    })
                    .catch((e) => log("policy bundle refresh failed; keeping last windows", { error: (e as Error).message }));
            await refresh();
            poll = setInterval(refresh, cfg.METERING_POLICY_POLL_SECONDS * 1000);
        } else {
            log("no policy bucket configured: token windows use the 60 s default");
        }
        limits = new RedisLimits(redis, windows ?? { windowSeconds: () => ({ model: 60, team: 60, key: 60 }) });
    } else {
        log("METERING_REDIS_URL unset: leases are not released and tokens not counted by this instance");
    }

    const applier = limits
        ? new LimitsApplier(spool, limits, cfg.METERING_SPOOL_DIR, { log, afterTokens: failpoint("after-tokens") })
        : undefined;
    await applier?.start();

    const svc = new MeteringService({ spoke: cfg.METERING_SPOKE, spool, limits, log, afterSpool: failpoint("after-spool") });
    svc.observeShipper(shipper);
    if (applier) svc.observeApplier(applier);
    const server = createServer(svc, spool, {
        maxSpoolBytes: cfg.METERING_SPOOL_MAX_BYTES,
        maxBodyBytes: cfg.METERING_HTTP_MAX_BODY_BYTES,
        requestTimeoutMs: cfg.METERING_HTTP_REQUEST_TIMEOUT_MS,
        headersTimeoutMs: cfg.METERING_HTTP_HEADERS_TIMEOUT_MS,
        keepAliveTimeoutMs: cfg.METERING_HTTP_KEEPALIVE_TIMEOUT_MS,
    });
    server.listen(cfg.METERING_PORT, cfg.METERING_BIND_ADDRESS, () => log("listening", { port: cfg.METERING_PORT }));

    const shutdown = async (signal: string) => {
        log("shutting down", { signal });
        if (poll) clearInterval(poll);
        await new Promise<void>((r) => server.close(() => r()));
        await svc.idle();
        await applier?.stop();
        await shipper.stop();
        await spool.close();
        redis?.disconnect();
        transport.destroy();
        process.exit(0);
    };
    process.once("SIGTERM", () => void shutdown("SIGTERM"));
    process.once("SIGINT", () => void shutdown("SIGINT"));
}

main().catch((e) => {
    log("fatal", { error: (e as Error).message });
    process.exit(1);
});
