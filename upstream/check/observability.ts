/**
 * The observability chain, end to end, for every alert of the rendered PrometheusRules and every panel of the rendered
 * Grafana dashboards: (1) each selected metric exists in the pinned exporter (upstream/metrics.ts, cited); (2) the
 * expression's label matchers name labels the exporter or the scrape sets; (3) the pods that export it exist and run
 * with what enables the exporter (upstream/activation.ts `exporterActivation`: `--enable-metrics` for SGLang, no
 * `--disable-log-stats` for vLLM); (4) every such pod is covered by a PodMonitor that the configured Prometheus selects
 * (kube-prometheus-stack: `release: <name>`, upstream/activation.ts `prometheusSelection`), in its namespace, on the
 * port the exporter serves. Parsing uses the Prometheus project's own PromQL grammar (@prometheus-io/lezer-promql).
 * Pure; see ./view.ts.
 */
import { parser } from "@prometheus-io/lezer-promql";
import { type ExporterFact, exporterActivation, prometheusSelection } from "../activation";
import { knownSeries, type MetricFact, metrics as metricFacts } from "../metrics";
import { argvOf, type Finding, objectName, type Obj, type PodView, podsOf, selects, type StackView } from "./view";

/** Labels Prometheus itself or the PodMonitor sets on every scraped series (prometheus-operator target labels). */
export const SCRAPE_LABELS = ["namespace", "pod", "container", "job", "instance", "endpoint", "service", "__name__"];

/** What one expression selects: series names and, per series, the label names its matchers use. */
export interface Selection {
    series: string;
    labels: string[];
}

/**
 * Parses an expression with the Prometheus grammar.
 * @returns the selected series and their matcher labels, and syntax errors (with offsets)
 */
export function selections(expr: string): { selections: Selection[]; errors: string[] } {
    const out: Selection[] = [];
    const errors: string[] = [];
    const cursor = parser.parse(expr).cursor();
    do {
        if (cursor.type.isError) errors.push(`syntax error at offset ${cursor.from}`);
        if (cursor.type.name === "VectorSelector") {
            const node = cursor.node;
            let series = "";
            const labels: string[] = [];
            const inner = node.cursor();
            if (inner.firstChild()) {
                do {
                    if (inner.type.name === "Identifier") series = expr.slice(inner.from, inner.to);
                    if (inner.type.name === "LabelMatchers") {
                        const m = inner.node.cursor();
                        do {
                            if (m.type.name === "LabelName") labels.push(expr.slice(m.from, m.to));
                        } while (m.next() && m.from < inner.to);
                    }
                } while (inner.nextSibling());
            }
            if (series) out.push({ series, labels });
        }
    } while (cursor.next());
    return { selections: out, errors };
}

/** One expression the stack renders, and where. */
interface Expression {
    object: string;
    key: string;
    expr: string;
    release?: string;
}

function expressionsOf(objects: readonly Obj[]): Expression[] {
    const out: Expression[] = [];
    for (const o of objects) {
        if (o?.kind === "PrometheusRule") {
            for (const g of o.spec?.groups ?? [])
                for (const r of g.rules ?? []) {
                    if (typeof r.expr === "string")
                        out.push({
                            object: objectName(o),
                            key: `alert.${r.alert ?? r.record}`,
                            expr: r.expr,
                            release: o.metadata?.labels?.release,
                        });
                }
        }
        if (o?.kind === "ConfigMap") {
            for (const v of Object.values(o.data ?? {})) {
                let d: any;
                try {
                    d = JSON.parse(String(v));
                } catch {
                    continue;
                }
                for (const p of d?.panels ?? [])
                    for (const t of p.targets ?? []) {
                        if (typeof t.expr === "string") out.push({ object: objectName(o), key: `panel.${p.title}`, expr: t.expr });
                    }
            }
        }
    }
    return out;
}

/** The rendered pods that run an exporter. */
function exportingPods(pods: readonly PodView[], fact: ExporterFact): PodView[] {
    return pods.filter((p) => {
        if (fact.pods.labels) return Object.entries(fact.pods.labels).every(([k, v]) => p.labels[k] === v);
        if (!p.graph) return false;
        if (fact.pods.role && !fact.pods.role.includes(p.componentType ?? "")) return false;
        if (fact.pods.entrypoint) {
            const argv = argvOf(p.main);
            if (!(argv[0] === "python3" && argv[1] === "-m" && argv[2] === fact.pods.entrypoint)) return false;
        }
        return true;
    });
}

/** PodMonitors of the stack that scrape `port` of `pod` and that the configured Prometheus selects. */
function scrapersOf(objects: readonly Obj[], pod: PodView, port: string, release: string | undefined): Obj[] {
    return objects.filter(
        (m) =>
            m?.kind === "PodMonitor" &&
            (release === undefined || m.metadata?.labels?.release === release) &&
            (m.spec?.namespaceSelector?.any === true ||
                (m.spec?.namespaceSelector?.matchNames ?? [m.metadata?.namespace]).includes(pod.namespace)) &&
            selects(m.spec?.selector, pod.labels) &&
            (m.spec?.podMetricsEndpoints ?? []).some((e: Obj) => e.port === port),
    );
}

/** Target labels the PodMonitors add by relabeling (`targetLabel`). */
function relabelTargets(objects: readonly Obj[]): string[] {
    return objects
        .filter((m) => m?.kind === "PodMonitor")
        .flatMap((m) => (m.spec?.podMetricsEndpoints ?? []).flatMap((e: Obj) => (e.relabelings ?? []).map((r: Obj) => r.targetLabel)))
        .filter(Boolean);
}

/**
 * Checks the whole chain for one stack.
 * @param metrics metric facts by family (upstream/metrics.ts); tests plant their own
 */
export function checkObservability(
    s: StackView,
    metrics: Readonly<Record<string, MetricFact>> = metricFacts,
    exporters: readonly ExporterFact[] = exporterActivation,
): Finding[] {
    const out: Finding[] = [];
    const pods = podsOf(s.objects);
    const relabeled = relabelTargets(s.objects);
    const series = new Map<string, string>();
    for (const [family, f] of Object.entries(metrics))
        for (const n of f.type === "histogram" ? [`${family}_bucket`, `${family}_sum`, `${family}_count`] : [family]) series.set(n, family);
    const rules = s.objects.filter((o) => o?.kind === "PrometheusRule");
    const release: string | undefined = rules.map((r) => r.metadata?.labels?.release).find(Boolean);
    const podDone = new Set<string>();
    for (const e of expressionsOf(s.objects)) {
        const { selections: sel, errors } = selections(e.expr);
        for (const err of errors)
            out.push({ stack: s.stack, object: e.object, key: e.key, message: `${err} in ${JSON.stringify(e.expr)}` });
        for (const x of sel) {
            const family = series.get(x.series) ?? (metrics === metricFacts ? knownSeries.get(x.series) : undefined);
            if (!family) {
                out.push({
                    stack: s.stack,
                    object: e.object,
                    key: e.key,
                    message: `reads ${x.series}, which no pinned exporter exports (upstream/metrics.ts)`,
                });
                continue;
            }
            const fact = metrics[family];
            const allowed = new Set([...fact.labels, ...SCRAPE_LABELS, ...relabeled, ...(fact.type === "histogram" ? ["le"] : [])]);
            for (const l of x.labels)
                if (!allowed.has(l))
                    out.push({
                        stack: s.stack,
                        object: e.object,
                        key: e.key,
                        message: `matches label ${l} on ${x.series}, which its exporter does not set (labels ${fact.labels.join(", ") || "none"}, plus scrape labels) [${fact.source}]`,
                    });
            const exp = exporters.find((f) => f.exporter === fact.exporter);
            if (!exp) continue; // the Envoy proxies: their pods are created by Envoy Gateway, not rendered here
            const producers = exportingPods(pods, exp);
            if (!producers.length) {
                out.push({
                    stack: s.stack,
                    object: e.object,
                    key: e.key,
                    message: `reads ${x.series} (${fact.exporter}), but no rendered pod runs that exporter [${exp.source}]`,
                });
                continue;
            }
            for (const p of producers) {
                const k = `${p.object}|${exp.exporter}`;
                if (podDone.has(k)) continue;
                podDone.add(k);
                const argv = argvOf(p.main);
                if (exp.needsFlag && !argv.includes(exp.needsFlag))
                    out.push({
                        stack: s.stack,
                        object: p.object,
                        container: p.main.name,
                        key: exp.needsFlag,
                        message: `${exp.exporter} exports nothing without ${exp.needsFlag}, yet ${e.object} ${e.key} reads ${x.series} [${exp.source}]`,
                    });
                if (exp.forbidsFlag && argv.includes(exp.forbidsFlag))
                    out.push({
                        stack: s.stack,
                        object: p.object,
                        container: p.main.name,
                        key: exp.forbidsFlag,
                        message: `${exp.forbidsFlag} turns the ${exp.exporter} exporter off, yet ${e.object} ${e.key} reads ${x.series} [${exp.source}]`,
                    });
                if (exp.port && exp.portInSpec && !(p.main.ports ?? []).some((x: Obj) => x.name === exp.port)) {
                    out.push({
                        stack: s.stack,
                        object: p.object,
                        container: p.main.name,
                        key: `ports.${exp.port}`,
                        message: `${exp.exporter} serves its metrics on port ${exp.port}, which this container does not declare, so no PodMonitor can scrape it [${exp.source}]`,
                    });
                } else if (exp.port && rules.length && !scrapersOf(s.objects, p, exp.port, release).length) {
                    out.push({
                        stack: s.stack,
                        object: p.object,
                        container: p.main.name,
                        key: `scrape.${exp.port}`,
                        message: `no PodMonitor selected by the configured Prometheus (${release ? `release=${release}` : "any"}; ${prometheusSelection.podMonitorSelector}) scrapes port ${exp.port} of this pod, so ${x.series} read by ${e.object} ${e.key} is never collected [${prometheusSelection.source}]`,
                    });
                }
            }
        }
    }
    return out;
}

/** The rule shape. */
export function observabilityRule(s: StackView): Finding[] {
    return checkObservability(s);
}

/** Per endpoint (graph): which exporters' series are scraped, for the render report. */
export function scrapedSignals(
    s: StackView,
    exporters: readonly ExporterFact[] = exporterActivation,
): Map<string, Array<{ exporter: string; scraped: boolean; enabled: boolean }>> {
    const pods = podsOf(s.objects);
    const rules = s.objects.filter((o) => o?.kind === "PrometheusRule");
    const release: string | undefined = rules.map((r) => r.metadata?.labels?.release).find(Boolean);
    const out = new Map<string, Array<{ exporter: string; scraped: boolean; enabled: boolean }>>();
    for (const exp of exporters) {
        for (const p of exportingPods(pods, exp)) {
            if (!p.graph) continue;
            const list = out.get(p.graph) ?? [];
            const argv = argvOf(p.main);
            const enabled = (!exp.needsFlag || argv.includes(exp.needsFlag)) && (!exp.forbidsFlag || !argv.includes(exp.forbidsFlag));
            const scraped = !!exp.port && scrapersOf(s.objects, p, exp.port, release).length > 0;
            const prev = list.find((x) => x.exporter === exp.exporter);
            if (prev) {
                prev.scraped &&= scraped;
                prev.enabled &&= enabled;
            } else list.push({ exporter: exp.exporter, scraped, enabled });
            out.set(p.graph, list);
        }
    }
    return out;
}
