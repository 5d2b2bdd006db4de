import { randomBytes, randomUUID } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local IAM stand-in for tests (loopback, free port): the AWS Query protocol the SDK v3 client speaks (form-encoded
 * POST `Action=...&Version=2010-05-08`, XML replies in the `https://iam.amazonaws.com/doc/2010-05-08/` namespace,
 * errors as `<ErrorResponse><Error><Code>`), for the access-key operations the minting path sends: ListAccessKeys,
 * CreateAccessKey, DeleteAccessKey. As IAM: a user holds at most two access keys (`LimitExceeded`), an unknown user
 * or key is `NoSuchEntity`. Every request must carry a SigV4 Authorization header; the calling access key id of each
 * request is recorded.
 */
export interface IamStandIn {
    endpoint: string;
    /** Creates a user (as the hub's `aws.iam.User` does). */
    createUser(name: string): void;
    /** The access keys of a user: id -> secret. */
    keys(user: string): Map<string, string> | undefined;
    /** Every request received: operation, calling access key id, parameters. */
    requests: Array<{ operation: string; accessKeyId: string; params: Record<string, string> }>;
    /** Makes the next call of `operation` fail with an InternalFailure (a test of rollback paths). */
    failNext(operation: string): void;
    close(): Promise<void>;
}

const NS = "https://iam.amazonaws.com/doc/2010-05-08/";

class ApiError extends Error {
    constructor(
        readonly code: string,
        readonly status: number,
        message: string,
    ) {
        super(message);
    }
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export async function startIam(): Promise<IamStandIn> {
    const users = new Map<string, Map<string, string>>();
    const requests: IamStandIn["requests"] = [];
    const failing = new Set<string>();
    const user = (name: string | undefined) => {
        const u = name === undefined ? undefined : users.get(name);
        if (!u) throw new ApiError("NoSuchEntity", 404, `The user with name ${name} cannot be found.`);
        return u;
    };
    const ops: Record<string, (p: Record<string, string>) => string> = {
        ListAccessKeys: (p) => {
            const keys = user(p.UserName);
            const members = [...keys.keys()]
                .map(
                    (id) =>
                        `<member><UserName>${esc(p.UserName)}</UserName><AccessKeyId>${id}</AccessKeyId><Status>Active</Status><CreateDate>2026-01-01T00:00:00Z</CreateDate></member>`,
                )
                .join("");
            return `<ListAccessKeysResult><AccessKeyMetadata>${members}</AccessKeyMetadata><IsTruncated>false</IsTruncated></ListAccessKeysResult>`;
        },
        CreateAccessKey: (p) => {
            const keys = user(p.UserName);
            if (keys.size >= 2) throw new ApiError("LimitExceeded", 409, "Cannot exceed quota for AccessKeysPerUser: 2");
            const id = `AKIA${randomBytes(8).toString("hex").toUpperCase()}`;
            const secret = randomBytes(30).toString("base64");
            keys.set(id, secret);
            return `<CreateAccessKeyResult><AccessKey><UserName>${esc(p.UserName)}</UserName><AccessKeyId>${id}</AccessKeyId><Status>Active</Status><SecretAccessKey>${esc(secret)}</SecretAccessKey><CreateDate>2026-01-01T00:00:00Z</CreateDate></AccessKey></CreateAccessKeyResult>`;
        },
        DeleteAccessKey: (p) => {
            const keys = user(p.UserName);
            if (!keys.delete(p.AccessKeyId))
                throw new ApiError("NoSuchEntity", 404, `The Access Key with id ${p.AccessKeyId} cannot be found.`);
            return "";
        },
    };
    const server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
            const requestId = randomUUID();
            const params = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString("utf8")));
            const action = params.Action ?? "";
            try {
                const auth = /^AWS4-HMAC-SHA256 Credential=([A-Z0-9]+)\//.exec(String(req.headers.authorization ?? ""));
                if (!auth) throw new ApiError("MissingAuthenticationToken", 403, "Request is missing a SigV4 Authorization header.");
                if (params.Version !== "2010-05-08") throw new ApiError("InvalidAction", 400, `unsupported version ${params.Version}`);
                const op = ops[action];
                if (!op) throw new ApiError("InvalidAction", 400, `unsupported action ${action}`);
                requests.push({ operation: action, accessKeyId: auth[1], params });
                if (failing.delete(action)) throw new ApiError("ServiceFailure", 500, "injected failure");
                const result = op(params);
                res.writeHead(200, { "content-type": "text/xml" });
                res.end(
                    `<${action}Response xmlns="${NS}">${result}<ResponseMetadata><RequestId>${requestId}</RequestId></ResponseMetadata></${action}Response>`,
                );
            } catch (e) {
                const err = e instanceof ApiError ? e : new ApiError("ServiceFailure", 500, String(e));
                res.writeHead(err.status, { "content-type": "text/xml" });
                res.end(
                    `<ErrorResponse xmlns="${NS}"><Error><Type>${err.status < 500 ? "Sender" : "Receiver"}</Type><Code>${err.code}</Code><Message>${esc(err.message)}</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
                );
            }
        });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return {
        endpoint: `http://127.0.0.1:${port}`,
        createUser: (name) => void users.set(name, new Map()),
        keys: (name) => users.get(name),
        requests,
        failNext: (operation) => void failing.add(operation),
        close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
    };
}
