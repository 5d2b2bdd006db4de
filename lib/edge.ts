import type { EdgeExposure, EdgeTls } from "../config/edge";

/** Namespace of cert-manager (its chart's documented install namespace, cert-manager.io/docs/installation/helm). */
export const CERT_MANAGER_NAMESPACE = "cert-manager";
/** cert-manager controller's ServiceAccount: the chart's fullname `cert-manager` for release name `cert-manager`. */
export const CERT_MANAGER_SERVICE_ACCOUNT = "cert-manager";
/** The Secret cert-manager writes the edge certificate to (gateway namespace), and the Issuer's name. */
export const EDGE_CERT_SECRET = "agent-router-tls";
/** Name of the cert-manager Issuer of the edge certificate (gateway namespace). */
export const EDGE_ISSUER = "agent-router-edge";
/**
 * Annotation on the Gateway naming the load balancer that terminates TLS in front of a plain-HTTP listener
 * (`platform:gateway.listener.tls.source: terminated-in-front`). The edge-tls policy accepts an HTTP listener only
 * with it: the reviewed, visible way out.
 */
export const TLS_TERMINATED_BY_ANNOTATION = "platform.h200.ai/tls-terminated-by";

/**
 * Pure: values of the cert-manager chart (keys recorded in upstream/charts/cert-manager.ts): its CRDs installed and kept
 * on uninstall (removing them would delete every Certificate), two controller replicas. With `ambientIssuer` (ACME
 * DNS-01 on Route 53 through the controller's Pod Identity role) the controller gets `--issuer-ambient-credentials`:
 * a namespaced Issuer may use ambient credentials only with it (default false;
 * cert-manager/cert-manager internal/apis/config/controller/v1alpha1/defaults.go `defaultIssuerAmbientCredentials`),
 * without it the route53 solver has no credentials and the certificate is never issued.
 */
export function certManagerValues(ambientIssuer = false) {
    return {
        crds: { enabled: true, keep: true },
        replicaCount: 2,
        ...(ambientIssuer ? { extraArgs: ["--issuer-ambient-credentials"] } : {}),
    };
}

/** The listener TLS the Gateway gets: the Secret it terminates with, or the device in front that terminates. */
export type ListenerTls = { secretName: string } | { terminatedBy: string };

/**
 * Pure: the Gateway listener's TLS for the configured source (`tlsSecretName` is the same as `{ source: secret }`):
 * `secret` -> that Secret, `terminated-in-front` -> the device that terminates, `acme-dns01` / `private-ca` -> the
 * Secret the edge Certificate writes ({@link EDGE_CERT_SECRET}).
 * @throws Error when neither `tls` nor `tlsSecretName` is given (config/edge.ts `edgeIssues` refuses such a file first)
 */
export function listenerTls(tls: EdgeTls | undefined, tlsSecretName?: string): ListenerTls {
    if (tlsSecretName) return { secretName: tlsSecretName };
    if (!tls) throw new Error("platform:gateway.listener: no tls source (config/edge.ts edgeIssues refuses this)");
    switch (tls.source) {
        case "secret":
            return { secretName: tls.secretName };
        case "terminated-in-front":
            return { terminatedBy: tls.loadBalancer };
        default:
            return { secretName: EDGE_CERT_SECRET };
    }
}

/** The global failover hostname (config/failover.ts) and its Route 53 zone, when the spoke is behind it. */
export interface GlobalDns01 {
    hostname: string;
    hostedZoneId: string;
}

/**
 * Pure: why an ACME DNS-01 edge cannot certify the global failover hostname it is behind, or undefined. The global
 * name's zone lives in the hub's account; cert-manager's role is in the spoke's, and Route 53 hosted zones take no
 * resource policy, so a spoke in another account cannot write the challenge record.
 * @param x.hubAccountId the hub's account (the contract's `policy.roleArn`), x.spokeAccountId the deployer's
 */
export function globalDns01Issue(x: {
    globalHostname: string;
    globalHostedZoneId?: string;
    hubAccountId: string;
    spokeAccountId: string;
}): string | undefined {
    if (!x.globalHostedZoneId)
        return `the hub publishes no zone for the global hostname ${x.globalHostname} (a hub older than this spoke): run the hub's up first`;
    if (x.hubAccountId !== x.spokeAccountId)
        return `this spoke is behind the global hostname ${x.globalHostname}, whose Route 53 zone ${x.globalHostedZoneId} is in the hub's account ${x.hubAccountId}; cert-manager's DNS-01 role here (account ${x.spokeAccountId}) cannot answer its challenge: use tls.source secret with a certificate naming both ${x.globalHostname} and the listener hostname, or run the spoke in the hub's account`;
    return undefined;
}

/**
 * Pure: the cert-manager Issuer (gateway namespace) for an `acme-dns01` or `private-ca` source; undefined otherwise.
 * ACME: DNS-01 through Route 53 on the one hosted zone, credentials from the environment (EKS Pod Identity on
 * cert-manager's service account), fields from cert-manager.io/v1 `ACMEIssuerDNS01ProviderRoute53`. CA: the site's
 * CA key pair Secret (`spec.ca.secretName`, read from the Issuer's namespace: cert-manager.io/docs/configuration/ca).
 */
export function edgeIssuer(tls: EdgeTls, namespace: string, globalDns01?: GlobalDns01) {
    const metadata = { name: EDGE_ISSUER, namespace };
    if (tls.source === "acme-dns01") {
        const own = { dns01: { route53: { region: tls.route53.region, hostedZoneID: tls.route53.hostedZoneId } } };
        return {
            apiVersion: "cert-manager.io/v1",
            kind: "Issuer",
            metadata,
            spec: {
                acme: {
                    server: tls.server,
                    email: tls.email,
                    privateKeySecretRef: { name: `${EDGE_ISSUER}-acme-account` },
                    // The global failover hostname's challenge is answered in its own zone (a solver whose selector
                    // names it wins over the default: cert-manager.io/v1 ACMEChallengeSolver `selector.dnsNames`).
                    solvers: globalDns01
                        ? [
                              {
                                  selector: { dnsNames: [globalDns01.hostname] },
                                  dns01: { route53: { region: tls.route53.region, hostedZoneID: globalDns01.hostedZoneId } },
                              },
                              own,
                          ]
                        : [own],
                },
            },
        };
    }
    if (tls.source === "private-ca")
        return { apiVersion: "cert-manager.io/v1", kind: "Issuer", metadata, spec: { ca: { secretName: tls.caSecretName } } };
    return undefined;
}

/**
 * Pure: the edge Certificate (gateway namespace): the listener's DNS name (plus `extraDnsNames`: the global failover
 * hostname, config/failover.ts), ECDSA P-256, renewed 30 days before expiry.
 */
export function edgeCertificate(hostname: string, namespace: string, extraDnsNames: string[] = []) {
    return {
        apiVersion: "cert-manager.io/v1",
        kind: "Certificate",
        metadata: { name: EDGE_CERT_SECRET, namespace },
        spec: {
            secretName: EDGE_CERT_SECRET,
            dnsNames: [hostname, ...extraDnsNames.filter((n) => n !== hostname)],
            issuerRef: { group: "cert-manager.io", kind: "Issuer", name: EDGE_ISSUER },
            privateKey: { algorithm: "ECDSA", size: 256, rotationPolicy: "Always" },
            duration: "2160h",
            renewBefore: "720h",
        },
    };
}

/**
 * Pure: EnvoyProxy `provider.kubernetes.envoyService` for an EKS spoke: a Network Load Balancer provisioned by the AWS
 * Load Balancer Controller (`loadBalancerClass: service.k8s.aws/nlb`), IP targets, the configured scheme, and the
 * client ranges (`loadBalancerSourceRanges`, which the controller turns into the NLB security group's rules).
 * Annotations from kubernetes-sigs/aws-load-balancer-controller docs/guide/service/annotations.md.
 */
export function nlbEnvoyService(exposure: EdgeExposure) {
    return {
        type: "LoadBalancer",
        loadBalancerClass: "service.k8s.aws/nlb",
        loadBalancerSourceRanges: [...exposure.sourceRanges],
        annotations: {
            "service.beta.kubernetes.io/aws-load-balancer-scheme": exposure.scheme,
            "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
        },
    };
}

/**
 * Pure: permissions of cert-manager's role for ACME DNS-01 on Route 53 (cert-manager.io/docs/configuration/acme/dns01/route53,
 * "Set up an IAM Policy"): poll its own changes, and change only TXT records named `_acme-challenge.<hostname>` in the
 * one hosted zone (`route53:ChangeResourceRecordSetsRecordTypes`, `...NormalizedRecordNames`); behind a global
 * failover hostname also `_acme-challenge.<global hostname>` in that name's zone. The Issuer names the zones, so
 * `ListHostedZonesByName` is not needed.
 */
export function certManagerRoute53Policy(hostedZoneId: string, hostname: string, partition = "aws", globalDns01?: GlobalDns01) {
    const zoneArn = (id: string) => `arn:${partition}:route53:::hostedzone/${id}`;
    const challenge = (sid: string, zone: string, name: string) => ({
        Sid: sid,
        Effect: "Allow",
        Action: ["route53:ChangeResourceRecordSets"],
        Resource: zoneArn(zone),
        Condition: {
            "ForAllValues:StringEquals": {
                "route53:ChangeResourceRecordSetsRecordTypes": ["TXT"],
                "route53:ChangeResourceRecordSetsNormalizedRecordNames": [`_acme-challenge.${name.replace(/^\*\./, "")}`],
            },
        },
    });
    const zones = [hostedZoneId, ...(globalDns01 && globalDns01.hostedZoneId !== hostedZoneId ? [globalDns01.hostedZoneId] : [])];
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "PollChanges", Effect: "Allow", Action: ["route53:GetChange"], Resource: `arn:${partition}:route53:::change/*` },
            {
                Sid: "ListZoneRecords",
                Effect: "Allow",
                Action: ["route53:ListResourceRecordSets"],
                Resource: zones.length === 1 ? zoneArn(zones[0]) : zones.map(zoneArn),
            },
            challenge("ChallengeRecordsOnly", hostedZoneId, hostname),
            // The global failover hostname's challenge record, in its zone (the hub's), and nothing else there.
            ...(globalDns01 ? [challenge("GlobalHostnameChallengeOnly", globalDns01.hostedZoneId, globalDns01.hostname)] : []),
        ],
    };
}
