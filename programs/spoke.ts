import * as fs from "node:fs";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { type SpokeContract, SpokeContractSchema } from "../config/contract";
import { ConfigError, zodIssues } from "../config/errors";
import { isEksSpoke, type SpokeConfig } from "../config/stack";
import { placedGraphs } from "../lib/rollout";
import { placeEndpoints } from "../lib/serving";
import { buildEksInfra } from "./eks-spoke";
import { spokeIdentityKind } from "./gateway";
import { OFFLINE_RENDER_ENV } from "../lib/ci-roles";
import { globalDns01Issue } from "../lib/edge";
import { PUBLICATION_OUTPUT, verifyHubPublication } from "../lib/hub-publication";
import { HUB_OUTPUTS_ENV } from "./load";
import { buildOnPremInfra } from "./onprem-spoke";
import { checkAgainstHubRegistry } from "./spoke-registry";
import { placementPools } from "./spoke-infra";
import { deployWorkloads } from "./workloads";

export { HUB_OUTPUTS_ENV };

/** Pure: the hub key ids a spoke file pins (`platform:spoke.hubKeyIds`, and the older single `hubKeyId`), or undefined. */
export function pinnedHubKeyIds(cfg: Pick<SpokeConfig, "spoke">): string[] | undefined {
    const ids = [...new Set([...(cfg.spoke.hubKeyIds ?? []), ...(cfg.spoke.hubKeyId ? [cfg.spoke.hubKeyId] : [])])];
    return ids.length ? ids : undefined;
}

/** Stack output: the serial of the hub publication this spoke last deployed from (lib/hub-publication.ts). */
export const HUB_PUBLICATION_SERIAL_OUTPUT = "hubPublicationSerial";

/**
 * The hub's outputs a spoke reads: its published outputs ({@link HUB_OUTPUTS_ENV}'s file, `pulumi stack output --json`
 * of the hub saved by up.yml), verified against the hub's signature (lib/hub-publication.ts), the hub keys the stack
 * file pins (`platform:spoke.hubKeyIds`, required for every real run) and the serial this spoke last deployed from
 * (`minSerial`, its own previous {@link HUB_PUBLICATION_SERIAL_OUTPUT}); in previews and `up`s alike, so no spoke run
 * opens the hub's state, which only the hub deployers may decrypt. Only an offline render (the program under mocks,
 * tools/harness.ts) reads the hub through a StackReference, and may leave the key unpinned.
 * @throws ConfigError naming the stack file: a real run without the variable or without a pinned key, an unreadable
 * file, or a publication that does not verify
 */
export function hubOutputs(
    cfg: SpokeConfig,
    stackFile: string,
    minSerial?: number,
): { get(name: string): Promise<unknown>; serial(): Promise<number | undefined> } {
    const file = process.env[HUB_OUTPUTS_ENV];
    const issue = (message: string) => new ConfigError(stackFile, [{ key: `${HUB_OUTPUTS_ENV} (environment)`, message }]);
    const hub = cfg.spoke.hubStack.split("/").pop() ?? cfg.spoke.hubStack;
    const offline = process.env[OFFLINE_RENDER_ENV] === "1";
    const pinned = pinnedHubKeyIds(cfg);
    if (!pinned && !offline)
        throw new ConfigError(stackFile, [
            {
                key: "platform:spoke.hubKeyIds",
                message: `a spoke accepts hub "${hub}"'s published outputs only signed by a key its stack file pins: set it to the hub's \`pulumi stack output publication --stack ${hub}\` keyId (two during a key rotation)`,
            },
        ]);
    if (!file) {
        if (!offline)
            throw issue(
                `a spoke reads hub "${hub}" from its published outputs, not its state (readable only by platform:hubDeployers): set ${HUB_OUTPUTS_ENV} to the file up.yml publishes, e.g. \`aws s3 cp "$HUB_OUTPUTS_S3_URI${hub}.json" hub.json\` (README "Deploy for real")`,
            );
        const ref = new pulumi.StackReference("hub", { name: cfg.spoke.hubStack });
        const get = async (name: string) => {
            const d = await ref.getOutputDetails(name);
            return d.value ?? d.secretValue;
        };
        return {
            get,
            serial: async () => {
                const p = (await get(PUBLICATION_OUTPUT)) as { serial?: unknown } | undefined;
                return typeof p?.serial === "number" ? p.serial : undefined;
            },
        };
    }
    let doc: unknown;
    try {
        doc = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch (e) {
        throw issue(`cannot read the hub's published outputs ${file}: ${(e as Error).message}`);
    }
    let verified: ReturnType<typeof verifyHubPublication>;
    try {
        verified = verifyHubPublication(doc, hub, pinned, minSerial);
    } catch (e) {
        throw issue(`${file} ${(e as Error).message}`);
    }
    return { get: async (name) => verified.outputs[name], serial: async () => verified.serial };
}

/**
 * The serial of the hub publication this spoke last deployed from: its own previous {@link HUB_PUBLICATION_SERIAL_OUTPUT}
 * (a StackReference to this very stack, whose state the spoke's deployer and preview role read anyway), undefined for
 * a spoke never deployed on this release.
 */
export async function previousHubSerial(): Promise<number | undefined> {
    const self = new pulumi.StackReference("self", { name: `${pulumi.getOrganization()}/${pulumi.getProject()}/${pulumi.getStack()}` });
    const v = (await self.getOutputDetails(HUB_PUBLICATION_SERIAL_OUTPUT)).value;
    return typeof v === "number" ? v : undefined;
}

/**
 * Reads this spoke's entry of the hub's `spokeContracts` output (the deployment declaration going down,
 * config/contract.ts) and validates it before anything is created.
 *
 * @throws ConfigError when the hub does not know this spoke or its contract does not parse
 */
export async function readSpokeContract(
    cfg: SpokeConfig,
    stackFile: string,
    /** Receives the serial of the hub publication read (undefined when the hub published none). */
    read: { serial?: number } = {},
): Promise<SpokeContract> {
    // Replay protection applies to the published file (a real run); an offline render reads its mock hub directly.
    const minSerial = process.env[HUB_OUTPUTS_ENV] ? await previousHubSerial() : undefined;
    const hub = hubOutputs(cfg, stackFile, minSerial);
    const contracts = (await hub.get("spokeContracts")) as Record<string, unknown> | undefined;
    if (!contracts || typeof contracts !== "object") {
        throw new ConfigError(stackFile, [
            {
                key: "platform:spoke.hubStack",
                message: `hub stack "${cfg.spoke.hubStack}" exports no spokeContracts output; run the hub first`,
            },
        ]);
    }
    const mine = contracts[cfg.spoke.name];
    if (mine === undefined) {
        throw new ConfigError(stackFile, [
            {
                key: "platform:spoke.name",
                message: `spoke "${cfg.spoke.name}" is not known to hub "${cfg.spoke.hubStack}" (known: ${Object.keys(contracts).sort().join(", ")}); add it to the hub's platform:spokes first`,
            },
        ]);
    }
    const parsed = SpokeContractSchema.safeParse(mine);
    if (!parsed.success) {
        throw new ConfigError(stackFile, zodIssues(parsed.error, `hub output spokeContracts.${cfg.spoke.name}`));
    }
    // This spoke's networks against the other spokes' as the hub recorded them (programs/spoke-registry.ts).
    // The published file names no stack: its contracts name their hub (the StackReference is by name already).
    if (process.env[HUB_OUTPUTS_ENV] && parsed.data.hub !== cfg.spoke.hubStack.split("/").pop())
        throw new ConfigError(stackFile, [
            {
                key: "platform:spoke.hubStack",
                message: `the hub outputs read (${process.env[HUB_OUTPUTS_ENV]}) are hub "${parsed.data.hub}"'s, not "${cfg.spoke.hubStack}"'s`,
            },
        ]);
    checkAgainstHubRegistry(cfg, pulumi.getStack(), await hub.get("spokeNetworks"), stackFile);
    read.serial = await hub.serial();
    return parsed.data;
}

/**
 * An EKS spoke with an ACME DNS-01 edge behind the global failover hostname answers that name's challenge in its zone,
 * which lives in the hub's account (lib/edge.ts): refused, naming the stack file and key, when the hub published no
 * zone or the spoke runs in another account than the hub (`aws.getCallerIdentity`: the account the cluster is in).
 * @throws ConfigError naming `platform:gateway.listener.tls`
 */
export async function requireGlobalDns01(cfg: SpokeConfig, contract: SpokeContract, stackFile: string): Promise<void> {
    const globalHostname = contract.failover?.globalHostname;
    if (!isEksSpoke(cfg) || cfg.gateway.listener.tls?.source !== "acme-dns01" || !globalHostname) return;
    const hubAccountId = contract.policy.roleArn.split(":")[4] ?? "";
    // The cluster's account is the deployer's (programs/eks-spoke.ts creates it with a provider in the spoke's region).
    const provider = new aws.Provider("global-dns01-caller", { region: cfg.cluster.region as aws.Region });
    const spokeAccountId = (await aws.getCallerIdentity({}, { provider })).accountId;
    const issue = globalDns01Issue({
        globalHostname,
        globalHostedZoneId: contract.failover?.globalHostedZoneId,
        hubAccountId,
        spokeAccountId,
    });
    if (issue) throw new ConfigError(stackFile, [{ key: "platform:gateway.listener.tls", message: issue }]);
}

/**
 * Checks that every endpoint the hub placed here fits this spoke's pools (lib/serving.ts `placeEndpoints`).
 * @throws ConfigError naming the stack file and the contract/config keys when one does not fit
 */
export function checkPlacement(cfg: SpokeConfig, contract: SpokeContract, stackFile: string): void {
    const placed = placedGraphs(contract.endpoints, cfg.serving);
    const { issues } = placeEndpoints(placed.graphs, placementPools(cfg), placed.serving, `hub output spokeContracts.${cfg.spoke.name}`);
    if (issues.length) throw new ConfigError(stackFile, issues);
}

/**
 * Builds one spoke stack (one GPU cluster): provider-specific infrastructure (programs/onprem-spoke.ts for an
 * existing on-prem cluster with InfiniBand rails, programs/eks-spoke.ts for EKS with EFA), then the shared workloads
 * (programs/workloads.ts: gateway, serving, metering). Returns the stack outputs.
 *
 * @throws ConfigError when the hub's contract for this spoke is missing or invalid, or a placement does not fit
 */
export async function buildSpoke(cfg: SpokeConfig, stackFile: string) {
    // Everything that can refuse this stack is checked before the first resource is declared: nothing is half-applied.
    const publication: { serial?: number } = {};
    const contract = await readSpokeContract(cfg, stackFile, publication);
    const identity = spokeIdentityKind(cfg.spoke.name, contract, stackFile);
    checkPlacement(cfg, contract, stackFile);
    await requireGlobalDns01(cfg, contract, stackFile);
    const infra = isEksSpoke(cfg) ? buildEksInfra(cfg, contract) : buildOnPremInfra(cfg);
    const { serving, gateway, metering, observability } = deployWorkloads(cfg, contract, infra, stackFile, identity);
    return {
        spoke: cfg.spoke.name,
        placementRevision: contract.placementRevision,
        /** The hub publication this run read: the next run refuses an older one (lib/hub-publication.ts). */
        [HUB_PUBLICATION_SERIAL_OUTPUT]: publication.serial,
        endpoints: contract.endpoints.map((e) => e.name),
        ...infra.outputs,
        serving,
        gateway,
        metering,
        observability,
    };
}
