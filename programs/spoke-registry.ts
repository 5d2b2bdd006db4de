import * as fs from "node:fs";
import * as path from "node:path";
import { ConfigError, type ConfigIssue } from "../config/errors";
import { type HubConfig, parseFlatStackConfig, type SpokeConfig } from "../config/stack";
import { placeEndpoints } from "../lib/serving";
import { placementPools } from "./spoke-infra";
import { collisionsWithRecorded, findSpokeCollisions, networksOf, type SpokeNetworks } from "../lib/spoke-networks";
import { readStackFile, stackNameOf } from "../lib/stackfiles";
import { stackAwsRegionIssues } from "../lib/aws-partition";
import { type SpokeEdge, spokeEdges } from "./failover";

/** GPUs a spoke file provides: hosts x GPUs per node on-prem, desired nodes x GPUs per node on EKS. */
export function spokeGpuCapacity(cfg: SpokeConfig): number {
    if (cfg.cluster.provider === "eks") {
        return cfg.nodeGroups!.gpu.reduce((n, g, i) => n + g.scaling.desired * cfg.nodePools[i].profile.gpu.count, 0);
    }
    return cfg.nodePools.reduce((n, p) => n + p.nodes.length * p.profile.gpu.count, 0);
}

/** One spoke stack file of a hub, as {@link spokeFilesOf} read it: either `cfg` or `error` is set. */
export interface SpokeFile {
    /** Stack name (`spoke-hn1` from `Pulumi.spoke-hn1.yaml`). */
    stack: string;
    /** The file's path relative to the working directory, as messages name it. */
    file: string;
    /** The validated spoke config, when the file parsed as a spoke file of this hub. */
    cfg?: SpokeConfig;
    /** Why the file could not be read or validated (a ConfigError naming the file and keys, or the read/YAML Error). */
    error?: Error;
}

/**
 * Thrown by {@link checkSpokeRegistry} when spoke files are wrong: each spoke file's own error, headed by that file
 * (a spoke file is validated as a spoke file before the hub reads it), then the hub file's own issues if any.
 * `issues` holds the hub file's issues only; `spokeErrors` maps spoke stack -> its error.
 */
export class SpokeFilesError extends ConfigError {
    readonly spokeErrors: Map<string, Error>;

    constructor(hubStackFile: string, hubIssues: ConfigIssue[], spokeErrors: Map<string, Error>) {
        super(hubStackFile, hubIssues);
        this.name = "SpokeFilesError";
        this.spokeErrors = spokeErrors;
        const spokes = [...spokeErrors.values()].map((e) => e.message).join("\n");
        const why = `${hubStackFile}: checks every spoke file of its hub (capacity, networks, placement) and cannot be applied while ${spokeErrors.size === 1 ? "this spoke file is" : "these spoke files are"} wrong; fix ${spokeErrors.size === 1 ? "it" : "them"} first`;
        this.message = hubIssues.length ? `${spokes}\n${why}\n${this.message}` : `${spokes}\n${why}`;
    }
}

/**
 * Spoke stacks the offline render (tools/render.ts) has already failed on their own files: the hub's check leaves them
 * out so the hub's outputs for the other spokes can still be computed. Always empty in `pulumi up` / `preview`.
 */
const setAsideForRender = new Set<string>();

/** Sets the spoke stacks {@link checkSpokeRegistry} leaves out (offline render only; pass nothing to clear). */
export function setAsideSpokesForRender(stacks: Iterable<string> = []): void {
    setAsideForRender.clear();
    for (const s of stacks) setAsideForRender.add(s);
}

/**
 * Spoke stack files in `dir` whose `platform:spoke.hubStack` names `hubStack` (the last path segment), in file-name
 * order, skipping the stacks set aside for an offline render ({@link setAsideSpokesForRender}). A file that cannot be
 * read, or does not validate as a spoke file (config/stack.ts `parseFlatStackConfig`, plus lib/aws-partition.ts
 * `eksSpokePartitionIssues` for an EKS spoke), is returned with its `error` (a ConfigError naming the file and keys, or
 * the read/YAML Error), not thrown: {@link checkSpokeRegistry} reports every file's error at once. A file that cannot be
 * read is listed under its file name's stack, since its `platform:spoke.hubStack` is unknown.
 * @returns one entry per matching (or unreadable) file: `stack`, `file` (relative to the working directory), and
 *   either `cfg` or `error`
 * @throws Error from the file system (`ENOENT`, `ENOTDIR`) when `dir` cannot be listed; never a ConfigError
 */
export function spokeFilesOf(dir: string, hubStack: string): SpokeFile[] {
    const out: SpokeFile[] = [];
    for (const f of fs
        .readdirSync(dir)
        .filter((x) => /^Pulumi\..+\.ya?ml$/.test(x))
        .sort()) {
        const file = path.join(dir, f);
        // as the render and the tools name stack files: relative to the working directory (stacks/… in the repository)
        const display = path.relative(process.cwd(), file) || f;
        let s: ReturnType<typeof readStackFile>;
        if (setAsideForRender.has(stackNameOf(f))) continue;
        try {
            s = readStackFile(file, display);
        } catch (e) {
            out.push({ stack: stackNameOf(f), file: display, error: e as Error });
            continue;
        }
        if (s.role !== "spoke" || s.hub !== hubStack) continue;
        try {
            const parsed = parseFlatStackConfig(s.config, display, s.secretKeys);
            if (parsed.role !== "spoke") continue;
            // An unknown AWS region or one outside partition aws is that file's error (lib/aws-partition.ts), before the
            // hub creates anything.
            const partition = stackAwsRegionIssues(parsed, s.config["aws:region"]);
            if (partition.length) throw new ConfigError(display, partition);
            out.push({ stack: s.name, file: display, cfg: parsed.spoke });
        } catch (e) {
            out.push({ stack: s.name, file: display, error: e as Error });
        }
    }
    return out;
}

/**
 * Hub-side check of the spokes (README "Add a region"): every spoke the hub lists has a valid stack file next
 * to the hub's, whose `platform:spoke.name`, provider and region match the hub entry and which has at least the
 * GPUs the hub counts on; and no two spoke files of this hub (listed or not yet listed) share a name, a listener
 * hostname (`platform:gateway.listener.hostname`) or a public address (`platform:gateway.listener.reachable.address`),
 * or overlap in a routable network ({@link findSpokeCollisions}). A spoke's `pulumi up` needs its contract from
 * the hub, so the hub's preview/up, which runs this, gates every new or changed spoke.
 *
 * @param hubStackFile path of the hub's stack file (its directory holds the spoke files)
 * A problem of a spoke file alone (it does not parse as a spoke file, or it collides with an earlier spoke) is that
 * file's error, headed by it; a disagreement between a hub entry and its file is the hub's (`platform:spokes[i]`).
 *
 * @returns the registry exported as the hub output `spokeNetworks` (listed spokes only)
 * @throws SpokeFilesError when a spoke file is wrong (its own error first, then any hub issue)
 * @throws ConfigError naming the hub file and `platform:spokes[i]` keys
 */
export function checkSpokeRegistry(hub: HubConfig, hubStackFile: string): SpokeNetworks[] {
    const dir = path.dirname(hubStackFile);
    const hubStack = stackNameOf(hubStackFile);
    const files = spokeFilesOf(dir, hubStack);
    const byStack = new Map(files.map((f) => [f.stack, f]));
    const issues: ConfigIssue[] = [];
    const spokeErrors = new Map<string, Error>();
    for (const f of files) if (f.error) spokeErrors.set(f.stack, f.error);
    const registry: SpokeNetworks[] = [];
    hub.spokes.forEach((s, i) => {
        const key = `platform:spokes[${i}]`;
        if (setAsideForRender.has(s.stack)) return;
        const f = byStack.get(s.stack);
        if (!f) {
            const exists = fs.existsSync(path.join(dir, `Pulumi.${s.stack}.yaml`));
            issues.push({
                key: `${key}.stack`,
                message: exists
                    ? `${path.relative(process.cwd(), path.join(dir, `Pulumi.${s.stack}.yaml`))} is not a spoke of ${hubStack} (its platform:spoke.hubStack must end in /${hubStack})`
                    : `no stack file ${path.relative(process.cwd(), path.join(dir, `Pulumi.${s.stack}.yaml`))} for spoke "${s.name}" (create it: npm run new-spoke)`,
            });
            return;
        }
        if (!f.cfg) return; // the spoke file's own error (spokeErrors)
        const c = f.cfg;
        if (c.spoke.name !== s.name)
            issues.push({ key: `${key}.name`, message: `${f.file} says platform:spoke.name "${c.spoke.name}", not "${s.name}"` });
        if (c.cluster.provider !== s.provider)
            issues.push({ key: `${key}.provider`, message: `${f.file} is provider ${c.cluster.provider}, not ${s.provider}` });
        if (c.spoke.region !== s.region)
            issues.push({ key: `${key}.region`, message: `${f.file} says region "${c.spoke.region}", not "${s.region}"` });
        const gpus = spokeGpuCapacity(c);
        if (gpus < s.gpus)
            issues.push({
                key: `${key}.gpus`,
                message: `${f.file} provides ${gpus} GPUs, fewer than the ${s.gpus} the hub places against`,
            });
        registry.push({ name: s.name, stack: s.stack, networks: networksOf(c) });
        issues.push(...hubPlacementIssues(hub, s.name, c, f.file));
    });
    // Failover: every spoke peers or Route 53 must reach declares a reachable, verifiable edge (programs/failover.ts).
    issues.push(...spokeEdges(hub, listedFiles(hub, byStack)).issues);
    // Every spoke file of this hub, listed or not: a colliding new file is caught before it is even listed.
    // Listed spokes first in hub order, then unlisted files, so a collision is blamed on the newer entry.
    const rank = (stack: string) => {
        const i = hub.spokes.findIndex((s) => s.stack === stack);
        return i < 0 ? hub.spokes.length : i;
    };
    const all: SpokeNetworks[] = files
        .filter((f) => f.cfg)
        .sort((a, b) => rank(a.stack) - rank(b.stack))
        .map((f) => ({ name: f.cfg!.spoke.name, stack: f.stack, networks: networksOf(f.cfg!) }));
    const collisions = new Map<string, ConfigIssue[]>();
    for (const c of findSpokeCollisions(all)) {
        // Messages read `<stack> <key> <cidr> overlaps ...` (lib/spoke-networks.ts): the newer file's key is what to change.
        const key = /^\S+ (platform:[^\s(]+)/.exec(c.message)?.[1] ?? "platform:spoke.name";
        collisions.set(c.stack, [...(collisions.get(c.stack) ?? []), { key, message: c.message }]);
    }
    // Two spokes on one tenant hostname or one public address would take each other's traffic (and Route 53
    // records, programs/failover.ts): the newer file (same order as above) is refused, naming both files and the key.
    const seen = new Map<string, SpokeFile>();
    for (const f of files.filter((x) => x.cfg).sort((a, b) => rank(a.stack) - rank(b.stack))) {
        const listener = f.cfg!.gateway.listener;
        for (const [key, value] of [
            ["platform:gateway.listener.hostname", listener?.hostname],
            ["platform:gateway.listener.reachable.address", listener?.reachable?.address],
        ] as const) {
            if (value === undefined) continue;
            const first = seen.get(`${key}=${value}`);
            if (!first) {
                seen.set(`${key}=${value}`, f);
                continue;
            }
            const message = `${f.file} ${key} ${value} is also ${first.file}'s: every spoke's edge needs its own (npm run new-spoke writes llm.<spoke>.example.com and drops reachable)`;
            collisions.set(f.stack, [...(collisions.get(f.stack) ?? []), { key, message }]);
        }
    }
    for (const [stack, list] of collisions)
        if (!spokeErrors.has(stack)) spokeErrors.set(stack, new ConfigError(byStack.get(stack)!.file, list));
    if (spokeErrors.size) throw new SpokeFilesError(hubStackFile, issues, spokeErrors);
    if (issues.length) throw new ConfigError(hubStackFile, issues);
    return registry;
}

/** Listed spokes' parsed files by spoke name (spokes whose file failed are left out). */
function listedFiles(hub: HubConfig, byStack: Map<string, SpokeFile>): Map<string, { file: string; cfg: SpokeConfig }> {
    const out = new Map<string, { file: string; cfg: SpokeConfig }>();
    for (const s of hub.spokes) {
        const f = byStack.get(s.stack);
        if (f?.cfg && f.cfg.spoke.name === s.name) out.set(s.name, { file: f.file, cfg: f.cfg });
    }
    return out;
}

/**
 * The reachable edges of the spokes the hub's failover needs (programs/failover.ts `spokeEdges`), read from the spoke
 * files beside the hub's. Call after {@link checkSpokeRegistry} passed (which reports every missing piece).
 * @throws Error when `hubStackFile` is not named `Pulumi.<stack>.yaml` (lib/stackfiles.ts `stackNameOf`), or the file
 *   system's error when its directory cannot be listed ({@link spokeFilesOf})
 */
export function readSpokeEdges(hub: HubConfig, hubStackFile: string): Map<string, SpokeEdge> {
    const files = spokeFilesOf(path.dirname(hubStackFile), stackNameOf(hubStackFile));
    return spokeEdges(hub, listedFiles(hub, new Map(files.map((f) => [f.stack, f])))).edges;
}

/**
 * The spoke's own placement check (lib/serving.ts `placeEndpoints`, the one implementation the spoke runs before
 * creating anything) run by the hub on the endpoints it places on `spoke`, so a placement the spoke would refuse is a
 * hub error naming the hub file's key: `hub output spokeContracts.<spoke>.endpoints[j]...` becomes
 * `platform:endpoints[i]...` (i = the endpoint's index in the hub file); a problem in the spoke file's own keys
 * (`platform:serving.endpointPools`) is reported on the hub's endpoint with the spoke file and key named.
 */
export function hubPlacementIssues(hub: HubConfig, spoke: string, cfg: SpokeConfig, spokeFile: string): ConfigIssue[] {
    const indices = hub.endpoints.map((e, i) => ({ e, i })).filter((x) => x.e.spoke === spoke);
    if (indices.length === 0) return [];
    const contractKey = `hub output spokeContracts.${spoke}`;
    const { issues } = placeEndpoints(
        indices.map((x) => x.e),
        placementPools(cfg),
        cfg.serving,
        contractKey,
    );
    const prefix = `${contractKey}.endpoints`;
    return issues.map((p) => {
        if (p.key.startsWith(`${prefix}[`)) {
            const m = /^\[(\d+)\](.*)$/.exec(p.key.slice(prefix.length))!;
            return {
                key: `platform:endpoints[${indices[Number(m[1])].i}]${m[2]}`,
                message: `${p.message} (spoke ${spokeFile} would refuse this placement)`,
            };
        }
        if (p.key === prefix) {
            return {
                key: `platform:endpoints (spoke ${spoke}: ${indices.map((x) => `[${x.i}]`).join(", ")})`,
                message: `${p.message} (spoke ${spokeFile} would refuse this placement)`,
            };
        }
        const j = indices.findIndex((x) => p.key.endsWith(`.${x.e.name}`));
        return {
            key: j >= 0 ? `platform:endpoints[${indices[j].i}]` : `platform:endpoints (spoke ${spoke})`,
            message: `${spokeFile} ${p.key}: ${p.message}`,
        };
    });
}

/**
 * Spoke-side guard: this spoke's networks against the hub's recorded `spokeNetworks` of the other spokes.
 * Catches a spoke file edited into a collision after the hub was last applied.
 *
 * @param recorded the hub output (undefined when the hub predates it: nothing to check)
 * @throws ConfigError naming the spoke file
 */
export function checkAgainstHubRegistry(cfg: SpokeConfig, stack: string, recorded: unknown, stackFile: string): void {
    if (!Array.isArray(recorded)) return;
    const problems = collisionsWithRecorded({ name: cfg.spoke.name, stack, networks: networksOf(cfg) }, recorded as SpokeNetworks[]);
    // Messages read `<stack> <key> <cidr> overlaps ...` (lib/spoke-networks.ts): name this spoke's key.
    if (problems.length)
        throw new ConfigError(
            stackFile,
            problems.map((m) => ({
                key: /^\S+ (platform:\S+)/.exec(m)?.[1] ?? "platform:spoke",
                message: `${m} (hub output spokeNetworks)`,
            })),
        );
}
