import { createHash } from "crypto";
import { describe, expect, it } from "vitest";
import { SpokeContractSchema } from "../config/contract";
import { unwrapWire, SECRET_SIG, SIG_KEY, UNKNOWN } from "../tools/wire";
import { byType, flatConfig, inputs, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";

describe.each([false, true])("whole stacks under mocks (preview=%s)", (preview) => {
    it("hub: one versioned placement contract per spoke, keys only as secrets, hashes = SHA-256 of the keys", async () => {
        const hub = await runRepoStack("hub-prod", { preview });
        const hubSpokes = (stackConfigDoc("hub-prod")["platform:spokes"] as Array<{ name: string }>).map((s) => s.name).sort();
        // The placement summary is pure config: known even in preview.
        const placement = unwrapWire(hub.outputs.placement) as Record<string, { endpoints: string[]; revision: string }>;
        expect(Object.keys(placement).sort()).toEqual(hubSpokes);
        expect(placement.hn1.endpoints).toEqual(["llama-70b", "qwen3-32b"]);
        // Keys are minted under the ApiKeys component, one per key id, and the output is a top-level secret
        // (unknown until the passwords exist, in preview).
        const [apiKeys] = byType(hub.resources, "platform:hub:ApiKeys");
        const keyIds = (stackConfigDoc("hub-prod")["platform:apiKeys"] as Array<{ id: string }>).map((k) => k.id);
        expect(byType(hub.resources, "random:index/randomPassword:RandomPassword").filter((r) => r.parent === apiKeys.urn)).toHaveLength(keyIds.length);
        if (preview) {
            expect(hub.outputs.apiKeys).toBe(UNKNOWN);
            return;
        }
        expect((hub.outputs.apiKeys as Record<string, unknown>)[SIG_KEY]).toBe(SECRET_SIG);
        const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, unknown>;
        expect(Object.keys(contracts).sort()).toEqual(hubSpokes);
        const hn1 = SpokeContractSchema.parse(contracts.hn1);
        expect(hn1.endpoints.map((e) => e.name)).toEqual(["llama-70b", "qwen3-32b"]);
        expect(hn1.hub).toBe("hub-prod");
        expect(hn1.placementRevision).toBe(placement.hn1.revision);
        const keys = unwrapWire(hub.outputs.apiKeys) as Record<string, string>;
        const model = unwrapWire(hub.outputs.accessModel) as { apiKeys: Array<{ id: string; sha256: string }> };
        expect(model.apiKeys.map((k) => k.id).sort()).toEqual([...keyIds].sort());
        for (const k of model.apiKeys) {
            expect(keys[k.id]).toMatch(/^sk-h200-[0-9a-z]{48}$/);
            expect(k.sha256).toBe(createHash("sha256").update(keys[k.id]).digest("hex"));
        }
        expect(JSON.stringify(hub.outputs.accessModel)).not.toContain("sk-h200-");
    });

    it("spoke: nodes labelled/tainted by SSA patches, one RDMA resource per rail, rail pools and networks", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1", preview);
        const rs = spoke.resources;
        const patches = byType(rs, "kubernetes:core/v1:NodePatch").map(inputs);
        expect(patches.map((p) => p.metadata.name).sort()).toEqual(["hn1-gpu-01", "hn1-gpu-02"]);
        expect(patches[0].metadata.labels).toMatchObject({
            "inference-platform.io/pool": "h200", "inference-platform.io/gpu-product": "NVIDIA-H200",
            "inference-platform.io/rail-topology": "rail-optimized-8", "inference-platform.io/fabric": "infiniband",
        });
        expect(patches[0].spec.taints).toEqual([{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }]);

        const [ncp] = byType(rs, "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy").map(inputs);
        expect(ncp.metadata.name).toBe("nic-cluster-policy");
        const plugin = JSON.parse(ncp.spec.rdmaSharedDevicePlugin.config);
        expect(plugin.configList.map((c: any) => [c.resourceName, c.selectors.ifNames[0]])).toEqual([
            ["rail_0", "ibp24s0"], ["rail_1", "ibp64s0"], ["rail_2", "ibp79s0"], ["rail_3", "ibp94s0"],
            ["rail_4", "ibp154s0"], ["rail_5", "ibp192s0"], ["rail_6", "ibp206s0"], ["rail_7", "ibp220s0"],
        ]);
        expect(ncp.spec.rdmaSharedDevicePlugin.version).toBe("v1.5.3");

        const pools = byType(rs, "kubernetes:nv-ipam.nvidia.com/v1alpha1:IPPool").map(inputs);
        expect(pools.map((p) => [p.metadata.name, p.spec.subnet])).toContainEqual(["rail-1", "10.64.16.0/20"]);
        const nets = byType(rs, "kubernetes:mellanox.com/v1alpha1:IPoIBNetwork").map(inputs);
        const rail1 = nets.find((n) => n.metadata.name === "h200-rail-1")!;
        expect(rail1.spec).toEqual({ networkNamespace: "inference", master: "ibp64s0", ipam: '{"type":"nv-ipam","poolName":"rail-1"}' });

        const gpuOp = byType(rs, "kubernetes:helm.sh/v3:Release").map(inputs).find((r) => r.chart === "gpu-operator")!;
        expect(gpuOp.values.driver).toMatchObject({ kernelModuleType: "open", rdma: { enabled: false, useHostMofed: true } });
    });

    it("spoke: every Kubernetes resource goes through the stack's explicit provider and sits under a component", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hcm1", preview);
        const [provider] = byType(spoke.resources, "pulumi:providers:kubernetes");
        expect(provider).toBeDefined();
        const k8s = spoke.resources.filter((r) => r.custom && r.type.startsWith("kubernetes:"));
        expect(k8s.length).toBeGreaterThan(20);
        for (const r of k8s) expect(r.provider, `${r.type} ${r.name}`).toContain(provider.urn);
        const components = new Set(spoke.resources.filter((r) => r.type.startsWith("platform:spoke:")).map((r) => r.urn));
        const nested = k8s.filter((r) => components.has(r.parent));
        expect(nested.length).toBe(k8s.length - 2); // only the two namespaces live at the stack root
        // hcm1's OEM profile in IB mode: rail 0 is PCI 0000:09:00.0 (ibp9s0f0), rail 3 is 0000:69:00.0 (ibp105s0f0),
        // not in netdev order (NVIDIA/k8s-launch-kit@aa1fef72 presets/UCSC-885A-M8-H22: eth3, eth2 in Ethernet mode).
        const [ncp] = byType(spoke.resources, "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy").map(inputs);
        const list = JSON.parse(ncp.spec.rdmaSharedDevicePlugin.config).configList;
        expect([list[0].selectors.ifNames, list[3].selectors.ifNames]).toEqual([["ibp9s0f0"], ["ibp105s0f0"]]);
    });
});

describe("spoke vs hub contract", () => {
    it("a spoke the hub does not know fails before creating anything, naming the key", async () => {
        const hub = await runRepoStack("hub-prod");
        const { stackFile } = await import("./helpers");
        const cfg = { ...stackFile("spoke-hn1").config };
        const spoke = JSON.parse(cfg["platform:spoke"]);
        cfg["platform:spoke"] = JSON.stringify({ ...spoke, name: "dn1" });
        await expect(runRepoStack("spoke-hn1", { config: cfg, stackOutputs: { "hub-prod": { outputs: hub.outputs, secretOutputNames: [] } } }))
            .rejects.toThrow(/stacks\/Pulumi.spoke-hn1.yaml: invalid stack configuration\n  - platform:spoke.name: spoke "dn1" is not known to hub "organization\/platform\/hub-prod" \(known: hcm1, hn1, sg1\)/);
    });

    it("a placement that does not fit the spoke is refused by the hub, naming the hub file's key", async () => {
        const hubDoc = structuredClone(stackConfigDoc("hub-prod"));
        const llama = (hubDoc["platform:endpoints"] as any[]).find((e) => e.spoke === "hn1" && e.name === "llama-70b");
        llama.kvPool.storeReplicas = 3; // hn1 has 2 GPU nodes: at most one Mooncake store per node
        const err = await runRepoStack("hub-prod", { config: flatConfig(hubDoc) }).then(() => undefined, (e) => e);
        expect(err?.message).toMatch(/stacks\/Pulumi.hub-prod.yaml: invalid stack configuration\n  - platform:endpoints\[0\].kvPool.storeReplicas: 3 Mooncake stores on pool "h200" with 2 node\(s\); at most one store per node \(spoke stacks\/Pulumi.spoke-hn1.yaml would refuse this placement\)/);
        expect((err.capturedResources as Array<{ type: string }>).map((r) => r.type)).toEqual(["pulumi:pulumi:Stack"]);
    });

    it("the spoke still refuses such a contract (one written by an older hub) before any resource is declared", async () => {
        const hub = await runRepoStack("hub-prod");
        const outputs = structuredClone(hub.outputs) as any;
        outputs.spokeContracts.hn1.endpoints[0].kvPool.storeReplicas = 3;
        const err = await runRepoStack("spoke-hn1", { stackOutputs: { "hub-prod": { outputs, secretOutputNames: [] } } }).then(() => undefined, (e) => e);
        expect(err?.message).toMatch(/stacks\/Pulumi.spoke-hn1.yaml: invalid stack configuration\n  - hub output spokeContracts.hn1.endpoints\[0\].kvPool.storeReplicas: 3 Mooncake stores on pool "h200" with 2 node\(s\)/);
        const declared = (err.capturedResources as Array<{ type: string }>).map((r) => r.type);
        expect(declared.filter((t) => !["pulumi:pulumi:Stack", "pulumi:pulumi:StackReference"].includes(t))).toEqual([]);
    });

    it("a hub without aws:region is refused naming the key, before any resource", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        delete doc["aws:region"];
        const err = await runRepoStack("hub-prod", { config: flatConfig(doc) }).then(() => undefined, (e) => e);
        expect(err?.message).toBe("stacks/Pulumi.hub-prod.yaml: invalid stack configuration\n  - aws:region: missing; the hub runs on AWS: set the region of its control plane, e.g. ap-southeast-1");
        expect((err.capturedResources as Array<{ type: string }>).map((r) => r.type)).toEqual(["pulumi:pulumi:Stack"]);
    });
});
