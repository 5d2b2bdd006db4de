import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { type PolicyContract, policyBucketOwner, type UsageContract } from "../../config/contract";
import { versions } from "../../config/versions";
import { COUNTER_STORE_SECRET } from "../../services/shared/spoke-secrets";
import { ENVOY_GATEWAY_NAMESPACE, ENVOY_PROXY_POD_LABELS, GATEWAY_NAMESPACE } from "../../lib/gateway";
import type { METERING_ENV } from "../../services/metering/config";
import { METERING_ACCESS_LOG_COLLECTOR } from "../../services/shared/accesslog";
import type { EnvVars } from "../../services/shared/env";
import {
    AWS_FILES_DIR,
    AWS_PROFILE,
    AWS_ROLE_SESSION_NAMES,
    AWS_SOURCE_PROFILE,
    awsFilesVolume,
    sourceKeyAnnotations,
    METERING_POD_LABELS,
    METERING_PORT,
    servicePodBasics,
    serviceContainerSecurity,
} from "../../lib/spoke-services";

/** Service name and HTTP port of the metering service (`POST /v1/logs`, `/healthz`, `/readyz`, `/metrics`). */
export const METERING_SERVICE_NAME = "metering";
// Shared with Observability (lib/spoke-services.ts); re-exported for this component's callers.
export { METERING_POD_LABELS, METERING_PORT } from "../../lib/spoke-services";
/** Mount path of the spool volume; the spool lives in its `spool/` directory. */
export const SPOOL_MOUNT = "/var/lib/metering";
/** Where the collector's persistent sending queue lives (file_storage extension directory). */
export const COLLECTOR_QUEUE_DIR = "/var/lib/otelcol/queue";
/** UID/GID of the metering container (distroless `nonroot`) and fsGroup of its volume. */
export const METERING_UID = 65532;
/** UID/GID the collector image runs as (otel/opentelemetry-collector-k8s `USER 10001`). */
export const COLLECTOR_UID = 10001;

/**
 * Bytes of spool the service may fill on a volume of `volumeGiB`: 85%, keeping room for one segment of shipped
 * events awaiting deletion, the cursor and file system overhead (services/metering/spool.ts).
 */
export function spoolMaxBytes(volumeGiB: number): number {
    return Math.floor(volumeGiB * 1024 ** 3 * 0.85);
}

/** Pure: AWS shared config assuming the spoke's role from the source profile (session name `platform-metering`). */
export function meteringAwsConfig(roleArn: string, region: string): string {
    return [
        `[profile ${AWS_PROFILE}]`,
        `role_arn = ${roleArn}`,
        `source_profile = ${AWS_SOURCE_PROFILE}`,
        `role_session_name = ${AWS_ROLE_SESSION_NAMES.metering}`,
        `region = ${region}`,
        "",
    ].join("\n");
}

/**
 * Pure: the metering service's environment by the names of its contract (services/metering/config.ts
 * `METERING_ENV`: a name the service does not read is a type error), without secrets.
 * @throws Error when the policy contract names no bucket-owner account (config/contract.ts `policyBucketOwner`)
 */
export function meteringEnv(x: {
    spoke: string;
    usage: UsageContract;
    policy: Pick<PolicyContract, "bucket" | "bucketOwner" | "kmsKeyArn" | "region" | "publicKey">;
    volumeGiB: number;
    sharedFiles?: boolean;
}): EnvVars<typeof METERING_ENV> {
    // Without shared files (EKS Pod Identity) the SDK's default chain takes the container credentials the agent injects.
    const files: EnvVars<typeof METERING_ENV> =
        x.sharedFiles === false
            ? {}
            : { AWS_CONFIG_FILE: `${AWS_FILES_DIR}/config`, AWS_SHARED_CREDENTIALS_FILE: `${AWS_FILES_DIR}/credentials`, AWS_PROFILE };
    return {
        METERING_SPOKE: x.spoke,
        METERING_SPOOL_DIR: `${SPOOL_MOUNT}/spool`,
        METERING_SPOOL_MAX_BYTES: String(spoolMaxBytes(x.volumeGiB)),
        METERING_STREAM_NAME: x.usage.streamName,
        METERING_STREAM_REGION: x.usage.region,
        METERING_POLICY_BUCKET: x.policy.bucket,
        METERING_POLICY_BUCKET_OWNER: policyBucketOwner(x.policy),
        METERING_POLICY_REGION: x.policy.region,
        METERING_HUB_PUBLIC_KEY: x.policy.publicKey,
        METERING_PORT: String(METERING_PORT),
        ...files,
        AWS_REGION: x.usage.region,
    };
}

/**
 * Pure: Helm values of the access-log collector (chart `opentelemetry-collector`, statefulset mode). Envoy's
 * OpenTelemetry access logger sends OTLP/gRPC here; the collector writes each batch to a persistent, fsynced
 * queue (file_storage) before acknowledging and retries `POST /v1/logs` on metering forever with backoff
 * (`max_elapsed_time: 0`), so metering restarts and spool-full back-pressure (503) never lose records.
 * `alternateConfig` replaces the chart's default pipelines (jaeger, zipkin, prometheus) instead of merging.
 */
export function collectorValues(x: {
    namespace: string;
    replicas: number;
    queueGiB: number;
    storageClassName?: string;
}): Record<string, unknown> {
    const v = versions.otelCollector;
    const c = METERING_ACCESS_LOG_COLLECTOR;
    const off = { enabled: false };
    return {
        mode: "statefulset",
        fullnameOverride: c.service,
        replicaCount: x.replicas,
        image: { repository: v.image, tag: v.imageTag },
        command: { name: v.command },
        podSecurityContext: {
            runAsNonRoot: true,
            runAsUser: COLLECTOR_UID,
            runAsGroup: COLLECTOR_UID,
            fsGroup: COLLECTOR_UID,
            seccompProfile: { type: "RuntimeDefault" },
        },
        securityContext: serviceContainerSecurity(),
        ports: {
            otlp: { enabled: true, containerPort: c.port, servicePort: c.port, protocol: "TCP", appProtocol: "grpc" },
            "otlp-http": off,
            "jaeger-compact": off,
            "jaeger-thrift": off,
            "jaeger-grpc": off,
            zipkin: off,
            metrics: { enabled: true, containerPort: 8888, servicePort: 8888, protocol: "TCP" },
        },
        statefulset: {
            volumeClaimTemplates: [
                {
                    metadata: { name: "queue" },
                    spec: {
                        accessModes: ["ReadWriteOnce"],
                        ...(x.storageClassName ? { storageClassName: x.storageClassName } : {}),
                        resources: { requests: { storage: `${x.queueGiB}Gi` } },
                    },
                },
            ],
            // A queue volume may hold undelivered access logs: never delete it with the pod or on scale-down.
            persistentVolumeClaimRetentionPolicy: { enabled: true, whenDeleted: "Retain", whenScaled: "Retain" },
        },
        extraVolumeMounts: [{ name: "queue", mountPath: COLLECTOR_QUEUE_DIR }],
        resources: { requests: { cpu: "200m", memory: "256Mi" }, limits: { memory: "512Mi" } },
        podDisruptionBudget: { enabled: true, maxUnavailable: 1 },
        alternateConfig: {
            extensions: {
                health_check: { endpoint: "${env:MY_POD_IP}:13133" },
                "file_storage/queue": { directory: COLLECTOR_QUEUE_DIR, fsync: true, timeout: "5s" },
            },
            receivers: { otlp: { protocols: { grpc: { endpoint: `\${env:MY_POD_IP}:${c.port}` } } } },
            processors: { memory_limiter: { check_interval: "1s", limit_percentage: 80, spike_limit_percentage: 25 } },
            exporters: {
                "otlphttp/metering": {
                    logs_endpoint: `http://${METERING_SERVICE_NAME}.${x.namespace}.svc.cluster.local:${METERING_PORT}/v1/logs`,
                    encoding: "json",
                    compression: "gzip",
                    timeout: "30s",
                    retry_on_failure: { enabled: true, initial_interval: "1s", max_interval: "30s", max_elapsed_time: "0s" },
                    sending_queue: { enabled: true, storage: "file_storage/queue", num_consumers: 4, queue_size: 100_000 },
                },
            },
            service: {
                extensions: ["health_check", "file_storage/queue"],
                pipelines: { logs: { receivers: ["otlp"], processors: ["memory_limiter"], exporters: ["otlphttp/metering"] } },
                telemetry: { metrics: { readers: [{ pull: { exporter: { prometheus: { host: "${env:MY_POD_IP}", port: 8888 } } } }] } },
            },
        },
    };
}

/**
 * Inputs of {@link Metering}. Sizes come from `platform:metering` (config/metering.ts `MeteringConfigSchema`, where their
 * defaults live).
 */
export interface MeteringArgs {
    /** The spoke's name (`platform:spoke.name`), handed to the metering service. */
    spoke: string;
    /** Namespace of metering and its collector (must equal METERING_ACCESS_LOG_COLLECTOR.namespace: the gateway points there). */
    namespace: string;
    /** Hub contract `usage`: the spoke's Kinesis stream. */
    usage: pulumi.Input<UsageContract>;
    /** Hub contract `policy`: the bundle bucket/key for token window lengths (its `roleArn` only for an older hub). */
    policy: pulumi.Input<Pick<PolicyContract, "roleArn" | "bucket" | "bucketOwner" | "kmsKeyArn" | "region" | "publicKey">>;
    /**
     * On-prem (access key): the pods assume the spoke role with the source key the operator installed as the
     * Kubernetes Secret lib/spoke-services.ts `SOURCE_KEY_SECRET` (`npm run mint-key -- install-source-key`); this
     * program only names it and never holds the key. `slot` (the contract's active key slot, not secret) annotates the
     * pod template, so moving `activeKey` rolls the pods onto the re-installed key. Absent on EKS (EKS Pod Identity).
     */
    sourceKey?: { slot: string };
    /**
     * The operator-installed Secret (components/spoke/CounterStore.ts `urlSecret`; a copy in `namespace`) and key holding
     * the URL of the auth service's counters: leases to release, token windows to add to. Never a value here.
     */
    redisUrlSecret: { name: string; key: string };
    /** Metering instances (StatefulSet replicas, one spool volume each); default 2 so a restart never stops intake. */
    replicas: number;
    /** Spool volume per instance, GiB (gibibytes); default 20 (about 36M events of ~500 bytes). */
    spoolVolumeGiB: number;
    /** StorageClass of the spool and collector queue volumes; unset = the cluster default. */
    storageClassName?: string;
    /** Collector replicas (StatefulSet, one persistent queue volume each); default 2. */
    collectorReplicas: number;
    /** Collector persistent sending queue volume per replica, GiB; default 5. */
    collectorQueueGiB: number;
    /** Image reference; defaults to the pin in config/versions.ts. */
    image?: string;
}

/**
 * The spoke's usage metering: an OpenTelemetry Collector (pinned upstream chart) receiving the
 * gateway's access log with a persistent queue, and services/metering as a StatefulSet whose pods each own a
 * PersistentVolume for the spool (stable pod name = stable `source` for sequence numbers; volumes retained
 * on scale-down so unshipped events are never deleted), behind a ClusterIP Service. A ReferenceGrant lets the
 * gateway's EnvoyProxy reference the collector Service across namespaces; NetworkPolicies admit only Envoy
 * proxies to the collector and only the collector to metering.
 *
 * AWS identity: metering's own SpokeIdentity role, `usage.roleArn` (only `kinesis:PutRecords` on this spoke's stream,
 * and reading its bundles), assumed from the source key in a Secret on-prem, by EKS Pod Identity on EKS.
 *
 * @throws Error from the constructor when `namespace` is not `METERING_ACCESS_LOG_COLLECTOR.namespace`
 *   (services/shared/accesslog.ts, where the gateway sends access logs), or when the Redis URL Secret is the counter
 *   store's (`COUNTER_STORE_SECRET`) and `namespace` is not one of its namespaces (services/shared/spoke-secrets.ts);
 *   during the deployment (inside an output), config/contract.ts `policyBucketOwner`'s Error when the contract's policy
 *   block names no bucket-owner account
 */
export class Metering extends pulumi.ComponentResource {
    public readonly service: k8s.core.v1.Service;
    public readonly statefulSet: k8s.apps.v1.StatefulSet;
    public readonly collector: k8s.helm.v3.Release;
    /** In-cluster URL of `POST /v1/logs`. */
    public readonly logsEndpoint: string;

    constructor(name: string, args: MeteringArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:Metering", name, {}, opts);
        if (args.namespace !== METERING_ACCESS_LOG_COLLECTOR.namespace) {
            throw new Error(
                `Metering: namespace "${args.namespace}" differs from METERING_ACCESS_LOG_COLLECTOR.namespace "${METERING_ACCESS_LOG_COLLECTOR.namespace}" (services/shared/accesslog.ts), where the gateway sends access logs`,
            );
        }
        const ns = args.namespace;
        const parent = { parent: this };
        const labels = METERING_POD_LABELS;
        const collectorLabels = {
            "app.kubernetes.io/name": "opentelemetry-collector",
            "app.kubernetes.io/instance": METERING_ACCESS_LOG_COLLECTOR.service,
        };
        const image = args.image ?? `${versions.meteringService.image}:${versions.meteringService.version}`;
        const policy = pulumi.output(args.policy);
        const usage = pulumi.output(args.usage);

        // On-prem (access key): only the shared config is rendered here; the source key is mounted from the
        // operator-installed Secret (lib/spoke-services.ts SOURCE_KEY_SECRET), never read by this program.
        const awsSecret = !args.sourceKey
            ? undefined
            : new k8s.core.v1.Secret(
                  `${name}-aws`,
                  {
                      metadata: { name: `${METERING_SERVICE_NAME}-aws`, namespace: ns, labels },
                      type: "Opaque",
                      stringData: {
                          // Metering's own role (`usage.roleArn`); a hub deployed before per-service roles names one for both.
                          config: pulumi.all([policy, usage]).apply(([p, u]) => meteringAwsConfig(u.roleArn ?? p.roleArn, u.region)),
                      },
                  },
                  parent,
              );
        if (args.redisUrlSecret.name === COUNTER_STORE_SECRET.name && !(COUNTER_STORE_SECRET.namespaces as readonly string[]).includes(ns))
            throw new Error(
                `Metering: namespace "${ns}" is not one of COUNTER_STORE_SECRET.namespaces (services/shared/spoke-secrets.ts), where the counter store's URL is installed`,
            );
        const sa = new k8s.core.v1.ServiceAccount(
            `${name}-sa`,
            {
                metadata: { name: METERING_SERVICE_NAME, namespace: ns, labels },
                automountServiceAccountToken: false,
            },
            parent,
        );

        const headless = new k8s.core.v1.Service(
            `${name}-headless`,
            {
                metadata: { name: `${METERING_SERVICE_NAME}-headless`, namespace: ns, labels },
                spec: {
                    clusterIP: "None",
                    selector: labels,
                    ports: [{ name: "http", port: METERING_PORT, targetPort: "http" }],
                    publishNotReadyAddresses: true,
                },
            },
            parent,
        );
        this.service = new k8s.core.v1.Service(
            `${name}-service`,
            {
                metadata: { name: METERING_SERVICE_NAME, namespace: ns, labels },
                spec: { type: "ClusterIP", selector: labels, ports: [{ name: "http", port: METERING_PORT, targetPort: "http" }] },
            },
            parent,
        );

        const env = pulumi.all([policy, usage]).apply(([p, u]) => [
            ...Object.entries(
                meteringEnv({ spoke: args.spoke, usage: u, policy: p, volumeGiB: args.spoolVolumeGiB, sharedFiles: !!awsSecret }),
            ).map(([n, value]) => ({ name: n, value: value as string })),
            {
                name: "METERING_INSTANCE" satisfies keyof EnvVars<typeof METERING_ENV>,
                valueFrom: { fieldRef: { fieldPath: "metadata.name" } },
            },
            {
                name: "METERING_REDIS_URL" satisfies keyof EnvVars<typeof METERING_ENV>,
                valueFrom: { secretKeyRef: { name: args.redisUrlSecret.name, key: args.redisUrlSecret.key } },
            },
        ]);
        this.statefulSet = new k8s.apps.v1.StatefulSet(
            `${name}-statefulset`,
            {
                metadata: { name: METERING_SERVICE_NAME, namespace: ns, labels },
                spec: {
                    serviceName: headless.metadata.name,
                    replicas: args.replicas,
                    podManagementPolicy: "Parallel",
                    updateStrategy: { type: "RollingUpdate" },
                    selector: { matchLabels: labels },
                    // Spools may hold unshipped events: keep the volumes when pods are deleted or scaled away.
                    persistentVolumeClaimRetentionPolicy: { whenDeleted: "Retain", whenScaled: "Retain" },
                    template: {
                        metadata: { labels, ...sourceKeyAnnotations(args.sourceKey) },
                        spec: {
                            serviceAccountName: sa.metadata.name,
                            ...servicePodBasics(labels, METERING_UID),
                            terminationGracePeriodSeconds: 30,
                            containers: [
                                {
                                    name: "metering",
                                    image,
                                    imagePullPolicy: "IfNotPresent",
                                    env,
                                    ports: [{ name: "http", containerPort: METERING_PORT, protocol: "TCP" }],
                                    readinessProbe: { httpGet: { path: "/readyz", port: "http" }, periodSeconds: 5, failureThreshold: 2 },
                                    livenessProbe: { httpGet: { path: "/healthz", port: "http" }, periodSeconds: 10, failureThreshold: 6 },
                                    resources: { requests: { cpu: "250m", memory: "256Mi" }, limits: { memory: "512Mi" } },
                                    securityContext: serviceContainerSecurity(),
                                    volumeMounts: [
                                        { name: "spool", mountPath: SPOOL_MOUNT },
                                        ...(awsSecret ? [{ name: "aws", mountPath: AWS_FILES_DIR, readOnly: true }] : []),
                                    ],
                                },
                            ],
                            volumes: awsSecret ? [{ name: "aws", projected: awsFilesVolume(awsSecret.metadata.name) }] : [],
                        },
                    },
                    volumeClaimTemplates: [
                        {
                            metadata: { name: "spool", labels },
                            spec: {
                                accessModes: ["ReadWriteOnce"],
                                ...(args.storageClassName ? { storageClassName: args.storageClassName } : {}),
                                resources: { requests: { storage: `${args.spoolVolumeGiB}Gi` } },
                            },
                        },
                    ],
                },
            },
            { parent: this },
        );
        new k8s.policy.v1.PodDisruptionBudget(
            `${name}-pdb`,
            {
                metadata: { name: METERING_SERVICE_NAME, namespace: ns, labels },
                spec: { maxUnavailable: 1, selector: { matchLabels: labels } },
            },
            parent,
        );

        const v = versions.otelCollector;
        this.collector = new k8s.helm.v3.Release(
            `${name}-collector`,
            {
                name: METERING_ACCESS_LOG_COLLECTOR.service,
                chart: v.chart,
                version: v.version,
                repositoryOpts: { repo: v.repo },
                namespace: ns,
                values: collectorValues({
                    namespace: ns,
                    replicas: args.collectorReplicas,
                    queueGiB: args.collectorQueueGiB,
                    storageClassName: args.storageClassName,
                }),
            },
            { parent: this, dependsOn: [this.service] },
        );

        // The EnvoyProxy (gateway namespace) references the collector Service in this namespace.
        new k8s.apiextensions.CustomResource(
            `${name}-access-log-grant`,
            {
                apiVersion: "gateway.networking.k8s.io/v1beta1",
                kind: "ReferenceGrant",
                metadata: { name: "envoyproxy-access-log", namespace: ns, labels },
                spec: {
                    from: [{ group: "gateway.envoyproxy.io", kind: "EnvoyProxy", namespace: GATEWAY_NAMESPACE }],
                    to: [{ group: "", kind: "Service", name: METERING_ACCESS_LOG_COLLECTOR.service }],
                },
            },
            parent,
        );
        new k8s.networking.v1.NetworkPolicy(
            `${name}-collector-ingress`,
            {
                metadata: { name: `${METERING_ACCESS_LOG_COLLECTOR.service}-from-envoy`, namespace: ns, labels },
                spec: {
                    podSelector: { matchLabels: collectorLabels },
                    policyTypes: ["Ingress"],
                    ingress: [
                        {
                            from: [
                                {
                                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ENVOY_GATEWAY_NAMESPACE } },
                                    podSelector: { matchLabels: { ...ENVOY_PROXY_POD_LABELS } },
                                },
                            ],
                            ports: [{ protocol: "TCP", port: METERING_ACCESS_LOG_COLLECTOR.port }],
                        },
                        {
                            ports: [
                                { protocol: "TCP", port: 8888 },
                                { protocol: "TCP", port: 13133 },
                            ],
                        },
                    ],
                },
            },
            parent,
        );
        new k8s.networking.v1.NetworkPolicy(
            `${name}-ingress`,
            {
                metadata: { name: `${METERING_SERVICE_NAME}-from-collector`, namespace: ns, labels },
                spec: {
                    podSelector: { matchLabels: labels },
                    policyTypes: ["Ingress"],
                    ingress: [
                        { from: [{ podSelector: { matchLabels: collectorLabels } }], ports: [{ protocol: "TCP", port: METERING_PORT }] },
                    ],
                },
            },
            parent,
        );

        this.logsEndpoint = `http://${METERING_SERVICE_NAME}.${ns}.svc.cluster.local:${METERING_PORT}/v1/logs`;
        this.registerOutputs({ logsEndpoint: this.logsEndpoint });
    }
}
