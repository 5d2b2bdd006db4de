/**
 * The hub's policies name AWS services as `<service>.<region>.amazonaws.com` (`kms:ViaService`) in `arn:aws:` ARNs:
 * the `aws` partition's names (lib/aws-partition.ts). Another partition is refused up front, naming the stack file and
 * `aws:region`: by the hub program from its provider's `aws.getPartition` (the mocks answer it per region as the
 * provider does, tools/mock-outputs.ts), and by the offline CI roles tool from the region itself.
 */
import * as fs from "node:fs";
import * as path from "node:path";
// The AWS SDK's own partition table (installed with the pinned @aws-sdk clients): the upstream evaluator of a region.
import { partition as sdkPartition } from "@aws-sdk/core/client";
import { describe, expect, it } from "vitest";
import { HUB_PARTITION, hubPartitionIssue, hubRegionIssue } from "../lib/aws-partition";
import { callMocks } from "../tools/mock-outputs";
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
        const doc = { ...stackConfigDoc("hub-prod"), "aws:region": region };
        await expect(runRepoStack("hub-prod", { config: flatConfig(doc) })).rejects.toThrow(
            new RegExp(`Pulumi\\.hub-prod\\.yaml[\\s\\S]*aws:region: region ${region} is in partition ${partition} `),
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
