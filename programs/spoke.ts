import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { BackendFabric } from "../components/spoke/BackendFabric";
import { FrontendNetwork } from "../components/spoke/FrontendNetwork";
import { GpuNodePool } from "../components/spoke/GpuNodePool";
import { GpuOperator } from "../components/spoke/GpuOperator";
import { SpokeContract, SpokeContractSchema } from "../config/contract";
import { ConfigError, zodIssues } from "../config/errors";
import { isEksSpoke, SpokeConfig } from "../config/stack";
import { INFERENCE_NAMESPACE, PLATFORM_NAMESPACE } from "../lib/labels";
import { buildEksSpoke } from "./eks-spoke";
import { checkAgainstHubRegistry } from "./spoke-registry";
import { deployServing } from "./serving";
import { deployGateway, GatewayHandles } from "./gateway";
import { deployMetering } from "./metering";

/**
 * Reads this spoke's entry of the hub's `spokeContracts` output (the deployment declaration going down,
 * DESIGN §3) and validates it before anything is created.
 *
 * @throws ConfigError when the hub does not know this spoke or its contract does not parse
 */
export async function readSpokeContract(cfg: SpokeConfig, stackFile: string): Promise<SpokeContract> {
    const hub = new pulumi.StackReference("hub", { name: cfg.spoke.hubStack });
    const details = await hub.getOutputDetails("spokeContracts");
    const contracts = (details.value ?? details.secretValue) as Record<string, unknown> | undefined;
    if (!contracts || typeof contracts !== "object") {
        throw new ConfigError(stackFile, [{ key: "platform:spoke.hubStack", message: `hub stack "${cfg.spoke.hubStack}" exports no spokeContracts output; run the hub first` }]);
    }
    const mine = contracts[cfg.spoke.name];
    if (mine === undefined) {
        throw new ConfigError(stackFile, [{ key: "platform:spoke.name", message: `spoke "${cfg.spoke.name}" is not known to hub "${cfg.spoke.hubStack}" (known: ${Object.keys(contracts).sort().join(", ")}); add it to the hub's platform:spokes first` }]);
    }
    const parsed = SpokeContractSchema.safeParse(mine);
    if (!parsed.success) {
        throw new ConfigError(stackFile, zodIssues(parsed.error, `hub output spokeContracts.${cfg.spoke.name}`));
    }
    // This spoke's networks against the other spokes' as the hub recorded them (programs/spoke-registry.ts).
    checkAgainstHubRegistry(cfg, pulumi.getStack(), (await hub.getOutputDetails("spokeNetworks")).value, stackFile);
    return parsed.data;
}

/** Builds one spoke stack (one GPU cluster). Returns the stack outputs. */
export async function buildSpoke(cfg: SpokeConfig, stackFile: string) {
    const contract = await readSpokeContract(cfg, stackFile);
    // EKS spokes (cluster, VPC, node groups with EFA) are built in programs/eks-spoke.ts.
    if (isEksSpoke(cfg)) return buildEksSpoke(cfg, contract, stackFile);

    const provider = new k8s.Provider("k8s", {
        context: cfg.cluster.kubeconfigContext,
        enableServerSideApply: true,
    });
    const opts: pulumi.ComponentResourceOptions = { providers: [provider] };

    const platformNs = new k8s.core.v1.Namespace("platform-ns", { metadata: { name: PLATFORM_NAMESPACE } }, { provider });
    const inferenceNs = new k8s.core.v1.Namespace("inference-ns", { metadata: { name: INFERENCE_NAMESPACE } }, { provider });

    const pools = cfg.nodePools.map((p) => new GpuNodePool(`pool-${p.name}`, { pool: p, fabric: cfg.backend.fabric }, opts));
    const gpuOperator = new GpuOperator("gpu-operator", cfg.gpuOperator, opts);
    const fabric = new BackendFabric("backend", {
        pools: cfg.nodePools,
        railPools: cfg.railPools,
        rdmaHcaMax: cfg.backend.rdmaHcaMax,
        perNodeBlockSize: cfg.backend.perNodeBlockSize,
        workloadNamespace: INFERENCE_NAMESPACE,
    }, { ...opts, dependsOn: [inferenceNs] });
    const frontend = new FrontendNetwork("frontend", {
        pools: cfg.nodePools,
        subnet: cfg.frontend.subnet,
        linkRateGbps: cfg.frontend.linkRateGbps,
        namespace: platformNs.metadata.name,
    }, opts);

    const serving = deployServing({
        cfg, contract, stackFile, pools, fabric, frontend, dependsOn: [gpuOperator, inferenceNs],
    }, opts);
    // Agent Router + auth service (programs/gateway.ts); NetworkPolicy into the inference namespace.
    const handles: GatewayHandles = {};
    const gateway = await deployGateway({ spoke: cfg.spoke.name, hubStack: cfg.spoke.hubStack, stackFile, contract, gateway: cfg.gateway, handles }, { ...opts, dependsOn: [inferenceNs] });
    // Usage metering (programs/metering.ts): access-log collector + metering StatefulSet, shipping to the hub.
    const metering = deployMetering({
        spoke: cfg.spoke.name, contract, metering: cfg.metering, gateway: handles,
    }, { ...opts, dependsOn: [platformNs] });
    return {
        spoke: cfg.spoke.name,
        placementRevision: contract.placementRevision,
        endpoints: contract.endpoints.map((e) => e.name),
        railResources: fabric.railResources,
        railNetworks: fabric.railNetworks,
        nodeSelectors: Object.fromEntries(pools.map((p, i) => [cfg.nodePools[i].name, p.nodeSelector])),
        frontendHcas: frontend.frontendHcas,
        serving,
        gateway,
        metering,
    };
}
