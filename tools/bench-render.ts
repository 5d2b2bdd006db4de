/**
 * Render benchmark: time to render 1 hub + N spokes x M endpoints through tools/render.ts `renderStacks`
 * (the offline program under mocks, policies included), for N = 5 and N = 50, so we see how cost grows with the
 * number of stacks and endpoints. The floor is the same hub and spokes with no endpoints (everything but the
 * serving layer), so `ratio` is what the endpoints cost on top.
 *
 * Stack files are generated from the repo's hub-prod and spoke-hn1 files into a temp `stacks/` dir (the hub
 * checks its spokes' files next to its own, programs/spoke-registry.ts); output goes to the same temp dir, removed
 * afterwards. Run: `node -r ts-node/register/transpile-only tools/bench-render.ts [N...] [--endpoints M]`.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { renderStacks, type StackRenderResult } from "./render";
import { readStackFile, type StackFile, STACKS_DIR } from "../lib/stackfiles";

/** The generated hub name; spokes reference `organization/platform/<HUB>`. */
const HUB = "bench-hub";

function clone(s: StackFile, name: string, config: Record<string, string>): StackFile {
    return { ...s, name, file: `(generated) Pulumi.${name}.yaml`, config, secretKeys: [...s.secretKeys] };
}

/**
 * Stack files for 1 hub + `spokes` spokes with `endpoints` endpoints each. Endpoints alternate vLLM/SGLang,
 * disaggregated 1x1 prefill + 1x1 decode GPUs with a one-store Mooncake pool, so every serving feature renders;
 * each spoke gets enough DGX H200 nodes for its endpoints' planner budgets.
 */
export function benchStacks(spokes: number, endpoints: number): StackFile[] {
    if (spokes > 140) throw new Error("at most 140 generated spokes (one 10.<100+i>.0.0/16 rail supernet each)");
    const hubBase = readStackFile(path.join(STACKS_DIR, "Pulumi.hub-prod.yaml"));
    const spokeBase = readStackFile(path.join(STACKS_DIR, "Pulumi.spoke-hn1.yaml"));
    const models = JSON.parse(hubBase.config["platform:models"]) as Array<{ id: string }>;
    // Each endpoint claims its planner budget on the spoke (config/hub-checks.ts spokeClaimIssues): 4 GPUs, room for
    // one more 1-GPU worker beside its 2.
    const maxGpuBudget = 4;
    const nodes = Math.max(1, Math.ceil((endpoints * maxGpuBudget) / 8));
    const names = Array.from({ length: spokes }, (_, i) => `b${i + 1}`);
    const hubConfig = { ...hubBase.config };
    // The sample hub's global hostname names the sample spokes, which the generated ones replace.
    delete hubConfig["platform:failover"];
    // The generated spokes replace the sample ones; each gets an on-prem access-key identity with one key slot
    // created today (a slot without createdAt has no maximum age, and the render warns about it).
    const today = new Date().toISOString().slice(0, 10);
    hubConfig["platform:spokeIdentities"] = JSON.stringify(
        Object.fromEntries(
            names.map((n) => [
                n,
                {
                    mode: "access-key",
                    deployerRoleArn: `arn:aws:iam::111122223333:role/platform-spoke-deployer-${n}`,
                    keys: [{ id: "bench", createdAt: today }],
                    // An access key works only from the site's egress ranges (config/identity.ts); 192.0.2.0/24 is TEST-NET-1 (RFC 5737).
                    egressCidrs: ["192.0.2.0/24"],
                },
            ]),
        ),
    );
    hubConfig["platform:spokes"] = JSON.stringify(
        names.map((n) => ({ name: n, stack: `spoke-${n}`, region: `bench-${n}`, provider: "onprem", gpus: nodes * 8 })),
    );
    hubConfig["platform:endpoints"] = JSON.stringify(
        names.flatMap((n) =>
            Array.from({ length: endpoints }, (_, j) => ({
                name: `ep-${j + 1}`,
                model: models[j % models.length].id,
                spoke: n,
                engine: j % 2 === 0 ? "vllm" : "sglang",
                topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 1 }, decode: { replicas: 1, gpusPerWorker: 1 } },
                router: { mode: "kv" },
                kvPool: { kind: "mooncake", segmentSizeGiB: 64, storeReplicas: 1 },
                planner: { optimizationTarget: "load", maxGpuBudget },
            })),
        ),
    );
    const out: StackFile[] = [clone(hubBase, HUB, hubConfig)];
    names.forEach((n, i) => {
        const c = { ...spokeBase.config };
        const spoke = JSON.parse(c["platform:spoke"]);
        c["platform:spoke"] = JSON.stringify({ ...spoke, name: n, region: `bench-${n}`, hubStack: `organization/platform/${HUB}` });
        const pools = JSON.parse(c["platform:nodePools"]);
        pools[0].nodes = Array.from({ length: nodes }, (_, k) => `${n}-gpu-${k + 1}`);
        c["platform:nodePools"] = JSON.stringify(pools);
        const cluster = JSON.parse(c["platform:cluster"]);
        c["platform:cluster"] = JSON.stringify({ ...cluster, kubeconfigContext: `${n}-admin` });
        // Routable networks must not collide between spokes of one hub: a /16 of rails and a /24 of frontend each.
        const backend = JSON.parse(c["platform:backend"]);
        c["platform:backend"] = JSON.stringify({ ...backend, railSupernet: `10.${100 + i}.0.0/16` });
        const frontend = JSON.parse(c["platform:frontend"]);
        c["platform:frontend"] = JSON.stringify({ ...frontend, subnet: `10.20.${i}.0/24` });
        // Each spoke's edge is its own (the hub refuses two spokes with one hostname or address): its own name, and no
        // reachable address (the generated hub has no global hostname).
        const gateway = JSON.parse(c["platform:gateway"]);
        const { reachable: _, ...listener } = gateway.listener ?? {};
        c["platform:gateway"] = JSON.stringify({ ...gateway, listener: { ...listener, hostname: `llm.${n}.example.com` } });
        const s = clone(spokeBase, `spoke-${n}`, c);
        out.push({ ...s, hub: HUB });
    });
    return out;
}

/** One measured render. */
export interface RenderMeasurement {
    spokes: number;
    endpointsPerSpoke: number;
    stacks: number;
    resources: number;
    ms: number;
    msPerStack: number;
    failed: string[];
}

/** Renders the generated stacks once into a temp dir and measures wall time. */
export async function measureRender(spokes: number, endpoints: number): Promise<RenderMeasurement> {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "bench-render-"));
    const outDir = path.join(tmp, "out");
    const dir = path.join(tmp, "stacks");
    fs.mkdirSync(dir);
    const stacks = benchStacks(spokes, endpoints).map((s) => {
        const file = path.join(dir, `Pulumi.${s.name}.yaml`);
        const config = Object.fromEntries(
            Object.entries(s.config).map(([k, v]) => {
                try {
                    return [k, JSON.parse(v)];
                } catch {
                    return [k, v];
                }
            }),
        );
        for (const k of s.secretKeys) config[k] = { secure: "offline" };
        fs.writeFileSync(file, YAML.stringify({ config }));
        return { ...s, file };
    });
    try {
        const t0 = process.hrtime.bigint();
        const results: StackRenderResult[] = await renderStacks(stacks, { outDir, preview: false, quiet: true });
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        const resources = results.reduce((n, r) => n + (r.result?.resources.length ?? 0), 0);
        return {
            spokes,
            endpointsPerSpoke: endpoints,
            stacks: stacks.length,
            resources,
            ms,
            msPerStack: ms / stacks.length,
            failed: results.filter((r) => !r.ok).map((r) => `${r.stack}: ${r.error}`),
        };
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
}

/**
 * The benchmark: for each N, render 1 hub + N spokes x M endpoints and the floor (same stacks, no endpoints), and
 * print stacks, resources, wall time, time per stack, per-endpoint cost and the growth from the first N.
 *
 * @throws Error when any generated stack fails to render (a benchmark of a failing render means nothing)
 */
export async function runRenderBench(ns: number[] = [5, 50], endpoints = 4): Promise<RenderMeasurement[]> {
    const rows: RenderMeasurement[] = [];
    const line = (cols: Array<string | number>) =>
        process.stdout.write(
            `${cols
                .map(String)
                .map((c, i) => (i === 0 ? c.padEnd(22) : c.padStart(12)))
                .join("")}\n`,
        );
    // Warm-up (module loading, JIT) so the first case is not charged for it.
    await measureRender(1, 1);
    line(["case", "stacks", "resources", "ms", "ms/stack", "ratio"]);
    let first: RenderMeasurement | undefined;
    for (const n of ns) {
        const floor = await measureRender(n, 0);
        const m = await measureRender(n, endpoints);
        for (const r of [floor, m]) if (r.failed.length) throw new Error(`render failed:\n${r.failed.join("\n")}`);
        first ??= m;
        line([`N=${n} M=0 (floor)`, floor.stacks, floor.resources, floor.ms.toFixed(0), floor.msPerStack.toFixed(1), "1.00"]);
        line([`N=${n} M=${endpoints}`, m.stacks, m.resources, m.ms.toFixed(0), m.msPerStack.toFixed(1), (m.ms / floor.ms).toFixed(2)]);
        const perEndpoint = (m.ms - floor.ms) / (n * endpoints);
        process.stdout.write(
            `  ${n * endpoints} endpoints cost ${perEndpoint.toFixed(1)} ms each on top of the floor; vs N=${first.spokes}: ${(m.stacks / first.stacks).toFixed(1)}x stacks, ${(m.resources / first.resources).toFixed(1)}x resources, ${(m.ms / first.ms).toFixed(1)}x time\n`,
        );
        rows.push(floor, m);
    }
    return rows;
}

if (require.main === module) {
    // `[N...] [--endpoints M] [--once]`; --once renders 1 hub + N spokes x M endpoints a single time (smoke check).
    const args = process.argv.slice(2);
    const i = args.indexOf("--endpoints");
    const m = i >= 0 ? Number(args[i + 1]) : 4;
    const ns = args.filter((a, k) => !a.startsWith("--") && (i < 0 || k !== i + 1)).map(Number);
    process.on("unhandledRejection", () => {
        /* reported by renderStacks per stack */
    });
    const job = args.includes("--once")
        ? measureRender(ns[0] ?? 1, m).then((r) => {
              if (r.failed.length) throw new Error(`render failed:\n${r.failed.join("\n")}`);
              process.stdout.write(`rendered ${r.stacks} stacks, ${r.resources} resources in ${r.ms.toFixed(0)} ms\n`);
          })
        : runRenderBench(ns.length ? ns : [5, 50], m);
    job.then(
        () => process.exit(0),
        (e) => {
            process.stderr.write(`bench-render: ${(e as Error).message}\n`);
            process.exit(1);
        },
    );
}
