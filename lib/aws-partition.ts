import type { ConfigIssue } from "../config/errors";
import { isEksSpoke, type SpokeConfig } from "../config/spoke";

/**
 * The one AWS partition the hub's policies are written for: `aws`, DNS suffix `amazonaws.com`. Every AWS service name
 * the hub's key and role policies build assumes it: `kms:ViaService` values `<service>.<region>.amazonaws.com`
 * (components/hub/SpokeIdentity.ts, components/hub/legacy-spoke-role.ts, components/hub/ApiKeys.ts,
 * components/hub/ledger/iam.ts, lib/kms.ts `serviceOnlyKeyPolicy`, lib/ci-roles.ts), CloudWatch Logs' service principal
 * (lib/kms.ts `logsServicePrincipal`), and the ARNs the CI roles tool writes (`arn:aws:`). In another partition those
 * names match nothing (`aws-cn`'s services are `<service>.<region>.amazonaws.com.cn`), so a key would refuse the very
 * services it is for; the hub is refused there instead, before anything is created. EKS spokes name `arn:aws:` ARNs
 * and trust the hub, so they are refused outside it too ({@link eksSpokePartitionIssues}).
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
 * Pure: why `region` is not a region of {@link HUB_PARTITION} (its `regionRegex`), followed by `why` it must be, or
 * undefined. The one test of a region name the hub ({@link hubRegionIssue}) and the EKS spokes
 * ({@link eksSpokePartitionIssues}) share.
 */
export function awsPartitionRegionIssue(region: string, why: string): string | undefined {
    if (HUB_PARTITION.regionRegex.test(region)) return undefined;
    return `region ${region} is not a region of partition ${HUB_PARTITION.partition} (regions such as us-east-1, eu-west-1, ap-southeast-1 are); ${why}`;
}

/**
 * Pure: why `region` (a stack file's `aws:region`) is not a region of {@link HUB_PARTITION}, or undefined; for the
 * offline tools that write the hub's policies without a provider to ask (tools/ci-roles.ts).
 */
export function hubRegionIssue(region: string): string | undefined {
    return awsPartitionRegionIssue(region, REFUSAL);
}

/**
 * Why an EKS spoke must be in {@link HUB_PARTITION}: its IAM policies and EKS access entries name ARNs of that partition
 * (`arn:aws:`: components/spoke/EksCluster.ts access policies, lib/aws-load-balancer-controller.ts, the VPC ARN in
 * programs/eks-spoke.ts), and the hub it trusts and is trusted by runs there only; in `aws-cn` or `aws-us-gov` those ARNs
 * match nothing and the trust would cross partitions, which IAM does not allow.
 */
const EKS_SPOKE_REFUSAL = `an EKS spoke's IAM policies and EKS access entries name ARNs of partition ${HUB_PARTITION.partition} (arn:${HUB_PARTITION.partition}:) and it trusts the hub, which runs in partition ${HUB_PARTITION.partition} only: put the spoke in a region of partition ${HUB_PARTITION.partition}`;

/** Pure: why an EKS spoke cannot run in `region` (not a region of {@link HUB_PARTITION}), or undefined. */
export function eksSpokeRegionIssue(region: string): string | undefined {
    return awsPartitionRegionIssue(region, EKS_SPOKE_REFUSAL);
}

/**
 * Pure: the region keys of an EKS spoke's stack file that are not in {@link HUB_PARTITION}: `platform:cluster.region`
 * (the spoke's own AWS provider; config/spoke.ts makes `platform:spoke.region` equal it) and `aws:region` (the default
 * provider) when set. Empty for an on-prem spoke (it makes no AWS ARN). Checked where spoke stack files are read,
 * before any resource: the spoke's own program (programs/load.ts) and the hub's check of its spokes
 * (programs/spoke-registry.ts `spokeFilesOf`).
 */
export function eksSpokePartitionIssues(spoke: SpokeConfig, awsRegion: string | undefined): ConfigIssue[] {
    if (!isEksSpoke(spoke)) return [];
    const issues: ConfigIssue[] = [];
    const cluster = eksSpokeRegionIssue(spoke.cluster.region);
    if (cluster) issues.push({ key: "platform:cluster.region", message: cluster });
    const provider = awsRegion === undefined ? undefined : eksSpokeRegionIssue(awsRegion);
    if (provider) issues.push({ key: "aws:region", message: provider });
    return issues;
}
