/**
 * One Prometheus: the Prometheus the Planner queries (its `PROMETHEUS_ENDPOINT`, and the dynamo-platform chart's
 * `dynamo-operator.dynamo.metrics.prometheusEndpoint` the operator hands to planners) must be the Prometheus that
 * selects the stack's PodMonitors and PrometheusRules (kube-prometheus-stack release `release: <name>`, served by the
 * Service `<fullname>-prometheus` in the namespace of the rules). Otherwise the Planner reads a Prometheus that scrapes
 * none of its series (or none at all) and never scales. Pure; see ./view.ts.
 */
import { kubePrometheusStackPrometheus, kubePrometheusStackServiceSources } from "../activation";
import { envOf, type Finding, podsOf, type StackView, valueAt } from "./view";

/** Host and port of an http(s) URL, or undefined. */
function hostPort(url: string): { host: string; port: string } | undefined {
    try {
        const u = new URL(url);
        return { host: u.hostname.replace(/\.$/, ""), port: u.port || (u.protocol === "https:" ? "443" : "80") };
    } catch {
        return undefined;
    }
}

/** Does `host` name the Service `service` in `namespace` (short, namespaced or fully qualified)? */
function namesService(host: string, service: string, namespace: string): boolean {
    return [`${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`].includes(host);
}

/** Checks that every Prometheus URL the stack hands to Dynamo names the Prometheus that selects its scrape objects. */
export function checkPrometheusAgreement(s: StackView): Finding[] {
    const rules = s.objects.filter((o) => o?.kind === "PrometheusRule" && o.metadata?.labels?.release);
    if (!rules.length) return [];
    const release = String(rules[0].metadata.labels.release);
    const namespace = String(rules[0].metadata.namespace);
    const want = kubePrometheusStackPrometheus(release, namespace);
    const cite = kubePrometheusStackServiceSources.join(", ");
    const out: Finding[] = [];
    const judge = (object: string, container: string | undefined, key: string, url: unknown) => {
        const hp = typeof url === "string" ? hostPort(url) : undefined;
        if (hp && namesService(hp.host, want.service, namespace) && hp.port === String(want.port)) return;
        out.push({
            stack: s.stack,
            object,
            container,
            key,
            message: `${JSON.stringify(url)} is not the Prometheus that selects this stack's PodMonitors and PrometheusRules (release=${release} in ${namespace}: http://${want.host}:${want.port}), so the Planner reads series nobody collects for it [${cite}]`,
        });
    };
    for (const p of podsOf(s.objects).filter((x) => x.componentType === "planner")) {
        const e = envOf(p.main, "PROMETHEUS_ENDPOINT");
        if (e) judge(p.object, p.main.name, "env.PROMETHEUS_ENDPOINT", e.value);
    }
    for (const r of s.releases.filter((x) => x.chart === "dynamo-platform")) {
        const v = valueAt(r.values, "dynamo-operator.dynamo.metrics.prometheusEndpoint");
        if (v !== undefined) judge(`Release/${r.name}`, undefined, "dynamo-operator.dynamo.metrics.prometheusEndpoint", v);
    }
    // The GPU Operator's DCGM exporter: running but unscraped unless its ServiceMonitor is on and carries the label
    // this Prometheus selects (NVIDIA/gpu-operator@v25.10.1:deployments/gpu-operator/values.yaml `serviceMonitor.enabled:
    // false`; controllers/object_controls.go `ServiceMonitor` copies `additionalLabels` onto the object).
    for (const r of s.releases.filter((x) => x.chart === "gpu-operator")) {
        if (valueAt(r.values, "dcgmExporter.enabled") === false) continue;
        const on = valueAt(r.values, "dcgmExporter.serviceMonitor.enabled") === true;
        const labels = (valueAt(r.values, "dcgmExporter.serviceMonitor.additionalLabels") ?? {}) as Record<string, string>;
        if (!on || labels.release !== release) {
            out.push({
                stack: s.stack,
                object: `Release/${r.name}`,
                key: "dcgmExporter.serviceMonitor",
                message: `the DCGM exporter runs but ${on ? `its ServiceMonitor carries release=${labels.release ?? "(none)"}` : "its ServiceMonitor is off (chart default)"}, so the Prometheus selecting release=${release} never scrapes GPU metrics [NVIDIA/gpu-operator@v25.10.1:deployments/gpu-operator/values.yaml, NVIDIA/gpu-operator@v25.10.1:controllers/object_controls.go]`,
            });
        }
    }
    return out;
}
