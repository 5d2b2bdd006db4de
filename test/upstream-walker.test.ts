/**
 * One pod-spec walker (upstream/check/walk.ts) for `npm run upstream-check` and the policy pack: a planted unknown flag
 * and env vars in a decode container are found in every workload shape either reads (Deployment, LeaderWorkerSet leader
 * and worker, DynamoGraphDeployment v1beta1 and v1alpha1), with the same findings from the CLI (tools/upstream-check.ts
 * over a rendered out/ folder) and from the pack (policies/upstream.ts `upstream-rules`); an object carrying a pod
 * template the walker cannot read is a finding in both, never skipped. A v1alpha1 service's own fields (resources,
 * envs, envFromSecret, probes, volumeMounts) reach the main container the rules judge exactly as the operator's
 * conversion webhook merges them, on a fixture valid against the upstream DGD CRD (test/fixtures/dynamo/).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import YAML from "yaml";
import { afterAll, describe, expect, it } from "vitest";
import { pdSettingsMatch } from "../policies/pd-compat";
import { upstreamRulesPolicy } from "../policies/upstream";
import { stackView } from "../policies/lib/workloads";
import { checkOutDir } from "../tools/upstream-check";
import { defaultFacts, formatFinding, pairRule, podTemplatesOf, unreadPodTemplates } from "../upstream/check";
import { endpoint, endpointObjects, k8s, mainOf, violations } from "./policies/rdma-fixtures";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "walker-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

type Obj = Record<string, any>;

/** A generated decode main container with an unknown flag, an env var nothing reads and a TCP UCX transport. */
function plantedDecode(): Obj {
    const { dgd } = endpointObjects(endpoint());
    const c = structuredClone(mainOf(dgd, "decode"));
    c.args.push("--bogus-flag-xyz");
    c.env.push({ name: "NIXL_BOGUS", value: "1" }, { name: "UCX_TLS", value: "tcp" });
    return c;
}
const PLANTED = ["--bogus-flag-xyz", "env.NIXL_BOGUS", "env.UCX_TLS"];

const ns = "inference";
const shapes: Record<string, () => Obj> = {
    Deployment: () => ({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "w", namespace: ns },
        spec: { replicas: 1, template: { spec: { containers: [plantedDecode()] } } },
    }),
    LeaderWorkerSet: () => ({
        apiVersion: "leaderworkerset.x-k8s.io/v1",
        kind: "LeaderWorkerSet",
        metadata: { name: "w", namespace: ns },
        spec: {
            replicas: 1,
            leaderWorkerTemplate: {
                size: 2,
                leaderTemplate: { spec: { containers: [plantedDecode()] } },
                workerTemplate: { spec: { containers: [plantedDecode()] } },
            },
        },
    }),
    "DynamoGraphDeployment v1beta1": () => {
        const { dgd } = endpointObjects(endpoint());
        const d = structuredClone(dgd) as Obj;
        d.metadata.name = "w";
        d.spec.components = d.spec.components.filter((c: Obj) => c.name === "decode");
        d.spec.components[0].podTemplate.spec.containers = [plantedDecode()];
        return d;
    },
    "DynamoGraphDeployment v1alpha1": () => {
        const { name: _n, resources, ...main } = plantedDecode();
        return {
            apiVersion: "nvidia.com/v1alpha1",
            kind: "DynamoGraphDeployment",
            metadata: { name: "w", namespace: ns },
            spec: {
                services: {
                    decode: {
                        componentType: "worker",
                        subComponentType: "decode",
                        replicas: 1,
                        resources: { limits: { gpu: String(resources?.limits?.["nvidia.com/gpu"] ?? "4") } },
                        extraPodSpec: { mainContainer: main },
                    },
                },
            },
        };
    },
};

/**
 * The planted env vars moved to the graph-level env of a DGD (v1beta1 `spec.env`, v1alpha1 `spec.envs`); the
 * container's own entries of those names go, since a component's entry wins over the graph's.
 */
function graphEnv(o: Obj): Obj {
    const planted = [
        { name: "NIXL_BOGUS", value: "1" },
        { name: "UCX_TLS", value: "tcp" },
    ];
    const c =
        o.apiVersion === "nvidia.com/v1alpha1"
            ? o.spec.services.decode.extraPodSpec.mainContainer
            : o.spec.components[0].podTemplate.spec.containers[0];
    c.env = c.env.filter((e: Obj) => !planted.some((p) => p.name === e.name));
    o.spec[o.apiVersion === "nvidia.com/v1alpha1" ? "envs" : "env"] = planted;
    return o;
}
shapes["DynamoGraphDeployment v1beta1, env at graph level"] = () => graphEnv(shapes["DynamoGraphDeployment v1beta1"]());
shapes["DynamoGraphDeployment v1alpha1, envs at graph level"] = () => graphEnv(shapes["DynamoGraphDeployment v1alpha1"]());

/** The findings of `npm run upstream-check` (tools/upstream-check.ts `checkOutDir`) on a rendered stack of `objects`. */
function cli(name: string, objects: Obj[]): string[] {
    const dir = path.join(tmp, name.replace(/\W+/g, "-"));
    fs.mkdirSync(path.join(dir, "s"), { recursive: true });
    fs.writeFileSync(path.join(dir, "s", "manifests.yaml"), objects.map((o) => YAML.stringify(o)).join("---\n"));
    return checkOutDir(dir)
        .findings.map((f) => formatFinding(f).replace(/^s: /, ""))
        .sort();
}

/** The findings of the pack's `upstream-rules` on the same objects, in the CLI's words. */
async function pack(objects: Obj[]): Promise<string[]> {
    return (await violations([upstreamRulesPolicy()], objects.map(k8s)))
        .map((v) => v.replace(/ field ([^:]+): /, ": $1: ").replace(/\. Fix: make it what the pinned upstream reads.*$/s, ""))
        .sort();
}

describe("one pod-spec walker for upstream-check and the pack", () => {
    for (const [shape, make] of Object.entries(shapes)) {
        it(`${shape}: the planted flag and env vars are found, the same by npm run upstream-check and by the pack`, async () => {
            const objects = [make()];
            const c = cli(shape, objects);
            for (const key of PLANTED)
                expect(
                    c.some((x) => x.includes(`: ${key}: `)),
                    `${shape} ${key}\n${c.join("\n")}`,
                ).toBe(true);
            // The per-container rule too (not only the KV closed world): graph-level env reaches the container's env.
            expect(
                c.some((x) => x.includes(": env.NIXL_BOGUS: env var NIXL_BOGUS is read by nothing known")),
                shape,
            ).toBe(true);
            expect(await pack(objects)).toEqual(c);
        });
    }
    it("the pack's workload view reads the same pod templates (LeaderWorkerSet leader and worker, v1alpha1 main container)", () => {
        for (const make of [shapes.LeaderWorkerSet, shapes["DynamoGraphDeployment v1alpha1"]]) {
            const o = make();
            const view = stackView([k8s(o)].map((r) => ({ ...r, props: r.inputs, opts: {} }) as any));
            const walked = podTemplatesOf(o).flatMap((t) => t.containerPaths);
            expect(walked.length).toBeGreaterThan(0);
            expect(view.containers.map((x) => x.path)).toEqual(walked);
            for (const x of view.containers) expect(x.args).toContain("--bogus-flag-xyz");
        }
        expect(podTemplatesOf(shapes["DynamoGraphDeployment v1alpha1"]()).map((t) => t.containerPaths)).toEqual([
            ["spec.services.decode.extraPodSpec.mainContainer"],
        ]);
    });
});

describe("closed world: a pod template the walker cannot read is a finding", () => {
    const widget = {
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "x", namespace: ns },
        spec: { template: { spec: { containers: [plantedDecode()] } } },
    };
    const cases: Array<[string, Obj, string]> = [
        ["an unknown kind with template.spec.containers", widget, "spec.template.spec.containers"],
        [
            "a kind of a workload group the walker has no reading for",
            { apiVersion: "apps/v1", kind: "FooSet", metadata: { name: "x", namespace: ns }, spec: {} },
            "kind",
        ],
        [
            "a Dynamo kind that runs pods",
            {
                apiVersion: "nvidia.com/v1alpha1",
                kind: "DynamoComponentDeployment",
                metadata: { name: "x", namespace: ns },
                spec: { extraPodSpec: { mainContainer: plantedDecode() } },
            },
            "kind",
        ],
        [
            "containers beside the templates a known kind is read from",
            { ...shapes.Deployment(), status: { shadow: { spec: { initContainers: [plantedDecode()] } } } },
            "status.shadow.spec.initContainers",
        ],
    ];
    for (const [what, o, key] of cases)
        it(`${what}: ${key}`, async () => {
            expect(unreadPodTemplates(o).map((u) => u.key)).toContain(key);
            const c = cli(what, [o]);
            expect(
                c.some((x) => x.includes(`: ${key}: `)),
                c.join("\n"),
            ).toBe(true);
            expect((await pack([o])).filter((x) => x.includes(`: ${key}: `))).toEqual(c.filter((x) => x.includes(`: ${key}: `)));
        });
    it("the shapes the walker reads leave nothing unread; ConfigMap payloads are not scanned", () => {
        for (const make of Object.values(shapes)) expect(unreadPodTemplates(make())).toEqual([]);
        const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: { containers: "[{image: x}]" } };
        expect(unreadPodTemplates(cm)).toEqual([]);
    });
});

/** test/fixtures/dynamo/dgd-v1alpha1-service-fields.yaml: valid against the upstream DGD CRD (.ci/run validates the folder). */
const serviceFields = (): Obj =>
    YAML.parse(fs.readFileSync(path.join(__dirname, "fixtures", "dynamo", "dgd-v1alpha1-service-fields.yaml"), "utf8"));
const mainOfService = (o: Obj, name: string): Obj => {
    const t = podTemplatesOf(o).find((x) => x.component === name)!;
    return t.spec.containers.find((c: Obj) => c.name === "main");
};

describe("a v1alpha1 service's own fields reach the main container as the operator merges them", () => {
    // ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/api/v1alpha1/shared_spec_conversion.go
    // buildMainContainerFromDedicated, then mergeExtraPodSpecMainContainer (mergo WithOverride, mergeEnvs, mounts appended).
    it("resources, envs, envFromSecret, probes and volumeMounts merged with extraPodSpec.mainContainer", () => {
        expect(mainOfService(serviceFields(), "prefill")).toEqual({
            name: "main",
            image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0",
            command: ["python3", "-m", "dynamo.vllm"],
            args: ["--model", "Qwen/Qwen3-0.6B", "--disaggregation-mode", "prefill"],
            // mergeEnvs(envs, mainContainer.env): one entry per name, the container's value in the service's place.
            env: [
                { name: "PYTHONHASHSEED", value: "0" },
                { name: "DYN_LOG", value: "info" },
            ],
            // The container's envFrom replaces the envFromSecret entry (mergo overrides a non-empty list whole).
            envFrom: [{ configMapRef: { name: "engine-env" } }],
            // Per resource name, the container's winning; gpu as nvidia.com/gpu, custom keys as they are.
            resources: {
                requests: { cpu: "8", "nvidia.com/gpu": "2" },
                limits: { "nvidia.com/gpu": "2", "rdma/rail_0": "1", cpu: "16" },
            },
            // Probes merge field by field.
            readinessProbe: { httpGet: { path: "/health", port: 9090 }, periodSeconds: 5 },
            livenessProbe: { httpGet: { path: "/live", port: 9090 } },
            // The container's mounts, then every service mount (compilation cache included) as {name, mountPath}.
            volumeMounts: [
                { name: "mooncake-config", mountPath: "/etc/mooncake", readOnly: true },
                { name: "model-cache", mountPath: "/models" },
                { name: "compile-cache", mountPath: "/compile" },
            ],
        });
    });
    it("without them on the container: envFromSecret as one secretRef, the service's env and resources as they are", () => {
        const o = serviceFields();
        const mc = o.spec.services.decode.extraPodSpec.mainContainer;
        delete mc.envFrom;
        delete mc.env;
        delete mc.resources;
        delete mc.readinessProbe;
        delete mc.volumeMounts;
        const main = mainOfService(o, "decode");
        expect(main.envFrom).toEqual([{ secretRef: { name: "hf-token" } }]);
        expect(main.env).toEqual([
            { name: "PYTHONHASHSEED", value: "1" },
            { name: "DYN_LOG", value: "info" },
        ]);
        expect(main.resources).toEqual({
            requests: { cpu: "8", "nvidia.com/gpu": "2" },
            limits: { "nvidia.com/gpu": "2", "rdma/rail_0": "1" },
        });
        expect(main.readinessProbe).toEqual({ httpGet: { path: "/health", port: 9090 }, periodSeconds: 10 });
        expect(main.volumeMounts).toEqual([
            { name: "model-cache", mountPath: "/models" },
            { name: "compile-cache", mountPath: "/compile" },
        ]);
    });
    it("the pack's workload view sees the service's mounts on the main container", () => {
        const o = serviceFields();
        const view = stackView([k8s(o)].map((r) => ({ ...r, props: r.inputs, opts: {} }) as any));
        const prefill = view.containers.find((c) => c.component === "prefill" && c.container === "main")!;
        expect(prefill.volumeMounts.map((m) => m.mountPath)).toEqual(["/etc/mooncake", "/models", "/compile"]);
        expect(prefill.env.get("PYTHONHASHSEED")?.value).toBe("0");
    });
    it("a mount only in decode's service volumeMounts is a prefill/decode difference, for upstream-check and the pack", async () => {
        const o = serviceFields();
        const mounts = (x: Obj) =>
            pairRule({ stack: "s", objects: [x], releases: [] }, defaultFacts).filter((f) => f.key === "volumeMounts");
        expect(mounts(o)).toEqual([]);
        o.spec.services.decode.volumeMounts[0].mountPoint = "/models-decode";
        // extraPodSpec.mainContainer is the same on both sides: only the service field differs.
        expect(o.spec.services.decode.extraPodSpec.mainContainer.volumeMounts).toEqual(
            o.spec.services.prefill.extraPodSpec.mainContainer.volumeMounts,
        );
        const found = mounts(o);
        expect(found.map((f) => f.object)).toEqual(["DynamoGraphDeployment/inference/merge"]);
        expect(found[0].message).toMatch(/^prefill has volumeMounts .*\n\/models <- .* but decode has .*\n\/models-decode <- /s);
        expect(cli("service volumeMounts", [o]).filter((x) => x.includes(": volumeMounts: "))).toHaveLength(1);
        const v = await violations([pdSettingsMatch], [k8s(o)]);
        expect(
            v.filter((m) => m.startsWith("DynamoGraphDeployment/inference/merge ") && m.includes(" field volumeMounts: ")),
            v.join("\n"),
        ).toHaveLength(1);
    });
    it("the fixture's services leave nothing unread", () => {
        expect(unreadPodTemplates(serviceFields())).toEqual([]);
    });
    it("an extraPodSpec.containers entry named main is dropped, as the operator drops it (buildSharedPodTemplateFromAlpha)", () => {
        const o = serviceFields();
        o.spec.services.decode.extraPodSpec.containers = [
            { name: "main", image: "example.invalid/not-run:1", resources: { limits: { "nvidia.com/gpu": "4" } } },
            { name: "metrics", image: "example.invalid/sidecar:1" },
        ];
        const t = podTemplatesOf(o).find((x) => x.component === "decode")!;
        expect(t.spec.containers.map((c: Obj) => c.name)).toEqual(["main", "metrics"]);
        expect(t.containerPaths).toEqual([
            "spec.services.decode.extraPodSpec.mainContainer",
            "spec.services.decode.extraPodSpec.containers[1]",
        ]);
        expect(t.spec.containers[0].image).toBe("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0");
    });
});
