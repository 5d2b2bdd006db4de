import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { BackendFabric } from "../components/spoke/BackendFabric";
import { FrontendNetwork } from "../components/spoke/FrontendNetwork";
import { GpuNodePool } from "../components/spoke/GpuNodePool";
import { GpuOperator } from "../components/spoke/GpuOperator";
import { prometheusOf } from "../config/observability";
import type { OnPremSpokeConfig } from "../config/stack";
import { INFERENCE_NAMESPACE, PLATFORM_NAMESPACE } from "../lib/labels";
import { placementPools, type SpokeInfra } from "./spoke-infra";

/**
 * The infrastructure of an on-prem spoke (an existing Kubernetes cluster reached through a kubeconfig context): the
 * Kubernetes provider, the platform and inference namespaces, one GpuNodePool per `platform:nodePools` entry
 * (labels, GPU taint, rail table on the nodes), the GPU Operator with GPUDirect RDMA, the rail-aligned InfiniBand
 * backend (Network Operator, one RDMA resource per rail; one IP pool and IPoIB network per rail only with
 * `platform:backend.railNetworks`) and the frontend description.
 * Workloads go on top with programs/workloads.ts `deployWorkloads`.
 */
export function buildOnPremInfra(cfg: OnPremSpokeConfig): SpokeInfra {
    const provider = new k8s.Provider("k8s", {
        context: cfg.cluster.kubeconfigContext,
        enableServerSideApply: true,
    });
    const opts: pulumi.ComponentResourceOptions = { providers: [provider] };

    const platformNamespace = new k8s.core.v1.Namespace("platform-ns", { metadata: { name: PLATFORM_NAMESPACE } }, { provider });
    const inferenceNamespace = new k8s.core.v1.Namespace("inference-ns", { metadata: { name: INFERENCE_NAMESPACE } }, { provider });

    const pools = cfg.nodePools.map((p) => new GpuNodePool(`pool-${p.name}`, { pool: p, fabric: cfg.backend.fabric }, opts));
    // The Network Operator (BackendFabric) deploys NFD on these nodes; the GPU Operator's own stays off.
    const gpuOperator = new GpuOperator(
        "gpu-operator",
        {
            ...cfg.gpuOperator,
            externalNfd: true,
            ...(cfg.observability.prometheusOperator ? { serviceMonitorLabels: prometheusOf(cfg.observability).selectorLabels } : {}),
        },
        opts,
    );
    const fabric = new BackendFabric(
        "backend",
        {
            pools: cfg.nodePools,
            railPools: cfg.railPools,
            rdmaHcaMax: cfg.backend.rdmaHcaMax,
            perNodeBlockSize: cfg.backend.perNodeBlockSize,
            railNetworks: cfg.backend.railNetworks,
            workloadNamespace: INFERENCE_NAMESPACE,
        },
        { ...opts, dependsOn: [inferenceNamespace] },
    );
    const frontend = new FrontendNetwork(
        "frontend",
        {
            pools: cfg.nodePools,
            subnet: cfg.frontend.subnet,
            linkRateGbps: cfg.frontend.linkRateGbps,
            namespace: platformNamespace.metadata.name,
        },
        opts,
    );

    const placement = placementPools(cfg);
    return {
        provider,
        platformNamespace,
        inferenceNamespace,
        pools: cfg.nodePools.map((p, i) => ({
            ...placement[i],
            nodeSelector: pools[i].nodeSelector,
            tolerations: pools[i].tolerations,
            memlockUnlimited: p.memlockUnlimited,
            fabric: "infiniband",
            rdmaResources: fabric.railResources,
            frontendHcas: frontend.description.pools[p.name]?.hcas ?? p.profile.frontend.map((f) => f.hca),
            hugepages2MiPerNode: 0,
        })),
        systemNodeSelector: cfg.serving.systemNodeSelector ?? {},
        devicePlugins: [fabric],
        gpuDirect: [gpuOperator],
        gpuDirectMode: cfg.gpuOperator.gpuDirectRdma,
        minLinkRateGbps: cfg.backend.minLinkRateGbps,
        outputs: {
            railResources: fabric.railResources,
            // Only with platform:backend.railNetworks: the NADs RDMA CM pods annotate (docs/architecture.md "Rail networks").
            ...(cfg.backend.railNetworks ? { railNetworks: fabric.railNetworks } : {}),
            nodeSelectors: Object.fromEntries(pools.map((p, i) => [cfg.nodePools[i].name, p.nodeSelector])),
            frontendHcas: frontend.frontendHcas,
        },
    };
}
