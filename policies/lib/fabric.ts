import type { PolicyResource } from "@pulumi/policy";
import { helmReleases, ofType, type PoolView, type RailEntry, TYPES } from "./resources";
import { run } from "./unknown";

/** One RDMA shared device plugin resource (NicClusterPolicy `spec.rdmaSharedDevicePlugin.config` configList entry). */
export interface PluginResource {
    /** Full extended resource name, `<resourcePrefix>/<resourceName>` (prefix defaults to `rdma`). */
    resource: string;
    resourceName: string;
    rdmaHcaMax?: number;
    vendors: string[];
    deviceIDs: string[];
    linkTypes: string[];
    ifNames: string[];
    index: number;
}

/** The stack's NicClusterPolicy and its parsed plugin config (undefined config = missing or not JSON). */
export interface PluginView {
    ncp: PolicyResource;
    name: string;
    config?: { periodicUpdateInterval?: number; configList: PluginResource[] };
    raw: Record<string, any>;
}

/** Parses the NicClusterPolicy of the stack (the first one; the Network Operator allows one). */
export function rdmaPlugin(resources: PolicyResource[]): PluginView | undefined {
    const ncp = ofType(resources, TYPES.nicClusterPolicy)[0];
    if (!ncp) return undefined;
    return run(() => {
        const plugin = ncp.props.spec?.rdmaSharedDevicePlugin ?? {};
        const view: PluginView = { ncp, name: String(ncp.props.metadata?.name ?? ncp.name), raw: plugin };
        const text = String(plugin.config);
        try {
            const parsed = JSON.parse(text);
            const list = (parsed.configList ?? []).map(
                (c: any, index: number): PluginResource => ({
                    resource: `${c.resourcePrefix ?? "rdma"}/${c.resourceName}`,
                    resourceName: String(c.resourceName),
                    rdmaHcaMax: c.rdmaHcaMax,
                    vendors: c.selectors?.vendors ?? [],
                    deviceIDs: c.selectors?.deviceIDs ?? [],
                    linkTypes: c.selectors?.linkTypes ?? [],
                    ifNames: c.selectors?.ifNames ?? c.devices ?? [],
                    index,
                }),
            );
            view.config = { periodicUpdateInterval: parsed.periodicUpdateInterval, configList: list };
        } catch {
            /* config stays undefined */
        }
        return view;
    });
}

/** Rails of `pool` a plugin resource selects (by the rails' netdevs). */
export function railsOfResource(r: PluginResource, pool: PoolView): RailEntry[] {
    return pool.rails.filter((x) => r.ifNames.includes(x.netdev));
}

/** The GPU Operator releases of the stack and whether each enables GPUDirect RDMA (DMA-BUF or nvidia-peermem). */
export function gpuDirect(resources: PolicyResource[]): { releases: PolicyResource[]; enabled: boolean } {
    const releases = helmReleases(resources, "gpu-operator");
    const enabled = releases.some((r) =>
        run(() => {
            const d = r.props.values?.driver ?? {};
            return d.enabled !== false && (d.rdma?.enabled === true || d.kernelModuleType === "open");
        }),
    );
    return { releases, enabled };
}

/** Helm releases of the AWS EFA device plugin chart. */
export function efaPlugins(resources: PolicyResource[]): PolicyResource[] {
    return helmReleases(resources, "aws-efa-k8s-device-plugin");
}
