import type {
    Policy,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
} from "@pulumi/policy";

/**
 * Preview is the gate. Under `pulumi preview` the analyzer wraps every resource's properties in an
 * unknown-checking proxy: reading a value that is not known yet (an output another resource computes) throws
 * `UnknownValueError`, and the analyzer turns the whole policy into an advisory "can't run policy ... during
 * preview" (pulumi/pulumi-policy sdk/nodejs/policy/server.ts). For a mandatory rule
 * that is a silent pass: a pull request's preview of a new stack would go green with the guard switched off.
 *
 * This module makes mandatory rules decide in preview:
 * - {@link peek} reads a value and says whether it is known, so rules can read what the product decides itself
 *   from where it is known (a dependency, a label, the stack config echoed into a manifest);
 * - {@link failClosed} wraps a policy so that a guarded value that is truly unknown becomes a mandatory
 *   violation that says so (resource, property path, why), never an advisory and never a skipped resource.
 */

/**
 * True for the analyzer's "value unknown during preview" error, `UnknownValueError` (pulumi/pulumi-policy
 * sdk/nodejs/policy/proxy.ts, a class extending Error with `props`, the property path). Recognised by its class name,
 * so any copy of @pulumi/policy matches and this module loads no copy at run time: the offline render and every tool
 * that applies the pack load only the one the runner uses (tools/policy-runner.ts).
 */
export function isUnknownError(e: unknown): e is { message: string; props?: string[] } {
    return e instanceof Error && e.constructor?.name === "UnknownValueError";
}

/** A value read through {@link peek}. */
export type Peeked<T> = { known: true; value: T } | { known: false; path: string };

/**
 * Reads `fn()`; a value unknown during preview gives `{ known: false, path }` (the property path of the unknown value,
 * else the error's message) instead of throwing.
 * @throws whatever `fn` throws other than the analyzer's `UnknownValueError` ({@link isUnknownError}), unchanged
 */
export function peek<T>(fn: () => T): Peeked<T> {
    try {
        return { known: true, value: fn() };
    } catch (e) {
        if (isUnknownError(e)) return { known: false, path: (e.props ?? []).join(".") || e.message };
        throw e;
    }
}

/** Message of a fail-closed finding (one format for every rule). */
export function unknownMessage(policy: string, subject: string, detail: string): string {
    return (
        `${subject}: ${detail} is unknown during preview, and policy ${policy} guards it, so it refuses (fail closed) instead of skipping. ` +
        "Fix: derive the value from stack config (not from another resource's computed output), or move it where it is known at preview."
    );
}

/** `Kind ns/name` of a resource for messages (Kubernetes objects), else `type name`. */
function subjectOf(r: { type: string; name: string; props?: Record<string, any> }): string {
    const kind = /^kubernetes:[^:]+:(.+)$/.exec(r.type)?.[1];
    if (!kind) return `${r.type} ${r.name}`;
    const md = peek(() => ({ ns: r.props?.metadata?.namespace, name: r.props?.metadata?.name }));
    const n = md.known ? `${md.value.ns ? `${md.value.ns}/` : ""}${md.value.name ?? r.name}` : r.name;
    return `${kind} ${n}`;
}

/**
 * Wraps resources so the one whose properties were read last is known when a read throws: the proxy throws
 * synchronously inside the property access, so that resource is the one holding the unknown value.
 */
function tracked(resources: PolicyResource[], last: { r?: PolicyResource }): PolicyResource[] {
    const proxies = new Map<PolicyResource, PolicyResource>();
    const wrap = (r: PolicyResource): PolicyResource => {
        const hit = proxies.get(r);
        if (hit) return hit;
        const proxy = new Proxy(r, {
            get(target, prop, recv) {
                if (prop === "props") last.r = proxy;
                const v = Reflect.get(target, prop, recv);
                if (prop === "dependencies" && Array.isArray(v)) return v.map((d) => (d ? wrap(d) : d));
                if (prop === "parent" && v) return wrap(v as PolicyResource);
                return v;
            },
        });
        proxies.set(r, proxy);
        return proxy;
    };
    return resources.map(wrap);
}

/** Tracked copy of a resources array, cached so per-stack caches keyed on the array (stackView) still hit. */
const trackedArrays = new WeakMap<PolicyResource[], { arr: PolicyResource[]; last: { r?: PolicyResource } }>();
function trackedOnce(resources: PolicyResource[]): { arr: PolicyResource[]; last: { r?: PolicyResource } } {
    let hit = trackedArrays.get(resources);
    if (!hit) {
        const last: { r?: PolicyResource } = {};
        hit = { arr: tracked(resources, last), last };
        trackedArrays.set(resources, hit);
    }
    hit.last.r = undefined;
    return hit;
}

/** Stack policy wrapper: an unknown guarded value is a mandatory violation naming resource and path. */
function wrapStack(p: StackValidationPolicy): StackValidationPolicy {
    const inner = p.validateStack;
    return {
        ...p,
        validateStack: async (args: StackValidationArgs, report: ReportViolation) => {
            const t = trackedOnce(args.resources);
            try {
                await inner({ ...args, resources: t.arr } as StackValidationArgs, report);
            } catch (e) {
                if (!isUnknownError(e)) throw e;
                const r = t.last.r;
                report(unknownMessage(p.name, r ? subjectOf(r) : "the stack", `property .${(e.props ?? []).join(".")}`), r?.urn);
            }
        },
    };
}

/** Resource policy wrapper: same, for the resource being validated. */
function wrapResource(p: ResourceValidationPolicy): ResourceValidationPolicy {
    const one =
        (v: NonNullable<ResourceValidationPolicy["validateResource"]> extends infer V ? (V extends Array<infer X> ? X : V) : never) =>
        async (args: ResourceValidationArgs, report: ReportViolation) => {
            try {
                await (v as any)(args, report);
            } catch (e) {
                if (!isUnknownError(e)) throw e;
                report(unknownMessage(p.name, subjectOf(args), `property .${(e.props ?? []).join(".")}`));
            }
        };
    const vr = p.validateResource;
    return {
        ...p,
        validateResource: Array.isArray(vr) ? vr.map((v) => one(v as any)) : vr ? one(vr as any) : vr,
    } as ResourceValidationPolicy;
}

/**
 * Wraps a mandatory (or default-level) policy so it never degrades to "can't run during preview": every
 * unknown read becomes a violation that says what is unknown. Advisory and disabled policies are returned as is.
 */
export function failClosed<P extends Policy>(p: P): P {
    if (p.enforcementLevel === "advisory" || p.enforcementLevel === "disabled") return p;
    if (typeof (p as unknown as StackValidationPolicy).validateStack === "function")
        return wrapStack(p as unknown as StackValidationPolicy) as unknown as P;
    return wrapResource(p as unknown as ResourceValidationPolicy) as unknown as P;
}

/**
 * Runs `fn` and returns its value. Replaces the former `known(fn, fallback)`, which skipped a resource whose
 * value was unknown during preview (a silent pass): an unknown read now propagates to {@link failClosed}.
 */
export function run<T>(fn: () => T): T {
    return fn();
}
