import type * as pulumi from "@pulumi/pulumi";
import { DynamoPlatform } from "../components/spoke/DynamoPlatform";
import { ModelEndpoint } from "../components/spoke/ModelEndpoint";
import { MooncakeStore } from "../components/spoke/MooncakeStore";
import { RdmaPreflight } from "../components/spoke/RdmaPreflight";
import type { SpokeContract } from "../config/contract";
import { ConfigError } from "../config/errors";
import type { ServingConfig } from "../config/serving";
import { versions } from "../config/versions";
import type { PoolPlacement } from "../lib/dgd";
import { INFERENCE_NAMESPACE } from "../lib/labels";
import { kvFabricOf } from "../lib/nixl";
import { placedGraphs } from "../lib/rollout";
import { placeEndpoints, unpublishedRdmaResources } from "../lib/serving";
import type { SpokeInfra } from "./spoke-infra";

/** What the serving layer needs from the rest of the spoke, on-prem and EKS alike. */
export interface ServingInputs {
    /** `platform:spoke.name` (names the hub's contract in errors). */
    spoke: string;
    /** `platform:serving`. */
    serving: ServingConfig;
    /**
     * Prometheus URL the Planner queries when `platform:serving.prometheusEndpoint` is unset: the Prometheus of
     * `platform:observability` (config/observability.ts `prometheusOf`).
     */
    prometheusUrl: string;
    contract: SpokeContract;
    stackFile: string;
    /** The spoke's infrastructure (programs/onprem-spoke.ts, programs/eks-spoke.ts). */
    infra: SpokeInfra;
}

/** Per endpoint: the pool it runs on and its frontend Service (for the gateway). */
export type ServingOutputs = Record<string, { pool: string; frontend: { name: string; namespace: string; port: number } }>;

/**
 * The spoke's serving layer: the Dynamo platform, the RDMA preflight script, and per endpoint of the
 * hub's placement a Mooncake pool (when configured) and a ModelEndpoint (DynamoGraphDeployment) on its GPU pool, with
 * the transport generated from the pool's fabric (lib/nixl.ts: UCX on InfiniBand rails; libfabric/EFA with
 * `vpc.amazonaws.com/efa` and `hugepages-2Mi` on EKS). Frontend, Planner and Mooncake master go to
 * `infra.systemNodeSelector`. Pass the stack's Kubernetes provider through `opts.providers`.
 *
 * @throws ConfigError naming the stack file when a placement does not fit this spoke's pools (worker larger than a
 *   node, pool too small, Mooncake stores beyond the node count or on EFA, no pool mapping with several pools)
 * @throws Error when a pool's fabric needs RDMA resources its device plugin does not advertise
 */
export function deployServing(s: ServingInputs, opts: pulumi.ComponentResourceOptions): ServingOutputs {
    const { serving, contract, infra } = s;
    const prometheusEndpoint = serving.prometheusEndpoint ?? s.prometheusUrl;
    // Both revisions of an endpoint under a rollout are placed, each its own graph (lib/rollout.ts placedGraphs).
    const placed = placedGraphs(contract.endpoints, serving);
    const { placements, issues } = placeEndpoints(placed.graphs, infra.pools, placed.serving, `hub output spokeContracts.${s.spoke}`);
    if (issues.length) throw new ConfigError(s.stackFile, issues);
    const outputs: ServingOutputs = {};
    if (placements.length === 0) return outputs;

    const platform = new DynamoPlatform(
        "dynamo",
        {
            namespace: serving.platformNamespace,
            grove: serving.grove,
            kaiScheduler: serving.kaiScheduler,
            prometheusEndpoint,
        },
        opts,
    );
    const baseDeps = [...infra.gpuDirect, infra.inferenceNamespace];
    const preflight = new RdmaPreflight(
        "rdma-preflight",
        { namespace: INFERENCE_NAMESPACE, gpuDirect: infra.gpuDirectMode },
        { ...opts, dependsOn: baseDeps },
    );
    const rdmaDeps = [platform, preflight, ...infra.devicePlugins, ...baseDeps];

    for (const { endpoint: e, pool } of placements) {
        const fabric = kvFabricOf(pool.profile, pool.frontendHcas);
        const missing = unpublishedRdmaResources(fabric, pool.rdmaResources);
        if (missing.length)
            throw new Error(
                `pool ${pool.name}: RDMA resource(s) ${missing.join(", ")} are not advertised by this spoke's device plugin (${pool.rdmaResources.join(", ") || "none"})`,
            );
        const placement: PoolPlacement = {
            name: pool.name,
            nodeSelector: pool.nodeSelector,
            tolerations: pool.tolerations,
            memlockUnlimited: pool.memlockUnlimited,
            fabric,
            ...(pool.hugepages2MiPerNode > 0 ? { hugepages2MiPerNode: pool.hugepages2MiPerNode } : {}),
            ...(pool.profile.localNvme ? { localNvme: { ...pool.profile.localNvme } } : {}),
        };
        let mooncakeMaster: string | undefined;
        let mooncakeKvEvents: string | undefined;
        const deps: pulumi.Resource[] = [...rdmaDeps];
        const rt = versions.dynamoRuntime[e.engine];
        if (e.kvPool.kind === "mooncake") {
            // Master and store run the endpoint's own runtime image: its mooncake-transfer-engine wheel ships the
            // `mooncake_master` console script and `mooncake.mooncake_store_service` (kvcache-ai/Mooncake@v0.3.12.post1:
            // mooncake-wheel/pyproject.toml [project.scripts]), so pool and clients run one Mooncake release by
            // construction (upstream/check/versions.ts `mooncake-master-client`).
            const store = new MooncakeStore(
                `mooncake-${e.name}`,
                {
                    endpoint: e.name,
                    namespace: INFERENCE_NAMESPACE,
                    image: `${rt.image}:${rt.version}`,
                    pool: placement,
                    segmentSizeGiB: e.kvPool.segmentSizeGiB,
                    storeReplicas: e.kvPool.storeReplicas,
                    poolNodes: pool.nodeCount,
                    minLinkRateGbps: infra.minLinkRateGbps,
                    systemNodeSelector: infra.systemNodeSelector,
                },
                { ...opts, dependsOn: rdmaDeps },
            );
            mooncakeMaster = store.masterAddress;
            mooncakeKvEvents = store.kvEventsEndpoint;
            deps.push(store);
        }
        const rev = placed.revisions.find((r) => r.graph.name === e.name);
        const ep = new ModelEndpoint(
            `endpoint-${e.name}`,
            {
                endpoint: e,
                namespace: INFERENCE_NAMESPACE,
                pool: placement,
                runtimeImage: `${rt.image}:${rt.version}`,
                plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
                prometheusEndpoint,
                minLinkRateGbps: infra.minLinkRateGbps,
                hfTokenSecret: serving.hfTokenSecret,
                mooncakeMaster,
                mooncakeKvEvents,
                systemNodeSelector: infra.systemNodeSelector,
                revisionOf: rev?.revision ? { endpoint: rev.endpoint, revision: rev.revision } : undefined,
            },
            { ...opts, dependsOn: deps },
        );
        outputs[e.name] = { pool: pool.name, frontend: ep.frontend };
    }
    return outputs;
}
