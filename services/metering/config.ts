import { z } from "zod";
import { BUCKET_OWNER } from "../shared/bucket-owner";
import { AWS_SDK_ENV } from "../shared/env";

/**
 * Metering service configuration, from environment variables (set by components/spoke/Metering.ts).
 * Defaults live here. `METERING_REDIS_URL` may carry a password: never logged.
 */
const EnvSchema = z
    .object({
        /** This spoke's name: the `spoke` of every usage event. */
        METERING_SPOKE: z.string().regex(/^[a-z0-9][a-z0-9-]*$/),
        /** Instance name, stable across restarts (the StatefulSet pod name, from the downward API). */
        METERING_INSTANCE: z.string().min(1),
        /** Spool directory on the PersistentVolume. */
        METERING_SPOOL_DIR: z.string().min(1).default("/var/lib/metering/spool"),
        /** Bound of the spool, bytes. Keep ≤ ~90% of the volume. Default 8 GiB (~16M events at ~500 B). */
        METERING_SPOOL_MAX_BYTES: z.coerce
            .number()
            .int()
            .positive()
            .default(8 * 1024 ** 3),
        /** Segment size, bytes. Default 16 MiB. */
        METERING_SPOOL_SEGMENT_BYTES: z.coerce
            .number()
            .int()
            .positive()
            .default(16 * 1024 ** 2),
        /** Hub usage stream for this spoke (hub output `spokeContracts.<spoke>.usage.streamName`). */
        METERING_STREAM_NAME: z.string().min(1),
        METERING_STREAM_REGION: z.string().min(1),
        /** Kinesis endpoint override (tests only). */
        METERING_KINESIS_ENDPOINT: z.url().optional(),
        /** Redis of the auth service (`redis://` or `rediss://`). Unset: no lease release / token accounting (tests). */
        METERING_REDIS_URL: z
            .string()
            .regex(/^rediss?:\/\//)
            .optional(),
        METERING_REDIS_TIMEOUT_MS: z.coerce.number().int().positive().default(500),
        /** Policy bucket and hub public key: token window lengths come from the signed bundle. */
        METERING_POLICY_BUCKET: z.string().min(3).optional(),
        /**
         * The hub's account, which must own `METERING_POLICY_BUCKET` (sent as `ExpectedBucketOwner` with every read,
         * services/metering/policy-reader.ts); required with the bucket. From the hub contract (`policy.bucketOwner`).
         */
        METERING_POLICY_BUCKET_OWNER: BUCKET_OWNER.optional(),
        METERING_POLICY_REGION: z.string().min(1).optional(),
        METERING_HUB_PUBLIC_KEY: z.string().optional(),
        METERING_POLICY_POLL_SECONDS: z.coerce.number().positive().default(60),
        /** Kinesis whole-call timeout, ms (enforced: the socket is dropped). */
        METERING_KINESIS_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
        /** OTLP intake: whole request (headers + body) must arrive within this, ms (Node `server.requestTimeout`). */
        METERING_HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
        /** OTLP intake: headers must arrive within this, ms (Node `server.headersTimeout`). */
        METERING_HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
        /** OTLP intake: idle keep-alive connection closed after this, ms (Node `server.keepAliveTimeout`). */
        METERING_HTTP_KEEPALIVE_TIMEOUT_MS: z.coerce.number().int().positive().default(65_000),
        /** OTLP intake: largest request body after decompression, bytes. */
        METERING_HTTP_MAX_BODY_BYTES: z.coerce
            .number()
            .int()
            .positive()
            .default(16 * 1024 * 1024),
        /**
         * Tests only (fault injection): the process kills itself with SIGKILL the first time it reaches this point:
         * `after-spool` (batch durable, not yet acknowledged), `after-tokens` (tokens added, cursor not yet written),
         * `after-put` (hub accepted a batch, ship cursor not yet committed).
         */
        METERING_FAILPOINT: z.enum(["after-spool", "after-tokens", "after-put"]).optional(),
        METERING_PORT: z.coerce.number().int().min(1).max(65535).default(8080),
        METERING_BIND_ADDRESS: z.string().min(1).default("0.0.0.0"),
        /** Region and shared config/credentials files for the Kinesis and S3 clients' default chain (components/spoke/Metering.ts). */
        ...AWS_SDK_ENV,
    })
    .refine((c) => !c.METERING_POLICY_BUCKET || c.METERING_POLICY_BUCKET_OWNER, {
        message: "required with METERING_POLICY_BUCKET: the hub's account that owns it",
        path: ["METERING_POLICY_BUCKET_OWNER"],
    });

/**
 * The metering service's environment contract (services/shared/env.ts): components/spoke/Metering.ts renders its
 * StatefulSet's env by these names. A new variable is one entry in the schema above.
 */
export const METERING_ENV = EnvSchema;

export type MeteringEnv = z.infer<typeof EnvSchema>;

/** @throws Error listing each invalid variable (values not echoed). */
export function loadConfig(env: NodeJS.ProcessEnv): MeteringEnv {
    const r = EnvSchema.safeParse(env);
    if (!r.success)
        throw new Error(`invalid metering configuration:\n${r.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n")}`);
    return r.data;
}
