import { serviceContainerSecurity } from "../../lib/spoke-services";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { versions } from "../../config/versions";

/** Valkey/Redis port. */
export const COUNTER_STORE_PORT = 6379;

/** Inputs of {@link CounterStore}. */
export interface CounterStoreArgs {
    namespace: pulumi.Input<string>;
    /** Service name (and object name prefix). */
    serviceName?: string;
    /** Memory cap in MiB (`--maxmemory`); the container limit adds 25% headroom. */
    maxMemoryMiB?: number;
}

/**
 * Pure: the Valkey server arguments. No persistence (counters and leases are short-lived: a restart resets
 * windows and leases, which the TTLs would have expired soon anyway). `noeviction`: when memory is full, writes
 * fail and the auth service answers 503, instead of Valkey silently dropping a concurrency set (which would
 * admit more requests than the limit). The password comes from `$(VALKEY_PASSWORD)`, expanded by the kubelet.
 */
export function valkeyArgs(maxMemoryMiB: number): string[] {
    return [
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory",
        `${maxMemoryMiB}mb`,
        "--maxmemory-policy",
        "noeviction",
        "--requirepass",
        "$(VALKEY_PASSWORD)",
    ];
}

/**
 * The spoke's limit counters store: one password-protected Valkey (Redis-compatible) pod behind a
 * ClusterIP Service, used by the auth service for rps buckets, concurrency leases and token windows
 * (services/shared/identity.ts `redisKeys`) and by metering to release leases. One replica: a restart costs
 * only the counters' current windows, and the auth service fails closed (503) while it is away.
 */
export class CounterStore extends pulumi.ComponentResource {
    /** `redis://:<password>@<service>.<ns>.svc.cluster.local:6379` (secret). */
    public readonly url: pulumi.Output<string>;
    /** `<service>.<ns>.svc.cluster.local:6379` (no credentials). */
    public readonly address: pulumi.Output<string>;
    /** Name of the Secret (same namespace) whose key `url` holds {@link url}. */
    public readonly urlSecretName: pulumi.Output<string>;
    public readonly service: k8s.core.v1.Service;

    constructor(name: string, args: CounterStoreArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:CounterStore", name, {}, opts);
        const svcName = args.serviceName ?? "counters";
        const maxMemoryMiB = args.maxMemoryMiB ?? 512;
        const labels = {
            "app.kubernetes.io/name": "valkey",
            "app.kubernetes.io/instance": svcName,
            "app.kubernetes.io/part-of": "agent-router",
        };
        const password = new random.RandomPassword(`${name}-password`, { length: 40, special: false }, { parent: this });
        const address = pulumi.output(args.namespace).apply((ns) => `${svcName}.${ns}.svc.cluster.local:${COUNTER_STORE_PORT}`);
        this.url = pulumi.secret(pulumi.all([password.result, address]).apply(([p, a]) => `redis://:${p}@${a}`));
        this.address = address;

        const secret = new k8s.core.v1.Secret(
            `${name}-credentials`,
            {
                metadata: { name: `${svcName}-credentials`, namespace: args.namespace, labels },
                type: "Opaque",
                stringData: { password: pulumi.secret(password.result), url: this.url },
            },
            { parent: this },
        );
        this.service = new k8s.core.v1.Service(
            `${name}-service`,
            {
                metadata: { name: svcName, namespace: args.namespace, labels },
                spec: { type: "ClusterIP", selector: labels, ports: [{ name: "redis", port: COUNTER_STORE_PORT, targetPort: "redis" }] },
            },
            { parent: this },
        );
        const v = versions.valkey;
        new k8s.apps.v1.StatefulSet(
            `${name}-valkey`,
            {
                metadata: { name: svcName, namespace: args.namespace, labels },
                spec: {
                    serviceName: svcName,
                    replicas: 1,
                    selector: { matchLabels: labels },
                    template: {
                        metadata: { labels },
                        spec: {
                            automountServiceAccountToken: false,
                            // The image's `valkey` user (uid 999, gid 1000, as docker-library/redis); running as it directly
                            // skips the entrypoint's root chown/su-exec step.
                            securityContext: {
                                runAsNonRoot: true,
                                runAsUser: 999,
                                runAsGroup: 1000,
                                fsGroup: 1000,
                                seccompProfile: { type: "RuntimeDefault" },
                            },
                            containers: [
                                {
                                    name: "valkey",
                                    image: `${v.image}:${v.version}`,
                                    args: valkeyArgs(maxMemoryMiB),
                                    env: [
                                        {
                                            name: "VALKEY_PASSWORD",
                                            valueFrom: { secretKeyRef: { name: secret.metadata.name, key: "password" } },
                                        },
                                    ],
                                    ports: [{ name: "redis", containerPort: COUNTER_STORE_PORT }],
                                    readinessProbe: { tcpSocket: { port: "redis" }, periodSeconds: 5 },
                                    livenessProbe: { tcpSocket: { port: "redis" }, periodSeconds: 10, failureThreshold: 6 },
                                    resources: {
                                        requests: { cpu: "250m", memory: `${maxMemoryMiB}Mi` },
                                        limits: { memory: `${Math.ceil(maxMemoryMiB * 1.25)}Mi` },
                                    },
                                    securityContext: serviceContainerSecurity(),
                                    volumeMounts: [{ name: "data", mountPath: "/data" }],
                                },
                            ],
                            volumes: [{ name: "data", emptyDir: {} }],
                        },
                    },
                },
            },
            { parent: this },
        );
        this.urlSecretName = secret.metadata.name;
        this.registerOutputs({ address: this.address, urlSecretName: this.urlSecretName });
    }
}
