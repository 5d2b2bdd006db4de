/**
 * The report's pictures as plain SVG text (no layout engine: the shapes are grids, so the layout is arithmetic):
 * - a spoke's rail wiring: leaf switches on top, each node's GPU -> HCA -> netdev cards (tinted by NUMA node)
 *   wired rail i -> leaf i, and the frontend NICs drawn apart below, wired to the north-south network;
 *   on EKS the EFA devices per GPU to the EFA fabric instead of rails and leaves;
 * - the hub's map: the hub, its spokes grouped by region, and the endpoints (model, engine, GPUs) on each.
 * Elements carry classes (`leaf`, `node`, `gpu-card`, `rail-link`, `frontend-nic`, `frontend-link`, `spoke`,
 * `endpoint`, `hub-link`) so tests and tools can count what was drawn.
 */
import type { EndpointView, HubView, PoolView, SpokeView } from "./model";
import { el, svgDoc, text, textWidth } from "./svg";

const RAIL_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
const NUMA_FILL = ["#e8f1fb", "#fdf0e2", "#eaf6ea", "#f3eafa", "#fbeaea", "#eef7f7", "#f5f0e6", "#f0f0f0"];
const INK = "#1f2933";
const MUTED = "#52606d";

/** At most this many nodes are drawn per pool; the rest are wired the same way and said so. */
export const MAX_NODES_DRAWN = 4;

const railColor = (i: number) => RAIL_COLORS[i % RAIL_COLORS.length];

function box(
    x: number,
    y: number,
    w: number,
    h: number,
    cls: string,
    fill: string,
    stroke = INK,
    extra: Record<string, string | number | undefined> = {},
): string {
    return el("rect", { x, y, width: w, height: h, rx: 4, fill, stroke, "stroke-width": 1, class: cls, ...extra });
}

function line(
    x1: number,
    y1: number,
    x2: number,
    y2: number,
    color: string,
    cls: string,
    extra: Record<string, string | number> = {},
): string {
    return el("line", { x1, y1, x2, y2, stroke: color, "stroke-width": 1.6, class: cls, ...extra });
}

/** `numa` -1: not known from the profile (EFA: the AMI aligns devices, the profile has no per-GPU NUMA node). */
interface Card {
    title: string;
    lines: string[];
    numa: number;
    rail?: number;
}

const numaFill = (numa: number) => (numa < 0 ? "#f5f7fa" : NUMA_FILL[numa % NUMA_FILL.length]);

const CARD_W = 104;
const CARD_GAP = 8;
const CARD_LINE = 14;
const PAD = 14;

/** Cards of one node: one per rail (InfiniBand) or per GPU (EFA). */
function backendCards(p: PoolView): Card[] {
    if (p.rails.length)
        return p.rails.map((r) => ({
            title: `GPU${r.gpu}`,
            lines: [r.hca, r.netdev, `${r.linkRateGbps}G NUMA${r.numa}`],
            numa: r.numa,
            rail: r.rail,
        }));
    const per = p.efa?.devicesPerGpu ?? 0;
    return Array.from({ length: p.gpusPerNode }, (_, g) => ({
        title: `GPU${g}`,
        lines: [`${per} x EFA`, `${per * (p.efa?.cardRateGbps ?? 0)}G`, "same PCIe sw."],
        numa: -1,
    }));
}

/** The rail wiring picture of a spoke (SVG text). */
export function railWiringSvg(v: SpokeView): string {
    const body: string[] = [];
    const pools = v.pools;
    const eks = v.fabric === "efa";
    const cardsPerNode = Math.max(1, ...pools.map((p) => backendCards(p).length));
    const nodeW = PAD * 2 + cardsPerNode * CARD_W + (cardsPerNode - 1) * CARD_GAP;
    const nodesDrawn = pools.flatMap((p) => p.nodes.slice(0, MAX_NODES_DRAWN).map((n) => ({ pool: p, node: n })));
    const hidden = pools.reduce((s, p) => s + Math.max(0, p.nodes.length - MAX_NODES_DRAWN), 0);
    const cols = Math.max(1, nodesDrawn.length);
    const margin = 24;
    const width = Math.max(margin * 2 + cols * nodeW + (cols - 1) * 40, 760);
    let y = 24;
    body.push(
        text(margin, y, `${v.stack}: ${eks ? "EFA backend" : "rail-aligned InfiniBand backend"} and frontend network`, {
            size: 16,
            weight: "bold",
        }),
    );
    y += 18;
    body.push(
        text(
            margin,
            y,
            `${v.spoke} · ${v.region} · ${v.provider} · ${pools.map((p) => `${p.name}: ${p.nodes.length} x ${p.model}`).join(", ")}`,
            { size: 12, fill: MUTED },
        ),
    );
    y += 22;

    // Leaf switches (one per rail) or the EFA fabric.
    const leafY = y;
    const leafH = 40;
    const leafX = new Map<number, number>();
    const railsByIndex = new Map<number, { subnet?: string }>();
    for (const p of pools) for (const r of p.rails) if (!railsByIndex.has(r.rail)) railsByIndex.set(r.rail, { subnet: r.subnet });
    if (!eks && railsByIndex.size) {
        const rails = [...railsByIndex.keys()].sort((a, b) => a - b);
        const lw = Math.min(150, (width - margin * 2 - (rails.length - 1) * 10) / rails.length);
        const total = rails.length * lw + (rails.length - 1) * 10;
        let x = (width - total) / 2;
        for (const r of rails) {
            body.push(box(x, leafY, lw, leafH, "leaf", "#ffffff", railColor(r), { "stroke-width": 2, "data-rail": r }));
            body.push(text(x + lw / 2, leafY + 16, `leaf ${r}`, { size: 12, anchor: "middle", weight: "bold", fill: railColor(r) }));
            const sub = railsByIndex.get(r)?.subnet;
            if (sub)
                body.push(
                    text(x + lw / 2, leafY + 31, textWidth(sub, 10) < lw - 4 ? sub : sub.split("/")[0], {
                        size: 10,
                        anchor: "middle",
                        fill: MUTED,
                    }),
                );
            leafX.set(r, x + lw / 2);
            x += lw + 10;
        }
    } else {
        body.push(box(margin, leafY, width - margin * 2, leafH, "leaf efa-fabric", "#ffffff", RAIL_COLORS[0], { "stroke-width": 2 }));
        body.push(
            text(width / 2, leafY + 17, "EFA fabric (SRD), cluster placement group", {
                size: 12,
                anchor: "middle",
                weight: "bold",
                fill: RAIL_COLORS[0],
            }),
        );
        const e = pools.find((p) => p.efa)?.efa;
        if (e)
            body.push(
                text(
                    width / 2,
                    leafY + 32,
                    `${e.networkCards} x ${e.cardRateGbps} Gb/s EFA per node, handed out by the EFA device plugin`,
                    { size: 10, anchor: "middle", fill: MUTED },
                ),
            );
    }
    y = leafY + leafH + 90;

    // Nodes with their backend cards and frontend NICs.
    const nodeTop = y;
    const cardH = 18 + CARD_LINE * 3 + 8;
    const feH = 18 + CARD_LINE * 2 + 6;
    const nodeH = 26 + cardH + 22 + 16 + feH + PAD;
    const feBarY = nodeTop + nodeH + 50;
    let railLinks = 0;
    const titles: string[] = [];
    // Links are drawn above the boxes, each leaving its own node through that node's top edge straight above its card
    // (a short drop inside the node, then to the leaf through the open band between nodes and leaves), so a link
    // can never pass behind another node and seem to end there. Frontend links run below the nodes.
    const links: string[] = [];
    nodesDrawn.forEach(({ pool, node }, i) => {
        const nx = margin + i * (nodeW + 40);
        body.push(box(nx, nodeTop, nodeW, nodeH, "node", "#fafbfc", INK, { "data-node": node }));
        const title = text(nx + PAD, nodeTop + 18, `${node}  (${pool.name}, ${pool.profile})`, { size: 12, weight: "bold" });
        const cards = backendCards(pool);
        const cy = nodeTop + 26;
        cards.forEach((c, k) => {
            const cx = nx + PAD + k * (CARD_W + CARD_GAP);
            const stroke = c.rail !== undefined ? railColor(c.rail) : RAIL_COLORS[0];
            body.push(box(cx, cy, CARD_W, cardH, "gpu-card", numaFill(c.numa), stroke, { "data-numa": c.numa < 0 ? undefined : c.numa }));
            body.push(text(cx + CARD_W / 2, cy + 15, c.title, { size: 12, anchor: "middle", weight: "bold" }));
            c.lines.forEach((l, j) => body.push(text(cx + CARD_W / 2, cy + 15 + CARD_LINE * (j + 1), l, { size: 11, anchor: "middle" })));
            const top = cy;
            const tx = c.rail !== undefined ? leafX.get(c.rail) : cx + CARD_W / 2;
            if (tx !== undefined) {
                const railAttrs: Record<string, string | number> =
                    c.rail !== undefined ? { "data-rail": c.rail, "data-node": node } : { "data-node": node };
                links.push(line(cx + CARD_W / 2, top, cx + CARD_W / 2, nodeTop, stroke, "link-drop", railAttrs));
                links.push(
                    line(cx + CARD_W / 2, nodeTop, tx, leafY + leafH, stroke, c.rail !== undefined ? "rail-link" : "efa-link", railAttrs),
                );
                railLinks++;
            }
        });
        // NUMA bands under the cards: one per contiguous run of the same NUMA node.
        const by = cy + cardH + 4;
        let start = 0;
        for (let k = 1; k <= cards.length; k++) {
            if (k === cards.length || cards[k].numa !== cards[start].numa) {
                if (cards[start].numa < 0) {
                    start = k;
                    continue;
                }
                const x0 = nx + PAD + start * (CARD_W + CARD_GAP);
                const x1 = nx + PAD + (k - 1) * (CARD_W + CARD_GAP) + CARD_W;
                body.push(
                    el("rect", {
                        x: x0,
                        y: by,
                        width: x1 - x0,
                        height: 14,
                        fill: NUMA_FILL[cards[start].numa % NUMA_FILL.length],
                        stroke: MUTED,
                        "stroke-width": 0.5,
                        class: "numa-band",
                    }),
                );
                body.push(text((x0 + x1) / 2, by + 11, `NUMA ${cards[start].numa}`, { size: 10, anchor: "middle", fill: MUTED }));
                start = k;
            }
        }
        // Frontend NICs, apart from the backend.
        const fy = by + 22 + 16;
        body.push(
            text(nx + PAD, fy - 5, eks ? "frontend: ENA (network card 0)" : "frontend NICs (north-south, no KV)", {
                size: 10,
                fill: MUTED,
            }),
        );
        const fe = pool.frontend.length
            ? pool.frontend.map((f) => ({ title: f.hca, lines: [f.netdev, `${f.linkRateGbps}G NUMA${f.numa}`], numa: f.numa }))
            : eks
              ? [{ title: "ENA", lines: ["card 0", "VPC"], numa: -1 }]
              : [];
        const feW = Math.max(CARD_W, ...fe.flatMap((f) => [f.title, ...f.lines].map((s) => textWidth(s, 11) + 12)));
        fe.forEach((f, k) => {
            const fx = nx + PAD + k * (feW + CARD_GAP);
            body.push(box(fx, fy, feW, feH, "frontend-nic", numaFill(f.numa), "#7b8794", { "stroke-dasharray": "4 2" }));
            body.push(text(fx + feW / 2, fy + 15, f.title, { size: 12, anchor: "middle", weight: "bold" }));
            f.lines.forEach((l, j) => body.push(text(fx + feW / 2, fy + 15 + CARD_LINE * (j + 1), l, { size: 11, anchor: "middle" })));
            links.push(line(fx + feW / 2, fy + feH, fx + feW / 2, feBarY, "#7b8794", "frontend-link", { "stroke-dasharray": "4 2" }));
        });
        // The node's name over its drops, on a halo of the box's colour so it stays legible.
        titles.push(title.replace("<text ", '<text stroke="#fafbfc" stroke-width="4" paint-order="stroke" '));
    });
    body.push(...links, ...titles);
    const frontNet = v.networks[0];
    body.push(box(margin, feBarY, width - margin * 2, 30, "frontend-network", "#f5f7fa", "#7b8794"));
    body.push(
        text(
            width / 2,
            feBarY + 19,
            `frontend ${eks ? "VPC" : "Ethernet"} ${frontNet?.cidr ?? ""}: requests, tokens (SSE), control plane, metrics`,
            { size: 11, anchor: "middle" },
        ),
    );
    let h = feBarY + 30 + 22;
    if (hidden) {
        body.push(
            text(margin, h, `+ ${hidden} more node(s) not drawn, wired the same way`, { size: 11, fill: MUTED, cls: "hidden-nodes" }),
        );
        h += 18;
    }
    const legend = [
        eks
            ? "cards: GPU and its EFA devices (GPU<->EFA alignment by the EKS accelerated AMI, not pinned by this program)"
            : `${railLinks} rail links: GPU i of every node -> HCA -> netdev -> leaf i; cards tinted by NUMA node`,
        "dashed: frontend NICs and their links to the north-south network (no KV traffic)",
    ];
    legend.forEach((l, i) => body.push(text(margin, h + i * 15, l, { size: 11, fill: MUTED, cls: "legend" })));
    return svgDoc(width, h + 15 * (legend.length - 1) + 14, `${v.stack} rail wiring`, body);
}

function endpointLine(e: EndpointView): string {
    const t = e.groups.map((g) => `${g.role[0].toUpperCase()}${g.replicas}x${g.gpusPerWorker}`).join(" ");
    return `${e.name}: ${e.engine} ${e.mode === "disaggregated" ? "P/D" : "agg"} ${t} = ${e.gpus} GPU`;
}

/** The hub's map: hub, spokes grouped by region, and what is placed on each (SVG text). */
export function hubMapSvg(v: HubView): string {
    const body: string[] = [];
    const margin = 24;
    const regions = [...new Set(v.spokes.map((s) => s.region))].sort();
    const spokeW = Math.max(
        300,
        ...v.spokes
            .flatMap((s) => s.endpoints.flatMap((e) => [textWidth(endpointLine(e), 11), textWidth(e.model, 11) + 12]))
            .map((w) => w + 28),
    );
    const spokeH = Math.max(...v.spokes.map((s) => 66 + Math.max(1, s.endpoints.length) * 29 + 8), 90);
    const regionW = spokeW + 24;
    const maxInRegion = Math.max(1, ...regions.map((r) => v.spokes.filter((s) => s.region === r).length));
    const width = Math.max(margin * 2 + regions.length * regionW + (regions.length - 1) * 20, 640);
    let y = 24;
    body.push(text(margin, y, `${v.stack}: spokes, regions and the models placed on each`, { size: 16, weight: "bold" }));
    y += 22;
    const hubW = 420;
    const hubX = (width - hubW) / 2;
    body.push(box(hubX, y, hubW, 58, "hub", "#eef2ff", "#3949ab", { "stroke-width": 2 }));
    body.push(text(width / 2, y + 18, `hub ${v.stack}${v.region ? ` (${v.region})` : ""}`, { size: 13, anchor: "middle", weight: "bold" }));
    body.push(
        text(width / 2, y + 34, `${v.models.length} models · ${v.tenants} tenants · ${v.apiKeys} API keys`, { size: 11, anchor: "middle" }),
    );
    body.push(text(width / 2, y + 49, "placement + signed policy bundles down, usage up", { size: 11, anchor: "middle", fill: MUTED }));
    const hubBottom = y + 58;
    y = hubBottom + 60;
    // Hub links are drawn under the region and spoke boxes.
    const linkAt = body.length;
    const links: string[] = [];
    regions.forEach((r, i) => {
        const rx = margin + i * (regionW + 20);
        const spokes = v.spokes.filter((s) => s.region === r);
        const rh = 26 + maxInRegion * (spokeH + 12);
        body.push(box(rx, y, regionW, rh, "region", "#f8f9fb", "#9aa5b1", { "stroke-dasharray": "5 3" }));
        body.push(text(rx + 10, y + 17, `region ${r}`, { size: 12, weight: "bold", fill: MUTED }));
        spokes.forEach((s, k) => {
            const sx = rx + 12;
            const sy = y + 26 + k * (spokeH + 12);
            const over = s.plannerBudgetGpus > s.capacityGpus || s.placedGpus > s.capacityGpus;
            links.push(line(width / 2, hubBottom, sx + spokeW / 2, sy, "#3949ab", "hub-link", { "data-spoke": s.name }));
            body.push(box(sx, sy, spokeW, spokeH, "spoke", "#ffffff", over ? "#c62828" : INK, { "data-spoke": s.name }));
            let ty = sy + 17;
            body.push(text(sx + 10, ty, `spoke ${s.name} (${s.stack}, ${s.provider})`, { size: 12, weight: "bold" }));
            ty += 16;
            body.push(
                text(
                    sx + 10,
                    ty,
                    `GPUs placed ${s.placedGpus}/${s.capacityGpus} · planner budgets and fixed ${s.plannerBudgetGpus}/${s.capacityGpus}${over ? " !" : ""}`,
                    { size: 11, fill: over ? "#c62828" : MUTED },
                ),
            );
            const bw = spokeW - 20;
            ty += 6;
            body.push(el("rect", { x: sx + 10, y: ty, width: bw, height: 6, fill: "#e4e7eb" }));
            body.push(
                el("rect", {
                    x: sx + 10,
                    y: ty,
                    width: bw * Math.min(1, s.capacityGpus ? s.placedGpus / s.capacityGpus : 0),
                    height: 6,
                    fill: "#3949ab",
                    class: "gpu-bar",
                }),
            );
            ty += 20;
            const rev = [
                s.policyRevision !== undefined ? `policy bundle r${s.policyRevision}` : "",
                s.placementRevision ? `placement ${s.placementRevision.slice(0, 12)}` : "",
            ]
                .filter(Boolean)
                .join(" · ");
            body.push(text(sx + 10, ty, rev || "not yet placed", { size: 10, fill: MUTED }));
            for (const e of s.endpoints) {
                ty += 15;
                body.push(
                    el(
                        "g",
                        { class: "endpoint", "data-endpoint": e.name },
                        text(sx + 10, ty, endpointLine(e), { size: 11, weight: "bold" }),
                        text(sx + 22, ty + 14, e.model, { size: 11, fill: MUTED }),
                    ),
                );
                ty += 14;
            }
            if (s.endpoints.length === 0) body.push(text(sx + 10, ty + 15, "(no endpoints placed)", { size: 11, fill: MUTED }));
        });
    });
    body.splice(linkAt, 0, ...links);
    // Legend: every mark the map uses.
    const legend = [
        "P/D = disaggregated: P prefill, D decode workers; agg = aggregated: W workers; each as replicas x GPUs per worker",
        "bar: GPUs placed / the spoke's GPUs; \"!\" and a red border: placement or planner budgets and fixed graphs above the spoke's GPUs",
        "lines: the hub's placement and signed policy bundles going down to each spoke (usage comes back up)",
    ];
    const top = y + 26 + maxInRegion * (spokeH + 12) + 18;
    legend.forEach((l, i) => body.push(text(margin, top + i * 15, l, { size: 11, fill: MUTED, cls: "legend" })));
    const h = top + legend.length * 15;
    return svgDoc(Math.max(width, margin * 2 + Math.max(...legend.map((l) => textWidth(l, 11)))), h, `${v.stack} spoke map`, body);
}
