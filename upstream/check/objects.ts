import type { Obj } from "./types";
import { effectivePodSpec, podTemplatesOf } from "./walk";

/** `repo:tag` -> parts (a registry port is not a tag). */
export function splitImage(image: string): { repository: string; tag?: string } {
    const at = image.lastIndexOf(":");
    if (at > image.lastIndexOf("/")) return { repository: image.slice(0, at), tag: image.slice(at + 1) };
    return { repository: image };
}

/** The real argv of a container: command + args, with a `sh -c '<prelude> && exec "$@"' --` wrapper removed. */
export function effectiveArgv(c: Obj): string[] {
    const cmd: string[] = [...(c.command ?? [])],
        args: string[] = [...(c.args ?? [])];
    const all = [...cmd, ...args];
    if (all[0] === "sh" && all[1] === "-c" && typeof all[2] === "string" && /exec "\$@"/.test(all[2]) && all[3] === "--")
        return all.slice(4);
    return all;
}

/**
 * Pod specs of an object, with a label for the object (`component X` for a DGD, `leader`/`worker` for a LeaderWorkerSet):
 * the pod templates of the shared walker (./walk.ts), so the rules read every shape the policy pack reads.
 */
export function podSpecs(o: Obj): Array<{ label: string; spec: Obj }> {
    return podTemplatesOf(o).map((t) => ({ label: t.label, spec: effectivePodSpec(t) }));
}

/** `Kind/ns/name` of an object. */
export function objectName(o: Obj): string {
    return `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`;
}

/** Every container (init containers first) of every pod spec of the stack, with where it sits. */
export function containersOf(objects: readonly Obj[]): Array<{ object: string; container: Obj; spec: Obj; namespace?: string }> {
    const out: Array<{ object: string; container: Obj; spec: Obj; namespace?: string }> = [];
    for (const m of objects) {
        if (!m || typeof m !== "object") continue;
        for (const { label, spec } of podSpecs(m)) {
            const object = objectName(m) + (label ? ` ${label}` : "");
            for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])])
                out.push({ object, container: c, spec, namespace: m.metadata?.namespace });
        }
    }
    return out;
}

/** ConfigMaps of the stack by `ns/name`. */
export function configMapsOf(objects: readonly Obj[]): Map<string, Obj> {
    const configMaps = new Map<string, Obj>();
    for (const m of objects) if (m?.kind === "ConfigMap") configMaps.set(`${m.metadata?.namespace ?? ""}/${m.metadata?.name}`, m);
    return configMaps;
}

/**
 * Files a ConfigMap volume holds, relative path -> content. With `items`, only the listed keys, each at its `path`
 * (a listed key missing from the ConfigMap is left out); without, every key at its own name (Kubernetes core/v1
 * ConfigMapVolumeSource `items`).
 */
export function configMapVolumeFiles(vol: Obj, cm: Obj | undefined): Record<string, string> {
    const data: Record<string, unknown> = cm?.data ?? {};
    const items: Obj[] | undefined = vol?.configMap?.items;
    const out: Record<string, string> = {};
    if (items) {
        for (const it of items) if (it?.key in data) out[String(it.path)] = String(data[it.key]);
    } else for (const [k, v] of Object.entries(data)) out[k] = String(v);
    return out;
}

/**
 * Files a container reads from ConfigMap mounts: absolute path -> content. Follows the volume's `items` (key -> path)
 * and the mount's `subPath` (only the volume file or directory at that relative path appears, at `mountPath`).
 */
export function mountedFiles(c: Obj, spec: Obj, configMaps: Map<string, Obj>, ns: string | undefined): Record<string, string> {
    const files: Record<string, string> = {};
    for (const m of c.volumeMounts ?? []) {
        const vol = (spec.volumes ?? []).find((v: Obj) => v.name === m.name);
        const cmName = vol?.configMap?.name;
        if (!cmName) continue;
        const cm = configMaps.get(`${ns ?? ""}/${cmName}`) ?? configMaps.get(`/${cmName}`);
        const mp = String(m.mountPath).replace(/\/$/, "");
        const sub = m.subPath ? String(m.subPath).replace(/^\/+|\/+$/g, "") : undefined;
        for (const [rel, v] of Object.entries(configMapVolumeFiles(vol, cm))) {
            if (sub === undefined) files[`${mp}/${rel}`] = v;
            else if (rel === sub) files[mp] = v;
            else if (rel.startsWith(`${sub}/`)) files[`${mp}/${rel.slice(sub.length + 1)}`] = v;
        }
    }
    return files;
}

/** `JSON.parse`, undefined on error. */
export function safeJson(s: string): any {
    try {
        return JSON.parse(s);
    } catch {
        return undefined;
    }
}
