// The AWS SDK's partition table (@aws-sdk/core `./client`, as the SDK clients resolve endpoints with it) and the
// pinned AWS provider's region list (suggestions only).
import { partition as sdkPartition } from "@aws-sdk/core/client";
import { Region as PulumiAwsRegion } from "@pulumi/aws/types/enums";
import { type ConfigIssue, editDistance } from "../config/errors";
import { isEksSpoke, type SpokeConfig } from "../config/spoke";
import type { StackConfig } from "../config/stack";

/**
 * The one AWS partition the hub's policies are written for: `aws`, DNS suffix `amazonaws.com`. Every AWS service name
 * the hub's key and role policies build assumes it: `kms:ViaService` values `<service>.<region>.amazonaws.com`
 * (components/hub/SpokeIdentity.ts, components/hub/legacy-spoke-role.ts, components/hub/ApiKeys.ts,
 * components/hub/ledger/iam.ts, lib/kms.ts `serviceOnlyKeyPolicy`, lib/ci-roles.ts), CloudWatch Logs' service principal
 * (lib/kms.ts `logsServicePrincipal`), and the ARNs the CI roles tool writes (`arn:aws:`). In another partition those
 * names match nothing (`aws-cn`'s services are `<service>.<region>.amazonaws.com.cn`), so a key would refuse the very
 * services it is for; the hub is refused there instead, before anything is created. EKS spokes name `arn:aws:` ARNs
 * and trust the hub, so they are refused outside it too ({@link stackAwsRegionIssues}).
 * Source: aws/aws-sdk-js-v3@v3.1175.0:packages/util-endpoints/src/lib/aws/partitions.json (partition `aws`: `dnsSuffix`,
 * `regionRegex`); test/hub-partition.test.ts checks both against the installed SDK's partition table.
 */
export const HUB_PARTITION = {
    partition: "aws",
    dnsSuffix: "amazonaws.com",
    /** The `aws` partition's `regionRegex` (the partitions file above). */
    regionRegex: /^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$/,
} as const;

const REFUSAL = `the hub's key and role policies name AWS services as <service>.<region>.${HUB_PARTITION.dnsSuffix} (kms:ViaService) in ARNs of partition ${HUB_PARTITION.partition}, and are written for that partition only: deploy the hub in a region of partition ${HUB_PARTITION.partition}`;

/**
 * Pure: why the hub cannot be deployed where its AWS provider answers `p` (`aws.getPartition`: `partition`,
 * `dnsSuffix`), or undefined. Both must be {@link HUB_PARTITION}'s: a partition with the same DNS suffix (`aws-us-gov`)
 * still has other ARNs and service principals.
 */
export function hubPartitionIssue(p: { partition: string; dnsSuffix: string }, region: string): string | undefined {
    if (p.partition === HUB_PARTITION.partition && p.dnsSuffix === HUB_PARTITION.dnsSuffix) return undefined;
    return `region ${region} is in partition ${p.partition} (DNS suffix ${p.dnsSuffix}); ${REFUSAL}`;
}

/**
 * The AWS SDK's partition table: `partition(region)` answers a listed region with its `description` (and the
 * partition's outputs), an unlisted one with the outputs of the first partition whose `regionRegex` matches, or `aws`.
 * Source: the pinned @aws-sdk/core (3.981.2, package.json; the @aws-sdk clients' own dependency) `./client` export
 * `partition`, whose bundled table is the SDK's partitions.json ({@link HUB_PARTITION} cites it).
 */
const sdkPartitionOf = (region: string) => sdkPartition(region) as { name: string; dnsSuffix: string; description?: string };

/**
 * Pure: whether the pinned AWS SDK's partition table lists `region` as a region of {@link HUB_PARTITION}. The list, not
 * the partition's `regionRegex`: the regex admits any `<area>-<word>-<digit>` (`us-est-1`, `eu-west-9`), so a typo
 * would pass it and fail only at `pulumi up`. (`aws-global`, listed but not a region, fails the regex.)
 */
export function isListedAwsRegion(region: string): boolean {
    const p = sdkPartitionOf(region);
    return p.name === HUB_PARTITION.partition && p.description !== undefined && HUB_PARTITION.regionRegex.test(region);
}

/**
 * The region names suggestions are drawn from: the pinned @pulumi/aws provider's `Region` enum (the SDK's table is
 * not exported as a list), kept to those the SDK lists in {@link HUB_PARTITION}.
 */
const KNOWN_AWS_REGIONS: readonly string[] = Object.values(PulumiAwsRegion as Record<string, string>)
    .filter(isListedAwsRegion)
    .sort();

/** Listed regions within edit distance 2 of `region`, nearest first (at most 3): what a typo most likely meant. */
export function nearAwsRegions(region: string): string[] {
    return KNOWN_AWS_REGIONS.map((r) => ({ r, d: editDistance(region, r) }))
        .filter((x) => x.d <= 2)
        .sort((a, b) => a.d - b.d || a.r.localeCompare(b.r))
        .slice(0, 3)
        .map((x) => x.r);
}

/** The stack-file key that acknowledges a region the pinned SDK does not list yet (config/aws-region.ts). */
export const UNLISTED_AWS_REGIONS_KEY = "platform:unlistedAwsRegions";

/** How a refused region names its way out: the stack-file key, or a tool's flag that writes it. */
export interface RegionWayOut {
    /** Regions the stack file acknowledges as real though the SDK does not list them ({@link UNLISTED_AWS_REGIONS_KEY}). */
    acknowledged?: readonly string[];
    /** How to acknowledge one, in words (default: add it to {@link UNLISTED_AWS_REGIONS_KEY}). */
    howToAcknowledge?: string;
}

/**
 * Pure: why `region` is not a region of {@link HUB_PARTITION}, followed by `why` it must be, or undefined. The one test
 * of an AWS region name in a stack file: the hub's `aws:region` ({@link hubRegionIssue}), an EKS spoke's region keys
 * ({@link eksSpokeRegionIssue}), the Route 53 regions of a spoke's edge ({@link stackAwsRegionIssues}) and
 * tools/new-spoke.ts `--region`. Closed world: a region the pinned AWS SDK lists in partition `aws` passes; a name of
 * that partition's shape (`regionRegex`) the SDK does not list (a typo like `us-est-1`, or a region newer than the
 * SDK) passes only when `way.acknowledged` names it; anything else (another partition, another shape) is refused.
 * Near listed names are suggested.
 */
export function awsPartitionRegionIssue(region: string, why: string, way: RegionWayOut = {}): string | undefined {
    if (isListedAwsRegion(region)) return undefined;
    const p = sdkPartitionOf(region);
    const near = p.description === undefined ? nearAwsRegions(region) : [];
    const didYouMean = near.length
        ? `did you mean ${near
              .map((r) => `"${r}"`)
              .join(", ")
              .replace(/, ([^,]*)$/, " or $1")}?`
        : undefined;
    if (!HUB_PARTITION.regionRegex.test(region) || p.name !== HUB_PARTITION.partition) {
        const hint =
            p.description !== undefined
                ? `the AWS SDK lists it in partition ${p.name}`
                : (didYouMean ?? "regions such as us-east-1, eu-west-1, ap-southeast-1 are");
        return `region ${region} is not a region of partition ${HUB_PARTITION.partition} (${hint}); ${why}`;
    }
    if (way.acknowledged?.includes(region)) return undefined;
    const how = way.howToAcknowledge ?? `add it to ${UNLISTED_AWS_REGIONS_KEY} (a list) in this stack file`;
    return `region ${region} is not a region the pinned AWS SDK lists in partition ${HUB_PARTITION.partition}${didYouMean ? ` (${didYouMean})` : ""}; if it is a region newer than the SDK, ${how}`;
}

/**
 * Pure: why `region` (a stack file's `aws:region`) is not a region of {@link HUB_PARTITION}, or undefined; for the
 * offline tools that write the hub's policies without a provider to ask (tools/ci-roles.ts).
 */
export function hubRegionIssue(region: string, way: RegionWayOut = {}): string | undefined {
    return awsPartitionRegionIssue(region, REFUSAL, way);
}

/**
 * Why an EKS spoke must be in {@link HUB_PARTITION}: its IAM policies and EKS access entries name ARNs of that partition
 * (`arn:aws:`: components/spoke/EksCluster.ts access policies, lib/aws-load-balancer-controller.ts, the VPC ARN in
 * programs/eks-spoke.ts), and the hub it trusts and is trusted by runs there only; in `aws-cn` or `aws-us-gov` those ARNs
 * match nothing and the trust would cross partitions, which IAM does not allow.
 */
const EKS_SPOKE_REFUSAL = `an EKS spoke's IAM policies and EKS access entries name ARNs of partition ${HUB_PARTITION.partition} (arn:${HUB_PARTITION.partition}:) and it trusts the hub, which runs in partition ${HUB_PARTITION.partition} only: put the spoke in a region of partition ${HUB_PARTITION.partition}`;

/** Pure: why an EKS spoke cannot run in `region` (not a region of {@link HUB_PARTITION}), or undefined. */
export function eksSpokeRegionIssue(region: string, way: RegionWayOut = {}): string | undefined {
    return awsPartitionRegionIssue(region, EKS_SPOKE_REFUSAL, way);
}

/**
 * Why a spoke's Route 53 regions must be of {@link HUB_PARTITION}: the hub writes the latency records
 * (lib/failover.ts, `latencyRoutingPolicies[].region`) and cert-manager's DNS-01 solver calls Route 53 in that region
 * (lib/edge.ts `edgeIssuer`), both in the hub's partition.
 */
const ROUTE53_REFUSAL = `Route 53 latency records (written by the hub) and cert-manager's Route 53 DNS-01 solver use a region of partition ${HUB_PARTITION.partition}, where the hub runs`;

/**
 * Pure: every AWS region key of one parsed stack file that {@link awsPartitionRegionIssue} refuses, and every entry of
 * `platform:unlistedAwsRegions` (config/aws-region.ts) that acknowledges nothing it must: not of partition `aws`'s shape,
 * listed by the SDK already, or named by no region key of the file. The keys:
 * - hub: `aws:region` (`awsRegion`);
 * - EKS spoke: `platform:cluster.region` (the spoke's own AWS provider; config/spoke.ts makes `platform:spoke.region`
 *   equal it) and `aws:region` (the default provider) when set;
 * - any spoke: `platform:gateway.listener.reachable.latencyRegion` and, for `tls.source: acme-dns01`,
 *   `platform:gateway.listener.tls.route53.region`.
 * An on-prem spoke's `platform:spoke.region` is a site name (`vn-hanoi-1`), never checked. Called where stack files
 * are read, before any resource: the stack's own program (programs/load.ts) and the hub's check of its spokes
 * (programs/spoke-registry.ts `spokeFilesOf`).
 */
export function stackAwsRegionIssues(cfg: StackConfig, awsRegion: string | undefined): ConfigIssue[] {
    const acknowledged = (cfg.role === "hub" ? cfg.hub.unlistedAwsRegions : cfg.spoke.unlistedAwsRegions) ?? [];
    const keys: Array<[key: string, region: string, why: string]> = [];
    if (cfg.role === "hub") {
        if (awsRegion !== undefined) keys.push(["aws:region", awsRegion, REFUSAL]);
    } else {
        const spoke: SpokeConfig = cfg.spoke;
        if (isEksSpoke(spoke)) {
            keys.push(["platform:cluster.region", spoke.cluster.region, EKS_SPOKE_REFUSAL]);
            if (awsRegion !== undefined) keys.push(["aws:region", awsRegion, EKS_SPOKE_REFUSAL]);
        }
        const listener = spoke.gateway.listener;
        const latency = listener.reachable?.latencyRegion;
        if (latency !== undefined) keys.push(["platform:gateway.listener.reachable.latencyRegion", latency, ROUTE53_REFUSAL]);
        if (listener.tls?.source === "acme-dns01")
            keys.push(["platform:gateway.listener.tls.route53.region", listener.tls.route53.region, ROUTE53_REFUSAL]);
    }
    const issues: ConfigIssue[] = [];
    for (const [key, region, why] of keys) {
        const message = awsPartitionRegionIssue(region, why, { acknowledged });
        if (message) issues.push({ key, message });
    }
    acknowledged.forEach((region, i) => {
        const key = `${UNLISTED_AWS_REGIONS_KEY}[${i}]`;
        if (isListedAwsRegion(region))
            issues.push({ key, message: `the pinned AWS SDK lists ${region} in partition ${HUB_PARTITION.partition}: remove this entry` });
        else if (!HUB_PARTITION.regionRegex.test(region) || sdkPartitionOf(region).name !== HUB_PARTITION.partition)
            issues.push({
                key,
                message: `${region} is not a region name of partition ${HUB_PARTITION.partition} (${HUB_PARTITION.regionRegex.source}): only such a region the pinned AWS SDK does not list yet may be acknowledged`,
            });
        else if (!keys.some(([, r]) => r === region))
            issues.push({ key, message: `no AWS region key of this file names ${region}: remove this entry` });
    });
    return issues;
}
