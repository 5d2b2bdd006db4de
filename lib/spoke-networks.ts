/**
 * The routable networks of a spoke and the cross-spoke collision check (pure; no I/O).
 *
 * What must be unique across spokes: the spoke name, and every network that is addressed outside the
 * cluster: an on-prem spoke's frontend subnet (node addresses on the north-south Ethernet) and its rail IP
 * pools (one per rail, carved from `railSupernet`); an EKS spoke's VPC CIDR (its subnets lie inside it).
 * Pod and service CIDRs of on-prem clusters are cluster-local and may repeat (both on-prem stacks use
 * 10.244.0.0/16); an EKS spoke's pods take VPC addresses, so they are covered by the VPC CIDR.
 */
import type { SpokeConfig } from "../config/stack";
import { findOverlaps, parseCidr } from "../config/cidr";

/** One routable network of a spoke: the stack key it comes from and its CIDR. */
export interface SpokeNetwork {
    key: string;
    cidr: string;
}

/** A spoke's identity and networks, as the hub records them (hub output `spokeNetworks`). */
export interface SpokeNetworks {
    name: string;
    stack: string;
    networks: SpokeNetwork[];
}

/** The routable networks of a validated spoke config. */
export function networksOf(cfg: SpokeConfig): SpokeNetwork[] {
    if (cfg.cluster.provider === "eks") return [{ key: "platform:cluster.vpc.cidr", cidr: cfg.cluster.vpc.cidr }];
    const out: SpokeNetwork[] = [];
    if (cfg.frontend) out.push({ key: "platform:frontend.subnet", cidr: cfg.frontend.subnet });
    for (const p of cfg.railPools) out.push({ key: `platform:backend.railSupernet (rail ${p.rail} pool)`, cidr: p.subnet });
    return out;
}

/**
 * Every collision among `spokes`: two entries with one spoke name, and every pair of overlapping networks
 * that belong to different spokes. Messages name both stacks and keys, e.g.
 * `spoke-dn1 platform:frontend.subnet 10.10.0.0/24 overlaps spoke-hn1 platform:frontend.subnet 10.10.0.0/24`.
 * Deterministic order (input order).
 */
export function findSpokeCollisions(spokes: SpokeNetworks[]): Array<{ stack: string; message: string }> {
    const out: Array<{ stack: string; message: string }> = [];
    const byName = new Map<string, string>();
    for (const s of spokes) {
        const prev = byName.get(s.name);
        if (prev !== undefined && prev !== s.stack)
            out.push({ stack: s.stack, message: `spoke name "${s.name}" is already used by stack ${prev}` });
        else byName.set(s.name, s.stack);
    }
    const flat = spokes.flatMap((s) => s.networks.map((n) => ({ s, n })));
    const pairs = findOverlaps(flat.map((x, i): [string, ReturnType<typeof parseCidr>] => [String(i), parseCidr(x.n.cidr)]));
    for (const [i, j] of pairs) {
        const a = flat[Number(i)];
        const b = flat[Number(j)];
        if (a.s.stack === b.s.stack) continue; // overlaps inside one spoke are the spoke's own validation
        out.push({ stack: b.s.stack, message: `${b.s.stack} ${b.n.key} ${b.n.cidr} overlaps ${a.s.stack} ${a.n.key} ${a.n.cidr}` });
    }
    return out;
}

/**
 * Checks one spoke against what the hub recorded for the *other* spokes (spoke-side guard when the hub was
 * last applied before this spoke file changed). Returns problem messages; empty when clear.
 */
export function collisionsWithRecorded(mine: SpokeNetworks, recorded: SpokeNetworks[]): string[] {
    const others = recorded.filter((r) => r.stack !== mine.stack);
    return findSpokeCollisions([...others, mine])
        .filter((c) => c.stack === mine.stack)
        .map((c) => c.message);
}
