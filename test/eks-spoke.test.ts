import { versions } from "../config/versions";
import { beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { isEksSpoke, parseStackConfig } from "../config/stack";
import { capacitySettings } from "../components/spoke/EfaNodeGroup";
import { vpcSubnetPlan } from "../lib/eks";
import { byType, flatConfig, inputs, platformKeys, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";
import { referenceableOutputs, unwrapWire } from "../tools/wire";
import { efaPolicies } from "../policies/efa";
import { allPolicies } from "../policies/policies";
import { rdmaWorkloadPolicies } from "../policies/rdma-workloads";
import { runPolicies } from "../tools/policy-runner";
import type { CapturedResource } from "../tools/harness";

const parse = (doc: Record<string, any>) => parseStackConfig(platformKeys(doc), "stacks/Pulumi.spoke-sg1.yaml");

function issuesOf(doc: Record<string, any>): string[] {
    try {
        parse(doc);
    } catch (e) {
        if (e instanceof ConfigError) return e.issues.map((i) => `${i.key}: ${i.message}`);
        throw e;
    }
    return [];
}

describe("EKS spoke config (spoke-sg1)", () => {
    it("parses as an EKS spoke with one EFA pool per GPU node group", () => {
        const cfg = parse(stackConfigDoc("spoke-sg1"));
        expect(cfg.role).toBe("spoke");
        if (cfg.role !== "spoke" || !isEksSpoke(cfg.spoke)) throw new Error("not an EKS spoke");
        expect(cfg.spoke.cluster).toMatchObject({ provider: "eks", region: "ap-southeast-1", kubernetesVersion: "1.35" });
        expect(cfg.spoke.nodePools.map((p) => [p.name, p.profile.name, p.profile.efa?.networkCards, p.memlockUnlimited, p.nodes])).toEqual([
            ["h200", "p5en-48xlarge", 16, true, []],
        ]);
        expect(cfg.spoke.railPools).toEqual([]);
    });

    it("the shipped file pins each AZ's subnets by name, with the CIDRs the derived plan gave (adding them moved none)", () => {
        const vpc = stackConfigDoc("spoke-sg1")["platform:cluster"].vpc;
        expect(Object.keys(vpc.subnets ?? {}).sort()).toEqual([...vpc.availabilityZones].sort());
        const given = vpcSubnetPlan(vpc.cidr, vpc.availabilityZones, vpc.subnets);
        expect(given).toEqual(vpcSubnetPlan(vpc.cidr, vpc.availabilityZones));
        // Reordered AZs: the same CIDR per AZ (derived by position, they would swap).
        const reordered = vpcSubnetPlan(vpc.cidr, [...vpc.availabilityZones].reverse(), vpc.subnets);
        for (const g of given) expect(reordered).toContainEqual(g);
    });

    const cases: Array<[string, (d: Record<string, any>) => void, RegExp]> = [
        [
            "InfiniBand backend on EKS",
            (d) => {
                d["platform:backend"] = { fabric: "infiniband", railSupernet: "10.64.0.0/16" };
            },
            /platform:backend.fabric: an EKS spoke uses fabric: efa/,
        ],
        [
            "nodePools on EKS",
            (d) => {
                d["platform:nodePools"] = [{ name: "x", profile: "dgx-h200", nodes: ["a"] }];
            },
            /platform:nodePools: nodePools are for provider: onprem/,
        ],
        [
            "GPU group outside the VPC's AZs",
            (d) => {
                d["platform:nodeGroups"].gpu[0].availabilityZone = "ap-southeast-1c";
            },
            /platform:nodeGroups.gpu\[0\].availabilityZone: ap-southeast-1c is not one of the VPC's availability zones/,
        ],
        [
            "spoke region differs from the cluster region",
            (d) => {
                d["platform:spoke"].region = "us-east-1";
            },
            /platform:spoke.region: must equal platform:cluster.region \(ap-southeast-1\)/,
        ],
        [
            "unsupported GPU instance type",
            (d) => {
                d["platform:nodeGroups"].gpu[0].instanceType = "p4d.24xlarge";
            },
            /platform:nodeGroups.gpu\[0\].instanceType/,
        ],
        [
            "unpinned Kubernetes version",
            (d) => {
                d["platform:cluster"].kubernetesVersion = "latest";
            },
            /platform:cluster.kubernetesVersion: must be a pinned EKS Kubernetes version/,
        ],
        [
            "a version in extended support",
            (d) => {
                d["platform:cluster"].kubernetesVersion = "1.33";
            },
            /platform:cluster.kubernetesVersion: must be an EKS version in standard support .*\(1\.35\)/,
        ],
        [
            "subnets for another AZ",
            (d) => {
                d["platform:cluster"].vpc.subnets = {
                    "ap-southeast-1a": { private: "10.80.0.0/18", public: "10.80.192.0/22" },
                    "ap-southeast-1c": { private: "10.80.64.0/18", public: "10.80.196.0/22" },
                };
            },
            /platform:cluster.vpc.subnets: must name exactly the availabilityZones \(ap-southeast-1a, ap-southeast-1b\)/,
        ],
        [
            "a subnet outside the VPC",
            (d) => {
                d["platform:cluster"].vpc.subnets = {
                    "ap-southeast-1a": { private: "10.81.0.0/18", public: "10.80.192.0/22" },
                    "ap-southeast-1b": { private: "10.80.64.0/18", public: "10.80.196.0/22" },
                };
            },
            /platform:cluster.vpc.subnets.ap-southeast-1a.private: 10.81.0.0\/18 is not inside the VPC's 10.80.0.0\/16/,
        ],
        [
            "overlapping subnets",
            (d) => {
                d["platform:cluster"].vpc.subnets = {
                    "ap-southeast-1a": { private: "10.80.0.0/18", public: "10.80.192.0/22" },
                    "ap-southeast-1b": { private: "10.80.0.0/20", public: "10.80.196.0/22" },
                };
            },
            /platform:cluster.vpc.subnets.ap-southeast-1b.private: 10.80.0.0\/20 overlaps subnets.ap-southeast-1a.private/,
        ],
        [
            "public endpoint without allowed CIDRs",
            (d) => {
                d["platform:cluster"].publicAccessCidrs = [];
            },
            /platform:cluster.publicAccessCidrs: a public API endpoint needs publicAccessCidrs/,
        ],
        [
            "gpuOperator settings on EKS",
            (d) => {
                d["platform:gpuOperator"] = { gpuDirectRdma: "dmabuf" };
            },
            /platform:gpuOperator: not used on an EKS spoke/,
        ],
        [
            "service CIDR inside the VPC",
            (d) => {
                d["platform:cluster"].serviceCidr = "10.80.128.0/20";
            },
            /platform:cluster.serviceCidr: overlaps platform:cluster.vpc.cidr/,
        ],
        [
            "capacity block without a reservation id",
            (d) => {
                d["platform:nodeGroups"].gpu[0].capacity = { type: "capacity-block" };
            },
            /platform:nodeGroups.gpu\[0\].capacity.reservationId/,
        ],
        [
            "min above desired",
            (d) => {
                d["platform:nodeGroups"].gpu[0].scaling = { desired: 1, min: 2, max: 2 };
            },
            /min <= desired <= max/,
        ],
    ];
    for (const [name, mutate, expected] of cases) {
        it(`rejects: ${name}`, () => {
            const d = stackConfigDoc("spoke-sg1");
            mutate(d);
            const issues = issuesOf(d);
            expect(
                issues.some((i) => expected.test(i)),
                issues.join("\n"),
            ).toBe(true);
        });
    }

    it("an on-prem pool cannot use an EFA profile", () => {
        const d = stackConfigDoc("spoke-hn1");
        d["platform:nodePools"][0].profile = "p5en-48xlarge";
        expect(issuesOf(d).join("\n")).toMatch(
            /platform:nodePools\[0\].profile: node profile "p5en-48xlarge" describes an EFA instance type/,
        );
    });
});

describe("capacitySettings", () => {
    it("maps on-demand, ODCR and Capacity Block", () => {
        expect(capacitySettings({ type: "on-demand" })).toEqual({ capacityType: "ON_DEMAND" });
        expect(capacitySettings({ type: "odcr", reservationId: "cr-0123456789abcdef0" })).toEqual({
            capacityType: "ON_DEMAND",
            capacityReservationSpecification: { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } },
        });
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
        expect(inputs(cluster)).toMatchObject({
            name: "platform-sg1",
            version: "1.35",
            kubernetesNetworkConfig: { serviceIpv4Cidr: "172.20.0.0/16" },
        });
        // Never paid extended support: the policy is explicit (the EKS default is EXTENDED).
        expect(inputs(cluster).upgradePolicy).toEqual({ supportType: "STANDARD" });
        expect(cluster.provider.startsWith(awsProvider.urn)).toBe(true);
        expect(
            byType(rs, "aws:eks/addon:Addon")
                .map((a) => [inputs(a).addonName, inputs(a).addonVersion ?? null])
                .sort(),
        ).toEqual([
            ["aws-ebs-csi-driver", null],
            ["coredns", null],
            ["eks-pod-identity-agent", null],
            ["kube-proxy", null],
            ["vpc-cni", versions.eksAddons["vpc-cni"]],
        ]);
        expect(
            byType(rs, "aws:ec2/subnet:Subnet")
                .map((s) => inputs(s).cidrBlock)
                .sort(),
        ).toEqual(["10.80.0.0/18", "10.80.192.0/22", "10.80.196.0/22", "10.80.64.0/18"]);

        const lt = inputs(byType(rs, "aws:ec2/launchTemplate:LaunchTemplate").find((r) => r.name === "nodes-h200-lt")!);
        expect(lt.networkInterfaces).toHaveLength(17);
        expect(lt.networkInterfaces.filter((n: any) => n.interfaceType === "efa-only")).toHaveLength(16);
        expect(lt.placement.availabilityZone).toBe("ap-southeast-1a");
        expect(Buffer.from(lt.userData, "base64").toString()).toContain("LimitMEMLOCK=infinity");
        expect(lt.capacityReservationSpecification).toBeUndefined();
        expect(inputs(byType(rs, "aws:ec2/placementGroup:PlacementGroup")[0]).strategy).toBe("cluster");

        const groups = Object.fromEntries(
            byType(rs, "aws:eks/nodeGroup:NodeGroup").map((g) => [inputs(g).nodeGroupNamePrefix.replace(/-$/, ""), inputs(g)]),
        );
        expect(groups.h200).toMatchObject({
            instanceTypes: ["p5en.48xlarge"],
            amiType: "AL2023_x86_64_NVIDIA",
            capacityType: "ON_DEMAND",
            scalingConfig: { desiredSize: 2, minSize: 2, maxSize: 2 },
            subnetIds: ["eks-private-ap-southeast-1a-id"],
            taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NO_SCHEDULE" }],
            labels: {
                "inference-platform.io/fabric": "efa",
                "inference-platform.io/pool": "h200",
                "inference-platform.io/efa-devices": "16",
                "inference-platform.io/memlock-unlimited": "true",
            },
        });
        expect(groups.system).toMatchObject({ amiType: "AL2023_x86_64_STANDARD", instanceTypes: ["m7i.4xlarge"] });

        const k8sProvider = byType(rs, "pulumi:providers:kubernetes")[0];
        expect(JSON.parse(inputs(k8sProvider).kubeconfig).clusters[0].cluster.server).toMatch(
            /^https:\/\/[0-9A-F]{32}\.gr7\.ap-southeast-1\.eks\.amazonaws\.com$/,
        );
        const releases = Object.fromEntries(byType(rs, "kubernetes:helm.sh/v3:Release").map((r) => [inputs(r).chart, r]));
        expect(releases["aws-efa-k8s-device-plugin"].provider.startsWith(k8sProvider.urn)).toBe(true);
        expect(inputs(releases["aws-efa-k8s-device-plugin"])).toMatchObject({
            version: versions.efaDevicePlugin.version,
            values: { supportedInstanceLabels: { values: ["p5en.48xlarge"] } },
        });
        expect(inputs(releases["gpu-operator"]).values).toMatchObject({
            driver: { enabled: false },
            toolkit: { enabled: false },
            devicePlugin: { env: [{ name: "MOFED_ENABLED", value: "false" }] },
        });
        expect(spoke.outputs.efaDevicesPerNode).toEqual({ h200: 16 });
    });

    it("a Capacity Block group gets the capacity-block market, the reservation target and CAPACITY_BLOCK; p5e gets 32 EFA", async () => {
        const hub = await runRepoStack("hub-prod");
        const d = stackConfigDoc("spoke-sg1");
        d["platform:nodeGroups"].gpu[0] = {
            ...d["platform:nodeGroups"].gpu[0],
            instanceType: "p5e.48xlarge",
            capacity: { type: "capacity-block", reservationId: "cr-0123456789abcdef0" },
        };
        const r = await runRepoStack("spoke-sg1", {
            config: flatConfig(d),
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
        });
        const lt = inputs(byType(r.resources, "aws:ec2/launchTemplate:LaunchTemplate").find((x) => x.name === "nodes-h200-lt")!);
        expect(lt.instanceMarketOptions).toEqual({ marketType: "capacity-block" });
        expect(lt.capacityReservationSpecification).toEqual({
            capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" },
        });
        expect(lt.networkInterfaces.filter((n: any) => n.interfaceType === "efa-only")).toHaveLength(32);
        const ng = byType(r.resources, "aws:eks/nodeGroup:NodeGroup")
            .map(inputs)
            .find((g) => g.nodeGroupNamePrefix === "h200-")!;
        expect(ng.capacityType).toBe("CAPACITY_BLOCK");
    });

    it("subnets are named by tier and AZ; with the file's subnets, reordering the AZs moves no subnet's CIDR", async () => {
        const hub = await runRepoStack("hub-prod");
        const render = async (azs: string[]) => {
            const d = stackConfigDoc("spoke-sg1");
            d["platform:cluster"].vpc.availabilityZones = azs;
            d["platform:cluster"].vpc.subnets = {
                "ap-southeast-1a": { private: "10.80.0.0/18", public: "10.80.192.0/22" },
                "ap-southeast-1b": { private: "10.80.64.0/18", public: "10.80.196.0/22" },
            };
            const r = await runRepoStack("spoke-sg1", {
                config: flatConfig(d),
                stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
            });
            return Object.fromEntries(byType(r.resources, "aws:ec2/subnet:Subnet").map((x) => [x.name, inputs(x).cidrBlock]));
        };
        const ab = await render(["ap-southeast-1a", "ap-southeast-1b"]);
        expect(ab).toEqual({
            "eks-private-ap-southeast-1a": "10.80.0.0/18",
            "eks-private-ap-southeast-1b": "10.80.64.0/18",
            "eks-public-ap-southeast-1a": "10.80.192.0/22",
            "eks-public-ap-southeast-1b": "10.80.196.0/22",
        });
        expect(await render(["ap-southeast-1b", "ap-southeast-1a"])).toEqual(ab);
    });

    it("renders in preview mode too (cluster endpoint unknown)", async () => {
        const { spoke } = await runHubAndSpoke("spoke-sg1", true);
        expect(byType(spoke.resources, "aws:eks/nodeGroup:NodeGroup")).toHaveLength(2);
    });
});

describe("spoke-sg1 serving: the hub's placement deployed on the EFA pool", () => {
    let rs: CapturedResource[];
    let outputs: Record<string, unknown>;
    beforeAll(async () => {
        ({ resources: rs, outputs } = (await runHubAndSpoke("spoke-sg1")).spoke);
    });
    const dgd = () => byType(rs, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment").map(inputs);
    /** sg1's P/D graph (it also runs llama-70b, aggregated vLLM with KVBM tiers: test/kvtiers.test.ts). */
    const qwen = () => dgd().find((d) => d.metadata.name === "qwen3-32b")!;
    const component = (name: string) => qwen().spec.components.find((c: any) => c.name === name);
    const envOf = (c: any) => Object.fromEntries(c.env.map((e: any) => [e.name, e.value]));

    it("renders the endpoint the hub places on sg1 (Qwen/Qwen3-32B, SGLang, disaggregated) through the EKS cluster's provider", () => {
        expect(
            dgd()
                .map((d) => `${d.metadata.namespace}/${d.metadata.name}/${d.spec.backendFramework}`)
                .sort(),
        ).toEqual(["inference/llama-70b/vllm", "inference/qwen3-32b/sglang"]);
        // No Planner: hub-prod fixes sg1's Qwen at 2 prefill + 1 decode (its planner is off, so Llama's budget fits).
        expect(qwen().spec.components.map((c: any) => `${c.name}:${c.type}:${c.replicas}`)).toEqual([
            "Frontend:frontend:1",
            "prefill:prefill:2",
            "decode:decode:1",
        ]);
        const k8sProvider = byType(rs, "pulumi:providers:kubernetes")[0];
        for (const r of byType(rs, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment").concat(
            byType(rs, "kubernetes:helm.sh/v3:Release").filter((x) => inputs(x).chart === "dynamo-platform"),
        )) {
            expect(r.provider.startsWith(k8sProvider.urn), r.name).toBe(true);
        }
        expect(unwrapWire(outputs.serving)).toEqual({
            "qwen3-32b": { pool: "h200", frontend: { name: "qwen3-32b-frontend", namespace: "inference", port: 8000 } },
            "llama-70b": { pool: "h200", frontend: { name: "llama-70b-frontend", namespace: "inference", port: 8000 } },
        });
    });

    it("prefill/decode workers request EFA (2 per GPU) and their GPU share of the node's 2 MiB huge pages, with a cpu request", () => {
        for (const [name, gpus] of [
            ["prefill", 2],
            ["decode", 4],
        ] as const) {
            const main = component(name).podTemplate.spec.containers[0];
            const hugepages = `${Math.floor((5128 * gpus) / 8) * 2}Mi`;
            expect(main.resources).toEqual({
                requests: {
                    "nvidia.com/gpu": String(gpus),
                    "vpc.amazonaws.com/efa": String(2 * gpus),
                    "hugepages-2Mi": hugepages,
                    cpu: String(gpus),
                },
                limits: { "nvidia.com/gpu": String(gpus), "vpc.amazonaws.com/efa": String(2 * gpus), "hugepages-2Mi": hugepages },
            });
            expect(main.securityContext).toEqual({ runAsUser: 0, runAsGroup: 0, privileged: true });
            expect(envOf(main)).toMatchObject({
                FI_PROVIDER: "efa",
                FI_EFA_USE_DEVICE_RDMA: "1",
                NCCL_NET: "Libfabric",
                SGLANG_DISAGGREGATION_NIXL_BACKEND: "LIBFABRIC",
            });
            expect(Object.keys(envOf(main)).filter((k) => k.startsWith("UCX_"))).toEqual([]);
            const spec = component(name).podTemplate.spec;
            expect(spec.nodeSelector).toEqual({ "inference-platform.io/pool": "h200" });
            expect(spec.tolerations).toEqual([{ key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" }]);
            expect(
                spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels[
                    "nvidia.com/dynamo-component"
                ],
            ).toBe(name === "prefill" ? "decode" : "prefill");
            const [init] = spec.initContainers;
            expect(init.name).toBe("rdma-preflight");
            expect(init.resources.limits).toEqual({ "nvidia.com/gpu": String(gpus), "vpc.amazonaws.com/efa": String(2 * gpus) });
            expect(envOf(init)).toMatchObject({ PREFLIGHT_FABRIC: "efa", PREFLIGHT_MIN_DEVICES: String(2 * gpus) });
        }
    });

    it("Frontend and Planner run on the CPU node group (its selector, no GPU toleration)", () => {
        // Qwen's Frontend, and llama-70b's Planner (Qwen's planner is off in hub-prod).
        const llama = dgd().find((d) => d.metadata.name === "llama-70b")!;
        for (const [name, c] of [
            ["Frontend", component("Frontend")],
            ["Planner", llama.spec.components.find((x: any) => x.name === "Planner")],
        ]) {
            const spec = c.podTemplate.spec;
            expect(spec.nodeSelector, name).toEqual({ "inference-platform.io/system": "true" });
            expect(spec.tolerations, name).toBeUndefined();
        }
        expect(unwrapWire(outputs.systemNodeSelector)).toEqual({ "inference-platform.io/system": "true" });
    });

    it("passes the RDMA guard and the EFA policies, and the whole pack, in update and preview mode", async () => {
        expect((await runPolicies([...rdmaWorkloadPolicies, ...efaPolicies], rs)).findings).toEqual([]);
        expect((await runPolicies(allPolicies, rs)).mandatory).toEqual([]);
        const preview = (await runHubAndSpoke("spoke-sg1", true)).spoke.resources;
        expect(byType(preview, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment")).toHaveLength(2);
        expect((await runPolicies(allPolicies, preview)).mandatory).toEqual([]);
    });

    it("without huge pages on the node group the mandatory huge-pages rule (and the launch-template rule) stop the stack", async () => {
        const hub = await runRepoStack("hub-prod");
        const d = stackConfigDoc("spoke-sg1");
        d["platform:nodeGroups"].gpu[0].hugepages2Mi = 0;
        const r = await runRepoStack("spoke-sg1", {
            config: flatConfig(d),
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
        });
        const main = byType(r.resources, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment")
            .map(inputs)
            .find((d) => d.metadata.name === "qwen3-32b")!
            .spec.components.find((c: any) => c.name === "decode").podTemplate.spec.containers[0];
        expect(main.resources.requests["hugepages-2Mi"]).toBeUndefined();
        const names = (await runPolicies(efaPolicies, r.resources)).mandatory.map((f) => f.policyName).sort();
        expect(names).toEqual(["efa-node-group-launch-template", "efa-workload-hugepages", "efa-workload-hugepages"]);
    });
});

describe("platform:serving.systemNodeSelector", () => {
    it("is rejected on an EKS spoke (the CPU node group's selector is used)", () => {
        const d = stackConfigDoc("spoke-sg1");
        d["platform:serving"] = { systemNodeSelector: { "node-role.kubernetes.io/system": "" } };
        expect(issuesOf(d).join("\n")).toMatch(/platform:serving.systemNodeSelector: not used on an EKS spoke/);
    });
    it("on-prem: puts the Frontend, Planner and Mooncake master on the named CPU nodes; workers stay on the GPU pool", async () => {
        const hub = await runRepoStack("hub-prod");
        const d = stackConfigDoc("spoke-hn1");
        d["platform:serving"] = { ...(d["platform:serving"] ?? {}), systemNodeSelector: { "node-role.kubernetes.io/system": "true" } };
        const r = await runRepoStack("spoke-hn1", {
            config: flatConfig(d),
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
        });
        const graphs = byType(r.resources, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment").map(inputs);
        // hn1's Llama runs a Planner; its Qwen's planner is off in hub-prod.
        expect(graphs.filter((g) => g.spec.components.some((c: any) => c.name === "Planner")).map((g) => g.metadata.name)).toEqual([
            "llama-70b",
        ]);
        for (const g of graphs) {
            const sel = Object.fromEntries(g.spec.components.map((c: any) => [c.name, c.podTemplate.spec.nodeSelector]));
            expect(sel.Frontend).toEqual({ "node-role.kubernetes.io/system": "true" });
            if ("Planner" in sel) expect(sel.Planner).toEqual({ "node-role.kubernetes.io/system": "true" });
            for (const w of ["prefill", "decode", "worker"].filter((n) => n in sel))
                expect(sel[w]).toEqual({ "inference-platform.io/pool": "h200" });
        }
        const deployments = byType(r.resources, "kubernetes:apps/v1:Deployment").map(inputs);
        const masters = deployments.filter((x) => x.metadata.name.endsWith("-mooncake-master"));
        expect(masters.length).toBeGreaterThan(0);
        for (const m of masters) expect(m.spec.template.spec.nodeSelector).toEqual({ "node-role.kubernetes.io/system": "true" });
        for (const st of deployments.filter((x) => x.metadata.name.endsWith("-mooncake-store")))
            expect(st.spec.template.spec.nodeSelector).toEqual({ "inference-platform.io/pool": "h200" });
        expect((await runPolicies(allPolicies, r.resources)).mandatory).toEqual([]);
    });
});

// The EKS spoke's first `up` must not stop (PVCs pending, CI roles without access) and pods must not reach
// the node role. Facts: EKS has no default StorageClass and no EBS CSI driver unless added
// (docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html); access entries (access-entries.html); IMDS hop limit
// (best-practices/identity-and-access-management.html); Pod Identity trust (pod-id-role.html).
describe("spoke-sg1 first up: storage, cluster access, node credentials, spoke identity", () => {
    let rs: CapturedResource[];
    beforeAll(async () => {
        rs = (await runHubAndSpoke("spoke-sg1")).spoke.resources;
    });
    const named = (type: string, name: string) => {
        const r = byType(rs, type).find((x) => x.name === name);
        expect(r, name).toBeDefined();
        return r!;
    };
    const roleOf = (arn: string) => byType(rs, "aws:iam/role:Role").find((r) => (unwrapWire(r.outputs) as any).arn === arn)!;
    const attachments = (role: CapturedResource) =>
        byType(rs, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            .filter((a) => a.parent === role.urn)
            .map((a) => inputs(a).policyArn as string);

    it("EBS CSI add-on on its own Pod Identity role, and a default gp3 StorageClass the metering PVCs use", () => {
        const ebs = inputs(byType(rs, "aws:eks/addon:Addon").find((a) => inputs(a).addonName === "aws-ebs-csi-driver")!);
        expect(ebs.podIdentityAssociations).toHaveLength(1);
        expect(ebs.podIdentityAssociations[0].serviceAccount).toBe("ebs-csi-controller-sa");
        const role = roleOf(ebs.podIdentityAssociations[0].roleArn);
        const trust = JSON.parse(inputs(role).assumeRolePolicy).Statement[0];
        expect(trust.Principal).toEqual({ Service: "pods.eks.amazonaws.com" });
        expect(trust.Condition.StringEquals).toMatchObject({
            "aws:SourceAccount": "123456789012",
            "aws:RequestTag/kubernetes-service-account": "ebs-csi-controller-sa",
        });
        expect(attachments(role)).toEqual(["arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]);

        const sc = inputs(named("kubernetes:storage.k8s.io/v1:StorageClass", "default-storage-class"));
        expect(sc).toMatchObject({
            metadata: { name: "gp3", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
            provisioner: "ebs.csi.aws.com",
            parameters: { type: "gp3", encrypted: "true" },
            volumeBindingMode: "WaitForFirstConsumer",
            reclaimPolicy: "Retain",
        });
        const sts = inputs(byType(rs, "kubernetes:apps/v1:StatefulSet").find((x) => inputs(x).metadata.name === "metering")!);
        expect(sts.spec.volumeClaimTemplates[0].spec.storageClassName).toBe("gp3");
        const collector = inputs(byType(rs, "kubernetes:helm.sh/v3:Release").find((r) => inputs(r).chart === "opentelemetry-collector")!);
        expect(JSON.stringify(collector.values)).toContain('"storageClassName":"gp3"');
    });

    it("access entries for the deploy and preview roles named in the spoke file", () => {
        const entries = byType(rs, "aws:eks/accessEntry:AccessEntry").map(inputs);
        expect(entries.map((e) => e.principalArn).sort()).toEqual([
            "arn:aws:iam::111122223333:role/platform-ci-deploy",
            "arn:aws:iam::111122223333:role/platform-ci-preview",
        ]);
        const assoc = Object.fromEntries(
            byType(rs, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
                .map(inputs)
                .map((a) => [a.principalArn, [a.policyArn, a.accessScope.type]]),
        );
        expect(assoc["arn:aws:iam::111122223333:role/platform-ci-deploy"]).toEqual([
            "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
            "cluster",
        ]);
        // The preview role runs a pull request's code: the `view` ClusterRole (no Secrets), never AdminView (all Secrets).
        expect(assoc["arn:aws:iam::111122223333:role/platform-ci-preview"]).toEqual([
            "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
            "cluster",
        ]);
    });

    it("node groups are replaced create-first (name prefixes), GPU groups update terminate-first (MINIMAL)", () => {
        const groups = byType(rs, "aws:eks/nodeGroup:NodeGroup").map(inputs);
        for (const g of groups) {
            expect(g.nodeGroupName).toBeUndefined();
            expect(g.nodeGroupNamePrefix).toMatch(/-$/);
        }
        const gpu = groups.find((g) => g.amiType === "AL2023_x86_64_NVIDIA")!;
        expect(gpu.updateConfig).toEqual({ maxUnavailable: 1, updateStrategy: "MINIMAL" });
    });

    it("node groups wait for the node role's policies (a node without them cannot join)", () => {
        const policies = rs
            .filter((r) => r.type === "aws:iam/rolePolicyAttachment:RolePolicyAttachment" && /eks-node-Amazon/.test(r.name))
            .map((r) => r.urn);
        expect(policies).toHaveLength(3);
        for (const g of byType(rs, "aws:eks/nodeGroup:NodeGroup")) {
            const deps = new Set([...g.dependencies, ...rs.filter((r) => r.urn === g.parent).flatMap((p) => p.dependencies)]);
            for (const u of policies) expect(deps.has(u), `${g.name} waits for ${u}`).toBe(true);
        }
    });

    it("no implicit creator admin: the deploy role's entry is the only admin, so the first `up` from CI cannot hit 409", () => {
        const cluster = inputs(byType(rs, "aws:eks/cluster:Cluster")[0]);
        expect(cluster.accessConfig).toEqual({ authenticationMode: "API", bootstrapClusterCreatorAdminPermissions: false });
        const admins = byType(rs, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
            .map(inputs)
            .filter((a) => a.policyArn.endsWith("/AmazonEKSClusterAdminPolicy"));
        expect(admins.map((a) => a.principalArn)).toEqual(["arn:aws:iam::111122223333:role/platform-ci-deploy"]);
    });

    it("VPC CNI on its own IRSA role; the node role has no CNI policy; IMDS hop limit 1 on GPU and system nodes", () => {
        const cni = inputs(byType(rs, "aws:eks/addon:Addon").find((a) => inputs(a).addonName === "vpc-cni")!);
        const cniRole = roleOf(cni.serviceAccountRoleArn);
        const trust = JSON.parse(inputs(cniRole).assumeRolePolicy).Statement[0];
        expect(trust.Action).toBe("sts:AssumeRoleWithWebIdentity");
        expect(Object.entries(trust.Condition.StringEquals)).toContainEqual([
            expect.stringMatching(/:sub$/),
            "system:serviceaccount:kube-system:aws-node",
        ]);
        expect(attachments(cniRole)).toEqual(["arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"]);
        const nodeRole = named("aws:iam/role:Role", "eks-node-role");
        expect(attachments(nodeRole).some((p) => p.endsWith("AmazonEKS_CNI_Policy"))).toBe(false);

        const lts = byType(rs, "aws:ec2/launchTemplate:LaunchTemplate");
        expect(lts.map((l) => l.name).sort()).toEqual(["nodes-h200-lt", "nodes-system-lt"]);
        for (const l of lts)
            expect(inputs(l).metadataOptions, l.name).toEqual({
                httpTokens: "required",
                httpPutResponseHopLimit: 1,
                httpEndpoint: "enabled",
            });
        const system = byType(rs, "aws:eks/nodeGroup:NodeGroup")
            .map(inputs)
            .find((g) => g.nodeGroupNamePrefix === "system-")!;
        expect(system.launchTemplate.id).toBe("nodes-system-lt-id");
        expect(system.diskSize).toBeUndefined();
    });

    it("destroy order: the EnvoyProxy and Gateway (whose Service holds the NLB) go before the AWS Load Balancer Controller", () => {
        const lbc = named("kubernetes:helm.sh/v3:Release", "aws-load-balancer-controller");
        const crs = byType(rs, "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy").concat(
            byType(rs, "kubernetes:gateway.networking.k8s.io/v1:Gateway"),
        );
        expect(crs).toHaveLength(2);
        // Pulumi deletes a resource only after everything that depends on it: the controller outlives the NLB's owners.
        for (const r of crs) expect(r.dependencies, r.name).toContain(lbc.urn);
    });

    it("auth and metering each get their own spoke role by EKS Pod Identity: no key, no credentials file", () => {
        const all = byType(rs, "aws:eks/podIdentityAssociation:PodIdentityAssociation").map(inputs);
        // cert-manager and the load balancer controller have their own roles (test/aws-simulate.test.ts); the spoke role
        // goes to auth and metering only.
        const assocs = all.filter((a) => a.namespace !== "cert-manager" && a.serviceAccount !== "aws-load-balancer-controller");
        expect(all.length - assocs.length).toBe(2);
        expect(assocs.map((a) => `${a.namespace}/${a.serviceAccount}`).sort()).toEqual(["llm-gateway/auth", "platform-system/metering"]);
        // One role per service (hub SpokeIdentity: `<hub>-<spoke>-<service>-` name prefix under /platform/spokes/).
        for (const a of assocs)
            expect(a.roleArn).toMatch(new RegExp(`:role/platform/spokes/[a-z0-9-]+-sg1-${a.serviceAccount}-[0-9a-f]{26}$`));
        expect(new Set(assocs.map((a) => a.roleArn)).size).toBe(2);
        const secrets = byType(rs, "kubernetes:core/v1:Secret").map((x) => inputs(x).metadata.name);
        expect(secrets).not.toContain("auth-aws");
        expect(secrets).not.toContain("metering-aws");
        const envNames = JSON.stringify(
            byType(rs, "kubernetes:apps/v1:Deployment").concat(byType(rs, "kubernetes:apps/v1:StatefulSet")).map(inputs),
        );
        expect(envNames).not.toContain("AWS_SHARED_CREDENTIALS_FILE");
    });

    it("the AWS Load Balancer Controller (pinned chart) provisions the gateway's NLB on its own Pod Identity role", () => {
        const release = byType(rs, "kubernetes:helm.sh/v3:Release")
            .map(inputs)
            .find((r) => r.name === "aws-load-balancer-controller")!;
        expect([release.chart, release.version, release.repositoryOpts.repo, release.namespace]).toEqual([
            versions.awsLoadBalancerController.chart,
            versions.awsLoadBalancerController.version,
            versions.awsLoadBalancerController.repo,
            "kube-system",
        ]);
        expect(release.values).toMatchObject({
            clusterName: "platform-sg1",
            region: stackConfigDoc("spoke-sg1")["platform:cluster"].region,
            serviceAccount: { create: true, name: "aws-load-balancer-controller" },
            enableServiceMutatorWebhook: false,
        });
        expect(release.values.vpcId).toEqual(expect.any(String));
        const assoc = byType(rs, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
            .map(inputs)
            .find((a) => a.serviceAccount === "aws-load-balancer-controller")!;
        expect(assoc.namespace).toBe("kube-system");
        const role = rs.find((r) => r.type === "aws:iam/role:Role" && r.name === "aws-load-balancer-controller-role")!;
        expect(assoc.roleArn).toBe(unwrapWire(role.outputs.arn));
        const trust = JSON.parse(inputs(role).assumeRolePolicy);
        expect(JSON.stringify(trust)).toContain("aws-load-balancer-controller");
        // The gateway's Service is what the controller provisions: an NLB by its class.
        expect(JSON.stringify(rs.map(inputs))).toContain('"loadBalancerClass":"service.k8s.aws/nlb"');
    });

    it("the EKS cluster is protected and retained on delete (resources.json records it)", async () => {
        const { resourcesJson } = await import("../tools/outputs");
        const cluster = (resourcesJson(rs) as any[]).find((r) => r.type === "aws:eks/cluster:Cluster");
        expect(cluster.options).toEqual({ protect: true, retainOnDelete: true, deleteBeforeReplace: false });
    });
});
