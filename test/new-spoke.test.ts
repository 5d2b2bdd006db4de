import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { vpcSubnetPlan } from "../lib/eks";
import { findSpokeCollisions, networksOf } from "../lib/spoke-networks";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { addToHub, copiedArnWarnings, newSpokeFile, pickFreeBlock } from "../tools/new-spoke";
import { parseStackConfig } from "../config/stack";
import { parseCidr } from "../config/cidr";
import { platformKeys, ROOT, STACKS } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

const run = promisify(execFile);

/** Every leaf of a YAML document as `path -> value`. */
function leaves(v: unknown, p = "", out: Record<string, unknown> = {}): Record<string, unknown> {
    if (Array.isArray(v)) v.forEach((x, i) => leaves(x, `${p}[${i}]`, out));
    else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) leaves(x, p ? `${p}.${k}` : k, out);
    else out[p] = v;
    return out;
}
function changedLeaves(a: string, b: string): string[] {
    const x = leaves(YAML.parse(a));
    const y = leaves(YAML.parse(b));
    return [...new Set([...Object.keys(x), ...Object.keys(y)])].filter((k) => x[k] !== y[k]).sort();
}
/** Lines of the body (after the leading comment block) that differ, pairwise. */
function changedLines(a: string, b: string): string[] {
    const body = (t: string) => t.split("\n").slice(t.split("\n").findIndex((l) => l !== "" && !l.startsWith("#")));
    const [x, y] = [body(a), body(b)];
    expect(y).toHaveLength(x.length);
    return y.filter((l, i) => l !== x[i]);
}
const src = (s: string) => fs.readFileSync(path.join(STACKS, `Pulumi.${s}.yaml`), "utf8");
/** The stack file text without `platform:gateway.listener.reachable` and the comment lines right above it. */
function withoutReachable(t: string): string {
    const lines = t.split("\n");
    const at = lines.findIndex((l) => /^ {6}reachable:/.test(l));
    let start = at;
    while (/^\s*#/.test(lines[start - 1])) start--;
    let end = at + 1;
    while (end < lines.length && /^ {7,}/.test(lines[end])) end++;
    return [...lines.slice(0, start), ...lines.slice(end)].join("\n");
}

describe("new-spoke: the copy differs from its source only in the keys that must differ", () => {
    it("on-prem (spoke-hn1 -> spoke-dn1)", () => {
        const r = newSpokeFile({ from: "spoke-hn1", name: "spoke-dn1", region: "vn-danang-1", loadBalancer: "dn1-edge-vip-443" });
        // The source's reachable edge (its public address and CA) is dropped, comment lines above it included.
        const source = withoutReachable(src("spoke-hn1"));
        expect(YAML.parse(r.text).config["platform:gateway"].listener.reachable).toBeUndefined();
        expect(changedLeaves(source, r.text)).toEqual([
            "config.platform:backend.railSupernet",
            "config.platform:cluster.kubeconfigContext",
            "config.platform:frontend.subnet",
            "config.platform:gateway.listener.hostname",
            "config.platform:gateway.listener.tls.loadBalancer",
            "config.platform:nodePools[0].nodes[0]",
            "config.platform:nodePools[0].nodes[1]",
            "config.platform:spoke.name",
            "config.platform:spoke.region",
        ]);
        // Every other line, comments included, is byte-identical; changed lines keep their "per region" comment.
        const lines = changedLines(source, r.text);
        expect(lines).toHaveLength(8);
        expect(lines).toContain("    region: vn-danang-1                         # per region");
        expect(lines).toContain("      hostname: llm.dn1.example.com             # per region (sample documentation domain)");
        expect(lines.every((l) => /# per region/.test(l))).toBe(true);
        expect(r.changes["platform:nodePools[0].nodes"]).toEqual([
            ["hn1-gpu-01", "hn1-gpu-02"],
            ["dn1-gpu-01", "dn1-gpu-02"],
        ]);
        expect(r.hubEntry).toEqual({ name: "dn1", stack: "spoke-dn1", region: "vn-danang-1", provider: "onprem", gpus: 16 });
        expect(r.notes.join("\n")).toMatch(/platform:gateway.listener.reachable .* was dropped/);
        expect(r.notes.join("\n")).toMatch(/platform:spokeIdentities\.dn1/);
    });

    it("the tenant edge is this region's: --hostname is taken, a copied loadBalancer is refused without --load-balancer", () => {
        expect(() => newSpokeFile({ from: "spoke-hn1", name: "spoke-dn1", region: "vn-danang-1" })).toThrow(
            /spoke-hn1 platform:gateway.listener.tls.loadBalancer is hn1-edge-f5-vip-443.*--load-balancer/,
        );
        const r = newSpokeFile({ from: "spoke-hcm1", name: "spoke-dn2", region: "vn-danang-2", hostname: "api.dn2.example.net" });
        const listener = YAML.parse(r.text).config["platform:gateway"].listener;
        expect(listener.hostname).toBe("api.dn2.example.net");
        expect(listener.tls).toEqual({ source: "private-ca", caSecretName: "site-ca" });
        expect(listener.reachable).toBeUndefined();
        const sg = YAML.parse(newSpokeFile({ from: "spoke-sg1", name: "spoke-sg2", region: "ap-northeast-1" }).text);
        expect(sg.config["platform:gateway"].listener.hostname).toBe("llm.sg2.example.com");
    });

    it("EKS (spoke-sg1 -> spoke-sg2): region, VPC CIDR and AZs", () => {
        const r = newSpokeFile({ from: "spoke-sg1", name: "spoke-sg2", region: "ap-northeast-1" });
        expect(changedLeaves(src("spoke-sg1"), r.text)).toEqual([
            "config.aws:region",
            "config.platform:cluster.region",
            "config.platform:cluster.vpc.availabilityZones[0]",
            "config.platform:cluster.vpc.availabilityZones[1]",
            "config.platform:cluster.vpc.cidr",
            // Each AZ's subnets by name: the new AZ names with the CIDRs derived from the new VPC CIDR.
            ...["ap-northeast-1a", "ap-northeast-1b", "ap-southeast-1a", "ap-southeast-1b"].flatMap((az) => [
                `config.platform:cluster.vpc.subnets.${az}.private`,
                `config.platform:cluster.vpc.subnets.${az}.public`,
            ]),
            "config.platform:gateway.listener.hostname",
            "config.platform:nodeGroups.gpu[0].availabilityZone",
            "config.platform:spoke.name",
            "config.platform:spoke.region",
        ]);
        expect(changedLines(src("spoke-sg1"), r.text)).toHaveLength(10);
        const vpc = YAML.parse(r.text).config["platform:cluster"].vpc;
        expect(vpc.availabilityZones).toEqual(["ap-northeast-1a", "ap-northeast-1b"]);
        expect(Object.keys(vpc.subnets)).toEqual(["ap-northeast-1a", "ap-northeast-1b"]);
        expect(vpcSubnetPlan(vpc.cidr, vpc.availabilityZones, vpc.subnets)).toEqual(vpcSubnetPlan(vpc.cidr, vpc.availabilityZones));
        expect(r.hubEntry).toMatchObject({ name: "sg2", provider: "eks", gpus: 16 });
        // what it cannot derive, said: the instance offering in those AZs, the source's access ranges, CI's environment
        expect(r.notes).toEqual([
            // the source's account-specific ARNs, copied verbatim, each named by its key
            expect.stringMatching(
                /^warning: platform:cluster\.access\.deployRoleArn was copied verbatim from spoke-sg1 \(arn:aws:iam::111122223333:role\/platform-ci-deploy, account 111122223333\): .*remove it for the spoke's first up by hand/,
            ),
            expect.stringMatching(
                /^warning: platform:cluster\.access\.previewRoleArn was copied verbatim from spoke-sg1 .*CI preview role/,
            ),
            expect.stringContaining(
                "--region ap-northeast-1 --location-type availability-zone --filters Name=instance-type,Values=p5en.48xlarge",
            ),
            expect.stringContaining("publicAccessCidrs and the listener's sourceRanges are spoke-sg1's"),
            expect.stringContaining("create the GitHub environment preview-spoke-sg2"),
        ]);
    });

    it("warns about every ARN the copy keeps verbatim, naming its key; none for a rewritten one or a source without", () => {
        const config = {
            "platform:cluster": { access: { deployRoleArn: "arn:aws:iam::444455556666:role/ci-deploy" } },
            "platform:x": { topics: ["arn:aws:sns:ap-southeast-1:444455556666:t"], name: "not-an-arn" },
            "platform:y": "arn:aws:s3:::rewritten",
        };
        const w = copiedArnWarnings(config, { "platform:y": ["arn:aws:s3:::old", "arn:aws:s3:::rewritten"] }, "spoke-a1");
        expect(w).toHaveLength(2);
        expect(w[0]).toMatch(/^warning: platform:cluster\.access\.deployRoleArn was copied verbatim from spoke-a1 .*account 444455556666/);
        expect(w[1]).toMatch(/^warning: platform:x\.topics\[0\] was copied verbatim .*set it to this spoke's own resource/);
        // an on-prem source names no ARN: no warning
        const dn1 = newSpokeFile({ from: "spoke-hn1", name: "spoke-dn1", region: "vn-danang-1", loadBalancer: "dn1-edge-vip-443" });
        expect(dn1.notes.filter((n) => n.startsWith("warning:"))).toEqual([]);
    });

    it("picked networks collide with no existing spoke", () => {
        for (const [from, name, region] of [
            ["spoke-hn1", "spoke-dn1", "vn-danang-1"],
            ["spoke-sg1", "spoke-sg2", "ap-northeast-1"],
        ]) {
            const r = newSpokeFile({ from, name, region, loadBalancer: "dn1-edge-vip-443" });
            const cfg = parseStackConfig(platformKeys(YAML.parse(r.text).config), name);
            if (cfg.role !== "spoke") throw new Error("not a spoke");
            const all = ["spoke-hn1", "spoke-hcm1", "spoke-sg1"].map((s) => {
                const c = parseStackConfig(platformKeys(YAML.parse(src(s)).config), s);
                return {
                    name: c.role === "spoke" ? c.spoke.spoke.name : s,
                    stack: s,
                    networks: c.role === "spoke" ? networksOf(c.spoke) : [],
                };
            });
            expect(findSpokeCollisions([...all, { name: cfg.spoke.spoke.name, stack: name, networks: networksOf(cfg.spoke) }])).toEqual([]);
        }
    });

    it("pickFreeBlock steps over used blocks and wraps inside 10.0.0.0/8", () => {
        expect(
            pickFreeBlock("10.64.0.0/16", [
                ["a", parseCidr("10.64.0.0/16")],
                ["b", parseCidr("10.65.0.0/17")],
            ]),
        ).toBe("10.66.0.0/16");
        expect(pickFreeBlock("10.255.0.0/16", [["a", parseCidr("10.255.0.0/16")]])).toBe("10.0.0.0/16");
    });

    it("refuses a given network that collides, a source host it cannot rename, and reserved capacity without a new reservation", () => {
        expect(() =>
            newSpokeFile({
                from: "spoke-hn1",
                name: "spoke-dn1",
                region: "vn-danang-1",
                frontendSubnet: "10.10.0.0/24",
                loadBalancer: "dn1-lb",
            }),
        ).toThrow(/platform:frontend.subnet 10.10.0.0\/24 overlaps spoke-hn1 platform:frontend.subnet/);
        expect(() =>
            newSpokeFile({
                from: "spoke-hn1",
                name: "spoke-dn1",
                region: "vn-danang-1",
                nodes: [["dn1-a"]],
                spokeName: "x",
                loadBalancer: "x-lb",
            }),
        ).not.toThrow();
        expect(() => newSpokeFile({ from: "spoke-hn1", name: "spoke-hn1", region: "x" })).toThrow(/already exists/);
        // An EKS copy into another partition is refused before anything is written (lib/aws-partition.ts).
        for (const region of ["cn-north-1", "us-gov-west-1"])
            expect(() => newSpokeFile({ from: "spoke-sg1", name: "spoke-x1", region })).toThrow(
                new RegExp(
                    `--region ${region}: region ${region} is not a region of partition aws .*put the spoke in a region of partition aws`,
                ),
            );
    });
});

describe("new-spoke end to end: the new spoke renders with zero violations once the hub lists it", () => {
    let tmp: string;
    beforeAll(() => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "new-spoke-"));
        fs.mkdirSync(path.join(tmp, "stacks"));
        for (const f of fs.readdirSync(STACKS)) fs.copyFileSync(path.join(STACKS, f), path.join(tmp, "stacks", f));
    });
    afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

    it("spoke-dn1 (on-prem) and spoke-sg2 (EKS, Capacity Block) render with every other stack", async () => {
        const dir = path.join(tmp, "stacks");
        // A Capacity Block source needs this region's reservation.
        const sg1 = YAML.parseDocument(fs.readFileSync(path.join(dir, "Pulumi.spoke-sg1.yaml"), "utf8"));
        sg1.setIn(
            ["config", "platform:nodeGroups", "gpu", 0, "capacity"],
            sg1.createNode({ type: "capacity-block", reservationId: "cr-0aaaaaaaaaaaaaaaa" }),
        );
        fs.writeFileSync(path.join(dir, "Pulumi.spoke-sg1.yaml"), sg1.toString());
        expect(() => newSpokeFile({ from: "spoke-sg1", name: "spoke-sg2", region: "us-east-2", stacksDir: dir })).toThrow(
            /--capacity-reservation/,
        );

        const hubBefore = fs.readFileSync(path.join(dir, "Pulumi.hub-prod.yaml"), "utf8");
        for (const o of [
            { from: "spoke-hn1", name: "spoke-dn1", region: "vn-danang-1", loadBalancer: "dn1-edge-vip-443", stacksDir: dir },
            { from: "spoke-sg1", name: "spoke-sg2", region: "us-east-2", capacityReservation: "cr-0bbbbbbbbbbbbbbbb", stacksDir: dir },
        ]) {
            const r = newSpokeFile(o);
            fs.writeFileSync(r.file, r.text);
            addToHub(dir, r.hubStack, r.hubEntry);
        }
        const hubSpokes = YAML.parse(fs.readFileSync(path.join(dir, "Pulumi.hub-prod.yaml"), "utf8")).config["platform:spokes"];
        expect(hubSpokes.map((s: { name: string }) => s.name)).toEqual(["hn1", "hcm1", "sg1", "dn1", "sg2"]);
        // --add-to-hub inserts exactly two lines after the last spoke entry; nothing else in the hub file moves.
        const before = hubBefore.split("\n");
        const after = fs.readFileSync(path.join(dir, "Pulumi.hub-prod.yaml"), "utf8").split("\n");
        const at = before.findIndex((l) => l.includes("name: sg1,"));
        expect(after).toEqual([
            ...before.slice(0, at + 1),
            "    - { name: dn1, stack: spoke-dn1, region: vn-danang-1, provider: onprem, gpus: 16 }",
            "    - { name: sg2, stack: spoke-sg2, region: us-east-2, provider: eks, gpus: 16 }",
            ...before.slice(at + 1),
        ]);

        // README "Add a region", step 1: an on-prem spoke's identity in the hub file (the hub refuses one without).
        const hubFile = path.join(dir, "Pulumi.hub-prod.yaml");
        const hubDoc = YAML.parseDocument(fs.readFileSync(hubFile, "utf8"));
        hubDoc.setIn(
            ["config", "platform:spokeIdentities", "dn1"],
            hubDoc.createNode({
                mode: "access-key",
                deployerRoleArn: "arn:aws:iam::111122223333:role/platform-spoke-deployer-dn1",
                keys: [{ id: "2026-12", createdAt: "2026-12-01" }],
                egressCidrs: ["198.51.100.128/28"],
            }),
        );
        fs.writeFileSync(hubFile, hubDoc.toString());

        // The real CLI on the temp files (the hub reads its spoke files next to it), as a user runs it.
        const files = fs.readdirSync(dir).map((f) => path.join(dir, f));
        const out = path.join(tmp, "out");
        const r = await run(
            process.execPath,
            ["-r", ESBUILD_LOADER, "tools/render.ts", "--out", out, ...files.flatMap((f) => ["--config", f])],
            { cwd: ROOT },
        );
        expect(r.stdout).toMatch(/rendered 6\/6 stack\(s\)/);
        for (const s of ["hub-prod", "spoke-dn1", "spoke-hcm1", "spoke-hn1", "spoke-sg1", "spoke-sg2"]) {
            expect(JSON.parse(fs.readFileSync(path.join(out, s, "policy.json"), "utf8")).mandatory, s).toEqual([]);
        }
        const resources = (s: string) =>
            JSON.parse(fs.readFileSync(path.join(out, s, "resources.json"), "utf8")) as Array<{ type: string; inputs: any }>;
        expect(
            resources("spoke-dn1")
                .filter((x) => x.type === "kubernetes:core/v1:NodePatch")
                .map((x) => x.inputs.metadata.name)
                .sort(),
        ).toEqual(["dn1-gpu-01", "dn1-gpu-02"]);
        expect(resources("spoke-sg2").find((x) => x.type === "pulumi:providers:aws")!.inputs.region).toBe("us-east-2");
        expect(
            JSON.parse(fs.readFileSync(path.join(out, "hub-prod", "outputs.json"), "utf8")).outputs.spokeNetworks.map(
                (n: { name: string }) => n.name,
            ),
        ).toEqual(["hn1", "hcm1", "sg1", "dn1", "sg2"]);
    }, 120_000);
});
