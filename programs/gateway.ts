import type * as pulumi from "@pulumi/pulumi";
import { AgentRouter } from "../components/spoke/AgentRouter";
import type { SpokeContract } from "../config/contract";
import { ConfigError } from "../config/errors";
import type { GatewayConfig } from "../config/gateway";
import { renderedRevisions, rolloutAnnotation } from "../lib/rollout";

/**
 * How this spoke's workloads obtain their AWS role, from the contract's `identity` block (the hub exports no
 * credential). EKS Pod Identity: `{kind: "pod-identity"}` (programs/eks-spoke.ts binds the role to the service accounts).
 * Access key: `{kind: "source-key", slot}` (the active slot's id, not secret); the key itself is never read here. The operator installs it from the active key slot's
 * Secrets Manager secret as the Kubernetes Secret lib/spoke-services.ts `SOURCE_KEY_SECRET`
 * (`npm run mint-key -- install-source-key`, tools/mint-key.ts), so it is in no Pulumi state: a pull-request preview
 * holding this stack's passphrase and running the pull request's code finds nothing to decrypt.
 *
 * @throws ConfigError when the contract has no identity (hub older than this program) or the spoke side of the mode
 *   is not available
 */
export function spokeIdentityKind(spoke: string, contract: SpokeContract, stackFile: string): GatewayHandles["identity"] {
    const key = `hub output spokeContracts.${spoke}.identity`;
    const id = contract.identity;
    if (!id) throw new ConfigError(stackFile, [{ key, message: "missing: the hub predates per-spoke identities; apply the hub first" }]);
    if (id.mode === "pod-identity") return { kind: "pod-identity" };
    if (id.mode === "roles-anywhere") {
        throw new ConfigError(stackFile, [
            {
                key: `${key}.mode`,
                message:
                    "roles-anywhere needs the IAM Roles Anywhere signing helper in the auth and metering images, which they do not ship yet; use access-key for this spoke meanwhile",
            },
        ]);
    }
    return { kind: "source-key", slot: id.slot };
}

/** Inputs of {@link deployGateway}. */
export interface GatewayDeployment {
    spoke: string;
    contract: SpokeContract;
    /** {@link spokeIdentityKind}, decided before any resource is declared. */
    identity: GatewayHandles["identity"];
    gateway: GatewayConfig;
    /** EKS: what provisions the proxy's NLB (programs/spoke-infra.ts `loadBalancerProvisioner`). */
    loadBalancerProvisioner?: pulumi.Resource[];
}

/** Brand of {@link GatewayHandles}: declared here and not exported, so no other module can write the key. */
declare const gatewayDeployed: unique symbol;

/**
 * What metering shares with the gateway (programs/metering.ts): the Secret holding the counters' Redis URL
 * (operator-installed, services/shared/spoke-secrets.ts; its name, never its value) and the spoke's AWS identity.
 * Branded: only {@link deployGateway} makes one (an object literal of the same shape does not type-check:
 * test/step-order.types.ts), so metering cannot be declared before the gateway.
 */
export type GatewayHandles = {
    readonly redisUrlSecret: { name: string; key: string };
    /** On-prem: the operator-installed source key (lib/spoke-services.ts `SOURCE_KEY_SECRET`); EKS: Pod Identity. */
    readonly identity: { kind: "source-key"; slot: string } | { kind: "pod-identity" };
    readonly [gatewayDeployed]: true;
};

/**
 * Deploys the spoke's Agent Router and auth service from the hub contract (endpoints -> routes, policy block ->
 * auth service). Shared by every spoke flavour; pass the stack's Kubernetes provider through `opts.providers`.
 * @returns `outputs` (the stack's `gateway` output) and the {@link GatewayHandles} metering needs
 */
export function deployGateway(d: GatewayDeployment, opts: pulumi.ComponentResourceOptions) {
    const sourceKey = d.identity.kind === "source-key" ? { slot: d.identity.slot } : undefined;
    const router = new AgentRouter(
        "agent-router",
        {
            spoke: d.spoke,
            // One backend per graph: both revisions of an endpoint under a rollout, with the step's weights.
            endpoints: renderedRevisions(d.contract.endpoints).map((r) => ({
                name: r.graph.name,
                model: r.graph.model,
                ...(r.weight === undefined ? {} : { weight: r.weight }),
            })),
            rollouts: rolloutAnnotation(d.contract.endpoints),
            gateway: d.gateway,
            policy: d.contract.policy,
            sourceKey,
            loadBalancerProvisioner: d.loadBalancerProvisioner,
            failover: d.contract.failover,
        },
        opts,
    );
    // The one place a GatewayHandles is made: after the router (and its counters) are declared.
    const handles = { redisUrlSecret: router.counters.urlSecret, identity: d.identity } as GatewayHandles;
    return { outputs: { routes: router.routeNames, policyRevision: d.contract.policy.revision }, handles };
}
