/**
 * Rail IP networks (IPoIBNetwork + nv-ipam IPPool, Multus and IPoIB CNI): rendered only with
 * `platform:backend.railNetworks: true`, because only RDMA CM needs an IP on a rail and a NetworkAttachmentDefinition
 * takes effect only in a pod whose `k8s.v1.cni.cncf.io/networks` annotation names it (upstream/activation.ts
 * `ipoib-rail-networks`). The pack's rdma-cm-rail-networks is run on the real render of spoke-hn1, off and on.
 */
import { describe, expect, it } from "vitest";
import { rdmaCmRailNetworks } from "../policies/rdma-workloads";
import { MULTUS_NETWORKS_ANNOTATION, parseNetworkSelections } from "../upstream/network-attachment";
import { referenceableOutputs, unwrapWire } from "../tools/wire";
import type { CapturedResource } from "../tools/harness";
import { byType, flatConfig, inputs, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";
import { component, edit, mainOf, setEnv, violations } from "./policies/rdma-fixtures";

const IPOIB = "kubernetes:mellanox.com/v1alpha1:IPoIBNetwork";
const IPPOOL = "kubernetes:nv-ipam.nvidia.com/v1alpha1:IPPool";
const NCP = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy";
const DGD = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment";

/** spoke-hn1 rendered with `platform:backend.railNetworks: true` (against the rendered hub). */
async function hn1WithRailNetworks() {
    const hub = await runRepoStack("hub-prod");
    const doc = stackConfigDoc("spoke-hn1");
    doc["platform:backend"] = { ...doc["platform:backend"], railNetworks: true };
    return runRepoStack("spoke-hn1", {
        config: flatConfig(doc),
        stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hub.outputs), secretOutputNames: [] } },
    });
}

/** Every pod template's annotations in the rendered DGDs (component pod templates). */
function podAnnotations(rs: CapturedResource[]): Array<Record<string, string>> {
    return byType(rs, DGD).flatMap((r) => (inputs(r).spec.components as any[]).map((c) => c.podTemplate?.metadata?.annotations ?? {}));
}

/** The llama-70b graph's prefill worker switched to RDMA CM, optionally with an annotation on its pod. */
function rdmacmPrefill(rs: CapturedResource[], annotation?: string): CapturedResource[] {
    return edit(
        rs,
        "DynamoGraphDeployment",
        (o) => {
            setEnv(mainOf(o, "prefill"), "UCX_SOCKADDR_TLS_PRIORITY", "rdmacm");
            if (annotation === undefined) return;
            const pt = component(o, "prefill").podTemplate;
            pt.metadata = { ...pt.metadata, annotations: { ...pt.metadata?.annotations, [MULTUS_NETWORKS_ANNOTATION]: annotation } };
        },
        "llama-70b",
    );
}

const ALL_RAILS = [0, 1, 2, 3, 4, 5, 6, 7];

describe("rail networks off (the shipped on-prem spokes)", () => {
    it("renders no IPoIBNetwork, IPPool, secondaryNetwork or nvIpam, and no pod asks Multus for a network", async () => {
        for (const stack of ["spoke-hn1", "spoke-hcm1"]) {
            const { spoke } = await runHubAndSpoke(stack);
            expect(byType(spoke.resources, IPOIB), stack).toEqual([]);
            expect(byType(spoke.resources, IPPOOL), stack).toEqual([]);
            const [ncp] = byType(spoke.resources, NCP).map(inputs);
            expect(Object.keys(ncp.spec), stack).toEqual(["rdmaSharedDevicePlugin"]);
            for (const a of podAnnotations(spoke.resources)) expect(a).not.toHaveProperty([MULTUS_NETWORKS_ANNOTATION]);
            expect(spoke.outputs).not.toHaveProperty("railNetworks");
        }
    });

    it("the platform's own workloads (UCX verbs, Mooncake, NCCL) pass rdma-cm-rail-networks; RDMA CM is refused, naming the key", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1");
        expect(await violations([rdmaCmRailNetworks], spoke.resources)).toEqual([]);
        const msgs = await violations([rdmaCmRailNetworks], rdmacmPrefill(spoke.resources));
        expect(msgs).toHaveLength(8);
        expect(msgs[3]).toMatch(
            /uses RDMA CM on rail 3 \(mlx5_5\) but the stack renders no network on its netdev ibp94s0\. Fix: set platform:backend\.railNetworks: true and attach inference\/h200-rail-3\.$/,
        );
    });
});

describe("rail networks on (platform:backend.railNetworks: true)", () => {
    it("one IPPool and one IPoIBNetwork per rail, rail i on GPU i's netdev, NADs in the inference namespace", async () => {
        const spoke = await hn1WithRailNetworks();
        const [ncp] = byType(spoke.resources, NCP).map(inputs);
        expect(Object.keys(ncp.spec).sort()).toEqual(["nvIpam", "rdmaSharedDevicePlugin", "secondaryNetwork"]);
        expect(Object.keys(ncp.spec.secondaryNetwork).sort()).toEqual(["cniPlugins", "ipoib", "multus"]);
        const pools = byType(spoke.resources, IPPOOL).map(inputs);
        expect(pools.map((p) => [p.metadata.name, p.spec.subnet])).toEqual(ALL_RAILS.map((r) => [`rail-${r}`, `10.64.${r * 16}.0/20`]));
        const nets = byType(spoke.resources, IPOIB).map(inputs);
        // config/node-profiles/dgx-h200.yaml: rail i is GPU i's HCA; its netdev is the IPoIBNetwork's master.
        expect(nets.map((n) => [n.metadata.name, n.spec.master, JSON.parse(n.spec.ipam).poolName, n.spec.networkNamespace])).toEqual(
            ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0"].map((netdev, r) => [
                `h200-rail-${r}`,
                netdev,
                `rail-${r}`,
                "inference",
            ]),
        );
        expect(unwrapWire(spoke.outputs.railNetworks)).toEqual({ h200: ALL_RAILS.map((r) => `h200-rail-${r}`) });
    });

    it("rdma-cm-rail-networks: refused unattached or in the wrong namespace, accepted with every requested rail attached", async () => {
        const rs = (await hn1WithRailNetworks()).resources;
        expect(await violations([rdmaCmRailNetworks], rs)).toEqual([]);
        const bare = await violations([rdmaCmRailNetworks], rdmacmPrefill(rs));
        expect(bare).toHaveLength(8);
        expect(bare[1]).toMatch(
            /uses RDMA CM on rail 1 \(mlx5_3\) but attaches no network on its netdev ibp64s0\. Fix: attach network inference\/h200-rail-1\.$/,
        );
        const all = ALL_RAILS.map((r) => `inference/h200-rail-${r}`).join(",");
        expect(await violations([rdmaCmRailNetworks], rdmacmPrefill(rs, all))).toEqual([]);
        // A bare name is looked up in the pod's namespace (inference), where the NADs are: attached.
        const bareNames = ALL_RAILS.map((r) => `h200-rail-${r}`).join(", ");
        expect(await violations([rdmaCmRailNetworks], rdmacmPrefill(rs, bareNames))).toEqual([]);
        // The JSON form counts the same.
        const json = JSON.stringify(ALL_RAILS.map((r) => ({ name: `h200-rail-${r}`, namespace: "inference" })));
        expect(await violations([rdmaCmRailNetworks], rdmacmPrefill(rs, json))).toEqual([]);
        // One rail missing, one in the wrong namespace.
        const wrong = ALL_RAILS.filter((r) => r !== 5)
            .map((r) => (r === 2 ? `default/h200-rail-${r}` : `inference/h200-rail-${r}`))
            .join(",");
        const msgs = await violations([rdmaCmRailNetworks], rdmacmPrefill(rs, wrong));
        expect(msgs.map((m) => m.replace(/^.*?: uses RDMA CM on /, ""))).toEqual([
            "rail 2 (mlx5_4): the annotation names default/h200-rail-2, but the operator creates that NetworkAttachmentDefinition in inference, so Multus attaches nothing on ibp79s0. Fix: attach network inference/h200-rail-2.",
            "rail 5 (mlx5_9) but attaches no network on its netdev ibp192s0. Fix: attach network inference/h200-rail-5.",
        ]);
        // An annotation Multus refuses attaches nothing.
        expect(await violations([rdmaCmRailNetworks], rdmacmPrefill(rs, "a/b/c"))).toEqual([
            expect.stringMatching(/Multus cannot parse the annotation "a\/b\/c", so no rail network is attached/),
        ]);
    });
});

describe("parseNetworkSelections (Multus's annotation grammar)", () => {
    it("text and JSON forms, namespace defaulting to the pod's, @ifname kept", () => {
        expect(parseNetworkSelections(undefined, "inference")).toEqual([]);
        expect(parseNetworkSelections("h200-rail-0, other/h200-rail-1@ib1", "inference")).toEqual([
            { namespace: "inference", name: "h200-rail-0" },
            { namespace: "other", name: "h200-rail-1", interface: "ib1" },
        ]);
        expect(parseNetworkSelections('[{"name":"n1"},{"name":"n2","namespace":"x","interface":"net9"}]', "p")).toEqual([
            { namespace: "p", name: "n1" },
            { namespace: "x", name: "n2", interface: "net9" },
        ]);
        expect(parseNetworkSelections("a/b/c", "p")).toBeUndefined();
        expect(parseNetworkSelections("a@b@c", "p")).toBeUndefined();
        expect(parseNetworkSelections("[not json", "p")).toBeUndefined();
    });
});
