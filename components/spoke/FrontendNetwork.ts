import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { NodePool } from "../../config/stack";

/** Inputs of {@link FrontendNetwork}. */
export interface FrontendNetworkArgs {
    /** The GPU node pools whose profiles' frontend NICs (HCA, netdev) the description lists, per pool. */
    pools: NodePool[];
    /** Node addresses on the north-south Ethernet. */
    subnet: string;
    /** Per-port rate in Gb/s (gigabits per second, e.g. 200 for the 2x200G frontend). */
    linkRateGbps: number;
    /** Namespace of the ConfigMap that describes the frontend (shared platform namespace). */
    namespace: pulumi.Input<string>;
}

/** The frontend as data: which HCAs/netdevs are north-south, per pool. */
export interface FrontendDescription {
    subnet: string;
    linkRateGbps: number;
    pools: Record<string, { hcas: string[]; netdevs: string[] }>;
}

/** Pure: the frontend description for a set of pools. */
export function describeFrontend(args: Omit<FrontendNetworkArgs, "namespace">): FrontendDescription {
    const pools: FrontendDescription["pools"] = {};
    for (const p of args.pools) {
        pools[p.name] = { hcas: p.profile.frontend.map((f) => f.hca), netdevs: p.profile.frontend.map((f) => f.netdev) };
    }
    return { subnet: args.subnet, linkRateGbps: args.linkRateGbps, pools };
}

/**
 * The 2 x 200 GbE north-south side (requests, SSE tokens, control plane, metrics, weight pulls) recorded as
 * data: a ConfigMap `frontend-network` listing each pool's frontend HCAs and netdevs. It creates no network
 * (the node's primary interface is the pod network); it exists so policies and the preflight can prove KV
 * traffic is never pinned to these NICs.
 */
export class FrontendNetwork extends pulumi.ComponentResource {
    public readonly description: FrontendDescription;
    /** Every frontend HCA name across pools (never allowed in UCX_NET_DEVICES / NCCL_IB_HCA / Mooncake devices). */
    public readonly frontendHcas: string[];

    constructor(name: string, args: FrontendNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:FrontendNetwork", name, {}, opts);
        this.description = describeFrontend(args);
        this.frontendHcas = [...new Set(Object.values(this.description.pools).flatMap((p) => p.hcas))].sort();
        new k8s.core.v1.ConfigMap(
            `${name}-description`,
            {
                metadata: { name: "frontend-network", namespace: args.namespace },
                data: { "frontend.json": JSON.stringify(this.description) },
            },
            { parent: this },
        );
        this.registerOutputs({ frontendHcas: this.frontendHcas });
    }
}
