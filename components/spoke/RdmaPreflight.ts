import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { PREFLIGHT_CONFIGMAP, PREFLIGHT_KEY, preflightScript } from "../../lib/preflight";

export interface RdmaPreflightArgs {
    /** Namespace of the RDMA workloads that mount the script. */
    namespace: pulumi.Input<string>;
}

/**
 * Ships services/preflight/preflight.sh into the workload namespace as the ConfigMap `rdma-preflight`; every
 * RDMA workload (Dynamo prefill/decode/KV-pool workers, Mooncake stores) runs it as an init container.
 */
export class RdmaPreflight extends pulumi.ComponentResource {
    public readonly configMap: k8s.core.v1.ConfigMap;

    constructor(name: string, args: RdmaPreflightArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:RdmaPreflight", name, {}, opts);
        this.configMap = new k8s.core.v1.ConfigMap(`${name}-script`, {
            metadata: { name: PREFLIGHT_CONFIGMAP, namespace: args.namespace },
            data: { [PREFLIGHT_KEY]: preflightScript() },
        }, { parent: this });
        this.registerOutputs({});
    }
}
