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
