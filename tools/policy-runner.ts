import type { EnforcementLevel, Policy, PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import type { CapturedResource } from "./harness";

// The analyzer's own deserialiser and unknown-value proxy (@pulumi/policy server.js uses exactly these), so
// policies see secrets unwrapped and unknown values throw UnknownValueError as under `pulumi preview`.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { deserializeProperties } = require("@pulumi/policy/deserialize");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const unknownProxy = require("@pulumi/policy/proxy");
const { unknownCheckingProxy, UnknownValueError } = unknownProxy;
import { STACK_VIEW_KEY } from "../policies/lib/workloads";

/** One policy finding, as written to `out/<stack>/policy.json`. */
export interface PolicyFinding {
    policyName: string;
    enforcementLevel: EnforcementLevel;
    message: string;
    urn?: string;
    resourceType?: string;
    resourceName?: string;
}

export interface PolicyReport {
    findings: PolicyFinding[];
    /** Findings whose level is mandatory: these fail `render` as they fail `pulumi preview`. */
    mandatory: PolicyFinding[];
    policiesRun: number;
    resourcesChecked: number;
    /**
     * Policies that looked into at least one resource of this stack: read a setting beyond its `kind`,
     * `apiVersion` and `metadata` (what every policy reads to decide whether a resource is one of its own). The others
     * found nothing of theirs to check in this stack.
     */
    applied: string[];
}

/** Props a policy reads of every resource only to tell whether it is one of its own. */
const IDENTIFYING = new Set(["kind", "apiVersion", "metadata"]);

/** The analyzer's sentinels for values unknown during preview (@pulumi/policy proxy.js `isUnknown`). */
const UNKNOWN_SENTINELS: ReadonlySet<unknown> = new Set(
    [
        "unknownBooleanValue",
        "unknownNumberValue",
        "unknownStringValue",
        "unknownArrayValue",
        "unknownAssetValue",
        "unknownArchiveValue",
        "unknownObjectValue",
    ].map((k) => {
        const v = unknownProxy[k];
        if (typeof v !== "string") throw new Error(`@pulumi/policy/proxy: no ${k} sentinel`);
        return v;
    }),
);

/** True when an unknown sentinel is anywhere in `v` (a deserialised property tree). */
function holdsUnknown(v: unknown): boolean {
    if (UNKNOWN_SENTINELS.has(v)) return true;
    if (v === null || typeof v !== "object") return false;
    for (const x of Object.values(v)) if (holdsUnknown(x)) return true;
    return false;
}

/**
 * A resource's properties as a policy sees them: deserialised once per run (`seen`, keyed by the wire object) and
 * shared by every policy, as the analyzer does (@pulumi/policy server.js deserialises each resource once per
 * request), then wrapped per policy so `onRead` names the policy that read them.
 *
 * Properties holding an unknown value go through the analyzer's unknown-checking proxy, so reading one throws
 * UnknownValueError as under `pulumi preview`. Properties with none are handed over as they are: there the proxy never
 * throws and returns what it wraps, so a policy reads the same values, while every read through it allocates a new
 * proxy and path (most of a pack run's time on a whole stack).
 */
function props(wire: Record<string, unknown>, seen: Map<object, Record<string, any>>, onRead?: () => void): Record<string, any> {
    let p = seen.get(wire);
    if (!p) {
        const d = deserializeProperties({ toJavaScript: () => wire }, false) as Record<string, any>;
        p = holdsUnknown(d) ? (unknownCheckingProxy(d) as Record<string, any>) : d;
        seen.set(wire, p);
    }
    if (!onRead) return p;
    return new Proxy(p, {
        get(t, k, r) {
            if (typeof k === "string" && !IDENTIFYING.has(k) && k in t) onRead();
            return Reflect.get(t, k, r);
        },
    });
}

/** `o`, calling `onRead` when a policy reads any of its keys (resource options: a policy reads them only of its own resources). */
function watched<T extends object>(o: T, onRead: () => void): T {
    return new Proxy(o, {
        get(t, k, r) {
            if (typeof k === "string") onRead();
            return Reflect.get(t, k, r);
        },
    });
}

/**
 * The resource options a policy sees (as the analyzer passes them), watched so that reading one counts as applying
 * the policy; resource policies also see the parent's URN.
 */
function resourceOptions(r: CapturedResource, read: () => void, extra: { parent?: string } = {}): any {
    return watched(
        {
            protect: !!r.options?.protect,
            ignoreChanges: [],
            aliases: [],
            customTimeouts: {},
            additionalSecretOutputs: [],
            ...extra,
            ...(r.options?.deleteBeforeReplace ? { deleteBeforeReplace: true } : {}),
        },
        read,
    );
}

function isStackPolicy(p: Policy): p is StackValidationPolicy {
    return typeof (p as StackValidationPolicy).validateStack === "function";
}

/** Same test as the analyzer's `isTypeOf` (server.js): the class's static `__pulumiType`, else `isInstance`. */
function isTypeOf(type: string, cls: any): boolean {
    if (cls?.__pulumiType) return cls.__pulumiType === type;
    return typeof cls?.isInstance === "function" && cls.isInstance({ __pulumiType: type }) === true;
}

const notApplicable = (reason?: string): never => {
    const e = new Error(reason ?? "not applicable");
    (e as any).notApplicable = true;
    throw e;
};

/**
 * Runs policies on a captured resource graph the way the Pulumi policy analyzer does: resource policies see
 * each custom resource's inputs, stack policies see every resource's outputs with parents and dependencies
 * linked. A policy that reads an unknown preview value is reported as advisory "can't run during preview",
 * like the analyzer does.
 */
export async function runPolicies(
    policies: Policy[],
    resources: CapturedResource[],
    packLevel: EnforcementLevel = "mandatory",
): Promise<PolicyReport> {
    const findings: PolicyFinding[] = [];
    const checked = resources.filter((r) => r.custom && r.type !== "pulumi:pulumi:Stack");
    const byUrn = new Map(resources.map((r) => [r.urn, r]));
    const getConfig = () => ({});
    const applied = new Set<string>();
    const seen = new Map<object, Record<string, any>>();
    // Stack policies share one resources array, as under the analyzer, so a view a policy library caches per array
    // (policies/lib/workloads.ts stackView) is built once per run; reads are credited to the policy running now.
    let current = "";
    const readByCurrent = () => applied.add(current);
    let shared: PolicyResource[] | undefined;
    const stackResources = (): PolicyResource[] => {
        if (shared) return shared;
        // Stack policies also see the root Stack (its props are the stack outputs), as under the engine.
        const root = resources.filter((r) => r.type === "pulumi:pulumi:Stack");
        const read = readByCurrent;
        const prs: PolicyResource[] = [...checked, ...root].map((r) => {
            const pr = props(r.outputs, seen, read);
            return {
                type: r.type,
                props: pr,
                urn: r.urn,
                name: r.name,
                opts: resourceOptions(r, read),
                dependencies: [],
                propertyDependencies: {},
                isType: (cls: any) => isTypeOf(r.type, cls),
                asType: (cls: any) => (isTypeOf(r.type, cls) ? pr : undefined),
            } as unknown as PolicyResource;
        });
        const prByUrn = new Map(prs.map((x) => [x.urn, x]));
        for (const pr of prs) {
            const r = byUrn.get(pr.urn)!;
            (pr as any).parent = prByUrn.get(r.parent);
            (pr as any).dependencies = r.dependencies.map((d) => prByUrn.get(d)).filter(Boolean);
        }
        shared = prs;
        return prs;
    };
    for (const p of policies) {
        const level = (p.enforcementLevel ?? packLevel) as EnforcementLevel;
        if (level === "disabled") continue;
        const read = () => applied.add(p.name);
        const effective: EnforcementLevel = level === "remediate" ? "mandatory" : level;
        const push = (message: string, urn?: string) => {
            const r = urn ? byUrn.get(urn) : undefined;
            findings.push({ policyName: p.name, enforcementLevel: effective, message, urn, resourceType: r?.type, resourceName: r?.name });
        };
        const guard = async (fn: () => unknown) => {
            try {
                await fn();
            } catch (e) {
                if (e instanceof UnknownValueError)
                    findings.push({
                        policyName: p.name,
                        enforcementLevel: "advisory",
                        message: `can't run policy '${p.name}' during preview: ${(e as Error).message}`,
                    });
                else if ((e as any)?.notApplicable) {
                    /* not applicable */
                } else throw new Error(`policy '${p.name}' failed: ${(e as Error).stack ?? e}`);
            }
        };
        if (isStackPolicy(p)) {
            current = p.name;
            // This policy's view of the shared array: taking the cached stack view counts as reading the resources
            // (building it read them), so `applied` names the policy as when it built the view itself.
            const prs = new Proxy(stackResources(), {
                get(t, k, r) {
                    if (k === STACK_VIEW_KEY && STACK_VIEW_KEY in t) readByCurrent();
                    return Reflect.get(t, k, r);
                },
            });
            await guard(() =>
                p.validateStack(
                    { resources: prs, getConfig, stackTags: new Map(), notApplicable } as any,
                    (message: string, urn?: string) => push(message, urn),
                ),
            );
        } else {
            const rp = p as ResourceValidationPolicy;
            const validations = (Array.isArray(rp.validateResource) ? rp.validateResource : [rp.validateResource]).filter(
                (v): v is NonNullable<typeof v> => typeof v === "function",
            );
            for (const r of checked) {
                for (const v of validations) {
                    const pr = props(r.inputs, seen, read);
                    await guard(() =>
                        v(
                            {
                                type: r.type,
                                props: pr,
                                urn: r.urn,
                                name: r.name,
                                opts: resourceOptions(r, read, { parent: r.parent }),
                                stackTags: new Map(),
                                getConfig,
                                notApplicable,
                                isType: (cls: any) => isTypeOf(r.type, cls),
                                asType: (cls: any) => (isTypeOf(r.type, cls) ? pr : undefined),
                            } as any,
                            (message: string, urn?: string) => push(message, urn ?? r.urn),
                        ),
                    );
                }
            }
        }
    }
    return {
        findings,
        mandatory: findings.filter((f) => f.enforcementLevel === "mandatory"),
        policiesRun: policies.length,
        resourcesChecked: checked.length,
        applied: [...applied].sort(),
    };
}
