/**
 * `npm run upstream-check` (tools/upstream-check.ts) against the facts in upstream/: it passes on what lib/ renders and
 * fails, naming stack, object, container and key, on a planted unknown flag, env var and Helm values key, on refused
 * combinations and on an image variant lacking what its config names. Facts cited in upstream/*.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { ChartFacts } from "../upstream";
import { checkHelmValues, checkOutDir, checkStack, defaultFacts, type Facts, type Finding } from "../tools/upstream-check";
import { discoverStacks } from "../lib/stackfiles";
import { endpoint, endpointObjects, mainOf, placement } from "./policies/rdma-fixtures";
import { buildDgd } from "../lib/dgd";
import { NodeProfileSchema, presetProfiles } from "../config/nodeProfile";
import { versions } from "../config/versions";
import { renderAllRepoStacks } from "./cli-render";

/**
 * A graph's objects as the check reads them (DGD + Mooncake objects + client ConfigMap). A disaggregated fixture on
 * the Mooncake pool runs prefill at decode's TP: the hub refuses unequal TP on one pool (config/endpoint.ts
 * `endpointUpstreamIssues`, upstream/activation.ts `mooncake-store-equal-tp`), checked on its own below.
 */
function objects(e = endpoint()): Array<Record<string, any>> {
    // ... and a planner budget with room for one more worker (upstream/activation.ts `planner-scale-up-headroom`).
    if (e.topology.mode === "disaggregated" && e.kvPool.kind === "mooncake")
        e = {
            ...e,
            topology: { ...e.topology, prefill: { ...e.topology.prefill, gpusPerWorker: e.topology.decode.gpusPerWorker } },
            planner: { ...e.planner, maxGpuBudget: Math.max(e.planner.maxGpuBudget, 16) },
        };
    const { dgd, others } = endpointObjects(e);
    return [structuredClone(dgd), ...structuredClone(others)];
}
const dgdOf = (objs: Array<Record<string, any>>) => objs.find((o) => o.kind === "DynamoGraphDeployment")!;
/**
 * Findings of the per-container and Helm rules (the tests below plant faults on one side; pair and KV closed-world
 * findings are tested apart, here and in test/policies/kv-closed-world.test.ts).
 */
const run = (objs: Array<Record<string, any>>, facts: Facts = defaultFacts) =>
    checkStack("spoke-test", objs, [], facts).findings.filter(
        (f) => !/ and /.test(f.container ?? "") && !f.message.includes("the pack cannot prove"),
    );
const pairFindings = (objs: Array<Record<string, any>>, facts: Facts = defaultFacts) =>
    checkStack("spoke-test", objs, [], facts).findings.filter((f) => / and /.test(f.container ?? ""));
const keys = (f: Finding[]) => f.map((x) => `${x.object} ${x.container} ${x.key}`);

describe("upstream-check on what lib/ renders", () => {
    for (const engine of ["vllm", "sglang"] as const) {
        it(`${engine} P/D with the Mooncake pool: every flag, env var and combination is known upstream`, () => {
            expect(run(objects(endpoint({ engine })))).toEqual([]);
        });
    }
    it("TRT-LLM P/D and aggregated vLLM: no findings", () => {
        expect(run(objects(endpoint({ engine: "trtllm", kvPool: { kind: "none" } })))).toEqual([]);
        expect(run(objects(endpoint({ topology: { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 4 } } })))).toEqual([]);
    });
    it("EFA pool: the -efa image provides aws-ofi-nccl and libfabric for NCCL_NET=Libfabric / FI_PROVIDER=efa", () => {
        const P5EN = NodeProfileSchema.parse(presetProfiles().get("p5en-48xlarge"));
        const pool = { ...placement({ profile: P5EN }), hugepages2MiPerNode: 5128 };
        const rt = versions.dynamoRuntime.sglang;
        const dgd = buildDgd({
            endpoint: endpoint({ engine: "sglang", kvPool: { kind: "none" } }),
            namespace: "inference",
            pool,
            runtimeImage: `${rt.image}:${rt.version}`,
            plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 200,
        });
        // Workers and their preflight run the -efa variant (ai-dynamo/dynamo container/templates/aws.Dockerfile); the Frontend does not.
        expect(mainOf(dgd, "decode").image).toBe(`${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.efaVersion}`);
        expect(dgd.spec.components.find((c) => c.name === "decode")!.podTemplate.spec.initContainers as any[]).toMatchObject([
            { image: `${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.efaVersion}` },
        ]);
        expect(mainOf(dgd, "Frontend").image).toBe(`${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.version}`);
        expect(run([dgd as any])).toEqual([]);
        // The same config on the plain runtime image: it lacks aws-ofi-nccl, libfabric, efa-installer and fi_info.
        const plain = structuredClone(dgd) as any;
        for (const c of plain.spec.components)
            for (const ct of [...(c.podTemplate.spec.initContainers ?? []), ...c.podTemplate.spec.containers])
                ct.image = ct.image.replace("-efa", "");
        const f = run([plain]).filter((x) => x.message.includes(" lacks "));
        expect(
            f
                .map((x) => x.message.split(":")[0])
                .filter((m, i, a) => a.indexOf(m) === i)
                .sort(),
        ).toEqual(["fi-provider-efa", "nccl-net-libfabric", "nixl-libfabric-sglang", "preflight-efa"]);
        expect(f.find((x) => x.message.startsWith("nccl-net-libfabric"))).toMatchObject({
            stack: "spoke-test",
            object: "DynamoGraphDeployment/inference/llama-70b component prefill",
            container: "main",
            key: "env.NCCL_NET",
        });
    });
});

describe("upstream-check pair rule: prefill and decode identical except role settings (upstream/pairs.ts)", () => {
    it("a rendered pair passes; a setting on one side only is named with both sides and the key", () => {
        for (const engine of ["vllm", "sglang", "trtllm"] as const)
            expect(pairFindings(objects(endpoint({ engine, kvPool: { kind: "none" } }))), engine).toEqual([]);
        const objs = objects(endpoint({ engine: "vllm" }));
        mainOf(dgdOf(objs), "decode").env.push({ name: "UCX_RNDV_THRESH", value: "8192" });
        expect(pairFindings(objs)).toMatchObject([
            { object: "DynamoGraphDeployment/inference/llama-70b", container: "prefill/main and decode/main", key: "UCX_RNDV_THRESH" },
        ]);
        expect(pairFindings(objs)[0].message).toMatch(/prefill has UCX_RNDV_THRESH \S+ but decode has 8192/);
    });
    it("the KV closed world runs in upstream-check too: an unknown UCX knob is refused by name and value", () => {
        const objs = objects(endpoint({ engine: "vllm" }));
        for (const r of ["prefill", "decode"]) mainOf(dgdOf(objs), r).env.push({ name: "UCX_ZCOPY_THRESH", value: "inf" });
        const f = checkStack("spoke-test", objs, []).findings.filter((x) => x.message.includes("the pack cannot prove"));
        expect(f.map((x) => [x.container, x.key])).toEqual([
            ["prefill/main", "env.UCX_ZCOPY_THRESH"],
            ["decode/main", "env.UCX_ZCOPY_THRESH"],
        ]);
    });
    it("engine and Mooncake store agree on protocol, metadata server and master; a store on tcp is named", () => {
        for (const engine of ["vllm", "sglang"] as const) {
            const objs = objects(endpoint({ engine }));
            expect(pairFindings(objs), engine).toEqual([]);
            const store = objs.find((o) => o.kind === "Deployment" && String(o.metadata.name).includes("mooncake-store"))!;
            store.spec.template.spec.containers[0].env.find((e: any) => e.name === "MOONCAKE_PROTOCOL").value = "tcp";
            const f = pairFindings(objs).filter((x) => x.key === "protocol");
            expect(f.length, engine).toBeGreaterThan(0);
            expect(f[0].message).toMatch(/the engine has Mooncake protocol rdma but its store has tcp/);
        }
    });
    it("a planted change to the role facts changes the verdict", () => {
        const objs = objects(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        expect(pairFindings(objs)).toEqual([]);
        const noRoles: Facts = { ...defaultFacts, pairRoles: {} };
        expect(pairFindings(objs, noRoles).map((f) => f.key)).toContain("--disaggregation-mode");
    });
});

describe("upstream-check fails on planted faults, naming stack, object, container and key", () => {
    it("an unknown flag, a flag value outside upstream's choices, a typo'd env var", () => {
        const objs = objects();
        const d = mainOf(dgdOf(objs), "decode");
        d.args.push("--enable-magic-kv");
        d.args[d.args.indexOf("--disaggregation-mode") + 1] = "decoder";
        d.env.push({ name: "VLLM_NIXL_SIDE_CHANEL_HOST", value: "10.0.0.1" });
        const f = run(objs);
        expect(keys(f)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode main --disaggregation-mode",
            "DynamoGraphDeployment/inference/llama-70b component decode main --enable-magic-kv",
            "DynamoGraphDeployment/inference/llama-70b component decode main env.VLLM_NIXL_SIDE_CHANEL_HOST",
        ]);
        expect(f[1].message).toContain("flag --enable-magic-kv is not known to dynamo.vllm (dynamo-vllm@1.5.0, vllm@v0.28.0)");
        expect(f[0].message).toContain("--disaggregation-mode=decoder is not one of agg, pd, prefill, decode, encode");
        expect(f[0].stack).toBe("spoke-test");
    });
    it("a flag given twice is refused (argparse keeps the last, so the first is inert), under an alias too; an append flag may repeat", () => {
        const objs = objects();
        const d = mainOf(dgdOf(objs), "decode");
        d.args.push("--disaggregation-mode", "prefill");
        const f = run(objs);
        expect(keys(f)).toEqual(["DynamoGraphDeployment/inference/llama-70b component decode main --disaggregation-mode"]);
        expect(f[0].message).toBe("flag --disaggregation-mode is given twice: dynamo.vllm keeps the last, so the first is inert");
        // SGLang's --tp-size and its alias --tensor-parallel-size are one flag
        const sg = objects(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        mainOf(dgdOf(sg), "decode").args.push("--tensor-parallel-size", "2");
        expect(run(sg).map((x) => x.message)).toEqual([
            "flag --tp-size is given twice (also as --tensor-parallel-size): dynamo.sglang keeps the last, so the first is inert",
        ]);
        // Mooncake's store service appends every -D/--define (action="append"): repeated, both count
        const mc = objects(endpoint({ engine: "vllm" }));
        const store = mc.find((o) => o.kind === "Deployment" && String(o.metadata.name).includes("mooncake-store"))!;
        store.spec.template.spec.containers[0].args.push("-D", "local_hostname=store-0", "--define", "eviction_ratio=0.1");
        expect(run(mc)).toEqual([]);
        store.spec.template.spec.containers[0].args.push("--port", "8089");
        expect(run(mc).map((x) => x.message)).toEqual([
            "flag --port is given twice: mooncake.mooncake_store_service keeps the last, so the first is inert",
        ]);
    });
    it("TRT-LLM --disaggregation-mode: agg and pd (and the env var) pass, the enum's prefill_and_decode is refused", () => {
        /** An aggregated TRT-LLM worker with `--disaggregation-mode mode` and DYN_TRTLLM_DISAGGREGATION_MODE set to `env`. */
        const agg = (mode?: string, env?: string | { valueFrom: Record<string, unknown> }) => {
            const objs = objects(
                endpoint({
                    engine: "trtllm",
                    kvPool: { kind: "none" },
                    topology: { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 4 } },
                }),
            );
            const w = mainOf(dgdOf(objs), "worker");
            if (mode) w.args.push("--disaggregation-mode", mode);
            if (env !== undefined)
                w.env = [...(w.env ?? []), { name: "DYN_TRTLLM_DISAGGREGATION_MODE", ...(typeof env === "string" ? { value: env } : env) }];
            return run(objs);
        };
        for (const mode of ["agg", "pd"]) expect(agg(mode), mode).toEqual([]);
        expect(agg(undefined, "agg")).toEqual([]);
        const f = agg("prefill_and_decode");
        expect(keys(f)).toEqual(["DynamoGraphDeployment/inference/llama-70b component worker main --disaggregation-mode"]);
        expect(f[0].message).toContain("--disaggregation-mode=prefill_and_decode is not one of agg, pd, prefill, decode, encode");
        expect(defaultFacts.components["dynamo-trtllm"].flags["--disaggregation-mode"].default).toBe("agg");
        // The env var is the flag's default, which argparse does not check against choices; validate() refuses it at start.
        const e = agg(undefined, "prefill_and_decode");
        expect(keys(e)).toEqual(["DynamoGraphDeployment/inference/llama-70b component worker main env.DYN_TRTLLM_DISAGGREGATION_MODE"]);
        expect(e[0].message).toContain("DYN_TRTLLM_DISAGGREGATION_MODE=prefill_and_decode is not one of agg, pd, prefill, decode, encode");
        expect(agg(undefined, "pd")).toEqual([]);
        // a restricted value from a ConfigMap or Secret cannot be checked: refused
        expect(agg(undefined, { valueFrom: { configMapKeyRef: { name: "modes", key: "mode" } } }).map((x) => x.message)).toEqual([
            expect.stringContaining(
                "DYN_TRTLLM_DISAGGREGATION_MODE takes one of agg, pd, prefill, decode, encode; its value comes from valueFrom",
            ),
        ]);
    });
    it("TRT-LLM: the old role flags are unknown to dynamo.trtllm", () => {
        const objs = objects(endpoint({ engine: "trtllm", kvPool: { kind: "none" } }));
        mainOf(dgdOf(objs), "prefill").args.push("--is-prefill-worker");
        const f = run(objs);
        expect(keys(f)).toEqual(["DynamoGraphDeployment/inference/llama-70b component prefill main --is-prefill-worker"]);
        expect(f[0].message).toContain("flag --is-prefill-worker is not known to dynamo.trtllm");
    });
    it("an unknown KVTransferConfig field and an unknown Mooncake master flag", () => {
        const objs = objects();
        const p = mainOf(dgdOf(objs), "prefill");
        const i = p.args.indexOf("--kv-transfer-config");
        p.args[i + 1] = JSON.stringify({ ...JSON.parse(p.args[i + 1]), kv_failure_policy: "fail" });
        const master = objs.find((o) => o.kind === "Deployment" && o.metadata.name.endsWith("mooncake-master"))!;
        master.spec.template.spec.containers[0].args.push("--rpc-port=1");
        expect(keys(run(objs))).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component prefill main --kv-transfer-config.kv_failure_policy",
            "Deployment/inference/llama-70b-mooncake-master master --rpc-port",
        ]);
    });
    it("the Mooncake store config without mode is refused (embedded default with segment 0)", () => {
        const objs = objects();
        const cm = objs.find((o) => o.kind === "ConfigMap")!;
        const cfg = JSON.parse(cm.data["mooncake.json"]);
        expect(cfg).toMatchObject({ mode: "standalone-store", global_segment_size: 0 });
        delete cfg.mode;
        cm.data["mooncake.json"] = JSON.stringify(cfg);
        const f = run(objs);
        expect(f.map((x) => [x.container, x.key])).toEqual([
            ["main", "/etc/mooncake/mooncake.json:global_segment_size"],
            ["main", "/etc/mooncake/mooncake.json:global_segment_size"],
        ]);
        expect(f[0].message).toContain("embedded mode (the default) requires global_segment_size > 0");
    });
    it("MultiConnector without VLLM_NIXL_SIDE_CHANNEL_HOST, or a loopback one, is a non-routable handshake", () => {
        const objs = objects();
        const p = mainOf(dgdOf(objs), "prefill"),
            d = mainOf(dgdOf(objs), "decode");
        expect(p.env.find((e: any) => e.name === "VLLM_NIXL_SIDE_CHANNEL_HOST")).toEqual({
            name: "VLLM_NIXL_SIDE_CHANNEL_HOST",
            valueFrom: { fieldRef: { fieldPath: "status.podIP" } },
        });
        p.env = p.env.filter((e: any) => e.name !== "VLLM_NIXL_SIDE_CHANNEL_HOST");
        d.env = d.env.map((e: any) => (e.name === "VLLM_NIXL_SIDE_CHANNEL_HOST" ? { name: e.name, value: "0.0.0.0" } : e));
        const f = run(objs);
        expect(keys(f)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component prefill main env.VLLM_NIXL_SIDE_CHANNEL_HOST",
            "DynamoGraphDeployment/inference/llama-70b component decode main env.VLLM_NIXL_SIDE_CHANNEL_HOST",
        ]);
        expect(f[0].message).toContain("unset with top-level MultiConnector: vLLM advertises localhost");
        expect(f[1].message).toContain("0.0.0.0 is not routable");
    });
    it("SGLang P/D: the advertised SGLANG_HOST_IP is the pod IP; unset or 0.0.0.0 is refused", () => {
        const objs = objects(endpoint({ engine: "sglang" }));
        const p = mainOf(dgdOf(objs), "prefill"),
            d = mainOf(dgdOf(objs), "decode");
        expect(p.env.find((e: any) => e.name === "SGLANG_HOST_IP")).toEqual({
            name: "SGLANG_HOST_IP",
            valueFrom: { fieldRef: { fieldPath: "status.podIP" } },
        });
        p.env = p.env.filter((e: any) => e.name !== "SGLANG_HOST_IP");
        d.env = d.env.map((e: any) => (e.name === "SGLANG_HOST_IP" ? { name: e.name, value: "0.0.0.0" } : e));
        expect(run(objs).map((x) => [x.object.split(" ").at(-1), x.key, x.message.split(" ")[0]])).toEqual([
            ["prefill", "env.SGLANG_HOST_IP", "sglang-host-ip-not-routable"],
            ["decode", "env.SGLANG_HOST_IP", "sglang-host-ip-not-routable"],
        ]);
    });
    it("SGLang decode with HiCache but without --disaggregation-decode-enable-radix-cache", () => {
        const objs = objects(endpoint({ engine: "sglang" }));
        const d = mainOf(dgdOf(objs), "decode");
        d.args = d.args.filter((a: string) => a !== "--disaggregation-decode-enable-radix-cache");
        // (The decode worker renders no KV event publisher: the router reads none from decode workers by default.)
        expect(keys(run(objs))).toEqual(["DynamoGraphDeployment/inference/llama-70b component decode main --enable-hierarchical-cache"]);
        // With one planted on the chunk cache, it is inert twice over: no events, and no subscriber.
        d.args.push("--kv-events-config", '{"publisher":"zmq","endpoint":"tcp://*:5557"}');
        expect(keys(run(objs))).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode main --enable-hierarchical-cache",
            "DynamoGraphDeployment/inference/llama-70b component decode main --kv-events-config",
        ]);
    });
    it("decode KV events without conditional disaggregation (vLLM): read by no router", () => {
        const objs = objects();
        const d = mainOf(dgdOf(objs), "decode");
        d.args.push(
            "--kv-events-config",
            '{"publisher":"zmq","topic":"kv-events","endpoint":"tcp://*:20080","enable_kv_cache_events":true}',
        );
        const found = run(objs);
        expect(keys(found)).toEqual(["DynamoGraphDeployment/inference/llama-70b component decode main --kv-events-config"]);
        expect(found[0].message).toMatch(/^kv-events .*inert.*KvEventSourceRequirement::NotRequired/);
        // Under --router-conditional-disagg the router subscribes to decode events: accepted.
        mainOf(dgdOf(objs), "Frontend").args.push("--router-conditional-disagg");
        expect(run(objs)).toEqual([]);
    });
    it("a static UCX_NET_DEVICES of all rails beside vLLM's per-rank map", () => {
        const objs = objects();
        mainOf(dgdOf(objs), "decode").env.push({ name: "UCX_NET_DEVICES", value: "mlx5_0:1,mlx5_3:1" });
        expect(run(objs).map((x) => x.message.split(" ")[0])).toEqual(["vllm-nic-map-static-list"]);
    });
    it("an image tag without facts and an unknown entry point", () => {
        const objs = objects();
        mainOf(dgdOf(objs), "Planner").image = "nvcr.io/nvidia/ai-dynamo/dynamo-planner:9.9.9";
        mainOf(dgdOf(objs), "Frontend").command = ["python3", "-m", "dynamo.frontnd"];
        expect(keys(run(objs))).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component Frontend main command",
            "DynamoGraphDeployment/inference/llama-70b component Planner main image",
            // Closed world: the Planner's Dynamo release is not recorded, so its pair with the frontend is unproven = a finding.
            "DynamoGraphDeployment/inference/llama-70b component Planner main image",
        ]);
        expect(run(objs).filter((x) => x.message.startsWith("dynamo-router-workers: UNPROVEN"))).toHaveLength(1);
    });
});

describe("Helm values keys (chart facts from upstream/charts)", () => {
    // A small fixture in the ChartFacts shape: the real facts are upstream/charts (helper a2).
    const fixture: ChartFacts[] = [
        {
            chart: "demo",
            repository: "https://charts.example",
            version: "1.2.3",
            source: "example/demo@v1.2.3:values.yaml",
            valuesKeys: ["replicaCount", "image.tag", "nodeSelector.*", "tolerations"],
            openSubtrees: ["extraEnv"],
        },
    ];
    it("known keys, map keys under *, arrays as leaves and open subtrees pass", () => {
        expect(
            checkHelmValues(
                {
                    chart: "demo",
                    version: "1.2.3",
                    values: {
                        replicaCount: 2,
                        image: { tag: "x" },
                        nodeSelector: { a: "b" },
                        tolerations: [{ key: "k" }],
                        extraEnv: { A: { deep: 1 } },
                    },
                },
                fixture,
            ),
        ).toEqual([]);
    });
    it("a planted unknown values key fails naming the key; a chart without facts fails naming chart@version", () => {
        expect(checkHelmValues({ chart: "demo", version: "1.2.3", values: { image: { tag: "x", tga: "y" } } }, fixture)).toEqual([
            { key: "values.image.tga", message: "values key image.tga is not read by demo@1.2.3 (example/demo@v1.2.3:values.yaml)" },
        ]);
        expect(checkHelmValues({ chart: "demo", version: "1.2.4", values: {} }, fixture)).toEqual([
            { key: "chart", message: "no facts for chart demo@1.2.4" },
        ]);
    });
    it("a Release in resources.json is checked by checkStack with the stack and release named", () => {
        const f = checkStack(
            "spoke-x",
            [],
            [
                {
                    type: "kubernetes:helm.sh/v3:Release",
                    name: "demo-rel",
                    inputs: { chart: "demo", version: "1.2.3", values: { replicas: 1 } },
                },
            ],
            { ...defaultFacts, charts: fixture },
        ).findings;
        expect(f).toEqual([
            {
                stack: "spoke-x",
                object: "helm Release demo-rel (demo@1.2.3)",
                key: "values.replicas",
                message: "values key replicas is not read by demo@1.2.3 (example/demo@v1.2.3:values.yaml)",
            },
        ]);
    });
});

describe("upstream-check on the real render of every stack", () => {
    let out: string;
    beforeAll(async () => {
        // The real CLI in its own process, as a user runs it (test/cli-render.ts: one render of every stack per test
        // run, shared with test/render.test.ts); its exit code also reflects the policy pack and the chart facts, so
        // only its output is used here.
        out = (await renderAllRepoStacks()).out;
    }, 240_000);
    it("finds no unknown flag, env var, refused combination or missing image capability in any stack", () => {
        const r = checkOutDir(out);
        expect(r.stacks.length).toBe(discoverStacks().length);
        expect(r.checkedContainers).toBeGreaterThan(20);
        // Helm values keys are judged against upstream/charts (helper a2's facts); until those land every Release reads
        // "no facts for chart". Everything else must be clean now.
        expect(r.findings.filter((f) => !f.message.startsWith("no facts for chart"))).toEqual([]);
    });
});

describe("upstream-check on the counter store (Valkey, upstream/valkey.ts)", () => {
    const statefulSet = (args: string[]) => ({
        apiVersion: "apps/v1",
        kind: "StatefulSet",
        metadata: { name: "counters", namespace: "llm-gateway" },
        spec: {
            template: {
                spec: {
                    containers: [
                        {
                            name: "valkey",
                            image: `${versions.valkey.image}:${versions.valkey.version}`,
                            args,
                            env: [{ name: "VALKEY_PASSWORD", valueFrom: { secretKeyRef: { name: "s", key: "password" } } }],
                        },
                    ],
                },
            },
        },
    });
    it("what CounterStore renders is known to valkey-server; an unknown directive or a value outside its enum is a finding", async () => {
        const { valkeyArgs } = await import("../components/spoke/CounterStore");
        expect(run([statefulSet(valkeyArgs(512))])).toEqual([]);
        const bad = valkeyArgs(512).map((a) => (a === "noeviction" ? "lru" : a === "--save" ? "--snapshot" : a));
        expect(keys(run([statefulSet(bad)]))).toEqual(
            expect.arrayContaining([
                "StatefulSet/llm-gateway/counters valkey --maxmemory-policy",
                "StatefulSet/llm-gateway/counters valkey --snapshot",
            ]),
        );
        // Without the server named, the image's entry point is not one the facts know.
        expect(keys(run([statefulSet(valkeyArgs(512).slice(1))]))).toEqual(["StatefulSet/llm-gateway/counters valkey command"]);
    });
});
