import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { versions } from "../../config/versions";
import { GPU_TAINT } from "../../lib/labels";

/** Inputs of {@link GpuOperator}. */
export interface GpuOperatorArgs {
    /**
     * GPUDirect RDMA kernel path. `dmabuf` (default, recommended): open GPU kernel modules, no peer-memory
     * module to rebuild on NIC driver upgrades (gpu-operator#2868). `peermem`: legacy nvidia-peermem
     * (`driver.rdma.enabled=true`), needs MLNX/DOCA OFED. Source: NVIDIA cloud-native-docs gpu-operator-rdma.rst.
     */
    gpuDirectRdma: "dmabuf" | "peermem";
    /** Host-installed NIC drivers instead of the DOCA driver container (`driver.rdma.useHostMofed`). */
    useHostMofed: boolean;
    /**
     * Nodes run the EKS AL2023 NVIDIA AMI with EFA (EKS spokes). The AMI ships the GPU driver and the container
     * toolkit, so the operator must not install them; and the operator's NVIDIA device plugin must not mount every
     * `/dev/infiniband/uverbs*` into GPU containers (`MOFED_ENABLED=false`; k8s-device-plugin >= 0.19 defaults it
     * on, which breaks libfabric's EFA provider: EKS user guide).
     */
    eksEfaAmi?: boolean;
    /**
     * Labels the cluster's Prometheus selects ServiceMonitors by (config/observability.ts `prometheusOf`). Set: the
     * operator creates the DCGM exporter's ServiceMonitor carrying them (`dcgmExporter.serviceMonitor.enabled` +
     * `additionalLabels`; chart default `enabled: false`, so the exporter runs and nobody scrapes it:
     * NVIDIA/gpu-operator@v25.10.1:deployments/gpu-operator/values.yaml, controllers/object_controls.go
     * `ServiceMonitor`, which copies `additionalLabels` onto the object). Unset (no prometheus-operator CRDs): off, since
     * the operator reports the dcgm-exporter state NotReady when the ServiceMonitor CRD is missing.
     */
    serviceMonitorLabels?: Record<string, string>;
    /**
     * Another chart on the cluster already deploys node-feature-discovery (on-prem: the Network Operator, whose NFD
     * worker labels PCI classes 0300/0302 by vendor, giving the `feature.node.kubernetes.io/pci-10de.present` label the
     * GPU Operator selects GPU nodes by: Mellanox/network-operator@v26.1.2:deployment/network-operator/values.yaml
     * `node-feature-discovery.worker.config.sources.pci`, NVIDIA/gpu-operator@v25.10.1:controllers/state_manager.go
     * `gpuNodeLabels`). Then the GPU Operator's own NFD (`nfd.enabled`, default true) stays off: two NFD masters and
     * two workers on the same nodes fight over the same labels and NodeFeature objects.
     */
    externalNfd?: boolean;
    /** Namespace of the release; default `gpu-operator`. */
    namespace?: string;
}

/** `dcgmExporter` values: the exporter on, and its ServiceMonitor labelled for the cluster's Prometheus when one is given. */
export function dcgmExporterValues(serviceMonitorLabels?: Record<string, string>): Record<string, unknown> {
    return serviceMonitorLabels
        ? // honorLabels: keep the exporter's `pod`/`namespace` (the workload the GPU is allocated to) instead of
          // `exported_pod`, so dashboards join GPUs to workers (lib/observability.ts tokensPerGpuExpr).
          { enabled: true, serviceMonitor: { enabled: true, honorLabels: true, additionalLabels: { ...serviceMonitorLabels } } }
        : { enabled: true };
}

/** Helm values for EKS AL2023 NVIDIA AMI nodes with EFA ({@link GpuOperatorArgs.eksEfaAmi}). Pure. */
export function eksGpuOperatorValues(args: Pick<GpuOperatorArgs, "serviceMonitorLabels"> = {}): Record<string, unknown> {
    return {
        driver: { enabled: false },
        toolkit: { enabled: false },
        devicePlugin: { env: [{ name: "MOFED_ENABLED", value: "false" }] },
        // GDRCopy's driver ships in the operator's driver container, which is off here; the preflight checks
        // /dev/gdrdrv on the node [inference: the EKS AL2023 NVIDIA AMI provides it].
        gdrcopy: { enabled: false },
        daemonsets: { tolerations: [{ key: GPU_TAINT.key, operator: "Exists", effect: GPU_TAINT.effect }] },
        dcgmExporter: dcgmExporterValues(args.serviceMonitorLabels),
    };
}

/**
 * Helm values for the GPU Operator chart with GPUDirect RDMA configured. Pure, so tests and policies can
 * check it without mocks. DMA-BUF needs the open kernel modules (`driver.kernelModuleType=open`) and nothing under
 * `driver.rdma`; legacy peermem sets `driver.rdma.enabled=true`, and only then does host OFED add
 * `driver.rdma.useHostMofed=true`: the operator reads `useHostMofed` only through `IsHostMOFED()`, which is false
 * unless `enabled` is true (NVIDIA/gpu-operator@v25.10.1:api/nvidia/v1/clusterpolicy_types.go `IsHostMOFED`,
 * controllers/object_controls.go `transformDriverManagerInitContainer`, `transformPeerMemoryContainer`), so with
 * DMA-BUF it would be inert (upstream/activation.ts `gpu-operator-host-mofed`).
 */
export function gpuOperatorValues(
    args: Pick<GpuOperatorArgs, "gpuDirectRdma" | "useHostMofed" | "externalNfd" | "serviceMonitorLabels">,
): Record<string, unknown> {
    const peermem = args.gpuDirectRdma === "peermem";
    return {
        driver: {
            enabled: true,
            kernelModuleType: "open",
            rdma: peermem ? { enabled: true, ...(args.useHostMofed ? { useHostMofed: true } : {}) } : { enabled: false },
            upgradePolicy: { autoUpgrade: true, drain: { enable: true } },
        },
        ...(args.externalNfd ? { nfd: { enabled: false } } : {}),
        // Tolerate the platform GPU taint (same key as the operator default, explicit so a change is visible).
        daemonsets: { tolerations: [{ key: GPU_TAINT.key, operator: "Exists", effect: GPU_TAINT.effect }] },
        gdrcopy: { enabled: true },
        dcgmExporter: dcgmExporterValues(args.serviceMonitorLabels),
    };
}

/** NVIDIA GPU Operator (pinned chart) with GPUDirect RDMA configured. */
export class GpuOperator extends pulumi.ComponentResource {
    public readonly release: k8s.helm.v3.Release;

    constructor(name: string, args: GpuOperatorArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:GpuOperator", name, {}, opts);
        const ns = args.namespace ?? "gpu-operator";
        const namespace = new k8s.core.v1.Namespace(`${name}-ns`, { metadata: { name: ns } }, { parent: this });
        const v = versions.gpuOperator;
        this.release = new k8s.helm.v3.Release(
            `${name}-gpu-operator`,
            {
                name: "gpu-operator",
                chart: v.chart,
                version: v.version,
                repositoryOpts: { repo: v.repo },
                namespace: ns,
                values: args.eksEfaAmi ? eksGpuOperatorValues(args) : gpuOperatorValues(args),
            },
            { parent: this, dependsOn: [namespace] },
        );
        this.registerOutputs({});
    }
}
