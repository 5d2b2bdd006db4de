/**
 * What the pack cannot see, it refuses. Each case routes a guarded setting around the manifests
 * the rules read; the upstream behaviour that makes it reach the process is cited per case.
 */
import { describe, expect, it } from "vitest";
import { allPolicies } from "../../policies/policies";
import { helmValuesVisible, guardedEnvVisible } from "../../policies/visibility";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { UNKNOWN } from "../../tools/wire";
import { edit, k8s, mainOf, setEnv, stack, violations } from "./rdma-fixtures";

const prefill = (fn: (m: Record<string, any>) => void, rs = stack()) => edit(rs, "DynamoGraphDeployment", (o) => fn(mainOf(o, "prefill")));
const fired = async (rs: CapturedResource[]) =>
    [...new Set((await runPolicies(allPolicies, rs)).mandatory.map((f) => f.policyName))].sort();
const release = (rs: CapturedResource[], chart: string, fn: (o: Record<string, any>) => void) =>
    rs.map((r) => {
        if ((r.inputs as any).chart !== chart) return r;
        const c = structuredClone(r);
        fn(c.inputs as any);
        fn(c.outputs as any);
        return c;
    });

describe("guarded-settings-visible", () => {
    it("compliant: the generated graph (literal env, downward-API pod IP)", async () => {
        expect(await violations([guardedEnvVisible], stack())).toEqual([]);
        expect(await violations([guardedEnvVisible, helmValuesVisible], stack())).toEqual([]);
    });
    it("envFrom a ConfigMap that is not in the stack (kubelet applies envFrom before env: pkg/kubelet/kubelet_pods.go makeEnvironmentVariables)", async () => {
        const rs = prefill((m) => {
            m.envFrom = [{ configMapRef: { name: "site-ucx" } }];
        });
        expect((await violations([guardedEnvVisible], rs)).join("\n")).toMatch(
            /envFrom\[0\]: takes env from ConfigMap site-ucx, which the pack cannot read \(ConfigMap inference\/site-ucx is not defined in this stack\)/,
        );
    });
    it("envFrom a Secret of the stack whose content is unknown during preview (a generated value)", async () => {
        const secret = k8s({ apiVersion: "v1", kind: "Secret", metadata: { name: "gen", namespace: "inference" } });
        (secret.outputs as any).stringData = UNKNOWN;
        const rs = [
            ...prefill((m) => {
                m.envFrom = [{ secretRef: { name: "gen" } }];
            }),
            secret,
        ];
        expect((await violations([guardedEnvVisible], rs)).join("\n")).toMatch(/Secret inference\/gen has content unknown during preview/);
    });
    it("a guarded variable from valueFrom the pack cannot resolve is refused; an unguarded one is not", async () => {
        const rs = prefill((m) => {
            setEnv(m, "UCX_TLS", undefined);
            m.env.push({ name: "UCX_TLS", valueFrom: { configMapKeyRef: { name: "elsewhere", key: "tls" } } });
            m.env.push({ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf", key: "token" } } });
        });
        const v = await violations([guardedEnvVisible], rs);
        expect(v).toHaveLength(1);
        expect(v[0]).toMatch(
            /sets guarded variable UCX_TLS from something the pack cannot read \(ConfigMap inference\/elsewhere is not defined in this stack\)/,
        );
    });
    it("NCCL/UCX config files: NCCL_CONF_FILE, a ConfigMap mounted at /etc/nccl.conf (NCCL docs: /etc/nccl.conf), /etc/ucx/ucx.conf (UCX config parser)", async () => {
        expect(
            (
                await violations(
                    [guardedEnvVisible],
                    prefill((m) => setEnv(m, "NCCL_CONF_FILE", "/cfg/nccl.conf")),
                )
            ).join("\n"),
        ).toMatch(/NCCL_CONF_FILE points NCCL\/UCX at a config file/);
        const mounted = prefill((m) => {
            m.volumeMounts = [
                ...(m.volumeMounts ?? []),
                { name: "cfg", mountPath: "/etc/nccl.conf", subPath: "nccl.conf" },
                { name: "cfg", mountPath: "/etc/ucx" },
            ];
        });
        expect(
            (await violations([guardedEnvVisible], mounted)).filter((x) => /a config file NCCL\/UCX read at start/.test(x)),
        ).toHaveLength(2);
    });
    it("a guarded variable exported in a shell command line", async () => {
        const rs = prefill((m) => {
            m.command = ["sh", "-c"];
            m.args = ["export UCX_TLS=tcp && exec python3 -m dynamo.vllm --disaggregation-mode prefill"];
        });
        expect((await violations([guardedEnvVisible], rs)).join("\n")).toMatch(/assigns UCX_TLS in its command line/);
    });
});

describe("helm-values-visible", () => {
    it("compliant: the pinned charts with inline values", async () => {
        expect(await violations([helmValuesVisible], stack())).toEqual([]);
    });
    it("values from a file (helm.sh/v3 Release valueYamlFiles) and a post-renderer", async () => {
        const rs = release(stack(), "gpu-operator", (o) => {
            o.valueYamlFiles = [{ path: "gpu-values.yaml" }];
            o.postrender = "./kustomize.sh";
        });
        const v = (await violations([helmValuesVisible], rs)).join("\n");
        expect(v).toMatch(/field valueYamlFiles: takes values from 1 file\(s\), which the pack never reads/);
        expect(v).toMatch(/field postrender: runs a post-renderer/);
    });
    it("a chart version whose values layout the rules were not written against", async () => {
        const rs = release(stack(), "gpu-operator", (o) => {
            o.version = "v24.9.0";
        });
        expect((await violations([helmValuesVisible], rs)).join("\n")).toMatch(
            /version v24\.9\.0 is not one whose values layout the pack was written against \(v25\.10\.1/,
        );
        const latest = release(stack(), "dynamo-platform", (o) => {
            delete o.version;
        });
        expect((await violations([helmValuesVisible], latest)).join("\n")).toMatch(/no version \(the repository's latest\)/);
    });
    it("the same chart written as repo/chart or OCI is still recognised, so its values are still checked", async () => {
        const rs = release(stack(), "gpu-operator", (o) => {
            o.chart = "nvidia/gpu-operator";
            o.values = { driver: { enabled: true, kernelModuleType: "proprietary", rdma: { enabled: false } } };
        });
        expect(await fired(rs)).toEqual(expect.arrayContaining(["gpudirect-rdma-enabled"]));
    });
});
