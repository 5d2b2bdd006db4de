import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { type PolicyContract, policyBucketOwner } from "../../config/contract";
import { versions } from "../../config/versions";
import { type AuthBackend, ENVOY_GATEWAY_NAMESPACE, ENVOY_PROXY_POD_LABELS } from "../../lib/gateway";
import {
    AUTH_POD_LABELS,
    AWS_FILES_DIR,
    AWS_PROFILE,
    AWS_ROLE_SESSION_NAMES,
    AWS_SOURCE_PROFILE,
    awsFilesVolume,
    sourceKeyAnnotations,
    servicePodBasics,
    serviceContainerSecurity,
} from "../../lib/spoke-services";
import type { AUTH_ENV } from "../../services/auth/config";
import type { EnvVars } from "../../services/shared/env";
import { CACHE_SALT_SECRET } from "../../services/shared/spoke-secrets";

/** Service (and Deployment) name of the auth service; the SecurityPolicy's ext_authz backendRef. */
export const AUTH_SERVICE_NAME = "auth";
// Shared with Metering and Observability (lib/spoke-services.ts); re-exported for this component's callers.
export { AUTH_POD_LABELS, AWS_FILES_DIR, AWS_PROFILE, AWS_SOURCE_PROFILE, awsCredentialsFile } from "../../lib/spoke-services";
/** ext_authz listener (services/auth/config.ts `AUTH_PORT`). */
export const AUTH_PORT = 8080;
/** Operations listener: /healthz, /readyz, /metrics (services/auth/config.ts `AUTH_OPS_PORT`). */
export const AUTH_OPS_PORT = 9090;
/** Path prefix Envoy prepends to the client path (services/auth/config.ts `AUTH_PATH_PREFIX`). */
export const AUTH_PATH_PREFIX = "/authz";
/** Where the verified last-known-good bundle is cached (an emptyDir: survives container restarts, not rescheduling). */
export const AUTH_CACHE_DIR = "/var/cache/auth";

/**
 * Pure: AWS shared config file. The SDK's default chain (`fromIni`) assumes `role_arn` with the
 * `source_profile` key, so every S3 call runs on the SpokeIdentity role's short-lived session.
 */
export function awsConfigFile(roleArn: string, region: string): string {
    return [
        `[profile ${AWS_PROFILE}]`,
        `role_arn = ${roleArn}`,
        `source_profile = ${AWS_SOURCE_PROFILE}`,
        `role_session_name = ${AWS_ROLE_SESSION_NAMES.auth}`,
        `region = ${region}`,
        "",
    ].join("\n");
}

/** Inputs of {@link AuthService}. */
export interface AuthServiceArgs {
    /** This spoke's name (bundle `spoke`, S3 prefix `spokes/<spoke>/`). */
    spoke: string;
    /** Namespace (the gateway namespace: the SecurityPolicy refers to the Service there). */
    namespace: string;
    /** The contract's policy block: bucket, region, hub public key, role. */
    policy: pulumi.Input<PolicyContract>;
    /**
     * On-prem (access key): the pods assume the spoke role with the source key the operator installed as the
     * Kubernetes Secret lib/spoke-services.ts `SOURCE_KEY_SECRET` (`npm run mint-key -- install-source-key`); this
     * program only names it and never holds the key. `slot` (the contract's active key slot, not secret) annotates the
     * pod template, so moving `activeKey` rolls the pods onto the re-installed key. Absent on EKS (EKS Pod Identity).
     */
    sourceKey?: { slot: string };
    /** Operator-installed Secret (same namespace) and key holding the Redis URL with its password (components/spoke/CounterStore.ts `urlSecret`). */
    redisUrlSecret: { name: pulumi.Input<string>; key: string };
    /** At least 2 (config/gateway.ts enforces it). */
    replicas: number;
    /** Largest body accepted, bytes: equal to the SecurityPolicy's `bodyToExtAuth.maxRequestBytes`. */
    maxBodyBytes: number;
    /** Concurrency lease lifetime, seconds: longer than the longest request (AIGatewayRoute `timeouts.request`). */
    leaseTtlSeconds: number;
    /** Image reference; defaults to the pin in config/versions.ts. */
    image?: string;
}

/**
 * Pure: the auth service's environment, by the names of its contract (services/auth/config.ts `AUTH_ENV`: a name
 * the service does not read is a type error). Only non-secret values; the Redis URL (`AUTH_REDIS_URL`) comes from
 * a Secret reference and the AWS key from a mounted Secret.
 * @throws Error when the policy contract names no bucket-owner account (config/contract.ts `policyBucketOwner`)
 */
export function authEnv(
    spoke: string,
    policy: PolicyContract,
    maxBodyBytes: number,
    leaseTtlSeconds: number,
    sharedFiles = true,
): EnvVars<typeof AUTH_ENV> {
    const files: EnvVars<typeof AUTH_ENV> = sharedFiles
        ? { AWS_CONFIG_FILE: `${AWS_FILES_DIR}/config`, AWS_SHARED_CREDENTIALS_FILE: `${AWS_FILES_DIR}/credentials`, AWS_PROFILE }
        : {};
    return {
        AUTH_SPOKE: spoke,
        AUTH_HUB_PUBLIC_KEY: policy.publicKey,
        AUTH_POLICY_BUCKET: policy.bucket,
        AUTH_POLICY_BUCKET_OWNER: policyBucketOwner(policy),
        AUTH_S3_REGION: policy.region,
        AUTH_BUNDLE_CACHE_PATH: `${AUTH_CACHE_DIR}/bundle.json`,
        AUTH_PORT: String(AUTH_PORT),
        AUTH_OPS_PORT: String(AUTH_OPS_PORT),
        AUTH_PATH_PREFIX,
        AUTH_MAX_BODY_BYTES: String(maxBodyBytes),
        AUTH_LEASE_TTL_SECONDS: String(leaseTtlSeconds),
        ...files,
        AWS_REGION: policy.region,
    };
}

/**
 * The spoke's auth service (services/auth): the ext_authz backend that checks API keys, model access and the
 * three limit tiers against the signed policy bundle it pulls from the hub. Deployment (≥ 2 replicas, spread
 * over nodes, PDB), ClusterIP Service on the ext_authz port only, readiness `/readyz` (a verified bundle is
 * loaded and Redis answers) and liveness `/healthz` on the operations port, an emptyDir bundle cache, and a
 * NetworkPolicy so only Envoy proxies reach the ext_authz port.
 *
 * AWS credentials (on-prem): a Secret with an AWS shared config/credentials file pair; the source key can only
 * assume the SpokeIdentity role (components/hub/SpokeIdentity.ts), values are Pulumi secrets end to end.
 *
 * @throws Error from the constructor when `namespace` is not one of `CACHE_SALT_SECRET.namespaces`
 *   (services/shared/spoke-secrets.ts), where the operator installs the cache-salt key; during the deployment (inside
 *   the policy output), config/contract.ts `policyBucketOwner`'s Error when the contract's policy block names no
 *   bucket-owner account
 */
export class AuthService extends pulumi.ComponentResource {
    public readonly service: k8s.core.v1.Service;
    public readonly deployment: k8s.apps.v1.Deployment;
    /** What the SecurityPolicy's ext_authz points at. */
    public readonly backend: AuthBackend;

    constructor(name: string, args: AuthServiceArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:AuthService", name, {}, opts);
        const ns = args.namespace;
        if (!(CACHE_SALT_SECRET.namespaces as readonly string[]).includes(ns))
            throw new Error(
                `AuthService: namespace "${ns}" is not one of CACHE_SALT_SECRET.namespaces (services/shared/spoke-secrets.ts), where its cache-salt key is installed`,
            );
        const labels = AUTH_POD_LABELS;
        const policy = pulumi.output(args.policy);
        const image = args.image ?? `${versions.authService.image}:${versions.authService.version}`;

        const sa = new k8s.core.v1.ServiceAccount(
            `${name}-sa`,
            {
                metadata: { name: AUTH_SERVICE_NAME, namespace: ns, labels },
                automountServiceAccountToken: false,
            },
            { parent: this },
        );
        // On-prem (access key): only the shared config (role, region) is rendered here; the source key is mounted from
        // the operator-installed Secret (lib/spoke-services.ts SOURCE_KEY_SECRET), never read by this program.
        const aws = !args.sourceKey
            ? undefined
            : new k8s.core.v1.Secret(
                  `${name}-aws`,
                  {
                      metadata: { name: `${AUTH_SERVICE_NAME}-aws`, namespace: ns, labels },
                      type: "Opaque",
                      stringData: { config: policy.apply((p) => awsConfigFile(p.roleArn, p.region)) },
                  },
                  { parent: this },
              );

        // The cache-salt HMAC key (services/auth/entitlement.ts) is not generated here: the auth pods read it from the
        // operator-installed Secret (services/shared/spoke-secrets.ts CACHE_SALT_SECRET, `npm run mint-key --
        // install-spoke-secrets`), so it is in no Pulumi state; replacing it re-salts (cold-starts) every cache.
        const env = policy.apply((p) =>
            Object.entries(authEnv(args.spoke, p, args.maxBodyBytes, args.leaseTtlSeconds, !!aws)).map(([n, value]) => ({
                name: n,
                value: value as string,
            })),
        );
        this.deployment = new k8s.apps.v1.Deployment(
            `${name}-deployment`,
            {
                metadata: { name: AUTH_SERVICE_NAME, namespace: ns, labels },
                spec: {
                    replicas: args.replicas,
                    selector: { matchLabels: labels },
                    strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
                    template: {
                        metadata: { labels, ...sourceKeyAnnotations(args.sourceKey) },
                        spec: {
                            serviceAccountName: sa.metadata.name,
                            ...servicePodBasics(labels, 10001),
                            containers: [
                                {
                                    name: "auth",
                                    image,
                                    env: pulumi.all([env, args.redisUrlSecret.name]).apply(([e, secretName]) => [
                                        ...e,
                                        {
                                            name: "AUTH_REDIS_URL" satisfies keyof EnvVars<typeof AUTH_ENV>,
                                            valueFrom: { secretKeyRef: { name: secretName, key: args.redisUrlSecret.key } },
                                        },
                                        {
                                            name: "AUTH_CACHE_SALT_KEY" satisfies keyof EnvVars<typeof AUTH_ENV>,
                                            valueFrom: { secretKeyRef: { name: CACHE_SALT_SECRET.name, key: CACHE_SALT_SECRET.key } },
                                        },
                                    ]),
                                    ports: [
                                        { name: "http", containerPort: AUTH_PORT },
                                        { name: "ops", containerPort: AUTH_OPS_PORT },
                                    ],
                                    readinessProbe: { httpGet: { path: "/readyz", port: "ops" }, periodSeconds: 5, failureThreshold: 2 },
                                    livenessProbe: {
                                        httpGet: { path: "/healthz", port: "ops" },
                                        initialDelaySeconds: 10,
                                        periodSeconds: 10,
                                        failureThreshold: 3,
                                    },
                                    resources: { requests: { cpu: "500m", memory: "512Mi" }, limits: { memory: "1Gi" } },
                                    securityContext: serviceContainerSecurity(),
                                    volumeMounts: [
                                        { name: "cache", mountPath: AUTH_CACHE_DIR },
                                        ...(aws ? [{ name: "aws", mountPath: AWS_FILES_DIR, readOnly: true }] : []),
                                    ],
                                },
                            ],
                            volumes: [
                                { name: "cache", emptyDir: { sizeLimit: "256Mi" } },
                                ...(aws ? [{ name: "aws", projected: awsFilesVolume(aws.metadata.name) }] : []),
                            ],
                        },
                    },
                },
            },
            { parent: this },
        );
        this.service = new k8s.core.v1.Service(
            `${name}-service`,
            {
                metadata: { name: AUTH_SERVICE_NAME, namespace: ns, labels },
                spec: {
                    type: "ClusterIP",
                    selector: labels,
                    ports: [{ name: "http", port: AUTH_PORT, targetPort: "http", appProtocol: "http" }],
                },
            },
            { parent: this },
        );
        new k8s.policy.v1.PodDisruptionBudget(
            `${name}-pdb`,
            {
                metadata: { name: AUTH_SERVICE_NAME, namespace: ns, labels },
                spec: { minAvailable: 1, selector: { matchLabels: labels } },
            },
            { parent: this },
        );
        new k8s.networking.v1.NetworkPolicy(
            `${name}-ingress`,
            {
                metadata: { name: `${AUTH_SERVICE_NAME}-from-envoy`, namespace: ns, labels },
                spec: {
                    podSelector: { matchLabels: labels },
                    policyTypes: ["Ingress"],
                    ingress: [
                        {
                            from: [
                                {
                                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ENVOY_GATEWAY_NAMESPACE } },
                                    podSelector: { matchLabels: { ...ENVOY_PROXY_POD_LABELS } },
                                },
                            ],
                            ports: [{ protocol: "TCP", port: AUTH_PORT }],
                        },
                        // Metrics scraping and probes (the kubelet's own probes are not subject to NetworkPolicy).
                        { ports: [{ protocol: "TCP", port: AUTH_OPS_PORT }] },
                    ],
                },
            },
            { parent: this },
        );

        this.backend = { service: AUTH_SERVICE_NAME, namespace: ns, port: AUTH_PORT, pathPrefix: AUTH_PATH_PREFIX };
        this.registerOutputs({});
    }
}
