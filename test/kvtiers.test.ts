/**
 * KV tiers (Dynamo KVBM in host memory and on local NVMe) and fast start (per-node model cache, image pre-pull, planner
 * reserve, checkpoint/restore refused): the stack-file schema and hub refusals (config/endpoint.ts), node budgets
 * against the node profile (lib/serving.ts), the rendered DGD and pre-stage DaemonSet (lib/dgd.ts, lib/faststart.ts),
 * and `npm run upstream-check` on them (closed world, refused combinations, activation rules), each fault planted once.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { EndpointSchema, endpointUpstreamIssues } from "../config/endpoint";
import { NodeProfileSchema, presetProfiles } from "../config/nodeProfile";
import { ServingConfigSchema } from "../config/serving";
import { versions } from "../config/versions";
import { buildDgd, plannerConfig } from "../lib/dgd";
import {
    expectedStartPath,
    KVBM_LEAK_MINUTES,
    kvbmDiskCleanupPrelude,
    kvbmGb,
    kvTiersText,
    NODE_HOST_RESERVE_GIB,
    prestageDaemonSet,
} from "../lib/faststart";
import { placeEndpoints } from "../lib/serving";
import { DYNAMO_IMAGE_USER, HOSTPATH_MAKEDIR, HOSTPATH_OWNER, hostPathOwnerArgv, OWNED_HOSTPATH_MOUNTS } from "../upstream/kvbm";
import { checkStack, defaultFacts } from "../tools/upstream-check";
import { endpoint, mainOf, placement, setEnv } from "./policies/rdma-fixtures";

const P5EN = NodeProfileSchema.parse(presetProfiles().get("p5en-48xlarge"));
const DGX = NodeProfileSchema.parse(presetProfiles().get("dgx-h200"));
const CISCO = NodeProfileSchema.parse(presetProfiles().get("cisco-ucsc-885a-m8-h22"));
const AGG = { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 4 } };
const kvbmEndpoint = (e: Record<string, unknown> = {}) =>
    endpoint({
        spoke: "sg1",
        topology: AGG,
        kvPool: { kind: "none" },
        kvTiers: { hostGiB: 512, nvmeGiB: 4096 },
        fastStart: { modelCache: true },
        // One worker and room for a second (upstream/activation.ts `planner-scale-up-headroom`).
        planner: { optimizationTarget: "load", maxGpuBudget: 8 },
        ...e,
    });
const pool = (profile = P5EN) => ({ ...placement({ profile }), ...(profile.localNvme ? { localNvme: profile.localNvme } : {}) });
const rt = versions.dynamoRuntime.vllm;
const dgdOf = (e = kvbmEndpoint(), profile = P5EN) =>
    buildDgd({
        endpoint: e,
        namespace: "inference",
        pool: pool(profile),
        runtimeImage: `${rt.image}:${rt.version}`,
        plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
        prometheusEndpoint: "http://prometheus:9090",
        minLinkRateGbps: 400,
    }) as unknown as Record<string, any>;
const envMap = (c: Record<string, any>) => Object.fromEntries((c.env ?? []).map((x: any) => [x.name, x.value]));
const place = (endpoints: ReturnType<typeof endpoint>[], profile = P5EN, nodeCount = 2) =>
    placeEndpoints(endpoints, [{ name: "h200", profile, nodeCount }], ServingConfigSchema.parse({}), "hub output spokeContracts.sg1");
const findings = (objs: Array<Record<string, any>>) => checkStack("spoke-test", objs, [], defaultFacts).findings;

describe("config/endpoint.ts: kvTiers and fastStart in the stack file", () => {
    it("tier order: the NVMe tier is at least the host tier; a disk-only tier cannot be written", () => {
        const bad = EndpointSchema.safeParse({ ...kvbmEndpoint(), kvTiers: { hostGiB: 512, nvmeGiB: 256 } });
        expect(bad.success).toBe(false);
        expect(bad.error?.issues[0].path).toEqual(["kvTiers", "nvmeGiB"]);
        expect(EndpointSchema.safeParse({ ...kvbmEndpoint(), kvTiers: { nvmeGiB: 4096 } }).success).toBe(false);
    });
    it("refuses KVBM on SGLang, beside a Mooncake store pool and on P/D, naming the key", () => {
        const key = "platform:endpoints[3]";
        const of = (e: ReturnType<typeof endpoint>) => endpointUpstreamIssues(e, key).map((i) => i.key);
        expect(of(kvbmEndpoint())).toEqual([]);
        expect(of(kvbmEndpoint({ engine: "sglang" }))).toEqual([`${key}.kvTiers`]);
        expect(endpointUpstreamIssues(kvbmEndpoint({ engine: "sglang" }), key)[0].message).toMatch(/HiCache/);
        expect(of(kvbmEndpoint({ kvPool: { kind: "mooncake", segmentSizeGiB: 256, storeReplicas: 1 } }))).toEqual([`${key}.kvTiers`]);
        const pd = kvbmEndpoint({
            topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } },
        });
        expect(endpointUpstreamIssues(pd, key).map((i) => i.message)).toEqual([expect.stringMatching(/PdConnector/)]);
    });
    it("refuses checkpoint/restore on a multi-GPU worker, and on a single-GPU one because 1.5.0 ships no snapshot", () => {
        const key = "platform:endpoints[0]";
        const multi = endpointUpstreamIssues(kvbmEndpoint({ fastStart: { checkpointRestore: true } }), key);
        expect(multi).toEqual([
            { key: `${key}.fastStart.checkpointRestore`, message: expect.stringMatching(/workers have 4 GPUs.*single-GPU/) },
        ]);
        const single = endpointUpstreamIssues(
            kvbmEndpoint({
                topology: { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 1 } },
                fastStart: { checkpointRestore: true },
            }),
            key,
        );
        expect(single).toEqual([
            { key: `${key}.fastStart.checkpointRestore`, message: expect.stringMatching(/Dynamo 1\.5\.0.*DynamoCheckpoint/) },
        ]);
    });
});

describe("lib/serving.ts: tiers against the node profile", () => {
    it("the shipped sg1 endpoint fits a p5en node (2048 GiB DRAM, instance-store RAID0)", () => {
        expect(place([kvbmEndpoint()]).issues).toEqual([]);
    });
    it("a host tier larger than the node has is refused, naming the key, the profile and the figures", () => {
        // One fixed worker (no planner): one worker's tiers per node.
        const { issues } = place([kvbmEndpoint({ kvTiers: { hostGiB: 1900, nvmeGiB: 4096 }, planner: { enabled: false } })]);
        expect(issues).toEqual([
            {
                key: "hub output spokeContracts.sg1.endpoints[0].kvTiers.hostGiB",
                message: expect.stringMatching(new RegExp(`p5en-48xlarge, 2048 GiB host memory.*${1900 + NODE_HOST_RESERVE_GIB} GiB`)),
            },
        ]);
    });
    it("the planner's budget counts: two TP4 workers may land on one node", () => {
        const e = kvbmEndpoint({ kvTiers: { hostGiB: 1000 }, planner: { optimizationTarget: "load", maxGpuBudget: 8 } });
        expect(place([e]).issues.map((i) => i.key)).toEqual(["hub output spokeContracts.sg1.endpoints[0].kvTiers.hostGiB"]);
        expect(place([{ ...e, planner: { ...e.planner, maxGpuBudget: 4 } }]).issues).toEqual([]);
    });
    it("leaves room for a Mooncake store segment of another endpoint on the same pool", () => {
        const kvbm = kvbmEndpoint({ kvTiers: { hostGiB: 1400 }, planner: { enabled: false } });
        const pooled = endpoint({
            name: "qwen",
            engine: "sglang",
            topology: AGG,
            planner: { optimizationTarget: "load", maxGpuBudget: 4 },
        });
        expect(place([kvbm], DGX).issues).toEqual([]);
        const { issues } = place([pooled, kvbm], DGX);
        expect(issues).toEqual([
            {
                key: "hub output spokeContracts.sg1.endpoints[1].kvTiers.hostGiB",
                message: expect.stringMatching(/Mooncake segment 512 GiB/),
            },
        ]);
    });
    it("an NVMe tier beyond the local disks, and a profile without host memory or NVMe, are refused", () => {
        expect(place([kvbmEndpoint({ kvTiers: { hostGiB: 512, nvmeGiB: 30000 } })]).issues.map((i) => i.key)).toEqual([
            "hub output spokeContracts.sg1.endpoints[0].kvTiers.nvmeGiB",
        ]);
        expect(place([kvbmEndpoint()], CISCO).issues.map((i) => i.key)).toEqual([
            "hub output spokeContracts.sg1.endpoints[0].kvTiers.hostGiB",
            "hub output spokeContracts.sg1.endpoints[0].kvTiers.nvmeGiB",
            "hub output spokeContracts.sg1.endpoints[0].fastStart.modelCache",
        ]);
    });
});

describe("lib/dgd.ts + lib/faststart.ts: what is rendered", () => {
    it("an aggregated vLLM worker loads KVBM with both tiers on the node's NVMe and requests the pinned memory", () => {
        const main = mainOf(dgdOf(), "worker");
        expect(JSON.parse(main.args[main.args.indexOf("--kv-transfer-config") + 1])).toEqual({
            kv_connector: "DynamoConnector",
            kv_connector_module_path: "kvbm.vllm_integration.connector",
            kv_role: "kv_both",
        });
        expect(envMap(main)).toMatchObject({
            DYN_KVBM_CPU_CACHE_GB: String(kvbmGb(512)),
            DYN_KVBM_DISK_CACHE_GB: String(kvbmGb(4096)),
            DYN_KVBM_DISK_CACHE_DIR: "/kvbm",
            // Every evicted block goes to NVMe, not only those reused twice (upstream/kvbm.ts).
            DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER: "true",
            HF_HOME: "/models",
        });
        // Without the NVMe tier there is no filter to turn off.
        expect(envMap(mainOf(dgdOf(kvbmEndpoint({ kvTiers: { hostGiB: 512 } })), "worker"))).not.toHaveProperty(
            "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER",
        );
        expect(kvbmGb(512)).toBe(549); // 512 GiB = 549.7 GB, rounded down: never more than was checked
        expect(main.resources.requests.memory).toBe("612Gi");
        const vols = dgdOf().spec.components.find((c: any) => c.type === "worker").podTemplate.spec.volumes;
        expect(vols.map((v: any) => v.hostPath.path)).toEqual(["/mnt/k8s-disks/0/kvbm", "/mnt/k8s-disks/0/model-cache"]);
    });
    it("each worker's disk tier is its own per-pod directory, swept at every container start before the engine", () => {
        // Before: every worker of the node shared <nvme>/kvbm, and a file a crashed worker left stayed there for good.
        const main = mainOf(dgdOf(), "worker");
        expect(main.env).toEqual(expect.arrayContaining([{ name: "POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } }]));
        expect(main.volumeMounts).toEqual(
            expect.arrayContaining([
                { name: "kvbm-disk", mountPath: "/kvbm", subPathExpr: "$(POD_UID)" },
                { name: "kvbm-disk", mountPath: "/kvbm-node" },
            ]),
        );
        // The env var the subPathExpr names comes before the mount is expanded (any order in env works for the kubelet).
        expect(main.command.slice(0, 2)).toEqual(["sh", "-c"]);
        expect(main.command[2]).toContain(kvbmDiskCleanupPrelude());
        expect(main.command[2]).toMatch(/(^|&& )rm -f \/kvbm\/dynamo-kvbm-disk-cache-\* && .* && exec "\$@"$/);
        expect(main.command.slice(4)).toEqual(["python3", "-m", "dynamo.vllm"]);
        // Without a disk tier there is nothing to sweep.
        const hostOnly = mainOf(dgdOf(kvbmEndpoint({ kvTiers: { hostGiB: 512 } })), "worker");
        expect(JSON.stringify(hostOnly)).not.toMatch(/POD_UID|kvbm-node|dynamo-kvbm-disk-cache/);
    });
    it("the sweep, run by sh on a node directory: the pod's own leftovers and peers' stale files go, a live peer's file stays", () => {
        const root = fs.mkdtempSync(path.join(os.tmpdir(), "kvbm-"));
        const node = path.join(root, "node");
        const own = path.join(node, "uid-own");
        const peer = path.join(node, "uid-peer");
        const dead = path.join(node, "uid-dead");
        for (const d of [own, peer, dead]) fs.mkdirSync(d, { recursive: true });
        const file = (p: string, ageMinutes: number) => {
            fs.writeFileSync(p, "x");
            const t = new Date(Date.now() - ageMinutes * 60_000);
            fs.utimesSync(p, t, t);
        };
        file(path.join(own, "dynamo-kvbm-disk-cache-aaaaaa"), 1); // this pod's previous container, killed at start
        file(path.join(peer, "dynamo-kvbm-disk-cache-bbbbbb"), 1); // a live peer between mkostemp and NIXL registration
        file(path.join(dead, "dynamo-kvbm-disk-cache-cccccc"), KVBM_LEAK_MINUTES + 5); // a pod deleted in that window
        file(path.join(node, "dynamo-kvbm-disk-cache-dddddd"), KVBM_LEAK_MINUTES + 5); // the flat layout of earlier renders
        file(path.join(dead, "notes.txt"), 60 * 24); // not KVBM's
        const prelude = kvbmDiskCleanupPrelude().replaceAll("/kvbm-node", node).replaceAll("/kvbm/", `${own}/`);
        const out = execFileSync("sh", ["-c", `${prelude} && exec "$@"`, "--", "echo", "engine started"], { encoding: "utf8" });
        expect(out.trim()).toBe("engine started");
        const left = (d: string) => fs.readdirSync(d).sort();
        expect(left(own)).toEqual([]);
        expect(left(peer)).toEqual(["dynamo-kvbm-disk-cache-bbbbbb"]);
        expect(left(dead)).toEqual(["notes.txt"]);
        expect(left(node)).toEqual(["uid-dead", "uid-own", "uid-peer"]);
        fs.rmSync(root, { recursive: true, force: true });
    });
    it("the planner keeps minReplicas warm", () => {
        expect(plannerConfig(kvbmEndpoint({ planner: { optimizationTarget: "load", maxGpuBudget: 8, minReplicas: 2 } })).min_endpoint).toBe(
            2,
        );
        expect(plannerConfig(kvbmEndpoint()).min_endpoint).toBe(1);
    });
    it("the pre-stage DaemonSet pulls the worker image on the pool and fills the same cache path", () => {
        const e = kvbmEndpoint();
        const ds = prestageDaemonSet({
            endpoint: e,
            namespace: "inference",
            image: mainOf(dgdOf(e), "worker").image,
            nodeSelector: placement().nodeSelector,
            tolerations: placement().tolerations,
            nvme: P5EN.localNvme!,
            labels: {},
        }) as Record<string, any>;
        const spec = ds.spec.template.spec;
        expect(spec.initContainers.find((c: any) => c.name === "model-cache").args).toEqual(["--model", e.model]);
        expect(spec.containers[0].image).toBe(`${rt.image}:${rt.efaVersion}`);
        expect(spec.volumes[0].hostPath.path).toBe("/mnt/k8s-disks/0/model-cache");
        expect(kvTiersText(e)).toBe("HBM -> host 512 GiB -> NVMe 4096 GiB (KVBM)");
        expect(expectedStartPath(e)).toMatch(/pre-pulled.*NVMe model cache.*1 warm worker/);
    });
});

describe("the pre-stage of a gated model (HF token)", () => {
    const ds = (e: ReturnType<typeof endpoint>, hfTokenSecret?: string) =>
        prestageDaemonSet({
            endpoint: e,
            namespace: "inference",
            image: "img",
            nodeSelector: {},
            tolerations: [],
            nvme: P5EN.localNvme!,
            hfTokenSecret,
            labels: {},
        }) as Record<string, any>;
    const init = (d: Record<string, any>) => d.spec.template.spec.initContainers.find((c: any) => c.name === "model-cache");
    it("a gated model's pre-stage reads HF_TOKEN from the spoke's token Secret, the one the workers take (never a value)", () => {
        // Before: the pre-stage downloaded a gated model without the token (401) unless the whole Secret happened to be set.
        const e = kvbmEndpoint({ model: "meta-llama/Llama-3.3-70B-Instruct", gatedModel: true });
        const c = init(ds(e, "hf-token"));
        expect(c.env).toEqual([
            { name: "HF_HOME", value: "/models" },
            { name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf-token", key: "HF_TOKEN" } } },
        ]);
        expect(c.envFrom).toBeUndefined();
        expect(JSON.stringify(ds(e, "hf-token"))).not.toMatch(/hf_[A-Za-z0-9]{20,}/);
        // The workers reference the same Secret.
        const worker = mainOf(
            buildDgd({
                endpoint: e,
                namespace: "inference",
                pool: pool(),
                runtimeImage: `${rt.image}:${rt.version}`,
                plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
                prometheusEndpoint: "http://prometheus:9090",
                minLinkRateGbps: 400,
                hfTokenSecret: "hf-token",
            }) as unknown as Record<string, any>,
            "worker",
        );
        expect(worker.envFrom).toBeUndefined();
        expect(worker.env).toEqual(
            expect.arrayContaining([{ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf-token", key: "HF_TOKEN" } } }]),
        );
    });
    it("a public model's pre-stage and graph reference no Secret, even where the spoke has one", () => {
        const c = init(ds(kvbmEndpoint(), "hf-token"));
        expect(c.env).toEqual([{ name: "HF_HOME", value: "/models" }]);
        expect(JSON.stringify(c)).not.toContain("hf-token");
        const g = buildDgd({
            endpoint: kvbmEndpoint(),
            namespace: "inference",
            pool: pool(),
            runtimeImage: `${rt.image}:${rt.version}`,
            plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
            prometheusEndpoint: "http://prometheus:9090",
            minLinkRateGbps: 400,
            hfTokenSecret: "hf-token",
        });
        expect(JSON.stringify(g)).not.toContain("hf-token");
    });
    it("a gated model on a spoke without a token Secret is refused at placement, naming the key; the builder throws", () => {
        const e = kvbmEndpoint({ model: "meta-llama/Llama-3.3-70B-Instruct", gatedModel: true });
        expect(place([e]).issues).toEqual([
            expect.objectContaining({
                key: "platform:serving.hfTokenSecret",
                message: expect.stringMatching(/serves meta-llama\/Llama-3.3-70B-Instruct, a gated Hugging Face model .*key HF_TOKEN/),
            }),
        ]);
        expect(
            placeEndpoints(
                [e],
                [{ name: "h200", profile: P5EN, nodeCount: 2 }],
                ServingConfigSchema.parse({ hfTokenSecret: "hf-token" }),
                "x",
            ).issues,
        ).toEqual([]);
        expect(() => ds(e)).toThrow(/gated \(gatedModel\) but the spoke names no platform:serving.hfTokenSecret/);
    });
    it("upstream-check accepts the token reference on the pre-stage (HF_TOKEN is read by huggingface_hub)", () => {
        const e = kvbmEndpoint({ model: "meta-llama/Llama-3.3-70B-Instruct", gatedModel: true });
        expect(findings([ds(e, "hf-token")]).map((f) => f.message)).toEqual([]);
    });
});

describe("upstream-check on KVBM and the model cache", () => {
    const objects = (e = kvbmEndpoint()) => {
        const dgd = dgdOf(e);
        const ds = prestageDaemonSet({
            endpoint: e,
            namespace: "inference",
            image: mainOf(dgd, "worker").image,
            nodeSelector: placement().nodeSelector,
            tolerations: placement().tolerations,
            nvme: P5EN.localNvme!,
            labels: {},
        });
        return [dgd, ds] as Array<Record<string, any>>;
    };
    it("passes on what lib/ renders: KVBM's settings are inside the KV closed world, the cache is filled", () => {
        expect(findings(objects())).toEqual([]);
    });
    it("refuses a KVBM setting the pack has not read, and a connector module it has not read", () => {
        const objs = objects();
        const main = mainOf(objs[0], "worker");
        setEnv(main, "DYN_KVBM_NIXL_BACKEND_UCX", "true");
        const i = main.args.indexOf("--kv-transfer-config") + 1;
        main.args[i] = JSON.stringify({ ...JSON.parse(main.args[i]), kv_connector_module_path: "evil.connector" });
        const msgs = findings(objs).map((f) => f.message);
        expect(msgs).toEqual(
            expect.arrayContaining([
                expect.stringContaining("the pack cannot prove `DYN_KVBM_NIXL_BACKEND_UCX=true`"),
                expect.stringContaining("kv_connector_module_path=evil.connector"),
            ]),
        );
    });
    it("tier order, a missing tier, an unmounted disk dir and a short memory request are each found", () => {
        const cases: Array<[(m: Record<string, any>) => void, RegExp]> = [
            [(m) => setEnv(m, "DYN_KVBM_CPU_CACHE_GB", undefined), /kvbm-tier-order.*without a host tier/],
            [(m) => setEnv(m, "DYN_KVBM_DISK_CACHE_GB", "100"), /kvbm-tier-order.*smaller than the host tier/],
            [
                (m) => {
                    setEnv(m, "DYN_KVBM_CPU_CACHE_GB", undefined);
                    setEnv(m, "DYN_KVBM_DISK_CACHE_GB", undefined);
                },
                /kvbm-needs-tier/,
            ],
            [(m) => setEnv(m, "DYN_KVBM_DISK_CACHE_DIR", "/scratch"), /kvbm-tiers.*\/scratch is on no hostPath/],
            [(m) => setEnv(m, "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER", undefined), /kvbm-tiers.*only blocks reused twice/],
            [(m) => setEnv(m, "DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER", "false"), /kvbm-tiers.*only blocks reused twice/],
            [(m) => delete m.resources.requests.memory, /kvbm-tiers.*no memory for a 549 GB pinned host tier/],
        ];
        for (const [plant, re] of cases) {
            const objs = objects();
            plant(mainOf(objs[0], "worker"));
            expect(findings(objs).map((f) => f.message)).toEqual(expect.arrayContaining([expect.stringMatching(re)]));
        }
    });
    it("a worker whose model cache no DaemonSet fills is found", () => {
        const objs = objects().slice(0, 1);
        expect(findings(objs).map((f) => f.message)).toEqual([expect.stringMatching(/model-cache.*filled by no DaemonSet/)]);
    });
});

/**
 * The owner and mode a hostPath folder has when each container of a pod starts, and whether that container's effective
 * user can write it, by the POSIX rules: kubelet makes a DirectoryOrCreate folder root:root 0755 (upstream/kvbm.ts
 * HOSTPATH_MAKEDIR); an init container running exactly `hostPathOwnerArgv` as root with CAP_CHOWN and CAP_FOWNER then sets
 * owner, group and mode. A container's user is its securityContext's, else the pod's, else the image's (`USER dynamo`,
 * uid 1000 gid 0); the Dynamo operator adds fsGroup 1000 to DGD pods only, and fsGroup does not change a hostPath.
 */
type Folder = { uid: number; gid: number; mode: number };
function hostPathWriters(
    spec: Record<string, any>,
    operatorFsGroup: boolean,
): Array<{ container: string; mount: string; ok: boolean; why: string }> {
    const out: Array<{ container: string; mount: string; ok: boolean; why: string }> = [];
    const folders = new Map<string, Folder>();
    for (const v of spec.volumes ?? []) if (v.hostPath?.type === "DirectoryOrCreate") folders.set(v.name, { ...HOSTPATH_MAKEDIR });
    const fsGroup = spec.securityContext?.fsGroup ?? (operatorFsGroup ? DYNAMO_IMAGE_USER.fsGroup : undefined);
    for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
        const sc = c.securityContext ?? {};
        const uid: number = sc.runAsUser ?? spec.securityContext?.runAsUser ?? DYNAMO_IMAGE_USER.uid;
        const gid: number = sc.runAsGroup ?? spec.securityContext?.runAsGroup ?? DYNAMO_IMAGE_USER.gid;
        const groups = [gid, ...(fsGroup !== undefined ? [fsGroup] : [])];
        const dropsAll = (sc.capabilities?.drop ?? []).includes("ALL");
        const caps = new Set<string>(dropsAll ? [] : ["CHOWN", "DAC_OVERRIDE", "FOWNER"]);
        for (const x of sc.capabilities?.add ?? []) caps.add(x);
        if (sc.privileged) for (const x of ["CHOWN", "DAC_OVERRIDE", "FOWNER"]) caps.add(x);
        const root = uid === 0;
        for (const m of c.volumeMounts ?? []) {
            const f = folders.get(m.name);
            if (!f || m.readOnly) continue;
            const argv = [...(c.command ?? []), ...(c.args ?? [])];
            if (
                OWNED_HOSTPATH_MOUNTS.some((p) => p === m.mountPath) &&
                JSON.stringify(argv) === JSON.stringify(hostPathOwnerArgv(m.mountPath))
            ) {
                // install -d: chown (CAP_CHOWN), then chmod as a non-owner (CAP_FOWNER).
                const ok = root && caps.has("CHOWN") && caps.has("FOWNER");
                if (ok) Object.assign(f, { uid: HOSTPATH_OWNER.uid, gid: HOSTPATH_OWNER.gid, mode: HOSTPATH_OWNER.mode });
                out.push({ container: c.name, mount: m.mountPath, ok, why: "owner" });
                continue;
            }
            // A subPath(Expr) mount is a directory kubelet creates in the folder when the container starts: as root,
            // with the folder's mode, group by setgid inheritance (upstream/kvbm.ts SUBPATH_MAKEDIR).
            const d = m.subPath || m.subPathExpr ? { uid: 0, gid: f.mode & 0o2000 ? f.gid : 0, mode: f.mode } : f;
            const bits = uid === d.uid ? (d.mode >> 6) & 7 : groups.includes(d.gid) ? (d.mode >> 3) & 7 : d.mode & 7;
            const ok = (root && caps.has("DAC_OVERRIDE")) || (bits & 3) === 3;
            out.push({
                container: c.name,
                mount: m.mountPath,
                ok,
                why: `uid ${uid} groups ${groups.join(",")} on ${d.uid}:${d.gid} ${d.mode.toString(8)}`,
            });
        }
    }
    return out;
}
const prestageSpec = (e = kvbmEndpoint(), image = `${rt.image}:${rt.version}`) =>
    (
        prestageDaemonSet({
            endpoint: e,
            namespace: "inference",
            image,
            nodeSelector: placement().nodeSelector,
            tolerations: placement().tolerations,
            nvme: P5EN.localNvme!,
            labels: {},
        }) as Record<string, any>
    ).spec.template.spec;
const workerSpec = (dgd: Record<string, any>, type: string) => dgd.spec.components.find((c: any) => c.type === type).podTemplate.spec;

describe("lib/faststart.ts: the model-cache and KVBM-disk hostPath folders are writable by who writes them", () => {
    it("the pre-stage (image user 1000:0, no fsGroup) writes /models after its folder is handed over", () => {
        const w = hostPathWriters(prestageSpec(), false);
        expect(w.map((x) => [x.container, x.mount])).toEqual([
            ["own-models", "/models"],
            ["model-cache", "/models"],
        ]);
        expect(w.filter((x) => !x.ok)).toEqual([]);
    });
    it("a non-root KVBM worker writes /kvbm and /models; an RDMA (root) worker's pod hands them over before the preflight", () => {
        const agg = workerSpec(dgdOf(), "worker");
        expect(agg.containers[0].securityContext).toBeUndefined(); // the image user, uid 1000
        expect(agg.initContainers.map((c: any) => c.name)).toEqual(["own-models", "own-kvbm"]);
        expect(hostPathWriters(agg, true).filter((x) => !x.ok)).toEqual([]);
        expect(
            hostPathWriters(agg, true)
                .filter((x) => x.container === "main")
                .map((x) => x.mount),
        ).toEqual(["/kvbm", "/kvbm-node", "/models"]); // its own directory, the node's (the start-up sweep), the cache
        const pd = kvbmEndpoint({
            topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } },
            kvTiers: undefined,
        });
        const decode = workerSpec(dgdOf(pd), "decode");
        expect(decode.initContainers.map((c: any) => c.name)).toEqual(["own-models", "rdma-preflight"]);
        expect(hostPathWriters(decode, true).filter((x) => !x.ok)).toEqual([]);
    });
    it("fails without the hand-over, or with it after the writer: root 0755 is not writable by uid 1000 gid 0", () => {
        const spec = prestageSpec();
        const without = { ...spec, initContainers: spec.initContainers.slice(1) };
        expect(hostPathWriters(without, false)).toEqual([
            { container: "model-cache", mount: "/models", ok: false, why: "uid 1000 groups 0 on 0:0 755" },
        ]);
        const late = { ...spec, initContainers: [...spec.initContainers].reverse() };
        expect(hostPathWriters(late, false).find((x) => x.container === "model-cache")?.ok).toBe(false);
        // fsGroup (the operator's 1000) does not help: the folder is not handed to group 1000.
        const agg = workerSpec(dgdOf(), "worker");
        expect(hostPathWriters({ ...agg, initContainers: [] }, true).every((x) => !x.ok)).toBe(true);
        // The hand-over itself needs CAP_FOWNER after the chown: without it the mode is never set.
        const weak = structuredClone(spec);
        weak.initContainers[0].securityContext.capabilities.add = ["CHOWN"];
        expect(hostPathWriters(weak, false).map((x) => x.ok)).toEqual([false, false]);
    });
    it("the hand-over runs as root with only CHOWN and FOWNER, and nothing else", () => {
        const own = prestageSpec().initContainers[0];
        expect(own.securityContext).toEqual({
            runAsUser: 0,
            runAsGroup: 0,
            runAsNonRoot: false,
            allowPrivilegeEscalation: false,
            privileged: false,
            capabilities: { drop: ["ALL"], add: ["CHOWN", "FOWNER"] },
        });
        expect(own.command).toEqual(["install", "-d", "-o", "1000", "-g", "0", "-m", "2775", "/models"]);
        expect(own.env).toBeUndefined();
        expect(own.volumeMounts).toEqual([{ name: "model-cache", mountPath: "/models" }]);
    });
    it("GNU install -d sets the mode of a folder that already exists (the real tool, on a 0755 folder)", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hostpath-owner-"));
        try {
            const target = path.join(dir, "models");
            fs.mkdirSync(target, { mode: 0o755 });
            fs.chmodSync(target, 0o755);
            // The product's argv with this test's own uid/gid (chown to oneself needs no privilege) and the temp folder.
            const [cmd, ...args] = hostPathOwnerArgv("/models");
            const argv = args.map((a, i) =>
                args[i - 1] === "-o"
                    ? String(os.userInfo().uid)
                    : args[i - 1] === "-g"
                      ? String(os.userInfo().gid)
                      : a === "/models"
                        ? target
                        : a,
            );
            execFileSync(cmd, argv);
            expect(fs.statSync(target).mode & 0o7777).toBe(HOSTPATH_OWNER.mode);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
    it("upstream-check knows the hand-over's argv for exactly the two folders, and nothing near it", () => {
        const objs = [
            dgdOf(),
            {
                apiVersion: "apps/v1",
                kind: "DaemonSet",
                metadata: { name: "x", namespace: "inference" },
                spec: { template: { spec: prestageSpec(kvbmEndpoint(), mainOf(dgdOf(), "worker").image) } },
            },
        ];
        expect(findings(objs as Array<Record<string, any>>)).toEqual([]);
        (objs[1] as any).spec.template.spec.initContainers[0].command = ["install", "-d", "-o", "1000", "-g", "0", "-m", "2775", "/etc"];
        expect(
            findings(objs as Array<Record<string, any>>)
                .map((f) => f.message)
                .join("\n"),
        ).toMatch(/unexpected positional argument "\/etc"|not known/);
    });
});
