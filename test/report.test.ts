import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allPolicies } from "../policies/policies";
import { resourcesJson } from "../tools/outputs";
import { runPolicies } from "../tools/policy-runner";
import { reportFiles, reportInput } from "../tools/report";
import { bar, cell, reportMarkdown } from "../tools/report/markdown";
import { warningLines } from "../tools/report/comment";
import { buildView, dgdGpus, type HubView, type ReportInput, type SpokeView } from "../tools/report/model";
import { interactive, RenderProgress } from "../tools/report/progress";
import { PNG_CACHE_ENV, svgToPng } from "../tools/report/png";
import { textWidth } from "../tools/report/svg";
import { maskWire, referenceableOutputs } from "../tools/wire";
import { flatConfig, runHubAndSpoke, runRepoStack, stackConfigDoc, stackFile } from "./helpers";

/** Report input of a stack rendered in-process the way tools/render.ts builds it. */
async function inputOf(
    stack: string,
    r: { resources: any[]; outputs: Record<string, unknown> },
    hubOutputs?: Record<string, unknown>,
): Promise<ReportInput> {
    const policy = await runPolicies(allPolicies, r.resources);
    return reportInput(stackFile(stack), resourcesJson(r.resources), maskWire(r.outputs) as Record<string, unknown>, policy, hubOutputs);
}

/** Every `<tag ... class="cls" ...>` element's attributes. */
function elements(svg: string, cls: string): Array<Record<string, string>> {
    const out: Array<Record<string, string>> = [];
    for (const m of svg.matchAll(/<(\w+)((?:\s+[\w:-]+="[^"]*")*)\s*\/?>/g)) {
        const attrs = Object.fromEntries([...m[2].matchAll(/([\w:-]+)="([^"]*)"/g)].map((a) => [a[1], a[2]]));
        if ((attrs.class ?? "").split(" ").includes(cls)) out.push(attrs);
    }
    return out;
}

const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);

/** Width, height and decoded scanlines of a PNG (8-bit RGBA, as resvg writes it). */
function decodePng(png: Buffer): { width: number; height: number; data: Buffer } {
    expect(png.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a");
    let off = 8;
    let width = 0;
    let height = 0;
    const idat: Buffer[] = [];
    while (off < png.length) {
        const len = png.readUInt32BE(off);
        const type = png.subarray(off + 4, off + 8).toString("ascii");
        const data = png.subarray(off + 8, off + 8 + len);
        if (type === "IHDR") {
            width = data.readUInt32BE(0);
            height = data.readUInt32BE(4);
        }
        if (type === "IDAT") idat.push(data);
        off += 12 + len;
    }
    return { width, height, data: zlib.inflateSync(Buffer.concat(idat)) };
}

let hn1: ReportInput;
let sg1: ReportInput;
let hub: ReportInput;

beforeAll(async () => {
    const a = await runHubAndSpoke("spoke-hn1");
    hub = await inputOf("hub-prod", a.hub);
    hn1 = await inputOf("spoke-hn1", a.spoke, a.hub.outputs);
    const b = await runHubAndSpoke("spoke-sg1");
    sg1 = await inputOf("spoke-sg1", b.spoke, b.hub.outputs);
});

describe("spoke report (spoke-hn1, DGX H200, 8 x NDR rails)", () => {
    it("lists endpoints by model, engine and topology with their GPUs, as the hub placed them (stacks/Pulumi.hub-prod.yaml)", () => {
        const v = buildView(hn1) as SpokeView;
        const llama = v.endpoints.find((e) => e.name === "llama-70b")!;
        expect(llama).toMatchObject({
            model: "meta-llama/Llama-3.3-70B-Instruct",
            engine: "vllm",
            mode: "disaggregated",
            gpus: 8,
            renderedGpus: 8,
            plannerBudget: 12,
            pool: "h200",
        });
        expect(llama.groups).toEqual([
            { role: "prefill", replicas: 1, gpusPerWorker: 4 },
            { role: "decode", replicas: 1, gpusPerWorker: 4 },
        ]);
        const qwen = v.endpoints.find((e) => e.name === "qwen3-32b")!;
        // hn1's Qwen runs without a planner (hub-prod: Llama's budget 12 + Qwen's fixed 4 fill the 16 GPUs).
        expect(qwen).toMatchObject({ engine: "sglang", gpus: 4, renderedGpus: 4, plannerBudget: undefined });
    });

    it("shows per endpoint which features take effect and which signals are scraped", () => {
        const v = buildView(hn1) as SpokeView;
        const llama = v.endpoints.find((e) => e.name === "llama-70b")!;
        expect(llama.features!.active).toEqual(expect.arrayContaining(["P/D over NIXL (UCX)", "KV-aware routing on worker KV events"]));
        expect(llama.features!.active.some((f) => f.startsWith("speculative"))).toBe(false);
        expect(llama.features!.signals).toEqual(["dynamo-frontend: scraped", "dynamo-worker: scraped", "vllm: scraped"]);
        const qwen = v.endpoints.find((e) => e.name === "qwen3-32b")!;
        expect(qwen.features!.active).toContain("SGLang HiCache on the Mooncake pool (registers with the pod IP)");
        expect(qwen.features!.off.join(" ")).toMatch(/frontend shared KV cache: off/);
        expect(qwen.features!.signals).toContain("sglang: scraped");
        const md = reportMarkdown(v);
        expect(md).toContain("## Features and signals per endpoint");
        expect(md).toMatch(
            /\| qwen3-32b \| P\/D over NIXL \(UCX\);.*\| dynamo-frontend: scraped; dynamo-worker: scraped; sglang: scraped \|/,
        );
    });

    it("shows the reviewed KV-transport exceptions of the stack file; expired ones are marked refused", () => {
        const v = buildView(hn1) as SpokeView;
        expect(v.endpoints.every((e) => e.kvExceptions.length === 0)).toBe(true);
        expect(reportMarkdown(v)).not.toContain("Reviewed KV-transport exceptions");
        const why = "NIXL zcopy regression on CX-7 firmware, reviewed by infra";
        v.endpoints[0].kvExceptions = [
            { name: "UCX_ZCOPY_THRESH", value: "inf", component: "decode", why, until: "2099-01-01" },
            { name: "NCCL_P2P_DISABLE", value: "1", why, until: "2020-01-01" },
        ];
        const md = reportMarkdown(v);
        expect(md).toContain("## Reviewed KV-transport exceptions");
        expect(md).toContain(`| ${v.endpoints[0].name} | decode | \`UCX_ZCOPY_THRESH=inf\` | ${why} | 2099-01-01 |`);
        expect(md).toContain("| all | `NCCL_P2P_DISABLE=1` |");
        expect(md).toContain("2020-01-01 (expired: refused)");
    });

    it("sets GPUs placed and planner budgets against capacity; the sample renders with no warning", async () => {
        const v = buildView(hn1) as SpokeView;
        // 2 nodes x 8 GPUs (config/node-profiles/dgx-h200.yaml gpu.count: DGX H200 has 8 H200 GPUs).
        expect(v.capacityGpus).toBe(16);
        expect(v.placedGpus).toBe(12);
        // Llama's planner budget 12 + Qwen's fixed graph 4 (config/hub-checks.ts endpointClaimGpus).
        expect(v.plannerBudgetGpus).toBe(16);
        const md = (await reportFiles(hn1, { png: false }))["report.md"] as string;
        expect(md).toContain("- GPUs placed: `███████████████░░░░░` 12/16 (75%)");
        expect(md).not.toContain("## Warnings");
        expect(md).not.toContain("⚠");
        expect(md).toContain(
            "| llama-70b | meta-llama/Llama-3.3-70B-Instruct | vllm | disaggregated: prefill 1 x 4 GPU, decode 1 x 4 GPU | 8 |",
        );
    });

    it("joins each rail of the profile with the RDMA resource rendered for it; no rail network or IP pool while railNetworks is off", async () => {
        const off = buildView(hn1) as SpokeView;
        expect(off.pools[0].railNetworks).toBe(false);
        expect(off.pools[0].rails.map((r) => [r.rdmaResource, r.network, r.ipPool, r.subnet])).toEqual(
            [0, 1, 2, 3, 4, 5, 6, 7].map((i) => [`rdma/rail_${i}`, undefined, undefined, undefined]),
        );
        const md = (await reportFiles(hn1, { png: false }))["report.md"] as string;
        expect(md).toContain(
            "| 1 | GPU1 | 0000:43:00.0 | mlx5_3 | ibp64s0 | 0000:40:00.0 | 0 | 400 | rdma/rail_1 | off (railNetworks) | off (railNetworks) |",
        );
        // With platform:backend.railNetworks: true, each rail joins its IPoIBNetwork and nv-ipam pool.
        const doc = stackConfigDoc("spoke-hn1");
        doc["platform:backend"] = { ...doc["platform:backend"], railNetworks: true };
        const hubRun = await runRepoStack("hub-prod");
        const onRun = await runRepoStack("spoke-hn1", {
            config: flatConfig(doc),
            stackOutputs: { "hub-prod": { outputs: referenceableOutputs(hubRun.outputs), secretOutputNames: [] } },
        });
        const policy = await runPolicies(allPolicies, onRun.resources);
        const on = reportInput(
            { ...stackFile("spoke-hn1"), config: flatConfig(doc) },
            resourcesJson(onRun.resources),
            maskWire(onRun.outputs) as Record<string, unknown>,
            policy,
            hubRun.outputs,
        );
        const v = buildView(on) as SpokeView;
        expect(v.pools[0].railNetworks).toBe(true);
        const rails = v.pools[0].rails;
        expect(rails).toHaveLength(8);
        // DGX H200 user guide "Network Modules": GPU1 is mlx5_3 / ibp64s0, not mlx5_1 (a storage port).
        expect(rails[1]).toMatchObject({
            rail: 1,
            leaf: 1,
            gpu: 1,
            hca: "mlx5_3",
            netdev: "ibp64s0",
            numa: 0,
            linkRateGbps: 400,
            rdmaResource: "rdma/rail_1",
            network: "h200-rail-1",
            ipPool: "rail-1",
            subnet: "10.64.16.0/20",
            perNodeBlockSize: 16,
        });
        expect(rails.map((r) => r.numa)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
        expect(v.pools[0].frontend.map((f) => f.hca)).toEqual(["mlx5_1", "mlx5_7"]);
        expect(v.networks.find((n) => n.name === "frontend")?.cidr).toBe("10.10.0.0/24");
    });

    it("draws nodes x rails x leaf switches with every rail link ending on its own leaf, frontend NICs apart", async () => {
        const svg = (await reportFiles(hn1, { png: false }))["rails.svg"] as string;
        const leaves = elements(svg, "leaf");
        expect(leaves).toHaveLength(8);
        expect(elements(svg, "node").map((n) => n["data-node"])).toEqual(["hn1-gpu-01", "hn1-gpu-02"]);
        expect(elements(svg, "gpu-card")).toHaveLength(16);
        const links = elements(svg, "rail-link");
        expect(links).toHaveLength(16);
        const nodes = elements(svg, "node");
        for (const l of links) {
            const leaf = leaves.find((x) => x["data-rail"] === l["data-rail"])!;
            expect(Number(l.x2)).toBeCloseTo(Number(leaf.x) + Number(leaf.width) / 2, 1);
            expect(Number(l.y2)).toBeCloseTo(Number(leaf.y) + Number(leaf.height), 1);
            // It leaves its own node through that node's top edge (never from under another node's box).
            const node = nodes.find((n) => n["data-node"] === l["data-node"])!;
            expect(Number(l.y1)).toBe(Number(node.y));
            expect(Number(l.x1)).toBeGreaterThan(Number(node.x));
            expect(Number(l.x1)).toBeLessThan(Number(node.x) + Number(node.width));
        }
        // Links are drawn above the node boxes (later in the document), so none is hidden behind a box.
        expect(svg.indexOf('class="rail-link"')).toBeGreaterThan(svg.lastIndexOf('class="node"'));
        expect(elements(svg, "frontend-nic")).toHaveLength(4);
        expect(elements(svg, "frontend-link")).toHaveLength(4);
        // Frontend links go down to the frontend network, never up to a leaf.
        const fe = elements(svg, "frontend-network")[0];
        for (const l of elements(svg, "frontend-link")) expect(Number(l.y2)).toBe(Number(fe.y));
        const t = texts(svg);
        for (let i = 0; i < 8; i++) expect(t).toContain(`leaf ${i}`);
        expect(t.filter((x) => x === "mlx5_3")).toHaveLength(2);
        expect(t).toContain("enp170s0f0np0");
        // No rail subnet drawn: hn1 renders no rail IP pools (platform:backend.railNetworks off).
        expect(t.some((x) => x.startsWith("10.64."))).toBe(false);
        expect(t.filter((x) => x === "NUMA 1")).toHaveLength(2);
    });

    it("marks the values the node profile says were inferred, not read on a node", async () => {
        const md = (await reportFiles(hn1, { png: false }))["report.md"] as string;
        // config/node-profiles/dgx-h200.yaml inferred: rails[].gpuPciAddress (and gpuNuma, frontend fields).
        expect(md).toContain("| rail / leaf | GPU | GPU PCI (inferred) | HCA | netdev | HCA PCI | NUMA | Gb/s |");
        expect(md).toMatch(
            /Values of profile `dgx-h200` that were inferred, not read on a node \(its `inferred` field\); verify each as its note says before the first `pulumi up`:\n\n- `rails\[\]\.gpuPciAddress`: /,
        );
    });

    it("gives every card room for its label (monospace advance of DejaVu Sans Mono)", async () => {
        const svg = (await reportFiles(hn1, { png: false }))["rails.svg"] as string;
        const card = elements(svg, "gpu-card")[0];
        expect(textWidth("mlx5_11", 11)).toBeLessThan(Number(card.width));
        expect(textWidth("ibp220s0", 11)).toBeLessThan(Number(card.width));
        const nic = elements(svg, "frontend-nic")[0];
        expect(textWidth("enp170s0f0np0", 11)).toBeLessThan(Number(nic.width));
    });
});

describe("spoke report (spoke-sg1, EKS p5en.48xlarge, EFA)", () => {
    it("describes the EFA backend instead of rails: 16 x 200 Gb/s per node, 2 EFA per GPU", async () => {
        const v = buildView(sg1) as SpokeView;
        expect(v.fabric).toBe("efa");
        expect(v.capacityGpus).toBe(16);
        // AWS P5en: 16 network cards x 200 Gb/s EFAv3 (config/node-profiles/p5en-48xlarge.yaml sources).
        expect(v.pools[0].efa).toMatchObject({
            networkCards: 16,
            cardRateGbps: 200,
            devicesPerGpu: 2,
            efaInterfaces: 16,
            enaInterfaces: 1,
        });
        const files = await reportFiles(sg1, { png: false });
        expect(files["report.md"]).toContain("16 network cards x 200 Gb/s = 3200 Gb/s per node");
        const svg = files["rails.svg"] as string;
        expect(elements(svg, "rail-link")).toHaveLength(0);
        expect(elements(svg, "efa-link")).toHaveLength(16);
        expect(elements(svg, "gpu-card")).toHaveLength(16);
        expect(texts(svg)).toContain("EFA fabric (SRD), cluster placement group");
        expect(texts(svg).filter((x) => x === "2 x EFA")).toHaveLength(16);
    });
});

describe("preview mode", () => {
    it("builds the report from a preview render, where computed inputs are [unknown] (the EFA NICs' security groups)", async () => {
        const b = await runHubAndSpoke("spoke-sg1", true);
        // As tools/render.ts does: a spoke's preview reads its hub rendered normally (the deployed hub's outputs).
        const input = await inputOf("spoke-sg1", b.spoke, (await runRepoStack("hub-prod")).outputs);
        // The interface list is built from the node profile (known in preview); each NIC's security groups are computed.
        const lt = input.resources.find(
            (r) => r.type === "aws:ec2/launchTemplate:LaunchTemplate" && Array.isArray(r.inputs.networkInterfaces),
        )!;
        expect(JSON.stringify(lt.inputs.networkInterfaces)).toContain("[unknown]");
        const v = buildView(input) as SpokeView;
        expect(v.pools[0].efa).toMatchObject({ networkCards: 16, efaInterfaces: 16, enaInterfaces: 1 });
        // sg1 runs qwen3-32b (P/D) and llama-70b (aggregated vLLM with KVBM tiers and the NVMe model cache).
        expect(v.endpoints.map((e) => [e.name, e.gpus])).toEqual([
            ["llama-70b", 4],
            ["qwen3-32b", 8],
        ]);
        expect(v.endpoints[0]).toMatchObject({ kvTiers: "HBM -> host 512 GiB -> NVMe 4096 GiB (KVBM)" });
        expect((await reportFiles(input, { png: false }))["report.md"]).toContain("| qwen3-32b | Qwen/Qwen3-32B | sglang |");
    });
});

describe("hub report (hub-prod)", () => {
    it("maps spokes by region with the endpoints placed on each and GPUs against capacity", async () => {
        const v = buildView(hub) as HubView;
        expect(v.spokes.map((s) => [s.name, s.region, s.placedGpus, s.capacityGpus])).toEqual([
            // 8 + the 4 GPUs of the shipped rollout's target graph (v2-qwen3-32b runs beside qwen3-32b).
            ["hcm1", "vn-hochiminh-1", 12, 16],
            ["hn1", "vn-hanoi-1", 12, 16],
            ["sg1", "ap-southeast-1", 12, 16],
        ]);
        // Llama's planner budget 8 + both Qwen graphs fixed at 4 during the rollout: hcm1's 16, as the hub check demands.
        expect(v.spokes.find((s) => s.name === "hcm1")!.plannerBudgetGpus).toBe(16);
        const files = await reportFiles(hub, { png: false });
        const svg = files["map.svg"] as string;
        expect(elements(svg, "spoke").map((s) => s["data-spoke"])).toEqual(["sg1", "hn1", "hcm1"]);
        expect(elements(svg, "hub-link")).toHaveLength(3);
        expect(elements(svg, "endpoint")).toHaveLength(6);
        expect(texts(svg)).toEqual(
            expect.arrayContaining([
                "region ap-southeast-1",
                "region vn-hanoi-1",
                "region vn-hochiminh-1",
                "llama-70b: vllm agg W1x4 = 4 GPU",
                "qwen3-32b: sglang P/D P2x2 D1x4 = 8 GPU",
            ]),
        );
        const md = files["report.md"] as string;
        expect(md).toContain("| hcm1 | spoke-hcm1 | vn-hochiminh-1 | onprem | 12/16 | 16/16 |");
        expect(md).not.toContain("## Warnings");
        expect(md).toContain("![spokes, regions and models of hub-prod](map.svg) ([PNG](map.png))");
        // The shipped rollout: step, weights per graph and last gate verdict (lib/rollout.ts).
        expect(md).toContain(
            "| hcm1/qwen3-32b | v2 | engine, planner | shifting | 1/4 (10%) of 10 → 25 → 50 → 100 | qwen3-32b (sglang) 90% · v2-qwen3-32b (vllm) 10% | - | pass at 2026-12-01T09:00:00Z",
        );
        expect(md).toContain("5 API keys");
        expect(md).not.toMatch(/sk-h200-/);
    });

    it("warns at the top of the report, marking a planner budget taken from the default, and with what the program logged", async () => {
        // hcm1's qwen3-32b without its planner block: the default budget (config/endpoint.ts, 16) applies.
        if (hub.config.role !== "hub") throw new Error("not a hub");
        const at = hub.config.hub.endpoints.findIndex((e) => e.spoke === "hcm1" && e.name === "qwen3-32b");
        const endpoints = hub.config.hub.endpoints.map((e, i) =>
            i === at ? { ...e, planner: { ...e.planner, enabled: true, maxGpuBudget: 16 } } : e,
        );
        const raw = {
            ...hub.raw,
            endpoints: (hub.raw!.endpoints as Array<Record<string, unknown>>).map((e, i) => (i === at ? { ...e, planner: undefined } : e)),
        };
        const input: ReportInput = {
            ...hub,
            config: { role: "hub", hub: { ...hub.config.hub, endpoints } },
            raw,
            warnings: ["spoke hn1: something the program logged"],
        };
        const md = (await reportFiles(input, { png: false }))["report.md"] as string;
        expect(md).toContain(
            "## Warnings\n\n- ⚠ spoke hn1: something the program logged\n- ⚠ spoke hcm1: planner budgets and fixed graphs add up to 28 GPUs, more than its 16: a planner cannot grow past the GPUs the others leave free (qwen3-32b uses the default planner.maxGpuBudget)\n",
        );
        expect(md.indexOf("## Warnings")).toBeLessThan(md.indexOf("## Spokes"));
        expect(md).toContain(
            // 8 GPUs: both revisions of the shipped rollout.
            "| Qwen/Qwen3-32B | hcm1 (vn-hochiminh-1) | qwen3-32b | sglang | disaggregated: prefill 1 x 2 GPU, decode 1 x 2 GPU | 8 | 16 (default) | none |",
        );
        expect(warningLines(md)).toEqual([
            "spoke hn1: something the program logged",
            expect.stringMatching(/^spoke hcm1: planner budgets and fixed graphs add up to 28/),
        ]);
    });

    it("lists which policies ran and what they found", async () => {
        const md = (await reportFiles(hub, { png: false }))["report.md"] as string;
        expect(md).toContain(`The pack's ${allPolicies.length} policies ran on the `);
        // Counts add up: the resources the header names = those the policies saw + component resources.
        const v = buildView(hub) as HubView;
        expect(md).toContain(
            `(the other ${v.resources - v.policy.resourcesChecked} of the ${v.resources} are component resources grouping them)`,
        );
        // Which policies had something to check here: the AWS ones on the hub, none of the RDMA ones.
        const checked = md.slice(md.indexOf("policies that checked this stack"), md.indexOf("policies with nothing to check"));
        expect(checked).toContain("`aws-stateful-protected`");
        expect(checked).not.toContain("`ucx-tls-rdma-no-tcp`");
        expect(md).toContain("- `ucx-tls-rdma-no-tcp` (mandatory)");
        const spokeMd = (await reportFiles(hn1, { png: false }))["report.md"] as string;
        expect(
            spokeMd.slice(spokeMd.indexOf("policies that checked this stack"), spokeMd.indexOf("policies with nothing to check")),
        ).toContain("`ucx-tls-rdma-no-tcp`");
        const withFinding: ReportInput = {
            ...hn1,
            policy: {
                ...hn1.policy,
                findings: [
                    {
                        policyName: "ucx-tls-rdma-no-tcp",
                        enforcementLevel: "mandatory",
                        message: "UCX_TLS has tcp",
                        resourceType: "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment",
                        resourceName: "endpoint-llama-70b-dgd",
                    },
                ],
                mandatory: [],
            },
        };
        expect((await reportFiles(withFinding, { png: false }))["report.md"]).toContain(
            "| mandatory | ucx-tls-rdma-no-tcp | DynamoGraphDeployment endpoint-llama-70b-dgd | UCX_TLS has tcp |",
        );
    });
});

describe("PNG pictures", () => {
    // Rasterised here, not read from the run's shared folder (test/global-setup.ts): the rerun must rasterise again.
    let shared: string | undefined;
    beforeAll(() => {
        shared = process.env[PNG_CACHE_ENV];
        delete process.env[PNG_CACHE_ENV];
    });
    afterAll(() => {
        if (shared !== undefined) process.env[PNG_CACHE_ENV] = shared;
    });

    it("a picture in the shared folder is read back, not rasterised again, under its SVG's key only", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "png-shared-"));
        process.env[PNG_CACHE_ENV] = dir;
        try {
            const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="#000"/></svg>';
            const png = await svgToPng(svg, 1);
            const [file] = fs.readdirSync(dir);
            expect(fs.readFileSync(path.join(dir, file)).equals(png)).toBe(true);
            fs.writeFileSync(path.join(dir, file), "kept");
            expect((await svgToPng(svg, 1)).toString()).toBe("kept");
            expect((await svgToPng(svg, 2)).toString()).not.toBe("kept"); // another scale, another key
            expect((await svgToPng(svg.replace("#000", "#111"), 1)).toString()).not.toBe("kept");
        } finally {
            delete process.env[PNG_CACHE_ENV];
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("rasterises the SVG at 1.5x with the bundled font: text leaves ink, same bytes on a rerun", async () => {
        const files = await reportFiles(hn1);
        const svg = files["rails.svg"] as string;
        const w = Number(/width="(\d+)"/.exec(svg)![1]);
        const png = decodePng(files["rails.png"] as Buffer);
        expect(png.width).toBe(Math.round(w * 1.5));
        expect((await reportFiles(hn1))["rails.png"]).toEqual(files["rails.png"]);
        // Text only, no shapes: non-white pixels prove the font was loaded (resvg draws no text without one).
        const only = decodePng(
            await svgToPng(
                '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="30"><rect width="120" height="30" fill="#fff"/><text x="4" y="20" font-family="DejaVu Sans Mono" font-size="14">mlx5_3</text></svg>',
                1,
            ),
        );
        const ink = [...only.data].filter((b, i) => i % (1 + only.width * 4) !== 0 && b < 128).length;
        expect(ink).toBeGreaterThan(20);
    });
});

describe("report helpers", () => {
    it("counts DGD GPUs from worker components only (frontend and planner have none)", () => {
        expect(
            dgdGpus({
                spec: {
                    components: [
                        { type: "frontend", replicas: 1, podTemplate: { spec: { containers: [{}] } } },
                        {
                            type: "prefill",
                            replicas: 2,
                            podTemplate: { spec: { containers: [{ resources: { limits: { "nvidia.com/gpu": "2" } } }] } },
                        },
                        {
                            type: "decode",
                            replicas: 1,
                            podTemplate: { spec: { containers: [{ resources: { limits: { "nvidia.com/gpu": "4" } } }] } },
                        },
                    ],
                },
            }),
        ).toBe(8);
    });

    it("escapes table cells and draws bars over 100% full", () => {
        expect(cell("a|b\nc")).toBe("a\\|b c");
        expect(bar(20, 16, 10)).toBe("`██████████` 20/16 (125%)");
    });

    it("shows progress only on a TTY outside CI, and timings at the end", () => {
        const out: string[] = [];
        const tty = { isTTY: true, write: (s: string) => out.push(s) };
        expect(interactive(tty, {})).toBe(true);
        expect(interactive(tty, { CI: "true" })).toBe(false);
        expect(interactive({ isTTY: false, write: () => 0 }, {})).toBe(false);
        const p = new RenderProgress(2, tty, true);
        p.stack("hub-prod");
        p.phase("policy");
        p.end(true);
        p.stack("spoke-hn1");
        p.end(false);
        p.summary();
        expect(out.join("")).toMatch(/\[1\/2\] hub-prod ok \d+\.\d s \(program \d+\.\d s, policy \d+\.\d s\)\n/);
        expect(out.join("")).toContain("[2/2] spoke-hn1 FAILED");
        expect(out[out.length - 1]).toMatch(/^render: 2 stack\(s\) in \d+\.\d s: program/);
        const quiet: string[] = [];
        const q = new RenderProgress(1, { isTTY: false, write: (s: string) => quiet.push(s) }, false);
        q.stack("hub-prod");
        q.end(true);
        q.summary();
        expect(quiet).toHaveLength(1);
        expect(quiet[0]).toMatch(/^render: 1 stack\(s\) in \d+\.\d s\n$/);
    });
});
