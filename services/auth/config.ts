import { z } from "zod";
import { BUCKET_OWNER } from "../shared/bucket-owner";
import { AWS_SDK_ENV } from "../shared/env";
import { type LeaseStore, MAX_GRANT } from "../shared/limits";

/**
 * Auth service configuration, from environment variables (validated once at startup). Defaults live here and
 * only here. Secrets (`AUTH_REDIS_URL` may carry a password) are never logged: see {@link describeConfig}.
 */

const port = z.coerce.number().int().min(1).max(65535);
const bool = z.enum(["true", "false"]).transform((v) => v === "true");

const EnvSchema = z
    .object({
        /** This spoke's name, as in the bundle's `spoke` field and S3 prefix `spokes/<spoke>/`. */
        AUTH_SPOKE: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "lowercase letters, digits and '-'"),
        /** Hub's Ed25519 bundle-signing public key: raw 32 bytes, base64 (hub output `publicKeyFromSeed`). */
        AUTH_HUB_PUBLIC_KEY: z
            .string()
            .refine((v) => Buffer.from(v, "base64").length === 32, "must be a base64 raw 32-byte Ed25519 public key"),
        /** S3 bucket holding the policy bundles. */
        AUTH_POLICY_BUCKET: z.string().min(3),
        /**
         * The hub's AWS account, which must own `AUTH_POLICY_BUCKET`: every S3 request carries it as
         * `x-amz-expected-bucket-owner` (services/shared/bucket-owner.ts), so a bucket of that name in another account is
         * never read or written. Rendered from the hub's signed contract (`policy.bucketOwner`, components/spoke/AuthService.ts).
         */
        AUTH_POLICY_BUCKET_OWNER: BUCKET_OWNER,
        /** S3 API endpoint override (tests, S3-compatible stores); unset = AWS regional endpoint. */
        AUTH_S3_ENDPOINT: z.url().optional(),
        /**
         * The policy bucket's region (SigV4 signs for it). Required, no default: a component that stopped rendering it
         * would otherwise sign every request for another region (components/spoke/AuthService.ts renders `policy.region`).
         */
        AUTH_S3_REGION: z.string().min(1),
        /** Path-style addressing (`<endpoint>/<bucket>/<key>`), needed by most S3-compatible servers. */
        AUTH_S3_FORCE_PATH_STYLE: bool.default(false),
        /** How often to poll `current.json`, seconds. */
        AUTH_POLL_INTERVAL_SECONDS: z.coerce.number().positive().default(15),
        /** Local cache of the last verified bundle (written atomically); an emptyDir or PVC path in Kubernetes. */
        AUTH_BUNDLE_CACHE_PATH: z.string().min(1).default("/var/cache/auth/bundle.json"),
        /** Redis URL, `redis://[user:password@]host:port[/db]` (or `rediss://`). Secret: never logged. */
        AUTH_REDIS_URL: z.string().regex(/^rediss?:\/\//, "must start with redis:// or rediss://"),
        /** Per-command Redis timeout, ms. A timeout is a 503, never an allow. */
        AUTH_REDIS_TIMEOUT_MS: z.coerce.number().int().positive().default(100),
        /**
         * Redis reply deadline on the connection, ms: while commands are pending and nothing arrives for this long,
         * the connection is dropped and replaced (a silent partition). Default max(1000, 5 × AUTH_REDIS_TIMEOUT_MS).
         */
        AUTH_REDIS_SOCKET_TIMEOUT_MS: z.coerce.number().int().positive().optional(),
        /** Batch the checks of one event-loop iteration into one Redis write (ioredis `enableAutoPipelining`). */
        AUTH_REDIS_AUTO_PIPELINING: bool.default(false),
        /** Send the admission checks of one event-loop iteration as one batched script call (shared/limits AdmissionBatcher). */
        AUTH_REDIS_BATCH_CHECKS: bool.default(true),
        /**
         * Under load (a script call of at least 4 checks just settled), how long the next call may wait for as many
         * checks as the last one answered plus those queued, ms (shared/limits AdmissionBatcher `holdMs`): fewer,
         * larger calls cost Redis less CPU per check. 0 = never wait. A check never waits at lower load.
         */
        AUTH_REDIS_BATCH_HOLD_MS: z.coerce.number().int().min(0).max(5).default(1),
        /**
         * Grants (services/auth/admission.ts): how long slots taken ahead for a busy (key, model) pair may wait in
         * this replica before they are given back, ms. Bounds the rps overshoot (rps × hold) and the token-window
         * lag; 0 turns grants off (one Redis check per request).
         */
        AUTH_GRANT_HOLD_MS: z.coerce.number().int().min(0).max(1_000).default(50),
        /** Most slots one grant takes (a pair's demand over one hold period, capped here). */
        AUTH_GRANT_MAX_SLOTS: z.coerce.number().int().min(1).max(MAX_GRANT).default(256),
        /**
         * Limit state layout (services/shared/limits.ts `LeaseStore`): `counters` (per-tier counters, the default),
         * `mixed` (counters, also counting the earlier layout) or `zset` (the earlier layout: one ZSET member per
         * lease). A running spoke upgrades zset → mixed → counters (services/auth/README.md). Leases of both
         * layouts are always released.
         */
        AUTH_LEASE_STORE: z.enum(["counters", "mixed", "zset"]).default("counters"),
        /**
         * Deadline of each S3 request (connect, response headers, and silence while the body streams), ms. A sync
         * as a whole never outlasts the poll interval, so the next poll always runs on time.
         */
        AUTH_S3_TIMEOUT_MS: z.coerce.number().int().positive().default(5_000),
        /** ext_authz listener. Envoy Gateway `extAuth.http.backendRefs` points here. */
        AUTH_PORT: port.default(8080),
        /** Operations listener: /healthz, /readyz, /metrics. Kept off the ext_authz port so no client path reaches it. */
        AUTH_OPS_PORT: port.default(9090),
        /** Path prefix Envoy prepends to the client's path (SecurityPolicy `extAuth.http.path`). */
        AUTH_PATH_PREFIX: z
            .string()
            .regex(/^\/[A-Za-z0-9._~-]+$/, "one path segment starting with '/', e.g. /authz")
            .default("/authz"),
        /** Address both listeners bind to. */
        AUTH_BIND_ADDRESS: z.string().min(1).default("0.0.0.0"),
        /**
         * Concurrency lease lifetime when no usage event releases it, seconds. Must exceed the gateway's longest
         * request timeout (AIGatewayRoute `timeouts.request`, e.g. 900 s) or long streams lose their slot early.
         */
        AUTH_LEASE_TTL_SECONDS: z.coerce.number().int().positive().default(960),
        /** Largest body accepted, bytes; must be ≥ SecurityPolicy `bodyToExtAuth.maxRequestBytes`. Default 32 MiB. */
        AUTH_MAX_BODY_BYTES: z.coerce
            .number()
            .int()
            .positive()
            .default(32 * 1024 * 1024),
        /**
         * HMAC-SHA256 key (base64, at least 32 bytes) the per-request cache salt is derived with from the verified
         * tenant's cache scope (services/auth/entitlement.ts). Secret: a client that knew it could compute another
         * tenant's salt. From a Kubernetes Secret (components/spoke/AuthService.ts); never logged.
         */
        AUTH_CACHE_SALT_KEY: z
            .string()
            .regex(/^[A-Za-z0-9+/]+={0,2}$/, "must be base64")
            .refine((v) => Buffer.from(v, "base64").length >= 32, "must decode to at least 32 bytes"),
        /** Region and shared config/credentials files for the S3 client's default chain (components/spoke/AuthService.ts). */
        ...AWS_SDK_ENV,
    })
    .refine((c) => c.AUTH_PORT !== c.AUTH_OPS_PORT, { message: "AUTH_PORT and AUTH_OPS_PORT must differ", path: ["AUTH_OPS_PORT"] });

/**
 * The auth service's environment contract (services/shared/env.ts): components/spoke/AuthService.ts renders its
 * Deployment's env by these names. A new variable is one entry in the schema above (and its field below).
 */
export const AUTH_ENV = EnvSchema;

/** Validated configuration. */
export interface AuthConfig {
    spoke: string;
    hubPublicKey: string;
    /** `expectedBucketOwner`: the hub's account (`AUTH_POLICY_BUCKET_OWNER`), sent with every S3 request. */
    s3: { bucket: string; expectedBucketOwner: string; endpoint?: string; region: string; forcePathStyle: boolean; timeoutMs: number };
    pollIntervalMs: number;
    cachePath: string;
    redis: { url: string; timeoutMs: number; socketTimeoutMs: number; autoPipelining: boolean; batchChecks: boolean; batchHoldMs: number };
    port: number;
    opsPort: number;
    pathPrefix: string;
    bindAddress: string;
    leaseTtlMs: number;
    /** Where concurrency leases are written (`AUTH_LEASE_STORE`). */
    leaseStore: LeaseStore;
    maxBodyBytes: number;
    /** Grant hold time (ms, 0 = off) and size cap (slots): see services/auth/admission.ts. */
    grants: { holdMs: number; maxSlots: number };
    /** Key the cache salt is derived with (`AUTH_CACHE_SALT_KEY`); secret. */
    cacheSaltKey: Buffer;
}

/** Thrown by {@link loadConfig}; the message lists every invalid or missing variable. */
export class ConfigError extends Error {}

/**
 * Parses and validates the environment.
 * @throws ConfigError listing each invalid variable with the reason (values are not echoed: some are secret).
 */
export function loadConfig(env: NodeJS.ProcessEnv): AuthConfig {
    const r = EnvSchema.safeParse(env);
    if (!r.success) {
        const lines = r.error.issues.map((i) => `  ${i.path.join(".") || "(env)"}: ${i.message}`);
        throw new ConfigError(`invalid auth service configuration:\n${lines.join("\n")}`);
    }
    const e = r.data;
    return {
        spoke: e.AUTH_SPOKE,
        hubPublicKey: e.AUTH_HUB_PUBLIC_KEY,
        s3: {
            bucket: e.AUTH_POLICY_BUCKET,
            expectedBucketOwner: e.AUTH_POLICY_BUCKET_OWNER,
            endpoint: e.AUTH_S3_ENDPOINT,
            region: e.AUTH_S3_REGION,
            forcePathStyle: e.AUTH_S3_FORCE_PATH_STYLE,
            timeoutMs: e.AUTH_S3_TIMEOUT_MS,
        },
        pollIntervalMs: Math.round(e.AUTH_POLL_INTERVAL_SECONDS * 1000),
        cachePath: e.AUTH_BUNDLE_CACHE_PATH,
        redis: {
            url: e.AUTH_REDIS_URL,
            timeoutMs: e.AUTH_REDIS_TIMEOUT_MS,
            socketTimeoutMs: e.AUTH_REDIS_SOCKET_TIMEOUT_MS ?? Math.max(1_000, 5 * e.AUTH_REDIS_TIMEOUT_MS),
            autoPipelining: e.AUTH_REDIS_AUTO_PIPELINING,
            batchChecks: e.AUTH_REDIS_BATCH_CHECKS,
            batchHoldMs: e.AUTH_REDIS_BATCH_HOLD_MS,
        },
        port: e.AUTH_PORT,
        opsPort: e.AUTH_OPS_PORT,
        pathPrefix: e.AUTH_PATH_PREFIX,
        bindAddress: e.AUTH_BIND_ADDRESS,
        leaseTtlMs: e.AUTH_LEASE_TTL_SECONDS * 1000,
        leaseStore: e.AUTH_LEASE_STORE,
        maxBodyBytes: e.AUTH_MAX_BODY_BYTES,
        grants: { holdMs: e.AUTH_GRANT_HOLD_MS, maxSlots: e.AUTH_GRANT_MAX_SLOTS },
        cacheSaltKey: Buffer.from(e.AUTH_CACHE_SALT_KEY, "base64"),
    };
}

/** The configuration with secrets removed (Redis credentials, the cache-salt key), for the startup log line. */
export function describeConfig(c: AuthConfig): Record<string, unknown> {
    const u = new URL(c.redis.url);
    const { cacheSaltKey: _secret, ...rest } = c;
    return {
        ...rest,
        redis: {
            endpoint: `${u.protocol}//${u.host}${u.pathname}`,
            timeoutMs: c.redis.timeoutMs,
            socketTimeoutMs: c.redis.socketTimeoutMs,
            autoPipelining: c.redis.autoPipelining,
            batchChecks: c.redis.batchChecks,
            batchHoldMs: c.redis.batchHoldMs,
        },
    };
}
