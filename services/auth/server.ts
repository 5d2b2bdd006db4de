import { ENVOY_MAX_RETRIES_HEADER, PEER_HOP_HEADER } from "../shared/peer";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import type { Redis } from "ioredis";
import { DYNAMO_HEADERS, IDENTITY_HEADERS, type TierIds, tierIds } from "../shared/identity";
import type { LimitDecision, TierLimits } from "../shared/limits";
import { type BoundedRedis, createBoundedRedis } from "../shared/net";
import { GrantAdmission } from "./admission";
import { BundleStore, createS3Client } from "./bundles";
import type { AuthConfig } from "./config";
import { cacheSalt, clientHints, entitle } from "./entitlement";
import { errorMessage, jsonLogger, type Logger } from "./log";
import { AuthMetrics, NO_TIER } from "./metrics";
import { bearerToken, isRefusal, type ResolvedKey } from "./policy";

const EMPTY = Buffer.alloc(0);

/** Most cache scopes whose salt is kept (each about 100 bytes); far more than the tenants and teams of a spoke. */
const MAX_SALTS = 100_000;

/** Longest `model` value accepted (it is echoed into headers and error messages). */
const MAX_MODEL_LENGTH = 256;

/**
 * Node's default keep-alive timeout (5 s) is shorter than Envoy's upstream idle timeout (1 h), so Envoy would
 * reuse connections Node has just closed and fail checks with upstream resets. Keep idle connections longer.
 */
const KEEP_ALIVE_TIMEOUT_MS = 620_000;

/** OpenAI-style error body, `{"error":{"message","type","code"}}` (as the OpenAI API returns). */
export interface OpenAiError {
    error: { message: string; type: string; code: string };
}

/** Injectable dependencies (tests, benchmark). */
export interface AuthServiceDeps {
    /** Default: JSON lines on stdout/stderr. */
    log?: Logger;
    /** Clock, ms since the Unix epoch. */
    now?: () => number;
}

/** A running auth service. */
export interface AuthService {
    /** Bound ext_authz port (differs from the config when it asked for port 0). */
    readonly port: number;
    /** Bound operations port (/healthz, /readyz, /metrics). */
    readonly opsPort: number;
    /** The bundle store (tests trigger syncs with `bundles.syncOnce()`). */
    readonly bundles: BundleStore;
    /** Stops polling, closes both listeners and the Redis connection. */
    close(): Promise<void>;
}

interface Deny {
    status: number;
    type: string;
    code: string;
    message: string;
    tier?: string;
    headers?: Record<string, string>;
}

/**
 * Redis client that fails fast instead of queueing, and replaces a connection that stopped answering
 * ({@link createBoundedRedis}): with the offline queue off and a command timeout, an unreachable or slow Redis
 * turns into an immediate 503 rather than requests hanging until Envoy's ext_authz timeout (the failure mode
 * of envoyproxy/ratelimit#462); a socket reply deadline (`cfg.socketTimeoutMs`) and a 1 s heartbeat PING drop
 * a silent connection, so after a partition heals checks succeed again within about
 * `socketTimeoutMs + 1 s` instead of when the kernel gives up on the dead socket. Reconnects in the background.
 */
export function createRedis(cfg: AuthConfig["redis"], log: Logger): BoundedRedis {
    return createBoundedRedis(cfg.url, {
        commandTimeoutMs: cfg.timeoutMs,
        socketTimeoutMs: cfg.socketTimeoutMs,
        autoPipelining: cfg.autoPipelining,
        connectTimeoutMs: 1_000,
        heartbeatMs: 1_000,
        onStateChange: (state, err) =>
            state === "down" ? log("warn", "redis connection error", { error: err?.message }) : log("info", "redis connection restored"),
    });
}

/**
 * Starts the auth service: the Envoy ext_authz HTTP listener (`config.port`, every path under
 * `config.pathPrefix`) and the operations listener (`config.opsPort`), and the bundle sync loop.
 *
 * ext_authz contract (Envoy Gateway SecurityPolicy `extAuth.http` with `bodyToExtAuth`): Envoy sends the
 * client's method, `<pathPrefix><path>`, the Authorization header and the body. 200 allows, and the identity
 * headers set here are copied upstream (`headersToBackend`), overwriting client values; any other status is
 * returned to the client with its body. Every failure inside the service answers 503: never allow on error.
 *
 * Resolves once both listeners are bound, the first bundle sync attempt (cache file, then hub) is done and
 * Redis is connected or has failed to connect for 2 s (the service then keeps denying until it is).
 * @throws when a listener cannot bind.
 */
export async function startAuthService(config: AuthConfig, deps: AuthServiceDeps = {}): Promise<AuthService> {
    const log = deps.log ?? jsonLogger;
    const now = deps.now ?? Date.now;
    const redisClient = createRedis(config.redis, log);
    const redis = redisClient.redis;
    const metrics: AuthMetrics = new AuthMetrics(
        (): number | undefined => bundles.ageSeconds(),
        () => admission.heldSlots(),
    );
    const bundles: BundleStore = new BundleStore({
        s3: createS3Client(config.s3),
        bucket: config.s3.bucket,
        spoke: config.spoke,
        publicKey: config.hubPublicKey,
        cachePath: config.cachePath,
        pollIntervalMs: config.pollIntervalMs,
        metrics,
        log,
        now,
    });
    metrics.bundleRevision.set(0);

    // Labelled metric children, resolved once (prom-client hashes the label set on every un-bound call).
    const redisCheckOk = metrics.redisLatency.labels("check", "ok");
    const redisCheckError = metrics.redisLatency.labels("check", "error");
    const admittedFrom = { grant: metrics.admissions.labels("grant"), redis: metrics.admissions.labels("redis") };
    const grantSlots = {
        granted: metrics.grantSlots.labels("granted"),
        returned: metrics.grantSlots.labels("returned"),
        lost: metrics.grantSlots.labels("lost"),
    };
    let returnFailing = false;
    const admission = new GrantAdmission(redis, {
        holdMs: config.grants.holdMs,
        maxGrant: config.grants.maxSlots,
        leaseTtlMs: config.leaseTtlMs,
        now,
        batch: config.redis.batchChecks,
        batchHoldMs: config.redis.batchHoldMs,
        store: config.leaseStore,
        events: {
            admitted: (path) => admittedFrom[path].inc(),
            granted: (n) => grantSlots.granted.inc(n),
            returned: (n, result, err) => {
                grantSlots[result].inc(n);
                if (result === "lost" && !returnFailing)
                    log("warn", "could not give back unused grant slots; they expire by the lease TTL", {
                        slots: n,
                        error: errorMessage(err),
                    });
                returnFailing = result === "lost";
            },
            redisCall: (s, ok) => (ok ? redisCheckOk : redisCheckError).observe(s),
        },
    });
    const decisionCounters = new Map<string, ReturnType<typeof metrics.decisions.labels>>();
    const decisionCounter = (code: number, tier: string, reason: string) => {
        const k = `${code}|${tier}|${reason}`;
        let c = decisionCounters.get(k);
        if (!c) {
            c = metrics.decisions.labels(String(code), tier, reason);
            decisionCounters.set(k, c);
        }
        return c;
    };

    const prefix = config.pathPrefix;
    /** Log limit-check failures on the transition only: an outage must not turn into a log flood. */
    let limitsFailing = false;
    /** Allowed: the response headers, as a flat `[name, value, …]` list; else the refusal. */
    type Result = string[] | Deny;
    /**
     * Per (key, model) and revision, built on the first check: tier ids, the admission pair key and the allow
     * headers but the lease, keyed by the limits object `authorizeModel` returns (one per pair and revision).
     */
    const pairs = new WeakMap<TierLimits, PairEntry>();
    /**
     * Cache salt per cache scope: the HMAC depends only on the scope (the service's key is fixed), and a scope is
     * shared by every key of its tenant or team, so a quiet key's first check under a revision costs a map lookup,
     * not an HMAC. Bounded: emptied when it holds more scopes than {@link MAX_SALTS}.
     */
    const salts = new Map<string, string>();
    const saltOf = (scope: string): string => {
        let salt = salts.get(scope);
        if (salt === undefined) {
            if (salts.size >= MAX_SALTS) salts.clear();
            salt = cacheSalt(config.cacheSaltKey, scope);
            salts.set(scope, salt);
        }
        return salt;
    };
    const allowedCounter = decisionCounter(200, NO_TIER, "allowed");
    const limitsUnavailable = (err: unknown): Deny => {
        if (!limitsFailing) log("warn", "limit check failed; denying with 503 until Redis answers", { error: errorMessage(err) });
        limitsFailing = true;
        return { status: 503, type: "server_error", code: "limits_unavailable", message: "Rate limiting is unavailable; try again later." };
    };
    /**
     * The whole decision. Synchronous (a plain value) unless Redis has to decide: a check admitted from a grant
     * costs no promise and no extra event-loop turn.
     */
    const check = (req: http.IncomingMessage, body: Buffer): Result | Promise<Result> => {
        const url = req.url ?? "";
        if (url !== prefix && !url.startsWith(`${prefix}/`) && !url.startsWith(`${prefix}?`)) {
            return { status: 404, type: "invalid_request_error", code: "not_found", message: "Not found." };
        }
        const index = bundles.current();
        if (!index)
            return { status: 503, type: "server_error", code: "policy_unavailable", message: "Authorization policy is not loaded yet." };
        const t = now();
        const auth = index.authenticate(bearerToken(req.headers.authorization), t);
        if (isRefusal(auth)) return { status: auth.status, type: "invalid_request_error", code: auth.code, message: auth.message };
        if (isModelListing(req.method, url.slice(prefix.length))) {
            // OpenAI clients list models first. A valid key is enough: no model, no lease, no limit consumed (the AI
            // Gateway answers the listing itself; metering ignores records without a model).
            return [
                IDENTITY_HEADERS.tenant,
                auth.tenant,
                IDENTITY_HEADERS.team,
                auth.team,
                IDENTITY_HEADERS.keyId,
                auth.keyId,
                IDENTITY_HEADERS.revision,
                String(index.revision),
                "content-length",
                "0",
            ];
        }
        const parsed = modelOf(body);
        if ("error" in parsed) return { status: 400, type: "invalid_request_error", code: "model_required", message: parsed.error };
        const model = parsed.model;
        const limits = index.authorizeModel(auth, model);
        if (isRefusal(limits)) return { status: limits.status, type: "invalid_request_error", code: limits.code, message: limits.message };
        // The platform, not the client, decides the hints the router sees: clamped before any limit is consumed.
        const hints = entitle(clientHints(parsed.doc), auth.serving);
        if ("refused" in hints)
            return { status: 400, type: "invalid_request_error", code: "hint_above_entitlement", message: hints.refused };
        let pair = pairs.get(limits);
        if (!pair) {
            pair = pairEntry(auth, model, index.revision, saltOf);
            pairs.set(limits, pair);
        }
        let d: LimitDecision | Promise<LimitDecision>;
        try {
            d = admission.admit(pair.key, pair.ids, limits, index.revision);
        } catch (err) {
            return limitsUnavailable(err);
        }
        if (!(d instanceof Promise)) return limitResult(d, pair, model, hints);
        const entry = pair;
        return d.then((decision) => {
            if (limitsFailing) log("info", "limit checks work again");
            limitsFailing = false;
            return limitResult(decision, entry, model, hints);
        }, limitsUnavailable);
    };

    const authz = http.createServer((req, res) => {
        const started = process.hrtime.bigint();
        const finish = (status: number, tier: string, reason: string) => {
            decisionCounter(status, tier, reason).inc();
            metrics.checkDuration.observe(seconds(started));
        };
        const respond = (r: Result) => {
            if (Array.isArray(r)) {
                // A request a peer spoke forwarded is served here or fails here: no retry to this spoke's own peers.
                res.writeHead(200, req.headers[PEER_HOP_HEADER] === undefined ? r : [...r, ENVOY_MAX_RETRIES_HEADER, "0"]).end();
                allowedCounter.inc();
                metrics.checkDuration.observe(seconds(started));
            } else {
                sendError(res, r);
                finish(r.status, r.tier ?? NO_TIER, r.code);
            }
        };
        const fail = (err: unknown) => {
            log("error", "ext_authz check failed; denying", { error: errorMessage(err) });
            if (!res.headersSent)
                sendError(res, { status: 503, type: "server_error", code: "internal_error", message: "Authorization failed." });
            finish(503, NO_TIER, "internal_error");
        };
        readBody(
            req,
            config.maxBodyBytes,
            (body) => {
                let r: Result | Promise<Result>;
                try {
                    r =
                        body === undefined
                            ? {
                                  status: 413,
                                  type: "invalid_request_error",
                                  code: "request_too_large",
                                  message: `Request body exceeds ${config.maxBodyBytes} bytes.`,
                              }
                            : check(req, body);
                } catch (err) {
                    fail(err);
                    return;
                }
                if (r instanceof Promise) r.then(respond).catch(fail);
                else {
                    try {
                        respond(r);
                    } catch (err) {
                        fail(err);
                    }
                }
            },
            fail,
        );
    });
    authz.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    authz.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;

    const ops = http.createServer((req, res) => {
        const p = (req.url ?? "").split("?")[0];
        if (p === "/healthz") {
            res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
        } else if (p === "/readyz") {
            void readiness(bundles, redis, metrics).then((problems) => {
                res.writeHead(problems.length ? 503 : 200, { "content-type": "application/json" }).end(
                    JSON.stringify({ ready: problems.length === 0, revision: bundles.current()?.revision ?? null, problems }),
                );
            });
        } else if (p === "/metrics") {
            metrics.registry.metrics().then(
                (text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
                (err: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(`${errorMessage(err)}\n`),
            );
        } else {
            res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
        }
    });

    try {
        await listen(authz, config.port, config.bindAddress);
        await listen(ops, config.opsPort, config.bindAddress);
    } catch (err) {
        authz.close();
        redisClient.close();
        throw err;
    }
    log("info", "auth service listening", {
        port: (authz.address() as AddressInfo).port,
        opsPort: (ops.address() as AddressInfo).port,
        pathPrefix: prefix,
    });
    // Until the cache file or the hub yields a verified bundle, every check answers 503; until Redis is
    // connected, every check that gets as far as the limits answers 503.
    await Promise.all([bundles.start(), redisReady(redis, 2_000)]);

    return {
        port: (authz.address() as AddressInfo).port,
        opsPort: (ops.address() as AddressInfo).port,
        bundles,
        async close() {
            await bundles.stop();
            await Promise.all([closeServer(authz), closeServer(ops)]);
            await admission.close();
            redisClient.close();
        },
    };
}

/** What the checks of one (key, model) pair under one revision share. */
interface PairEntry {
    /** The admission pair key: key ids are unique within a bundle, and it must tell (key, model) pairs apart. */
    key: string;
    ids: TierIds;
    /** The 200's headers as a flat list; the lease value (index {@link LEASE_INDEX}) is filled per check. */
    headers: readonly string[];
}

/** Index of the lease value in {@link PairEntry.headers}. */
const LEASE_INDEX = 9;
/** Indexes of the effective priority and tier values in {@link PairEntry.headers} (filled per check). */
const PRIORITY_INDEX = 13;
const STRICT_PRIORITY_INDEX = 15;

/**
 * The pair's allow headers. The cache salt is looked up here, once per (key, model) and revision, for the key's
 * cache scope for the model (`tenant:<tenant>` when the bundle names none): `saltOf` derives it under the
 * service's secret key once per scope.
 */
function pairEntry(auth: ResolvedKey, model: string, revision: number, saltOf: (scope: string) => string): PairEntry {
    return {
        key: `${auth.keyId}\n${model}`,
        ids: tierIds({ model, tenant: auth.tenant, team: auth.team, keyId: auth.keyId }),
        headers: [
            IDENTITY_HEADERS.tenant,
            auth.tenant,
            IDENTITY_HEADERS.team,
            auth.team,
            IDENTITY_HEADERS.keyId,
            auth.keyId,
            IDENTITY_HEADERS.model,
            model,
            IDENTITY_HEADERS.lease,
            "",
            IDENTITY_HEADERS.revision,
            String(revision),
            DYNAMO_HEADERS.priority,
            "",
            DYNAMO_HEADERS.strictPriority,
            "",
            DYNAMO_HEADERS.cacheSalt,
            saltOf(auth.serving.cacheScopes[model] ?? `tenant:${auth.tenant}`),
            "content-length",
            "0",
        ],
    };
}

/**
 * The answer to a limit decision: 429 with `Retry-After` naming the tier and dimension, or 200 with every
 * identity header (and `content-length: 0`, the whole response) as a flat `[name, value, …]` list.
 */
function limitResult(
    decision: LimitDecision,
    pair: PairEntry,
    model: string,
    hints: { priority: number; strictPriority: number },
): string[] | Deny {
    if (!decision.allowed) {
        // Concurrency: the oldest lease's expiry is only an upper bound (a usage event usually releases a
        // lease much sooner), so advise a short retry instead.
        const retryAfter = decision.dimension === "concurrency" ? 1 : Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
        const what = { rps: "requests per second", concurrency: "concurrent requests", tokens: "tokens per window" }[decision.dimension];
        const whose = { model: `the platform limit for model '${model}'`, team: "your team's limit", key: "this API key's limit" }[
            decision.tier
        ];
        return {
            status: 429,
            type: decision.dimension === "tokens" ? "tokens" : "requests",
            code: "rate_limit_exceeded",
            message: `Rate limit reached: ${whose} on ${what}. Retry after ${retryAfter} s.`,
            tier: decision.tier,
            headers: { "retry-after": String(retryAfter) },
        };
    }
    const headers = pair.headers.slice();
    headers[LEASE_INDEX] = decision.leaseId;
    headers[PRIORITY_INDEX] = String(hints.priority);
    headers[STRICT_PRIORITY_INDEX] = String(hints.strictPriority);
    return headers;
}

/** Resolves when `redis` is connected or after `timeoutMs`, whichever is first. Never rejects. */
function redisReady(redis: Redis, timeoutMs: number): Promise<void> {
    if (redis.status === "ready") return Promise.resolve();
    return new Promise((resolve) => {
        const done = () => {
            clearTimeout(timer);
            redis.off("ready", done);
            resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        redis.once("ready", done);
    });
}

/** Reasons the service is not ready (empty = ready): no verified bundle, or Redis not answering PING. */
async function readiness(bundles: BundleStore, redis: Redis, metrics: AuthMetrics): Promise<string[]> {
    const problems: string[] = [];
    if (!bundles.current()) problems.push("no verified policy bundle loaded");
    const started = process.hrtime.bigint();
    try {
        await redis.ping();
        metrics.redisLatency.observe({ op: "ping", result: "ok" }, seconds(started));
    } catch (err) {
        metrics.redisLatency.observe({ op: "ping", result: "error" }, seconds(started));
        problems.push(`redis unreachable: ${errorMessage(err)}`);
    }
    return problems;
}

/**
 * True for the OpenAI model listing (`GET /v1/models`, query allowed) — the one request without a body `model`.
 * @param path the client's path (the request path with the ext_authz prefix removed)
 */
export function isModelListing(method: string | undefined, path: string): boolean {
    return (method === "GET" || method === "HEAD") && /^\/v1\/models\/?(\?.*)?$/.test(path);
}

/** The body's `model` and the parsed body, or why it cannot be read. */
export function modelOf(body: Buffer): { model: string; doc: object } | { error: string } {
    let doc: unknown;
    try {
        doc = JSON.parse(body.toString("utf8"));
    } catch {
        return { error: "Request body must be JSON with a 'model' field." };
    }
    const model = doc !== null && typeof doc === "object" ? (doc as { model?: unknown }).model : undefined;
    if (typeof model !== "string" || model.length === 0 || model.length > MAX_MODEL_LENGTH) {
        return { error: `Request body must have a 'model' string of 1-${MAX_MODEL_LENGTH} characters.` };
    }
    return { model, doc: doc as object };
}

/**
 * Reads the request body, up to `maxBytes`, and calls `done` with it, or with undefined when it is larger than
 * `maxBytes` (the rest is drained, not buffered); `failed` on a stream error. Callbacks, not a promise: this runs
 * on every check.
 */
function readBody(
    req: http.IncomingMessage,
    maxBytes: number,
    done: (body: Buffer | undefined) => void,
    failed: (err: unknown) => void,
): void {
    const declared = Number(req.headers["content-length"] ?? 0);
    // A body usually arrives in one chunk: no list unless a second one comes.
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    let size = 0;
    let tooLarge = declared > maxBytes;
    req.on("data", (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) tooLarge = true;
        if (tooLarge) return;
        if (first === undefined) first = c;
        else {
            more ??= [first];
            more.push(c);
        }
    });
    req.on("end", () => done(tooLarge ? undefined : more ? Buffer.concat(more, size) : (first ?? EMPTY)));
    req.on("error", failed);
}

function sendError(res: http.ServerResponse, d: Deny): void {
    const body: OpenAiError = { error: { message: d.message, type: d.type, code: d.code } };
    const text = JSON.stringify(body);
    res.writeHead(d.status, { ...d.headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) }).end(
        text,
    );
}

function seconds(startedNs: bigint): number {
    return Number(process.hrtime.bigint() - startedNs) / 1e9;
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
    return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
            server.off("error", reject);
            resolve();
        });
    });
}

function closeServer(server: http.Server): Promise<void> {
    return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
    });
}
