import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { AgentRouter } from "../components/spoke/AgentRouter";
import type { SpokeSourceCredentials } from "../components/hub/SpokeIdentity";
import type { SpokeContract } from "../config/contract";
import { ConfigError } from "../config/errors";
import { HUB_OUTPUTS_ENV } from "./load";
import type { GatewayConfig } from "../config/gateway";
import { renderedRevisions, rolloutAnnotation } from "../lib/rollout";

/**
 * How this spoke's workloads obtain their AWS role, from the contract's `identity` block (the hub exports no
 * credential). EKS Pod Identity: nothing to read (`undefined`; programs/eks-spoke.ts binds the role to the service
 * accounts). Access key: the active key slot's Secrets Manager secret, read with this stack's own AWS credentials
 * (the spoke's deployer role, the only principal its policy lets read it). The value stays a Pulumi secret.
 *
 * @throws ConfigError when the contract has no identity (hub older than this program), the spoke side of the mode
 *   is not available, or the secret cannot be read or does not hold a key
 */
export async function readSpokeCredentials(
    spoke: string,
    contract: SpokeContract,
    stackFile: string,
): Promise<pulumi.Output<SpokeSourceCredentials> | undefined> {
    const key = `hub output spokeContracts.${spoke}.identity`;
    const id = contract.identity;
    if (!id) throw new ConfigError(stackFile, [{ key, message: "missing: the hub predates per-spoke identities; apply the hub first" }]);
    if (id.mode === "pod-identity") return undefined;
    if (id.mode === "roles-anywhere") {
        throw new ConfigError(stackFile, [
            {
                key: `${key}.mode`,
                message:
                    "roles-anywhere needs the IAM Roles Anywhere signing helper in the auth and metering images, which they do not ship yet; use access-key for this spoke meanwhile",
            },
        ]);
    }
    // A pull-request preview runs as the CI preview role, which reads no secret value (lib/ci-roles.ts): the key is
    // unknown there, as any value a preview cannot read, and the Secrets holding it show as unknown.
    if (process.env[HUB_OUTPUTS_ENV] && pulumi.runtime.isDryRun())
        return pulumi.secret(pulumi.output(pulumi.unknown as unknown as SpokeSourceCredentials));
    let secretString: string;
    try {
        secretString = (await aws.secretsmanager.getSecretVersion({ secretId: id.secretArn, region: id.region })).secretString;
    } catch (e) {
        throw new ConfigError(stackFile, [
            {
                key: `${key}.secretArn`,
                message: `cannot read ${id.secretArn} (run as this spoke's deployer role; a new slot's key must first be minted by a hub deployer: npm run mint-key -- spoke-access-key --slot ${id.slot}): ${(e as Error).message}`,
            },
        ]);
    }
    let mine: SpokeSourceCredentials | undefined;
    try {
        mine = JSON.parse(secretString);
    } catch {
        mine = undefined;
    }
    if (!mine || typeof mine.accessKeyId !== "string" || typeof mine.secretAccessKey !== "string") {
        throw new ConfigError(stackFile, [
            { key: `${key}.secretArn`, message: `${id.secretArn} does not hold {accessKeyId, secretAccessKey}` },
        ]);
    }
    return pulumi.secret(mine);
}

/** Inputs of {@link deployGateway}. */
export interface GatewayDeployment {
    spoke: string;
    contract: SpokeContract;
    /** The spoke's source credentials, read by {@link readSpokeCredentials} before any resource is declared; undefined with EKS Pod Identity. */
    awsCredentials: pulumi.Output<SpokeSourceCredentials> | undefined;
    gateway: GatewayConfig;
    /** EKS: what provisions the proxy's NLB (programs/spoke-infra.ts `loadBalancerProvisioner`). */
    loadBalancerProvisioner?: pulumi.Resource[];
}

/**
 * What metering shares with the gateway (programs/metering.ts): the counters' Redis URL and the spoke's AWS
 * identity. Only {@link deployGateway} makes one, so metering cannot be declared before the gateway. Not stack
 * outputs: they hold secrets.
 */
export interface GatewayHandles {
    redisUrl: pulumi.Output<string>;
    /** The spoke's source key (secret), or EKS Pod Identity (no credentials to share). */
    identity: { kind: "source-key"; awsCredentials: pulumi.Output<SpokeSourceCredentials> } | { kind: "pod-identity" };
}

/**
 * Deploys the spoke's Agent Router and auth service from the hub contract (endpoints -> routes, policy block ->
 * auth service). Shared by every spoke flavour; pass the stack's Kubernetes provider through `opts.providers`.
 * @returns `outputs` (the stack's `gateway` output) and the {@link GatewayHandles} metering needs
 */
export function deployGateway(d: GatewayDeployment, opts: pulumi.ComponentResourceOptions) {
    const { awsCredentials } = d;
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
            awsCredentials,
            loadBalancerProvisioner: d.loadBalancerProvisioner,
            failover: d.contract.failover,
        },
        opts,
    );
    const handles: GatewayHandles = {
        redisUrl: router.counters.url,
        identity: awsCredentials ? { kind: "source-key", awsCredentials } : { kind: "pod-identity" },
    };
    return { outputs: { routes: router.routeNames, policyRevision: d.contract.policy.revision }, handles };
}
