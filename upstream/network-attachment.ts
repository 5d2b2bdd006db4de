import type { Source } from "./types";

/**
 * How a secondary network reaches a pod, read at the pins of config/versions.ts (Network Operator 26.1.2, whose release
 * set ships the Multus thin plugin) and Multus v4.3.0's annotation parser:
 * - an `IPoIBNetwork` (cluster-scoped) is rendered by the operator as a NetworkAttachmentDefinition of the **same name**
 *   in `spec.networkNamespace`, `default` when empty ({@link ipoibNetworkNad});
 * - Multus attaches a NetworkAttachmentDefinition only to a pod whose `k8s.v1.cni.cncf.io/networks` annotation names it;
 *   a pod without the annotation gets the primary CNI alone ({@link multusNetworksAnnotation}). A NAD no pod names, and
 *   the Multus DaemonSet, IPoIB CNI and nv-ipam pools that serve it, are inert.
 */

/** The pod annotation Multus reads the networks to attach from. */
export const MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks";

/** Where the operator puts an IPoIBNetwork's NetworkAttachmentDefinition, and what it is named. */
export const ipoibNetworkNad = {
    /** Namespace of the NAD when `spec.networkNamespace` is empty. */
    defaultNamespace: "default",
    source: "Mellanox/network-operator@v26.1.2:pkg/state/state_ipoib_network.go#getManifestObjects" as Source,
    note: "manifests/state-ipoib-network/0010-ipoib-net-cr.yaml: NAD `metadata.name` = the IPoIBNetwork's name, `metadata.namespace` = spec.networkNamespace (or `default`), CNI config `type: ipoib`, `master` = spec.master, `ipam` = spec.ipam",
} as const;

/** The annotation's grammar and the condition under which Multus attaches anything. */
export const multusNetworksAnnotation = {
    annotation: MULTUS_NETWORKS_ANNOTATION,
    source: "k8snetworkplumbingwg/multus-cni@v4.3.0:pkg/k8sclient/k8sclient.go#GetPodNetwork" as Source,
    note:
        "no annotation: NoK8sNetworkError, only the cluster network is set up. Text form: comma-separated `[<namespace>/]<name>[@<ifname>]` " +
        '(parsePodNetworkObjectName); JSON form when the value contains `[`, `{` or `"`: a list of NetworkSelectionElement ' +
        "(`name`, `namespace`, `interface`, ...). An entry without a namespace is looked up in the pod's own namespace " +
        '(parsePodNetworkAnnotation); docs/how-to-use.md "Run pod with network annotation"',
} as const;

/** One network a pod asks Multus for. */
export interface NetworkSelection {
    namespace: string;
    name: string;
    /** Interface name requested inside the pod (`@ifname` / `interface`). */
    interface?: string;
}

/**
 * Parses a `k8s.v1.cni.cncf.io/networks` value the way Multus does ({@link multusNetworksAnnotation}): JSON list or
 * comma-separated `[ns/]name[@if]`, namespace defaulting to the pod's.
 *
 * @param value the annotation value (`undefined`/empty: no networks)
 * @param podNamespace the pod's namespace
 * @returns the selections, or `undefined` when Multus would refuse the value (bad JSON, more than one `/` or `@`)
 */
export function parseNetworkSelections(value: string | undefined, podNamespace: string): NetworkSelection[] | undefined {
    if (value === undefined || value.trim() === "") return [];
    if (/[[{"]/.test(value)) {
        let parsed: unknown;
        try {
            parsed = JSON.parse(value);
        } catch {
            return undefined;
        }
        if (!Array.isArray(parsed)) return undefined;
        return parsed.map((e: { name?: unknown; namespace?: unknown; interface?: unknown }) => ({
            name: String(e?.name ?? ""),
            namespace: typeof e?.namespace === "string" && e.namespace !== "" ? e.namespace : podNamespace,
            ...(typeof e?.interface === "string" && e.interface !== "" ? { interface: e.interface } : {}),
        }));
    }
    const out: NetworkSelection[] = [];
    for (const raw of value.split(",")) {
        const slash = raw.trim().split("/");
        if (slash.length > 2) return undefined;
        const at = slash[slash.length - 1].split("@");
        if (at.length > 2) return undefined;
        const ns = slash.length === 2 ? slash[0].trim() : "";
        out.push({
            namespace: ns === "" ? podNamespace : ns,
            name: at[0].trim(),
            ...(at.length === 2 && at[1].trim() !== "" ? { interface: at[1].trim() } : {}),
        });
    }
    return out;
}

/**
 * The text-form annotation value attaching the given NetworkAttachmentDefinitions in this order
 * (`inference/h200-rail-0,inference/h200-rail-1`): namespaced, so it holds whatever namespace the pod is in.
 */
export function networkSelectionsAnnotation(namespace: string, names: readonly string[]): string {
    return names.map((n) => `${namespace}/${n}`).join(",");
}
