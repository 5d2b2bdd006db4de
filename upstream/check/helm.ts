import type { ChartFacts } from "../types";
import type { CheckResult, Facts, Finding, RenderedStack } from "./types";

/** Dotted leaf paths of a values object (arrays and scalars are leaves). */
export function valuesPaths(v: unknown, at = ""): string[] {
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) {
        return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => valuesPaths(x, at ? `${at}.${k}` : k));
    }
    return at ? [at] : [];
}

const segMatch = (pattern: string[], p: string[]) => pattern.length === p.length && pattern.every((s, i) => s === "*" || s === p[i]);
const prefixMatch = (pattern: string[], p: string[]) => pattern.length <= p.length && pattern.every((s, i) => s === "*" || s === p[i]);

/** The chart facts of a release (`chart` by name, repository or `.../<chart>`, at exactly its version). */
export function chartFactsOf(release: { chart: string; version: string }, charts: readonly ChartFacts[]): ChartFacts | undefined {
    return charts.find(
        (c) =>
            c.version === release.version &&
            (c.chart === release.chart || c.repository === release.chart || release.chart.endsWith(`/${c.chart}`)),
    );
}

/**
 * The Helm values keys of one Release that its chart's facts do not list (upstream/charts, ChartFacts). This is where
 * chart facts are read: a Release whose chart@version has no facts entry is one finding ("no facts for chart X@v").
 */
export function checkHelmValues(
    release: { chart: string; version: string; repo?: string; values?: unknown },
    charts: readonly ChartFacts[],
): Array<{ key: string; message: string }> {
    const facts = chartFactsOf(release, charts);
    if (!facts) return [{ key: "chart", message: `no facts for chart ${release.chart}@${release.version}` }];
    const keys = facts.valuesKeys.map((k) => k.split("."));
    const open = (facts.openSubtrees ?? []).map((k) => k.split("."));
    const out: Array<{ key: string; message: string }> = [];
    for (const p of valuesPaths(release.values ?? {})) {
        const parts = p.split(".");
        if (keys.some((k) => segMatch(k, parts)) || open.some((o) => prefixMatch(o, parts))) continue;
        out.push({ key: `values.${p}`, message: `values key ${p} is not read by ${facts.chart}@${facts.version} (${facts.source})` });
    }
    return out;
}

/** Rule: every Helm release's chart@version has facts and every inline values key is one the chart reads. */
export function helmValuesRule(stack: RenderedStack, facts: Facts, out: CheckResult): Finding[] {
    return stack.releases.flatMap((r) => {
        out.checkedReleases++;
        return checkHelmValues(r, facts.charts).map((x) => ({
            stack: stack.stack,
            object: `helm Release ${r.name} (${r.chart}@${r.version})`,
            key: x.key,
            message: x.message,
        }));
    });
}
