import { describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { isEksSpoke, parseStackConfig } from "../config/stack";
import { capacitySettings } from "../components/spoke/EfaNodeGroup";
import { byType, flatConfig, inputs, platformKeys, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";
import { referenceableOutputs } from "../tools/wire";

const parse = (doc: Record<string, any>) => parseStackConfig(platformKeys(doc), "stacks/Pulumi.spoke-sg1.yaml");

function issuesOf(doc: Record<string, any>): string[] {
    try { parse(doc); } catch (e) { if (e instanceof ConfigError) return e.issues.map((i) => `${i.key}: ${i.message}`); throw e; }
    return [];
}

describe("EKS spoke config (spoke-sg1)", () => {
    it("parses as an EKS spoke with one EFA pool per GPU node group", () => {
        const cfg = parse(stackConfigDoc("spoke-sg1"));
        expect(cfg.role).toBe("spoke");
        if (cfg.role !== "spoke" || !isEksSpoke(cfg.spoke)) throw new Error("not an EKS spoke");
        expect(cfg.spoke.cluster).toMatchObject({ provider: "eks", region: "ap-southeast-1", kubernetesVersion: "1.33" });
        expect(cfg.spoke.nodePools.map((p) => [p.name, p.profile.name, p.profile.efa?.networkCards, p.memlockUnlimited, p.nodes])).toEqual([["h200", "p5en-48xlarge", 16, true, []]]);
        expect(cfg.spoke.railPools).toEqual([]);
    });

    const cases: Array<[string, (d: Record<string, any>) => void, RegExp]> = [
        ["InfiniBand backend on EKS", (d) => { d["platform:backend"] = { fabric: "infiniband", railSupernet: "10.64.0.0/16" }; }, /platform:backend.fabric: an EKS spoke uses fabric: efa/],
        ["nodePools on EKS", (d) => { d["platform:nodePools"] = [{ name: "x", profile: "dgx-h200", nodes: ["a"] }]; }, /platform:nodePools: nodePools are for provider: onprem/],
        ["GPU group outside the VPC's AZs", (d) => { d["platform:nodeGroups"].gpu[0].availabilityZone = "ap-southeast-1c"; }, /platform:nodeGroups.gpu\[0\].availabilityZone: ap-southeast-1c is not one of the VPC's availability zones/],
        ["spoke region differs from the cluster region", (d) => { d["platform:spoke"].region = "us-east-1"; }, /platform:spoke.region: must equal platform:cluster.region \(ap-southeast-1\)/],
        ["unsupported GPU instance type", (d) => { d["platform:nodeGroups"].gpu[0].instanceType = "p4d.24xlarge"; }, /platform:nodeGroups.gpu\[0\].instanceType/],
        ["unpinned Kubernetes version", (d) => { d["platform:cluster"].kubernetesVersion = "latest"; }, /platform:cluster.kubernetesVersion: must be a pinned EKS Kubernetes version/],
        ["public endpoint without allowed CIDRs", (d) => { d["platform:cluster"].publicAccessCidrs = []; }, /platform:cluster.publicAccessCidrs: a public API endpoint needs publicAccessCidrs/],
        ["gpuOperator settings on EKS", (d) => { d["platform:gpuOperator"] = { gpuDirectRdma: "dmabuf" }; }, /platform:gpuOperator: not used on an EKS spoke/],
        ["service CIDR inside the VPC", (d) => { d["platform:cluster"].serviceCidr = "10.80.128.0/20"; }, /platform:cluster.serviceCidr: overlaps platform:cluster.vpc.cidr/],
        ["capacity block without a reservation id", (d) => { d["platform:nodeGroups"].gpu[0].capacity = { type: "capacity-block" }; }, /platform:nodeGroups.gpu\[0\].capacity.reservationId/],
        ["min above desired", (d) => { d["platform:nodeGroups"].gpu[0].scaling = { desired: 1, min: 2, max: 2 }; }, /min <= desired <= max/],
    ];
    for (const [name, mutate, expected] of cases) {
        it(`rejects: ${name}`, () => {
            const d = stackConfigDoc("spoke-sg1");
            mutate(d);
            const issues = issuesOf(d);
            expect(issues.some((i) => expected.test(i)), issues.join("\n")).toBe(true);
        });
    }

    it("an on-prem pool cannot use an EFA profile", () => {
        const d = stackConfigDoc("spoke-hn1");
        d["platform:nodePools"][0].profile = "p5en-48xlarge";
        expect(issuesOf(d).join("\n")).toMatch(/platform:nodePools\[0\].profile: node profile "p5en-48xlarge" describes an EFA instance type/);
    });
});

describe("capacitySettings (reference/rdma.md §6.6)", () => {
    it("maps on-demand, ODCR and Capacity Block", () => {
        expect(capacitySettings({ type: "on-demand" })).toEqual({ capacityType: "ON_DEMAND" });
        expect(capacitySettings({ type: "odcr", reservationId: "cr-0123456789abcdef0" })).toEqual({ capacityType: "ON_DEMAND", capacityReservationSpecification: { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } } });
        expect(capacitySettings({ type: "capacity-block", reservationId: "cr-0123456789abcdef0" })).toEqual({
            capacityType: "CAPACITY_BLOCK",
            capacityReservationSpecification: { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } },
            instanceMarketOptions: { marketType: "capacity-block" },
        });
    });
});

describe("spoke-sg1 under mocks", () => {
    it("builds the EKS cluster, EFA node group, device plugin and GPU Operator with explicit providers", async () => {
        const { spoke } = await runHubAndSpoke("spoke-sg1");
        const rs = spoke.resources;
        const awsProvider = byType(rs, "pulumi:providers:aws")[0];
        expect(inputs(awsProvider).region).toBe("ap-southeast-1");

        const cluster = byType(rs, "aws:eks/cluster:Cluster")[0];
        expect(inputs(cluster)).toMatchObject({ name: "platform-sg1", version: "1.33", kubernetesNetworkConfig: { serviceIpv4Cidr: "172.20.0.0/16" } });
        expect(cluster.provider.startsWith(awsProvider.urn)).toBe(true);
        expect(byType(rs, "aws:eks/addon:Addon").map((a) => [inputs(a).addonName, inputs(a).addonVersion ?? null]).sort())
            .toEqual([["coredns", null], ["eks-pod-identity-agent", null], ["kube-proxy", null], ["vpc-cni", "v1.20.1-eksbuild.3"]]);
        expect(byType(rs, "aws:ec2/subnet:Subnet").map((s) => inputs(s).cidrBlock).sort()).toEqual(["10.80.0.0/18", "10.80.192.0/22", "10.80.196.0/22", "10.80.64.0/18"]);

        const lt = inputs(byType(rs, "aws:ec2/launchTemplate:LaunchTemplate")[0]);
        expect(lt.networkInterfaces).toHaveLength(17);
        expect(lt.networkInterfaces.filter((n: any) => n.interfaceType === "efa-only")).toHaveLength(16);
        expect(lt.placement.availabilityZone).toBe("ap-southeast-1a");
        expect(Buffer.from(lt.userData, "base64").toString()).toContain("LimitMEMLOCK=infinity");
        expect(lt.capacityReservationSpecification).toBeUndefined();
        expect(inputs(byType(rs, "aws:ec2/placementGroup:PlacementGroup")[0]).strategy).toBe("cluster");

        const groups = Object.fromEntries(byType(rs, "aws:eks/nodeGroup:NodeGroup").map((g) => [inputs(g).nodeGroupName, inputs(g)]));
        expect(groups.h200).toMatchObject({
            instanceTypes: ["p5en.48xlarge"], amiType: "AL2023_x86_64_NVIDIA", capacityType: "ON_DEMAND",
            scalingConfig: { desiredSize: 2, minSize: 2, maxSize: 2 }, subnetIds: ["eks-private-ap-southeast-1a-id"],
            taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NO_SCHEDULE" }],
            labels: { "inference-platform.io/fabric": "efa", "inference-platform.io/pool": "h200", "inference-platform.io/efa-devices": "16", "inference-platform.io/memlock-unlimited": "true" },
        });
        expect(groups.system).toMatchObject({ amiType: "AL2023_x86_64_STANDARD", instanceTypes: ["m7i.4xlarge"] });

        const k8sProvider = byType(rs, "pulumi:providers:kubernetes")[0];
        expect(JSON.parse(inputs(k8sProvider).kubeconfig).clusters[0].cluster.server).toMatch(/^https:\/\/[0-9A-F]{32}\.gr7\.ap-southeast-1\.eks\.amazonaws\.com$/);
        const releases = Object.fromEntries(byType(rs, "kubernetes:helm.sh/v3:Release").map((r) => [inputs(r).chart, r]));
        expect(releases["aws-efa-k8s-device-plugin"].provider.startsWith(k8sProvider.urn)).toBe(true);
        expect(inputs(releases["aws-efa-k8s-device-plugin"])).toMatchObject({ version: "v0.5.30", values: { supportedInstanceLabels: { values: ["p5en.48xlarge"] } } });
        expect(inputs(releases["gpu-operator"]).values).toMatchObject({ driver: { enabled: false }, toolkit: { enabled: false }, devicePlugin: { env: [{ name: "MOFED_ENABLED", value: "false" }] } });
        expect(spoke.outputs.efaDevicesPerNode).toEqual({ h200: 16 });
    });

    it("a Capacity Block group gets the capacity-block market, the reservation target and CAPACITY_BLOCK; p5e gets 32 EFA", async () => {
        const hub = await runRepoStack("hub-prod");
        const d = stackConfigDoc("spoke-sg1");
        d["platform:nodeGroups"].gpu[0] = { ...d["platform:nodeGroups"].gpu[0], instanceType: "p5e.48xlarge", capacity: { type: "capacity-block", reservationId: "cr-0123456789abcdef0" } };
        const r = await runRepoStack("spoke-sg1", { config: flatConfig(d), stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } } });
        const lt = inputs(byType(r.resources, "aws:ec2/launchTemplate:LaunchTemplate")[0]);
        expect(lt.instanceMarketOptions).toEqual({ marketType: "capacity-block" });
        expect(lt.capacityReservationSpecification).toEqual({ capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } });
        expect(lt.networkInterfaces.filter((n: any) => n.interfaceType === "efa-only")).toHaveLength(32);
        const ng = byType(r.resources, "aws:eks/nodeGroup:NodeGroup").map(inputs).find((g) => g.nodeGroupName === "h200")!;
        expect(ng.capacityType).toBe("CAPACITY_BLOCK");
    });

    it("renders in preview mode too (cluster endpoint unknown)", async () => {
        const { spoke } = await runHubAndSpoke("spoke-sg1", true);
        expect(byType(spoke.resources, "aws:eks/nodeGroup:NodeGroup")).toHaveLength(2);
    });
});
