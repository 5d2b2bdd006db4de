import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { presetProfiles } from "../config/nodeProfile";
import { namespaceConfig, parseStackConfig } from "../config/stack";
import { platformKeys, stackConfigDoc } from "./helpers";

function parse(doc: Record<string, any>, file = "stacks/Pulumi.test.yaml") {
    return parseStackConfig(platformKeys(doc), file);
}

/** Parses a mutated copy of a repo stack file and returns the ConfigError it must raise. */
function rejection(stack: string, mutate: (doc: Record<string, any>) => void): ConfigError {
    const doc = structuredClone(stackConfigDoc(stack));
    mutate(doc);
    try {
        parse(doc, `stacks/Pulumi.${stack}.yaml`);
    } catch (e) {
        if (e instanceof ConfigError) return e;
        throw e;
    }
    throw new Error("expected a ConfigError");
}

describe("the repo's stack files", () => {
    it.each(["hub-prod", "spoke-hn1", "spoke-hcm1"])("%s parses", (s) => {
        const cfg = parse(stackConfigDoc(s));
        expect(cfg.role).toBe(s.startsWith("hub") ? "hub" : "spoke");
    });

    it("resolves rail IP pools from the supernet: rail i -> i-th /20", () => {
        const cfg = parse(stackConfigDoc("spoke-hn1"));
        if (cfg.role !== "spoke") throw new Error("not a spoke");
        expect(cfg.spoke.railPools.map((p) => p.subnet)).toEqual([
            "10.64.0.0/20",
            "10.64.16.0/20",
            "10.64.32.0/20",
            "10.64.48.0/20",
            "10.64.64.0/20",
            "10.64.80.0/20",
            "10.64.96.0/20",
            "10.64.112.0/20",
        ]);
        expect(cfg.spoke.nodePools[0].profile.rails[1].hca).toBe("mlx5_3");
    });

    it("reads the flat Pulumi config map shape", () => {
        expect(namespaceConfig({ "platform:role": "spoke", "platform:nodePools": '[{"a":1}]', "aws:region": "x" })).toEqual({
            role: "spoke",
            nodePools: [{ a: 1 }],
        });
    });
});

describe("bad stack files are rejected naming the file and the key", () => {
    const cases: Array<[string, string, (d: Record<string, any>) => void, string, RegExp]> = [
        [
            "missing role",
            "spoke-hn1",
            (d) => {
                delete d["platform:role"];
            },
            "platform:role",
            /missing; set it to hub or spoke/,
        ],
        [
            "missing key",
            "spoke-hn1",
            (d) => {
                delete d["platform:backend"];
            },
            "platform:backend",
            /required \(a map; fabric: one of "infiniband", "efa"\)/,
        ],
        [
            "wrong type",
            "spoke-hn1",
            (d) => {
                d["platform:nodePools"][0].nodes = "hn1-gpu-01";
            },
            "platform:nodePools[0].nodes",
            /expected array/i,
        ],
        [
            "typo in a key",
            "spoke-hn1",
            (d) => {
                d["platform:nodepools"] = d["platform:nodePools"];
            },
            "platform:nodepools",
            /unknown key; did you mean "nodePools"\?/,
        ],
        [
            "typo in a nested key",
            "spoke-hn1",
            (d) => {
                d["platform:cluster"].kubeconfigContxt = "x";
            },
            "platform:cluster.kubeconfigContxt",
            /unknown key/,
        ],
        [
            "7 rails for 8 GPUs",
            "spoke-hn1",
            (d) => {
                const p = structuredClone(presetProfiles().get("dgx-h200")) as any;
                p.rails.pop();
                d["platform:nodePools"][0].profile = p;
            },
            "platform:nodePools[0].profile.rails",
            /7 rails for 8 GPUs/,
        ],
        [
            "two rails on one HCA",
            "spoke-hn1",
            (d) => {
                const p = structuredClone(presetProfiles().get("dgx-h200")) as any;
                p.rails[5].hca = "mlx5_6";
                d["platform:nodePools"][0].profile = p;
            },
            "platform:nodePools[0].profile.rails[5].hca",
            /already used by rails\[4\]/,
        ],
        [
            "unknown node profile",
            "spoke-hn1",
            (d) => {
                d["platform:nodePools"][0].profile = "hgx-b300";
            },
            "platform:nodePools[0].profile",
            /unknown node profile "hgx-b300" \(known: cisco-ucsc-885a-m8-h22, dgx-h200\)/,
        ],
        [
            "overlapping subnets",
            "spoke-hn1",
            (d) => {
                d["platform:frontend"].subnet = "10.244.7.0/24";
            },
            "platform:frontend.subnet",
            /overlaps platform:cluster.podCidr/,
        ],
        [
            "rail supernet overlapping the service CIDR",
            "spoke-hn1",
            (d) => {
                d["platform:backend"].railSupernet = "10.96.0.0/16";
            },
            "platform:backend.railSupernet",
            /overlaps platform:cluster.serviceCidr/,
        ],
        [
            "CIDR with host bits",
            "spoke-hn1",
            (d) => {
                d["platform:frontend"].subnet = "10.10.0.1/24";
            },
            "platform:frontend.subnet",
            /IPv4 CIDR with no host bits/,
        ],
        [
            "same node in two pools",
            "spoke-hn1",
            (d) => {
                d["platform:nodePools"].push({ ...d["platform:nodePools"][0], name: "h200-b" });
            },
            "platform:nodePools[1].nodes[0]",
            /already in pool "h200"/,
        ],
        [
            "rail slower than the fabric minimum",
            "spoke-hn1",
            (d) => {
                d["platform:backend"].minLinkRateGbps = 800;
            },
            "platform:nodePools[0].profile.rails[0].linkRateGbps",
            /400 Gb\/s is below platform:backend.minLinkRateGbps \(800 Gb\/s\)/,
        ],
        [
            "placement on a spoke the hub does not know",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][0].spoke = "dn1";
            },
            "platform:endpoints[0].spoke",
            /unknown spoke "dn1" \(known: hn1, hcm1, sg1\)/,
        ],
        [
            "key allowed a model that does not exist",
            "hub-prod",
            (d) => {
                d["platform:apiKeys"][1].models = ["gpt-5"];
            },
            "platform:apiKeys[1].models[0]",
            /unknown model "gpt-5"/,
        ],
        [
            "key for a team its tenant lacks",
            "hub-prod",
            (d) => {
                d["platform:apiKeys"][0].team = "research";
            },
            "platform:apiKeys[0].team",
            /tenant "acme" has no team "research"/,
        ],
        [
            "spoke overcommitted with GPUs",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][0].topology.decode.replicas = 4;
            },
            "platform:endpoints",
            /spoke "hn1" has 16 GPUs but its endpoints need 24/,
        ],
        [
            "planner thresholds inverted",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][0].planner.decodeScaleDownKvRate = 90;
            },
            "platform:endpoints[0].planner.decodeScaleDownKvRate",
            /must be below decodeScaleUpKvRate/,
        ],
    ];

    it.each(cases)("%s", (_title, stack, mutate, key, message) => {
        const err = rejection(stack, mutate);
        expect(err.message.startsWith(`stacks/Pulumi.${stack}.yaml: invalid stack configuration`)).toBe(true);
        const hit = err.issues.find((i) => i.key.startsWith(key) && message.test(`${i.key} ${i.message}`));
        expect(hit, `issues were:\n${err.message}`).toBeDefined();
    });
});
