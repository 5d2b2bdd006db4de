import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { buildMooncake, type MooncakeArgs, mooncakeKvEventsEndpoint, mooncakeMasterAddress } from "../../lib/mooncake";

/** Inputs of {@link MooncakeStore}: lib/mooncake.ts `MooncakeArgs`. */
export type MooncakeStoreArgs = MooncakeArgs;

/**
 * One endpoint's Mooncake host-RAM KV pool (lib/mooncake.ts): master Deployment + ClusterIP Service, and store
 * pods on the pool's GPU nodes contributing `segmentSizeGiB` of DRAM each over the rail HCAs (protocol rdma,
 * devices = rail HCAs), each behind the RDMA preflight.
 *
 * @throws Error from the constructor when more store replicas are asked than the pool has nodes (lib/mooncake.ts
 *   `buildMooncake`: one store per node)
 */
export class MooncakeStore extends pulumi.ComponentResource {
    /** `host:port` clients use (`MOONCAKE_MASTER`). */
    public readonly masterAddress: string;
    /** The master's KV-event endpoint (`tcp://host:port`), or undefined when the pool image's master publishes none. */
    public readonly kvEventsEndpoint: string | undefined;
    public readonly resources: pulumi.Resource[];

    constructor(name: string, args: MooncakeStoreArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:MooncakeStore", name, {}, opts);
        const m = buildMooncake(args);
        this.masterAddress = mooncakeMasterAddress(args.endpoint, args.namespace);
        this.kvEventsEndpoint = mooncakeKvEventsEndpoint(args.endpoint, args.namespace, args.image);
        const master = new k8s.apps.v1.Deployment(`${name}-master`, m.masterDeployment as k8s.apps.v1.DeploymentArgs, { parent: this });
        const svc = new k8s.core.v1.Service(`${name}-master-svc`, m.masterService as k8s.core.v1.ServiceArgs, { parent: this });
        const store = new k8s.apps.v1.Deployment(`${name}-store`, m.storeDeployment as k8s.apps.v1.DeploymentArgs, {
            parent: this,
            dependsOn: [svc],
        });
        this.resources = [master, svc, store];
        this.registerOutputs({ masterAddress: this.masterAddress });
    }
}
