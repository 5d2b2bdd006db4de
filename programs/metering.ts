import type * as pulumi from "@pulumi/pulumi";
import { Metering } from "../components/spoke/Metering";
import type { SpokeContract } from "../config/contract";
import type { MeteringConfig } from "../config/metering";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import type { GatewayHandles } from "./gateway";

/** Inputs of {@link deployMetering}. */
export interface MeteringDeployment {
    /** The spoke's name (`platform:spoke.name`), handed to the metering service. */
    spoke: string;
    /** The spoke's contract from the hub (config/contract.ts): its usage stream and role, and the policy bundle's bucket. */
    contract: SpokeContract;
    /** `platform:metering` of the spoke file (config/metering.ts `MeteringConfigSchema`). */
    metering: MeteringConfig;
    /**
     * Returned by deployGateway: the auth service's counters (Redis URL, secret), where metering releases leases
     * and adds tokens, and the spoke's identity (the operator-installed source key that assumes the spoke's role, or Pod Identity).
     */
    gateway: GatewayHandles;
}

/**
 * Deploys the spoke's usage metering (components/spoke/Metering.ts) from the hub contract (`usage` stream,
 * `policy` role and bundle bucket). Shared by every spoke flavour; pass the stack's Kubernetes provider
 * through `opts.providers` and make it depend on the platform namespace.
 * @throws Error from components/spoke/Metering.ts: a namespace other than the access-log collector's, or a counter
 *   store Secret outside its namespaces
 */
export function deployMetering(d: MeteringDeployment, opts: pulumi.ComponentResourceOptions) {
    const m = d.metering;
    const { redisUrlSecret, identity } = d.gateway;
    const metering = new Metering(
        "metering",
        {
            spoke: d.spoke,
            namespace: PLATFORM_NAMESPACE,
            usage: d.contract.usage,
            policy: d.contract.policy,
            sourceKey: identity.kind === "source-key" ? { slot: identity.slot } : undefined,
            redisUrlSecret,
            replicas: m.replicas,
            spoolVolumeGiB: m.spoolVolumeGiB,
            storageClassName: m.storageClassName,
            collectorReplicas: m.collectorReplicas,
            collectorQueueGiB: m.collectorQueueGiB,
        },
        opts,
    );
    return { stream: d.contract.usage.streamName, logsEndpoint: metering.logsEndpoint };
}
