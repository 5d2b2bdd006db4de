import { createHash } from "node:crypto";
import { MOCK_CALLER_ARN_ENV } from "../lib/ci-roles";

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
    "random:index/randomPassword:RandomPassword": (n, i) => ({
        result: mockRandomString(`password:${n}`, Number(i.length ?? 32)),
        bcryptHash: "$2a$10$mock",
    }),
    "random:index/randomBytes:RandomBytes": (n, i) => {
        const hex = mockRandomString(`bytes:${n}`, Number(i.length ?? 32) * 2);
        return { hex, base64: Buffer.from(hex, "hex").toString("base64") };
    },
    "random:index/randomId:RandomId": (n, i) => {
        const hex = mockRandomString(`id:${n}`, Number(i.byteLength ?? 8) * 2);
        return {
            hex,
            dec: BigInt(`0x${hex}`).toString(),
            b64Url: Buffer.from(hex, "hex").toString("base64url"),
            b64Std: Buffer.from(hex, "hex").toString("base64"),
        };
    },
    "aws:s3/bucket:Bucket": (n, i, r) => {
        const bucket = i.bucket ?? `${n}-${mockRandomString(n, 7)}`;
        return { bucket, arn: arn("s3", r, bucket), bucketRegionalDomainName: `${bucket}.s3.${r}.amazonaws.com`, region: r };
    },
    "aws:kms/key:Key": (n, _i, r) => {
        const id = mockRandomString(`kms:${n}`, 32);
        return { keyId: id, arn: arn("kms", r, `key/${id}`) };
    },
    "aws:kms/alias:Alias": (n, i, r) => ({ arn: arn("kms", r, i.name ?? `alias/${n}`) }),
    "aws:iam/role:Role": (n, i) => {
        // A name prefix gets a unique suffix of 26 characters, as the provider's does (seeded by the prefix too).
        const name =
            i.name ?? (i.namePrefix ? `${i.namePrefix}${mockRandomString(`${i.namePrefix}:${n}`, 26)}` : `${n}-${mockRandomString(n, 7)}`);
        return { name, arn: arn("iam", "", `role${i.path ?? "/"}${name}`), uniqueId: `AROA${mockRandomString(n, 16).toUpperCase()}` };
    },
    "aws:iam/policy:Policy": (n, i) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("iam", "", `policy/${name}`) };
    },
    "aws:iam/user:User": (n, i) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("iam", "", `user${i.path ?? "/"}${name}`), uniqueId: `AIDA${mockRandomString(n, 16).toUpperCase()}` };
    },
    // Deterministic stand-in for an IAM secret access key (40 characters, like the real one).
    "aws:iam/accessKey:AccessKey": (n) => ({ secret: mockRandomString(`access-key:${n}`, 40), status: "Active" }),
    "aws:s3/bucketObjectv2:BucketObjectv2": (n, i) => ({
        versionId: mockRandomString(`version:${n}:${i.content ?? ""}`, 32),
        etag: mockRandomString(`etag:${i.content ?? ""}`, 32),
    }),
    // Usage ledger (components/hub/UsageLedger.ts).
    "aws:kinesis/stream:Stream": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("kinesis", r, `stream/${name}`) };
    },
    "aws:rds/cluster:Cluster": (n, i, r) => {
        const id = i.clusterIdentifier ?? `${n}-${mockRandomString(n, 7)}`,
            host = mockRandomString(`rds:${r}`, 12);
        const managed = i.manageMasterUserPassword
            ? {
                  masterUserSecrets: [
                      {
                          secretArn: arn(
                              "secretsmanager",
                              r,
                              `secret:rds!cluster-${mockRandomString(n, 8)}-${mockRandomString(`sm:${n}`, 6)}`,
                          ),
                          kmsKeyId: i.masterUserSecretKmsKeyId ?? "",
                          secretStatus: "active",
                      },
                  ],
              }
            : {};
        return {
            ...managed,
            clusterIdentifier: id,
            arn: arn("rds", r, `cluster:${id}`),
            endpoint: `${id}.cluster-${host}.${r}.rds.amazonaws.com`,
            readerEndpoint: `${id}.cluster-ro-${host}.${r}.rds.amazonaws.com`,
            port: 5432,
            clusterResourceId: `cluster-${mockRandomString(n, 26).toUpperCase()}`,
        };
    },
    "aws:rds/clusterInstance:ClusterInstance": (n, i, r) => {
        const id = i.identifier ?? `${n}-${mockRandomString(n, 7)}`;
        return {
            identifier: id,
            arn: arn("rds", r, `db:${id}`),
            endpoint: `${id}.${mockRandomString(`rds:${r}`, 12)}.${r}.rds.amazonaws.com`,
            port: 5432,
        };
    },
    "aws:rds/subnetGroup:SubnetGroup": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("rds", r, `subgrp:${name}`) };
    },
    "aws:lambda/function:Function": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        const a = arn("lambda", r, `function:${name}`);
        return {
            name,
            arn: a,
            qualifiedArn: `${a}:1`,
            invokeArn: `arn:aws:apigateway:${r}:lambda:path/2015-03-31/functions/${a}/invocations`,
            version: "1",
        };
    },
    "aws:sqs/queue:Queue": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("sqs", r, name), url: `https://sqs.${r}.amazonaws.com/${MOCK_ACCOUNT_ID}/${name}` };
    },
    "aws:secretsmanager/secret:Secret": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("secretsmanager", r, `secret:${name}-${mockRandomString(`sm:${n}`, 6)}`) };
    },
    "aws:cloudwatch/logGroup:LogGroup": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("logs", r, `log-group:${name}`) };
    },
};

/**
 * EKS / EC2 outputs for EKS spokes (programs/eks-spoke.ts). The API endpoint, CA and OIDC issuer have the
 * shapes EKS returns (`https://<hex>.gr7.<region>.eks.amazonaws.com`, `oidc.eks.<region>.amazonaws.com/id/<HEX>`).
 */
Object.assign(outputMocks, {
    "aws:eks/cluster:Cluster": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        const hex = mockRandomString(`eks:${name}`, 32).toUpperCase();
        return {
            name,
            arn: arn("eks", r, `cluster/${name}`),
            status: "ACTIVE",
            platformVersion: "eks.1",
            endpoint: `https://${hex}.gr7.${r}.eks.amazonaws.com`,
            certificateAuthority: { data: Buffer.from(`mock CA for ${name}`).toString("base64") },
            identities: [{ oidcs: [{ issuer: `https://oidc.eks.${r}.amazonaws.com/id/${hex}` }] }],
            vpcConfig: {
                ...(i.vpcConfig ?? {}),
                clusterSecurityGroupId: `sg-${mockRandomString(`cluster-sg:${name}`, 17)}`,
                vpcId: `vpc-${mockRandomString(`vpc:${name}`, 17)}`,
            },
        };
    },
    "aws:eks/nodeGroup:NodeGroup": (n, i, r) => ({
        arn: arn("eks", r, `nodegroup/${i.clusterName}/${i.nodeGroupName ?? n}`),
        status: "ACTIVE",
    }),
    "aws:eks/addon:Addon": (_n, i, r) => ({
        arn: arn("eks", r, `addon/${i.clusterName}/${i.addonName}`),
        addonVersion: i.addonVersion ?? "v0.0.0-eksbuild.default",
    }),
    "aws:ec2/launchTemplate:LaunchTemplate": (n, _i, r) => ({
        arn: arn("ec2", r, `launch-template/lt-${mockRandomString(n, 17)}`),
        latestVersion: 1,
        defaultVersion: 1,
    }),
    "aws:ec2/placementGroup:PlacementGroup": (n, i, r) => {
        const name = i.name ?? `${n}-${mockRandomString(n, 7)}`;
        return { name, arn: arn("ec2", r, `placement-group/${name}`), placementGroupId: `pg-${mockRandomString(n, 17)}` };
    },
    "aws:ec2/vpc:Vpc": (n, _i, r) => ({
        arn: arn("ec2", r, `vpc/${n}`),
        defaultSecurityGroupId: `sg-${mockRandomString(`default-sg:${n}`, 17)}`,
        mainRouteTableId: `rtb-${mockRandomString(n, 17)}`,
    }),
    "aws:ec2/securityGroup:SecurityGroup": (n, _i, r) => ({ arn: arn("ec2", r, `security-group/${n}`) }),
    "aws:ec2/subnet:Subnet": (n, _i, r) => ({ arn: arn("ec2", r, `subnet/${n}`) }),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": (_n, i) => ({
        arn: arn("iam", "", `oidc-provider/${String(i.url ?? "").replace(/^https:\/\//, "")}`),
    }),
} satisfies Record<string, OutputMock>);

/**
 * `aws.ec2.getInstanceType` results for the instance types the stacks use, from the published specs
 * (p5en.48xlarge 16 network cards = 16 EFA, 16 x 200 Gb/s; p5e.48xlarge 32 x 100 Gb/s;
 * both 192 vCPU, 2 TiB, 8 x H200). m7i.4xlarge: 16 vCPU, 64 GiB, one card, no EFA (EFA is m7i.48xlarge only).
 */
export const INSTANCE_TYPES: Record<string, Record<string, unknown>> = {
    "p5en.48xlarge": {
        maximumNetworkCards: 16,
        efaSupported: true,
        efaMaximumInterfaces: 16,
        defaultVcpus: 192,
        memorySize: 2097152,
        networkPerformance: "3200 Gigabit",
        gpus: [{ count: 8, manufacturer: "NVIDIA", name: "H200", memorySize: 144384 }],
    },
    "p5e.48xlarge": {
        maximumNetworkCards: 32,
        efaSupported: true,
        efaMaximumInterfaces: 32,
        defaultVcpus: 192,
        memorySize: 2097152,
        networkPerformance: "3200 Gigabit",
        gpus: [{ count: 8, manufacturer: "NVIDIA", name: "H200", memorySize: 144384 }],
    },
    "m7i.4xlarge": {
        maximumNetworkCards: 1,
        efaSupported: false,
        efaMaximumInterfaces: 0,
        defaultVcpus: 16,
        memorySize: 65536,
        networkPerformance: "Up to 12.5 Gigabit",
        gpus: [],
    },
};

/** Role names `aws.iam.getRole` reports as missing in the mock account (tests add and remove them). */
export const MOCK_MISSING_ROLES = new Set<string>();
/** Topic names `aws.sns.getTopic` reports as missing in the mock account. */
export const MOCK_MISSING_TOPICS = new Set<string>();

/**
 * SNS topics of the mock account encrypted with KMS (tests add and remove them): topic name -> its `KmsMasterKeyId`
 * and, for a customer managed key, that key's policy, as Cloud Control reads them (`aws.cloudcontrol.getResource`).
 */
export const MOCK_TOPIC_KEYS = new Map<string, { kmsMasterKeyId: string; keyPolicy?: unknown }>();

/** Results of provider functions (invokes) by token. */
export const callMocks: Record<string, (args: Record<string, any>, region: string) => Record<string, unknown>> = {
    "aws:ec2/getInstanceType:getInstanceType": (a) => {
        const t = INSTANCE_TYPES[String(a.instanceType)];
        if (!t)
            throw new Error(
                `mock aws.ec2.getInstanceType has no data for "${a.instanceType}"; add it to INSTANCE_TYPES in tools/mock-outputs.ts`,
            );
        return { id: a.instanceType, instanceType: a.instanceType, ...t };
    },
    // A test may name the caller (lib/ci-roles.ts MOCK_CALLER_ARN_ENV): the hub then checks it is a deployer.
    "aws:index/getCallerIdentity:getCallerIdentity": () => {
        const arn = process.env[MOCK_CALLER_ARN_ENV];
        return {
            accountId: arn ? arn.split(":")[4] : MOCK_ACCOUNT_ID,
            arn: arn ?? `arn:aws:iam::${MOCK_ACCOUNT_ID}:user/render`,
            userId: "AIDAMOCK",
        };
    },
    "aws:index/getRegion:getRegion": (_a, r) => ({ name: r, region: r, id: r }),
    // The provider's partition of its region (aws/aws-sdk-js-v3@v3.1175.0:packages/util-endpoints/src/lib/aws/partitions.json):
    // China and GovCloud, the rest `aws` (the hub refuses every partition but `aws`: lib/aws-partition.ts).
    "aws:index/getPartition:getPartition": (_a, r) =>
        /^cn-\w+-\d+$/.test(r)
            ? { partition: "aws-cn", dnsSuffix: "amazonaws.com.cn" }
            : /^us-gov-\w+-\d+$/.test(r)
              ? { partition: "aws-us-gov", dnsSuffix: "amazonaws.com" }
              : { partition: "aws", dnsSuffix: "amazonaws.com" },
    // A role session's issuer is its role; for an IAM user the issuer is the user itself.
    "aws:iam/getSessionContext:getSessionContext": (a) => ({ arn: a.arn, issuerArn: a.arn, issuerName: String(a.arn).split("/").pop() }),
    // IAM roles exist unless a test removed them from the mock account (MOCK_MISSING_ROLES), as GetRole answers NoSuchEntity.
    "aws:iam/getRole:getRole": (a) => {
        if (MOCK_MISSING_ROLES.has(String(a.name))) throw new Error(`NoSuchEntity: The role with name ${a.name} cannot be found.`);
        return {
            name: a.name,
            arn: `arn:aws:iam::${MOCK_ACCOUNT_ID}:role/${a.name}`,
            id: a.name,
            uniqueId: `AROA${mockRandomString(`role:${a.name}`, 16).toUpperCase()}`,
        };
    },
    // SNS topics exist unless a test removed them (MOCK_MISSING_TOPICS).
    "aws:sns/getTopic:getTopic": (a, r) => {
        if (MOCK_MISSING_TOPICS.has(String(a.name))) throw new Error(`NotFound: Topic ${a.name} does not exist`);
        return { name: a.name, arn: `arn:aws:sns:${r}:${MOCK_ACCOUNT_ID}:${a.name}`, id: `arn:aws:sns:${r}:${MOCK_ACCOUNT_ID}:${a.name}` };
    },
    // Cloud Control reads of an SNS topic (its KMS key, MOCK_TOPIC_KEYS) and of a KMS key (its policy).
    "aws:cloudcontrol/getResource:getResource": (a) => {
        const id = String(a.identifier);
        if (a.typeName === "AWS::SNS::Topic") {
            const name = id.split(":").pop()!;
            const k = MOCK_TOPIC_KEYS.get(name);
            return { properties: JSON.stringify({ TopicArn: id, TopicName: name, ...(k ? { KmsMasterKeyId: k.kmsMasterKeyId } : {}) }) };
        }
        if (a.typeName === "AWS::KMS::Key") {
            const k = [...MOCK_TOPIC_KEYS.values()].find((x) => x.kmsMasterKeyId.endsWith(id) || x.kmsMasterKeyId.startsWith("alias/"));
            if (!k?.keyPolicy) throw new Error(`NotFound: key ${id}`);
            return { properties: JSON.stringify({ KeyId: id, KeyPolicy: k.keyPolicy }) };
        }
        throw new Error(`mock aws.cloudcontrol.getResource has no data for ${a.typeName}`);
    },
    "aws:kms/getAlias:getAlias": (a, r) => ({
        name: a.name,
        targetKeyId: mockRandomString(`alias:${a.name}`, 32),
        targetKeyArn: `arn:aws:kms:${r}:${MOCK_ACCOUNT_ID}:key/${mockRandomString(`alias:${a.name}`, 32)}`,
    }),
    // A spoke's source key secret (components/hub/SpokeIdentity.ts): deterministic per secret, in the JSON shape the hub writes.
    "aws:secretsmanager/getSecretVersion:getSecretVersion": (a) => ({
        arn: a.secretId,
        versionId: "mock-version",
        secretString: JSON.stringify({
            accessKeyId: `AKIA${mockRandomString(`akid:${a.secretId}`, 16).toUpperCase()}`,
            secretAccessKey: mockRandomString(`access-key:${a.secretId}`, 40),
        }),
    }),
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
