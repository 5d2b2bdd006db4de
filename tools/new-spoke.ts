/**
 * `npm run new-spoke -- --from spoke-hn1 --name spoke-dn1 --region vn-danang-1 [options]`
 *
 * Adds a region by copying a spoke's stack file (README "Add a region"). Only the keys that must differ are
 * rewritten, in place, keeping the file's comments and layout (yaml Document API):
 * - both: `platform:spoke.name` (from the stack name, `spoke-dn1` -> `dn1`) and `platform:spoke.region`;
 * - on-prem: `platform:cluster.kubeconfigContext`, `platform:nodePools[].nodes`, `platform:frontend.subnet`,
 *   `platform:backend.railSupernet`;
 * - EKS: `aws:region`, `platform:cluster.region`, `platform:cluster.vpc.cidr`, `platform:cluster.vpc.availabilityZones`,
 *   `platform:nodeGroups.gpu[].availabilityZone` and, for reserved capacity, `...capacity.reservationId`.
 * - the tenant edge: `platform:gateway.listener.hostname` becomes `llm.<spoke>.example.com` (or `--hostname`);
 *   `platform:gateway.listener.reachable` (the source's public address and CA) is dropped (set it before the hub
 *   fails over to the new spoke); a `terminated-in-front` `loadBalancer` is the source site's device, so it is
 *   refused unless `--load-balancer` names this site's.
 * - EKS: `--region` must be a region the pinned AWS SDK lists in partition `aws` (lib/aws-partition.ts), checked before
 *   anything is written; `--unlisted-region` acknowledges a real region newer than the SDK in the copy's
 *   `platform:unlistedAwsRegions` (config/aws-region.ts), which keeps only the source's entries it still names.
 * Routable networks are picked to collide with no other spoke under stacks/ (lib/spoke-networks.ts), or taken
 * from flags. Prints the line to add to the hub's `platform:spokes` (or adds it with `--add-to-hub`), and a warning
 * naming every account-specific ARN the copy keeps verbatim (EKS `platform:cluster.access.deployRoleArn`, `previewRoleArn`).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { isEksSpoke, namespaceConfig, parseStackConfig, type SpokeConfig } from "../config/stack";
import { type Cidr, findOverlaps, intToIp, parseCidr, size } from "../config/cidr";
import { networksOf } from "../lib/spoke-networks";
import { vpcSubnetPlan } from "../lib/eks";
import { spokeGpuCapacity } from "../programs/spoke-registry";
import { exitOnHelp } from "./cli";
import { ConfigError } from "../config/errors";
import { readStackFile, STACKS_DIR, stackNameOf } from "../lib/stackfiles";
import { eksSpokeRegionIssue, isListedAwsRegion, stackAwsRegionIssues, UNLISTED_AWS_REGIONS_KEY } from "../lib/aws-partition";

export interface NewSpokeOptions {
    /** Source stack name (`spoke-hn1`). */
    from: string;
    /** New stack name (`spoke-dn1`); the spoke name is this without the `spoke-` prefix unless `spokeName` is set. */
    name: string;
    region: string;
    spokeName?: string;
    /** On-prem: kubeconfig context (default `<spoke>-admin`, or the source's with its spoke name replaced). */
    context?: string;
    /** On-prem: hostnames per pool, in pool order (default: the source's with the spoke-name prefix replaced). */
    nodes?: string[][];
    frontendSubnet?: string;
    railSupernet?: string;
    vpcCidr?: string;
    /** EKS: AZ letters or names (default: the source's letters in the new region). */
    availabilityZones?: string[];
    /** EKS: reservation id for GPU groups on an ODCR or Capacity Block (reservations are per AZ). */
    capacityReservation?: string;
    /** Tenant hostname of the new spoke's Gateway listener (default `llm.<spoke>.example.com`). */
    hostname?: string;
    /** The device that terminates TLS in front of the new spoke (required when the source's edge is `terminated-in-front`). */
    loadBalancer?: string;
    /**
     * EKS: `region` is a real AWS region the pinned AWS SDK does not list yet; the copy acknowledges it in
     * `platform:unlistedAwsRegions` (config/aws-region.ts). Without it such a region is refused as a likely typo.
     */
    unlistedRegion?: boolean;
    stacksDir?: string;
}

export interface NewSpokeResult {
    file: string;
    text: string;
    /** Config key -> [old, new] for every rewritten value. */
    changes: Record<string, [unknown, unknown]>;
    /** Entry for the hub's `platform:spokes`. */
    hubEntry: { name: string; stack: string; region: string; provider: "onprem" | "eks"; gpus: number };
    hubStack: string;
    /** What the operator still has to do by hand (printed by the CLI). */
    notes: string[];
}

function parseSpoke(file: string, display: string): SpokeConfig {
    const s = readStackFile(file, display);
    const c = parseStackConfig(namespaceConfig(s.config), display);
    if (c.role !== "spoke") throw new Error(`${display} is not a spoke stack (platform:role: ${c.role})`);
    return c.spoke;
}

/** CIDRs already routed by spokes under `dir` (every network of every valid spoke file, whole rail supernets). */
export function usedNetworks(dir: string, except?: string): Array<[string, Cidr]> {
    const out: Array<[string, Cidr]> = [];
    for (const f of fs
        .readdirSync(dir)
        .filter((x) => /^Pulumi\..+\.ya?ml$/.test(x))
        .sort()) {
        const stack = stackNameOf(f);
        if (stack === except) continue;
        let cfg: SpokeConfig;
        try {
            cfg = parseSpoke(path.join(dir, f), f);
        } catch {
            continue;
        }
        for (const n of networksOf(cfg)) out.push([`${stack} ${n.key}`, parseCidr(n.cidr)]);
        if (!isEksSpoke(cfg)) out.push([`${stack} platform:backend.railSupernet`, parseCidr(cfg.backend.railSupernet)]);
    }
    return out;
}

/**
 * The first block of `like`'s size, at or after `like` and within 10.0.0.0/8 (wrapping), that overlaps none of
 * `used`. Deterministic, so the same repo gives the same answer.
 *
 * @throws Error when the private block is full
 */
export function pickFreeBlock(like: string, used: Array<[string, Cidr]>): string {
    const base = parseCidr(like);
    const space = parseCidr("10.0.0.0/8");
    const step = size(base);
    const count = size(space) / step;
    const start = Math.floor((base.network - space.network) / step);
    for (let k = 0; k < count; k++) {
        const network = space.network + ((start + k) % count) * step;
        const cand: Cidr = { network, prefix: base.prefix, text: `${intToIp(network)}/${base.prefix}` };
        if (findOverlaps([["cand", cand], ...used]).every(([a]) => a !== "cand")) return cand.text;
    }
    throw new Error(`no free /${base.prefix} left in 10.0.0.0/8`);
}

const scalarAt = (doc: YAML.Document, p: (string | number)[]): YAML.Scalar => {
    const n = doc.getIn(p, true);
    if (!YAML.isScalar(n)) throw new Error(`expected a value at ${p.join(".")}`);
    return n;
};

/** A scalar as YAML source text in the style the original used. */
function scalarText(value: string, like: YAML.Scalar): string {
    if (like.type === "QUOTE_DOUBLE") return JSON.stringify(value);
    if (like.type === "QUOTE_SINGLE") return `'${value.replace(/'/g, "''")}'`;
    return /^[A-Za-z0-9][A-Za-z0-9._/:-]*$/.test(value) ? value : JSON.stringify(value);
}

/** Replaces source ranges (byte-exact elsewhere: comments, alignment and flow spacing stay as they were). */
function applyEdits(text: string, edits: Array<{ start: number; end: number; text: string }>): string {
    let out = text;
    for (const e of [...edits].sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end);
    return out;
}

/**
 * Builds the new stack file text from the source (pure apart from reading `stacksDir`).
 * @throws Error when a required flag is missing (hostnames that do not start with the source spoke's name,
 *   reserved capacity without `capacityReservation`, a `terminated-in-front` edge without `loadBalancer`, an
 *   existing VPC) or a given network collides
 */
export function newSpokeFile(o: NewSpokeOptions): NewSpokeResult {
    const dir = o.stacksDir ?? STACKS_DIR;
    const srcFile = path.join(dir, `Pulumi.${o.from}.yaml`);
    if (!fs.existsSync(srcFile)) throw new Error(`no stack file ${srcFile} (--from names a stack under stacks/)`);
    const file = path.join(dir, `Pulumi.${o.name}.yaml`);
    if (fs.existsSync(file)) throw new Error(`${file} already exists`);
    stackNameOf(file);
    const src = parseSpoke(srcFile, path.basename(srcFile));
    const spokeName = o.spokeName ?? o.name.replace(/^spoke-/, "");
    if (!/^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$/.test(spokeName))
        throw new Error(`spoke name "${spokeName}" must be a lower-case DNS label (use --spoke-name)`);
    const oldName = src.spoke.name;

    const text = fs.readFileSync(srcFile, "utf8");
    const doc = YAML.parseDocument(text);
    const changes: NewSpokeResult["changes"] = {};
    const edits: Array<{ start: number; end: number; text: string }> = [];
    const keyOf = (p: (string | number)[]) =>
        `${p[1]}${p
            .slice(2)
            .map((x) => (typeof x === "number" ? `[${x}]` : `.${x}`))
            .join("")}`;
    const set = (p: (string | number)[], value: string) => {
        const n = scalarAt(doc, p);
        changes[keyOf(p)] = [n.value, value];
        const [start, end] = n.range!;
        const t = scalarText(value, n);
        // Keep an aligned trailing comment in its column: take or give back padding spaces.
        const pad = /^( +)#/.exec(text.slice(end))?.[1].length ?? 0;
        const delta = t.length - (end - start);
        if (pad > 1 && delta !== 0) {
            const newPad = Math.max(1, pad - delta);
            edits.push({ start, end: end + pad, text: t + " ".repeat(newPad) });
            return;
        }
        edits.push({ start, end, text: t });
    };
    /** Rewrites a list value: item by item when the length is unchanged, else the whole list in flow style. */
    const setList = (p: (string | number)[], values: string[]) => {
        const seq = doc.getIn(p, true);
        if (!YAML.isSeq(seq)) throw new Error(`${keyOf(p)} is not a list`);
        changes[keyOf(p)] = [seq.toJSON(), values];
        if (seq.items.length === values.length && seq.items.every((x) => YAML.isScalar(x))) {
            seq.items.forEach((x, i) => {
                const n = x as YAML.Scalar;
                edits.push({ start: n.range![0], end: n.range![1], text: scalarText(values[i], n) });
            });
        } else {
            edits.push({
                start: seq.range![0],
                end: seq.range![1],
                text: `[${values.map((v) => scalarText(v, new YAML.Scalar(v))).join(", ")}]`,
            });
        }
    };
    const C = "config";
    if (o.unlistedRegion && !isEksSpoke(src))
        throw new Error(`--unlisted-region is for an EKS copy's AWS region; ${o.from} is on-prem (its --region is a site name)`);
    set([C, "platform:spoke", "name"], spokeName);
    set([C, "platform:spoke", "region"], o.region);

    const used = usedNetworks(dir);
    const claim = (key: string, given: string | undefined, like: string) => {
        const cidr = given ?? pickFreeBlock(like, used);
        const c = parseCidr(cidr);
        const clash = findOverlaps([[key, c], ...used]).filter(([a, b]) => a === key || b === key);
        if (clash.length) throw new Error(`${key} ${cidr} overlaps ${clash.map(([a, b]) => (a === key ? b : a)).join(", ")}`);
        used.push([`new ${key}`, c]);
        return cidr;
    };

    if (!isEksSpoke(src)) {
        // Cluster-local ranges of the copy (same as the source) must not be picked for routable networks.
        used.push(
            ["new platform:cluster.podCidr", parseCidr(src.cluster.podCidr)],
            ["new platform:cluster.serviceCidr", parseCidr(src.cluster.serviceCidr)],
        );
        if (src.cluster.kubeconfigContext !== undefined) {
            const ctx =
                o.context ??
                (src.cluster.kubeconfigContext.includes(oldName)
                    ? src.cluster.kubeconfigContext.split(oldName).join(spokeName)
                    : `${spokeName}-admin`);
            set([C, "platform:cluster", "kubeconfigContext"], ctx);
        }
        src.nodePools.forEach((p, i) => {
            const given = o.nodes?.[i];
            const hosts =
                given ??
                p.nodes.map((h) => {
                    if (!h.startsWith(oldName))
                        throw new Error(
                            `pool ${p.name}: host "${h}" does not start with "${oldName}"; give this region's hosts with --nodes (one comma list per pool, pools separated by ';')`,
                        );
                    return spokeName + h.slice(oldName.length);
                });
            setList([C, "platform:nodePools", i, "nodes"], hosts);
        });
        set([C, "platform:frontend", "subnet"], claim("platform:frontend.subnet", o.frontendSubnet, src.frontend.subnet));
        set([C, "platform:backend", "railSupernet"], claim("platform:backend.railSupernet", o.railSupernet, src.backend.railSupernet));
    } else {
        const vpc = src.cluster.vpc;
        if (vpc.mode !== "create")
            throw new Error(
                `${o.from} uses an existing VPC (${vpc.vpcId}); its ids cannot be derived for another region: copy the file by hand (README "Add a region")`,
            );
        // Refused before anything is written, by the check the spoke's program and the hub's spoke-file check run on
        // the copy (lib/aws-partition.ts): a region the pinned AWS SDK does not list is a typo unless acknowledged.
        if (o.unlistedRegion && isListedAwsRegion(o.region))
            throw new Error(`--unlisted-region: the pinned AWS SDK lists ${o.region}; drop the flag`);
        const regionIssue = eksSpokeRegionIssue(o.region, {
            acknowledged: o.unlistedRegion ? [o.region] : [],
            howToAcknowledge: `rerun with --unlisted-region (the copy then names it in ${UNLISTED_AWS_REGIONS_KEY})`,
        });
        if (regionIssue) throw new Error(`--region ${o.region}: ${regionIssue}`);
        if (doc.hasIn([C, "aws:region"])) set([C, "aws:region"], o.region);
        set([C, "platform:cluster", "region"], o.region);
        used.push(["new platform:cluster.serviceCidr", parseCidr(src.cluster.serviceCidr)]);
        const vpcCidr = claim("platform:cluster.vpc.cidr", o.vpcCidr, vpc.cidr);
        set([C, "platform:cluster", "vpc", "cidr"], vpcCidr);
        const letter = (az: string) => az.slice(src.cluster.region.length);
        const mapAz = (az: string) => {
            const i = vpc.availabilityZones.indexOf(az);
            const given = i >= 0 ? o.availabilityZones?.[i] : undefined;
            if (given) return given.startsWith(o.region) ? given : `${o.region}${given}`;
            return `${o.region}${letter(az)}`;
        };
        setList([C, "platform:cluster", "vpc", "availabilityZones"], vpc.availabilityZones.map(mapAz));
        if (vpc.subnets) {
            // Each AZ's subnets by name: this region's AZ names, the CIDRs the plan derives from the new VPC CIDR.
            const plan = vpcSubnetPlan(vpcCidr, vpc.availabilityZones.map(mapAz));
            const subnets = doc.getIn([C, "platform:cluster", "vpc", "subnets"], true);
            if (!YAML.isMap(subnets)) throw new Error("platform:cluster.vpc.subnets is not a map");
            for (const pair of subnets.items) {
                const az = String((pair.key as YAML.Scalar).value);
                const newAz = mapAz(az);
                const k = pair.key as YAML.Scalar;
                edits.push({ start: k.range![0], end: k.range![1], text: scalarText(newAz, k) });
                for (const tier of ["private", "public"] as const)
                    set(
                        [C, "platform:cluster", "vpc", "subnets", az, tier],
                        plan.find((x) => x.availabilityZone === newAz && x.tier === tier)!.cidr,
                    );
            }
        }
        src.nodeGroups.gpu.forEach((g, i) => {
            set([C, "platform:nodeGroups", "gpu", i, "availabilityZone"], mapAz(g.availabilityZone));
            if (g.capacity.type !== "on-demand") {
                if (!o.capacityReservation)
                    throw new Error(
                        `node group ${g.name} uses ${g.capacity.type} ${g.capacity.reservationId}, which lives in ${g.availabilityZone}; give this region's reservation with --capacity-reservation cr-...`,
                    );
                set([C, "platform:nodeGroups", "gpu", i, "capacity", "reservationId"], o.capacityReservation);
            }
        });
    }
    // The tenant edge is this region's own: its hostname, the device in front of it, and how peers reach it.
    const notes: string[] = [];
    const listener = src.gateway.listener;
    if (listener) {
        if (listener.hostname !== undefined || o.hostname)
            set([C, "platform:gateway", "listener", "hostname"], o.hostname ?? `llm.${spokeName}.example.com`);
        if (listener.tls?.source === "terminated-in-front") {
            if (!o.loadBalancer)
                throw new Error(
                    `${o.from} platform:gateway.listener.tls.loadBalancer is ${listener.tls.loadBalancer}, the source site's TLS-terminating device; name this site's with --load-balancer`,
                );
            set([C, "platform:gateway", "listener", "tls", "loadBalancer"], o.loadBalancer);
        }
        if (listener.reachable) {
            const pair = doc.getIn([C, "platform:gateway", "listener"], true) as YAML.YAMLMap;
            const item = pair.items.find((x) => YAML.isScalar(x.key) && x.key.value === "reachable")!;
            const key = item.key as YAML.Scalar;
            const value = item.value as YAML.Node;
            // From the comment lines right above the key to the end of the value's last line.
            let start = text.lastIndexOf("\n", key.range![0]) + 1;
            for (;;) {
                const prev = text.lastIndexOf("\n", start - 2) + 1;
                if (start === 0 || !/^\s*#/.test(text.slice(prev, start - 1))) break;
                start = prev;
            }
            let end = value.range![2];
            if (text[end - 1] !== "\n") end = text.indexOf("\n", end) + 1 || text.length;
            edits.push({ start, end, text: "" });
            changes["platform:gateway.listener.reachable"] = [listener.reachable.address, undefined];
            notes.push(
                `platform:gateway.listener.reachable (the source's address and CA) was dropped: set this site's address, latencyRegion and caCertificate before any endpoint fails over to or from ${spokeName}`,
            );
        }
    }
    if (!isEksSpoke(src))
        notes.push(
            `on-prem: add platform:spokeIdentities.${spokeName} to the hub's stack file (README "Add a region", step 1): the hub, and so npm run render, refuses the spoke without it; its deployer role must exist before the hub's pulumi up; after that up, mint and install its source key and install its own secrets (mint-key spoke-access-key, install-source-key, install-spoke-secrets)`,
        );
    else {
        const types = [...new Set(src.nodeGroups.gpu.map((g) => g.instanceType))].join(",");
        notes.push(
            `EKS: check that ${types || "the GPU instance type"} is offered in the availability zones you chose (aws ec2 describe-instance-type-offerings --region ${o.region} --location-type availability-zone --filters Name=instance-type,Values=${types || "<type>"})`,
            `EKS: platform:cluster.publicAccessCidrs and the listener's sourceRanges are ${o.from}'s: set this region's operators' and tenants' ranges`,
        );
    }
    notes.push(
        `CI: create the GitHub environment preview-${o.name} (required reviewers, its secrets), then run npm run ci-roles -- <same options> --update and the commands it prints (the preview role's trust names each spoke's environment; README "Add a region")`,
    );
    // The copy acknowledges exactly the unlisted regions it names: the source's still named (its Route 53 region, copied),
    // and --unlisted-region's.
    const srcUnlisted = src.unlistedAwsRegions ?? [];
    const keptRoute53 = listener?.tls?.source === "acme-dns01" ? [listener.tls.route53.region] : [];
    const unlisted = [...new Set([...srcUnlisted.filter((r) => keptRoute53.includes(r)), ...(o.unlistedRegion ? [o.region] : [])])];
    if (srcUnlisted.length || unlisted.length) {
        const cfgMap = doc.get(C, true) as YAML.YAMLMap;
        const pair = cfgMap.items.find((x) => YAML.isScalar(x.key) && x.key.value === UNLISTED_AWS_REGIONS_KEY);
        if (pair && unlisted.length) setList([C, UNLISTED_AWS_REGIONS_KEY], unlisted);
        else if (pair) {
            // none left: drop the key's lines
            const start = text.lastIndexOf("\n", (pair.key as YAML.Scalar).range![0]) + 1;
            let end = (pair.value as YAML.Node).range![2];
            if (text[end - 1] !== "\n") end = text.indexOf("\n", end) + 1 || text.length;
            edits.push({ start, end, text: "" });
            changes[UNLISTED_AWS_REGIONS_KEY] = [srcUnlisted, undefined];
        } else {
            // a new line above platform:spoke, indented like it
            const at = cfgMap.items.find((x) => YAML.isScalar(x.key) && x.key.value === "platform:spoke")!.key as YAML.Scalar;
            const lineStart = text.lastIndexOf("\n", at.range![0]) + 1;
            const indent = text.slice(lineStart, at.range![0]);
            edits.push({
                start: lineStart,
                end: lineStart,
                text: `${indent}${UNLISTED_AWS_REGIONS_KEY}: [${unlisted.join(", ")}]   # newer than the pinned AWS SDK (new-spoke --unlisted-region): remove once it lists them\n`,
            });
            changes[UNLISTED_AWS_REGIONS_KEY] = [undefined, unlisted];
        }
    }
    // The source's leading comment describes the source region: replace it; every other byte is kept.
    const header = [
        `# Spoke ${spokeName} (${o.region}): created from Pulumi.${o.from}.yaml by \`npm run new-spoke\`. The values marked`,
        `# "per region" are this region's; everything else is shared with ${o.from}.`,
    ].join("\n");
    const lines = applyEdits(text, edits).split("\n");
    const firstBody = lines.findIndex((l) => !l.startsWith("#"));
    const out = [header, ...lines.slice(firstBody)].join("\n");

    const raw = Object.fromEntries(
        Object.entries((YAML.parse(out).config ?? {}) as Record<string, unknown>)
            .filter(([k]) => k.startsWith("platform:"))
            .map(([k, v]) => [k.slice("platform:".length), v]),
    );
    const cfg = parseStackConfig(raw, path.basename(file));
    if (cfg.role !== "spoke") throw new Error("internal: the copy is not a spoke");
    notes.unshift(...copiedArnWarnings(YAML.parse(out).config ?? {}, changes, o.from));
    // The copy's AWS region keys pass the check its own program runs (programs/load.ts).
    const regionIssues = stackAwsRegionIssues(cfg, YAML.parse(out).config?.["aws:region"]);
    if (regionIssues.length) throw new ConfigError(path.basename(file), regionIssues);
    return {
        file,
        text: out,
        changes,
        notes,
        hubStack: src.spoke.hubStack.split("/").pop()!,
        hubEntry: {
            name: spokeName,
            stack: o.name,
            region: o.region,
            provider: cfg.spoke.cluster.provider,
            gpus: spokeGpuCapacity(cfg.spoke),
        },
    };
}

/** What each account-specific ARN key a copy may keep verbatim is, for its warning. */
const COPIED_ARN_HINTS: Record<string, string> = {
    "platform:cluster.access.deployRoleArn":
        "it is the cluster's only admin: remove it for the spoke's first up by hand (the role running that up gets the admin entry; install the spoke's Secrets meanwhile), then set it to the CI deploy role of this spoke's account (README \"Deploy for real\", before the first pulumi up, step 5)",
    "platform:cluster.access.previewRoleArn": "set it to the CI preview role of this spoke's account",
};

/**
 * Warnings for every ARN of `config` (the copy's parsed `config` block) that the copy kept verbatim from `from` (not a
 * key in `changes`): an ARN names one account's resource (EKS `platform:cluster.access.deployRoleArn` and
 * `previewRoleArn`, any other), which is wrong when the new spoke lives in another account or uses other roles.
 */
export function copiedArnWarnings(config: Record<string, unknown>, changes: NewSpokeResult["changes"], from: string): string[] {
    const found: Array<[string, string]> = [];
    const walk = (v: unknown, key: string) => {
        if (typeof v === "string" && v.startsWith("arn:")) found.push([key, v]);
        else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${key}[${i}]`));
        else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, key ? `${key}.${k}` : k);
    };
    walk(config, "");
    return found
        .filter(([key]) => !(key in changes))
        .map(
            ([key, arn]) =>
                `warning: ${key} was copied verbatim from ${from} (${arn}, account ${arn.split(":")[4] || "?"}): ${COPIED_ARN_HINTS[key] ?? "set it to this spoke's own resource before the first pulumi up"}`,
        );
}

/** Appends `entry` to `platform:spokes` of the hub file in `dir`, keeping its flow-map style and comments. */
export function addToHub(dir: string, hubStack: string, entry: NewSpokeResult["hubEntry"]): string {
    const file = path.join(dir, `Pulumi.${hubStack}.yaml`);
    const doc = YAML.parseDocument(fs.readFileSync(file, "utf8"));
    const text = fs.readFileSync(file, "utf8");
    const seq = doc.getIn(["config", "platform:spokes"], true);
    if (!YAML.isSeq(seq) || seq.items.length === 0) throw new Error(`${file}: platform:spokes is not a non-empty list`);
    if (seq.items.some((x) => YAML.isMap(x) && (x.get("name") === entry.name || x.get("stack") === entry.stack)))
        throw new Error(`${file} already lists spoke ${entry.name} / ${entry.stack}`);
    // Insert one line after the last entry, indented like it; the rest of the file is untouched.
    const last = seq.items[seq.items.length - 1] as YAML.Node;
    const lineStart = text.lastIndexOf("\n", last.range![0]) + 1;
    const lineEnd = text.indexOf("\n", last.range![1]);
    const indent = /^ */.exec(text.slice(lineStart))![0];
    const line = `${indent}- { name: ${entry.name}, stack: ${entry.stack}, region: ${entry.region}, provider: ${entry.provider}, gpus: ${entry.gpus} }`;
    const at = lineEnd < 0 ? text.length : lineEnd + 1;
    fs.writeFileSync(file, `${text.slice(0, at) + (lineEnd < 0 ? "\n" : "") + line}\n${text.slice(at)}`);
    return file;
}

const HELP = `
usage: npm run new-spoke -- --from <stack> --name <new stack> --region <region> [options]

Adds a region: copies a spoke's stack file, rewriting only the keys that must differ (spoke name and region,
kubeconfig context, hosts, frontend subnet and rail supernet on-prem; region, VPC CIDR and AZs on EKS; the
listener hostname, and the load balancer in front), keeping every other line and comment. The source's
reachable edge (platform:gateway.listener.reachable) is dropped. Networks are picked to collide with no other
spoke unless given.

Options:
  --from STACK                  the spoke to copy (spoke-hn1: on-prem InfiniBand, spoke-sg1: EKS + EFA)
  --name STACK                  the new stack (spoke-dn1 -> spoke name dn1)
  --region REGION               where it is (a site name on-prem; on EKS an AWS region the pinned AWS SDK lists)
  --spoke-name NAME             spoke name when it is not the stack name without "spoke-"
  --context CTX                 on-prem: kubeconfig context (default <spoke>-admin)
  --nodes h1,h2[;pool2...]      on-prem: hostnames per node pool (default: the source's, renamed)
  --frontend-subnet CIDR        on-prem: north-south subnet
  --rail-supernet CIDR          on-prem: block the rail IP pools are carved from
  --vpc-cidr CIDR               EKS: VPC CIDR
  --azs a,b                     EKS: availability zone letters
  --capacity-reservation cr-... EKS: the GPU node group's capacity reservation
  --unlisted-region             EKS: --region is real though the pinned AWS SDK does not list it yet (else refused as a
                                typo); the copy names it in platform:unlistedAwsRegions
  --hostname NAME               tenant hostname of the Gateway listener (default llm.<spoke>.example.com)
  --load-balancer NAME          on-prem, TLS terminated in front: this site's TLS-terminating device (required then)
  --add-to-hub                  also add the spoke to the hub's platform:spokes
  --dry-run                     print what would change, write nothing
  --stacks-dir DIR              stack files live in DIR (default stacks/)
  -h, --help                    this text

Examples:
  npm run new-spoke -- --from spoke-hn1 --name spoke-dn1 --region vn-danang-1 --load-balancer dn1-edge-vip-443 --add-to-hub
  npm run new-spoke -- --from spoke-sg1 --name spoke-tk1 --region ap-northeast-1 --azs a,c --dry-run
`;

function parseArgs(argv: string[]): NewSpokeOptions & { addToHub: boolean; dryRun: boolean } {
    exitOnHelp(argv, HELP);
    const o: Record<string, string> = {};
    const flags = new Set<string>();
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === "--add-to-hub" || a === "--dry-run" || a === "--unlisted-region") {
            flags.add(a);
            continue;
        }
        if (!a.startsWith("--") || i + 1 >= argv.length) throw new Error(`unexpected argument ${a}`);
        o[a.slice(2)] = argv[++i];
    }
    for (const k of ["from", "name", "region"]) if (!o[k]) throw new Error(`--${k} is required (see --help)`);
    const known = [
        "from",
        "name",
        "region",
        "spoke-name",
        "context",
        "nodes",
        "frontend-subnet",
        "rail-supernet",
        "vpc-cidr",
        "azs",
        "capacity-reservation",
        "hostname",
        "load-balancer",
        "stacks-dir",
    ];
    for (const k of Object.keys(o)) if (!known.includes(k)) throw new Error(`unknown option --${k}`);
    return {
        from: o.from,
        name: o.name,
        region: o.region,
        spokeName: o["spoke-name"],
        context: o.context,
        nodes: o.nodes?.split(";").map((p) =>
            p
                .split(",")
                .map((h) => h.trim())
                .filter(Boolean),
        ),
        frontendSubnet: o["frontend-subnet"],
        railSupernet: o["rail-supernet"],
        vpcCidr: o["vpc-cidr"],
        availabilityZones: o.azs?.split(",").map((x) => x.trim()),
        capacityReservation: o["capacity-reservation"],
        hostname: o.hostname,
        loadBalancer: o["load-balancer"],
        stacksDir: o["stacks-dir"] ? path.resolve(o["stacks-dir"]) : undefined,
        addToHub: flags.has("--add-to-hub"),
        dryRun: flags.has("--dry-run"),
        unlistedRegion: flags.has("--unlisted-region"),
    };
}

function main() {
    const o = parseArgs(process.argv.slice(2));
    const r = newSpokeFile(o);
    const rel = path.relative(process.cwd(), r.file) || r.file;
    const lines = Object.entries(r.changes).map(
        ([k, [a, b]]) =>
            `  ${k}: ${a === undefined ? "(none)" : JSON.stringify(a)} -> ${b === undefined ? "(dropped)" : JSON.stringify(b)}`,
    );
    const e = r.hubEntry;
    const hubLine = `    - { name: ${e.name}, stack: ${e.stack}, region: ${e.region}, provider: ${e.provider}, gpus: ${e.gpus} }`;
    if (!o.dryRun) fs.writeFileSync(r.file, r.text);
    process.stdout.write(`${o.dryRun ? "would write" : "wrote"} ${rel} (from ${o.from}); rewritten keys:\n${lines.join("\n")}\n\n`);
    if (o.dryRun) {
        process.stdout.write(
            `dry run: nothing written; rerun without --dry-run to write ${rel}${o.addToHub ? " and add it to the hub" : ""}\n`,
        );
        process.stdout.write(`the hub's platform:spokes line would be:\n${hubLine}\n`);
    } else if (o.addToHub) {
        const hub = addToHub(path.dirname(r.file), r.hubStack, e);
        process.stdout.write(`added to ${path.relative(process.cwd(), hub)} platform:spokes:\n${hubLine}\n`);
    } else {
        process.stdout.write(
            `add this line to platform:spokes in ${path.relative(process.cwd(), path.join(path.dirname(r.file), `Pulumi.${r.hubStack}.yaml`))} (or delete ${rel} and rerun with --add-to-hub):\n${hubLine}\n`,
        );
    }
    if (Object.keys(r.changes).some((k) => k.endsWith(".nodes") || k.includes("nodes["))) {
        process.stdout.write(`\nreplace the generated node names and kubeconfig context with the real ones before deploying\n`);
    }
    for (const n of r.notes) process.stdout.write(`\n${n}\n`);
    const render = o.stacksDir ? `npm run render -- --stacks ${path.relative(process.cwd(), o.stacksDir) || "."}` : "npm run render";
    process.stdout.write(`\nthen place endpoints on it (platform:endpoints, spoke: ${e.name}) if you like, and check: ${render}\n`);
}

if (require.main === module) {
    try {
        main();
    } catch (e) {
        process.stderr.write(`new-spoke: ${(e as Error).message}\n`);
        process.exit(1);
    }
}
