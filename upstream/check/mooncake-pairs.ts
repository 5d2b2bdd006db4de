import { findEntrypoint } from "./containers";
import { configMapsOf, effectiveArgv, mountedFiles, objectName, podSpecs, safeJson } from "./objects";
import type { Facts, Finding, Obj, RenderedStack } from "./types";

/**
 * The Mooncake settings both ends of a KV exchange must share: the transfer protocol (an rdma client and a tcp store
 * never exchange a segment), the metadata server both register with, and the master both ask for placements
 * (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/mooncake/mooncake_config.py#MooncakeConfig.load_from_env).
 */
const SHARED = [
    { key: "protocol", env: "MOONCAKE_PROTOCOL", json: "protocol", fallback: "tcp" },
    { key: "metadata server", env: "MOONCAKE_TE_META_DATA_SERVER", json: "metadata_server", fallback: "P2PHANDSHAKE" },
    { key: "master", env: "MOONCAKE_MASTER", json: "master_server_address", fallback: "(unset)" },
] as const;

type Side = { where: string; values: Record<string, string> };

/** A container's Mooncake client settings: its env, then a mounted mooncake.json, then SGLang's HiCache extra config. */
function mooncakeSide(
    c: Obj,
    spec: Obj,
    configMaps: Map<string, Obj>,
    ns: string | undefined,
    facts: Facts,
): Record<string, string> | undefined {
    const env: Record<string, string> = {};
    for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = String(e.value);
    const argv = effectiveArgv(c);
    const i = argv.indexOf("--hicache-storage-backend-extra-config");
    const hicache = i >= 0 ? safeJson(argv[i + 1] ?? "") : undefined;
    const files = mountedFiles(c, spec, configMaps, ns);
    const cfgPath = env.MOONCAKE_CONFIG_PATH;
    const file = cfgPath && files[cfgPath] ? safeJson(files[cfgPath]) : undefined;
    const uses =
        SHARED.some((s) => env[s.env] !== undefined) ||
        hicache ||
        file ||
        findEntrypoint(argv, facts)?.id === "mooncake.mooncake_store_service";
    if (!uses) return undefined;
    return Object.fromEntries(SHARED.map((s) => [s.key, String(file?.[s.json] ?? hicache?.[s.json] ?? env[s.env] ?? s.fallback)]));
}

/**
 * Rule: every engine container of a graph that uses the graph's Mooncake pool agrees with the pool's store on protocol,
 * metadata server and master. Stores are the Deployments/StatefulSets named `<graph>-mooncake-store*` (lib/mooncake.ts).
 */
export function mooncakePairRule(stack: RenderedStack, facts: Facts): Finding[] {
    const out: Finding[] = [];
    const configMaps = configMapsOf(stack.objects);
    const sidesOf = (o: Obj): Side[] =>
        podSpecs(o).flatMap(({ label, spec }) =>
            (spec.containers ?? []).flatMap((c: Obj) => {
                const v = mooncakeSide(c, spec, configMaps, o.metadata?.namespace, facts);
                return v ? [{ where: `${objectName(o)}${label ? ` ${label}` : ""} container ${c.name}`, values: v }] : [];
            }),
        );
    for (const g of stack.objects.filter((o) => o?.kind === "DynamoGraphDeployment")) {
        const stores = stack.objects
            .filter(
                (o) =>
                    ["Deployment", "StatefulSet"].includes(o?.kind) &&
                    o.metadata?.namespace === g.metadata?.namespace &&
                    String(o.metadata?.name ?? "").startsWith(`${g.metadata?.name}-mooncake-store`),
            )
            .flatMap(sidesOf);
        if (stores.length === 0) continue;
        for (const w of sidesOf(g))
            for (const s of stores)
                for (const k of SHARED) {
                    if (w.values[k.key] !== s.values[k.key]) {
                        out.push({
                            stack: stack.stack,
                            object: objectName(g),
                            container: `${w.where} and ${s.where}`,
                            key: k.key,
                            message: `the engine has Mooncake ${k.key} ${w.values[k.key]} but its store has ${s.values[k.key]}: the two never exchange a KV segment (or one falls back to TCP) while both pods are healthy`,
                        });
                    }
                }
    }
    return out;
}
