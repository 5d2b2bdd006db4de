/**
 * Every AWS region a stack file names is checked against the pinned AWS SDK's partition table (lib/aws-partition.ts
 * `awsPartitionRegionIssue`, `stackAwsRegionIssues`): a region the SDK lists in partition aws passes; one of the
 * partition's shape it does not list (a typo such as `us-est-1`, or a region newer than the SDK) is refused naming the
 * stack file and key with the nearest listed regions, unless the file acknowledges it in `platform:unlistedAwsRegions`
 * (config/aws-region.ts), or `npm run new-spoke -- --unlisted-region` writes that. An on-prem spoke's site name is no
 * AWS region. Evaluated by the SDK's own `partition()`, the spoke and hub programs under mocks, and the real CLIs.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { partition as sdkPartition } from "@aws-sdk/core/client";
import { Region as PulumiAwsRegion } from "@pulumi/aws/types/enums";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { parseFlatStackConfig } from "../config/stack";
import { awsPartitionRegionIssue, hubRegionIssue, isListedAwsRegion, nearAwsRegions, stackAwsRegionIssues } from "../lib/aws-partition";
import { spokeFilesOf } from "../programs/spoke-registry";
import { newSpokeFile } from "../tools/new-spoke";
import { referenceableOutputs } from "../tools/wire";
import { byType, flatConfig, inputs, ROOT, runRepoStack, STACKS, stackConfigDoc, testTempDir } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

const run = promisify(execFile);

/** The regions the SDK lists in partition aws, from the provider's list (every one the tests below can name). */
const LISTED = Object.values(PulumiAwsRegion as Record<string, string>).filter(isListedAwsRegion);

/** A repo stack file's config doc with every `from` region replaced by `to`. */
const moved = (stack: string, from: string, to: string): Record<string, any> =>
    JSON.parse(JSON.stringify(stackConfigDoc(stack)).replaceAll(from, to));

/** What the hub's spoke check needs: the hub's published outputs. */
async function hubOutputs() {
    const hub = await runRepoStack("hub-prod");
    return { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } };
}

describe("the region list is the AWS SDK's", () => {
    it("a region passes exactly when the SDK lists it in partition aws; the regex alone is not enough", () => {
        expect(LISTED.length).toBeGreaterThanOrEqual(30);
        for (const r of Object.values(PulumiAwsRegion as Record<string, string>)) {
            const p = sdkPartition(r) as { name: string; description?: string };
            expect(isListedAwsRegion(r), r).toBe(p.name === "aws" && p.description !== undefined);
            expect(hubRegionIssue(r) === undefined, r).toBe(isListedAwsRegion(r));
        }
        // The aws partition's regionRegex matches these; the SDK lists none of them.
        for (const r of ["us-est-1", "eu-west-9", "us-east-9", "ap-southeast-99"]) {
            expect((sdkPartition(r) as { name: string }).name, r).toBe("aws");
            expect(isListedAwsRegion(r), r).toBe(false);
        }
        expect(isListedAwsRegion("aws-global")).toBe(false);
    });

    it("every single-character typo of a listed region is refused with a listed region near it (exhaustive)", () => {
        const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-".split("");
        let checked = 0;
        for (const r of LISTED) {
            const edits = new Set<string>();
            for (let i = 0; i <= r.length; i++) {
                for (const c of alphabet) {
                    edits.add(r.slice(0, i) + c + r.slice(i));
                    if (i < r.length) edits.add(r.slice(0, i) + c + r.slice(i + 1));
                }
                if (i < r.length) edits.add(r.slice(0, i) + r.slice(i + 1));
            }
            for (const typo of edits) {
                if (isListedAwsRegion(typo)) continue;
                checked++;
                const issue = awsPartitionRegionIssue(typo, "why");
                expect(issue, typo).toBeDefined();
                const near = nearAwsRegions(typo);
                expect(near.length, typo).toBeGreaterThan(0);
                expect(near.every(isListedAwsRegion), typo).toBe(true);
                expect(issue, typo).toContain(`did you mean "${near[0]}"`);
            }
        }
        expect(checked).toBeGreaterThan(20_000);
    });

    it("the messages: a typo names its near regions and the way out; another partition names that partition", () => {
        expect(awsPartitionRegionIssue("us-est-1", "why")).toBe(
            'region us-est-1 is not a region the pinned AWS SDK lists in partition aws (did you mean "us-east-1", "us-west-1" or "us-east-2"?); if it is a region newer than the SDK, add it to platform:unlistedAwsRegions (a list) in this stack file',
        );
        expect(awsPartitionRegionIssue("eu-west-9", "why")).toMatch(/\(did you mean "eu-west-1", "eu-west-2" or "eu-west-3"\?\)/);
        expect(awsPartitionRegionIssue("ap-southeast", "why")).toBe(
            'region ap-southeast is not a region of partition aws (did you mean "ap-southeast-1", "ap-southeast-2" or "ap-southeast-3"?); why',
        );
        expect(awsPartitionRegionIssue("cn-north-1", "why")).toBe(
            "region cn-north-1 is not a region of partition aws (the AWS SDK lists it in partition aws-cn); why",
        );
        // Acknowledging a region of the partition's shape lets it through; another partition's never.
        expect(awsPartitionRegionIssue("us-east-9", "why", { acknowledged: ["us-east-9"] })).toBeUndefined();
        expect(awsPartitionRegionIssue("cn-north-1", "why", { acknowledged: ["cn-north-1"] })).toMatch(/partition aws-cn/);
    });
});

describe("stack files: every AWS region key, one check", () => {
    it("every region the shipped stacks use is accepted, and each AWS region key is one the check reads", () => {
        const seen: string[] = [];
        for (const f of fs.readdirSync(STACKS).filter((x) => /^Pulumi\..+\.yaml$/.test(x))) {
            const doc = YAML.parse(fs.readFileSync(path.join(STACKS, f), "utf8")).config;
            const cfg = parseFlatStackConfig(flatConfig(doc), f);
            expect(stackAwsRegionIssues(cfg, doc["aws:region"]), f).toEqual([]);
            // Each region key: a typo in it is refused under that key (so every shipped region key is checked; an EKS
            // spoke's platform:cluster.region, which other keys must agree with, in the program test below).
            const keys: Array<[string, (d: Record<string, any>) => void]> = [
                ["aws:region", (d) => (d["aws:region"] = "us-est-1")],
                [
                    "platform:gateway.listener.reachable.latencyRegion",
                    (d) => (d["platform:gateway"].listener.reachable.latencyRegion = "us-est-1"),
                ],
                ["platform:gateway.listener.tls.route53.region", (d) => (d["platform:gateway"].listener.tls.route53.region = "us-est-1")],
            ];
            for (const [key, set] of keys) {
                const d = structuredClone(doc);
                try {
                    set(d);
                } catch {
                    continue; // the file has no such key
                }
                if (JSON.stringify(d) === JSON.stringify(doc)) continue;
                const eksOnly = key === "aws:region" && doc["platform:role"] === "spoke" && d["platform:cluster"].provider !== "eks";
                if (eksOnly) continue;
                let c: ReturnType<typeof parseFlatStackConfig>;
                try {
                    c = parseFlatStackConfig(flatConfig(d), f);
                } catch {
                    continue; // a key the schema requires to agree with another (platform:spoke.region on EKS)
                }
                const issues = stackAwsRegionIssues(c, d["aws:region"]);
                expect(
                    issues.map((i) => i.key),
                    `${f} ${key}`,
                ).toContain(key);
                seen.push(`${f} ${key}`);
            }
        }
        expect(seen.sort()).toEqual([
            "Pulumi.hub-prod.yaml aws:region",
            "Pulumi.spoke-hcm1.yaml platform:gateway.listener.reachable.latencyRegion",
            "Pulumi.spoke-hn1.yaml platform:gateway.listener.reachable.latencyRegion",
            "Pulumi.spoke-sg1.yaml aws:region",
            "Pulumi.spoke-sg1.yaml platform:gateway.listener.tls.route53.region",
        ]);
    });

    it("an on-prem spoke's site name is no AWS region: any name passes", () => {
        const doc = stackConfigDoc("spoke-hn1");
        doc["platform:spoke"].region = "vn-danang-1";
        expect(stackAwsRegionIssues(parseFlatStackConfig(flatConfig(doc), "x"), undefined)).toEqual([]);
    });

    it("an EKS spoke with a typo'd region is refused by its own program, naming the file, both keys and the near regions", async () => {
        await expect(
            runRepoStack("spoke-sg1", { config: flatConfig(moved("spoke-sg1", "ap-southeast-1", "ap-southeast-9")) }),
        ).rejects.toThrow(
            /^stacks\/Pulumi\.spoke-sg1\.yaml: invalid stack configuration\n {2}- platform:cluster\.region: region ap-southeast-9 is not a region the pinned AWS SDK lists in partition aws \(did you mean "ap-southeast-1", "ap-southeast-2" or "ap-southeast-3"\?\); if it is a region newer than the SDK, add it to platform:unlistedAwsRegions \(a list\) in this stack file\n {2}- aws:region: region ap-southeast-9 /m,
        );
    });

    it("a hub with a typo'd aws:region is refused naming the file and key", async () => {
        const doc = { ...stackConfigDoc("hub-prod"), "aws:region": "eu-west-9" };
        await expect(runRepoStack("hub-prod", { config: flatConfig(doc) })).rejects.toThrow(
            /Pulumi\.hub-prod\.yaml: invalid stack configuration\n {2}- aws:region: region eu-west-9 is not a region the pinned AWS SDK lists in partition aws \(did you mean "eu-west-1"/,
        );
    });

    it("the hub's check of its spoke files refuses a typo'd spoke file as that file's error", () => {
        const dir = testTempDir("regions-");
        for (const f of fs.readdirSync(STACKS)) fs.copyFileSync(path.join(STACKS, f), path.join(dir, f));
        const file = path.join(dir, "Pulumi.spoke-sg1.yaml");
        fs.writeFileSync(file, fs.readFileSync(file, "utf8").replaceAll("ap-southeast-1", "ap-sotheast-1"));
        const sg1 = spokeFilesOf(dir, "hub-prod").find((s) => s.stack === "spoke-sg1")!;
        expect(sg1.error?.message).toMatch(
            /Pulumi\.spoke-sg1\.yaml: invalid stack configuration\n {2}- platform:cluster\.region: region ap-sotheast-1 is not a region the pinned AWS SDK lists in partition aws \(did you mean "ap-southeast-1", /,
        );
    });

    it("the way out: a region newer than the SDK, acknowledged in platform:unlistedAwsRegions, renders", async () => {
        const doc = { ...moved("spoke-sg1", "ap-southeast-1", "us-east-9"), "platform:unlistedAwsRegions": ["us-east-9"] };
        const r = await runRepoStack("spoke-sg1", { config: flatConfig(doc), stackOutputs: await hubOutputs() });
        expect(byType(r.resources, "aws:eks/cluster:Cluster")).toHaveLength(1);
        expect(byType(r.resources, "pulumi:providers:aws").map((p) => inputs(p).region)).toContain("us-east-9");
    });

    it("an acknowledgement acknowledges only an unlisted region of partition aws's shape that the file names", () => {
        const doc = { ...moved("spoke-sg1", "ap-southeast-1", "us-east-9") };
        const issues = (list: string[]) =>
            stackAwsRegionIssues(
                parseFlatStackConfig(flatConfig({ ...doc, "platform:unlistedAwsRegions": list }), "x"),
                doc["aws:region"],
            ).map((i) => `${i.key}: ${i.message}`);
        expect(issues(["us-east-9"])).toEqual([]);
        expect(issues(["us-east-9", "us-east-1", "cn-north-9", "us-west-9"])).toEqual([
            "platform:unlistedAwsRegions[1]: the pinned AWS SDK lists us-east-1 in partition aws: remove this entry",
            "platform:unlistedAwsRegions[2]: cn-north-9 is not a region name of partition aws (^(us|eu|ap|sa|ca|me|af|il|mx)-\\w+-\\d+$): only such a region the pinned AWS SDK does not list yet may be acknowledged",
            "platform:unlistedAwsRegions[3]: no AWS region key of this file names us-west-9: remove this entry",
        ]);
    });
});

describe("new-spoke --region", () => {
    it("a typo is refused before anything is written, naming --region and the near regions", async () => {
        const dir = testTempDir("new-spoke-region-");
        for (const f of fs.readdirSync(STACKS)) fs.copyFileSync(path.join(STACKS, f), path.join(dir, f));
        const before = Object.fromEntries(fs.readdirSync(dir).map((f) => [f, fs.readFileSync(path.join(dir, f), "utf8")]));
        const cli = ["-r", ESBUILD_LOADER, "tools/new-spoke.ts", "--from", "spoke-sg1", "--name", "spoke-x1", "--add-to-hub"];
        const err = await run(process.execPath, [...cli, "--region", "us-est-1", "--stacks-dir", dir], { cwd: ROOT }).then(
            () => undefined,
            (e: { code: number; stderr: string }) => e,
        );
        expect(err?.code).toBe(1);
        expect(err?.stderr).toBe(
            'new-spoke: --region us-est-1: region us-est-1 is not a region the pinned AWS SDK lists in partition aws (did you mean "us-east-1", "us-west-1" or "us-east-2"?); if it is a region newer than the SDK, rerun with --unlisted-region (the copy then names it in platform:unlistedAwsRegions)\n',
        );
        const after = Object.fromEntries(fs.readdirSync(dir).map((f) => [f, fs.readFileSync(path.join(dir, f), "utf8")]));
        expect(after).toEqual(before);

        // The way out: --unlisted-region writes the acknowledgement into the copy, which its own check accepts.
        const ok = await run(process.execPath, [...cli, "--region", "us-east-9", "--unlisted-region", "--stacks-dir", dir], { cwd: ROOT });
        expect(ok.stdout).toMatch(/\n {2}platform:unlistedAwsRegions: \(none\) -> \["us-east-9"\]\n/);
        const copy = YAML.parse(fs.readFileSync(path.join(dir, "Pulumi.spoke-x1.yaml"), "utf8")).config;
        expect(copy["platform:unlistedAwsRegions"]).toEqual(["us-east-9"]);
        expect(copy["platform:cluster"].region).toBe("us-east-9");
        expect(stackAwsRegionIssues(parseFlatStackConfig(flatConfig(copy), "x"), copy["aws:region"])).toEqual([]);
        // A copy of that copy into a listed region drops the acknowledgement it no longer needs.
        const again = newSpokeFile({ from: "spoke-x1", name: "spoke-x2", region: "us-east-2", stacksDir: dir });
        expect(YAML.parse(again.text).config["platform:unlistedAwsRegions"]).toBeUndefined();
        expect(again.changes["platform:unlistedAwsRegions"]).toEqual([["us-east-9"], undefined]);
    }, 60_000);

    it("--unlisted-region is refused for a listed region and for an on-prem copy", () => {
        expect(() => newSpokeFile({ from: "spoke-sg1", name: "spoke-x1", region: "us-east-2", unlistedRegion: true })).toThrow(
            /--unlisted-region: the pinned AWS SDK lists us-east-2; drop the flag/,
        );
        expect(() =>
            newSpokeFile({ from: "spoke-hn1", name: "spoke-dn1", region: "vn-danang-1", loadBalancer: "dn1-lb", unlistedRegion: true }),
        ).toThrow(/--unlisted-region is for an EKS copy's AWS region; spoke-hn1 is on-prem/);
        // An on-prem --region is a site name: any name.
        expect(() => newSpokeFile({ from: "spoke-hn1", name: "spoke-dn1", region: "vn-danang-1", loadBalancer: "dn1-lb" })).not.toThrow();
    });
});
