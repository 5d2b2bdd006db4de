import type { Source } from "./types";

/**
 * Oldest Mellanox k8s-rdma-shared-dev-plugin the platform accepts: v1.4.0 re-registers with the kubelet after a kubelet
 * restart (PR #82; before it allocatable dropped to 0, issues #48/#74/#79). Earlier fixes it includes: no devices
 * advertised that do not exist (#4, v1.0.0), not Ready before the driver loaded the RDMA char devices (#23, v1.1.0).
 * config/versions.ts `rdmaSharedDevicePlugin` pins a release at or above it; the policy pack refuses an older one
 * (policies/rdma-platform.ts `rdma-device-plugin-version`).
 */
export const rdmaSharedDevicePluginMinimum: { readonly version: readonly [number, number, number]; readonly source: Source } = {
    version: [1, 4, 0],
    source: "Mellanox/k8s-rdma-shared-dev-plugin@v1.4.0:pkg/resources/server.go",
};
