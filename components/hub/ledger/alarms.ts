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
    const args = { alarms };
    const actions = { alarmActions: [args.alarms.topicArn], okActions: [args.alarms.topicArn] };
    new aws.cloudwatch.MetricAlarm(
        `${scope.name}-failures-alarm`,
        {
            name: `${scope.prefix}-usage-failure-queue`,
            alarmDescription:
                "Usage batches reached the failure queue: Lambda gave up on them. Their records are in the failure bucket: fix the cause, then `npm run replay-usage -- --apply` (tools/replay-usage.ts)",
            namespace: "AWS/SQS",
            metricName: "ApproximateNumberOfMessagesVisible",
            dimensions: { QueueName: queue.name },
            statistic: "Maximum",
            period: 300,
            evaluationPeriods: 1,
            threshold: 0,
            comparisonOperator: "GreaterThanThreshold",
            treatMissingData: "notBreaching",
            ...actions,
            tags: scope.tags,
        },
        scope.parent,
    );
    new aws.cloudwatch.MetricAlarm(
        `${scope.name}-consumer-errors-alarm`,
        {
            name: `${scope.prefix}-usage-consumer-errors`,
            alarmDescription:
                "The usage consumer failed batches (each one's records are written to the failure bucket and retried); usage is not reaching the ledger",
            namespace: "AWS/Lambda",
            metricName: "Errors",
            dimensions: { FunctionName: fn.name },
            statistic: "Sum",
            period: 300,
            evaluationPeriods: 1,
            threshold: 0,
            comparisonOperator: "GreaterThanThreshold",
            treatMissingData: "notBreaching",
            ...actions,
            tags: scope.tags,
        },
        scope.parent,
    );
    new aws.cloudwatch.MetricAlarm(
        `${scope.name}-iterator-age-alarm`,
        {
            name: `${scope.prefix}-usage-consumer-iterator-age`,
            alarmDescription: `The usage consumer is more than ${args.alarms.iteratorAgeSeconds} s behind its streams`,
            namespace: "AWS/Lambda",
            metricName: "IteratorAge",
            dimensions: { FunctionName: fn.name },
            // IteratorAge is in milliseconds (AWS Lambda metrics for event source mappings).
            statistic: "Maximum",
            period: 300,
            evaluationPeriods: 3,
            threshold: args.alarms.iteratorAgeSeconds * 1000,
            comparisonOperator: "GreaterThanThreshold",
            treatMissingData: "notBreaching",
            ...actions,
            tags: scope.tags,
        },
        scope.parent,
    );
    new aws.cloudwatch.MetricAlarm(
        `${scope.name}-gaps-alarm`,
        {
            name: `${scope.prefix}-usage-reconciliation-gaps`,
            alarmDescription: "Usage events a spoke sent never reached the ledger (reconciliation gaps), or the reconciliation did not run",
            namespace: METRIC_NAMESPACE,
            metricName: GAP_METRIC,
            dimensions: { Spoke: ALL_SPOKES },
            // No datum = the scheduled reconciliation did not run: that pages too.
            statistic: "Maximum",
            period: 3600,
            evaluationPeriods: 2,
            datapointsToAlarm: 1,
            threshold: 0,
            comparisonOperator: "GreaterThanThreshold",
            treatMissingData: "breaching",
            ...actions,
            tags: scope.tags,
        },
        scope.parent,
    );
}
