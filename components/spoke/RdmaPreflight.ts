import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { type GpuDirectMode, PREFLIGHT_CONFIGMAP, PREFLIGHT_GPUDIRECT_KEY, PREFLIGHT_KEY, preflightScript } from "../../lib/preflight";

/** Inputs of {@link RdmaPreflight}. */
export interface RdmaPreflightArgs {
    /** Namespace of the RDMA workloads that mount the script. */
    namespace: pulumi.Input<string>;
    /**
     * GPUDirect RDMA mode of the spoke (`platform:gpuOperator.gpuDirectRdma` on-prem; `dmabuf` on EKS). The script
     * proves it per pinned HCA in every pod that holds GPUs: peermem needs nvidia_peermem loaded, DMA-BUF the open
     * GPU kernel modules and Linux >= 5.12, and UCX's memory domain of each rail HCA must show the matching
     * capability in `ucx_info -d` (services/preflight/preflight.sh check 7).
     */
    gpuDirect: GpuDirectMode;
}

/**
 * Ships services/preflight/preflight.sh and the spoke's GPUDirect RDMA mode (key `gpudirect`) into the workload
 * namespace as the ConfigMap `rdma-preflight`; every
 * RDMA workload (Dynamo prefill/decode/KV-pool workers, Mooncake stores) runs it as an init container.
 *
 * @throws Error from the constructor when services/preflight/preflight.sh is missing (lib/preflight.ts `preflightScript`)
 */
export class RdmaPreflight extends pulumi.ComponentResource {
    public readonly configMap: k8s.core.v1.ConfigMap;

    constructor(name: string, args: RdmaPreflightArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:RdmaPreflight", name, {}, opts);
        this.configMap = new k8s.core.v1.ConfigMap(
            `${name}-script`,
            {
                metadata: { name: PREFLIGHT_CONFIGMAP, namespace: args.namespace },
                data: { [PREFLIGHT_KEY]: preflightScript(), [PREFLIGHT_GPUDIRECT_KEY]: `${args.gpuDirect}\n` },
            },
            { parent: this },
        );
        this.registerOutputs({});
    }
}
