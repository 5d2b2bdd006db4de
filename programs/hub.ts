import { PUBLICATION_OUTPUT } from "../lib/hub-publication";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { AccessLogs } from "../components/hub/AccessLogs";
import { ApiKeys } from "../components/hub/ApiKeys";
import { PolicyStore } from "../components/hub/PolicyStore";
import { effectiveIdentity, SpokeIdentity, spokeDeployerArn } from "../components/hub/SpokeIdentity";
import { UsageLedger } from "../components/hub/UsageLedger";
import { usageStreamPolicy } from "../components/hub/ledger/transport";
import { ledgerAvailabilityZones } from "../config/metering";
import { CONTRACT_SCHEMA_VERSION, type PolicyContract, type SpokeContract, contentHash } from "../config/contract";
import type { HubConfig } from "../config/stack";
import { cacheScopesOf, keyServing } from "../config/serving-policy";
import { bundlePaths } from "../services/shared/bundle";
import { stackFilePath } from "./load";
import { checkSpokeRegistry, readSpokeEdges } from "./spoke-registry";
import { buildFailoverContracts, type PeerCa } from "../config/failover";
import { GlobalDns } from "../components/hub/GlobalDns";
import { eksClusterNameOf } from "../lib/eks";
import { hubSecretsProviderIssue, MOCK_CALLER_ARN_ENV, OFFLINE_RENDER_ENV } from "../lib/ci-roles";
import { ConfigError } from "../config/errors";
import { hubPartitionIssue } from "../lib/aws-partition";
import { hubBucketName, hubBucketNameIssue, POLICY_BUCKET_LOG_PREFIX } from "../lib/hub-bucket-names";
import * as fs from "node:fs";
import * as YAML from "yaml";
import { cloudWatchTopicKeyProblem, hubAdministrators } from "../lib/kms";

/**
 * The parts of a spoke's contract that come from hub resources (bucket, key, role, bundle revision): known
 * only once those exist, so {@link buildSpokeContracts} takes them from the caller.
 */
export type SpokeContractExtras = Omit<SpokeContract, "schemaVersion" | "hub" | "spoke" | "placementRevision" | "endpoints" | "failover">;

/**
 * Pure: the endpoints the hub places on `spoke`, each with how many KV cache scopes call its model
 * (config/serving-policy.ts): the spoke's render and the pack refuse an engine that drops the cache salt while
 * serving more than one.
 */
export function placedEndpoints(hub: HubConfig, spoke: string) {
    return hub.endpoints.filter((e) => e.spoke === spoke).map((e) => ({ ...e, cacheScopes: cacheScopesOf(hub, e.model) }));
}

/**
 * Pure: the per-spoke placement contracts for a validated hub config. Every spoke the hub knows
 * gets a contract, possibly with no endpoints, so a spoke is never left guessing.
 * @param hub the validated hub config (`platform:spokes`, `platform:endpoints`, `platform:failover`)
 * @param hubStack the hub's stack name, recorded in each contract's `hub`
 * @param extras spoke name -> the hub-resource parts of its contract ({@link SpokeContractExtras}); one per spoke of `hub`
 * @param edges spoke name -> its reachable edge (hostname and CA) for the failover block (programs/spoke-registry.ts
 *   `readSpokeEdges`); empty without failover
 * @returns spoke name -> its contract (config/contract.ts `SpokeContract`, `schemaVersion` {@link CONTRACT_SCHEMA_VERSION}),
 *   spokes in name order, `placementRevision` the content hash of its endpoints
 * @throws Error when `extras` has no entry for a spoke of `hub` (a hub resource output missing)
 */
export function buildSpokeContracts(
    hub: HubConfig,
    hubStack: string,
    extras: Record<string, SpokeContractExtras>,
    edges: ReadonlyMap<string, { hostname: string; ca: PeerCa }> = new Map(),
): Record<string, SpokeContract> {
    const out: Record<string, SpokeContract> = {};
    const failover = buildFailoverContracts(hub, edges);
    for (const s of [...hub.spokes].sort((a, b) => a.name.localeCompare(b.name))) {
        const endpoints = placedEndpoints(hub, s.name);
        const x = extras[s.name];
        if (!x) throw new Error(`buildSpokeContracts: no policy store / identity outputs for spoke "${s.name}"`);
        out[s.name] = {
            schemaVersion: CONTRACT_SCHEMA_VERSION,
            hub: hubStack,
            spoke: s.name,
            placementRevision: contentHash(endpoints),
            endpoints,
            ...x,
            ...(failover[s.name] ? { failover: failover[s.name] } : {}),
        };
    }
    return out;
}

/**
 * Pure: model -> every placement of it (spoke, endpoint name, fallback spokes), spokes sorted. The view of "where does
 * this model run" that `npm run status`, the render report and the PR diff show.
 */
export function modelPlacement(hub: HubConfig): Record<string, Array<{ spoke: string; endpoint: string; fallback: string[] }>> {
    const out: Record<string, Array<{ spoke: string; endpoint: string; fallback: string[] }>> = {};
    for (const e of [...hub.endpoints].sort((a, b) => a.spoke.localeCompare(b.spoke)))
        out[e.model] = [...(out[e.model] ?? []), { spoke: e.spoke, endpoint: e.name, fallback: e.fallback ?? [] }];
    return Object.fromEntries(
        Object.keys(out)
            .sort()
            .map((m) => [m, out[m]]),
    );
}

/**
 * Pure: the tenant/team/key/limit model as the policy bundle will carry it, keyed for lookup by the spoke's
 * auth service. Key hashes are filled in by the caller (they are outputs of {@link ApiKeys}).
 */
export function accessModel(hub: HubConfig, keyHashes: Record<string, string>) {
    return {
        models: hub.models.map((m) => ({ id: m.id, limits: m.limits })),
        tenants: hub.tenants.map((t) => ({
            id: t.id,
            displayName: t.displayName,
            teams: t.teams.map((x) => ({ id: x.id, limits: x.limits })),
        })),
        apiKeys: hub.apiKeys.map((k) => ({
            id: k.id,
            sha256: keyHashes[k.id],
            tenant: k.tenant,
            team: k.team,
            models: [...k.models].sort(),
            expiresAt: k.expiresAt,
            limits: k.limits,
            serving: keyServing(hub, k),
        })),
    };
}

/**
 * Pure: every IAM role the hub's key and secret policies name, with the hub file key that names it:
 * `platform:hubDeployers[i]`, `platform:tenantKeys.readers.<tenant>[i]`, and each access-key spoke's deployer
 * (`platform:spokeIdentities.<spoke>.deployerRoleArn`, or its default name in the hub's account).
 */
export function namedRoles(cfg: HubConfig, partition: string, accountId: string): Array<{ key: string; arn: string }> {
    const out: Array<{ key: string; arn: string }> = cfg.hubDeployers.map((arn, i) => ({ key: `platform:hubDeployers[${i}]`, arn }));
    cfg.keyAdministrators.forEach((arn, i) => out.push({ key: `platform:keyAdministrators[${i}]`, arn }));
    for (const [t, readers] of Object.entries(cfg.tenantKeys.readers))
        readers.forEach((arn, i) => out.push({ key: `platform:tenantKeys.readers.${t}[${i}]`, arn }));
    for (const s of cfg.spokes) {
        const id = effectiveIdentity(s.provider, cfg.spokeIdentities[s.name]);
        if (id.mode !== "access-key") continue;
        out.push({
            key: `platform:spokeIdentities.${s.name}.deployerRoleArn${id.deployerRoleArn ? "" : " (default)"}`,
            arn: id.deployerRoleArn ?? `arn:${partition}:iam::${accountId}:role/platform-spoke-deployer-${s.name}`,
        });
    }
    return out;
}

/**
 * Looks up every role of {@link namedRoles} in the hub's own account (`aws.iam.getRole`) before any policy names it:
 * KMS and Secrets Manager refuse a policy naming a principal that does not exist (MalformedPolicyDocument), which
 * would otherwise stop `up` half-way with a message naming no key. Roles of other accounts cannot be looked up from
 * here; their owners create them first (README "What the operator provides").
 * @returns the account id, once every same-account role was found
 * @throws Error naming the hub file and key of the first missing role
 */
export async function requireNamedRolesExist(
    cfg: HubConfig,
    partition: string,
    accountId: string,
    file: string,
    provider: aws.Provider,
): Promise<string> {
    for (const { key, arn } of namedRoles(cfg, partition, accountId)) {
        const m = /^arn:[\w-]+:iam::(\d{12}):role\/(?:.*\/)?([\w+=,.@-]+)$/.exec(arn);
        if (!m || m[1] !== accountId) continue;
        await aws.iam.getRole({ name: m[2] }, { provider }).catch((e: Error) => {
            throw new Error(
                `${file}: ${key}: role ${arn} does not exist in the hub's account ${accountId} (${String(e?.message || e).split("\n")[0]}); create it before the hub's \`up\`: the key and secret policies name it`,
            );
        });
    }
    return accountId;
}

/**
 * Pure: refuses an EKS spoke whose `platform:spokeIdentities.<spoke>.accountId` is not the hub's account. The hub
 * creates each spoke's service roles in its own account, and EKS Pod Identity associates only a role of the
 * cluster's own account (EKS user guide, "Pod Identity": `CreatePodIdentityAssociation` takes a role in the
 * cluster's account; another account's role needs a `targetRoleArn` chain this platform does not build), so such a
 * spoke would never receive credentials. Put that cluster in the hub's account, or run a hub in its account.
 * @throws Error naming the hub file and the key
 */
export function refuseForeignPodIdentityAccounts(cfg: HubConfig, accountId: string, file: string): void {
    for (const s of cfg.spokes) {
        const id = effectiveIdentity(s.provider, cfg.spokeIdentities[s.name]);
        if (id.mode !== "pod-identity" || id.accountId === undefined || id.accountId === accountId) continue;
        throw new Error(
            `${file}: platform:spokeIdentities.${s.name}.accountId: ${id.accountId} is not the hub's account ${accountId}; EKS Pod Identity associates only roles of the cluster's own account, and the hub creates the spoke's roles in its account: deploy the cluster in ${accountId} (then drop the key) or run a hub in ${id.accountId}`,
        );
    }
}

/**
 * Pure: refuses an on-prem spoke with no `platform:spokeIdentities.<spoke>` entry. Without one it would get the
 * default access-key identity ({@link effectiveIdentity}) with no egress ranges and no key age: a long-lived source key
 * usable from anywhere, the very thing the access-key schema refuses when the entry is written
 * (config/identity.ts `RequiredEgressCidrsSchema`). EKS spokes need none (Pod Identity).
 * @throws ConfigError naming the hub file and each missing key
 */
export function refuseImplicitOnPremIdentities(cfg: HubConfig, file: string): void {
    const missing = cfg.spokes.filter((s) => s.provider === "onprem" && cfg.spokeIdentities[s.name] === undefined).map((s) => s.name);
    if (missing.length)
        throw new ConfigError(
            file,
            missing.map((name) => ({
                key: `platform:spokeIdentities.${name}`,
                message: `on-prem spoke ${name} has no identity; add one (mode: access-key with deployerRoleArn, keys[].createdAt and the site's egressCidrs, or mode: roles-anywhere with the site's caBundle): README "Add a region", step 1`,
            })),
        );
}

/**
 * Checks the alarm topic before any alarm names it: CloudWatch alarm actions publish only to an SNS topic in the
 * alarm's region, so another region is refused; a topic in the hub's account must exist (`aws.sns.getTopic`; its
 * default access policy lets the account's CloudWatch alarms publish). A topic in another account cannot be read from
 * here: its policy must allow `cloudwatch.amazonaws.com` to `sns:Publish` (README "What the operator provides"). A topic
 * of the hub's account encrypted with KMS must use a key whose policy lets CloudWatch use it
 * ({@link cloudWatchTopicKeyProblem}); read through Cloud Control (`aws.cloudcontrol.getResource`: the topic's
 * `KmsMasterKeyId`, the key's `KeyPolicy`).
 * @throws Error naming the hub file and `platform:alarms.topicArn`
 */
export async function requireAlarmTopic(
    cfg: HubConfig,
    region: string,
    accountId: string,
    file: string,
    provider: aws.Provider,
): Promise<void> {
    const [, , , topicRegion, topicAccount, name] = cfg.alarms.topicArn.split(":");
    if (topicRegion !== region)
        throw new Error(
            `${file}: platform:alarms.topicArn: the topic is in ${topicRegion}, the hub's alarms in ${region}; CloudWatch alarms publish only to a topic in their own region`,
        );
    if (topicAccount !== accountId) return;
    await aws.sns.getTopic({ name }, { provider }).catch((e: Error) => {
        throw new Error(
            `${file}: platform:alarms.topicArn: topic ${cfg.alarms.topicArn} does not exist in the hub's account (${String(e?.message || e).split("\n")[0]}); create it (with its subscriptions) first`,
        );
    });
    // An encrypted topic: CloudWatch must be able to use its key, or every alarm fails to publish, silently.
    const key = `${file}: platform:alarms.topicArn`;
    const read = async (typeName: string, identifier: string): Promise<Record<string, unknown>> => {
        const r = await aws.cloudcontrol.getResource({ typeName, identifier }, { provider }).catch((e: Error) => {
            throw new Error(`${key}: cannot read ${typeName} ${identifier} (${String(e?.message || e).split("\n")[0]})`);
        });
        return JSON.parse(r.properties);
    };
    const keyId = (await read("AWS::SNS::Topic", cfg.alarms.topicArn)).KmsMasterKeyId as string | undefined;
    if (!keyId) return;
    if (/(^|:)alias\/aws\/sns$/.test(keyId))
        throw new Error(
            `${key}: topic ${cfg.alarms.topicArn} is encrypted with the AWS managed key aws/sns, which CloudWatch cannot use, so no alarm would reach it; encrypt it with a customer managed key whose policy allows cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey*`,
        );
    const keyArn = /(^|:)alias\//.test(keyId)
        ? (await aws.kms.getAlias({ name: keyId.replace(/^arn:[^:]+:kms:[^:]*:\d*:/, "") }, { provider })).targetKeyArn
        : keyId;
    const keyPolicy = (await read("AWS::KMS::Key", keyArn.split("/").pop()!)).KeyPolicy;
    const problem = cloudWatchTopicKeyProblem(typeof keyPolicy === "string" ? JSON.parse(keyPolicy) : keyPolicy);
    if (problem)
        throw new Error(
            `${key}: CloudWatch cannot publish to topic ${cfg.alarms.topicArn} encrypted with ${keyArn}: its key policy has ${problem}; allow cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey* without conditions`,
        );
}

/**
 * Refuses a hub stack file whose state is not encrypted with the hub's KMS key (lib/ci-roles.ts
 * `hubSecretsProviderIssue`): a passphrase-encrypted hub could be decrypted by anyone holding the passphrase.
 * @throws ConfigError naming the stack file and `secretsprovider`
 */
export function requireHubSecretsProvider(file: string): void {
    if (!fs.existsSync(file)) return;
    const doc = (YAML.parse(fs.readFileSync(file, "utf8")) ?? {}) as Record<string, unknown>;
    // tools/harness.ts marks an offline render (the program under mocks); a real engine run never has it.
    const issue = hubSecretsProviderIssue(doc, process.env[OFFLINE_RENDER_ENV] === "1");
    if (issue) throw new ConfigError(file, [{ key: "secretsprovider", message: issue }]);
}

/**
 * Pure: the IAM identity a caller ARN acts as: an assumed-role session (`arn:<p>:sts::<account>:assumed-role/<role>/<session>`)
 * as its role, by account and name (a session ARN drops the role's path); a user or role ARN as itself.
 */
function callerIdentityKey(arn: string): string {
    const session = /^arn:([\w-]+):sts::(\d{12}):assumed-role\/([^/]+)\/.+$/.exec(arn);
    if (session) return `${session[1]}:${session[2]}:role:${session[3]}`;
    const iam = /^arn:([\w-]+):iam::(\d{12}):(role|user)\/(?:.*\/)?([^/]+)$/.exec(arn);
    if (iam) return `${iam[1]}:${iam[2]}:${iam[3]}:${iam[4]}`;
    return arn;
}

/**
 * Pure: why `callerArn` (`aws.getCallerIdentity().arn`) may not run the hub's `up`, or undefined. Only
 * `platform:hubDeployers` and `platform:keyAdministrators` administer the hub's KMS keys (lib/kms.ts): anyone else's
 * `up` would fail partway, at the first key policy that locks them out. An assumed-role session counts as its role.
 */
export function hubCallerIssue(cfg: Pick<HubConfig, "hubDeployers" | "keyAdministrators">, callerArn: string): string | undefined {
    const allowed = [...cfg.hubDeployers, ...cfg.keyAdministrators];
    const me = callerIdentityKey(callerArn);
    if (allowed.some((a) => callerIdentityKey(a) === me)) return undefined;
    return `the caller ${callerArn} is not one of platform:hubDeployers (${cfg.hubDeployers.join(", ")}) nor platform:keyAdministrators: run the hub's up as a hub deployer (the hub's KMS key policies admit only those), or add its role to platform:hubDeployers`;
}

/** The spoke-role layout this release writes: 2 = one role per spoke service (the previous release: one per spoke). */
export const SPOKE_ROLE_GENERATION = 2;

/**
 * Pure: whether the hub keeps the previous release's spoke roles (components/hub/legacy-spoke-role.ts) this `up`: it
 * was deployed by the previous release (it has bundle revisions but no `spokeRoleGeneration` output), or it kept them
 * last time. A hub first deployed on this release never creates them (no spoke ever used them, and their fixed names
 * would collide with another hub's in the account).
 */
export function keepLegacySpokeRolesOf(previous: {
    previousRevisions?: unknown;
    previousGeneration?: unknown;
    previousKept?: unknown;
}): boolean {
    if (previous.previousKept === true) return true;
    const deployed =
        !!previous.previousRevisions &&
        typeof previous.previousRevisions === "object" &&
        Object.keys(previous.previousRevisions).length > 0;
    return deployed && previous.previousGeneration === undefined;
}

/**
 * Builds the hub stack (run by index.ts for `platform:role: hub`): checks everything it can first (the hub file's
 * secrets provider, its spoke files, on-prem identities, bucket-name length, the AWS partition,
 * the caller, pod-identity accounts, every role the key policies name, the alarm topic), then creates the API keys
 * ({@link ApiKeys}), the policy store ({@link PolicyStore}), the usage ledger ({@link UsageLedger}), the access logs,
 * one {@link SpokeIdentity} per spoke, each usage stream's resource policy and, with `platform:failover`, the global DNS.
 * Nothing is half-applied: every check named under `@throws` runs before any resource but the hub's AWS provider is
 * registered.
 * @param cfg the validated hub config (programs/load.ts `loadStackConfig`)
 * @param stackName this hub stack's name (`hub-prod`): the self StackReference for bundle revisions and the
 *   publication serial, and each contract's `hub`
 * @returns the stack outputs: `spokeContracts`, the signed `publication` (lib/hub-publication.ts), `spokeNetworks`,
 *   `placement`, `modelPlacement`, `failover` (only with `platform:failover`), `accessModel` (key hashes, never keys),
 *   `tenantKeySecrets` (secret ARNs), `policyRevisions`, `spokeRoleGeneration`, `legacySpokeRoles`, `usageLedger`
 *   (no secrets)
 * @throws ConfigError naming the hub file and key: `secretsprovider` ({@link requireHubSecretsProvider}),
 *   `platform:spokes[i]` ({@link checkSpokeRegistry}), `platform:spokeIdentities.<spoke>`
 *   ({@link refuseImplicitOnPremIdentities}), `platform:namePrefix` (a bucket name over S3's 63 characters),
 *   `aws:region` (a partition other than `aws`), `platform:hubDeployers` (the caller is no hub deployer or key
 *   administrator)
 * @throws SpokeFilesError (a ConfigError) when a spoke file of this hub is wrong ({@link checkSpokeRegistry})
 * @throws Error naming the hub file and key: a pod-identity spoke in another account
 *   ({@link refuseForeignPodIdentityAccounts}), a named role missing from the hub's account
 *   ({@link requireNamedRolesExist}), an alarm topic in another region, missing, or unusable by CloudWatch
 *   ({@link requireAlarmTopic})
 * @throws Error from the Pulumi SDK when `aws:region` is not set (`pulumi.Config.require`; loadStackConfig refuses it
 *   first) and from the file system when the hub file's directory cannot be read
 * @throws Error from the components once resources are registered: a usage-ledger Lambda bundle that does not build
 *   (esbuild's messages, {@link UsageLedger}); their other guards are excluded by the checks above
 */
export async function buildHub(cfg: HubConfig, stackName: string) {
    requireHubSecretsProvider(stackFilePath());
    // Hub-side spoke check (spoke files exist and match, no name/subnet/rail-pool collisions) before anything is created.
    const spokeNetworks = checkSpokeRegistry(cfg, stackFilePath());
    // Failover: each reachable spoke's edge from its file (checkSpokeRegistry reported anything missing).
    const edges = readSpokeEdges(cfg, stackFilePath());
    refuseImplicitOnPremIdentities(cfg, stackFilePath());
    // The hub's one AWS provider (region from `aws:region`), handed to every AWS component.
    const region = new pulumi.Config("aws").require("region");
    // Every fixed bucket name must fit S3's 63 characters with this region (lib/hub-bucket-names.ts).
    const bucketNameIssue = hubBucketNameIssue(cfg.namePrefix, region);
    if (bucketNameIssue) throw new ConfigError(stackFilePath(), [{ key: "platform:namePrefix", message: bucketNameIssue }]);
    const provider = new aws.Provider("hub-aws", { region });
    const opts: pulumi.ComponentResourceOptions = { providers: [provider] };

    // Who and where the hub runs: the account spokes' roles live in, and the deployer that writes key secrets.
    // Every role the policies below name is looked up first (requireNamedRolesExist): a missing one stops the hub
    // here, before any resource that names it is registered.
    const [identity, part] = await Promise.all([aws.getCallerIdentity({}, { provider }), aws.getPartition({}, { provider })]);
    // Every AWS service name the hub's policies build is the `aws` partition's (lib/aws-partition.ts): any other
    // partition is refused here, before any policy is written.
    const partitionIssue = hubPartitionIssue(part, region);
    if (partitionIssue) throw new ConfigError(stackFilePath(), [{ key: "aws:region", message: partitionIssue }]);
    // Only a hub deployer (or key administrator) gets through the hub's key policies: refused here, not partway.
    // An offline render's caller is the mocks' render user unless a test names one (lib/ci-roles.ts MOCK_CALLER_ARN_ENV).
    if (process.env[OFFLINE_RENDER_ENV] !== "1" || process.env[MOCK_CALLER_ARN_ENV]) {
        const issue = hubCallerIssue(cfg, identity.arn);
        if (issue) throw new ConfigError(stackFilePath(), [{ key: "platform:hubDeployers", message: issue }]);
    }
    refuseForeignPodIdentityAccounts(cfg, identity.accountId, stackFilePath());
    await requireNamedRolesExist(cfg, part.partition, identity.accountId, stackFilePath(), provider);
    await requireAlarmTopic(cfg, region, identity.accountId, stackFilePath(), provider);
    const caller = aws.getCallerIdentityOutput({}, { provider });
    const partition = aws.getPartitionOutput({}, { provider }).partition;
    // On-prem spokes' deployers read their source-key secrets under the hub's credential key (cross-account too).
    const spokeDeployers = cfg.spokes.flatMap((s) => {
        const principal = spokeDeployerArn(s.name, effectiveIdentity(s.provider, cfg.spokeIdentities[s.name]), partition, caller.accountId);
        return principal ? [principal] : [];
    });
    // Who administers the hub's KMS keys (lib/kms.ts keyAdministration): the deployers and any break-glass role.
    const keyAdministrators = hubAdministrators(cfg);
    const keys = new ApiKeys(
        "api-keys",
        {
            keys: cfg.apiKeys.map((k) => ({ id: k.id, tenant: k.tenant, sha256: k.sha256 })),
            delivery: cfg.tenantKeys,
            hubDeployers: cfg.hubDeployers,
            otherKeyUsers: spokeDeployers,
            region,
            accountId: caller.accountId,
            keyAdministrators: keyAdministrators,
            namePrefix: cfg.namePrefix,
        },
        opts,
    );
    const model = keys.keyHashes.apply((h) => accessModel(cfg, h));
    const spokes = cfg.spokes.map((s) => s.name).sort();

    // Bundle revisions without a counter service: this stack's own previous `policyRevisions` output.
    const self = new pulumi.StackReference("self", { name: `${pulumi.getOrganization()}/${pulumi.getProject()}/${stackName}` });
    // MIGRATION (components/hub/legacy-spoke-role.ts): keep the previous release's spoke roles on a hub deployed by it.
    const keepLegacySpokeRoles = keepLegacySpokeRolesOf({
        previousRevisions: (await self.getOutputDetails("policyRevisions")).value,
        previousGeneration: (await self.getOutputDetails("spokeRoleGeneration")).value,
        previousKept: (await self.getOutputDetails("legacySpokeRoles")).value,
    });
    // The publication serial moves on from this stack's previous publication (lib/hub-publication.ts).
    const previousPublication: unknown = (await self.getOutputDetails(PUBLICATION_OUTPUT)).value;
    const store = new PolicyStore(
        "policy-store",
        {
            spokes,
            policy: model,
            previous: self.getOutput("policyRevisions"),
            // Fixed, globally unique name: account and region, never an auto-suffix.
            bucketName: caller.accountId.apply((a) => hubBucketName("policy", cfg.namePrefix, a, region)),
            namePrefix: cfg.namePrefix,
            accountId: caller.accountId,
            keyAdministrators: keyAdministrators,
            region,
        },
        opts,
    );
    // Usage transport + ledger (one stream per spoke; its identity may only put to its own), alarms to the operator's topic.
    const ledger = new UsageLedger(
        "usage-ledger",
        {
            ...cfg.usage,
            spokes,
            region,
            partition: part.partition,
            availabilityZones: ledgerAvailabilityZones(cfg.usage, region),
            alarms: cfg.alarms,
            accountId: caller.accountId,
            keyAdministrators: keyAdministrators,
            namePrefix: cfg.namePrefix,
        },
        opts,
    );
    // Server access logs of the two data buckets (config/hub.ts `AccessLogsConfigSchema`; why not CloudTrail data events:
    // docs/architecture.md).
    new AccessLogs(
        "access-logs",
        {
            sources: [
                { id: "policy-bundles", bucket: store.bucket, arn: store.bucketArn, prefix: POLICY_BUCKET_LOG_PREFIX },
                {
                    id: "usage-failed-batches",
                    bucket: ledger.failedBatchBucket,
                    arn: ledger.failedBatchBucketArn,
                    prefix: "usage-failed-batches/",
                },
            ],
            retentionDays: cfg.accessLogs.retentionDays,
            administrators: keyAdministrators,
            accountId: caller.accountId,
            region,
            namePrefix: cfg.namePrefix,
        },
        opts,
    );
    const identities = new Map(
        spokes.map((s) => {
            const ref = cfg.spokes.find((x) => x.name === s)!;
            return [
                s,
                new SpokeIdentity(
                    `spoke-${s}`,
                    {
                        spoke: s,
                        provider: ref.provider,
                        identity: cfg.spokeIdentities[s],
                        clusterName: ref.provider === "eks" ? eksClusterNameOf(s) : undefined,
                        // An EKS spoke's region is its cluster's AWS region (checked against the spoke file by checkSpokeRegistry).
                        clusterRegion: ref.provider === "eks" ? ref.region : undefined,
                        bucketArn: store.bucketArn,
                        kmsKeyArn: store.kmsKeyArn,
                        region,
                        usageStreamArn: ledger.streamArnFor(s),
                        accountId: caller.accountId,
                        partition,
                        hubDeployers: cfg.hubDeployers,
                        secretsKmsKeyArn: keys.kmsKeyArn,
                        hub: stackName,
                        keepLegacyRole: keepLegacySpokeRoles,
                        namePrefix: cfg.namePrefix,
                    },
                    opts,
                ),
            ];
        }),
    );

    // Each usage stream: only its spoke's metering role (and, while kept, its previous-release role) may put records
    // (components/hub/ledger/transport.ts).
    for (const s of spokes)
        new aws.kinesis.ResourcePolicy(
            `usage-ledger-${s}-put-policy`,
            {
                resourceArn: ledger.streamArnFor(s),
                policy: pulumi
                    .all([ledger.streamArnFor(s), identities.get(s)!.roleArns.metering, identities.get(s)!.legacyRoleArn])
                    .apply(([streamArn, meteringRoleArn, legacyRoleArn]) =>
                        JSON.stringify(usageStreamPolicy({ streamArn, meteringRoleArn, legacyRoleArn })),
                    ),
            },
            { provider },
        );

    const extras: pulumi.Output<Record<string, SpokeContractExtras>> = pulumi.all(
        Object.fromEntries(
            spokes.map((s) => {
                const policy = pulumi.output({
                    bucket: store.bucket,
                    bucketOwner: caller.accountId,
                    region,
                    prefix: bundlePaths.prefix(s),
                    publicKey: store.publicKey,
                    keyId: store.keyId,
                    kmsKeyArn: store.kmsKeyArn,
                    roleArn: identities.get(s)!.roleArn,
                    revision: store.revisions.apply((r) => r[s].revision),
                    contentHash: store.revisions.apply((r) => r[s].contentHash),
                }) as pulumi.Output<PolicyContract>;
                return [
                    s,
                    pulumi.all([policy, ledger.usageContract(s), identities.get(s)!.contract, identities.get(s)!.roleArns.metering]).apply(
                        ([p, usage, identity, meteringRoleArn]): SpokeContractExtras => ({
                            policy: p,
                            usage: { ...usage, roleArn: meteringRoleArn },
                            identity,
                        }),
                    ),
                ];
            }),
        ),
    );
    const spokeContracts = extras.apply((x) => buildSpokeContracts(cfg, stackName, x, edges));
    // The one client hostname: Route 53 health checks and records per spoke behind it.
    const dns = cfg.failover
        ? new GlobalDns(
              "global-dns", // Every spoke behind the name has an edge once checkSpokeRegistry passed; an offline render that set a
              // spoke file aside leaves that spoke out.
              { failover: cfg.failover, spokes: cfg.failover.spokes.flatMap((s) => (edges.has(s) ? [edges.get(s)!] : [])) },
              opts,
          )
        : undefined;
    return {
        /** One versioned contract object per spoke; spokes read their entry from the published outputs (lib/hub-publication.ts). */
        spokeContracts,
        /** The signature of what spokes read (spokeContracts, spokeNetworks) with the bundle signing key (lib/hub-publication.ts). */
        [PUBLICATION_OUTPUT]: store.signPublication(
            stackName,
            pulumi.output({ spokeContracts, spokeNetworks }) as unknown as pulumi.Output<Record<string, unknown>>,
            previousPublication,
        ),
        /** Per spoke: its routable networks, so each spoke can refuse to collide with the others (programs/spoke-registry.ts). */
        spokeNetworks,
        /** Placement summary: spoke -> endpoint names (for humans and dashboards). */
        placement: Object.fromEntries(
            spokes.map((s) => {
                const endpoints = placedEndpoints(cfg, s);
                return [s, { revision: contentHash(endpoints), endpoints: endpoints.map((e) => e.name) }];
            }),
        ),
        /** Model -> every spoke it is placed on, with the endpoint and its fallbacks (npm run status, report, PR diff). */
        modelPlacement: modelPlacement(cfg),
        /** The global hostname: mode, spokes behind it and their Route 53 health checks (absent without platform:failover). */
        ...(cfg.failover && dns
            ? {
                  failover: {
                      hostname: cfg.failover.hostname,
                      mode: cfg.failover.mode,
                      spokes: cfg.failover.spokes,
                      healthChecks: dns.healthCheckIds,
                  },
              }
            : {}),
        /** The access model with key hashes (no keys). */
        accessModel: model,
        /**
         * Tenant -> ARN of the Secrets Manager secret holding its API keys (readable only by the roles named in
         * platform:tenantKeys.readers). Never the keys: every spoke deployer reads this stack's outputs.
         */
        tenantKeySecrets: keys.secretArns,
        /** Spoke -> live bundle revision; read back by the next deployment (self StackReference). */
        policyRevisions: store.revisions,
        /** One role per spoke service (components/hub/SpokeIdentity.ts); read back by the next deployment. */
        spokeRoleGeneration: SPOKE_ROLE_GENERATION,
        /** Whether this hub still keeps the previous release's spoke roles (components/hub/legacy-spoke-role.ts). */
        legacySpokeRoles: keepLegacySpokeRoles,
        /** Usage ledger: per-spoke streams, consumer, failure destination, database endpoint (no secrets). */
        usageLedger: {
            streams: Object.fromEntries(spokes.map((s) => [s, ledger.usageContract(s)])),
            consumerArn: ledger.consumerArn,
            failureQueueArn: ledger.failureQueueArn,
            failedBatchBucket: ledger.failedBatchBucket,
            /** The hub's account, which owns the failure bucket (npm run replay-usage sends it as ExpectedBucketOwner). */
            failedBatchBucketOwner: caller.accountId,
            /** The ledger key the failed batches are encrypted with (npm run replay-usage -- --rescue-stream names it). */
            failedBatchKeyArn: ledger.keyArn,
            databaseEndpoint: ledger.clusterEndpoint,
            /** The operator's path to the ledger (npm run status / replay-usage invoke it; the database is VPC-only). */
            opsFunction: ledger.opsFunction,
        },
    };
}
