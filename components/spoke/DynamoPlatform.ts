import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { versions } from "../../config/versions";

/** Inputs of {@link DynamoPlatform}. */
export interface DynamoPlatformArgs {
    /** Namespace of the release (operator); created here. */
    namespace: string;
    /** Install Grove with the platform (multinode components need Grove or LWS). */
    grove: boolean;
    /** Install the KAI scheduler with the platform. */
    kaiScheduler: boolean;
    /** Prometheus the operator hands to planners (`dynamo-operator.dynamo.metrics.prometheusEndpoint`). */
    prometheusEndpoint: string;
}

/**
 * Helm values of the pinned dynamo-platform chart. Pure, so tests and policies can check it. NATS and etcd are not
 * installed: the chart's defaults since the 1.x line use TCP/ZMQ request and event planes and Kubernetes discovery
 * (`global.nats.install=false`, `global.etcd.install=false`, `dynamo-operator.discoveryBackend: kubernetes`;
 * ai-dynamo/dynamo deploy/helm/charts/platform/values.yaml). CRDs are applied by the operator's `crd-apply` init
 * container (`upgradeCRD: true`), not by this stack.
 */
export function dynamoPlatformValues(a: Omit<DynamoPlatformArgs, "namespace">): Record<string, unknown> {
    return {
        global: {
            nats: { install: false },
            etcd: { install: false },
            grove: { install: a.grove, enabled: a.grove },
            "kai-scheduler": { install: a.kaiScheduler, enabled: a.kaiScheduler },
        },
        "dynamo-operator": {
            discoveryBackend: "kubernetes",
            upgradeCRD: true,
            // The chart's own PodMonitors carry no labels, so a Prometheus selecting `release: <name>` (kube-prometheus-stack's
            // default) never picks them up (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:
            // deploy/helm/charts/platform/components/operator/templates/prometheus.yaml, `metadata: name` only). They stay
            // off; components/spoke/Observability.ts renders labelled PodMonitors for every frontend, prefill, decode and
            // aggregated worker instead (lib/observability.ts dynamoScrapeTargets).
            dynamo: { metrics: { prometheusEndpoint: a.prometheusEndpoint, podMonitors: { enabled: false } } },
        },
    };
}

/** The NVIDIA Dynamo platform (operator, optional Grove/KAI) from the pinned chart, in its own namespace. */
export class DynamoPlatform extends pulumi.ComponentResource {
    public readonly release: k8s.helm.v3.Release;
    public readonly namespace: string;

    constructor(name: string, args: DynamoPlatformArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:DynamoPlatform", name, {}, opts);
        this.namespace = args.namespace;
        const ns = new k8s.core.v1.Namespace(`${name}-ns`, { metadata: { name: args.namespace } }, { parent: this });
        const v = versions.dynamoPlatform;
        this.release = new k8s.helm.v3.Release(
            `${name}-dynamo-platform`,
            {
                name: "dynamo-platform",
                chart: v.chart,
                version: v.version,
                repositoryOpts: { repo: v.repo },
                namespace: args.namespace,
                values: dynamoPlatformValues(args),
            },
            { parent: this, dependsOn: [ns] },
        );
        this.registerOutputs({ namespace: this.namespace });
    }
}
