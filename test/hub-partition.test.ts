/**
 * The hub's policies name AWS services as `<service>.<region>.amazonaws.com` (`kms:ViaService`) in `arn:aws:` ARNs:
 * the `aws` partition's names (lib/aws-partition.ts). Another partition is refused up front, naming the stack file and
 * `aws:region`: by the hub program from its provider's `aws.getPartition` (the mocks answer it per region as the
 * provider does, tools/mock-outputs.ts), and by the offline CI roles tool from the region itself. EKS spokes name
 * `arn:aws:` ARNs and trust the hub: a spoke file whose region is in another partition is refused where spoke files are
 * read (lib/aws-partition.ts `stackAwsRegionIssues`; the hub's side in test/spoke-registry.test.ts).
 */
import * as fs from "node:fs";
import * as path from "node:path";
// The AWS SDK's own partition table (installed with the pinned @aws-sdk clients): the upstream evaluator of a region.
import { partition as sdkPartition } from "@aws-sdk/core/client";
import * as ts from "typescript";
import { describe, expect, it } from "vitest";
import { HUB_PARTITION, hubPartitionIssue, hubRegionIssue } from "../lib/aws-partition";
import { callMocks } from "../tools/mock-outputs";
import { referenceableOutputs } from "../tools/wire";
import { byType, flatConfig, inputs, runRepoStack, stackConfigDoc } from "./helpers";

const ROOT = path.join(__dirname, "..");

describe("the hub's partition", () => {
    it("only aws with DNS suffix amazonaws.com passes; aws-cn (another suffix) and aws-us-gov (same suffix, other ARNs) are refused", () => {
        expect(hubPartitionIssue({ partition: "aws", dnsSuffix: "amazonaws.com" }, "ap-southeast-1")).toBeUndefined();
        expect(hubPartitionIssue({ partition: "aws-cn", dnsSuffix: "amazonaws.com.cn" }, "cn-north-1")).toMatch(
            /^region cn-north-1 is in partition aws-cn \(DNS suffix amazonaws\.com\.cn\); .*kms:ViaService.*deploy the hub in a region of partition aws$/,
        );
        expect(hubPartitionIssue({ partition: "aws-us-gov", dnsSuffix: "amazonaws.com" }, "us-gov-west-1")).toMatch(/partition aws-us-gov/);
        expect(hubPartitionIssue({ partition: "aws", dnsSuffix: "amazonaws.com.cn" }, "x")).toMatch(/DNS suffix amazonaws\.com\.cn/);
    });

    it("offline (CI roles tool): the aws partition's regions pass, every other partition's are refused", () => {
        for (const r of ["us-east-1", "ap-southeast-1", "eu-central-2", "il-central-1", "mx-central-1", "ca-west-1", "af-south-1"])
            expect(hubRegionIssue(r), r).toBeUndefined();
        for (const r of [
            "cn-north-1",
            "cn-northwest-1",
            "us-gov-west-1",
            "us-iso-east-1",
            "us-isob-east-1",
            "eu-isoe-west-1",
            "eusc-de-east-1",
            "",
            "ap-southeast",
        ])
            expect(hubRegionIssue(r), r).toMatch(new RegExp(`^region ${r} is not a region of partition aws .*kms:ViaService`));
    });

    it("agrees with the AWS SDK's partition table on every partition's regions; the mocks answer getPartition as it does", () => {
        const regions = [
            ...["us-east-1", "us-west-2", "ap-southeast-1", "ap-southeast-7", "eu-south-2", "il-central-1", "me-central-1", "mx-central-1"],
            ...["cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1", "us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1"],
            ...["us-isof-south-1", "eusc-de-east-1"],
        ];
        const partitions = new Set<string>();
        for (const r of regions) {
            const p = sdkPartition(r) as { name: string; dnsSuffix: string; description?: string };
            expect(p.description, `${r} is a region the SDK lists`).toBeDefined();
            partitions.add(p.name);
            const inAws = p.name === HUB_PARTITION.partition;
            expect(hubRegionIssue(r) === undefined, r).toBe(inAws);
            expect(hubPartitionIssue({ partition: p.name, dnsSuffix: p.dnsSuffix }, r) === undefined, r).toBe(inAws);
            if (inAws) expect(p.dnsSuffix).toBe(HUB_PARTITION.dnsSuffix);
            if (["aws", "aws-cn", "aws-us-gov"].includes(p.name))
                expect(callMocks["aws:index/getPartition:getPartition"]({}, r), r).toEqual({ partition: p.name, dnsSuffix: p.dnsSuffix });
        }
        expect(partitions.size).toBeGreaterThanOrEqual(7);
    });

    it.each([
        ["cn-north-1", "aws-cn"],
        ["us-gov-west-1", "aws-us-gov"],
    ])("a hub in %s (partition %s) is refused naming the stack file and aws:region", async (region, partition) => {
        // Refused by the stack file's region check (programs/load.ts), before the provider's getPartition is asked.
        const doc = { ...stackConfigDoc("hub-prod"), "aws:region": region };
        await expect(runRepoStack("hub-prod", { config: flatConfig(doc) })).rejects.toThrow(
            new RegExp(
                `Pulumi\\.hub-prod\\.yaml[\\s\\S]*aws:region: region ${region} is not a region of partition aws \\(the AWS SDK lists it in partition ${partition}\\); .*deploy the hub in a region of partition aws`,
            ),
        );
    });

    it("in the aws partition every kms:ViaService the hub renders is <service>.<region>.amazonaws.com", async () => {
        const doc = stackConfigDoc("hub-prod");
        const region: string = doc["aws:region"];
        const r = await runRepoStack("hub-prod");
        const values: string[] = [];
        const walk = (x: unknown): void => {
            if (Array.isArray(x)) x.forEach(walk);
            else if (x && typeof x === "object")
                for (const [k, v] of Object.entries(x)) {
                    if (k === "kms:ViaService") values.push(...(Array.isArray(v) ? v : [v]));
                    else walk(v);
                }
        };
        for (const res of r.resources)
            for (const field of ["policy", "assumeRolePolicy"]) {
                const text = inputs(res)[field];
                if (typeof text === "string" && text.startsWith("{")) walk(JSON.parse(text));
            }
        expect(byType(r.resources, "aws:kms/key:Key").length).toBeGreaterThan(0);
        expect(values.length).toBeGreaterThan(0);
        for (const v of values)
            expect(v).toMatch(new RegExp(`^[a-z0-9-]+\\.${region}\\.${HUB_PARTITION.dnsSuffix.replace(/\./g, "\\.")}$`));
    });

    it("every product file that builds a region's service name is the hub's or the CI roles tool's (both refuse other partitions)", () => {
        // A `${...}.amazonaws.com` template (a service name with the region in it), or a `{region}.amazonaws.com` placeholder.
        const builds = /\$\{[^}]*\}\.amazonaws\.com|\{region\}\.amazonaws\.com/;
        const found: string[] = [];
        const scan = (dir: string) => {
            for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
                const rel = path.join(dir, e.name);
                if (e.isDirectory()) scan(rel);
                else if (rel.endsWith(".ts") && builds.test(fs.readFileSync(path.join(ROOT, rel), "utf8"))) found.push(rel);
            }
        };
        for (const d of ["components", "lib", "programs", "config"]) scan(d);
        // Reached only from programs/hub.ts (hubPartitionIssue) or tools/ci-roles.ts (hubRegionIssue).
        const covered = [
            "components/hub/ApiKeys.ts",
            "components/hub/SpokeIdentity.ts",
            "components/hub/ledger/iam.ts",
            "components/hub/legacy-spoke-role.ts",
            "lib/ci-roles.ts",
            "lib/kms.ts",
        ];
        expect(found.sort()).toEqual(covered);
    });
});

/**
 * Lines of `text` with a string or template literal that holds `arn:aws:` (comments and regular expressions are not
 * literals: the TypeScript parser decides, not a pattern over the text).
 */
function arnLiteralLines(file: string, text: string): number[] {
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const lines = new Set<number>();
    const visit = (n: ts.Node) => {
        if ((ts.isStringLiteralLike(n) || ts.isTemplateLiteralToken(n)) && n.text.includes("arn:aws:"))
            lines.add(sf.getLineAndCharacterOfPosition(n.getStart()).line + 1);
        ts.forEachChild(n, visit);
    };
    visit(sf);
    return [...lines];
}

describe("arn:aws: in product code, and what refuses other partitions there", () => {
    it("the scan finds string and template literals only", () => {
        const text =
            "// arn:aws:iam::1:role/x\nconst a = 'arn:aws:s3:::b';\nconst r = /^arn:aws:x$/;\nconst t = `arn:aws:ec2:${r}:x`;\n/** `arn:aws:` */";
        expect(arnLiteralLines("x.ts", text)).toEqual([2, 4]);
    });

    it("every product file with an arn:aws: literal is a hub's, an EKS spoke's, a calls table, an example or an offline tool's", () => {
        // How each file's ARNs are kept in partition aws. Hub: programs/hub.ts refuses another partition (hubPartitionIssue,
        // above). EKS spoke: a spoke file whose platform:cluster.region or aws:region is not in it is refused by the spoke's
        // program (programs/load.ts) and the hub's check of its spoke files (programs/spoke-registry.ts), both with
        // stackAwsRegionIssues, before any resource.
        const covered: Record<string, string> = {
            "components/hub/ledger/iam.ts": "hub",
            "components/spoke/EksCluster.ts": "EKS spoke",
            "lib/aws-load-balancer-controller.ts": "EKS spoke (and its calls table for the simulator)",
            "programs/eks-spoke.ts": "EKS spoke",
            "lib/edge-aws-calls.ts": "calls table the simulator evaluates (EKS spoke's cert-manager role)",
            "services/reconciler/aws-calls.ts": "calls table the simulator evaluates (the hub's ledger Lambdas)",
            "config/hub.ts": "example in an error message",
            "config/spoke-identity.ts": "example in an error message",
            "config/tenant-keys.ts": "example in an error message",
            "tools/ci-roles.ts": "CI roles tool (hubRegionIssue)",
            "tools/mock-outputs.ts": "offline mocks (partition aws)",
            "tools/bench-render.ts": "bench stack files (partition aws)",
        };
        const found: Record<string, number[]> = {};
        const scan = (dir: string) => {
            for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
                const rel = path.posix.join(dir, e.name);
                if (e.isDirectory()) {
                    if (!["test", "testing", "node_modules"].includes(e.name)) scan(rel);
                } else if (/\.ts$/.test(e.name) && !/\.test\.ts$|\.d\.ts$/.test(e.name)) {
                    const lines = arnLiteralLines(rel, fs.readFileSync(path.join(ROOT, rel), "utf8"));
                    if (lines.length) found[rel] = lines;
                }
            }
        };
        for (const d of ["components", "lib", "programs", "config", "services", "tools"]) scan(d);
        // Where they are (file: lines), so a new one shows up here with its place.
        const where = Object.entries(found).map(([f, l]) => `${f}:${l.join(",")}`);
        expect(where.some((w) => w.startsWith("components/spoke/EksCluster.ts:"))).toBe(true);
        expect(Object.keys(found).sort(), where.join("\n")).toEqual(Object.keys(covered).sort());
    });

    it.each(["cn-north-1", "us-gov-west-1"])(
        "an EKS spoke file copied to %s is refused by the spoke's own program, naming the file and its region keys",
        async (region) => {
            const doc = JSON.parse(JSON.stringify(stackConfigDoc("spoke-sg1")).replaceAll("ap-southeast-1", region));
            await expect(runRepoStack("spoke-sg1", { config: flatConfig(doc) })).rejects.toThrow(
                new RegExp(
                    `Pulumi\\.spoke-sg1\\.yaml: invalid stack configuration\\n  - platform:cluster\\.region: region ${region} is not a region of partition aws [^\\n]*put the spoke in a region of partition aws\\n  - aws:region: region ${region} `,
                ),
            );
        },
    );

    it("the shipped EKS spoke (partition aws) still renders against the hub", async () => {
        const hub = await runRepoStack("hub-prod");
        const r = await runRepoStack("spoke-sg1", {
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
        });
        expect(byType(r.resources, "aws:eks/cluster:Cluster")).toHaveLength(1);
    });
});
