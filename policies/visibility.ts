import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { containerPolicy, type Finding, stackPolicy } from "./lib/report";
import { chartName, HELM_TYPES } from "./lib/resources";
import { type ContainerView, gpusOf, inScope, rdmaDevices } from "./lib/workloads";
import { peek } from "./lib/unknown";
import { charts } from "../upstream/charts";
import { kvEnvFamilies } from "../upstream/kv-transport";
import type { ChartFacts } from "../upstream/types";

/**
 * What the pack cannot see, it refuses. Every RDMA/transport rule reads settings from the
 * manifests of the stack: env literals and the ConfigMaps/Secrets the stack defines, inline Helm values of charts
 * whose values layout the rules were written against. A setting that reaches a workload any other way (env from a
 * ConfigMap outside the stack, a Helm values file, a chart version with other keys, a config file the engine reads,
 * a shell script that exports it) would make every rule pass while the workload runs with it.
 */

/**
 * Environment variables the pack guards: every KV-transport family of upstream/kv-transport.ts (UCX, NCCL, libfabric
 * `FI_`, Mooncake `MC_`/`MOONCAKE_`, NIXL, the engines' settings modules `VLLM_`/`SGLANG_`/`TRTLLM_`, KVBM, CUDA
 * registration), plus Dynamo's own (`DYN_`, which selects the NIXL backend and the router) and the preflight's
 * (`PREFLIGHT_`).
 */
export const GUARDED_ENV = new RegExp(`${kvEnvFamilies.map((f) => `(?:${f.match.source})`).join("|")}|^(?:DYN_|PREFLIGHT_)`);

/** Containers whose transport settings the pack judges: KV/collective movers, Dynamo workers, RDMA or GPU users. */
function guardedContainer(c: ContainerView): boolean {
    if (c.init && !/preflight/i.test(c.container)) return false;
    return inScope(c) || ["prefill", "decode", "worker"].includes(c.role) || rdmaDevices(c, "limits").total > 0 || gpusOf(c) > 0;
}

/**
 * Config files the transports read besides env: NCCL reads `NCCL_CONF_FILE`, else `/etc/nccl.conf` and
 * `~/.nccl.conf` (NCCL docs "Environment Variables": "NCCL_CONF_FILE ... /etc/nccl.conf"); UCX reads `ucx.conf`
 * from its config directory `/etc/ucx` (or `UCX_CONFIG_DIR`; openucx/ucx src/ucs/config/parser.c
 * `ucs_config_parse_config_files`). A ConfigMap mounted there sets UCX_/NCCL_ variables the pack cannot see.
 */
const CONFIG_FILE_MOUNT = /(^|\/)(nccl\.conf|\.nccl\.conf|ucx\.conf)$|^\/etc\/ucx(\/|$)/;

/** Shell text that assigns a guarded variable (`export UCX_TLS=tcp`, `UCX_TLS=tcp python3 ...`, `env NCCL_NET=Socket`). */
const SHELL_ASSIGNMENT = /(?:^|[\s;&|(]|export\s+|env\s+)((?:UCX|NCCL|FI|MC|MOONCAKE|NIXL|VLLM|SGLANG|TRTLLM|DYN)_[A-Z0-9_]+)=/;

/** Guarded settings must reach guarded containers by a path the pack reads. */
export const guardedEnvVisible = containerPolicy(
    {
        name: "guarded-settings-visible",
        description:
            "Transport settings (UCX_*, NCCL_*, FI_*, MC_*/MOONCAKE_*, NIXL_*, VLLM_*/SGLANG_*/TRTLLM_*/DYN_*) must reach RDMA/GPU containers only as env the pack can read: no envFrom of a ConfigMap/Secret that is not defined in the stack or whose content is unknown at preview, no guarded valueFrom the pack cannot resolve, no NCCL/UCX config file mounted or named (NCCL_CONF_FILE, /etc/nccl.conf, /etc/ucx/ucx.conf, UCX_CONFIG_DIR), no guarded variable assigned in a shell command. Otherwise every RDMA rule would pass while the workload runs with settings nobody checked.",
        remediationSteps:
            "Set the variable as a literal env entry (or from a ConfigMap defined in this stack with literal data); drop config-file mounts and shell exports of transport variables.",
    },
    (c) => {
        const out: Finding[] = [];
        for (const o of c.opaqueEnv) {
            out.push({
                field: o.field,
                problem: `takes env from ${o.source}, which the pack cannot read (${o.why}), so guarded transport variables could reach the process unseen`,
                fix: "set the variables inline, or define that ConfigMap/Secret in this stack with literal data",
            });
        }
        for (const [name, v] of c.env) {
            if (!GUARDED_ENV.test(name)) continue;
            if (v.opaque)
                out.push({
                    field: v.field,
                    problem: `sets guarded variable ${name} from something the pack cannot read (${v.why ?? "unresolvable"})`,
                    fix: `set ${name} as a literal value`,
                });
            if (name === "NCCL_CONF_FILE" || name === "UCX_CONFIG_DIR")
                out.push({
                    field: v.field,
                    problem: `${name} points NCCL/UCX at a config file whose settings the pack cannot see`,
                    fix: `remove ${name}; set the variables as env`,
                });
        }
        c.volumeMounts.forEach((m, i) => {
            const target = m.subPath ? `${m.mountPath}` : m.mountPath;
            if (CONFIG_FILE_MOUNT.test(target) || (m.subPath && /(nccl|ucx)\.conf$/.test(m.subPath))) {
                out.push({
                    field: `${c.path}.volumeMounts[${i}]`,
                    problem: `mounts ${m.mountPath}, a config file NCCL/UCX read at start, whose settings the pack cannot see`,
                    fix: "remove the mount; set the variables as env",
                });
            }
        });
        const script = [...c.command, ...c.args].join(" ");
        const m = SHELL_ASSIGNMENT.exec(script);
        if (m)
            out.push({
                field: `${c.path}.command`,
                problem: `assigns ${m[1]} in its command line, after the pack read the container env`,
                fix: `set ${m[1]} as an env entry`,
            });
        return out;
    },
    guardedContainer,
);

/**
 * Charts whose inline values the pack reads, with the keys its rules read. The chart versions whose values layout
 * those keys were checked against are the versions upstream/charts has facts for (the only copy; config/versions.ts
 * pins one of them and test/upstream-facts.test.ts keeps the two equal). A chart at another version may have renamed
 * or moved those keys (so the rule would read nothing and pass), and values from files (`valueYamlFiles`) or a
 * post-renderer never reach the pack. Bumping a chart means re-reading its values and recording them in upstream/charts.
 */
export const GUARDED_CHART_KEYS: Record<string, readonly string[]> = {
    "gpu-operator": [
        "driver.enabled",
        "driver.kernelModuleType",
        "driver.rdma.enabled",
        "driver.rdma.useHostMofed",
        "driver.upgradePolicy",
        "devicePlugin.env",
    ],
    "gateway-helm": ["config.envoyGateway.extensionApis", "config.envoyGateway.extensionManager", "config.envoyGateway.rateLimit"],
    "ai-gateway-helm": ["controller.quotaRateLimitFailureModeDeny"],
    "aws-efa-k8s-device-plugin": ["supportedInstanceLabels.keys", "supportedInstanceLabels.values", "tolerations"],
    "dynamo-platform": ["global.grove", "global.lws"],
    "network-operator": ["deployCR"],
};

/** Per guarded chart: the versions with facts in upstream/charts, the keys the pack reads, the facts' sources. */
export function verifiedCharts(
    facts: readonly ChartFacts[] = charts,
): Record<string, { versions: string[]; keys: readonly string[]; source: string }> {
    return Object.fromEntries(
        Object.entries(GUARDED_CHART_KEYS).map(([name, keys]) => {
            const f = facts.filter((c) => c.chart === name);
            return [
                name,
                { versions: f.map((c) => c.version), keys, source: f.map((c) => c.source).join("; ") || "no facts in upstream/charts" },
            ];
        }),
    );
}

/** {@link verifiedCharts} of upstream/charts: per guarded chart, its verified versions, the keys read and the sources. */
export const VERIFIED_CHARTS = verifiedCharts();

/** Helm releases of guarded charts must put every value where the pack reads it. */
export const helmValuesVisible: StackValidationPolicy = stackPolicy(
    {
        name: "helm-values-visible",
        description:
            "A Helm release (helm.sh/v3 Release or v4 Chart) of a chart whose values the pack checks (gpu-operator, gateway-helm, ai-gateway-helm, aws-efa-k8s-device-plugin, dynamo-platform, network-operator) must pin a version whose values layout the rules were written against, take its values inline (no valueYamlFiles), use no post-renderer, and (network-operator) not deploy a NicClusterPolicy from chart values (deployCR) the pack cannot see.",
        remediationSteps:
            "Pass values inline (values:), pin the chart version of config/versions.ts, and record a new chart version in upstream/charts only after re-reading its values.yaml.",
    },
    (_v, resources: PolicyResource[]) => {
        const out: Array<{ subject: string; finding: Finding; urn?: string }> = [];
        for (const r of resources) {
            if (!(HELM_TYPES as readonly string[]).includes(r.type)) continue;
            const name = chartName(r.props.chart);
            const v = VERIFIED_CHARTS[name];
            if (!v) continue;
            const subject = `Helm release ${r.name} (${name})`;
            const add = (field: string, problem: string, fix: string) =>
                out.push({ subject, finding: { field, problem, fix }, urn: r.urn });
            const files = peek(() => (r.props.valueYamlFiles ?? []) as unknown[]);
            if (!files.known || files.value.length > 0)
                add(
                    "valueYamlFiles",
                    `takes values from ${files.known ? `${files.value.length} file(s)` : "files unknown at preview"}, which the pack never reads, so the keys it checks (${v.keys.join(", ")}) could be set there unseen`,
                    "pass the values inline (values:)",
                );
            if (r.props.postrender)
                add(
                    "postrender",
                    "runs a post-renderer that rewrites the chart's manifests after the pack checked its values",
                    "remove the post-renderer",
                );
            const ver = String(r.props.version ?? "");
            if (!v.versions.includes(ver))
                add(
                    "version",
                    `${ver ? `version ${ver}` : "no version (the repository's latest)"} is not one whose values layout the pack was written against (${v.versions.join(", ")}; ${v.source}); its keys may differ, so a setting could be ignored or moved without any rule noticing`,
                    `pin ${v.versions[v.versions.length - 1]}, or re-read the new chart's values and record them in upstream/charts`,
                );
            if (name === "network-operator" && r.props.values?.deployCR === true)
                add(
                    "values.deployCR",
                    "makes the chart create a NicClusterPolicy from values, which the RDMA fabric rules never see",
                    "set deployCR: false and declare the NicClusterPolicy as a resource (BackendFabric)",
                );
        }
        return out;
    },
);

/** The visibility policies. */
export const visibilityPolicies: StackValidationPolicy[] = [guardedEnvVisible, helmValuesVisible];
