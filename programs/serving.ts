import * as pulumi from "@pulumi/pulumi";
import type { BackendFabric } from "../components/spoke/BackendFabric";
import { DynamoPlatform } from "../components/spoke/DynamoPlatform";
import type { FrontendNetwork } from "../components/spoke/FrontendNetwork";
import type { GpuNodePool } from "../components/spoke/GpuNodePool";
import { ModelEndpoint } from "../components/spoke/ModelEndpoint";
import { MooncakeStore } from "../components/spoke/MooncakeStore";
import { RdmaPreflight } from "../components/spoke/RdmaPreflight";
import type { SpokeContract } from "../config/contract";
import { ConfigError } from "../config/errors";
import type { OnPremSpokeConfig } from "../config/stack";
import { versions } from "../config/versions";
import type { PoolPlacement } from "../lib/dgd";
import { INFERENCE_NAMESPACE } from "../lib/labels";
import { kvFabricOf, rdmaResources } from "../lib/nixl";
import { placeEndpoints } from "../lib/serving";

/** What the serving layer needs from the rest of the spoke. */
export interface ServingInputs {
    /** An on-prem (InfiniBand) spoke; EKS spokes are built in programs/eks-spoke.ts. */
    cfg: OnPremSpokeConfig;
    contract: SpokeContract;
    stackFile: string;
    /** GpuNodePool components, in `cfg.nodePools` order. */
    pools: GpuNodePool[];
    fabric: BackendFabric;
    frontend: FrontendNetwork;
    /** Resources the RDMA workloads wait for (GPU Operator, inference namespace). */
    dependsOn: pulumi.Resource[];
}

/** Per endpoint: the pool it runs on and its frontend Service (for the gateway). */
export type ServingOutputs = Record<string, { pool: string; frontend: { name: string; namespace: string; port: number } }>;

/**
 * The spoke's serving layer (DESIGN §1): the Dynamo platform, the RDMA preflight script, and per endpoint of the
 * hub's placement a Mooncake pool (when configured) and a ModelEndpoint (DynamoGraphDeployment).
 *
 * @throws ConfigError naming the stack file when a placement does not fit this spoke's pools (worker larger than a
 *   node, pool too small, Mooncake stores beyond the node count, no pool mapping with several pools)
 */
export function deployServing(s: ServingInputs, opts: pulumi.ComponentResourceOptions): ServingOutputs {
    const { cfg, contract } = s;
    const { placements, issues } = placeEndpoints(contract.endpoints, cfg.nodePools, cfg.serving, `hub output spokeContracts.${cfg.spoke.name}`);
    if (issues.length) throw new ConfigError(s.stackFile, issues);
    const outputs: ServingOutputs = {};
    if (placements.length === 0) return outputs;

    const platform = new DynamoPlatform("dynamo", {
        namespace: cfg.serving.platformNamespace,
        grove: cfg.serving.grove,
        kaiScheduler: cfg.serving.kaiScheduler,
        prometheusEndpoint: cfg.serving.prometheusEndpoint,
    }, opts);
    const preflight = new RdmaPreflight("rdma-preflight", { namespace: INFERENCE_NAMESPACE }, { ...opts, dependsOn: s.dependsOn });
    const rdmaDeps = [platform, preflight, s.fabric, ...s.dependsOn];

    for (const { endpoint: e, pool } of placements) {
        const component = s.pools[cfg.nodePools.indexOf(pool)];
        const fabric = kvFabricOf(pool.profile, s.frontend.description.pools[pool.name]?.hcas ?? pool.profile.frontend.map((f) => f.hca));
        if (fabric.kind === "infiniband") {
            const missing = Object.keys(rdmaResources(fabric, 1)).filter((r) => !s.fabric.railResources.includes(r));
            if (missing.length) throw new Error(`pool ${pool.name}: rail resource(s) ${missing.join(", ")} are not published by the backend fabric (${s.fabric.railResources.join(", ")})`);
        }
        const placement: PoolPlacement = {
            name: pool.name, nodeSelector: component.nodeSelector, tolerations: component.tolerations,
            memlockUnlimited: pool.memlockUnlimited, fabric,
        };
        let mooncakeMaster: string | undefined;
        const deps: pulumi.Resource[] = [...rdmaDeps];
        if (e.kvPool.kind === "mooncake") {
            const store = new MooncakeStore(`mooncake-${e.name}`, {
                endpoint: e.name, namespace: INFERENCE_NAMESPACE, image: `${versions.mooncake.image}:${versions.mooncake.version}`,
                pool: placement, segmentSizeGiB: e.kvPool.segmentSizeGiB, storeReplicas: e.kvPool.storeReplicas,
                poolNodes: pool.nodes.length, minLinkRateGbps: cfg.backend.minLinkRateGbps,
            }, { ...opts, dependsOn: rdmaDeps });
            mooncakeMaster = store.masterAddress;
            deps.push(store);
        }
        const rt = versions.dynamoRuntime[e.engine];
        const ep = new ModelEndpoint(`endpoint-${e.name}`, {
            endpoint: e, namespace: INFERENCE_NAMESPACE, pool: placement,
            runtimeImage: `${rt.image}:${rt.version}`,
            plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
            prometheusEndpoint: cfg.serving.prometheusEndpoint,
            minLinkRateGbps: cfg.backend.minLinkRateGbps,
            hfTokenSecret: cfg.serving.hfTokenSecret,
            mooncakeMaster,
        }, { ...opts, dependsOn: deps });
        outputs[e.name] = { pool: pool.name, frontend: ep.frontend };
    }
    return outputs;
}
