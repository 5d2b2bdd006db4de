/**
 * A loopback HTTP stand-in in front of s3rver for S3 `GetBucketLogging` (`GET /<bucket>?logging`), which s3rver does
 * not implement: it answers that request itself in the shapes of the S3 API reference, GetBucketLogging
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketLogging.html: a `BucketLoggingStatus` element, with
 * `LoggingEnabled` {`TargetBucket`, `TargetGrants`, `TargetPrefix`, `TargetObjectKeyFormat` {`PartitionedPrefix`
 * {`PartitionDateSource`} | `SimplePrefix`}} when logging is on, empty when it is off) or S3's error shape (Error
 * responses: `<Error><Code>AccessDenied</Code>...` with HTTP 403), and passes every other request to s3rver unchanged.
 * A GetBucketLogging whose `x-amz-expected-bucket-owner` is not `owner` is refused with 403 AccessDenied, as S3 refuses
 * it for a bucket `owner` owns; one without the header is refused too, which S3 would answer: stricter than S3, so a
 * caller that forgets the expected owner fails here.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

/** What GetBucketLogging answers: logging on with these elements, off, or refused. */
export type BucketLogging =
    | {
          on: {
              targetBucket: string;
              targetPrefix: string;
              keyFormat: { partitioned: "EventTime" | "DeliveryTime" } | "simple";
              /** Canonical user ids given READ on the delivered logs (`TargetGrants`); none when absent. */
              grants?: string[];
          };
      }
    | "off"
    | "refused";

export interface LoggingStandIn {
    endpoint: string;
    /** What the next GetBucketLogging requests are answered. */
    answer: BucketLogging;
    /** The buckets GetBucketLogging was asked for, in order. */
    asked: string[];
    close(): Promise<void>;
}

const NS = "http://s3.amazonaws.com/doc/2006-03-01/";

/** Pure: the response body S3 sends for `a` (S3 API reference, GetBucketLogging, Response Syntax). */
export function bucketLoggingXml(a: Exclude<BucketLogging, "refused">): string {
    if (a === "off") return `<?xml version="1.0" encoding="UTF-8"?>\n<BucketLoggingStatus xmlns="${NS}"/>`;
    const k = a.on.keyFormat;
    const format =
        k === "simple"
            ? "<SimplePrefix></SimplePrefix>"
            : `<PartitionedPrefix><PartitionDateSource>${k.partitioned}</PartitionDateSource></PartitionedPrefix>`;
    const grants = a.on.grants?.length
        ? `<TargetGrants>${a.on.grants
              .map(
                  (id) =>
                      `<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>${id}</ID></Grantee><Permission>READ</Permission></Grant>`,
              )
              .join("")}</TargetGrants>`
        : "";
    return `<?xml version="1.0" encoding="UTF-8"?>\n<BucketLoggingStatus xmlns="${NS}"><LoggingEnabled><TargetBucket>${a.on.targetBucket}</TargetBucket>${grants}<TargetPrefix>${a.on.targetPrefix}</TargetPrefix><TargetObjectKeyFormat>${format}</TargetObjectKeyFormat></LoggingEnabled></BucketLoggingStatus>`;
}

const ACCESS_DENIED = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>0123456789ABCDEF</RequestId><HostId>stand-in</HostId></Error>`;

/** Starts the stand-in on a free loopback port in front of the s3rver at `s3Endpoint`. */
export async function startLoggingStandIn(s3Endpoint: string, owner: string, answer: BucketLogging): Promise<LoggingStandIn> {
    const upstream = new URL(s3Endpoint);
    const state = { answer, asked: [] as string[] };
    const server = http.createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://stand-in");
        if (req.method === "GET" && url.searchParams.has("logging")) {
            req.resume();
            state.asked.push(decodeURIComponent(url.pathname.split("/")[1] ?? ""));
            const xml = (status: number, body: string) => {
                res.writeHead(status, { "content-type": "application/xml", "x-amz-request-id": "0123456789ABCDEF" });
                res.end(body);
            };
            if (state.answer === "refused" || req.headers["x-amz-expected-bucket-owner"] !== owner) return xml(403, ACCESS_DENIED);
            return xml(200, bucketLoggingXml(state.answer));
        }
        const out = http.request(
            { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
            (r) => {
                res.writeHead(r.statusCode ?? 502, r.headers);
                r.pipe(res);
            },
        );
        out.on("error", (e) => {
            res.writeHead(502);
            res.end(String(e));
        });
        req.pipe(out);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return Object.assign(state, {
        endpoint: `http://127.0.0.1:${port}`,
        close: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    }) as LoggingStandIn;
}
