import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { versions } from "../../config/versions";
import { efaDevicePluginValues } from "../../lib/efa";
import { GPU_TAINT } from "../../lib/labels";

/** Inputs of {@link EfaDevicePlugin}. */
export interface EfaDevicePluginArgs {
    /** Instance types of every EFA node group; the chart's allowlist is set to exactly these. */
    instanceTypes: string[];
    /** Namespace of the DaemonSet (the chart's documented install uses kube-system); default `kube-system`. */
    namespace?: string;
}

/**
 * The AWS EFA device plugin (pinned chart `eks/aws-efa-k8s-device-plugin`), which advertises
 * `vpc.amazonaws.com/efa` on EFA nodes. Its DaemonSet has a required node affinity on
 * `supportedInstanceLabels.values`; a type missing there leaves the DaemonSet at DESIRED=0 with no event and
 * workloads on TCP, so the list is set from the node groups and checked by the policy
 * pack. It tolerates the platform GPU taint (the chart default tolerates only CriticalAddonsOnly).
 * Exactly one EFA mechanism per node: no EFA DRA driver alongside.
 *
 * @throws Error from the constructor when `instanceTypes` is empty (lib/efa.ts {@link efaDevicePluginValues})
 */
export class EfaDevicePlugin extends pulumi.ComponentResource {
    public readonly release: k8s.helm.v3.Release;

    constructor(name: string, args: EfaDevicePluginArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:EfaDevicePlugin", name, {}, opts);
        const v = versions.efaDevicePlugin;
        this.release = new k8s.helm.v3.Release(
            `${name}-release`,
            {
                name: "aws-efa-k8s-device-plugin",
                chart: v.chart,
                version: v.version,
                repositoryOpts: { repo: v.repo },
                namespace: args.namespace ?? "kube-system",
                values: efaDevicePluginValues(args.instanceTypes, GPU_TAINT.key),
            },
            { parent: this },
        );
        this.registerOutputs({});
    }
}
