import { NodeHttpHandler } from "@smithy/node-http-handler";
import * as http from "node:http";
import * as https from "node:https";
import { Redis, type RedisOptions } from "ioredis";

/**
 * Bounded clients for every network dependency of the spoke services ( "a silent connection never
 * ends"). A peer that stops answering (a partition, a frozen node, a conntrack entry lost: the TCP connection
 * stays open and nothing comes back) must cost a bounded time, after which the client drops the connection
 * and opens a new one. Three layers, because each alone misses a case:
 * - connect timeout: a SYN that is never answered;
 * - a reply deadline on the open connection that *closes the socket* (a per-command timeout that only fails
 *   the call keeps the dead socket: every later call fails the same way until the kernel gives up, ~15 min
 *   with Linux defaults `tcp_retries2 = 15`);
 * - TCP keepalive, for idle connections the application does not probe (detected only after
 *   `net.ipv4.tcp_keepalive_intvl × tcp_keepalive_probes` more, 75 s × 9 by Linux defaults; Node 20 sets only
 *   the initial delay, `socket.setKeepAlive(true, delayMs)`).
 */

/** Timeouts of {@link boundedRedisOptions} / {@link createBoundedRedis}, all in milliseconds. */
export interface RedisBounds {
    /** TCP connect deadline (ioredis `connectTimeout`). Default 1000. */
    connectTimeoutMs?: number;
    /** Per-command deadline (ioredis `commandTimeout`): the call rejects with "Command timed out". Default 100. */
    commandTimeoutMs?: number;
    /**
     * Reply deadline on the socket (ioredis `socketTimeout`): when commands are pending and *no byte* arrives
     * for this long, ioredis destroys the socket, rejects the pending commands and reconnects. This is what
     * replaces a silent connection. Default max(1000, 5 × commandTimeoutMs).
     */
    socketTimeoutMs?: number;
    /** Initial TCP keepalive delay (ioredis `keepAlive`, `socket.setKeepAlive(true, ms)`). Default 5000. */
    keepAliveMs?: number;
    /** Longest pause between reconnect attempts (the `retryStrategy` grows 50 ms per attempt up to it). Default 500. */
    maxReconnectDelayMs?: number;
    /**
     * Batch commands issued in the same event-loop iteration into one write (ioredis `enableAutoPipelining`).
     * Default false: measured on the auth check (one EVALSHA per request, 16 in flight) it cost ~10-15 µs more
     * client CPU per command than plain writes (a Pipeline object per batch).
     */
    autoPipelining?: boolean;
}

/**
 * ioredis 6.0.0 options for a fail-fast client (names read in the pinned package, ioredis@6.0.0
 * built/redis/RedisOptions.d.ts, and their enforcement in built/Redis.js `sendCommand` / `setSocketTimeout`
 * and built/redis/event_handler.js `connectHandler`): no offline queue and no per-request
 * retry (an unreachable Redis is an immediate error, never a queued request), a connect timeout, a command
 * timeout, a socket reply deadline that destroys a silent connection, TCP keepalive, and a quick bounded
 * reconnect. The handshake (HELLO, CLIENT SETINFO, INFO ready check) runs under the command timeout too, so a
 * reconnect to a peer that accepts TCP but answers nothing fails in `commandTimeoutMs` and is retried.
 */
export function boundedRedisOptions(b: RedisBounds = {}): RedisOptions {
    const commandTimeout = b.commandTimeoutMs ?? 100;
    const maxDelay = b.maxReconnectDelayMs ?? 500;
    return {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        connectTimeout: b.connectTimeoutMs ?? 1_000,
        commandTimeout,
        socketTimeout: b.socketTimeoutMs ?? Math.max(1_000, 5 * commandTimeout),
        keepAlive: b.keepAliveMs ?? 5_000,
        noDelay: true,
        enableAutoPipelining: b.autoPipelining ?? false,
        retryStrategy: (times: number) => Math.min(50 * times, maxDelay),
    };
}

/** Extra options of {@link createBoundedRedis}. */
export interface BoundedRedisOptions extends RedisBounds {
    /**
     * PING period on an otherwise idle connection, ms (0 = off). A silent idle connection is then replaced
     * within `heartbeatMs + socketTimeoutMs` instead of failing the first real request after the network
     * heals. Default 1000.
     */
    heartbeatMs?: number;
    /** Called once per transition: `down` on the first connection error, `up` when ready again. */
    onStateChange?: (state: "down" | "up", error?: Error) => void;
}

/** A Redis client from {@link createBoundedRedis}; `close` stops the heartbeat and disconnects. */
export interface BoundedRedis {
    readonly redis: Redis;
    close(): void;
}

/**
 * A Redis client with {@link boundedRedisOptions} plus a heartbeat (a PING every `heartbeatMs` while ready;
 * a PING with no reply arms the socket reply deadline, so a silent connection is dropped and replaced even
 * when no request is using it). Errors are reported through `onStateChange` only on transitions, so an
 * outage does not flood the log.
 * @param url `redis://[user:password@]host:port[/db]` or `rediss://…` (secret: never logged here).
 */
export function createBoundedRedis(url: string, o: BoundedRedisOptions = {}): BoundedRedis {
    const redis = new Redis(url, boundedRedisOptions(o));
    let down = false;
    redis.on("error", (err: Error) => {
        if (!down) o.onStateChange?.("down", err);
        down = true;
    });
    redis.on("ready", () => {
        if (down) o.onStateChange?.("up");
        down = false;
    });
    const heartbeatMs = o.heartbeatMs ?? 1_000;
    const timer =
        heartbeatMs > 0
            ? setInterval(() => {
                  if (redis.status === "ready") redis.ping().catch(() => undefined);
              }, heartbeatMs)
            : undefined;
    timer?.unref();
    return {
        redis,
        close() {
            if (timer) clearInterval(timer);
            redis.disconnect();
        },
    };
}

/** Timeouts of {@link boundedRequestHandler}, all in milliseconds. */
export interface HttpBounds {
    /** TCP (and TLS) connect deadline (`connectionTimeout`). Default 1000. */
    connectTimeoutMs?: number;
    /** Deadline from sending the request to the response headers (`requestTimeout`, enforced). Default 5000. */
    requestTimeoutMs?: number;
    /**
     * Longest silence on the socket while a request or its response body is in flight (`socketTimeout`).
     * This is what bounds a response body that stops mid-way: `requestTimeout` ends at the headers.
     * Default = requestTimeoutMs.
     */
    socketTimeoutMs?: number;
    /** Initial TCP keepalive delay of pooled sockets. Default 5000. */
    keepAliveMs?: number;
    /** Pooled sockets per origin. Default 50 (the handler's own default). */
    maxSockets?: number;
}

/**
 * AWS SDK v3 `requestHandler` whose timeouts are really enforced, for any client (S3, Kinesis, …):
 * `new S3Client({ requestHandler: boundedRequestHandler({...}) })`.
 *
 * With @smithy/node-http-handler 4.x a `requestTimeout` alone only logs "[WARN] a request has exceeded the
 * configured … requestTimeout" and the request keeps waiting; `throwOnRequestTimeout: true` makes it destroy
 * the request and reject with `TimeoutError` (read in the pinned @smithy/node-http-handler@4.14.2
 * dist-cjs/index.js `setRequestTimeout`; option documented in @smithy/types
 * dist-types/http/httpHandlerInitialization.d.ts `NodeHttpHandlerOptions`). A destroyed request's socket is not returned to the keep-alive pool, so the
 * next attempt opens a fresh connection. The SDK's retry strategy treats `TimeoutError` as transient.
 */
export function boundedRequestHandler(b: HttpBounds = {}): NodeHttpHandler {
    const requestTimeout = b.requestTimeoutMs ?? 5_000;
    const agentOptions = { keepAlive: true, keepAliveMsecs: b.keepAliveMs ?? 5_000, maxSockets: b.maxSockets ?? 50 };
    return new NodeHttpHandler({
        connectionTimeout: b.connectTimeoutMs ?? 1_000,
        requestTimeout,
        throwOnRequestTimeout: true,
        socketTimeout: b.socketTimeoutMs ?? requestTimeout,
        httpAgent: new http.Agent(agentOptions),
        httpsAgent: new https.Agent(agentOptions),
    });
}
