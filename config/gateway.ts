import { z } from "zod";
import { EdgeExposureSchema, EdgeTlsSchema } from "./edge";
import { GatewayReachableSchema } from "./failover";

/** One mebibyte in bytes. */
export const MiB = 1024 * 1024;

/**
 * Spoke gateway settings (`platform:gateway`, optional; every field has a default so existing spoke stack
 * files keep working). Sizes are bytes, durations seconds.
 */
export const GatewayConfigSchema = z
    .object({
        listener: z
            .object({
                /** Hostname clients use (Gateway listener `hostname`); unset accepts any Host. */
                hostname: z
                    .string()
                    .regex(/^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, "must be a lower-case DNS name")
                    .optional(),
                /**
                 * Name of a `kubernetes.io/tls` Secret in the gateway namespace: HTTPS listener on 443 terminating TLS at
                 * Envoy (the same as `tls: { source: secret, secretName }`).
                 */
                tlsSecretName: z
                    .string()
                    .regex(
                        /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/,
                        "must be the name of a kubernetes.io/tls Secret (a lower-case DNS name), never the certificate or key itself",
                    )
                    .optional(),
                /** Where the certificate comes from (config/edge.ts); required unless `tlsSecretName` is set. */
                tls: EdgeTlsSchema.optional(),
                /** EKS: how the proxy's Network Load Balancer is exposed (config/edge.ts); required on EKS. */
                exposure: EdgeExposureSchema.optional(),
                /** How peers and Route 53 reach and verify this edge (config/failover.ts); needed when the hub fails over to or across it. */
                reachable: GatewayReachableSchema.optional(),
            })
            .strict()
            .prefault({}),
        /**
         * Largest request body ext_authz buffers and forwards to the auth service (`bodyToExtAuth.maxRequestBytes`),
         * in bytes. A larger body gets 413 before authorization. Default 32 MiB: a
         * 100k-token prompt is ~0.4-0.8 MB of JSON, coding-agent turns with tool schemas and history reach 2 MB
         * (silogen/cluster-forge#832 raised 64 KiB to 32 MiB for exactly this). Max 2^31-1 (int32 in the CRD).
         */
        maxRequestBytes: z
            .number()
            .int()
            .min(1)
            .max(2 ** 31 - 1)
            .default(32 * MiB),
        /**
         * Per-connection buffer limit (ClientTrafficPolicy `connection.bufferLimit`), in bytes; must be at least
         * {@link maxRequestBytes}. Envoy's default of 32 KiB returns 413 for larger prompts (ai-gateway#827).
         * Default 50 MiB, as the AI Gateway basic example.
         */
        bufferLimitBytes: z
            .number()
            .int()
            .min(1)
            .default(50 * MiB),
        /** Whole-request deadline for one completion, including every streamed chunk (AIGatewayRoute `timeouts.request`); AI Gateway's default is 60 s. */
        requestTimeoutSeconds: z.number().int().min(60).max(86400).default(1800),
        /**
         * Longest silence from the Dynamo frontend before the stream is cut (`streamIdleTimeout`); covers
         * time-to-first-token of a long prompt in a busy queue.
         */
        streamIdleTimeoutSeconds: z.number().int().min(10).max(3600).default(300),
        /** Envoy proxy replicas (EnvoyProxy `provider.kubernetes.envoyDeployment.replicas`). */
        envoyReplicas: z.number().int().min(1).default(2),
        /** Auth service replicas; at least 2 so a rollout or node loss does not turn every request into a 503. */
        authReplicas: z.number().int().min(2).default(2),
        /** Timeout of one ext_authz call, seconds (Envoy Gateway default 10). */
        authTimeoutSeconds: z.number().int().min(1).max(60).default(5),
        /**
         * Pods besides the Envoy proxies allowed to reach the Dynamo frontends' HTTP port, for `/metrics` (the
         * Planner scales on `dynamo_frontend_*` series read from Prometheus). Default: kube-prometheus-stack's
         * Prometheus (prometheus-operator labels its pods `app.kubernetes.io/name: prometheus`) in `monitoring`, the
         * namespace of config/observability.ts `prometheusOf`. These pods can also call the model API
         * unauthenticated, so keep the list to the scraper.
         */
        frontendScrapers: z
            .array(
                z
                    .object({
                        namespace: z.string().min(1),
                        podLabels: z
                            .record(z.string(), z.string())
                            .refine((l) => Object.keys(l).length > 0, "select the scraper pods by at least one label"),
                    })
                    .strict(),
            )
            .default([{ namespace: "monitoring", podLabels: { "app.kubernetes.io/name": "prometheus" } }]),
    })
    .strict()
    .superRefine((g, ctx) => {
        if (g.maxRequestBytes > g.bufferLimitBytes) {
            ctx.addIssue({
                code: "custom",
                path: ["bufferLimitBytes"],
                message: `${g.bufferLimitBytes} bytes is below maxRequestBytes (${g.maxRequestBytes}); Envoy would answer 413 before ext_authz sees the body`,
            });
        }
    });

/** `platform:gateway` with defaults applied. */
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;
