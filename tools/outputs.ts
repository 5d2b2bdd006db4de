import * as YAML from "yaml";
import type { CapturedResource } from "./harness";
import { maskWire, SECRET_MASK, unwrapWire } from "./wire";

/** Pulumi type prefixes that are not Kubernetes objects (Helm releases, YAML components, providers). */
const NON_MANIFEST = [/^kubernetes:helm\.sh\//, /^kubernetes:yaml/, /^pulumi:/, /^kubernetes:kustomize/];

/** True for captured resources that are one Kubernetes object. */
export function isManifest(r: CapturedResource): boolean {
    return (
        r.custom &&
        r.type.startsWith("kubernetes:") &&
        !NON_MANIFEST.some((re) => re.test(r.type)) &&
        typeof r.inputs.apiVersion === "string" &&
        typeof r.inputs.kind === "string"
    );
}

/** The Kubernetes object a resource applies, secrets masked, name filled with the Pulumi name when auto-named. */
export function toManifest(r: CapturedResource): Record<string, any> {
    const obj = maskWire(r.inputs) as Record<string, any>;
    const { apiVersion, kind, metadata, ...rest } = obj;
    const md = { ...(metadata ?? {}) };
    if (!md.name) md.name = r.name;
    // A Secret's data/stringData holding any secret value arrives as ONE secret; keep its keys (values masked)
    // so the manifest still has the Secret's shape for schema validation.
    if (kind === "Secret") {
        for (const f of ["data", "stringData"]) {
            const inner = rest[f] === SECRET_MASK ? unwrapWire(r.inputs[f]) : undefined;
            if (inner && typeof inner === "object" && !Array.isArray(inner))
                rest[f] = Object.fromEntries(Object.keys(inner).map((k) => [k, SECRET_MASK]));
        }
    }
    return { apiVersion, kind, metadata: md, ...rest };
}

/** Stable order for a reviewable diff: apiVersion, kind, namespace, name. */
export function sortManifests(objs: Array<Record<string, any>>): Array<Record<string, any>> {
    const key = (o: Record<string, any>) => [o.apiVersion, o.kind, o.metadata?.namespace ?? "", o.metadata?.name ?? ""].join("\u0000");
    return [...objs].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/**
 * Multi-document YAML of every Kubernetes object, written as YAML 1.1: kubectl (sigs.k8s.io/yaml over go-yaml) reads an
 * unquoted `no`, `n`, `on` or `off` as a boolean, so such strings are quoted (test/manifests-yaml.test.ts).
 */
export function manifestsYaml(resources: CapturedResource[]): string {
    const docs = sortManifests(resources.filter(isManifest).map(toManifest));
    return docs
        .map((d) => YAML.stringify(d, { lineWidth: 0, sortMapEntries: false, version: "1.1" }))
        .map((s) => `---\n${s}`)
        .join("");
}

/**
 * Every resource for `resources.json`: type, name, parent, provider, resource options (protect,
 * retainOnDelete, deleteBeforeReplace), inputs (secrets masked), sorted by URN.
 */
export function resourcesJson(resources: CapturedResource[]): unknown[] {
    return [...resources]
        .sort((a, b) => a.urn.localeCompare(b.urn))
        .map((r) => ({
            urn: r.urn,
            type: r.type,
            name: r.name,
            parent: r.parent || undefined,
            provider: r.provider || undefined,
            custom: r.custom,
            remote: r.remote || undefined,
            dependencies: r.dependencies.length ? r.dependencies : undefined,
            options: r.options ?? { protect: false, retainOnDelete: false, deleteBeforeReplace: false },
            inputs: maskWire(r.inputs),
        }));
}
