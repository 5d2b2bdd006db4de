import { serviceContainerSecurity } from "../../lib/spoke-services";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { versions } from "../../config/versions";
import { COUNTER_STORE_ADDRESS, COUNTER_STORE_SECRET } from "../../services/shared/spoke-secrets";

/** Valkey/Redis port. */
export const COUNTER_STORE_PORT = COUNTER_STORE_ADDRESS.port;

/** Inputs of {@link CounterStore}. */
export interface CounterStoreArgs {
    /** Must be services/shared/spoke-secrets.ts `COUNTER_STORE_ADDRESS.namespace` (the installed URL names it). */
    namespace: string;
    /** Memory cap in MiB (`--maxmemory`); the container limit adds 25% headroom. */
    maxMemoryMiB?: number;
}

/**
 * Pure: the Valkey container's arguments: `valkey-server` and its directives (upstream/valkey.ts). No persistence (counters and leases are short-lived: a restart resets
 * windows and leases, which the TTLs would have expired soon anyway). `noeviction`: when memory is full, writes
 * fail and the auth service answers 503, instead of Valkey silently dropping a concurrency set (which would
 * admit more requests than the limit). The password comes from `$(VALKEY_PASSWORD)`, expanded by the kubelet.
 */
export function valkeyArgs(maxMemoryMiB: number): string[] {
    return [
        // The image's CMD, named (its entry point script runs it with these directives): upstream/valkey.ts.
        "valkey-server",
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
 *
 * The password is not generated here: Valkey reads it from the operator-installed Secret
 * services/shared/spoke-secrets.ts `COUNTER_STORE_SECRET` (`npm run mint-key -- install-spoke-secrets`), which also
 * holds the clients' URL, so it is in no Pulumi state. Until the Secret exists the pod does not start.
 * @throws Error when `namespace` is not `COUNTER_STORE_ADDRESS.namespace`
 */
export class CounterStore extends pulumi.ComponentResource {
    /** `<service>.<ns>.svc.cluster.local:6379` (no credentials). */
    public readonly address: pulumi.Output<string>;
    /** The operator-installed Secret (in the store's and metering's namespaces) whose key `url` the clients read. */
    public readonly urlSecret = { name: COUNTER_STORE_SECRET.name, key: COUNTER_STORE_SECRET.keys.url };
    public readonly service: k8s.core.v1.Service;

    constructor(name: string, args: CounterStoreArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:CounterStore", name, {}, opts);
        if (args.namespace !== COUNTER_STORE_ADDRESS.namespace)
            throw new Error(
                `CounterStore: namespace "${args.namespace}" differs from COUNTER_STORE_ADDRESS.namespace "${COUNTER_STORE_ADDRESS.namespace}" (services/shared/spoke-secrets.ts), which the installed URL names`,
            );
        const svcName = COUNTER_STORE_ADDRESS.service;
        const maxMemoryMiB = args.maxMemoryMiB ?? 512;
        const labels = {
            "app.kubernetes.io/name": "valkey",
            "app.kubernetes.io/instance": svcName,
            "app.kubernetes.io/part-of": "agent-router",
        };
        this.address = pulumi.output(`${svcName}.${args.namespace}.svc.cluster.local:${COUNTER_STORE_PORT}`);
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
                                            valueFrom: {
                                                secretKeyRef: { name: COUNTER_STORE_SECRET.name, key: COUNTER_STORE_SECRET.keys.password },
                                            },
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
        this.registerOutputs({ address: this.address });
    }
}
