import { parser } from "@prometheus-io/lezer-promql";
import { knownSeries } from "../upstream/metrics";

/** What {@link checkPromQL} found in one expression. */
export interface PromQLCheck {
    /** Series names the expression selects (vector and matrix selectors, `__name__` excluded). */
    series: string[];
    /** Problems: syntax errors (with offset) and selected series that no upstream fact knows. */
    errors: string[];
}

/**
 * Parses a PromQL expression with the Prometheus project's own grammar (@prometheus-io/lezer-promql, the parser of
 * the Prometheus UI) and checks that every selected series is an exported metric of the pinned upstream
 * (upstream/metrics.ts `knownSeries`). A regex is no parser: nested calls, `by` clauses and label matchers are read
 * from the syntax tree.
 */
export function checkPromQL(expr: string, known: ReadonlyMap<string, string> = knownSeries): PromQLCheck {
    const errors: string[] = [];
    const series: string[] = [];
    const cursor = parser.parse(expr).cursor();
    do {
        if (cursor.type.isError)
            errors.push(
                `syntax error at offset ${cursor.from}: ${JSON.stringify(expr.slice(Math.max(0, cursor.from - 20), cursor.from + 20))}`,
            );
        if (cursor.type.name === "Identifier" && cursor.node.parent?.type.name === "VectorSelector") {
            const name = expr.slice(cursor.from, cursor.to);
            series.push(name);
            if (!known.has(name)) errors.push(`unknown metric ${name} (not in upstream/metrics.ts)`);
        }
    } while (cursor.next());
    return { series, errors };
}
