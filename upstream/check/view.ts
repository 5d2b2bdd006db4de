/**
 * Shared reading of a rendered stack for the activation, version and observability rules (./activation.ts,
 * ./versions.ts, ./observability.ts). Pure: plain objects in, plain data out; no file system, YAML or `@pulumi/*`.
 * The shapes are structurally those of the upstream-check rules (`RenderedStack`, `Finding`), so each rule here is a
 * `(stack, facts?, result?) => Finding[]` the rule registry can run as is.
 */

import { effectivePodSpec, podTemplatesOf } from "./walk";

/** A rendered Kubernetes object. */
export type Obj = Record<string, any>;

/** A Helm release of the stack (Pulumi `helm.sh/v3:Release` inputs). */
export interface ReleaseView {
    name: string;
    chart: string;
    version: string;
    values?: unknown;
}

/** What a stack renders. */
export interface StackView {
    stack: string;
    objects: readonly Obj[];
    releases: readonly ReleaseView[];
}

/** One problem: where (stack, object, container) and which key (the `Finding` of tools/upstream-check.ts). */
export interface Finding {
    stack: string;
    object: string;
    container?: string;
    key: string;
    message: string;
}

/** One pod template of the stack with what the rules read of it. */
export interface PodView {
    /** `Kind/ns/name[ component X]`. */
    object: string;
    kind: string;
    name: string;
    namespace?: string;
    /** DGD: the graph and the component's `type` (frontend, planner, prefill, decode, worker). */
    graph?: string;
    componentType?: string;
    backendFramework?: string;
    labels: Record<string, string>;
    main: Obj;
    spec: Obj;
}

/** `Kind/ns/name` of an object. */
export function objectName(o: Obj): string {
    return `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`;
}

/** The real argv of a container: command + args, with a `sh -c '<prelude> && exec "$@"' --` wrapper removed. */
export function argvOf(c: Obj): string[] {
    const all: string[] = [...(c.command ?? []), ...(c.args ?? [])].map(String);
    if (all[0] === "sh" && all[1] === "-c" && /exec "\$@"/.test(all[2] ?? "") && all[3] === "--") return all.slice(4);
    return all;
}

/** The value of `--flag v` / `--flag=v` in argv (the last one wins, as argparse does); `true` for a bare switch. */
export function flagValue(argv: readonly string[], flag: string): string | true | undefined {
    let v: string | true | undefined;
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === flag) v = i + 1 < argv.length && !argv[i + 1].startsWith("--") ? argv[i + 1] : true;
        else if (argv[i].startsWith(`${flag}=`)) v = argv[i].slice(flag.length + 1);
    }
    return v;
}

/** The container's env entry by name. */
export function envOf(c: Obj, name: string): Obj | undefined {
    return (c.env ?? []).find((e: Obj) => e.name === name);
}

/** `JSON.parse`, undefined on error. */
export function parseJson(s: unknown): any {
    if (typeof s !== "string") return undefined;
    try {
        return JSON.parse(s);
    } catch {
        return undefined;
    }
}

/** Every pod template's main container (`main`, or the first) with its labels, as the shared walker (./walk.ts) reads them. */
export function podsOf(objects: readonly Obj[]): PodView[] {
    const out: PodView[] = [];
    for (const o of objects) {
        if (!o || typeof o !== "object") continue;
        const base = { kind: String(o.kind), name: String(o.metadata?.name), namespace: o.metadata?.namespace };
        for (const t of podTemplatesOf(o)) {
            const spec = effectivePodSpec(t);
            const main = (spec.containers ?? []).find((x: Obj) => x?.name === "main") ?? spec.containers?.[0];
            if (!main) continue;
            const dgd = o.kind === "DynamoGraphDeployment";
            out.push({
                ...base,
                object: `${objectName(o)}${t.label ? ` ${t.label}` : ""}`,
                ...(dgd ? { graph: base.name, componentType: t.role, backendFramework: o.spec?.backendFramework } : {}),
                labels: { ...(t.metadata?.labels ?? {}) },
                main,
                spec,
            });
        }
    }
    return out;
}

/** Does a Kubernetes label selector (`matchLabels`, `matchExpressions` In/NotIn/Exists/DoesNotExist) select these labels? */
export function selects(sel: Obj | undefined, labels: Record<string, string>): boolean {
    if (!sel) return false;
    for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
    for (const x of sel.matchExpressions ?? []) {
        const has = Object.hasOwn(labels, x.key);
        if (x.operator === "In" && !(has && (x.values ?? []).includes(labels[x.key]))) return false;
        if (x.operator === "NotIn" && has && (x.values ?? []).includes(labels[x.key])) return false;
        if (x.operator === "Exists" && !has) return false;
        if (x.operator === "DoesNotExist" && has) return false;
    }
    return true;
}

/** A dotted path of a values object, or undefined. */
export function valueAt(values: unknown, dotted: string): unknown {
    let v: any = values;
    for (const k of dotted.split(".")) {
        if (v === null || typeof v !== "object") return undefined;
        v = v[k];
    }
    return v;
}
