import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import type { ConfigError } from "../config/errors";
import { type HubConfig, parseStackConfig, type SpokeConfig } from "../config/stack";
import { collisionsWithRecorded, findSpokeCollisions, networksOf } from "../lib/spoke-networks";
import { checkAgainstHubRegistry, checkSpokeRegistry, spokeGpuCapacity, SpokeFilesError } from "../programs/spoke-registry";
import { platformKeys, STACKS, stackConfigDoc } from "./helpers";

function spoke(name: string): SpokeConfig {
    const c = parseStackConfig(platformKeys(stackConfigDoc(name)), name);
    if (c.role !== "spoke") throw new Error("not a spoke");
    return c.spoke;
}
function hub(doc = stackConfigDoc("hub-prod")): HubConfig {
    const c = parseStackConfig(platformKeys(doc), "hub-prod");
    if (c.role !== "hub") throw new Error("not a hub");
    return c.hub;
}

describe("networksOf / findSpokeCollisions (pure)", () => {
    it("on-prem: frontend subnet + one entry per rail pool; EKS: the VPC CIDR", () => {
        expect(networksOf(spoke("spoke-hn1"))).toEqual([
            { key: "platform:frontend.subnet", cidr: "10.10.0.0/24" },
            ...Array.from({ length: 8 }, (_, i) => ({
                key: `platform:backend.railSupernet (rail ${i} pool)`,
                cidr: `10.64.${i * 16}.0/20`,
            })),
        ]);
        expect(networksOf(spoke("spoke-sg1"))).toEqual([{ key: "platform:cluster.vpc.cidr", cidr: "10.80.0.0/16" }]);
    });
    it("the repo's spokes do not collide (pod/service CIDRs are cluster-local and may repeat)", () => {
        const all = ["spoke-hn1", "spoke-hcm1", "spoke-sg1"].map((s) => ({
            name: spoke(s).spoke.name,
            stack: s,
            networks: networksOf(spoke(s)),
        }));
        expect(findSpokeCollisions(all)).toEqual([]);
    });
    it("names both stacks and keys for a name, subnet or rail-pool collision", () => {
        const a = {
            name: "hn1",
            stack: "spoke-hn1",
            networks: [
                { key: "platform:frontend.subnet", cidr: "10.10.0.0/24" },
                { key: "platform:backend.railSupernet (rail 0 pool)", cidr: "10.64.0.0/20" },
            ],
        };
        expect(findSpokeCollisions([a, { name: "hn1", stack: "spoke-dn1", networks: [] }])).toEqual([
            { stack: "spoke-dn1", message: 'spoke name "hn1" is already used by stack spoke-hn1' },
        ]);
        expect(
            findSpokeCollisions([
                a,
                { name: "dn1", stack: "spoke-dn1", networks: [{ key: "platform:frontend.subnet", cidr: "10.10.0.128/25" }] },
            ]),
        ).toEqual([
            {
                stack: "spoke-dn1",
                message: "spoke-dn1 platform:frontend.subnet 10.10.0.128/25 overlaps spoke-hn1 platform:frontend.subnet 10.10.0.0/24",
            },
        ]);
        expect(
            findSpokeCollisions([
                a,
                { name: "sg2", stack: "spoke-sg2", networks: [{ key: "platform:cluster.vpc.cidr", cidr: "10.64.0.0/16" }] },
            ]).map((c) => c.message),
        ).toEqual([
            "spoke-sg2 platform:cluster.vpc.cidr 10.64.0.0/16 overlaps spoke-hn1 platform:backend.railSupernet (rail 0 pool) 10.64.0.0/20",
        ]);
    });
    it("spoke-side: only this spoke's collisions with the others the hub recorded", () => {
        const recorded = [
            { name: "hn1", stack: "spoke-hn1", networks: networksOf(spoke("spoke-hn1")) },
            { name: "dn1", stack: "spoke-dn1", networks: [{ key: "platform:frontend.subnet", cidr: "10.99.0.0/24" }] },
        ];
        const mine = { name: "dn1", stack: "spoke-dn1", networks: [{ key: "platform:frontend.subnet", cidr: "10.10.0.0/24" }] };
        expect(collisionsWithRecorded(mine, recorded)).toEqual([
            "spoke-dn1 platform:frontend.subnet 10.10.0.0/24 overlaps spoke-hn1 platform:frontend.subnet 10.10.0.0/24",
        ]);
        expect(() => checkAgainstHubRegistry(spoke("spoke-hcm1"), "spoke-hcm1", recorded, "stacks/Pulumi.spoke-hcm1.yaml")).not.toThrow();
        expect(() =>
            checkAgainstHubRegistry(
                spoke("spoke-hn1"),
                "spoke-dn1",
                [{ name: "x", stack: "spoke-hn1", networks: networksOf(spoke("spoke-hn1")) }],
                "stacks/Pulumi.spoke-dn1.yaml",
            ),
        ).toThrow(
            /stacks\/Pulumi.spoke-dn1.yaml: invalid stack configuration\n {2}- platform:frontend.subnet: spoke-dn1 platform:frontend.subnet 10.10.0.0\/24 overlaps spoke-hn1 platform:frontend.subnet/,
        );
    });
    it("GPU capacity: hosts x GPUs on-prem, desired nodes x GPUs on EKS", () => {
        expect(spokeGpuCapacity(spoke("spoke-hn1"))).toBe(16);
        expect(spokeGpuCapacity(spoke("spoke-sg1"))).toBe(16);
    });
});

describe("hub-side check over the stack files (checkSpokeRegistry)", () => {
    let dir: string;
    beforeEach(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "registry-"));
        fs.mkdirSync(path.join(dir, "stacks"));
        for (const f of fs.readdirSync(STACKS)) fs.copyFileSync(path.join(STACKS, f), path.join(dir, "stacks", f));
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
    const hubFile = () => path.join(dir, "stacks", "Pulumi.hub-prod.yaml");
    const writeSpoke = (name: string, mutate: (d: Record<string, any>) => void, from = "spoke-hn1") => {
        const doc = YAML.parse(fs.readFileSync(path.join(STACKS, `Pulumi.${from}.yaml`), "utf8"));
        // A copy's edge is its own, as npm run new-spoke writes it.
        doc.config["platform:gateway"].listener.hostname = `llm.${name.replace(/^spoke-/, "")}.example.com`;
        delete doc.config["platform:gateway"].listener.reachable;
        mutate(doc.config);
        fs.writeFileSync(path.join(dir, "stacks", `Pulumi.${name}.yaml`), YAML.stringify(doc));
    };
    // Hub issues as `key: message`; a spoke file's own error as `<file> key: message` (SpokeFilesError).
    const issues = (h: HubConfig) => {
        try {
            checkSpokeRegistry(h, hubFile());
            return [];
        } catch (e) {
            const spokes =
                e instanceof SpokeFilesError
                    ? [...e.spokeErrors.values()].flatMap((x) =>
                          (x as ConfigError).issues.map((i) => `${(x as ConfigError).stackFile} ${i.key}: ${i.message}`),
                      )
                    : [];
            // stack files are named relative to the working directory: this copy's folder reads as stacks/ below
            const here = path.relative(process.cwd(), path.join(dir, "stacks"));
            return [...spokes, ...(e as ConfigError).issues.map((i) => `${i.key}: ${i.message}`)].map((x) => x.split(here).join("stacks"));
        }
    };
    const listed = (extra: Record<string, unknown>) => {
        const d = stackConfigDoc("hub-prod");
        d["platform:spokes"].push(extra);
        return hub(d);
    };

    it("accepts the repo's stacks and records every listed spoke's networks", () => {
        const reg = checkSpokeRegistry(hub(), hubFile());
        expect(reg.map((r) => [r.name, r.stack, r.networks.length])).toEqual([
            ["hn1", "spoke-hn1", 9],
            ["hcm1", "spoke-hcm1", 9],
            ["sg1", "spoke-sg1", 1],
        ]);
    });
    it("rejects a new spoke whose frontend subnet collides, even before the hub lists it", () => {
        writeSpoke("spoke-dn1", (c) => {
            c["platform:spoke"].name = "dn1";
            c["platform:backend"].railSupernet = "10.65.0.0/16";
        });
        // The new file is what is wrong: its own error, headed by it and naming its key.
        expect(issues(hub())).toEqual([
            "stacks/Pulumi.spoke-dn1.yaml platform:frontend.subnet: spoke-dn1 platform:frontend.subnet 10.10.0.0/24 overlaps spoke-hn1 platform:frontend.subnet 10.10.0.0/24",
        ]);
    });
    it("rejects colliding rail IP pools and a duplicate spoke name", () => {
        writeSpoke("spoke-dn1", (c) => {
            c["platform:spoke"].name = "hn1";
            c["platform:frontend"].subnet = "10.12.0.0/24";
            c["platform:backend"].railSupernet = "10.64.64.0/19";
            c["platform:backend"].railPrefixLength = 22;
        });
        const got = issues(listed({ name: "dn1", stack: "spoke-dn1", region: "vn-hanoi-1", provider: "onprem", gpus: 16 }));
        expect(got).toContain('platform:spokes[3].name: stacks/Pulumi.spoke-dn1.yaml says platform:spoke.name "hn1", not "dn1"');
        expect(got).toContain('stacks/Pulumi.spoke-dn1.yaml platform:spoke.name: spoke name "hn1" is already used by stack spoke-hn1');
        expect(got).toContain(
            "stacks/Pulumi.spoke-dn1.yaml platform:backend.railSupernet: spoke-dn1 platform:backend.railSupernet (rail 0 pool) 10.64.64.0/22 overlaps spoke-hn1 platform:backend.railSupernet (rail 4 pool) 10.64.64.0/20",
        );
    });
    it("rejects a spoke on another spoke's listener hostname or public address, naming both files and the key", () => {
        writeSpoke("spoke-dn1", (c) => {
            c["platform:spoke"].name = "dn1";
            c["platform:frontend"].subnet = "10.12.0.0/24";
            c["platform:backend"].railSupernet = "10.65.0.0/16";
            c["platform:gateway"].listener.hostname = "llm.hn1.example.com";
            c["platform:gateway"].listener.reachable = stackConfigDoc("spoke-hcm1")["platform:gateway"].listener.reachable;
        });
        const got = issues(hub());
        expect(got).toEqual([
            expect.stringMatching(
                /^stacks\/Pulumi.spoke-dn1.yaml platform:gateway.listener.hostname: stacks\/Pulumi.spoke-dn1.yaml platform:gateway.listener.hostname llm.hn1.example.com is also stacks\/Pulumi.spoke-hn1.yaml's/,
            ),
            expect.stringMatching(
                /^stacks\/Pulumi.spoke-dn1.yaml platform:gateway.listener.reachable.address: stacks\/Pulumi.spoke-dn1.yaml platform:gateway.listener.reachable.address 203.0.113.74 is also stacks\/Pulumi.spoke-hcm1.yaml's/,
            ),
        ]);
    });
    it("rejects an EKS VPC overlapping an on-prem spoke's networks", () => {
        writeSpoke(
            "spoke-sg2",
            (c) => {
                c["platform:spoke"].name = "sg2";
                c["platform:cluster"].vpc.cidr = "10.64.0.0/16";
                // sg1 lists its subnets; the copy derives them from the new VPC range, as new-spoke writes them.
                delete c["platform:cluster"].vpc.subnets;
            },
            "spoke-sg1",
        );
        expect(issues(hub()).join("\n")).toMatch(
            /^stacks\/Pulumi.spoke-sg2.yaml platform:cluster.vpc.cidr: spoke-sg2 platform:cluster.vpc.cidr 10.64.0.0\/16 overlaps spoke-hn1 platform:frontend.subnet|spoke-sg2 platform:cluster.vpc.cidr 10.64.0.0\/16 overlaps spoke-hn1 platform:backend.railSupernet \(rail 0 pool\)/,
        );
    });
    it("refuses a copied EKS spoke in another partition (cn-north-1, us-gov-west-1): its file's error naming the region keys", () => {
        for (const [region, partition] of [
            ["cn-north-1", "aws-cn"],
            ["us-gov-west-1", "aws-us-gov"],
        ]) {
            writeSpoke(
                "spoke-x1",
                (c) => {
                    // As npm run new-spoke --region would: every per-region value of sg1 in the other region.
                    const moved = JSON.parse(JSON.stringify(c).replaceAll("ap-southeast-1", region));
                    for (const k of Object.keys(c)) c[k] = moved[k];
                    c["platform:spoke"].name = "x1";
                    c["platform:cluster"].vpc.cidr = "10.90.0.0/16";
                    delete c["platform:cluster"].vpc.subnets;
                },
                "spoke-sg1",
            );
            const notAws = `region ${region} is not a region of partition aws \\(the AWS SDK lists it in partition ${partition}\\); `;
            const refusal = `${notAws}an EKS spoke's IAM policies and EKS access entries name ARNs of partition aws \\(arn:aws:\\) and it trusts the hub`;
            // The listener's Route 53 region moved too (lib/aws-partition.ts stackAwsRegionIssues checks every AWS region key).
            expect(issues(hub()), region).toEqual([
                expect.stringMatching(new RegExp(`^stacks/Pulumi\\.spoke-x1\\.yaml platform:cluster\\.region: ${refusal}`)),
                expect.stringMatching(new RegExp(`^stacks/Pulumi\\.spoke-x1\\.yaml aws:region: ${refusal}`)),
                expect.stringMatching(
                    new RegExp(`^stacks/Pulumi\\.spoke-x1\\.yaml platform:gateway\\.listener\\.tls\\.route53\\.region: ${notAws}Route 53`),
                ),
            ]);
        }
        // The same copy in a region of partition aws is accepted (the refusal is the partition, nothing else).
        writeSpoke(
            "spoke-x1",
            (c) => {
                const moved = JSON.parse(JSON.stringify(c).replaceAll("ap-southeast-1", "eu-west-1"));
                for (const k of Object.keys(c)) c[k] = moved[k];
                c["platform:spoke"].name = "x1";
                c["platform:cluster"].vpc.cidr = "10.90.0.0/16";
                delete c["platform:cluster"].vpc.subnets;
            },
            "spoke-sg1",
        );
        expect(issues(hub())).toEqual([]);
    });
    it("rejects a listed spoke with no file, or whose provider, region or GPUs disagree with the hub entry", () => {
        expect(issues(listed({ name: "dn1", stack: "spoke-dn1", region: "vn-danang-1", provider: "onprem", gpus: 16 }))).toEqual([
            'platform:spokes[3].stack: no stack file stacks/Pulumi.spoke-dn1.yaml for spoke "dn1" (create it: npm run new-spoke)',
        ]);
        const d = stackConfigDoc("hub-prod");
        d["platform:spokes"][2] = { ...d["platform:spokes"][2], provider: "onprem", region: "ap-southeast-2", gpus: 24 };
        expect(issues(hub(d))).toEqual([
            "platform:spokes[2].provider: stacks/Pulumi.spoke-sg1.yaml is provider eks, not onprem",
            'platform:spokes[2].region: stacks/Pulumi.spoke-sg1.yaml says region "ap-southeast-1", not "ap-southeast-2"',
            "platform:spokes[2].gpus: stacks/Pulumi.spoke-sg1.yaml provides 16 GPUs, fewer than the 24 the hub places against",
        ]);
    });
});
