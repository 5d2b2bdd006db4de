/**
 * `out/<stack>/report.md`: what will run where, on which GPUs and rails, and what the policy pack found, in a
 * form a reviewer reads in a minute. Deterministic (no clock, no paths outside the stack): a rerun writes the
 * same bytes.
 */
import type { EndpointView, HubView, PolicyView, PoolView, SpokeView, StackView } from "./model";

/** The rollouts among `endpoints` (with the spoke each runs on), as a section; empty when none. */
function rolloutSection(eps: Array<{ spoke?: string; e: EndpointView }>): string[] {
    const ro = eps.filter((x) => x.e.rollout);
    if (!ro.length) return [];
    return [
        "## Rollouts",
        "",
        "Gated canary rollouts (docs/rollout.md): each step is one reviewed `pulumi up` written by `npm run rollout`; both revisions run side by side, each its own DynamoGraphDeployment and Dynamo namespace.",
        "",
        ...table(
            ["endpoint", "revision", "changes", "phase", "step", "weights", "held", "last gate"],
            ro.map(({ spoke, e }) => {
                const r = e.rollout!;
                return [
                    spoke ? `${spoke}/${e.name}` : e.name,
                    r.revision,
                    r.changes.join(", "),
                    r.phase,
                    `${r.step} of ${r.steps.join(" → ")}`,
                    r.graphs
                        .map((g) => `${g.name} (${g.engine}) ${g.weight}%${g.role === "target" && !g.ready ? " not ready" : ""}`)
                        .join(" · "),
                    r.held ?? "-",
                    r.lastGate ?? "-",
                ];
            }),
        ),
        "",
    ];
}

/** Escapes text for a Markdown table cell. */
export function cell(s: unknown): string {
    return String(s ?? "")
        .replace(/\\/g, "\\\\")
        .replace(/\|/g, "\\|")
        .replace(/\r?\n/g, " ");
}

function table(head: string[], rows: unknown[][]): string[] {
    return [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`)];
}

/** `used` of `capacity` as a 20-character bar plus percent, e.g. `████████████░░░░░░░░ 12/16 (75%)`. */
export function bar(used: number, capacity: number, width = 20): string {
    const frac = capacity > 0 ? used / capacity : 0;
    const full = Math.min(width, Math.round(frac * width));
    return `\`${"█".repeat(full)}${"░".repeat(width - full)}\` ${used}/${capacity} (${Math.round(frac * 100)}%)`;
}

/** `prefill 2 x 2 GPU, decode 1 x 4 GPU` or `2 workers x 4 GPU`. */
export function topologyText(e: EndpointView): string {
    const g = e.groups.map((w) => `${w.role} ${w.replicas} x ${w.gpusPerWorker} GPU`).join(", ");
    return `${e.mode}: ${g}`;
}

function gpuCell(e: EndpointView): string {
    if (e.renderedGpus === undefined || e.renderedGpus === e.gpus) return String(e.gpus);
    return `${e.gpus} placed, ${e.renderedGpus} rendered ⚠`;
}

/** Planner budget cell: `12`, `16 (default)` when the file does not set it, `off`. */
function budgetCell(e: EndpointView): string | number {
    if (e.plannerBudget === undefined) return "off";
    return e.plannerBudgetDefault ? `${e.plannerBudget} (default)` : e.plannerBudget;
}

/**
 * Everything a reviewer should look at before approving, in one list at the top of the report (and of the PR comment,
 * tools/report/comment.ts): what the program logged as a warning while it ran, and capacity the placement overruns.
 */
export function warningsOf(v: StackView): string[] {
    const out = [...v.warnings];
    if (v.kind === "hub") {
        for (const s of v.spokes) {
            if (s.placedGpus > s.capacityGpus)
                out.push(`spoke ${s.name}: placement needs ${s.placedGpus} GPUs, the spoke has ${s.capacityGpus}`);
            if (s.plannerBudgetGpus > s.capacityGpus) {
                const d = s.endpoints.filter((e) => e.plannerBudgetDefault).map((e) => e.name);
                out.push(
                    `spoke ${s.name}: planner budgets and fixed graphs add up to ${s.plannerBudgetGpus} GPUs, more than its ${s.capacityGpus}: a planner cannot grow past the GPUs the others leave free${d.length ? ` (${d.join(", ")} use${d.length === 1 ? "s" : ""} the default planner.maxGpuBudget)` : ""}`,
                );
            }
        }
    } else {
        if (v.placedGpus > v.capacityGpus) out.push(`placement needs ${v.placedGpus} GPUs, the spoke has ${v.capacityGpus}`);
        if (v.plannerBudgetGpus > v.capacityGpus)
            out.push(
                `planner budgets and fixed graphs add up to ${v.plannerBudgetGpus} GPUs, more than the ${v.capacityGpus} the spoke has: a planner cannot grow past the GPUs the others leave free`,
            );
        for (const e of v.endpoints)
            if (e.renderedGpus !== undefined && e.renderedGpus !== e.gpus)
                out.push(`endpoint ${e.name}: ${e.gpus} GPUs placed by the hub, ${e.renderedGpus} rendered`);
    }
    return out;
}

/** The `## Warnings` section (nothing when there is none). */
function warningSection(v: StackView): string[] {
    const w = warningsOf(v);
    return w.length ? ["## Warnings", "", ...w.map((x) => `- ⚠ ${x}`), ""] : [];
}

function capacityLines(placed: number, budgets: number, capacity: number): string[] {
    const lines = [`- GPUs placed: ${bar(placed, capacity)}`, `- planner budgets and fixed graphs: ${bar(budgets, capacity)}`];
    if (placed > capacity) lines.push(`- ⚠ placement needs ${placed} GPUs, the spoke has ${capacity}`);
    if (budgets > capacity)
        lines.push(
            `- ⚠ planner budgets and fixed graphs add up to ${budgets} GPUs, more than the ${capacity} the spoke has: a planner cannot grow past the GPUs the others leave free`,
        );
    return lines;
}

function policySection(p: PolicyView): string[] {
    const components = p.resources - p.resourcesChecked;
    const applied = new Set(p.applied);
    const mine = p.policies.filter((x) => applied.has(x.name));
    const others = p.policies.filter((x) => !applied.has(x.name));
    const lines = [
        "## Policies",
        "",
        `The pack's ${p.run} policies ran on the ${p.resourcesChecked} resources that hold settings` +
            `${components > 0 ? ` (the other ${components} of the ${p.resources} are component resources grouping them)` : ""}: ` +
            `**${p.mandatory} mandatory violation(s)**, ${p.advisory} advisory finding(s). ` +
            `${mine.length} of them found resources of theirs to check in this stack; ${others.length} had nothing here.`,
        "",
    ];
    if (p.findings.length)
        lines.push(
            ...table(
                ["level", "policy", "resource", "finding"],
                p.findings.map((f) => [f.level, f.policy, f.resource ?? "(stack)", f.message]),
            ),
            "",
        );
    const list = (xs: typeof p.policies) => xs.map((x) => `- \`${x.name}\` (${x.enforcementLevel})`);
    if (mine.length)
        lines.push(
            `<details><summary>policies that checked this stack (${mine.length})</summary>`,
            "",
            ...list(mine),
            "",
            "</details>",
            "",
        );
    if (others.length)
        lines.push(
            `<details><summary>policies with nothing to check in this stack (${others.length})</summary>`,
            "",
            ...list(others),
            "",
            "</details>",
            "",
        );
    return lines;
}

/** Column header -> the profile field it shows, to mark a column whose values the profile says were inferred. */
const RAIL_FIELDS: Record<string, string[]> = {
    "rail / leaf": ["rails[].rail"],
    GPU: ["rails[].gpu"],
    "GPU PCI": ["rails[].gpuPciAddress"],
    HCA: ["rails[].hca"],
    netdev: ["rails[].netdev"],
    "HCA PCI": ["rails[].pciAddress"],
    NUMA: ["rails[].numa"],
    "Gb/s": ["rails[].linkRateGbps"],
};

function poolLines(p: PoolView, fabric: string): string[] {
    const inferred = new Set(p.inferred.map((i) => i.path.replace(/\[\d+\]/g, "[]")));
    const mark = (h: string, fields: string[] = []) => (fields.some((f) => inferred.has(f)) ? `${h} (inferred)` : h);
    const hosts = p.scaling
        ? `${p.nodes.length} nodes (EKS node group, desired ${p.scaling.desired}, min ${p.scaling.min}, max ${p.scaling.max})`
        : `${p.nodes.length} nodes: ${p.nodes.join(", ")}`;
    const lines = [
        `### Pool \`${p.name}\`: ${p.model} (profile \`${p.profile}\`)`,
        "",
        `${hosts}; ${p.gpusPerNode} x ${p.gpuProduct} ${p.gpuMemoryGB} GB per node, ${p.numaNodes} NUMA nodes, ${p.capacityGpus} GPUs.`,
        "",
    ];
    if (p.rails.length) {
        lines.push(
            `Backend (${fabric}, east-west, KV transfer): rail i of every node is cabled to leaf switch i.`,
            "",
            ...table(
                ["rail / leaf", "GPU", "GPU PCI", "HCA", "netdev", "HCA PCI", "NUMA", "Gb/s", "RDMA resource", "network", "IP pool"].map(
                    (h) => mark(h, RAIL_FIELDS[h]),
                ),
                p.rails.map((r) => [
                    r.rail,
                    `GPU${r.gpu}`,
                    r.gpuPciAddress,
                    r.hca,
                    r.netdev,
                    r.pciAddress,
                    r.numa,
                    r.linkRateGbps,
                    r.rdmaResource ?? "⚠ none",
                    r.network ?? (p.railNetworks ? "⚠ none" : "off (railNetworks)"),
                    r.subnet ? `${r.ipPool} ${r.subnet} (/node ${r.perNodeBlockSize})` : p.railNetworks ? "⚠ none" : "off (railNetworks)",
                ]),
            ),
            "",
        );
    }
    if (p.efa) {
        lines.push(
            `Backend (EFA, east-west, KV transfer): ${p.efa.instanceType}, ${p.efa.networkCards} network cards x ${p.efa.cardRateGbps} Gb/s` +
                ` = ${p.efa.networkCards * p.efa.cardRateGbps} Gb/s per node, ${p.efa.devicesPerGpu} EFA per GPU; launch template: ${p.efa.efaInterfaces} EFA interfaces,` +
                ` ${p.efa.enaInterfaces} ENA (card 0). EFA devices are handed out by the EFA device plugin (\`vpc.amazonaws.com/efa\`), not pinned per rail.`,
            "",
        );
    }
    if (p.frontend.length) {
        lines.push(
            "Frontend NICs (north-south: requests, tokens, control plane; KV never rides them):",
            "",
            ...table(
                ["HCA", "netdev", "PCI", "NUMA", "Gb/s"].map((h) =>
                    mark(h, [
                        `frontend[].${({ HCA: "hca", netdev: "netdev", PCI: "pciAddress", NUMA: "numa", "Gb/s": "linkRateGbps" } as Record<string, string>)[h]}`,
                    ]),
                ),
                p.frontend.map((f) => [f.hca, f.netdev, f.pciAddress, f.numa, f.linkRateGbps]),
            ),
            "",
        );
    }
    if (p.inferred.length) {
        lines.push(
            `Values of profile \`${p.profile}\` that were inferred, not read on a node (its \`inferred\` field); verify each as its note says before the first \`pulumi up\`:`,
            "",
            ...p.inferred.map((i) => `- \`${i.path}\`: ${i.note}`),
            "",
        );
    }
    return lines;
}

function spokeMarkdown(v: SpokeView, pictures: string[]): string[] {
    const lines = [
        `# ${v.stack}: spoke \`${v.spoke}\` (${v.region})`,
        "",
        `\`${v.file}\` · ${v.provider === "eks" ? "EKS" : "on-prem"} · backend ${v.fabric === "efa" ? "EFA" : "InfiniBand"}` +
            `${v.gpuDirectRdma ? ` · GPUDirect RDMA ${v.gpuDirectRdma}` : ""} · hub \`${v.hubStack}\`` +
            `${v.placementRevision ? ` · placement \`${v.placementRevision.slice(0, 12)}\`` : ""}` +
            `${v.policyRevision !== undefined ? ` · policy bundle revision ${v.policyRevision}` : ""}`,
        "",
        `${v.resources} resources, ${v.kubernetesObjects} Kubernetes objects · policy: ${v.policy.mandatory} mandatory, ${v.policy.advisory} advisory`,
        "",
    ];
    lines.push(...warningSection(v));
    for (const p of pictures.filter((f) => f.endsWith(".svg")))
        lines.push(`![rail wiring of ${v.spoke}](${p}) ([PNG](${p.replace(/\.svg$/, ".png")}))`, "");
    lines.push("## Endpoints", "");
    if (v.endpoints.length === 0) lines.push("No endpoint is placed on this spoke.", "");
    else {
        lines.push(
            ...table(
                ["endpoint", "model", "engine", "topology", "GPUs", "router", "KV pool", "planner budget", "speculative", "pool"],
                v.endpoints.map((e) => [
                    e.name,
                    e.model,
                    e.engine,
                    topologyText(e),
                    gpuCell(e),
                    e.router,
                    e.kvPool,
                    budgetCell(e),
                    e.speculative ?? "-",
                    e.pool ?? "-",
                ]),
            ),
            "",
        );
    }
    lines.push(...rolloutSection(v.endpoints.map((e) => ({ e }))));
    if (v.endpoints.length) {
        lines.push(
            "## KV tiers and start path per endpoint",
            "",
            "Where each endpoint keeps KV below GPU memory (Dynamo KVBM, per worker; config/endpoint.ts `kvTiers`) and how a new worker starts (lib/faststart.ts).",
            "",
            ...table(
                ["endpoint", "KV tiers", "KV pool", "expected start path"],
                v.endpoints.map((e) => [e.name, e.kvTiers, e.kvPool, e.startPath]),
            ),
            "",
        );
    }
    if (v.endpoints.some((e) => e.features)) {
        lines.push(
            "## Features and signals per endpoint",
            "",
            "What each endpoint's rendered objects turn on and what takes effect (upstream/activation.ts), and which exporters' series the configured Prometheus scrapes (upstream/check/observability.ts).",
            "",
            ...table(
                ["endpoint", "active", "not in effect", "signals"],
                v.endpoints.map((e) => [
                    e.name,
                    e.features?.active.join("; ") || "-",
                    e.features?.off.join("; ") || "-",
                    e.features?.signals.join("; ") || "-",
                ]),
            ),
            "",
        );
    }
    const exceptions = v.endpoints.flatMap((e) => (e.kvExceptions ?? []).map((x) => ({ e: e.name, ...x })));
    if (exceptions.length) {
        // The reviewed way out of the pack's closed world (upstream/kv-transport.ts): visible in every render and PR diff.
        const today = new Date().toISOString().slice(0, 10);
        lines.push(
            "## Reviewed KV-transport exceptions",
            "",
            "Settings the policy pack cannot prove keep KV on RDMA, accepted for exactly this name and value until the date (then refused).",
            "",
            ...table(
                ["endpoint", "component", "setting", "why", "until"],
                exceptions.map((x) => [
                    x.e,
                    x.component ?? "all",
                    `\`${x.name}=${x.value}\``,
                    x.why,
                    `${x.until}${x.until < today ? " (expired: refused)" : ""}`,
                ]),
            ),
            "",
        );
    }
    lines.push(
        "## GPUs against capacity",
        "",
        `Capacity: ${v.capacityGpus} GPUs (${v.pools.map((p) => `${p.name}: ${p.nodes.length} x ${p.gpusPerNode}`).join(", ")}).`,
        "",
        ...capacityLines(v.placedGpus, v.plannerBudgetGpus, v.capacityGpus),
        "",
    );
    lines.push("## Rails and networks", "");
    for (const p of v.pools) lines.push(...poolLines(p, v.fabric === "efa" ? "EFA" : "InfiniBand"));
    lines.push(
        "Networks:",
        "",
        ...table(
            ["network", "CIDR", "what"],
            v.networks.map((n) => [n.name, n.cidr, n.what]),
        ),
        "",
    );
    lines.push(...policySection(v.policy));
    return lines;
}

function hubMarkdown(v: HubView, pictures: string[]): string[] {
    const lines = [
        `# ${v.stack}: hub${v.region ? ` (${v.region})` : ""}`,
        "",
        `\`${v.file}\` · ${v.spokes.length} spokes · ${v.models.length} models · ${v.tenants} tenants, ${v.teams} teams, ${v.apiKeys} API keys (only SHA-256 hashes leave the hub)`,
        "",
        `${v.resources} resources · policy: ${v.policy.mandatory} mandatory, ${v.policy.advisory} advisory`,
        "",
    ];
    lines.push(...warningSection(v));
    for (const p of pictures.filter((f) => f.endsWith(".svg")))
        lines.push(`![spokes, regions and models of ${v.stack}](${p}) ([PNG](${p.replace(/\.svg$/, ".png")}))`, "");
    lines.push(
        "## Spokes",
        "",
        ...table(
            [
                "spoke",
                "stack",
                "region",
                "provider",
                "GPUs placed",
                "planner budgets and fixed graphs",
                "endpoints",
                "policy revision",
                "placement",
            ],
            v.spokes.map((s) => [
                s.name,
                s.stack,
                s.region,
                s.provider,
                `${s.placedGpus}/${s.capacityGpus}`,
                `${s.plannerBudgetGpus}/${s.capacityGpus}${s.plannerBudgetGpus > s.capacityGpus ? " ⚠" : ""}`,
                s.endpoints.map((e) => e.name).join(", ") || "-",
                s.policyRevision ?? "-",
                s.placementRevision ? s.placementRevision.slice(0, 12) : "-",
            ]),
        ),
        "",
    );
    const over = v.spokes.filter((s) => s.plannerBudgetGpus > s.capacityGpus);
    if (over.length)
        lines.push(
            `⚠ planner budgets and fixed graphs above capacity on ${over.map((s) => `${s.name} (${s.plannerBudgetGpus} > ${s.capacityGpus})`).join(", ")}: a planner cannot grow past the GPUs the others leave free.`,
            "",
        );
    lines.push(...rolloutSection(v.spokes.flatMap((s) => s.endpoints.map((e) => ({ spoke: s.name, e })))));
    lines.push("## Endpoints by model", "");
    const rows: unknown[][] = [];
    for (const m of v.models) {
        const eps = v.spokes.flatMap((s) => s.endpoints.filter((e) => e.model === m.id).map((e) => ({ s, e })));
        if (eps.length === 0) rows.push([m.id, "(not placed)", "-", "-", "-", "-", "-", "-", "-"]);
        for (const { s, e } of eps)
            rows.push([
                m.id,
                `${s.name} (${s.region})`,
                e.name,
                e.engine,
                topologyText(e),
                e.gpus,
                budgetCell(e),
                e.kvPool,
                e.fallback?.join(", ") || "-",
            ]);
    }
    lines.push(
        ...table(["model", "spoke", "endpoint", "engine", "topology", "GPUs", "planner budget", "KV pool", "falls back to"], rows),
        "",
    );
    if (v.failover)
        lines.push(
            "## Global hostname",
            "",
            `\`${v.failover.hostname}\` (${v.failover.mode}: Route 53 ${v.failover.mode === "active-active" ? "latency" : "failover"} records, an HTTPS health check per spoke's gateway) over ${v.failover.spokes.join(", ")}.`,
            "",
        );
    lines.push(
        "## Platform limits per model",
        "",
        ...table(
            ["model", "requests/s", "concurrent", "tokens per window", "window (s)", "placed on"],
            v.models.map((m) => [m.id, m.rps, m.concurrent, m.tokensPerWindow, m.windowSeconds, m.placedOn.join(", ") || "-"]),
        ),
        "",
    );
    lines.push(...policySection(v.policy));
    return lines;
}

/**
 * The report text of one stack.
 * @param pictures file names of the pictures written beside report.md (linked from it)
 */
export function reportMarkdown(v: StackView, pictures: string[] = []): string {
    const lines = v.kind === "hub" ? hubMarkdown(v, pictures) : spokeMarkdown(v, pictures);
    return `${lines
        .join("\n")
        .replace(/\n{3,}/g, "\n\n")
        .trimEnd()}\n`;
}
