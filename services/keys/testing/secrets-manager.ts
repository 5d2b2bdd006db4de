import { randomUUID } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local Secrets Manager stand-in for tests (loopback, free port): the AWS JSON 1.1 protocol the SDK v3 client
 * speaks (`X-Amz-Target: secretsmanager.<Operation>`), for the operations the minting path sends: DescribeSecret,
 * GetSecretValue, PutSecretValue, with versions and staging labels as Secrets Manager keeps them (a new value becomes
 * AWSCURRENT, the former one AWSPREVIOUS; a ClientRequestToken already used with the same value is idempotent, with
 * another value refused). Every request must carry a SigV4 Authorization header; the access key id of each call is
 * recorded, so a test sees who wrote what.
 */
export interface SecretsManagerStandIn {
    endpoint: string;
    /** Creates an empty secret (no value), as the hub's `aws.secretsmanager.Secret` does. */
    createSecret(name: string): string;
    /** The current value of a secret, or undefined. */
    current(name: string): string | undefined;
    /** Every request received: operation, calling access key id, body. */
    requests: Array<{ operation: string; accessKeyId: string; body: Record<string, unknown> }>;
    /** Makes the next call of `operation` fail with an InternalServiceError (a test of rollback paths). */
    failNext(operation: string): void;
    close(): Promise<void>;
}

interface Version {
    id: string;
    value: string;
    stages: string[];
}
interface Secret {
    arn: string;
    name: string;
    versions: Version[];
}

class ApiError extends Error {
    constructor(
        readonly type: string,
        message: string,
    ) {
        super(message);
    }
}

export async function startSecretsManager(region = "ap-southeast-1", account = "123456789012"): Promise<SecretsManagerStandIn> {
    const secrets = new Map<string, Secret>();
    const requests: SecretsManagerStandIn["requests"] = [];
    const failing = new Set<string>();
    const find = (id: unknown): Secret => {
        const s = [...secrets.values()].find((x) => x.name === id || x.arn === id);
        if (!s) throw new ApiError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
        return s;
    };
    const ops: Record<string, (b: Record<string, any>) => unknown> = {
        DescribeSecret: (b) => {
            const s = find(b.SecretId);
            return { ARN: s.arn, Name: s.name, VersionIdsToStages: Object.fromEntries(s.versions.map((v) => [v.id, v.stages])) };
        },
        GetSecretValue: (b) => {
            const s = find(b.SecretId);
            const stage = b.VersionStage ?? "AWSCURRENT";
            const v = s.versions.find((x) => (b.VersionId ? x.id === b.VersionId : x.stages.includes(stage)));
            if (!v)
                throw new ApiError(
                    "ResourceNotFoundException",
                    `Secrets Manager can't find the specified secret value for staging label: ${stage}`,
                );
            return { ARN: s.arn, Name: s.name, VersionId: v.id, SecretString: v.value, VersionStages: v.stages };
        },
        PutSecretValue: (b) => {
            const s = find(b.SecretId);
            if (typeof b.SecretString !== "string") throw new ApiError("InvalidParameterException", "SecretString is required");
            const id = typeof b.ClientRequestToken === "string" ? b.ClientRequestToken : randomUUID();
            const same = s.versions.find((v) => v.id === id);
            if (same) {
                if (same.value !== b.SecretString)
                    throw new ApiError(
                        "ResourceExistsException",
                        "A version with this ClientRequestToken already exists with another value.",
                    );
            } else {
                for (const v of s.versions) v.stages = v.stages.filter((x) => x !== "AWSPREVIOUS");
                for (const v of s.versions)
                    if (v.stages.includes("AWSCURRENT")) v.stages = v.stages.map((x) => (x === "AWSCURRENT" ? "AWSPREVIOUS" : x));
                s.versions = s.versions.filter((v) => v.stages.length > 0);
                s.versions.push({ id, value: b.SecretString, stages: ["AWSCURRENT"] });
            }
            return { ARN: s.arn, Name: s.name, VersionId: id, VersionStages: ["AWSCURRENT"] };
        },
    };
    const server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
            const reply = (status: number, body: unknown, type?: string) => {
                res.writeHead(status, { "content-type": "application/x-amz-json-1.1", ...(type ? { "x-amzn-errortype": type } : {}) });
                res.end(JSON.stringify(body));
            };
            try {
                const auth = /^AWS4-HMAC-SHA256 Credential=([A-Z0-9]+)\//.exec(String(req.headers.authorization ?? ""));
                if (!auth) throw new ApiError("MissingAuthenticationTokenException", "Request is missing a SigV4 Authorization header.");
                const target = /^secretsmanager\.(\w+)$/.exec(String(req.headers["x-amz-target"] ?? ""));
                const op = target && ops[target[1]];
                if (!op) throw new ApiError("UnknownOperationException", `unsupported target ${req.headers["x-amz-target"]}`);
                const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
                requests.push({ operation: target[1], accessKeyId: auth[1], body });
                if (failing.delete(target[1])) throw new ApiError("InternalServiceError", "injected failure");
                reply(200, op(body));
            } catch (e) {
                const err = e instanceof ApiError ? e : new ApiError("InternalServiceError", String(e));
                reply(400, { __type: err.type, message: err.message }, err.type);
            }
        });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return {
        endpoint: `http://127.0.0.1:${port}`,
        createSecret(name) {
            const arn = `arn:aws:secretsmanager:${region}:${account}:secret:${name}-${randomUUID().slice(0, 6)}`;
            secrets.set(name, { arn, name, versions: [] });
            return arn;
        },
        current: (name) => secrets.get(name)?.versions.find((v) => v.stages.includes("AWSCURRENT"))?.value,
        requests,
        failNext: (operation) => void failing.add(operation),
        close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
    };
}
