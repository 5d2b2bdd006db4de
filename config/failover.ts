import { z } from "zod";
import { DnsLabel } from "./endpoint";

/**
 * Failover of an endpoint across spokes: the hub file's shape, the contract block a spoke receives, the spoke file's
 * reachable edge, and the cross-checks. Rendering: lib/failover.ts (spoke routes), components/hub/GlobalDns.ts (DNS).
 *
 * Hub file:
 * - `platform:endpoints[i].fallback: [<spoke>, ...]`: the spokes this placement's route falls back to, in priority
 *   order, when its own Dynamo frontend fails (each must place the same model: an endpoint of the same `model` on that
 *   spoke). Same-model placements on two spokes are separate entries (engine and topology are per site).
 * - `platform:failover`: the one hostname clients use and the spokes behind it (Route 53 health checks against each
 *   spoke's gateway; `active-active` = latency records, `primary-standby` = failover records).
 *
 * Spoke file: `platform:gateway.listener.reachable` (address, latency region, CA) so peers and Route 53 can reach and
 * verify the spoke's edge.
 */

const DnsName = z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/, "must be a lower-case fully qualified DNS name");
const AwsRegion = z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, "must be an AWS region like ap-southeast-1");
const Ipv4 = z
    .string()
    .regex(/^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/, "must be an IPv4 address like 203.0.113.10");
const PemCertificate = z
    .string()
    .regex(
        /^\s*-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*$/,
        "must be a PEM CA certificate (-----BEGIN CERTIFICATE----- ...), never a private key",
    );

/** `platform:endpoints[i].fallback`: spokes this placement falls back to, highest priority first. */
export const EndpointFallbackSchema = z.array(DnsLabel).min(1).max(4);

/**
 * Route 53 health check of each spoke's gateway (HTTPS to the spoke's edge, the path Envoy answers itself before
 * ext_authz: lib/failover.ts {@link GATEWAY_HEALTH_PATH}). `intervalSeconds` is Route 53's RequestInterval (10 or 30),
 * `failureThreshold` its FailureThreshold (1-10).
 */
export const DnsHealthCheckSchema = z
    .object({
        intervalSeconds: z.union([z.literal(10), z.literal(30)]).default(30),
        failureThreshold: z.number().int().min(1).max(10).default(3),
    })
    .strict();

/** `platform:failover` of the hub: one client hostname over several spokes' gateways. */
export const FailoverConfigSchema = z
    .object({
        /** The one name clients use (every spoke behind it accepts it and its certificate names it). */
        hostname: DnsName,
        /** Route 53 public hosted zone holding `hostname` (in the hub's account). */
        hostedZoneId: z.string().regex(/^Z[A-Z0-9]{1,31}$/, "must be a Route 53 hosted zone id like Z0123456789ABCDEFGHIJ"),
        /** `active-active`: latency records, every healthy spoke answers; `primary-standby`: failover records, spokes[0] primary. */
        mode: z.enum(["active-active", "primary-standby"]),
        /** Spokes behind the name (each must serve every model the others serve). */
        spokes: z.array(DnsLabel).min(2),
        healthCheck: DnsHealthCheckSchema.prefault({}),
        /** TTL of the records, seconds (short: a client re-resolves soon after a spoke fails). */
        ttlSeconds: z.number().int().min(5).max(300).default(30),
    })
    .strict();
/** `platform:failover` of the hub as parsed ({@link FailoverConfigSchema}). */
export type FailoverConfig = z.infer<typeof FailoverConfigSchema>;

/**
 * `platform:gateway.listener.reachable` of a spoke file: how peers and Route 53 reach and verify the spoke's edge.
 * Needed when the hub names the spoke in `platform:failover.spokes` or as an endpoint's fallback.
 */
export const GatewayReachableSchema = z
    .object({
        /**
         * Public IPv4 the site's edge answers HTTPS on (Route 53 health checks probe it with the listener hostname as
         * SNI/Host). Required on-prem; on EKS the check resolves the listener hostname (the NLB).
         */
        address: Ipv4.optional(),
        /** AWS region nearest the site (Route 53 latency records, `active-active`); an EKS spoke defaults to its region. */
        latencyRegion: AwsRegion.optional(),
        /**
         * PEM of the CA that signed the edge certificate (peers verify with it). Omitted only when the certificate is
         * from a publicly trusted CA (tls.source acme-dns01), which peers verify with the system CAs.
         */
        caCertificate: PemCertificate.optional(),
    })
    .strict();
/** `platform:gateway.listener.reachable` as parsed ({@link GatewayReachableSchema}). */
export type GatewayReachable = z.infer<typeof GatewayReachableSchema>;

/** How a spoke verifies a peer's edge certificate. */
export const PeerCaSchema = z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("pem"), pem: PemCertificate }).strict(),
    z.object({ kind: z.literal("system") }).strict(),
]);
/** How a spoke verifies a peer's edge certificate, as parsed ({@link PeerCaSchema}). */
export type PeerCa = z.infer<typeof PeerCaSchema>;

/** One peer in a spoke's contract: a gateway this spoke's routes may fall back to, and the models it serves. */
export const PeerContractSchema = z
    .object({
        spoke: DnsLabel,
        /** The peer's listener hostname: SNI and the name its certificate is verified against. */
        hostname: DnsName,
        /** HTTPS port of the peer's edge. */
        port: z.literal(443),
        ca: PeerCaSchema,
        /** Models this spoke's routes fall back to the peer for (sorted). */
        models: z.array(z.string().min(1)).min(1),
    })
    .strict();
/** One peer in a spoke's contract as parsed ({@link PeerContractSchema}). */
export type PeerContract = z.infer<typeof PeerContractSchema>;

/** The contract's `failover` block (optional: absent when the spoke has no peers and is behind no global name). */
export const FailoverContractSchema = z
    .object({
        /** Global hostname the spoke's gateway must also accept (undefined when not behind one). */
        globalHostname: DnsName.optional(),
        /**
         * Route 53 hosted zone of `globalHostname` (`platform:failover.hostedZoneId`, in the hub's account): where an ACME
         * DNS-01 solver answers the global name's challenge (lib/edge.ts).
         */
        globalHostedZoneId: z.string().optional(),
        peers: z.array(PeerContractSchema),
    })
    .strict();
/** The contract's `failover` block as parsed ({@link FailoverContractSchema}). */
export type FailoverContract = z.infer<typeof FailoverContractSchema>;

/** A hub-file issue: path under `platform:`. */
export interface FailoverIssue {
    path: (string | number)[];
    message: string;
}

/** The endpoint fields the cross-checks read. */
interface Placed {
    name: string;
    model: string;
    spoke: string;
    fallback?: string[];
}

/**
 * Pure: hub-file checks of fallbacks and the global name (run in the hub schema's superRefine).
 * - `endpoints[i].fallback[j]`: a known spoke, not the endpoint's own, listed once, and placing the same model;
 * - `endpoints[i].name` must not start with `peer-` (the gateway names peer backends `peer-<spoke>`);
 * - `failover.spokes[j]`: known, unique; `primary-standby` has exactly two (Route 53 failover records: one PRIMARY,
 *   one SECONDARY); every spoke behind the name places every model any of them places (DNS may answer any of them).
 */
export function failoverHubIssues(h: { spokes: Array<{ name: string }>; endpoints: Placed[]; failover?: FailoverConfig }): FailoverIssue[] {
    const out: FailoverIssue[] = [];
    const known = new Set(h.spokes.map((s) => s.name));
    const placements = (model: string) => h.endpoints.map((e, i) => ({ e, i })).filter((x) => x.e.model === model);
    h.endpoints.forEach((e, i) => {
        if (e.name.startsWith("peer-"))
            out.push({
                path: ["endpoints", i, "name"],
                message: `endpoint names starting with "peer-" are reserved for the gateway's peer backends (lib/failover.ts); rename it`,
            });
        const seen = new Set<string>();
        (e.fallback ?? []).forEach((s, j) => {
            const path = ["endpoints", i, "fallback", j];
            const where = placements(e.model)
                .map((x) => `${x.e.spoke} (platform:endpoints[${x.i}] ${x.e.name})`)
                .join(", ");
            if (!known.has(s)) out.push({ path, message: `unknown spoke "${s}" (known: ${[...known].join(", ")})` });
            else if (s === e.spoke) out.push({ path, message: `"${s}" is this endpoint's own spoke; a fallback is another spoke` });
            else if (seen.has(s)) out.push({ path, message: `spoke "${s}" is listed twice` });
            else if (!h.endpoints.some((x) => x.spoke === s && x.model === e.model))
                out.push({
                    path,
                    message: `spoke "${s}" does not serve ${e.model} (it is placed on: ${where}); a fallback must be a spoke the hub places the same model on: add an endpoint of ${e.model} on ${s}, or name one of those spokes`,
                });
            seen.add(s);
        });
    });
    const f = h.failover;
    if (!f) return out;
    const seen = new Set<string>();
    f.spokes.forEach((s, j) => {
        if (!known.has(s)) out.push({ path: ["failover", "spokes", j], message: `unknown spoke "${s}" (known: ${[...known].join(", ")})` });
        else if (seen.has(s)) out.push({ path: ["failover", "spokes", j], message: `spoke "${s}" is listed twice` });
        seen.add(s);
    });
    if (f.mode === "primary-standby" && f.spokes.length !== 2)
        out.push({
            path: ["failover", "spokes"],
            message: `primary-standby names exactly two spokes (Route 53 failover records: one PRIMARY, one SECONDARY), got ${f.spokes.length}; use active-active for more`,
        });
    const models = [...new Set(h.endpoints.filter((e) => f.spokes.includes(e.spoke)).map((e) => e.model))].sort();
    f.spokes.forEach((s, j) => {
        if (!known.has(s)) return;
        const missing = models.filter((m) => !h.endpoints.some((e) => e.spoke === s && e.model === m));
        if (missing.length)
            out.push({
                path: ["failover", "spokes", j],
                message: `spoke "${s}" serves none of ${missing.join(", ")}, which other spokes behind ${f.hostname} serve; DNS may send any client to any of them: place those models on ${s} too, or leave it out of failover.spokes`,
            });
    });
    return out;
}

/** Every spoke the failover needs to reach: behind the global name or named as a fallback. */
export function reachableSpokes(h: { endpoints: Placed[]; failover?: FailoverConfig }): Set<string> {
    return new Set([...(h.failover?.spokes ?? []), ...h.endpoints.flatMap((e) => e.fallback ?? [])]);
}

/**
 * Pure: the `failover` contract block of each spoke: its peers (each fallback spoke with the models it backs up, in
 * first-named order) and the global hostname when the spoke is behind it. Spokes with neither get no block.
 * @param edges spoke -> its reachable edge (hostname and CA), from its stack file
 * @throws Error when a peer has no edge (the hub's spoke-file check reports it first, naming the file and key)
 */
export function buildFailoverContracts(
    h: { endpoints: Placed[]; failover?: FailoverConfig },
    edges: ReadonlyMap<string, { hostname: string; ca: PeerCa }>,
): Record<string, FailoverContract> {
    const out: Record<string, FailoverContract> = {};
    const spokes = new Set([...h.endpoints.map((e) => e.spoke), ...(h.failover?.spokes ?? [])]);
    for (const s of [...spokes].sort()) {
        const byPeer = new Map<string, Set<string>>();
        for (const e of h.endpoints.filter((x) => x.spoke === s))
            for (const p of e.fallback ?? []) byPeer.set(p, new Set([...(byPeer.get(p) ?? []), e.model]));
        const peers: PeerContract[] = [...byPeer].map(([p, models]) => {
            const edge = edges.get(p);
            if (!edge) throw new Error(`buildFailoverContracts: no reachable edge for peer spoke "${p}"`);
            return { spoke: p, hostname: edge.hostname, port: 443, ca: edge.ca, models: [...models].sort() };
        });
        const behind = h.failover?.spokes.includes(s);
        if (peers.length || behind)
            out[s] = {
                ...(behind ? { globalHostname: h.failover!.hostname, globalHostedZoneId: h.failover!.hostedZoneId } : {}),
                peers,
            };
    }
    return out;
}
