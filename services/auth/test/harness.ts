import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import S3rver from "s3rver";
import { bundlePaths, type CurrentPointer, type Policy, publicKeyFromSeed, signBundle, type SignedBundle } from "../../shared/bundle";
import type { TierLimit } from "../../shared/limits";
import { type AuthConfig, loadConfig } from "../config";
import type { Logger } from "../log";
import { hashApiKey } from "../policy";

/**
 * Real servers for the auth service's tests and benchmark, on 127.0.0.1 with free ports: `redis-server`
 * (Debian package redis-server) and an in-process S3 API (s3rver). Each test file starts its own.
 */

/** A free TCP port on 127.0.0.1 (bound and released; the OS does not hand it out again at once). */
export function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => {
            const { port } = s.address() as net.AddressInfo;
            s.close(() => resolve(port));
        });
    });
}

/** A throwaway temp directory, removed by {@link TempDir.remove}. */
export interface TempDir {
    dir: string;
    remove(): void;
}

/** Makes a temp directory under the OS temp dir. */
export function tempDir(prefix: string): TempDir {
    const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
    return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A `redis-server` child process without persistence. */
export interface RedisServer {
    port: number;
    url: string;
    /** Kills the server (SIGKILL: an outage, not a shutdown) and waits for it to exit. */
    stop(): Promise<void>;
    /** Starts it again on the same port. */
    start(): Promise<void>;
}

/**
 * Starts `redis-server --port <free> --bind 127.0.0.1 --save '' --appendonly no` and waits until it accepts
 * connections.
 * @throws when the binary is missing or the server does not come up within 10 s.
 */
export async function startRedis(): Promise<RedisServer> {
    const port = await freePort();
    let proc: ChildProcess | undefined;
    const srv: RedisServer = {
        port,
        url: `redis://127.0.0.1:${port}`,
        async start() {
            const p = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
                stdio: "ignore",
            });
            proc = p;
            await new Promise<void>((resolve, reject) => {
                p.once("error", (err) => reject(new Error(`cannot start redis-server (apt-get install redis-server): ${err.message}`)));
                void waitForPort(port, 10_000).then(resolve, reject);
            });
        },
        async stop() {
            const p = proc;
            proc = undefined;
            if (!p || p.exitCode !== null) return;
            await new Promise<void>((resolve) => {
                p.once("exit", () => resolve());
                p.kill("SIGKILL");
            });
        },
    };
    await srv.start();
    return srv;
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const ok = await new Promise<boolean>((resolve) => {
            const c = net.connect(port, "127.0.0.1");
            c.once("connect", () => {
                c.destroy();
                resolve(true);
            });
            c.once("error", () => resolve(false));
        });
        if (ok) return;
        if (Date.now() > deadline) throw new Error(`nothing listening on 127.0.0.1:${port} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 25));
    }
}

/** The bucket name every test uses. */
export const BUCKET = "policy";
/** The account that owns {@link BUCKET} in tests (the hub's account: what services send as `ExpectedBucketOwner`). */
export const BUCKET_OWNER_ACCOUNT = "123456789012";

/**
 * Turns `client` into one that behaves as S3 does for a bucket owned by `owner` (Amazon S3 user guide, "Verifying bucket
 * ownership with bucket owner condition"): a request whose `x-amz-expected-bucket-owner` names another account is
 * refused with `AccessDenied`; and, stricter than S3, so a test fails when our code drops the condition, a request
 * without the header is refused too. s3rver itself ignores the header. Every request seen is recorded in `seen`
 * (method, path, header value).
 * @returns `client`, and the requests it sent
 */
export function requireBucketOwner<C extends Pick<S3Client, "middlewareStack">>(
    client: C,
    owner: string = BUCKET_OWNER_ACCOUNT,
): { client: C; seen: Array<{ method: string; path: string; owner: string | undefined }> } {
    const seen: Array<{ method: string; path: string; owner: string | undefined }> = [];
    client.middlewareStack.add(
        (next) => async (args) => {
            const req = args.request as { method: string; path: string; headers: Record<string, string> };
            const header = Object.entries(req.headers).find(([k]) => k.toLowerCase() === "x-amz-expected-bucket-owner")?.[1];
            seen.push({ method: req.method, path: req.path, owner: header });
            if (header !== owner) {
                const e = new Error(
                    header === undefined
                        ? `${req.method} ${req.path} sent no x-amz-expected-bucket-owner (the bucket's owner is ${owner})`
                        : `Access Denied: ${req.method} ${req.path} expects bucket owner ${header}, the bucket's owner is ${owner}`,
                );
                e.name = "AccessDenied";
                throw e;
            }
            return next(args);
        },
        { step: "finalizeRequest", name: "testRequireBucketOwner", override: true },
    );
    return { client, seen };
}

/** A client of the test S3 server at `endpoint` checked by {@link requireBucketOwner}. */
export function ownerCheckedClient(endpoint: string, owner: string = BUCKET_OWNER_ACCOUNT) {
    return requireBucketOwner(
        new S3Client({
            endpoint,
            region: "us-east-1",
            forcePathStyle: true,
            maxAttempts: 1,
            credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
        }),
        owner,
    );
}

/** An s3rver instance with one bucket, plus a client for it. */
export interface S3Server {
    endpoint: string;
    client: S3Client;
    put(key: string, body: string): Promise<void>;
    /** Object text, or undefined when the key does not exist. */
    get(key: string): Promise<string | undefined>;
    /** Stops the server (a hub outage); the data directory is kept for {@link start}. */
    stop(): Promise<void>;
    /** Starts it again on the same port and data directory. */
    start(): Promise<void>;
    /** Stops it and removes its data directory. */
    destroy(): Promise<void>;
}

/**
 * Starts s3rver (an S3 API over the local filesystem) on a free port with bucket {@link BUCKET}. Also sets
 * `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` to s3rver's built-in credentials when unset, so the service's
 * S3 client (SDK default credential chain) can sign its requests, until `destroy()`.
 */
export async function startS3(): Promise<S3Server> {
    // Set for this server's life only: destroy() removes what it set (the next test file of the worker starts clean).
    const credentialEnv = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"].filter((k) => process.env[k] === undefined);
    for (const k of credentialEnv) process.env[k] = "S3RVER";
    const port = await freePort();
    const data = tempDir("auth-s3-");
    const endpoint = `http://127.0.0.1:${port}`;
    let server: S3rver | undefined;
    const client = new S3Client({
        endpoint,
        region: "us-east-1",
        forcePathStyle: true,
        maxAttempts: 1,
        credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    const s3: S3Server = {
        endpoint,
        client,
        async start() {
            server = new S3rver({
                port,
                address: "127.0.0.1",
                silent: true,
                directory: data.dir,
                configureBuckets: [{ name: BUCKET, configs: [] }],
            });
            await server.run();
        },
        async stop() {
            const s = server;
            server = undefined;
            if (s) await s.close();
        },
        async destroy() {
            await s3.stop();
            client.destroy();
            data.remove();
            for (const k of credentialEnv) delete process.env[k];
        },
        async put(key, body) {
            await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body, ContentType: "application/json" }));
        },
        async get(key) {
            try {
                const r = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
                return await r.Body?.transformToString("utf8");
            } catch (err) {
                if ((err as { name?: string }).name === "NoSuchKey") return undefined;
                throw err;
            }
        },
    };
    await s3.start();
    return s3;
}

/** The hub's signing identity for a test: a random Ed25519 seed and its base64 raw public key. */
export interface HubKeys {
    seed: Buffer;
    publicKey: string;
}

/** Fresh hub signing keys. */
export function hubKeys(): HubKeys {
    const seed = randomBytes(32);
    return { seed, publicKey: publicKeyFromSeed(seed) };
}

/** Limits high enough never to be hit, with a one-minute token window. */
export const UNLIMITED: TierLimit = { requestsPerSecond: 1e6, concurrentRequests: 1e6, tokensPerWindow: 1e12, windowSeconds: 60 };

/** One API key of a test policy; `secret` is the bearer token a client sends. */
export interface TestKey {
    id: string;
    secret: string;
    tenant: string;
    team: string;
    models: string[];
    expiresAt?: string;
    limits?: TierLimit;
}

/** Inputs of {@link makePolicy}: keys plus optional per-model and per-team limits (default {@link UNLIMITED}). */
export interface PolicySpec {
    models: Record<string, TierLimit | undefined>;
    keys: TestKey[];
    teamLimits?: Record<string, TierLimit>;
}

/** Builds a schema-valid policy: tenants and teams are derived from the keys. */
export function makePolicy(spec: PolicySpec): Policy {
    const tenants = new Map<string, Set<string>>();
    for (const k of spec.keys) {
        if (!tenants.has(k.tenant)) tenants.set(k.tenant, new Set());
        tenants.get(k.tenant)!.add(k.team);
    }
    return {
        models: Object.entries(spec.models).map(([id, limits]) => ({ id, limits: limits ?? UNLIMITED })),
        tenants: [...tenants].map(([id, teams]) => ({
            id,
            displayName: id.toUpperCase(),
            teams: [...teams].map((t) => ({ id: t, limits: spec.teamLimits?.[`${id}/${t}`] ?? UNLIMITED })),
        })),
        apiKeys: spec.keys.map((k) => ({
            id: k.id,
            sha256: hashApiKey(k.secret),
            tenant: k.tenant,
            team: k.team,
            models: k.models,
            expiresAt: k.expiresAt ?? "2099-01-01T00:00:00Z",
            limits: k.limits ?? UNLIMITED,
        })),
    };
}

/**
 * Publishes a signed bundle the way the hub does: the bundle object first, then `current.json` pointing at it.
 * @param mutate edits the signed document before upload (to simulate tampering).
 */
export async function publishBundle(
    s3: S3Server,
    keys: HubKeys,
    spoke: string,
    revision: number,
    policy: Policy,
    opts: { signFor?: string; mutate?: (doc: SignedBundle) => void } = {},
): Promise<SignedBundle> {
    const doc = signBundle(keys.seed, opts.signFor ?? spoke, revision, policy);
    opts.mutate?.(doc);
    const key = bundlePaths.bundle(spoke, revision);
    await s3.put(key, JSON.stringify(doc));
    const pointer: CurrentPointer = { revision, key, contentHash: doc.bundle.contentHash };
    await s3.put(bundlePaths.current(spoke), JSON.stringify(pointer));
    return doc;
}

/** The cache-salt HMAC key test services run with (base64 of 32 bytes). */
export const TEST_SALT_KEY = Buffer.alloc(32, 7).toString("base64");

/**
 * Service configuration for tests through the real env parser: ports 0 (any free port), the given servers,
 * and a long poll interval so only explicit `syncOnce()` calls sync (unless overridden).
 */
export function testConfig(o: {
    spoke: string;
    publicKey: string;
    s3Endpoint: string;
    redisUrl: string;
    cachePath: string;
    env?: Record<string, string>;
}): AuthConfig {
    const c = loadConfig({
        AUTH_SPOKE: o.spoke,
        AUTH_HUB_PUBLIC_KEY: o.publicKey,
        AUTH_POLICY_BUCKET: BUCKET,
        AUTH_POLICY_BUCKET_OWNER: BUCKET_OWNER_ACCOUNT,
        AUTH_S3_ENDPOINT: o.s3Endpoint,
        AUTH_S3_REGION: "us-east-1",
        AUTH_S3_FORCE_PATH_STYLE: "true",
        AUTH_REDIS_URL: o.redisUrl,
        AUTH_BUNDLE_CACHE_PATH: o.cachePath,
        AUTH_POLL_INTERVAL_SECONDS: "3600",
        AUTH_BIND_ADDRESS: "127.0.0.1",
        AUTH_PORT: "1",
        AUTH_OPS_PORT: "2",
        AUTH_CACHE_SALT_KEY: TEST_SALT_KEY,
        ...o.env,
    });
    // Port 0 (any free port) is not a valid configured port, so tests override after validation.
    return { ...c, port: 0, opsPort: 0 };
}

/** A logger that keeps lines in memory, so tests can assert on them (and that no secret is logged). */
export function memoryLogger(): { log: Logger; lines: string[] } {
    const lines: string[] = [];
    return {
        lines,
        log: (level, msg, fields) => {
            lines.push(JSON.stringify({ level, msg, ...fields }));
        },
    };
}
