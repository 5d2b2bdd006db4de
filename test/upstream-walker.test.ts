/**
 * One pod-spec walker (upstream/check/walk.ts) for `npm run upstream-check` and the policy pack: a planted unknown flag
 * and env vars in a decode container are found in every workload shape either reads (Deployment, LeaderWorkerSet leader
 * and worker, DynamoGraphDeployment v1beta1 and v1alpha1), with the same findings from the CLI (tools/upstream-check.ts
 * over a rendered out/ folder) and from the pack (policies/upstream.ts `upstream-rules`); an object carrying a pod
 * template the walker cannot read is a finding in both, never skipped.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import YAML from "yaml";
import { afterAll, describe, expect, it } from "vitest";
import { upstreamRulesPolicy } from "../policies/upstream";
import { stackView } from "../policies/lib/workloads";
import { checkOutDir } from "../tools/upstream-check";
import { formatFinding, podTemplatesOf, unreadPodTemplates } from "../upstream/check";
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
