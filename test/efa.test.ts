import { describe, expect, it } from "vitest";
import { presetProfiles } from "../config/nodeProfile";
import {
    base64,
    checkInstanceTypeForEfa,
    efaDeviceCount,
    efaDevicePluginValues,
    efaHugepagesMiB,
    efaNetworkInterfaces,
    efaWorkerHugepages,
    missingFromEfaAllowlist,
    nodeBootstrapUserData,
    USER_DATA_BOUNDARY,
} from "../lib/efa";
import { eksKubeconfig, vpcSubnetPlan } from "../lib/eks";
import { INSTANCE_TYPES } from "../tools/mock-outputs";

// Published network-card counts: p5en.48xlarge 16 x 200 Gb/s (EFAv3),
// p5e.48xlarge 32 x 100 Gb/s (EFAv2); both 3,200 Gb/s per node.
const PUBLISHED = { "p5en.48xlarge": { cards: 16, gbps: 200 }, "p5e.48xlarge": { cards: 32, gbps: 100 } } as const;

describe("efaNetworkInterfaces", () => {
    for (const [type, { cards }] of Object.entries(PUBLISHED)) {
        it(`${type}: card 0 = ENA primary + EFA-only, cards 1..${cards - 1} EFA-only, ${cards} EFA devices`, () => {
            const nis = efaNetworkInterfaces(cards, ["sg-cluster", "sg-efa"]);
            expect(nis).toHaveLength(cards + 1);
            expect(nis[0]).toMatchObject({ networkCardIndex: 0, deviceIndex: 0, interfaceType: "interface" });
            expect(nis[1]).toMatchObject({ networkCardIndex: 0, deviceIndex: 1, interfaceType: "efa-only" });
            expect(nis.slice(2).map((n) => [n.networkCardIndex, n.deviceIndex, n.interfaceType])).toEqual(
                Array.from({ length: cards - 1 }, (_, i) => [i + 1, 0, "efa-only"]),
            );
            expect(efaDeviceCount(nis)).toBe(cards);
            expect(nis.filter((n) => n.interfaceType === "interface")).toHaveLength(1);
            expect(nis.every((n) => n.deleteOnTermination === "true" && n.securityGroups.join() === "sg-cluster,sg-efa")).toBe(true);
            expect(nis.some((n) => "subnetId" in n)).toBe(false);
        });
    }

    it("3,200 Gb/s per node for both types (cards x per-card rate)", () => {
        for (const { cards, gbps } of Object.values(PUBLISHED))
            expect(efaDeviceCount(efaNetworkInterfaces(cards, ["sg"])) * gbps).toBe(3200);
    });

    it("rejects a non-positive card count and a missing security group", () => {
        expect(() => efaNetworkInterfaces(0, ["sg"])).toThrow(/positive integer/);
        expect(() => efaNetworkInterfaces(16, [])).toThrow(/security group/);
    });
});

describe("node profiles and the instance-type data agree with the published counts", () => {
    for (const [type, { cards, gbps }] of Object.entries(PUBLISHED)) {
        it(type, () => {
            const p = presetProfiles().get(type.replace(".", "-")) as any;
            expect(p.efa).toEqual({ instanceType: type, networkCards: cards, cardRateGbps: gbps, devicesPerGpu: cards / 8 });
            expect(p.gpu).toMatchObject({ product: "NVIDIA-H200", count: 8, memoryGB: 141 });
            expect(INSTANCE_TYPES[type]).toMatchObject({ maximumNetworkCards: cards, efaSupported: true });
        });
    }
});

describe("checkInstanceTypeForEfa", () => {
    it("accepts the live description when it matches the profile", () => {
        expect(() =>
            checkInstanceTypeForEfa(
                { instanceType: "p5en.48xlarge", maximumNetworkCards: 16, efaSupported: true, efaMaximumInterfaces: 16 },
                16,
            ),
        ).not.toThrow();
    });
    it("refuses a card-count mismatch and a type without EFA", () => {
        expect(() => checkInstanceTypeForEfa({ instanceType: "p5e.48xlarge", maximumNetworkCards: 32, efaSupported: true }, 16)).toThrow(
            /32 network cards but its node profile says 16/,
        );
        expect(() => checkInstanceTypeForEfa({ instanceType: "m7i.4xlarge", maximumNetworkCards: 1, efaSupported: false }, 1)).toThrow(
            /does not support EFA/,
        );
    });
});

describe("nodeBootstrapUserData", () => {
    const ud = nodeBootstrapUserData({ hugepages2Mi: 5128, localStorageRaid0: true });
    it("is a MIME multi-part document with a nodeadm NodeConfig part and a shell part", () => {
        expect(ud.startsWith(`MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="${USER_DATA_BOUNDARY}"`)).toBe(true);
        expect(ud.split(`--${USER_DATA_BOUNDARY}\n`)).toHaveLength(3);
        expect(ud.trimEnd().endsWith(`--${USER_DATA_BOUNDARY}--`)).toBe(true);
        expect(ud).toContain(
            "Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  instance:\n    localStorage:\n      strategy: RAID0",
        );
        expect(ud).toContain("Content-Type: text/x-shellscript");
    });
    it("sets containerd LimitMEMLOCK=infinity and reserves the huge pages persistently and now", () => {
        expect(ud).toContain("/etc/systemd/system/containerd.service.d/50-memlock.conf");
        expect(ud).toContain("[Service]\nLimitMEMLOCK=infinity");
        expect(ud).toContain("echo 'vm.nr_hugepages = 5128' > /etc/sysctl.d/90-hugepages.conf");
        expect(ud).toContain("sysctl -w vm.nr_hugepages=5128");
        expect(Buffer.from(base64(ud), "base64").toString("utf8")).toBe(ud);
    });
    it("rejects a negative page count", () => {
        expect(() => nodeBootstrapUserData({ hugepages2Mi: -1, localStorageRaid0: false })).toThrow(/non-negative/);
    });
});

describe("EFA device plugin allowlist", () => {
    // aws/eks-charts stable/aws-efa-k8s-device-plugin values.yaml lists p5e.48xlarge and p5en.48xlarge.
    it("reports pool types missing from the allowlist", () => {
        expect(missingFromEfaAllowlist(["p5.48xlarge", "p5e.48xlarge"], ["p5en.48xlarge", "p5e.48xlarge", "p5en.48xlarge"])).toEqual([
            "p5en.48xlarge",
        ]);
        expect(missingFromEfaAllowlist(["p5e.48xlarge", "p5en.48xlarge"], ["p5en.48xlarge"])).toEqual([]);
    });
    it("values set the instance-type allowlist to exactly the pools' types and tolerate the GPU taint", () => {
        const v = efaDevicePluginValues(["p5en.48xlarge", "p5e.48xlarge", "p5en.48xlarge"], "nvidia.com/gpu") as any;
        expect(v.supportedInstanceLabels).toEqual({
            keys: ["node.kubernetes.io/instance-type"],
            values: ["p5e.48xlarge", "p5en.48xlarge"],
        });
        expect(missingFromEfaAllowlist(v.supportedInstanceLabels.values, ["p5en.48xlarge"])).toEqual([]);
        expect(v.tolerations).toContainEqual({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
        expect(() => efaDevicePluginValues([], "nvidia.com/gpu")).toThrow(/at least one/);
    });
});

describe("efaHugepagesMiB", () => {
    it("gives each worker its GPU share of the node's 2 MiB pages", () => {
        expect(efaHugepagesMiB(5128, 8, 8)).toBe(10256); // whole node: 5,128 pages x 2 MiB
        expect(efaHugepagesMiB(5128, 8, 2)).toBe(2564);
        expect(efaHugepagesMiB(5128, 8, 1) * 8).toBeLessThanOrEqual(10256);
        expect(() => efaHugepagesMiB(5128, 8, 9)).toThrow(/1..8/);
    });
});

describe("efaWorkerHugepages", () => {
    it("hugepages-2Mi equal in requests and limits, plus a cpu request only (the API server needs cpu or memory with huge pages)", () => {
        expect(efaWorkerHugepages(5128, 8, 2)).toEqual({
            requests: { "hugepages-2Mi": "2564Mi", cpu: "2" },
            limits: { "hugepages-2Mi": "2564Mi" },
        });
        expect(efaWorkerHugepages(5128, 8, 4)).toEqual({
            requests: { "hugepages-2Mi": "5128Mi", cpu: "4" },
            limits: { "hugepages-2Mi": "5128Mi" },
        });
    });
    it("workers packed on one node never ask for more than it reserves", () => {
        const mib = (g: number) => Number(efaWorkerHugepages(5128, 8, g).limits["hugepages-2Mi"].replace("Mi", ""));
        expect(mib(2) * 2 + mib(4)).toBe(10256);
        expect(mib(3) + mib(5)).toBeLessThanOrEqual(10256);
    });
    it("nothing when the node reserves no huge pages; refuses a GPU count outside the node", () => {
        expect(efaWorkerHugepages(0, 8, 2)).toEqual({ requests: {}, limits: {} });
        expect(() => efaWorkerHugepages(5128, 8, 0)).toThrow(/1..8/);
    });
});

describe("lib/eks", () => {
    it("vpcSubnetPlan: /18 private per AZ, /22 public per AZ from the last quarter", () => {
        expect(vpcSubnetPlan("10.80.0.0/16", ["ap-southeast-1a", "ap-southeast-1b"])).toEqual([
            { availabilityZone: "ap-southeast-1a", cidr: "10.80.0.0/18", tier: "private" },
            { availabilityZone: "ap-southeast-1b", cidr: "10.80.64.0/18", tier: "private" },
            { availabilityZone: "ap-southeast-1a", cidr: "10.80.192.0/22", tier: "public" },
            { availabilityZone: "ap-southeast-1b", cidr: "10.80.196.0/22", tier: "public" },
        ]);
        expect(() => vpcSubnetPlan("10.80.0.0/16", ["a", "b", "c", "d"])).toThrow(/1 to 3/);
    });
    it("eksKubeconfig authenticates with aws eks get-token (no stored credential)", () => {
        const k = eksKubeconfig("platform-sg1", "https://X.gr7.ap-southeast-1.eks.amazonaws.com", "Q0E=", "ap-southeast-1") as any;
        expect(k.clusters[0].cluster).toEqual({
            server: "https://X.gr7.ap-southeast-1.eks.amazonaws.com",
            "certificate-authority-data": "Q0E=",
        });
        expect(k.users[0].user.exec.args).toEqual([
            "eks",
            "get-token",
            "--cluster-name",
            "platform-sg1",
            "--region",
            "ap-southeast-1",
            "--output",
            "json",
        ]);
        expect(JSON.stringify(k)).not.toMatch(/token":|password/);
    });
});
