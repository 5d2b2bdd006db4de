import type { ConfigIssue } from "../config/errors";
import { type FailoverConfig, type PeerCa, reachableSpokes } from "../config/failover";
import type { SpokeConfig } from "../config/spoke";

/** A spoke's edge as peers and Route 53 reach it (from its stack file's `platform:gateway.listener`). */
export interface SpokeEdge {
    spoke: string;
    provider: "onprem" | "eks";
    /** Listener hostname: SNI, the name its certificate is verified against, the health check's Host. */
    hostname: string;
    /** Public IPv4 the health check probes (on-prem); undefined on EKS (the check resolves `hostname`). */
    address?: string;
    /** AWS region for latency records. */
    latencyRegion?: string;
    ca: PeerCa;
}

/**
 * Pure: the edges of every spoke the hub's failover needs to reach ({@link reachableSpokes}), from their spoke files,
 * and an issue for each missing piece, on the hub's `platform:spokes[k]` entry naming the spoke file and its key:
 * a listener hostname (not a wildcard); `reachable.caCertificate` unless the certificate is from a public ACME CA;
 * `reachable.address` on-prem (Route 53 probes it); `reachable.latencyRegion` on-prem behind an active-active name.
 *
 * @param files spoke name -> its parsed stack file and display path (spokes whose file failed are left out)
 */
export function spokeEdges(
    hub: {
        spokes: Array<{ name: string }>;
        endpoints: Array<{ name: string; model: string; spoke: string; fallback?: string[] }>;
        failover?: FailoverConfig;
    },
    files: ReadonlyMap<string, { file: string; cfg: SpokeConfig }>,
): { edges: Map<string, SpokeEdge>; issues: ConfigIssue[] } {
    const edges = new Map<string, SpokeEdge>();
    const issues: ConfigIssue[] = [];
    for (const s of [...reachableSpokes(hub)].sort()) {
        const k = hub.spokes.findIndex((x) => x.name === s);
        const f = files.get(s);
        if (k < 0 || !f) continue; // unknown spoke or a spoke file with its own error: reported elsewhere
        const l = f.cfg.gateway.listener;
        const r = l.reachable ?? {};
        const key = `platform:spokes[${k}]`;
        const why = `spoke "${s}" is ${hub.failover?.spokes.includes(s) ? `behind ${hub.failover.hostname}` : "a fallback of another spoke"}`;
        const need = (at: string, message: string) => issues.push({ key, message: `${f.file} ${at}: ${message} (${why})` });
        const provider = f.cfg.cluster.provider;
        if (!l.hostname || l.hostname.startsWith("*."))
            need(
                "platform:gateway.listener.hostname",
                "set the listener's own DNS name (not a wildcard): peers verify its certificate against it",
            );
        let ca: PeerCa | undefined;
        if (r.caCertificate) ca = { kind: "pem", pem: r.caCertificate.trim() };
        else if (l.tls?.source === "acme-dns01") ca = { kind: "system" };
        else
            need(
                "platform:gateway.listener.reachable.caCertificate",
                `missing: tls.source ${l.tls?.source ?? "secret"} is not a publicly trusted CA, so peers need the PEM of the CA that signed the edge certificate`,
            );
        if (provider === "onprem" && !r.address)
            need(
                "platform:gateway.listener.reachable.address",
                "missing: the public IPv4 the site's edge answers HTTPS on (Route 53 health checks probe it)",
            );
        if (hub.failover?.spokes.includes(s) && l.tls?.source === "acme-dns01")
            need(
                "platform:gateway.listener.tls.source",
                `acme-dns01 cannot add ${hub.failover.hostname} to the certificate (cert-manager's Route 53 role covers only the listener's own name); use private-ca, secret or terminated-in-front with a certificate naming both`,
            );
        const latencyRegion = r.latencyRegion ?? (provider === "eks" ? f.cfg.spoke.region : undefined);
        if (hub.failover?.mode === "active-active" && hub.failover.spokes.includes(s) && !latencyRegion)
            need(
                "platform:gateway.listener.reachable.latencyRegion",
                "missing: the AWS region nearest the site (Route 53 latency records)",
            );
        if (l.hostname && ca) edges.set(s, { spoke: s, provider, hostname: l.hostname, address: r.address, latencyRegion, ca });
    }
    return { edges, issues };
}
