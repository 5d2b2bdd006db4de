/**
 * Every pinned upstream version in one place. Charts are installed by exact version; images are
 * referenced by exact tag. Each entry names where the pin comes from. Bump here, nowhere else.
 */
export const versions = {
    /**
     * NVIDIA Network Operator Helm chart (https://helm.ngc.nvidia.com/nvidia, chart `network-operator`).
     * The chart no longer renders a NicClusterPolicy; we own that CR (reference/rdma.md §1.2).
     */
    networkOperator: { repo: "https://helm.ngc.nvidia.com/nvidia", chart: "network-operator", version: "26.4.0" },
    /**
     * Mellanox k8s-rdma-shared-dev-plugin image. >= v1.4.0 for the kubelet-restart re-registration fix
     * (PR #82), >= v1.1.0 for fail-on-missing-devices (PR #24/#26); v1.5.3 is the latest tag
     * (reference/rdma-failures.md #1, #2, #5).
     */
    rdmaSharedDevicePlugin: { repository: "ghcr.io/mellanox", image: "k8s-rdma-shared-dev-plugin", version: "v1.5.3" },
    /** NVIDIA IPAM plugin (nv-ipam) deployed through NicClusterPolicy.spec.nvIpam. */
    nvIpam: { repository: "ghcr.io/mellanox", image: "nvidia-k8s-ipam", version: "v0.3.7" },
    /** Standard CNI plugins (containernetworking/plugins) deployed through NicClusterPolicy.spec.secondaryNetwork. */
    cniPlugins: { repository: "ghcr.io/k8snetworkplumbingwg", image: "plugins", version: "v1.6.2-update.1" },
    /** Multus thick plugin deployed through NicClusterPolicy.spec.secondaryNetwork. */
    multus: { repository: "ghcr.io/k8snetworkplumbingwg", image: "multus-cni", version: "v4.1.0" },
    /** IPoIB CNI deployed through NicClusterPolicy.spec.secondaryNetwork. */
    ipoibCni: { repository: "ghcr.io/mellanox", image: "ipoib-cni", version: "v1.2.1" },
    /**
     * NVIDIA GPU Operator Helm chart (https://helm.ngc.nvidia.com/nvidia, chart `gpu-operator`).
     * GPUDirect RDMA: DMA-BUF (open kernel modules) by default, legacy nvidia-peermem selectable
     * (NVIDIA/cloud-native-docs gpu-operator/gpu-operator-rdma.rst).
     */
    gpuOperator: { repo: "https://helm.ngc.nvidia.com/nvidia", chart: "gpu-operator", version: "v25.10.1" },
} as const;
