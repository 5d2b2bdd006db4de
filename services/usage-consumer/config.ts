import { z } from "zod";
import { BUCKET_OWNER } from "../shared/bucket-owner";
import { NODE_RUNTIME_ENV, parseEnv } from "../shared/env";

/** Object key prefix of failed batches in the failure bucket (failed-batches.ts; the bucket's expiry and the consumer's grant). */
export const FAILED_BATCH_PREFIX = "failed/";

/** JSON text of a stream ARN -> spoke object. */
const streamSpokes = z.string().transform((text, ctx) => {
    try {
        const doc: unknown = JSON.parse(text);
        const r = z.record(z.string().min(1), z.string().regex(/^[a-z0-9][a-z0-9-]*$/)).safeParse(doc);
        if (r.success) return r.data;
        ctx.addIssue({ code: "custom", message: `must map stream ARNs to spoke names: ${r.error.issues[0]?.message}` });
    } catch (e) {
        ctx.addIssue({ code: "custom", message: `invalid JSON: ${(e as Error).message}` });
    }
    return z.NEVER;
});

/**
 * The usage consumer Lambda's environment contract (services/shared/env.ts), set by components/hub/UsageLedger.ts.
 * A new variable is one entry here (and its field in {@link readEnv}).
 */
export const CONSUMER_ENV = z.object({
    PGHOST: z.string().min(1),
    PGPORT: z.coerce.number().int().min(1).max(65535).default(5432),
    PGDATABASE: z.string().min(1),
    /** The ingest role (services/reconciler/config.ts `INGEST_ROLE`). */
    PGUSER: z.string().min(1),
    /** Secrets Manager secret holding the role's password (SecretString). */
    DB_PASSWORD_SECRET_ARN: z.string().min(1),
    /** JSON object, stream ARN -> the only spoke allowed to write it. */
    STREAM_SPOKES: streamSpokes,
    /** The failure bucket: a failing batch's records are written there before the batch is failed (failed-batches.ts). */
    FAILED_BATCH_BUCKET: z.string().min(1),
    /** The hub's account, which owns the failure bucket: sent as `ExpectedBucketOwner` with every request to it. */
    FAILED_BATCH_BUCKET_OWNER: BUCKET_OWNER,
    /** The KMS key (ARN) failed batches are encrypted with, named in each upload (the bucket policy requires it). */
    FAILED_BATCH_KMS_KEY_ARN: z.string().min(1),
    /** The RDS CAs the Lambda runtime ships (`/var/runtime/ca-cert.pem`): TLS to Aurora is verified against them. */
    ...NODE_RUNTIME_ENV,
});

/** Connection settings, from the function's environment (set by components/hub/UsageLedger.ts). */
export interface ConsumerEnv {
    host: string;
    port: number;
    database: string;
    user: string;
    /** Secrets Manager secret holding the password (SecretString). */
    passwordSecretArn: string;
    /** `STREAM_SPOKES`: stream ARN -> spoke name. */
    streamSpokes: Record<string, string>;
    /** `FAILED_BATCH_BUCKET`. */
    failedBatchBucket: string;
    /** `FAILED_BATCH_BUCKET_OWNER`. */
    failedBatchBucketOwner: string;
    /** `FAILED_BATCH_KMS_KEY_ARN`. */
    failedBatchKmsKeyArn: string;
}

/** @throws Error naming each missing or invalid variable. */
export function readEnv(env: NodeJS.ProcessEnv): ConsumerEnv {
    const e = parseEnv("usage consumer", CONSUMER_ENV, env);
    return {
        host: e.PGHOST,
        port: e.PGPORT,
        database: e.PGDATABASE,
        user: e.PGUSER,
        passwordSecretArn: e.DB_PASSWORD_SECRET_ARN,
        streamSpokes: e.STREAM_SPOKES,
        failedBatchBucket: e.FAILED_BATCH_BUCKET,
        failedBatchBucketOwner: e.FAILED_BATCH_BUCKET_OWNER,
        failedBatchKmsKeyArn: e.FAILED_BATCH_KMS_KEY_ARN,
    };
}
