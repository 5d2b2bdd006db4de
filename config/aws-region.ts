import { z } from "zod";

/**
 * `platform:unlistedAwsRegions` of a hub or EKS spoke stack file: AWS regions this file names although the pinned AWS
 * SDK's partition table does not list them yet (a region AWS opened after that SDK release). Every AWS region key of a
 * stack file is refused unless that table lists it in partition `aws` (lib/aws-partition.ts `awsRegionIssue`); this
 * list is the reviewed way out, one region name per entry, each still of partition `aws`'s shape (its `regionRegex`)
 * and refused once the SDK lists it (remove the entry then).
 */
export const UnlistedAwsRegionsSchema = z.array(z.string().min(1)).min(1);
