import { beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../config/errors";
import { parseFlatStackConfig } from "../config/stack";
import { versions } from "../config/versions";
import { CERT_MANAGER_NAMESPACE, EDGE_CERT_SECRET, TLS_TERMINATED_BY_ANNOTATION } from "../lib/edge";
import { edgeTlsPolicies, TLS_TERMINATED_BY_ANNOTATION as POLICY_ANNOTATION } from "../policies/edge-tls";
import { allPolicies } from "../policies/policies";
import type { CapturedResource } from "../tools/harness";
import { runPolicies } from "../tools/policy-runner";
import { byType, flatConfig, inputs, runHubAndSpoke, stackConfigDoc } from "./helpers";

const NOW = new Date("2026-12-01T00:00:00Z");
function issues(stack: string, mutate: (d: Record<string, any>) => void): string[] {
    const doc = structuredClone(stackConfigDoc(stack));
    mutate(doc);
    try {
        parseFlatStackConfig(flatConfig(doc), `stacks/Pulumi.${stack}.yaml`, [], { now: NOW });
    } catch (e) {
        if (e instanceof ConfigError) return e.issues.map((i) => `${i.key}: ${i.message}`);
        throw e;
    }
    return [];
}
const cr = (rs: CapturedResource[], kind: string) => rs.filter((r) => r.type.endsWith(`:${kind}`)).map(inputs);
const mandatory = async (rs: CapturedResource[], policies = edgeTlsPolicies) =>
    (await runPolicies(policies as any, rs)).mandatory.map((f) => `${f.policyName}: ${f.message}`);
function edited(rs: CapturedResource[], kind: string, fn: (o: Record<string, any>) => void): CapturedResource[] {
    return rs.map((r) => {
        if (!r.type.endsWith(`:${kind}`)) return r;
        const c = structuredClone(r);
        fn(c.inputs as any);
        fn(c.outputs as any);
        return c;
    });
}

let hn1: CapturedResource[];
let hcm1: CapturedResource[];
let sg1: CapturedResource[];
beforeAll(async () => {
    hn1 = (await runHubAndSpoke("spoke-hn1")).spoke.resources;
    hcm1 = (await runHubAndSpoke("spoke-hcm1")).spoke.resources;
    sg1 = (await runHubAndSpoke("spoke-sg1")).spoke.resources;
}, 180_000);

describe("the tenant edge: TLS by default", () => {
    it("a spoke file that says nothing about the certificate is refused (main rendered plain HTTP on :80)", () => {
        expect(
            issues("spoke-hn1", (d) => {
                delete d["platform:gateway"];
            }),
        ).toEqual([
            "platform:gateway.listener.tls: the tenant edge needs TLS: set tls.source to acme-dns01, private-ca or secret (or terminated-in-front naming the load balancer that terminates TLS)",
        ]);
        expect(
            issues("spoke-hn1", (d) => {
                d["platform:gateway"].listener = { tls: { source: "private-ca", caSecretName: "ca" } };
            }),
        ).toEqual([expect.stringMatching(/^platform:gateway\.listener\.hostname: tls\.source private-ca issues a certificate/)]);
        expect(
            issues("spoke-sg1", (d) => {
                delete d["platform:gateway"].listener.exposure;
            }),
        ).toEqual([
            expect.stringMatching(/^platform:gateway\.listener\.exposure: an EKS spoke exposes its proxy through a Network Load Balancer/),
        ]);
        expect(
            issues("spoke-sg1", (d) => {
                d["platform:gateway"].listener.exposure.sourceRanges = ["0.0.0.0/99"];
            }),
        ).toEqual([expect.stringMatching(/^platform:gateway\.listener\.exposure\.sourceRanges\[0\]: must be an IPv4 CIDR/)]);
        expect(
            issues("spoke-hn1", (d) => {
                d["platform:gateway"].listener.exposure = { scheme: "internal", sourceRanges: ["10.0.0.0/8"] };
            }),
        ).toEqual([expect.stringMatching(/^platform:gateway\.listener\.exposure: exposure is for EKS spokes/)]);
        // The way out, named: HTTP behind a load balancer that terminates TLS.
        expect(
            issues("spoke-hn1", (d) => {
                d["platform:gateway"].listener = { tls: { source: "terminated-in-front", loadBalancer: "f5-hn1-vip" } };
            }),
        ).toEqual([]);
    });

    it("private CA (hcm1): cert-manager pinned, a CA Issuer, a Certificate for the hostname, an HTTPS listener on its Secret", () => {
        const release = byType(hcm1, "kubernetes:helm.sh/v3:Release")
            .map(inputs)
            .find((r) => r.chart === "cert-manager")!;
        expect(release).toMatchObject({
            version: versions.certManager.version,
            namespace: CERT_MANAGER_NAMESPACE,
            repositoryOpts: { repo: versions.certManager.repo },
            values: { crds: { enabled: true, keep: true } },
        });
        expect(cr(hcm1, "Issuer")).toEqual([
            expect.objectContaining({ apiVersion: "cert-manager.io/v1", spec: { ca: { secretName: "site-ca" } } }),
        ]);
        const [cert] = cr(hcm1, "Certificate");
        expect(cert.spec).toMatchObject({
            secretName: EDGE_CERT_SECRET,
            // hcm1 is also behind the hub's global client hostname (platform:failover, lib/failover.ts), so its
            // certificate names both.
            dnsNames: ["llm.hcm1.example.com", "llm.example.com"],
            issuerRef: { kind: "Issuer", name: cr(hcm1, "Issuer")[0].metadata.name },
        });
        expect(cert.metadata.namespace).toBe(cr(hcm1, "Gateway")[0].metadata.namespace);
        const [gw] = cr(hcm1, "Gateway");
        expect(gw.spec.listeners).toEqual([
            expect.objectContaining({
                protocol: "HTTPS",
                port: 443,
                tls: { mode: "Terminate", certificateRefs: [{ kind: "Secret", name: EDGE_CERT_SECRET }] },
            }),
        ]);
        // Behind the global hostname, the listener takes the site's and the global name (no hostname filter).
        expect(gw.spec.listeners[0].hostname).toBeUndefined();
        // The Gateway waits for the Certificate.
        const gwRes = hcm1.find((r) => r.type.endsWith(":Gateway"))!;
        expect(gwRes.dependencies).toContain(hcm1.find((r) => r.type.endsWith(":Certificate"))!.urn);
    });

    it("a load balancer in front that terminates TLS (hn1): plain HTTP, and the Gateway names that load balancer", () => {
        const [gw] = cr(hn1, "Gateway");
        expect(gw.spec.listeners).toEqual([expect.objectContaining({ protocol: "HTTP", port: 80 })]);
        expect(gw.metadata.annotations).toEqual({ [TLS_TERMINATED_BY_ANNOTATION]: "hn1-edge-f5-vip-443" });
        expect(cr(hn1, "Certificate")).toEqual([]);
    });

    it("EKS (sg1): ACME DNS-01 on the Route 53 zone, and an NLB with an explicit scheme and the file's source ranges", () => {
        const [issuer] = cr(sg1, "Issuer");
        expect(issuer.spec.acme).toMatchObject({
            server: "https://acme-v02.api.letsencrypt.org/directory",
            email: "platform-oncall@example.com",
            solvers: [{ dns01: { route53: { region: "ap-southeast-1", hostedZoneID: "Z0123456789EXAMPLE" } } }],
        });
        // The solver has no credentials of its own: a namespaced Issuer uses the controller's Pod Identity role only
        // with --issuer-ambient-credentials (default false, cert-manager internal/apis/config/controller/v1alpha1/defaults.go).
        const certManager = (rs: CapturedResource[]) =>
            byType(rs, "kubernetes:helm.sh/v3:Release")
                .map(inputs)
                .find((r) => r.chart === "cert-manager")!;
        expect(certManager(sg1).values.extraArgs).toEqual(["--issuer-ambient-credentials"]);
        // A CA Issuer needs no ambient credentials: the flag stays off where nothing uses it.
        expect(certManager(hcm1).values.extraArgs).toBeUndefined();
        const [proxy] = cr(sg1, "EnvoyProxy");
        expect(proxy.spec.provider.kubernetes.envoyService).toEqual({
            type: "LoadBalancer",
            loadBalancerClass: "service.k8s.aws/nlb",
            loadBalancerSourceRanges: ["198.51.100.0/24", "203.0.113.0/24"],
            annotations: {
                "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
                "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
            },
        });
    });
});

describe("policy edge-tls-listeners", () => {
    it("the repo's spokes pass it, and the whole pack still passes them", async () => {
        expect(await mandatory(hn1)).toEqual([]);
        expect(await mandatory(hcm1)).toEqual([]);
        expect(await mandatory(sg1)).toEqual([]);
        expect(allPolicies.map((p) => p.name)).toContain("edge-tls-listeners");
        expect(TLS_TERMINATED_BY_ANNOTATION).toBe(POLICY_ANNOTATION);
    });

    it("refuses main's listener: HTTP on :80 behind Envoy Gateway's default LoadBalancer Service", async () => {
        const plain = edited(hn1, "Gateway", (o) => {
            delete o.metadata.annotations;
        });
        expect(await mandatory(plain)).toEqual([
            expect.stringMatching(
                /^edge-tls-listeners: Gateway\/llm-gateway\/[\w-]+ field spec\.listeners\[0\]: listener http is HTTP on port 80 and reachable from outside the cluster/,
            ),
        ]);
        // Named terminator in front: accepted. A blank name is no name.
        const named = edited(plain, "Gateway", (o) => {
            o.metadata.annotations = { [TLS_TERMINATED_BY_ANNOTATION]: "f5-hn1-vip" };
        });
        expect(await mandatory(named)).toEqual([]);
        expect(
            await mandatory(
                edited(plain, "Gateway", (o) => {
                    o.metadata.annotations = { [TLS_TERMINATED_BY_ANNOTATION]: " " };
                }),
            ),
        ).toHaveLength(1);
        // Not reachable from outside: the proxy Service is ClusterIP.
        expect(
            await mandatory(
                edited(plain, "EnvoyProxy", (o) => {
                    o.spec.provider.kubernetes.envoyService = { type: "ClusterIP" };
                }),
            ),
        ).toEqual([]);
        // A TCP listener is as clear as HTTP.
        expect(
            await mandatory(
                edited(hcm1, "Gateway", (o) => {
                    o.spec.listeners.push({ name: "raw", protocol: "TCP", port: 8080 });
                }),
            ),
        ).toHaveLength(1);
    });
});
