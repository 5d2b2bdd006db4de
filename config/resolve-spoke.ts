import { parseCidr, findOverlaps, subnet, type Cidr } from "./cidr";
import { type ConfigIssue, zodIssues } from "./errors";
import { type EksNodeGroups, type EksCluster, profileNameFor } from "./eks";
import { type NodeProfile, NodeProfileSchema, presetProfiles } from "./nodeProfile";
import type {
    EfaBackend,
    EksSpokeConfig,
    Frontend,
    InfinibandBackend,
    NodePool,
    NodePoolRaw,
    OnPremCluster,
    OnPremSpokeConfig,
    RailPool,
    SpokeConfigRaw,
} from "./spoke";

/** A schema-parsed on-prem spoke file before {@link resolveSpoke} resolves its node profiles and rail pools. */
export type OnPremRaw = SpokeConfigRaw & {
    cluster: OnPremCluster;
    backend: InfinibandBackend;
    nodePools: NodePoolRaw[];
    frontend: Frontend;
    nodeGroups?: undefined;
};
/** A schema-parsed EKS spoke file before {@link resolveEks} resolves its node groups' profiles. */
export type EksRaw = SpokeConfigRaw & { cluster: EksCluster; backend: EfaBackend; nodeGroups: EksNodeGroups; frontend?: undefined };

/** Validates the preset profile (or inline profile) `doc` selected at `key`; pushes issues and returns undefined on failure. */
function resolveProfile(doc: unknown, name: string | undefined, key: string, issues: ConfigIssue[]): NodeProfile | undefined {
    const parsed = NodeProfileSchema.safeParse(doc);
    if (!parsed.success) {
        issues.push(...zodIssues(parsed.error, name !== undefined ? `${key} (preset "${name}")` : key));
        return undefined;
    }
    return parsed.data;
}

/**
 * EKS: one pool per GPU node group with the preset profile of its instance type (`p5en.48xlarge` ->
 * `config/node-profiles/p5en-48xlarge.yaml`), checked to be an EFA profile of that exact type; AZs and the
 * VPC checked against the region and the service CIDR.
 * @param issues where every problem is pushed (`{ key, message }`); the caller (config/stack.ts `parseFlatStackConfig`)
 *   throws a ConfigError naming the stack file when any was pushed
 * @throws Error only from reading the preset profiles (config/nodeProfile.ts `presetProfiles`) or from `parseCidr` on a
 *   CIDR the schema let through; bad input is reported in `issues`
 */
export function resolveEks(raw: EksRaw, issues: ConfigIssue[]): EksSpokeConfig {
    const presets = presetProfiles();
    const groups = raw.nodeGroups;
    const vpc = raw.cluster.vpc;
    const vpcAzs = vpc.mode === "create" ? vpc.availabilityZones : vpc.privateSubnets.map((s) => s.availabilityZone);
    for (const a of vpcAzs) {
        if (!a.startsWith(raw.cluster.region))
            issues.push({ key: "platform:cluster.vpc", message: `availability zone ${a} is not in region ${raw.cluster.region}` });
    }
    const names = new Map<string, string>([[groups.cpu.name, "platform:nodeGroups.cpu.name"]]);
    const pools: NodePool[] = [];
    groups.gpu.forEach((g, i) => {
        const key = `platform:nodeGroups.gpu[${i}]`;
        if (names.has(g.name))
            issues.push({ key: `${key}.name`, message: `node group name "${g.name}" is already used by ${names.get(g.name)}` });
        else names.set(g.name, `${key}.name`);
        if (!vpcAzs.includes(g.availabilityZone))
            issues.push({
                key: `${key}.availabilityZone`,
                message: `${g.availabilityZone} is not one of the VPC's availability zones (${vpcAzs.join(", ")})`,
            });
        const presetName = profileNameFor(g.instanceType);
        const doc = presets.get(presetName);
        if (doc === undefined) {
            issues.push({
                key: `${key}.instanceType`,
                message: `no node profile "${presetName}" in config/node-profiles/ for ${g.instanceType}`,
            });
            return;
        }
        const profile = resolveProfile(doc, presetName, `${key}.instanceType`, issues);
        if (!profile) return;
        if (profile.efa?.instanceType !== g.instanceType) {
            issues.push({
                key: `${key}.instanceType`,
                message: `node profile "${presetName}" does not describe the EFA layout of ${g.instanceType}`,
            });
            return;
        }
        // The launch template's node bootstrap always sets LimitMEMLOCK=infinity on EKS GPU nodes (lib/efa.ts).
        pools.push({ name: g.name, profile, nodes: [], memlockUnlimited: true });
    });
    const vpcCidr = parseCidr(vpc.cidr);
    for (const [a, b] of findOverlaps([
        ["platform:cluster.vpc.cidr", vpcCidr],
        ["platform:cluster.serviceCidr", parseCidr(raw.cluster.serviceCidr)],
    ])) {
        issues.push({ key: b, message: `overlaps ${a}` });
    }
    if (vpc.mode === "existing") {
        vpc.privateSubnets.forEach((s, i) => {
            const c = parseCidr(s.cidr);
            if (
                c.prefix < vpcCidr.prefix ||
                findOverlaps([
                    ["vpc", vpcCidr],
                    ["subnet", c],
                ]).length === 0
            ) {
                issues.push({
                    key: `platform:cluster.vpc.privateSubnets[${i}].cidr`,
                    message: `${s.cidr} is not inside the VPC CIDR ${vpc.cidr}`,
                });
            }
        });
    } else if (vpcCidr.prefix > 20) {
        issues.push({
            key: "platform:cluster.vpc.cidr",
            message: `/${vpcCidr.prefix} is too small: pods take VPC addresses (VPC CNI); use /16 to /20`,
        });
    }
    return { ...raw, nodePools: pools, railPools: [] };
}

/**
 * On-prem: resolves a schema-valid on-prem spoke file into its config. Each node pool's profile (a preset name from
 * `config/node-profiles/`, or an inline profile) is validated and must be an InfiniBand rail profile (not an EFA one)
 * whose every rail runs at least `platform:backend.minLinkRateGbps` (Gb/s, gigabits per second) on link layer
 * InfiniBand and which declares frontend NICs; pool names and node names are unique across pools; the pod, service,
 * frontend and rail networks do not overlap; and one rail subnet of `/railPrefixLength` per rail (rail r = the r-th
 * subnet of `platform:backend.railSupernet`) holds every node's `perNodeBlockSize` addresses.
 * @param raw the schema-parsed file (CIDR strings already checked by config/spoke.ts)
 * @param issues where every problem is pushed as `{ key: "platform:...", message }`; the caller
 *   (config/stack.ts `parseFlatStackConfig`) throws a ConfigError naming the stack file when any was pushed
 * @returns the config with `nodePools` carrying resolved profiles (pools whose profile failed are left out) and
 *   `railPools` (`{ rail, subnet }` per rail; empty when the supernet cannot hold them); only meaningful when no issue
 *   was pushed
 * @throws Error only from reading the preset profiles (`presetProfiles`: an unreadable or unparsable file under
 *   config/node-profiles/) or from `parseCidr` on a CIDR the schema let through; bad input is reported in `issues`
 */
export function resolveSpoke(raw: OnPremRaw, issues: ConfigIssue[]): OnPremSpokeConfig {
    const presets = presetProfiles();
    const pools: NodePool[] = [];
    const nodeOwner = new Map<string, string>();
    raw.nodePools.forEach((p, i) => {
        const key = `platform:nodePools[${i}]`;
        if (raw.nodePools.findIndex((q) => q.name === p.name) !== i)
            issues.push({ key: `${key}.name`, message: `duplicate node pool name "${p.name}"` });
        p.nodes.forEach((n, j) => {
            if (nodeOwner.has(n))
                issues.push({ key: `${key}.nodes[${j}]`, message: `node "${n}" is already in pool "${nodeOwner.get(n)}"` });
            else nodeOwner.set(n, p.name);
        });
        let doc: unknown = p.profile;
        if (typeof p.profile === "string") {
            doc = presets.get(p.profile);
            if (doc === undefined) {
                issues.push({
                    key: `${key}.profile`,
                    message: `unknown node profile "${p.profile}" (known: ${[...presets.entries()]
                        .filter(([, d]) => !(d as { efa?: unknown })?.efa)
                        .map(([n]) => n)
                        .join(", ")})`,
                });
                return;
            }
        }
        const profile = resolveProfile(doc, typeof p.profile === "string" ? p.profile : undefined, `${key}.profile`, issues);
        if (!profile) return;
        if (profile.efa) {
            issues.push({
                key: `${key}.profile`,
                message: `node profile "${profile.name}" describes an EFA instance type (${profile.efa.instanceType}) for EKS spokes; an on-prem pool needs an InfiniBand rail profile`,
            });
            return;
        }
        const parsed = { data: profile };
        parsed.data.rails.forEach((r, k) => {
            if (r.linkRateGbps < raw.backend.minLinkRateGbps) {
                issues.push({
                    key: `${key}.profile.rails[${k}].linkRateGbps`,
                    message: `${r.linkRateGbps} Gb/s is below platform:backend.minLinkRateGbps (${raw.backend.minLinkRateGbps} Gb/s)`,
                });
            }
            if (r.linkLayer !== "InfiniBand")
                issues.push({
                    key: `${key}.profile.rails[${k}].linkLayer`,
                    message: `rail ${r.rail} is ${r.linkLayer} but platform:backend.fabric is infiniband`,
                });
        });
        if (parsed.data.frontend.length === 0)
            issues.push({
                key: `${key}.profile.frontend`,
                message: "the profile declares no frontend NICs; the north-south network needs them",
            });
        pools.push({ ...p, profile: parsed.data });
    });

    // Rail IP pools: one subnet per rail, carved from the supernet.
    const railCount = Math.max(0, ...pools.map((p) => p.profile.rails.length));
    const railPools: RailPool[] = [];
    const nets: Array<[string, Cidr]> = [
        ["platform:cluster.podCidr", parseCidr(raw.cluster.podCidr)],
        ["platform:cluster.serviceCidr", parseCidr(raw.cluster.serviceCidr)],
        ["platform:frontend.subnet", parseCidr(raw.frontend.subnet)],
        ["platform:backend.railSupernet", parseCidr(raw.backend.railSupernet)],
    ];
    for (const [a, b] of findOverlaps(nets)) issues.push({ key: b, message: `overlaps ${a}` });
    const supernetPrefix = parseCidr(raw.backend.railSupernet).prefix;
    if (raw.backend.railPrefixLength < supernetPrefix) {
        issues.push({
            key: "platform:backend.railPrefixLength",
            message: `/${raw.backend.railPrefixLength} rail subnets are larger than the /${supernetPrefix} platform:backend.railSupernet they are carved from; use a longer prefix`,
        });
        return { ...raw, nodePools: pools, railPools };
    }
    if (2 ** (raw.backend.railPrefixLength - supernetPrefix) < railCount) {
        const need = raw.backend.railPrefixLength - Math.ceil(Math.log2(railCount));
        issues.push({
            key: "platform:backend.railSupernet",
            message: `${raw.backend.railSupernet} holds ${2 ** (raw.backend.railPrefixLength - supernetPrefix)} /${raw.backend.railPrefixLength} rail subnets but the node profiles have ${railCount} rails: use a /${need} or larger supernet (or a longer platform:backend.railPrefixLength)`,
        });
        return { ...raw, nodePools: pools, railPools };
    }
    try {
        const supernet = parseCidr(raw.backend.railSupernet);
        for (let r = 0; r < railCount; r++) {
            const s = subnet(supernet, raw.backend.railPrefixLength, r);
            railPools.push({ rail: r, subnet: s.text });
        }
        const hostsPerRail = 2 ** (32 - raw.backend.railPrefixLength) - 2;
        const nodes = pools.reduce((n, p) => n + p.nodes.length, 0);
        if (nodes * raw.backend.perNodeBlockSize > hostsPerRail) {
            issues.push({
                key: "platform:backend.perNodeBlockSize",
                message: `${nodes} nodes x ${raw.backend.perNodeBlockSize} addresses do not fit a /${raw.backend.railPrefixLength} rail subnet`,
            });
        }
    } catch (e) {
        issues.push({ key: "platform:backend.railPrefixLength", message: (e as Error).message });
    }
    return { ...raw, nodePools: pools, railPools };
}
