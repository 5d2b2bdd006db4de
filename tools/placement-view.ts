/**
 * Where each model runs, from the hub's outputs (`modelPlacement`, `failover`: programs/hub.ts): every spoke a model
 * is placed on with its endpoint and fallbacks, and the global hostname with the spokes behind it. Shown by
 * `npm run status`; the render report shows the same from the hub file (tools/report/markdown.ts).
 */

type Placement = Record<string, Array<{ spoke: string; endpoint: string; fallback?: string[] }>>;

/** Text lines (empty when the outputs carry no placement: a hub deployed before it). */
export function placementLines(json: unknown): string[] {
    const root = ((json as { outputs?: unknown })?.outputs ?? json) as { modelPlacement?: Placement; failover?: unknown };
    const p = root?.modelPlacement;
    if (!p || typeof p !== "object") return [];
    const out = ["placement (model: spoke/endpoint -> fallback):"];
    for (const [model, list] of Object.entries(p))
        out.push(
            `  ${model}: ${list.map((x) => `${x.spoke}/${x.endpoint}${x.fallback?.length ? ` -> ${x.fallback.join(", ")}` : ""}`).join("; ")}`,
        );
    const f = root.failover as { hostname?: string; mode?: string; spokes?: string[] } | undefined;
    if (f && typeof f === "object" && f.hostname)
        out.push(`global hostname ${f.hostname} (${f.mode}, Route 53 health-checked): ${(f.spokes ?? []).join(", ")}`);
    return out;
}
