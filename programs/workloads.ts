import type * as pulumi from "@pulumi/pulumi";
import type { SpokeContract } from "../config/contract";
import { renderedRevisions } from "../lib/rollout";
import { endpointGpus } from "../config/endpoint";
import type { SpokeConfig } from "../config/stack";
import { Observability } from "../components/spoke/Observability";
import { prometheusOf } from "../config/observability";
import { deployGateway, type GatewayHandles } from "./gateway";
import { deployMetering } from "./metering";
import { deployServing } from "./serving";
import type { SpokeInfra } from "./spoke-infra";

/** The provider-independent part of a spoke's config the workloads read. */
export type WorkloadConfig = Pick<SpokeConfig, "spoke" | "gateway" | "serving" | "metering" | "observability">;

/**
 * The workloads every spoke runs on its infrastructure, whatever the provider: the Agent Router and auth service
 * (programs/gateway.ts; NetworkPolicy into the inference namespace), Dynamo serving for the endpoints the hub placed
 * here (programs/serving.ts), and usage metering shipping to the hub (programs/metering.ts), in that order (metering
 * shares the gateway's counters and credentials), then dashboards, alerts and scrape objects (components/spoke/Observability.ts). Every resource gets `infra.provider`; resource names and parents
 * are the same as when each spoke flavour deployed them itself, so URNs do not move.
 *
 * Everything that can refuse the stack (hub contract, credentials, placement fit) is checked by the caller before
 * the first resource is declared (programs/spoke.ts), so nothing here is half-applied.
 *
 * @param identity programs/gateway.ts `spokeIdentityKind`: the operator-installed source key (on-prem) or EKS Pod Identity
 * @returns the stack outputs of the workloads (`serving`, `gateway`, `metering`)
 * @throws ConfigError naming the stack file when a placement does not fit this spoke's pools, and Error when a pool's
 *   fabric needs RDMA resources its device plugin does not advertise (programs/serving.ts `deployServing`); the
 *   components' own guards (components/spoke/AgentRouter.ts, components/spoke/Metering.ts) throw Error on a programming
 *   mistake the caller's checks exclude
 */
export function deployWorkloads(
    cfg: WorkloadConfig,
    contract: SpokeContract,
    infra: SpokeInfra,
    stackFile: string,
    identity: GatewayHandles["identity"],
) {
    const opts: pulumi.ComponentResourceOptions = { providers: [infra.provider] };
    const gateway = deployGateway(
        {
            spoke: cfg.spoke.name,
            contract,
            gateway: cfg.gateway,
            identity,
            loadBalancerProvisioner: infra.loadBalancerProvisioner,
        },
        { ...opts, dependsOn: [infra.inferenceNamespace] },
    );
    const serving = deployServing(
        { spoke: cfg.spoke.name, serving: cfg.serving, prometheusUrl: prometheusOf(cfg.observability).url, contract, stackFile, infra },
        opts,
    );
    // PVCs (spool, collector queue) need a StorageClass that provisions: EKS gets one from the infra (EBS CSI, gp3).
    const metering = deployMetering(
        {
            spoke: cfg.spoke.name,
            contract,
            gateway: gateway.handles,
            metering: { ...cfg.metering, storageClassName: cfg.metering.storageClassName ?? infra.storage?.className },
        },
        { ...opts, dependsOn: [infra.platformNamespace, ...(infra.storage?.dependsOn ?? [])] },
    );
    const observability = new Observability(
        "observability",
        {
            spoke: cfg.spoke.name,
            config: cfg.observability,
            // Every graph, both revisions during a rollout (each scraped with its own Dynamo namespace).
            endpoints: renderedRevisions(contract.endpoints).map(({ graph: e }) => ({
                name: e.name,
                model: e.model,
                engine: e.engine,
                gpus: endpointGpus(e),
                disaggregated: e.topology.mode === "disaggregated",
                mooncakePool: e.kvPool.kind === "mooncake",
            })),
        },
        { ...opts, dependsOn: [infra.platformNamespace] },
    );
    return { serving, gateway: gateway.outputs, metering, observability: { dashboards: observability.dashboards } };
}
