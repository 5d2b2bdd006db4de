import { pairDifferences, type PairSide } from "../pairs";
import { findEntrypoint } from "./containers";
import { configMapsOf, effectiveArgv, objectName } from "./objects";
import type { Facts, Finding, Obj, RenderedStack } from "./types";

/** Role of a DGD component (`type` / `subComponentType` / `componentType`, lower-cased). */
export function componentRole(c: Obj): string {
    return String(c?.subComponentType ?? c?.type ?? c?.componentType ?? "").toLowerCase();
}

/** The main container of a DGD component (`main`, else the first). */
export function mainContainer(c: Obj): Obj | undefined {
    const cs: Obj[] = c?.podTemplate?.spec?.containers ?? [];
    return cs.find((x) => x?.name === "main") ?? cs[0];
}

/** A container as one side of a pair: image, argv, env, mounts with the content of mounted ConfigMaps of the stack. */
export function pairSideOf(container: Obj, podSpec: Obj, configMaps: Map<string, Obj>, ns: string | undefined): PairSide {
    const env: Record<string, string> = {};
    for (const e of container.env ?? [])
        env[e.name] = e.value !== undefined ? String(e.value) : `valueFrom:${JSON.stringify(e.valueFrom ?? {})}`;
    const mounts = (container.volumeMounts ?? []).map((m: Obj) => {
        const vol = (podSpec.volumes ?? []).find((v: Obj) => v.name === m.name) ?? {};
        const { name: _n, ...source } = vol;
        const cm = vol.configMap?.name ? configMaps.get(`${ns ?? ""}/${vol.configMap.name}`) : undefined;
        return `${m.mountPath}${m.subPath ? `#${m.subPath}` : ""}${m.readOnly ? " (ro)" : ""} <- ${JSON.stringify(source)}${cm ? ` data ${JSON.stringify(cm.data ?? {})}` : ""}`;
    });
    return { image: container.image, argv: effectiveArgv(container), env, mounts };
}

/**
 * Rule: the prefill and decode workers of every DynamoGraphDeployment are identical except their role settings
 * (upstream/pairs.ts): image, every flag, env var and mount. Each difference is one finding naming both sides and
 * the key.
 */
export function pairRule(stack: RenderedStack, facts: Facts): Finding[] {
    const out: Finding[] = [];
    const configMaps = configMapsOf(stack.objects);
    for (const o of stack.objects) {
        if (o?.kind !== "DynamoGraphDeployment") continue;
        const comps: Obj[] = o.spec?.components ?? [];
        const prefill = comps.filter((c) => componentRole(c) === "prefill"),
            decode = comps.filter((c) => componentRole(c) === "decode");
        for (const p of prefill)
            for (const d of decode) {
                const pc = mainContainer(p),
                    dc = mainContainer(d);
                if (!pc || !dc) continue;
                const ps = pairSideOf(pc, p.podTemplate?.spec ?? {}, configMaps, o.metadata?.namespace),
                    ds = pairSideOf(dc, d.podTemplate?.spec ?? {}, configMaps, o.metadata?.namespace);
                const pe = findEntrypoint([...ps.argv], facts),
                    de = findEntrypoint([...ds.argv], facts);
                const f = (key: string, message: string) =>
                    out.push({
                        stack: stack.stack,
                        object: objectName(o),
                        container: `${p.name}/${pc.name} and ${d.name}/${dc.name}`,
                        key,
                        message,
                    });
                if (pe?.id !== de?.id) {
                    f(
                        "command",
                        `prefill runs ${pe?.id ?? "an unknown entry point"} but decode runs ${de?.id ?? "an unknown entry point"}; their KV formats and transfer protocols differ`,
                    );
                    continue;
                }
                for (const x of pairDifferences(ps, ds, pe, facts.components, facts.pairRoles, facts.pairKv)) {
                    f(
                        x.key,
                        `prefill has ${x.key} ${x.prefill ?? "(unset)"} but decode has ${x.decode ?? "(unset)"}: ${x.why}${x.source ? ` [${x.source}]` : ""}`,
                    );
                }
            }
    }
    return out;
}
