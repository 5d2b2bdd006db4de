import { pairDifferences, type PairSide } from "../pairs";
import { findEntrypoint } from "./containers";
import { configMapsOf, effectiveArgv, objectName } from "./objects";
import type { Facts, Finding, Obj, RenderedStack } from "./types";
import { dgdRole, effectivePodSpec, podTemplatesOf } from "./walk";

/** Role of a DGD component (`type` / `subComponentType` / `componentType`, lower-cased; ./walk.ts `dgdRole`). */
export function componentRole(c: Obj): string {
    return dgdRole(c?.type ?? c?.componentType, c?.subComponentType);
}

/** The main container of a pod spec (`main`, else the first). */
export function mainContainer(spec: Obj): Obj | undefined {
    const cs: Obj[] = spec?.containers ?? [];
    return cs.find((x) => x?.name === "main") ?? cs[0];
}

/**
 * A container as one side of a pair: image, argv, env (each `envFrom` source as `envFrom[i]`, with the data of a
 * ConfigMap of the stack it names), mounts with `readOnly` and the content of mounted ConfigMaps of the stack.
 */
export function pairSideOf(container: Obj, podSpec: Obj, configMaps: Map<string, Obj>, ns: string | undefined): PairSide {
    const env: Record<string, string> = {};
    (container.envFrom ?? []).forEach((ef: Obj, i: number) => {
        const cm = ef?.configMapRef?.name ? configMaps.get(`${ns ?? ""}/${ef.configMapRef.name}`) : undefined;
        env[`envFrom[${i}]`] = `${JSON.stringify(ef)}${cm ? ` data ${JSON.stringify(cm.data ?? {})}` : ""}`;
    });
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
 * Rule: the prefill and decode workers of every DynamoGraphDeployment (both API versions, as the shared walker
 * ./walk.ts reads them) are identical except their role settings (upstream/pairs.ts): image, every flag, env var and
 * mount. Each difference is one finding naming both sides and the key. Closed world: a pair whose entry point
 * upstream/ does not record cannot be compared and is refused.
 */
export function pairRule(stack: RenderedStack, facts: Facts): Finding[] {
    const out: Finding[] = [];
    const configMaps = configMapsOf(stack.objects);
    for (const o of stack.objects) {
        if (o?.kind !== "DynamoGraphDeployment") continue;
        const comps = podTemplatesOf(o);
        const prefill = comps.filter((c) => c.role === "prefill"),
            decode = comps.filter((c) => c.role === "decode");
        for (const p of prefill)
            for (const d of decode) {
                const pspec = effectivePodSpec(p),
                    dspec = effectivePodSpec(d);
                const pc = mainContainer(pspec),
                    dc = mainContainer(dspec);
                const f = (key: string, message: string) =>
                    out.push({
                        stack: stack.stack,
                        object: objectName(o),
                        container: `${p.component}/${pc?.name ?? "(none)"} and ${d.component}/${dc?.name ?? "(none)"}`,
                        key,
                        message,
                    });
                if (!pc || !dc) {
                    f("containers", `${pc ? "decode" : "prefill"} has no container, so the pair cannot be compared`);
                    continue;
                }
                const ps = pairSideOf(pc, pspec, configMaps, o.metadata?.namespace),
                    ds = pairSideOf(dc, dspec, configMaps, o.metadata?.namespace);
                const pe = findEntrypoint([...ps.argv], facts),
                    de = findEntrypoint([...ds.argv], facts);
                if (pe?.id !== de?.id || !pe) {
                    f(
                        "command",
                        `prefill runs ${pe?.id ?? "an unknown entry point"} but decode runs ${de?.id ?? "an unknown entry point"}; ${pe ? "their KV formats and transfer protocols differ" : "upstream/ records no KV settings for it, so the pair cannot be proven compatible"}`,
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
