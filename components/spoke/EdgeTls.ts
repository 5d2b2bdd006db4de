import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { EdgeTls as EdgeTlsConfig } from "../../config/edge";
import { versions } from "../../config/versions";
import { CERT_MANAGER_NAMESPACE, certManagerValues, edgeCertificate, edgeIssuer, type GlobalDns01 } from "../../lib/edge";

/** Inputs of {@link EdgeTls}. */
export interface EdgeTlsArgs {
    /** `platform:gateway.listener.tls` with `source` acme-dns01 or private-ca. */
    tls: EdgeTlsConfig;
    /** The listener's DNS name (the certificate's only name). */
    hostname: string;
    /** Further names the certificate carries (the global failover hostname). */
    extraDnsNames?: string[];
    /** The global failover hostname and its zone, answered by its own DNS-01 solver (acme-dns01 only). */
    globalDns01?: GlobalDns01;
    /** Gateway namespace: the Issuer, the Certificate and its Secret live there. */
    namespace: string;
    /** Resources the Issuer waits for (the gateway namespace). */
    dependsOn?: pulumi.Input<pulumi.Resource>[];
}

/**
 * The tenant edge's certificate: cert-manager (pinned chart, config/versions.ts; CRDs kept on uninstall), an Issuer in
 * the gateway namespace (ACME DNS-01 on Route 53, or the site's CA) and the Certificate whose Secret the Gateway's
 * HTTPS listener references (lib/edge.ts). Issuer and Certificate are direct resources, so the policy pack sees them.
 *
 * @throws Error from the constructor when `tls.source` is neither `acme-dns01` nor `private-ca` (`secret` and
 *   `terminated-in-front` need no issuer: lib/edge.ts `edgeIssuer` returns none, and components/spoke/AgentRouter.ts builds no
 *   EdgeTls for them)
 */
export class EdgeTls extends pulumi.ComponentResource {
    /** The Certificate (the Gateway waits for it). */
    public readonly certificate: k8s.apiextensions.CustomResource;

    constructor(name: string, args: EdgeTlsArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:EdgeTls", name, {}, opts);
        const issuerObj = edgeIssuer(args.tls, args.namespace, args.globalDns01);
        if (!issuerObj) throw new Error(`EdgeTls: tls.source ${args.tls.source} needs no issuer`);
        const ns = new k8s.core.v1.Namespace(`${name}-ns`, { metadata: { name: CERT_MANAGER_NAMESPACE } }, { parent: this });
        const chart = new k8s.helm.v3.Release(
            `${name}-cert-manager`,
            {
                name: "cert-manager",
                chart: versions.certManager.chart,
                version: versions.certManager.version,
                repositoryOpts: { repo: versions.certManager.repo },
                namespace: CERT_MANAGER_NAMESPACE,
                values: certManagerValues(args.tls.source === "acme-dns01"),
            },
            { parent: this, dependsOn: [ns] },
        );
        const issuer = new k8s.apiextensions.CustomResource(`${name}-issuer`, issuerObj as k8s.apiextensions.CustomResourceArgs, {
            parent: this,
            dependsOn: [chart, ...(args.dependsOn ?? [])],
        });
        this.certificate = new k8s.apiextensions.CustomResource(
            `${name}-certificate`,
            edgeCertificate(args.hostname, args.namespace, args.extraDnsNames) as k8s.apiextensions.CustomResourceArgs,
            { parent: this, dependsOn: [issuer] },
        );
        this.registerOutputs({});
    }
}
