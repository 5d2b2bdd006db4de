import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import type { S3Client } from "@aws-sdk/client-s3";
import { SignatureV4 } from "@smithy/signature-v4";

/**
 * A minimal AWS Lambda `Invoke` client (RequestResponse) for the operator tools (`npm run status`,
 * `npm run replay-usage`), signed with the AWS SDK's own Signature V4 signer (@smithy/signature-v4) and the SDK's
 * default credential chain (taken from the tool's S3 client). Shaped like @aws-sdk/client-lambda
 * (`client.send(InvokeCommand)` with `{ FunctionName, Payload }`), so test/aws-calls.test.ts finds the command and
 * the tools' calls tables (tools/aws-calls.ts) list it. The API: AWS Lambda API reference, "Invoke":
 * `POST /2015-03-31/functions/{FunctionName}/invocations`, an unhandled function error answered 200 with the
 * `X-Amz-Function-Error` header and the error as the payload.
 */

/** What the signer hashes (@smithy/types `SourceData`). */
type SourceData = string | ArrayBuffer | ArrayBufferView;

const bytes = (d: SourceData): string | Uint8Array =>
    typeof d === "string" ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);

/** SHA-256 / HMAC-SHA-256 for the signer (its `HashConstructor`), from Node's crypto. */
class NodeSha256 {
    private h: Hash | Hmac;
    constructor(secret?: SourceData) {
        this.h = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
    }
    update(data: SourceData): void {
        this.h.update(bytes(data));
    }
    async digest(): Promise<Uint8Array> {
        return new Uint8Array(this.h.digest());
    }
}

/** `lambda:InvokeFunction`, synchronously, with a JSON payload. */
export class InvokeCommand {
    constructor(readonly input: { FunctionName: string; Payload: unknown }) {}
}

/**
 * Lambda's synchronous request payload limit: 6 MiB, 6,291,456 bytes (6 * 1024 * 1024). AWS documents it as "6 MB"
 * (AWS Lambda developer guide, "Lambda quotas"; API reference "Invoke": "For synchronous invocations, the maximum
 * payload size is 6 MB"); the byte count the service enforces is the binary one, 6,291,456 (its
 * RequestEntityTooLargeException reads "Request must be smaller than 6291456 bytes for the InvokeFunction operation").
 */
export const INVOKE_PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024;

/**
 * The client: `send` of an `InvokeCommand` carrying `{ FunctionName, Payload }` invokes a function synchronously (RequestResponse)
 * with `Payload` as JSON and resolves to the function's JSON result (see this module's comment for the API).
 * Construction makes no call (it throws only `new URL`'s TypeError for an `endpoint` that is not a URL); credentials
 * are resolved by the signer at the first `send`.
 * @throws Error from `send` naming the function: a payload of {@link INVOKE_PAYLOAD_LIMIT_BYTES} bytes of JSON or more (no
 *   call made), an HTTP error status (AccessDenied, not found, throttled; the first 500 characters of the body), or a
 *   function error (`X-Amz-Function-Error`, with its `errorMessage`); the signer's error when no credentials resolve;
 *   `fetch`'s TypeError when the endpoint cannot be reached; SyntaxError when a 200 answer is not JSON
 */
export class LambdaInvoker {
    private readonly signer: SignatureV4;
    private readonly url: URL;
    /**
     * @param region the function's AWS region (`https://lambda.<region>.amazonaws.com`, and the signing region)
     * @param credentialsFrom an SDK client whose credential chain signs the calls (the tool's S3 client)
     * @param endpoint a Lambda-compatible server instead of `https://lambda.<region>.amazonaws.com` (tests)
     */
    constructor(
        private readonly region: string,
        credentialsFrom: Pick<S3Client, "config">,
        endpoint?: string,
    ) {
        this.signer = new SignatureV4({ service: "lambda", region, credentials: credentialsFrom.config.credentials, sha256: NodeSha256 });
        this.url = new URL(endpoint ?? `https://lambda.${region}.amazonaws.com`);
    }

    /**
     * Invokes the function and returns its JSON result.
     * @throws Error naming the function: on an HTTP error (AccessDenied, not found), a function error, or a payload
     *   at or over {@link INVOKE_PAYLOAD_LIMIT_BYTES}
     */
    async send(cmd: InvokeCommand): Promise<unknown> {
        const body = JSON.stringify(cmd.input.Payload);
        if (Buffer.byteLength(body) >= INVOKE_PAYLOAD_LIMIT_BYTES)
            throw new Error(
                `payload for ${cmd.input.FunctionName} is not under Lambda's ${INVOKE_PAYLOAD_LIMIT_BYTES} byte limit (the request must be smaller)`,
            );
        const path = `${this.url.pathname.replace(/\/$/, "")}/2015-03-31/functions/${encodeURIComponent(cmd.input.FunctionName)}/invocations`;
        const signed = await this.signer.sign({
            method: "POST",
            protocol: this.url.protocol,
            hostname: this.url.hostname,
            port: this.url.port ? Number(this.url.port) : undefined,
            path,
            query: {},
            headers: { host: this.url.host, "content-type": "application/json", "x-amz-invocation-type": "RequestResponse" },
            body,
        });
        const res = await fetch(new URL(path, this.url), { method: "POST", headers: signed.headers as Record<string, string>, body });
        const text = await res.text();
        if (!res.ok) throw new Error(`lambda Invoke ${cmd.input.FunctionName} (${this.region}): HTTP ${res.status} ${text.slice(0, 500)}`);
        const fnError = res.headers.get("x-amz-function-error");
        if (fnError) {
            let message = text;
            try {
                message = (JSON.parse(text) as { errorMessage?: string }).errorMessage ?? text;
            } catch {}
            throw new Error(`${cmd.input.FunctionName} failed (${fnError}): ${message.slice(0, 1000)}`);
        }
        return JSON.parse(text);
    }
}
