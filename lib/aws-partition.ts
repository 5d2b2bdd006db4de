/**
 * The one AWS partition the hub's policies are written for: `aws`, DNS suffix `amazonaws.com`. Every AWS service name
 * the hub's key and role policies build assumes it: `kms:ViaService` values `<service>.<region>.amazonaws.com`
 * (components/hub/SpokeIdentity.ts, components/hub/legacy-spoke-role.ts, components/hub/ApiKeys.ts,
 * components/hub/ledger/iam.ts, lib/kms.ts `serviceOnlyKeyPolicy`, lib/ci-roles.ts), CloudWatch Logs' service principal
 * (lib/kms.ts `logsServicePrincipal`), and the ARNs the CI roles tool writes (`arn:aws:`). In another partition those
 * names match nothing (`aws-cn`'s services are `<service>.<region>.amazonaws.com.cn`), so a key would refuse the very
 * services it is for; the hub is refused there instead, before anything is created.
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
 * Pure: why `region` (a stack file's `aws:region`) is not a region of {@link HUB_PARTITION}, or undefined; for the
 * offline tools that write the hub's policies without a provider to ask (tools/ci-roles.ts).
 */
export function hubRegionIssue(region: string): string | undefined {
    if (HUB_PARTITION.regionRegex.test(region)) return undefined;
    return `region ${region} is not a region of partition ${HUB_PARTITION.partition} (its regionRegex ${HUB_PARTITION.regionRegex.source}); ${REFUSAL}`;
}
