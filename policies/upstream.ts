import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import {
    checkRendered,
    defaultFacts,
    type Facts,
    type HelmRelease,
    type Obj,
    pairRule,
    podSpecs,
    releasesOf,
    type RenderedStack,
    type Rule,
    rules,
} from "../upstream/check";
import { isUnknownError, unknownMessage } from "./lib/unknown";

/**
 * Every rule `npm run upstream-check` applies to the offline render (upstream/check/index.ts `rules`, facts from
 * upstream/) also runs here, on the objects `pulumi preview`/`up` is about to apply, so the deploy enforces exactly
 * what the offline render enforces. The rules are pure functions over plain objects; this file only turns the
 * resources the analyzer hands over into such objects.
 *
 * Preview: a value another resource computes is unknown. Copying an object replaces each unknown value by a marker
 * and records its path. Keys are always known, so the Helm values rule (which judges keys) decides in preview; a
 * workload with an unknown value in a container (image, command, args, env, mounts) or a mounted ConfigMap with
 * unknown data is refused, naming the path (fail closed, lib/unknown.ts), never skipped.
 */

const UNKNOWN_MARK = "(unknown during preview)";

/** Deep copy of a (possibly proxied) value: unknown values become {@link UNKNOWN_MARK}; their paths go to `unknown`. */
function materialize(v: unknown, at: string, unknown: string[]): unknown {
    if (v === null || typeof v !== "object") return v;
    if (Array.isArray(v)) {
        const out: unknown[] = [];
        for (let i = 0; i < v.length; i++) out.push(read(() => v[i], `${at}[${i}]`, unknown));
        return out;
    }
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) out[k] = read(() => (v as Record<string, unknown>)[k], at ? `${at}.${k}` : k, unknown);
    return out;
}

function read(get: () => unknown, at: string, unknown: string[]): unknown {
    try {
        return materialize(get(), at, unknown);
    } catch (e) {
        if (!isUnknownError(e)) throw e;
        unknown.push(at);
        return UNKNOWN_MARK;
    }
}

/** `kubernetes:<group>/<version>:<Kind>` -> Kind (not for Helm and provider types). */
function kindOf(type: string): string | undefined {
    const m = /^kubernetes:([^:]+):(.+)$/.exec(type);
    if (!m || m[1].startsWith("helm.sh/") || m[1] === "kubernetes" || m[1].startsWith("yaml/")) return undefined;
    return m[2];
}

/**
 * Every Kubernetes object goes to the rules, not only workloads: the activation, version and observability rules read
 * Services, PodMonitors, PrometheusRules and dashboards too, and a rule that saw part of the stack would refuse a
 * scrape that exists.
 */

interface Converted {
    stack: RenderedStack;
    unknown: Array<{ urn: string; subject: string; path: string }>;
    urnOf: Map<string, string>;
}

/** The analyzer's resources as the rules' input, with every unknown path found on the way. */
export function renderedStackOf(resources: PolicyResource[], stack = "stack"): Converted {
    const objects: Obj[] = [];
    const releases: HelmRelease[] = [];
    const unknown: Converted["unknown"] = [];
    const urnOf = new Map<string, string>();
    const mountedConfigMaps = new Set<string>();
    const cmUnknown: Array<{ key: string; urn: string; subject: string; path: string }> = [];
    for (const r of resources) {
        const kind = kindOf(r.type);
        if (kind) {
            const u: string[] = [];
            const o = { ...(materialize(r.props, "", u) as Obj), kind } as Obj;
            const subject = `${kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name ?? r.name}`;
            objects.push(o);
            urnOf.set(`${kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`, r.urn);
            if (kind === "ConfigMap") {
                for (const p of u)
                    cmUnknown.push({ key: `${o.metadata?.namespace ?? ""}/${o.metadata?.name}`, urn: r.urn, subject, path: p });
                continue;
            }
            for (const { spec } of podSpecs(o)) {
                for (const v of spec.volumes ?? [])
                    if (v?.configMap?.name) mountedConfigMaps.add(`${o.metadata?.namespace ?? ""}/${v.configMap.name}`);
            }
            for (const p of u)
                if (/(^|\.)((init|ephemeral)?[cC]ontainers\[\d+\]|mainContainer|frontendSidecar|envs?\[\d+\]|volumes\[\d+\])/.test(p))
                    unknown.push({ urn: r.urn, subject, path: p });
        } else if (r.type === "kubernetes:helm.sh/v3:Release" || r.type === "kubernetes:helm.sh/v4:Chart") {
            const u: string[] = [];
            const inputs = materialize(r.props, "", u) as Obj;
            releases.push(...releasesOf([{ type: r.type, name: r.name, inputs }]));
            urnOf.set(`helm Release ${r.name}`, r.urn);
            for (const p of u) if (/^(chart|version)$/.test(p)) unknown.push({ urn: r.urn, subject: `Helm release ${r.name}`, path: p });
        }
    }
    for (const c of cmUnknown) if (mountedConfigMaps.has(c.key)) unknown.push(c);
    return { stack: { stack, objects, releases }, unknown, urnOf };
}

/**
 * Rules of upstream/check that the pack runs under a dedicated policy instead of inside `upstream-rules`, so a finding
 * is reported once: `pd-kv-settings-match` (policies/pd-compat.ts) runs `pairRule` itself, on {@link renderedStackOf},
 * next to its pack-only checks. test/policies/upstream-parity.test.ts plants one fault per rule of the registry and
 * requires the pack to report it on the same object and key as upstream-check.
 */
export const RULES_RUN_BY: ReadonlyMap<Rule, string> = new Map<Rule, string>([[pairRule, "pd-kv-settings-match"]]);

/** Builds the pack policy that runs `rules` on `facts` (tests plant other facts through this). */
export function upstreamRulesPolicy(facts: Facts = defaultFacts): StackValidationPolicy {
    return {
        name: "upstream-rules",
        description:
            "Every rule of npm run upstream-check (upstream/check: flags, env vars, KVTransferConfig keys and Helm values keys each pinned upstream component actually reads, combinations upstream refuses, what an image must provide for its config) holds for the objects being deployed, with the facts of upstream/.",
        remediationSteps:
            "Run npm run render && npm run upstream-check and fix what it names; a new flag, env var or chart key is recorded in upstream/ with its source first.",
        enforcementLevel: "mandatory",
        validateStack: (args, report) => {
            const conv = renderedStackOf(args.resources);
            for (const u of conv.unknown) report(unknownMessage("upstream-rules", u.subject, `property .${u.path}`), u.urn);
            const result = checkRendered(
                conv.stack,
                facts,
                undefined,
                rules.filter((r) => !RULES_RUN_BY.has(r)),
            );
            for (const f of result.findings) {
                const urn = conv.urnOf.get(f.object.replace(/ component .*$/, "")) ?? conv.urnOf.get(f.object.replace(/ \(.*$/, ""));
                report(
                    `${f.object}${f.container ? ` container ${f.container}` : ""} field ${f.key}: ${f.message}. Fix: make it what the pinned upstream reads (upstream/), or record the new fact there with its source.`,
                    urn,
                );
            }
        },
    };
}

/** The upstream rules as pack policies. */
export const upstreamPolicies: StackValidationPolicy[] = [upstreamRulesPolicy()];
