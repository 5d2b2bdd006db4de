import * as aws from "@pulumi/aws";
import { ALL_SPOKES, GAP_METRIC, METRIC_NAMESPACE } from "../../../services/reconciler/config";
import type { LedgerScope } from "./scope";

/** Where the hub's alarms go, and the reconciliation's schedule (`platform:alarms`). */
export interface LedgerAlarmArgs {
    topicArn: string;
    iteratorAgeSeconds: number;
    reconcileSchedule: string;
    reconcileLookbackHours: number;
}

/** The ledger's alarms to the operator's topic: failure queue, consumer errors, consumer iterator age, reconciliation gaps. */
export function ledgerAlarms(scope: LedgerScope, alarms: LedgerAlarmArgs, queue: aws.sqs.Queue, fn: aws.lambda.Function): void {
    /** One alarm to the operator's topic; by default: any datum above 0 in one 5-minute period, no datum is fine. */
    const alarm = (id: string, name: string, a: Omit<aws.cloudwatch.MetricAlarmArgs, "name" | "alarmActions" | "okActions" | "tags">) =>
        new aws.cloudwatch.MetricAlarm(
            `${scope.name}-${id}-alarm`,
            {
                name: `${scope.prefix}-${name}`,
                period: 300,
                evaluationPeriods: 1,
                threshold: 0,
                comparisonOperator: "GreaterThanThreshold",
                treatMissingData: "notBreaching",
                ...a,
                alarmActions: [alarms.topicArn],
                okActions: [alarms.topicArn],
                tags: scope.tags,
            },
            scope.parent,
        );
    alarm("failures", "usage-failure-queue", {
        alarmDescription:
            "Usage batches reached the failure queue: Lambda gave up on them. If the consumer ran on them, their records are in the failure bucket: fix the cause, then `npm run replay-usage -- --apply`. If it never ran (no consumer errors), the queue holds only pointers and the records leave the stream 24 h after this alarm: within that window run `npm run replay-usage -- --rescue-stream --apply`, then the replay (tools/replay-usage.ts)",
        namespace: "AWS/SQS",
        metricName: "ApproximateNumberOfMessagesVisible",
        dimensions: { QueueName: queue.name },
        statistic: "Maximum",
    });
    alarm("consumer-errors", "usage-consumer-errors", {
        alarmDescription:
            "The usage consumer failed batches (each one's records are written to the failure bucket and retried); usage is not reaching the ledger",
        namespace: "AWS/Lambda",
        metricName: "Errors",
        dimensions: { FunctionName: fn.name },
        statistic: "Sum",
    });
    alarm("iterator-age", "usage-consumer-iterator-age", {
        alarmDescription: `The usage consumer is more than ${alarms.iteratorAgeSeconds} s behind its streams`,
        namespace: "AWS/Lambda",
        metricName: "IteratorAge",
        dimensions: { FunctionName: fn.name },
        // IteratorAge is in milliseconds (AWS Lambda metrics for event source mappings).
        statistic: "Maximum",
        evaluationPeriods: 3,
        threshold: alarms.iteratorAgeSeconds * 1000,
    });
    alarm("gaps", "usage-reconciliation-gaps", {
        alarmDescription: "Usage events a spoke sent never reached the ledger (reconciliation gaps), or the reconciliation did not run",
        namespace: METRIC_NAMESPACE,
        metricName: GAP_METRIC,
        dimensions: { Spoke: ALL_SPOKES },
        // No datum = the scheduled reconciliation did not run: that pages too.
        statistic: "Maximum",
        period: 3600,
        evaluationPeriods: 2,
        datapointsToAlarm: 1,
        treatMissingData: "breaching",
    });
}
