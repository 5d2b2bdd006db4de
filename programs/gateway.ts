import * as pulumi from "@pulumi/pulumi";
import { AgentRouter } from "../components/spoke/AgentRouter";
import type { SpokeSourceCredentials } from "../components/hub/SpokeIdentity";
import type { SpokeContract } from "../config/contract";
import { ConfigError } from "../config/errors";
import type { GatewayConfig } from "../config/gateway";

/**
 * Reads this spoke's source credentials from the hub's secret output `spokeCredentials` (they assume the
 * spoke's SpokeIdentity role). The value stays a Pulumi secret.
 *
 * @throws ConfigError when the hub exports no credentials for this spoke (hub not deployed with PolicyStore yet)
 */
export async function readSpokeCredentials(spoke: string, hubStack: string, stackFile: string): Promise<pulumi.Output<SpokeSourceCredentials>> {
    const hub = new pulumi.StackReference("hub-credentials", { name: hubStack });
    const details = await hub.getOutputDetails("spokeCredentials");
    const all = (details.secretValue ?? details.value) as Record<string, SpokeSourceCredentials> | undefined;
    const mine = all?.[spoke];
    if (!mine || typeof mine.accessKeyId !== "string" || typeof mine.secretAccessKey !== "string") {
        throw new ConfigError(stackFile, [{ key: "platform:spoke.hubStack", message: `hub stack "${hubStack}" exports no spokeCredentials for spoke "${spoke}"; deploy the hub first` }]);
    }
    return pulumi.secret(mine);
}

/** Inputs of {@link deployGateway}. */
export interface GatewayDeployment {
    spoke: string;
    contract: SpokeContract;
    /** The spoke's source credentials, read by {@link readSpokeCredentials} before any resource is declared. */
    awsCredentials: pulumi.Output<SpokeSourceCredentials>;
    gateway: GatewayConfig;
    /** Filled in for the metering deployment (programs/metering.ts): not stack outputs, they hold secrets. */
    handles?: GatewayHandles;
}

/** What metering shares with the gateway: the counters' Redis URL and the spoke's source credentials (secrets). */
export interface GatewayHandles {
    redisUrl?: pulumi.Output<string>;
    awsCredentials?: pulumi.Output<SpokeSourceCredentials>;
}

/**
 * Deploys the spoke's Agent Router and auth service from the hub contract (endpoints -> routes, policy block ->
 * auth service). Shared by every spoke flavour; pass the stack's Kubernetes provider through `opts.providers`.
 */
export function deployGateway(d: GatewayDeployment, opts: pulumi.ComponentResourceOptions) {
    const { awsCredentials } = d;
    const router = new AgentRouter("agent-router", {
        spoke: d.spoke,
        endpoints: d.contract.endpoints.map((e) => ({ name: e.name, model: e.model })),
        gateway: d.gateway,
        policy: d.contract.policy,
        awsCredentials,
    }, opts);
    if (d.handles) Object.assign(d.handles, { redisUrl: router.counters.url, awsCredentials });
    return { routes: router.routeNames, policyRevision: d.contract.policy.revision };
}
