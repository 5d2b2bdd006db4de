import { z } from "zod";
import { parseCidr } from "./cidr";

const SecretName = z
    .string()
    .regex(
        /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/,
        "must be the name of a Kubernetes Secret (a lower-case DNS name), never the certificate or key itself",
    );
const Cidr = z.string().refine((s) => {
    try {
        parseCidr(s);
        return true;
    } catch {
        return false;
    }
}, "must be an IPv4 CIDR like 203.0.113.0/24");

/**
 * Where the tenant edge's certificate comes from (`platform:gateway.listener.tls`). Tenants send bearer keys, so the
 * listener is HTTPS unless the spoke file names the load balancer that terminates TLS in front of it.
 * - `acme-dns01`: cert-manager orders it from an ACME CA (default Let's Encrypt production) with DNS-01 on a Route 53
 *   hosted zone (cert-manager.io/docs/configuration/acme/dns01/route53; on EKS cert-manager gets its own Pod Identity
 *   role limited to that zone).
 * - `private-ca`: cert-manager signs it with the site's CA, a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`) in
 *   the gateway namespace, where the namespaced Issuer reads it (CA issuer, cert-manager.io/docs/configuration/ca).
 * - `secret`: an existing `kubernetes.io/tls` Secret in the gateway namespace, rotated by the operator.
 * - `terminated-in-front`: plain HTTP on the Gateway; `loadBalancer` names the device that terminates TLS in front
 *   (recorded on the Gateway, which the edge-tls policy reads).
 */
export const EdgeTlsSchema = z.discriminatedUnion("source", [
    z
        .object({
            source: z.literal("acme-dns01"),
            /** ACME account e-mail (expiry notices). */
            email: z.string().regex(/^[^@\s]+@[^@\s]+\.[^@\s]+$/, "must be an e-mail address"),
            /** ACME directory URL; default Let's Encrypt production. */
            server: z.string().url().default("https://acme-v02.api.letsencrypt.org/directory"),
            route53: z
                .object({
                    hostedZoneId: z.string().regex(/^Z[A-Z0-9]{1,31}$/, "must be a Route 53 hosted zone id like Z0123456789ABCDEFGHIJ"),
                    region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, "must be an AWS region like ap-southeast-1"),
                })
                .strict(),
        })
        .strict(),
    z.object({ source: z.literal("private-ca"), caSecretName: SecretName }).strict(),
    z.object({ source: z.literal("secret"), secretName: SecretName }).strict(),
    z
        .object({
            source: z.literal("terminated-in-front"),
            /** The load balancer that terminates TLS in front of the Gateway (name or ARN, for the reviewer). */
            loadBalancer: z.string().min(3),
        })
        .strict(),
]);
/** `platform:gateway.listener.tls` as parsed ({@link EdgeTlsSchema}): where the edge certificate comes from (`source`). */
export type EdgeTls = z.infer<typeof EdgeTlsSchema>;

/**
 * How an EKS spoke's proxy Service is exposed (`platform:gateway.listener.exposure`): a Network Load Balancer through
 * the AWS Load Balancer Controller, with an explicit scheme and the client ranges allowed to reach it.
 */
export const EdgeExposureSchema = z
    .object({
        scheme: z.enum(["internet-facing", "internal"]),
        /** Client CIDRs allowed through the NLB's security group (Service `loadBalancerSourceRanges`). */
        sourceRanges: z.array(Cidr).min(1),
    })
    .strict();
/** How the edge is exposed, as parsed ({@link EdgeExposureSchema}). */
export type EdgeExposure = z.infer<typeof EdgeExposureSchema>;

/**
 * Pure: cross-checks of the listener against the spoke's provider. Returns issues with paths under `gateway.listener`.
 * - a certificate cert-manager issues needs `hostname` (the certificate's DNS name);
 * - EKS: `exposure` is required (no implicit internet-facing load balancer); on-prem: not used (the site's load
 *   balancer implementation exposes the Service).
 */
export function edgeIssues(
    provider: "onprem" | "eks",
    listener: { hostname?: string; tls?: EdgeTls; tlsSecretName?: string; exposure?: EdgeExposure },
): Array<{ path: (string | number)[]; message: string }> {
    const out: Array<{ path: (string | number)[]; message: string }> = [];
    const p = ["gateway", "listener"];
    if (!listener.tls && !listener.tlsSecretName) {
        out.push({
            path: [...p, "tls"],
            message:
                "the tenant edge needs TLS: set tls.source to acme-dns01, private-ca or secret (or terminated-in-front naming the load balancer that terminates TLS)",
        });
    }
    if (listener.tls && listener.tlsSecretName)
        out.push({
            path: [...p, "tlsSecretName"],
            message: "set either tls or tlsSecretName (the same as tls: { source: secret }), not both",
        });
    if ((listener.tls?.source === "acme-dns01" || listener.tls?.source === "private-ca") && !listener.hostname) {
        out.push({
            path: [...p, "hostname"],
            message: `tls.source ${listener.tls.source} issues a certificate for the listener's hostname: set hostname (the DNS name tenants use)`,
        });
    }
    if (provider === "eks" && !listener.exposure) {
        out.push({
            path: [...p, "exposure"],
            message:
                "an EKS spoke exposes its proxy through a Network Load Balancer: set exposure.scheme (internet-facing or internal) and exposure.sourceRanges",
        });
    }
    if (provider === "onprem" && listener.exposure)
        out.push({
            path: [...p, "exposure"],
            message: "exposure is for EKS spokes (AWS Load Balancer Controller); an on-prem site's load balancer exposes the proxy",
        });
    return out;
}
