/**
 * `npm run upstream-check` on features that would be inert or refused (upstream/check/activation.ts against
 * upstream/activation.ts), version pairs (upstream/check/versions.ts against upstream/compat.ts) and the observability
 * chain (upstream/check/observability.ts against upstream/metrics.ts and the exporter facts): each passes on what lib/
 * renders and fails, naming the feature, what is missing and the source, on a planted case.
 */
import { versions } from "../config/versions";
import { describe, expect, it } from "vitest";
import { ObservabilityConfigSchema } from "../config/observability";
import { buildDgd } from "../lib/dgd";
import { buildMooncake, mooncakeMasterAddress } from "../lib/mooncake";
import {
    alertGroups,
    dashboards,
    dynamoScrapeTargets,
    grafanaDashboard,
    type ObservedEndpoint,
    podMonitorSpec,
    scrapeTargets,
} from "../lib/observability";
import { ENVOY_GATEWAY_NAMESPACE, ENVOY_PROXY_POD_LABELS, GATEWAY_NAMESPACE } from "../lib/gateway";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import { AUTH_POD_LABELS, METERING_POD_LABELS } from "../lib/spoke-services";
import { gpuOperatorValues } from "../components/spoke/GpuOperator";
import { networkOperatorValues } from "../components/spoke/BackendFabric";
import { checkStack } from "../tools/upstream-check";
import { checkActivation } from "../upstream/check/activation";
import { checkObservability, scrapedSignals } from "../upstream/check/observability";
import { checkVersionPairs } from "../upstream/check/versions";
import type { Obj, ReleaseView, StackView } from "../upstream/check/view";
import type { BundledVersionFact } from "../upstream/compat";
import { endpoint, endpointObjects, mainOf, placement } from "./policies/rdma-fixtures";

const EAGLE = { speculative: { method: "eagle3", draftModel: "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", numSpeculativeTokens: 3 } };

function stackOf(objects: Obj[], releases: ReleaseView[] = []): StackView {
    return { stack: "spoke-test", objects, releases };
}
function objects(e = endpoint()): Obj[] {
    const { dgd, others } = endpointObjects(e);
    return [structuredClone(dgd), ...structuredClone(others)];
}
const dgdOf = (objs: Obj[]) => objs.find((o) => o.kind === "DynamoGraphDeployment")!;
const msgs = (f: Array<{ key: string; message: string; object: string }>) => f.map((x) => `${x.object} ${x.key}: ${x.message}`);

describe("activation: what lib/ renders takes effect", () => {
    it("vLLM EAGLE3 P/D, SGLang HiCache P/D, TRT-LLM: no activation finding", () => {
        expect(checkActivation(stackOf(objects(endpoint(EAGLE))))).toEqual([]);
        expect(checkActivation(stackOf(objects(endpoint({ ...EAGLE, engine: "sglang" }))))).toEqual([]);
        expect(checkActivation(stackOf(objects(endpoint({ engine: "trtllm", kvPool: { kind: "none" } }))))).toEqual([]);
    });
    it("GPU and Network Operator values as rendered on-prem: one NFD, no inert useHostMofed", () => {
        const releases = [
            {
                name: "gpu-operator",
                chart: "gpu-operator",
                version: versions.gpuOperator.version,
                values: gpuOperatorValues({ gpuDirectRdma: "dmabuf", useHostMofed: true, externalNfd: true }),
            },
            {
                name: "network-operator",
                chart: "network-operator",
                version: versions.networkOperator.version,
                values: networkOperatorValues(),
            },
        ];
        expect(checkActivation(stackOf([], releases))).toEqual([]);
        // peermem with host MOFED: useHostMofed is read (IsHostMOFED needs driver.rdma.enabled).
        expect(gpuOperatorValues({ gpuDirectRdma: "peermem", useHostMofed: true }).driver).toMatchObject({
            rdma: { enabled: true, useHostMofed: true },
        });
    });
});

describe("activation: planted inert or refused features", () => {
    it("EAGLE3 on decode only, or a different drafter on prefill: speculative-pd-identical (refused at the NIXL handshake)", () => {
        const objs = objects(endpoint(EAGLE));
        const pre = mainOf(dgdOf(objs), "prefill");
        const at = pre.args.indexOf("--speculative-config");
        pre.args.splice(at, 2);
        const f = checkActivation(stackOf(objs));
        expect(f).toHaveLength(1);
        expect(f[0]).toMatchObject({
            object: "DynamoGraphDeployment/inference/llama-70b component prefill",
            container: "main",
            key: "speculative",
        });
        expect(f[0].message).toMatch(
            /^speculative-pd-identical .* would be refused: prefill has no speculative config .*vllm-project\/vllm@v0\.28\.0:.*nixl_connector\.py\]$/,
        );
        pre.args.push("--speculative-config", JSON.stringify({ method: "eagle3", model: "other/drafter", num_speculative_tokens: 3 }));
        expect(msgs(checkActivation(stackOf(objs)))[0]).toMatch(/speculates differently .*other\/drafter/);
        // SGLang: a different number of draft tokens on prefill.
        const s = objects(endpoint({ ...EAGLE, engine: "sglang" }));
        const sp = mainOf(dgdOf(s), "prefill").args;
        sp[sp.indexOf("--speculative-num-draft-tokens") + 1] = "5";
        expect(checkActivation(stackOf(s)).map((x) => x.key)).toEqual(["speculative"]);
    });
    it("SGLang HiCache registering as localhost: no local_hostname, a loopback one, $(POD_IP) without the env, inert MOONCAKE_*", () => {
        const base = objects(endpoint({ engine: "sglang" }));
        const extra = (o: Obj[]) => {
            const a = mainOf(dgdOf(o), "decode").args;
            return { a, i: a.indexOf("--hicache-storage-backend-extra-config") + 1 };
        };
        const set = (o: Obj[], f: (x: any) => void) => {
            const { a, i } = extra(o);
            const x = JSON.parse(a[i]);
            f(x);
            a[i] = JSON.stringify(x);
            return o;
        };
        const only = (o: Obj[]) => checkActivation(stackOf(o)).filter((x) => x.object.endsWith("component decode"));

        const none = only(
            set(structuredClone(base), (x) => {
                delete x.local_hostname;
            }),
        );
        expect(none).toHaveLength(1);
        expect(none[0].key).toBe("--hicache-storage-backend-extra-config.local_hostname");
        expect(none[0].message).toMatch(
            /^mooncake-registration .* would be refused: .*registers as localhost.*sgl-project\/sglang@v0\.5\.18:.*mooncake_store\.py\]$/,
        );
        expect(
            msgs(
                only(
                    set(structuredClone(base), (x) => {
                        x.local_hostname = "localhost";
                    }),
                ),
            )[0],
        ).toMatch(/"localhost" is not routable/);
        const noEnv = structuredClone(base);
        const dec = mainOf(dgdOf(noEnv), "decode");
        dec.env = dec.env.filter((e: Obj) => e.name !== "POD_IP");
        expect(msgs(only(noEnv))[0]).toMatch(/\$\(POD_IP\) expands to nothing/);
        const inert = structuredClone(base);
        mainOf(dgdOf(inert), "decode").env.push({
            name: "MOONCAKE_LOCAL_HOSTNAME",
            valueFrom: { fieldRef: { fieldPath: "status.podIP" } },
        });
        const f = only(inert);
        expect(f.map((x) => x.key)).toEqual(["env.MOONCAKE_LOCAL_HOSTNAME"]);
        expect(f[0].message).toMatch(/^sglang-hicache-mooncake .* reads its Mooncake config from the extra config only/);
    });
    it("the frontend's shared KV cache without a KV-event source, with a master that publishes nothing, or one not proven to carry the flag", () => {
        const e = endpoint({ engine: "sglang" });
        const ev = "tcp://llama-70b-mooncake-master.inference.svc.cluster.local:5557";
        const facts: BundledVersionFact[] = [
            {
                image: "pool:1",
                library: "mooncake",
                version: "v0.3.12.post1",
                source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/master.cpp",
            },
        ];
        const pool = buildMooncake({
            endpoint: e.name,
            namespace: "inference",
            image: "pool:1",
            pool: placement(),
            segmentSizeGiB: 64,
            storeReplicas: 1,
            poolNodes: 2,
            minLinkRateGbps: 400,
            versionFacts: facts,
        });
        const dgd = buildDgd({
            endpoint: e,
            namespace: "inference",
            pool: placement(),
            runtimeImage: `${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.version}`,
            plannerImage: "p:1",
            prometheusEndpoint: "http://p",
            minLinkRateGbps: 400,
            mooncake: { master: mooncakeMasterAddress(e.name, "inference"), configMap: "c", kvEventsEndpoint: ev },
        });
        const objs = () => structuredClone([dgd, pool.masterDeployment, pool.masterService, pool.storeDeployment]) as Obj[];
        // The whole chain, with the master's release recorded: only the unrecorded default facts make it unproven.
        const shared = (o: Obj[]) => checkActivation(stackOf(o)).filter((x) => x.message.startsWith("shared-kv-cache"));
        const full = shared(objs());
        expect(full.map((x) => x.message)).toEqual([
            expect.stringMatching(/master image pool:1 is not recorded to carry Mooncake >= v0\.3\.12/),
        ]);
        // No endpoint on the frontend nor the workers: inert.
        const noEnv = objs();
        for (const c of dgdOf(noEnv).spec.components)
            c.podTemplate.spec.containers[0].env = (c.podTemplate.spec.containers[0].env ?? []).filter(
                (x: Obj) => x.name !== "DYN_MOONCAKE_KV_EVENTS_ENDPOINT",
            );
        const f = shared(noEnv);
        expect(f).toHaveLength(1);
        expect(f[0]).toMatchObject({
            object: "DynamoGraphDeployment/inference/llama-70b component Frontend",
            key: "env.DYN_MOONCAKE_KV_EVENTS_ENDPOINT",
        });
        expect(f[0].message).toMatch(/would be inert: no DYN_MOONCAKE_KV_EVENTS_ENDPOINT .*hicache\.md\]$/);
        // The master without --enable_kv_events.
        const off = objs();
        const m = off[1].spec.template.spec.containers[0];
        m.args = m.args.filter((a: string) => a !== "--enable_kv_events=true");
        expect(
            shared(off)
                .map((x) => x.message)
                .join("\n"),
        ).toMatch(/runs without --enable_kv_events \(default false\)/);
        // The master binding another port than the Service targets.
        const port = objs();
        const pm = port[1].spec.template.spec.containers[0];
        pm.args[pm.args.indexOf("--kv_events_bind_endpoint") + 1] = "tcp://0.0.0.0:6000";
        expect(
            shared(port)
                .map((x) => x.message)
                .join("\n"),
        ).toMatch(/binds KV events to tcp:\/\/0\.0\.0\.0:6000, not port 5557/);
    });
    it("GPU Operator: useHostMofed without driver.rdma.enabled is inert; its NFD next to the Network Operator's is refused", () => {
        const gpu = {
            name: "gpu-operator",
            chart: "gpu-operator",
            version: versions.gpuOperator.version,
            values: { driver: { rdma: { enabled: false, useHostMofed: true } } },
        };
        const net = {
            name: "network-operator",
            chart: "network-operator",
            version: versions.networkOperator.version,
            values: networkOperatorValues(),
        };
        const f = checkActivation(stackOf([], [gpu, net]));
        expect(f.map((x) => x.key)).toEqual(["values.driver.rdma.useHostMofed", "values.nfd.enabled"]);
        expect(f[0].message).toMatch(
            /^gpu-operator-host-mofed .* would be inert: driver\.rdma\.enabled is not true \[NVIDIA\/gpu-operator@v25\.10\.1:controllers\/object_controls\.go/,
        );
        expect(f[1].message).toMatch(/^single-nfd .*network-operator deploys node-feature-discovery too; set nfd\.enabled: false/);
        // Without the Network Operator (EKS), the GPU Operator's NFD is the only one.
        expect(checkActivation(stackOf([], [{ ...gpu, values: {} }]))).toEqual([]);
    });
    it("KV routing whose workers publish no KV events: a vLLM publisher without enable_kv_cache_events, an SGLang worker without --kv-events-config", () => {
        const v = objects(endpoint());
        const pre = mainOf(dgdOf(v), "prefill").args;
        pre[pre.indexOf("--kv-events-config") + 1] = JSON.stringify({ publisher: "zmq", topic: "kv-events", endpoint: "tcp://*:20080" });
        const f = checkActivation(stackOf(v));
        expect(f.map((x) => `${x.object} ${x.key}`)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component prefill --kv-events-config",
        ]);
        expect(f[0].message).toMatch(/^kv-events .* would be inert: the frontend routes on KV events .*offloading-support-matrix\.md\]$/);
        const sg = objects(endpoint({ engine: "sglang" }));
        const spre = mainOf(dgdOf(sg), "prefill").args;
        spre.splice(spre.indexOf("--kv-events-config"), 2);
        expect(checkActivation(stackOf(sg)).map((x) => x.object)).toEqual(["DynamoGraphDeployment/inference/llama-70b component prefill"]);
    });
    it("decode workers' KV events: needed only under --router-conditional-disagg; an SGLang decode worker on the chunk cache emits none", () => {
        // The router subscribes to no decode worker's events by default (KvEventSourceRequirement::NotRequired).
        const v = objects(endpoint());
        const dec = mainOf(dgdOf(v), "decode").args;
        dec.splice(dec.indexOf("--kv-events-config"), 2);
        expect(checkActivation(stackOf(v))).toEqual([]);
        mainOf(dgdOf(v), "Frontend").args.push("--router-conditional-disagg");
        expect(checkActivation(stackOf(v)).map((x) => `${x.object} ${x.key}`)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode --kv-events-config",
        ]);
        // The renderer gives an SGLang decode worker without the radix cache no publisher ...
        const sg = objects(endpoint({ engine: "sglang", kvPool: { kind: "none" } }));
        const sdec = mainOf(dgdOf(sg), "decode").args;
        expect(sdec).not.toContain("--kv-events-config");
        expect(checkActivation(stackOf(sg))).toEqual([]);
        // ... and one that has it is refused: Dynamo advertises a publisher the chunk cache never feeds.
        sdec.push("--kv-events-config", JSON.stringify({ publisher: "zmq", topic: "kv-events", endpoint: "tcp://*:5557" }));
        const f = checkActivation(stackOf(sg));
        expect(f.map((x) => `${x.object} ${x.key}`)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode --kv-events-config",
        ]);
        expect(f[0].message).toMatch(/^sglang-decode-kv-events .* would be inert: .*chunk cache.*pd_disaggregation_hook\.py\]$/);
        // Under conditional disaggregation the router needs it too: both facts speak.
        mainOf(dgdOf(sg), "Frontend").args.push("--router-conditional-disagg");
        expect(checkActivation(stackOf(sg)).map((x) => x.message.split(" ")[0])).toEqual(["kv-events", "sglang-decode-kv-events"]);
        // Keeping the radix cache makes the publisher real.
        sdec.push("--disaggregation-decode-enable-radix-cache");
        expect(checkActivation(stackOf(sg))).toEqual([]);
    });
    it("a Planner whose frontend (KV hit rate) or speculative vLLM workers (accept length) no selected PodMonitor scrapes", () => {
        const eps: ObservedEndpoint[] = [
            { name: "llama-70b", model: "meta-llama/Llama-3.3-70B-Instruct", engine: "vllm", gpus: 8, disaggregated: true },
        ];
        const labels = { release: "kube-prometheus-stack" };
        const objs = objects(endpoint());
        objs.push({
            apiVersion: "monitoring.coreos.com/v1",
            kind: "PrometheusRule",
            metadata: { name: "r", namespace: "monitoring", labels },
            spec: { groups: [] },
        });
        for (const t of dynamoScrapeTargets(eps))
            objs.push({
                apiVersion: "monitoring.coreos.com/v1",
                kind: "PodMonitor",
                metadata: { name: t.name, namespace: "monitoring", labels },
                spec: podMonitorSpec(t),
            });
        expect(checkActivation(stackOf(objs))).toEqual([]);
        // Load scaling reads the workers' forward-pass metrics over the event plane, not Prometheus: an unscraped
        // worker without speculative decoding costs the Planner nothing.
        const noWorkers = objs.filter((o) => !(o.kind === "PodMonitor" && o.metadata.name === "dynamo-workers"));
        expect(checkActivation(stackOf(noWorkers))).toEqual([]);
        const noFrontend = objs.filter((o) => !(o.kind === "PodMonitor" && o.metadata.name === "dynamo-frontends"));
        const f = checkActivation(stackOf(noFrontend));
        expect(f.map((x) => x.key)).toEqual(["scrape.frontend"]);
        expect(f[0]).toMatchObject({ object: "DynamoGraphDeployment/inference/llama-70b component Planner" });
        expect(f[0].message).toMatch(
            /^planner-signals .* would be inert: .*component Frontend \(port http\) is scraped by no PodMonitor .* reads no dynamo_component_router_kv_hit_rate/,
        );
        // vLLM workers with speculative decoding: the accept length comes from their vllm:spec_decode_* series.
        for (const r of ["prefill", "decode"]) mainOf(dgdOf(noWorkers), r).args.push("--speculative-config", '{"method":"ngram"}');
        const g = checkActivation(stackOf(noWorkers)).filter((x) => x.message.startsWith("planner-signals"));
        expect(g.map((x) => x.key)).toEqual(["scrape.prefill", "scrape.decode"]);
        expect(g[0].message).toMatch(/component prefill \(port system\) is scraped by no PodMonitor .* reads no vllm:spec_decode_\*/);
    });
    it("a podTemplate DYN_FORWARDPASS_METRIC_PORT on a worker of a planned graph replaces the operator's, switching load scaling's input", () => {
        const objs = objects(endpoint());
        expect(checkActivation(stackOf(objs))).toEqual([]);
        mainOf(dgdOf(objs), "decode").env.push({ name: "DYN_FORWARDPASS_METRIC_PORT", value: "" });
        const f = checkActivation(stackOf(objs));
        expect(f.map((x) => `${x.object} ${x.key}`)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode env.DYN_FORWARDPASS_METRIC_PORT",
        ]);
        expect(f[0].message).toMatch(/^planner-signals .* would be inert: .*replacing the operator's 20380.*runtime_provider\.py\]$/);
    });
    it("npm run upstream-check runs these rules (tools/upstream-check.ts checkStack)", () => {
        const objs = objects(endpoint(EAGLE));
        const pre = mainOf(dgdOf(objs), "prefill");
        pre.args.splice(pre.args.indexOf("--speculative-config"), 2);
        expect(checkStack("spoke-test", objs, []).findings.map((x) => x.key)).toContain("speculative");
    });
});

describe("version pairs (upstream/compat.ts)", () => {
    const VF = (image: string, library: "nixl" | "dynamo" | "mooncake", version?: string): BundledVersionFact => ({
        image,
        library,
        version,
        source: "ai-dynamo/dynamo@v1.5.0:docs/fern/pages/reference/general/compatibility.mdx",
    });
    it("the rendered graphs: NIXL, Dynamo and Mooncake pairs proven (master and store run the engine's runtime image)", () => {
        for (const engine of ["sglang", "vllm"] as const) {
            const objs = objects(endpoint({ engine }));
            const pool = objs.filter((o) => o.kind === "Deployment" && /mooncake-(master|store)$/.test(o.metadata.name));
            expect(pool.map((o) => o.spec.template.spec.containers[0].image)).toEqual([
                `${versions.dynamoRuntime[engine].image}:${versions.dynamoRuntime[engine].version}`,
                `${versions.dynamoRuntime[engine].image}:${versions.dynamoRuntime[engine].version}`,
            ]);
            const r = checkVersionPairs(stackOf(objs));
            expect(r.findings).toEqual([]);
            expect(r.unproven).toEqual([]);
        }
    });
    it("closed world: a pool on another image whose Mooncake release is not recorded is a finding, not a listed pass", () => {
        const objs = objects(endpoint({ engine: "sglang" }));
        for (const o of objs.filter((x) => x.kind === "Deployment" && /mooncake-(master|store)$/.test(x.metadata.name)))
            o.spec.template.spec.containers[0].image = "docker.io/lmsysorg/sglang:v0.5.16";
        const r = checkVersionPairs(stackOf(objs));
        const mc = r.findings.filter((x) => x.message.startsWith("mooncake-master-client: UNPROVEN"));
        expect(mc.map((x) => x.object).sort()).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode",
            "DynamoGraphDeployment/inference/llama-70b component decode",
            "DynamoGraphDeployment/inference/llama-70b component prefill",
            "DynamoGraphDeployment/inference/llama-70b component prefill",
        ]);
        expect(mc[0].message).toMatch(
            /mooncake release not recorded for docker\.io\/lmsysorg\/sglang:v0\.5\.16 and nvcr\.io\/nvidia\/ai-dynamo\/sglang-runtime:1\.5\.0.*kvcache-ai\/Mooncake@v0\.3\.12\.post1:mooncake-store\/include\/rpc_service\.h\]$/,
        );
        expect(r.unproven).toHaveLength(4);
    });
    it("planted: decode on another NIXL, a worker on another Dynamo, a client on another Mooncake", () => {
        const objs = objects(endpoint({ engine: "sglang" }));
        mainOf(dgdOf(objs), "decode").image = "decode:2";
        // The pinned images, with the library releases upstream records for them (1.4.0, 1.5.0, v0.3.12.post1: the
        // planted facts of this test, not the pins).
        const sglangImage = `${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.version}`;
        const plannerImage = `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`;
        const facts = [
            VF(sglangImage, "nixl", "1.4.0"),
            VF("decode:2", "nixl", "1.3.2"),
            VF(sglangImage, "dynamo", "1.5.0"),
            VF("decode:2", "dynamo", "1.4.0"),
            VF(plannerImage, "dynamo", "1.5.0"),
            VF(sglangImage, "mooncake", "v0.3.12.post1"),
            VF("decode:2", "mooncake", "v0.3.11.post1"),
        ];
        const r = checkVersionPairs(stackOf(objs), facts);
        const by = (id: string) => r.findings.filter((x) => x.message.startsWith(`${id}:`));
        expect(by("nixl-prefill-decode").map((x) => x.message)).toEqual([
            expect.stringMatching(
                /nixl 1\.4\.0 in .*sglang-runtime:1\.5\.0 does not match nixl 1\.3\.2 in decode:2 .*same-release.*nixl_connector\.py\]$/,
            ),
        ]);
        expect(by("dynamo-router-workers").map((x) => x.object)).toEqual(["DynamoGraphDeployment/inference/llama-70b component decode"]);
        // The decode (v0.3.11.post1) differs from the pool (the runtime image, v0.3.12.post1) for master and store; the prefill runs the pool's image.
        expect(by("mooncake-master-client").map((x) => x.object)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component decode",
            "DynamoGraphDeployment/inference/llama-70b component decode",
        ]);
        expect(r.unproven).toEqual([]);
    });
});

describe("observability chain (upstream/check/observability.ts)", () => {
    const cfg = ObservabilityConfigSchema.parse({});
    const eps: ObservedEndpoint[] = [{ name: "llama-70b", model: "Qwen/Qwen3-32B", engine: "sglang", gpus: 4, disaggregated: true }];
    const labels = { release: "kube-prometheus-stack" };
    function rendered(): Obj[] {
        const objs = objects(endpoint({ engine: "sglang", model: "Qwen/Qwen3-32B" }));
        objs.push({
            apiVersion: "monitoring.coreos.com/v1",
            kind: "PrometheusRule",
            metadata: { name: "r", namespace: "monitoring", labels },
            spec: { groups: alertGroups("hn1", eps, cfg) },
        });
        for (const t of dynamoScrapeTargets(eps))
            objs.push({
                apiVersion: "monitoring.coreos.com/v1",
                kind: "PodMonitor",
                metadata: { name: t.name, namespace: "monitoring", labels },
                spec: podMonitorSpec(t),
            });
        for (const d of dashboards("hn1", eps))
            objs.push({
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name: d.uid, namespace: "monitoring" },
                data: { "d.json": JSON.stringify(grafanaDashboard(d)) },
            });
        // The auth service and metering as their components render them (ports `ops` / `http`), with the platform's PodMonitors.
        const workload = (kind: string, name: string, namespace: string, podLabels: Record<string, string>, ports: Obj[]) => ({
            apiVersion: "apps/v1",
            kind,
            metadata: { name, namespace },
            spec: { template: { metadata: { labels: podLabels }, spec: { containers: [{ name, image: `${name}:1`, ports }] } } },
        });
        objs.push(
            workload("Deployment", "auth", GATEWAY_NAMESPACE, AUTH_POD_LABELS, [
                { name: "http", containerPort: 8080 },
                { name: "ops", containerPort: 9090 },
            ]),
        );
        objs.push(workload("StatefulSet", "metering", PLATFORM_NAMESPACE, METERING_POD_LABELS, [{ name: "http", containerPort: 8080 }]));
        for (const t of scrapeTargets({
            authNamespace: GATEWAY_NAMESPACE,
            authLabels: AUTH_POD_LABELS,
            meteringNamespace: PLATFORM_NAMESPACE,
            meteringLabels: METERING_POD_LABELS,
            envoyNamespace: ENVOY_GATEWAY_NAMESPACE,
            envoyLabels: { ...ENVOY_PROXY_POD_LABELS },
        })) {
            objs.push({
                apiVersion: "monitoring.coreos.com/v1",
                kind: "PodMonitor",
                metadata: { name: t.name, namespace: "monitoring", labels },
                spec: podMonitorSpec(t),
            });
        }
        return objs;
    }
    it("the auth service without its ops port, metering without a PodMonitor: their alerts read nothing", () => {
        const objs = rendered();
        const auth = objs.find((o) => o.kind === "Deployment" && o.metadata.name === "auth")!;
        auth.spec.template.spec.containers[0].ports = [{ name: "http", containerPort: 8080 }];
        const noMetering = objs.filter((o) => !(o.kind === "PodMonitor" && o.metadata.name === "platform-metering"));
        const f = checkObservability(stackOf(noMetering)).map((x) => `${x.object} ${x.key}`);
        expect(f).toEqual(["Deployment/llm-gateway/auth ports.ops", "StatefulSet/platform-system/metering scrape.http"]);
    });
    it("what lib/ renders: every alert and panel reads an exported, enabled, scraped metric", () => {
        expect(checkObservability(stackOf(rendered()))).toEqual([]);
        const sig = scrapedSignals(stackOf(rendered())).get("llama-70b");
        expect(sig).toEqual(
            expect.arrayContaining([
                { exporter: "sglang", scraped: true, enabled: true },
                { exporter: "dynamo-worker", scraped: true, enabled: true },
                { exporter: "dynamo-frontend", scraped: true, enabled: true },
            ]),
        );
    });
    it("SGLang without --enable-metrics: the KV-transfer-slow alert can never fire", () => {
        const objs = rendered();
        for (const r of ["prefill", "decode"]) {
            const m = mainOf(dgdOf(objs), r);
            m.args = m.args.filter((a: string) => a !== "--enable-metrics");
        }
        const f = checkObservability(stackOf(objs));
        expect(f.map((x) => `${x.object} ${x.key}`)).toEqual([
            "DynamoGraphDeployment/inference/llama-70b component prefill --enable-metrics",
            "DynamoGraphDeployment/inference/llama-70b component decode --enable-metrics",
        ]);
        expect(f[0].message).toMatch(
            /^sglang exports nothing without --enable-metrics, yet PrometheusRule\/monitoring\/r alert\.\w+ reads sglang:.*publisher\.py\]$/,
        );
    });
    it("a worker PodMonitor that misses prefill (as the chart's did), one without the release label, none at all", () => {
        const miss = rendered();
        const w = miss.find((o) => o.kind === "PodMonitor" && o.metadata.name === "dynamo-workers")!;
        w.spec.selector.matchExpressions[1].values = ["decode", "worker"];
        expect(checkObservability(stackOf(miss)).map((x) => `${x.object} ${x.key}`)).toEqual(
            expect.arrayContaining(["DynamoGraphDeployment/inference/llama-70b component prefill scrape.system"]),
        );
        expect(checkObservability(stackOf(miss)).some((x) => x.object.endsWith("component decode"))).toBe(false);
        const unlabelled = rendered();
        for (const o of unlabelled) if (o.kind === "PodMonitor") o.metadata.labels = {};
        const f = checkObservability(stackOf(unlabelled));
        expect(new Set(f.map((x) => x.key))).toEqual(new Set(["scrape.system", "scrape.http", "scrape.ops"]));
        expect(f[0].message).toMatch(
            /no PodMonitor selected by the configured Prometheus \(release=kube-prometheus-stack.*kube-prometheus-stack\/templates\/prometheus\/prometheus\.yaml\]$/,
        );
    });
    it("a removed metric name (dynamo_component_kvstats_*, gone since Dynamo 1.0) and a label its exporter never sets", () => {
        const objs = rendered();
        const rule = objs.find((o) => o.kind === "PrometheusRule")!;
        const kv = rule.spec.groups[0].rules.find((r: Obj) => r.alert === "PlatformKVCacheFull");
        kv.expr = kv.expr.replace("dynamo_component_gpu_cache_usage_percent", "dynamo_component_kvstats_gpu_cache_usage_percent");
        const ttft = rule.spec.groups[0].rules.find((r: Obj) => r.alert === "PlatformTTFTHigh");
        ttft.expr = ttft.expr.replace("{model=~", '{worker_id="0",model=~');
        const f = checkObservability(stackOf(objs)).map((x) => `${x.key}: ${x.message}`);
        expect(f).toEqual([
            expect.stringMatching(
                /^alert\.PlatformTTFTHigh: matches label worker_id on dynamo_frontend_time_to_first_token_seconds_bucket, which its exporter does not set/,
            ),
            expect.stringMatching(
                /^alert\.PlatformKVCacheFull: reads dynamo_component_kvstats_gpu_cache_usage_percent, which no pinned exporter exports/,
            ),
        ]);
    });
});
