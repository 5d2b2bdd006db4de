import * as aws from "@pulumi/aws";
import type { LedgerScope } from "./scope";

/** Kinesis stream name of a spoke's usage stream on a hub whose names begin with `prefix` (`platform:namePrefix`). */
export function usageStreamName(spoke: string, prefix = "platform"): string {
    return `${prefix}-usage-${spoke}`;
}

/**
 * The transport: one on-demand stream per spoke (SSE with the AWS managed key `alias/aws/kinesis`, so producers need
 * only `kinesis:PutRecord(s)` on their own stream), retention `retentionHours`. Protected: a stream holds usage not
 * yet in the ledger.
 */
export function usageStreams(
    scope: LedgerScope,
    spokes: string[],
    retentionHours: number,
): Array<{ spoke: string; stream: aws.kinesis.Stream }> {
    return [...spokes].sort().map((spoke) => ({
        spoke,
        stream: new aws.kinesis.Stream(
            `${scope.name}-${spoke}`,
            {
                name: usageStreamName(spoke, scope.prefix),
                streamModeDetails: { streamMode: "ON_DEMAND" },
                retentionPeriod: retentionHours,
                encryptionType: "KMS",
                kmsKeyId: "alias/aws/kinesis",
                tags: { ...scope.tags, "platform:spoke": spoke },
            },
            scope.keep,
        ),
    }));
}

/**
 * Pure: the resource policy of a spoke's usage stream: nobody but the spoke's metering role puts records into it,
 * whatever their IAM policy allows (an account administrator, another spoke's role, the auth role), so every event
 * on the stream comes from that spoke's metering (the consumer still checks each event's spoke against its stream).
 * Kinesis evaluates a stream's resource policy with the caller's identity policy (Amazon Kinesis Data Streams
 * developer guide, "Controlling access with resource-based policies").
 *
 * MIGRATION (components/hub/legacy-spoke-role.ts, removed with it): while the hub keeps the previous release's single
 * spoke role, `legacyRoleArn` is exempt too, so a spoke not yet upgraded keeps putting its usage.
 */
export function usageStreamPolicy(x: { streamArn: string; meteringRoleArn: string; legacyRoleArn?: string }): Record<string, unknown> {
    const producers = x.legacyRoleArn ? [x.meteringRoleArn, x.legacyRoleArn] : x.meteringRoleArn;
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "OnlyTheSpokesMeteringPuts",
                Effect: "Deny",
                Principal: "*",
                Action: ["kinesis:PutRecord", "kinesis:PutRecords"],
                Resource: x.streamArn,
                Condition: { ArnNotEquals: { "aws:PrincipalArn": producers } },
            },
        ],
    };
}
