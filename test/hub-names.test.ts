/**
 * Two hubs in one AWS account: the physical names of what the hub's spoke identities create (IAM roles, Roles
 * Anywhere trust anchors and profiles) carry the hub's stack name, and every other fixed physical name (buckets,
 * Kinesis streams, the Aurora cluster and instances, Lambdas, log groups, alarms, KMS aliases, secrets) begins with
 * the hub file's `platform:namePrefix` (config/hub.ts; default `platform`, the shipped hub's names). Rendered from one
 * hub file twice, once as shipped and once under another stack name with a prefix, and every physical name of every
 * resource compared.
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { parseFlatStackConfig } from "../config/stack";
import { runStack } from "../tools/harness";
import { unwrapWire } from "../tools/wire";
import { flatConfig, repoProgram, stackConfigDoc } from "./helpers";

/** The hub file rendered as stack `stack` (one of its on-prem spokes on Roles Anywhere, so every identity mode is there). */
async function renderHubAs(stack: string, namePrefix?: string) {
    const doc = structuredClone(stackConfigDoc("hub-prod"));
    doc["platform:spokeIdentities"].hcm1 = {
        mode: "roles-anywhere",
        caBundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        egressCidrs: ["192.0.2.0/28"],
    };
    if (namePrefix !== undefined) {
        doc["platform:namePrefix"] = namePrefix;
        // A second hub serves its own client hostname (Route 53 record names come from the hub file, in its zone).
        doc["platform:failover"].hostname = `llm.${namePrefix}.example.com`;
    }
    const prev = process.env.PLATFORM_STACK_FILE;
    process.env.PLATFORM_STACK_FILE = "stacks/Pulumi.hub-prod.yaml";
    try {
        return await runStack({ project: "platform", stack, config: flatConfig(doc), program: repoProgram });
    } finally {
        if (prev === undefined) delete process.env.PLATFORM_STACK_FILE;
        else process.env.PLATFORM_STACK_FILE = prev;
    }
}

const IDENTITY_TYPES = ["aws:iam/role:Role", "aws:rolesanywhere/trustAnchor:TrustAnchor", "aws:rolesanywhere/profile:Profile"];

/**
 * Input keys that name the resource itself in AWS (a physical name), per resource type; `name` for every other AWS
 * type. Keys that refer to another resource (a bucket policy's `bucket`, an event source mapping's `functionName`)
 * are not names of their own and are left out by this table.
 */
const NAME_KEYS: Record<string, string[]> = {
    "aws:s3/bucket:Bucket": ["bucket"],
    "aws:s3/bucketV2:BucketV2": ["bucket"],
    "aws:rds/cluster:Cluster": ["clusterIdentifier", "finalSnapshotIdentifier"],
    "aws:rds/clusterInstance:ClusterInstance": ["identifier"],
};
/**
 * Names that live inside another resource (an inline policy in its role; a Route 53 record in its hosted zone, one
 * per set identifier for latency or failover records): unique per parent, so keyed by it.
 */
const SCOPED_BY: Record<string, string> = { "aws:iam/rolePolicy:RolePolicy": "role", "aws:route53/record:Record": "setIdentifier" };

/** Every physical name an AWS resource of `hub` sets: `<type> <name>` (unique per account and region). */
function physicalNames(hub: Awaited<ReturnType<typeof renderHubAs>>): string[] {
    const out: string[] = [];
    for (const r of hub.resources) {
        if (!r.custom || !r.type.startsWith("aws:") || r.type.startsWith("pulumi:providers:")) continue;
        const inputs = unwrapWire(r.inputs) as Record<string, unknown>;
        for (const k of NAME_KEYS[r.type] ?? ["name"]) {
            const v = inputs[k];
            if (typeof v !== "string") continue;
            const scope = SCOPED_BY[r.type];
            out.push(`${r.type} ${scope ? `${String(inputs[scope])}/` : ""}${v}`);
        }
    }
    return out.sort();
}

describe("two hubs in one account", () => {
    it("the spoke identities' roles, trust anchors and profiles have different physical names per hub", async () => {
        const names = async (stack: string) =>
            (await renderHubAs(stack)).resources
                .filter((r) => r.urn.includes("platform:hub:SpokeIdentity$") && IDENTITY_TYPES.includes(r.type))
                .map((r) => `${r.type} ${(unwrapWire(r.outputs) as { name: string }).name}`);
        const prod = await names("hub-prod");
        const staging = await names("hub-staging");
        // Every spoke's two roles, hcm1's trust anchor and profile.
        expect(prod.filter((n) => n.startsWith("aws:iam/role:Role"))).toHaveLength(6);
        expect(prod.filter((n) => n.startsWith("aws:rolesanywhere/"))).toHaveLength(2);
        expect(prod.filter((n) => staging.includes(n))).toEqual([]);
        for (const n of staging) expect(n).toMatch(/ hub-staging-/);
    }, 240_000);

    it("every physical name of every resource differs between the default hub and one with platform:namePrefix", async () => {
        const prod = physicalNames(await renderHubAs("hub-prod"));
        const staging = physicalNames(await renderHubAs("hub-staging", "staging"));
        // The default is the shipped hub's names exactly (test/hub-urns.test.ts pins its URNs).
        for (const n of [
            "aws:s3/bucket:Bucket platform-policy-bundles-123456789012-ap-southeast-1",
            "aws:s3/bucket:Bucket platform-usage-failed-batches-123456789012-ap-southeast-1",
            "aws:kinesis/stream:Stream platform-usage-hn1",
            "aws:rds/cluster:Cluster platform-usage-ledger",
            "aws:rds/cluster:Cluster platform-usage-ledger-final",
            "aws:rds/clusterInstance:ClusterInstance platform-usage-ledger-0",
            "aws:lambda/function:Function platform-usage-consumer",
            "aws:cloudwatch/logGroup:LogGroup /aws/lambda/platform-usage-consumer",
            "aws:cloudwatch/metricAlarm:MetricAlarm platform-usage-failure-queue",
            "aws:kms/alias:Alias alias/platform-policy-bundles",
            "aws:kms/alias:Alias alias/platform-usage-ledger",
            "aws:secretsmanager/secret:Secret platform/usage-ledger/ingest",
            // The access-key slots keep the names every hub had before prefixes (services/shared/spoke-key-slot.ts).
            "aws:iam/user:User platform-spoke-hn1-2026-11",
            "aws:secretsmanager/secret:Secret platform/spokes/hn1/source-key/2026-11",
        ])
            expect(prod).toContain(n);
        expect(prod.filter((n) => n.includes("/tenants/") && n.endsWith("/api-keys")).length).toBeGreaterThan(0);
        expect(prod.length).toBeGreaterThan(30);
        expect(staging.length).toBe(prod.length);
        expect(new Set(prod).size).toBe(prod.length);
        // Nothing shared, the access-key slots' users and source-key secrets included.
        expect(prod.filter((n) => staging.includes(n))).toEqual([]);
        expect(staging).toContain("aws:iam/user:User staging-spoke-hn1-2026-11");
        expect(staging).toContain("aws:secretsmanager/secret:Secret staging/spokes/hn1/source-key/2026-11");
        for (const n of staging.filter((x) => !x.startsWith("aws:route53/record:Record ")))
            expect(n).toMatch(/ (alias\/|\/aws\/lambda\/|\/aws\/rds\/cluster\/)?(staging|hub-staging)[-/]/);
        // The client hostname's records carry the hub file's own hostname (platform:failover.hostname).
        expect(staging.filter((x) => x.startsWith("aws:route53/record:Record "))).toEqual([
            "aws:route53/record:Record hcm1/llm.staging.example.com",
            "aws:route53/record:Record hn1/llm.staging.example.com",
        ]);
    }, 240_000);
});

describe("platform:namePrefix", () => {
    const refused = (prefix: unknown) => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:namePrefix"] = prefix;
        try {
            parseFlatStackConfig(flatConfig(doc), "stacks/Pulumi.hub-staging.yaml", [], { now: new Date("2026-12-01T00:00:00Z") });
        } catch (e) {
            if (e instanceof ConfigError) return { file: e.stackFile, issues: e.issues.map((i) => `${i.key}: ${i.message}`) };
            throw e;
        }
        return { file: "", issues: [] as string[] };
    };
    it.each([
        ["Staging", "lower-case"],
        ["stg_1", "lower-case"],
        ["1stg", "start with a letter"],
        ["stg-", "end with a letter or digit"],
        ["stg--a", "single hyphens"],
        ["a", "start with a letter"],
        ["abcdefghijklmno", "at most 14 characters"],
        ["sthree-x", "S3-reserved"],
        ["amzn-s3-demo", "S3-reserved"],
    ])("refuses %j naming the hub file and key", (prefix, why) => {
        const r = refused(prefix);
        expect(r.file).toBe("stacks/Pulumi.hub-staging.yaml");
        expect(r.issues.length).toBeGreaterThan(0);
        expect(r.issues.every((i) => i.startsWith("platform:namePrefix: "))).toBe(true);
        expect(r.issues.join("\n")).toContain(why);
    });
    it("accepts the longest prefix, which keeps the failure bucket within S3's 63 characters in the longest regions", () => {
        expect(refused("abcdefghijklmn").issues).toEqual([]);
        expect(`abcdefghijklmn-usage-failed-batches-123456789012-ap-southeast-1`.length).toBeLessThanOrEqual(63);
    });
});
