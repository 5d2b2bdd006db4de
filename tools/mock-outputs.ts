import { createHash } from "crypto";

/**
 * What the offline mocks return for resources whose outputs a real provider would compute (ARNs, generated
 * passwords, ...). Deterministic: the same stack renders byte-identical output. In preview mode none of these
 * are returned, so they are unknown, as in a real `pulumi preview` of a new stack.
 */
export const MOCK_ACCOUNT_ID = "123456789012";

function digest(s: string): string {
    return createHash("sha256").update(s).digest("hex");
}

/** Deterministic alphanumeric string of `length` characters derived from `seed`. */
export function mockRandomString(seed: string, length: number): string {
    let out = "";
    for (let i = 0; out.length < length; i++) out += digest(`${seed}:${i}`);
    return out.slice(0, length);
}

export type OutputMock = (name: string, inputs: Record<string, any>, region: string) => Record<string, unknown>;

function arn(service: string, region: string, resource: string): string {
    return `arn:aws:${service}:${service === "iam" || service === "s3" ? "" : region}:${service === "s3" ? "" : MOCK_ACCOUNT_ID}:${resource}`;
}

/**
 * Computed outputs by resource type token. Other issues extend this table (Kinesis, RDS, Lambda, EKS, ...).
 * A type not listed gets its inputs back plus, for `aws:` types, a generic `arn`.
 */
export const outputMocks: Record<string, OutputMock> = {
    "random:index/randomPassword:RandomPassword": (n, i) => ({ result: mockRandomString(`password:${n}`, Number(i.length ?? 32)), bcryptHash: "$2a$10$mock" }),
    "random:index/randomBytes:RandomBytes": (n, i) => {
        const hex = mockRandomString(`bytes:${n}`, Number(i.length ?? 32) * 2);
        return { hex, base64: Buffer.from(hex, "hex").toString("base64") };
    },
    "random:index/randomId:RandomId": (n, i) => {
        const hex = mockRandomString(`id:${n}`, Number(i.byteLength ?? 8) * 2);
        return { hex, dec: BigInt(`0x${hex}`).toString(), b64Url: Buffer.from(hex, "hex").toString("base64url"), b64Std: Buffer.from(hex, "hex").toString("base64") };
    },
    "aws:s3/bucket:Bucket": (n, i, r) => {
        const bucket = i.bucket ?? `${n}-${mockRandomString(n, 7)}`;
        return { bucket, arn: arn("s3", r, bucket), bucketRegionalDomainName: `${bucket}.s3.${r}.amazonaws.com`, region: r };
    },
    "aws:kms/key:Key": (n, _i, r) => { const id = mockRandomString(`kms:${n}`, 32); return { keyId: id, arn: arn("kms", r, `key/${id}`) }; },
    "aws:kms/alias:Alias": (n, i, r) => ({ arn: arn("kms", r, i.name ?? `alias/${n}`) }),
    "aws:iam/role:Role": (n, i) => { const name = i.name ?? `${n}-${mockRandomString(n, 7)}`; return { name, arn: arn("iam", "", `role/${name}`), uniqueId: `AROA${mockRandomString(n, 16).toUpperCase()}` }; },
    "aws:iam/policy:Policy": (n, i) => { const name = i.name ?? `${n}-${mockRandomString(n, 7)}`; return { name, arn: arn("iam", "", `policy/${name}`) }; },
};

/** Results of provider functions (invokes) by token. */
export const callMocks: Record<string, (args: Record<string, any>, region: string) => Record<string, unknown>> = {
    "aws:index/getCallerIdentity:getCallerIdentity": () => ({ accountId: MOCK_ACCOUNT_ID, arn: `arn:aws:iam::${MOCK_ACCOUNT_ID}:user/render`, userId: "AIDAMOCK" }),
    "aws:index/getRegion:getRegion": (_a, r) => ({ name: r, region: r, id: r }),
    "aws:index/getPartition:getPartition": () => ({ partition: "aws", dnsSuffix: "amazonaws.com" }),
};

/** Computed outputs for one resource (not including its inputs). */
export function computedOutputs(type: string, name: string, inputs: Record<string, any>, region: string): Record<string, unknown> {
    const m = outputMocks[type];
    if (m) return m(name, inputs, region);
    if (type.startsWith("aws:")) {
        const [, mod] = type.split(":");
        return { arn: arn(mod.split("/")[0], region, `${name}`) };
    }
    return {};
}
