/**
 * One AWS call the product makes, as IAM evaluates it: which principal sends it, the action and resource, and the
 * request context it really carries. Each service lists its calls in an `aws-calls.ts` beside the code that makes
 * them; test/aws-simulate.test.ts evaluates every entry against the policies the hub renders (identity, bucket, key
 * and secret policies together), and test/aws-calls.test.ts fails when the code sends an SDK command no table lists.
 *
 * Placeholders in `resource` and `context` values (`{name}`) are filled by the evaluator from the rendered stack:
 * `{partition}`, `{region}` (the hub's), `{account}`, `{spoke}`, `{revision}`, `{policyBucketArn}`,
 * `{policyKeyArn}`, `{usageStreamArn}`, `{ledgerKeyArn}`, `{ingestSecretArn}`, `{reporterSecretArn}`,
 * `{masterSecretArn}`, `{failureQueueArn}`, `{logGroupArn}`, `{sourceIp}` (the spoke site's egress address).
 */
export interface AwsCall {
    /**
     * The AWS SDK v3 command class the code sends (`GetObjectCommand`), or undefined for a call an AWS service makes
     * with the principal's credentials on its behalf (S3 asking KMS for a data key, Lambda reading a stream).
     */
    command?: string;
    /** Repository path of the file that sends `command` (or configures the service that makes the call). */
    source: string;
    /** IAM action (`s3:PutObject`). */
    action: string;
    /** Resource ARN, with placeholders; `*` for actions without a resource type (cloudwatch:PutMetricData). */
    resource: string;
    /**
     * Request context the call carries (condition keys and their values): transport (`aws:SecureTransport`,
     * `s3:TlsVersion`), encryption headers (only those really sent), `kms:ViaService` for calls made through a
     * service, `aws:SourceIp`, session tags.
     */
    context: Record<string, string | string[]>;
    /** What the call is for. */
    purpose: string;
}

/**
 * Transport context of every SDK v3 call: HTTPS only (the SDK has no plain-HTTP endpoint for these services) and
 * at least TLS 1.2 (Node.js's default `tls.DEFAULT_MIN_VERSION`, nodejs/node@v24.x:doc/api/tls.md).
 */
export const SDK_TRANSPORT: Record<string, string> = { "aws:SecureTransport": "true" };
export const S3_TRANSPORT: Record<string, string> = { ...SDK_TRANSPORT, "s3:TlsVersion": "1.2" };
