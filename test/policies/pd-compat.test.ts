/**
 * Prefill and decode of one graph must be able to talk. Each case breaks one must-match setting
 * on the decode side of a generated graph; the expected rule and reason come from the engine sources cited in
 * policies/pd-compat.ts (vllm-project/vllm@v0.28.0 nixl_connector.py `compute_nixl_compatibility_hash` /
 * `_validate_remote_agent_handshake`, vllm/config/kv_transfer.py `kv_load_failure_policy`, vllm/envs.py
 * `VLLM_NIXL_SIDE_CHANNEL_HOST`; sgl-project/sglang@v0.5.18 server_args.py; Dynamo's SGLang prefill handler
 * `_get_bootstrap_info`).
 */
import { describe, expect, it } from "vitest";
import { pdFailLoudly, pdSettingsDescription, pdSettingsMatch, pdSettingsMatchPolicy } from "../../policies/pd-compat";
import { defaultFacts } from "../../upstream/check";
import { unroutable } from "../../upstream/address";
import { pairKvSettings, pairRoleSettings } from "../../upstream/pairs";
import type { CapturedResource } from "../../tools/harness";
import { edit, endpoint, mainOf, setArg, setEnv, stack, violations } from "./rdma-fixtures";

/** Sets the vLLM P/D requirements explicitly (fail on KV load failure, side channel = pod IP) on both roles. */
function vllmCompliant(m: Record<string, any>): void {
    const i = m.args.indexOf("--kv-transfer-config");
    if (i >= 0) {
        const k = JSON.parse(m.args[i + 1]);
        k.kv_load_failure_policy = "fail";
        m.args[i + 1] = JSON.stringify(k);
    }
    m.env = (m.env ?? []).filter((e: any) => e.name !== "VLLM_NIXL_SIDE_CHANNEL_HOST");
    m.env.push({ name: "VLLM_NIXL_SIDE_CHANNEL_HOST", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } });
}
function graph(engine: "vllm" | "sglang" | "trtllm", kvPool: "none" | "mooncake" = "none"): CapturedResource[] {
    const rs = stack([
        endpoint({ engine, kvPool: kvPool === "none" ? { kind: "none" } : { kind: "mooncake", segmentSizeGiB: 512, storeReplicas: 2 } }),
    ]);
    return engine === "vllm"
        ? edit(rs, "DynamoGraphDeployment", (o) => {
              vllmCompliant(mainOf(o, "prefill"));
              vllmCompliant(mainOf(o, "decode"));
          })
        : rs;
}
const decode = (rs: CapturedResource[], fn: (m: Record<string, any>) => void) =>
    edit(rs, "DynamoGraphDeployment", (o) => fn(mainOf(o, "decode")));
const both = (rs: CapturedResource[], fn: (m: Record<string, any>) => void) =>
    edit(rs, "DynamoGraphDeployment", (o) => {
        fn(mainOf(o, "prefill"));
        fn(mainOf(o, "decode"));
    });
const pd = async (rs: CapturedResource[]) => violations([pdSettingsMatch, pdFailLoudly], rs);

describe("pd-kv-settings-match", () => {
    it("its description lists the KV-shaping settings of upstream/pairs.ts, not a copy in prose", () => {
        expect(pdSettingsMatch.description).toBe(pdSettingsDescription());
        for (const [ep, settings] of Object.entries(pairKvSettings))
            for (const k of settings) expect(pdSettingsMatch.description, `${ep} ${k.key}`).toContain(k.key);
        // A setting recorded in upstream/pairs.ts appears in the description without touching the pack.
        const planted = {
            ...pairKvSettings,
            "dynamo.vllm": [...pairKvSettings["dynamo.vllm"], { ...pairKvSettings["dynamo.vllm"][0], key: "--planted-kv" }],
        };
        expect(pdSettingsDescription(planted)).toContain("--planted-kv");
        expect(pdSettingsMatch.description).not.toContain("--planted-kv");
    });
    it("compliant: generated vLLM (NIXL, and NIXL+Mooncake store via MultiConnector), SGLang and TensorRT-LLM pairs", async () => {
        for (const e of ["vllm", "sglang", "trtllm"] as const) expect(await pd(graph(e)), e).toEqual([]);
        expect(await pd(graph("vllm", "mooncake"))).toEqual([]);
    });
    it("compliant: the same setting given explicitly on both sides, or a default given explicitly on one side", async () => {
        expect(await pd(both(graph("vllm"), (m) => setArg(m, "--kv-cache-dtype", "fp8")))).toEqual([]);
        expect(await pd(decode(graph("vllm"), (m) => setArg(m, "--kv-cache-dtype", "auto")))).toEqual([]);
        expect(await pd(decode(graph("sglang"), (m) => setArg(m, "--page-size", "64")))).toEqual([]);
    });
    it("vLLM: --kv-cache-dtype, --block-size, attention backend, VLLM_KV_CACHE_LAYOUT differ", async () => {
        const cases: Array<[string, (m: Record<string, any>) => void]> = [
            ["--kv-cache-dtype", (m) => setArg(m, "--kv-cache-dtype", "fp8_e4m3")],
            ["--block-size", (m) => setArg(m, "--block-size", "32")],
            ["attention backend", (m) => setEnv(m, "VLLM_ATTENTION_BACKEND", "FLASHINFER")],
            ["VLLM_KV_CACHE_LAYOUT", (m) => setEnv(m, "VLLM_KV_CACHE_LAYOUT", "NHD")],
            ["--dtype", (m) => setArg(m, "--dtype", "float16")],
            ["--model", (m) => setArg(m, "--model", "meta-llama/Llama-3.1-70B-Instruct")],
            [
                "image",
                (m) => {
                    m.image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0";
                },
            ],
        ];
        for (const [key, fn] of cases) {
            const v = await violations([pdSettingsMatch], decode(graph("vllm"), fn));
            expect(v, key).toHaveLength(1);
            expect(v[0], key).toContain(`prefill has ${key} `);
        }
    });
    it("vLLM: another NIXL backend, or another connector on decode", async () => {
        const lf = decode(graph("vllm"), (m) => {
            const i = m.args.indexOf("--kv-transfer-config");
            const k = JSON.parse(m.args[i + 1]);
            k.kv_connector_extra_config.backends = ["LIBFABRIC"];
            m.args[i + 1] = JSON.stringify(k);
        });
        expect((await violations([pdSettingsMatch], lf)).join("\n")).toMatch(
            /prefill has NIXL backends \["UCX"\] but decode has \["LIBFABRIC"\]/,
        );
        const mc = decode(graph("vllm"), (m) => {
            const i = m.args.indexOf("--kv-transfer-config");
            m.args[i + 1] = JSON.stringify({ kv_connector: "MooncakeConnector", kv_role: "kv_both", kv_load_failure_policy: "fail" });
        });
        expect((await violations([pdSettingsMatch], mc)).join("\n")).toMatch(
            /prefill has kv_connector NixlConnector but decode has MooncakeConnector/,
        );
    });
    it("vLLM: TP sizes that do not divide one another (2 and 3); 2 and 4 divide", async () => {
        expect(await violations([pdSettingsMatch], graph("vllm"))).toEqual([]);
        const v = await violations(
            [pdSettingsMatch],
            decode(graph("vllm"), (m) => setArg(m, "--tensor-parallel-size", "3")),
        );
        expect(v.join("\n")).toMatch(/prefill TP 2 and decode TP 3 do not divide one another/);
    });
    it("SGLang: --page-size, --kv-cache-dtype, transfer backend, NIXL backend differ", async () => {
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("sglang"), (m) => setArg(m, "--page-size", "32")),
                )
            ).join("\n"),
        ).toMatch(/prefill has --page-size 64 but decode has 32: KV is sent by page index/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("sglang"), (m) => setArg(m, "--kv-cache-dtype", "fp8_e5m2")),
                )
            ).join("\n"),
        ).toMatch(/--kv-cache-dtype auto but decode has fp8_e5m2/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("sglang"), (m) => setArg(m, "--disaggregation-transfer-backend", "mooncake")),
                )
            ).join("\n"),
        ).toMatch(/--disaggregation-transfer-backend nixl but decode has mooncake/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("sglang"), (m) => setEnv(m, "SGLANG_DISAGGREGATION_NIXL_BACKEND", "LIBFABRIC")),
                )
            ).join("\n"),
        ).toMatch(/SGLANG_DISAGGREGATION_NIXL_BACKEND UCX but decode has LIBFABRIC/);
    });
    it("TensorRT-LLM: cache transceiver backend, KV dtype, tokens per block differ; engine args from a file are refused", async () => {
        const eng = (fn: (e: Record<string, any>) => void) => (m: Record<string, any>) => {
            const i = m.args.indexOf("--override-engine-args");
            const e = JSON.parse(m.args[i + 1]);
            fn(e);
            m.args[i + 1] = JSON.stringify(e);
        };
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(
                        graph("trtllm"),
                        eng((e) => {
                            e.cache_transceiver_config = { backend: "UCX" };
                        }),
                    ),
                )
            ).join("\n"),
        ).toMatch(/cache_transceiver_config.backend NIXL but decode has UCX/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(
                        graph("trtllm"),
                        eng((e) => {
                            e.kv_cache_config.dtype = "fp8";
                        }),
                    ),
                )
            ).join("\n"),
        ).toMatch(/kv_cache_config.dtype auto but decode has fp8/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("trtllm"), (m) => setArg(m, "--kv-block-size", "64")),
                )
            ).join("\n"),
        ).toMatch(/tokens per block 32 but decode has 64/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("trtllm"), (m) => setArg(m, "--extra-engine-args", "/cfg/decode.yaml")),
                )
            ).join("\n"),
        ).toMatch(/takes TensorRT-LLM engine args from a file/);
    });
    it("vLLM/SGLang arguments from a --config file cannot be compared and are refused", async () => {
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("vllm"), (m) => setArg(m, "--config", "/cfg/decode.yaml")),
                )
            ).join("\n"),
        ).toMatch(/reads vllm arguments from the file \/cfg\/decode.yaml/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("sglang"), (m) => setArg(m, "--config", "/cfg/d.yaml")),
                )
            ).join("\n"),
        ).toMatch(/reads sglang arguments from the file/);
    });
    it("closed world: any other difference is refused (a drafter, a hash seed, a timeout), role settings are not", async () => {
        const spec = JSON.stringify({ method: "eagle3", model: "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", num_speculative_tokens: 3 });
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("vllm"), (m) => setArg(m, "--speculative-config", spec)),
                )
            ).join("\n"),
        ).toMatch(/prefill has --speculative-config \(unset\) but decode has/);
        expect(
            await violations(
                [pdSettingsMatch],
                both(graph("vllm"), (m) => setArg(m, "--speculative-config", spec)),
            ),
        ).toEqual([]);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("vllm"), (m) => setEnv(m, "PYTHONHASHSEED", "1")),
                )
            ).join("\n"),
        ).toMatch(/prefill has PYTHONHASHSEED \(unset\) but decode has 1/);
        expect(
            (
                await violations(
                    [pdSettingsMatch],
                    decode(graph("sglang"), (m) => setEnv(m, "UCX_RNDV_THRESH", "8192")),
                )
            ).join("\n"),
        ).toMatch(/UCX_RNDV_THRESH/);
        // Equivalent spellings and role settings pass.
        expect(
            await violations(
                [pdSettingsMatch],
                decode(graph("sglang"), (m) => {
                    m.args = m.args.filter((a: string) => a !== "--disaggregation-decode-enable-radix-cache");
                    m.args.push("--disaggregation-decode-enable-radix-cache");
                }),
            ),
        ).toEqual([]);
        expect(
            await violations(
                [pdSettingsMatch],
                decode(graph("sglang"), (m) => setArg(m, "--tp-size", "4")),
            ),
        ).toEqual([]);
        expect(
            await violations(
                [pdSettingsMatch],
                decode(graph("vllm"), (m) => setArg(m, "--kv-cache-dtype", "auto")),
            ),
        ).toEqual([]);
        for (const e of ["dynamo.vllm", "dynamo.sglang", "dynamo.trtllm"])
            expect(pairRoleSettings[e].map((r) => r.key)).toContain("--disaggregation-mode");
    });
    it("closed world: a pair whose entry point upstream/ does not record is refused, not skipped", async () => {
        const v = await violations(
            [pdSettingsMatch],
            both(graph("sglang"), (m) => {
                m.command = ["python3", "-m", "my_engine.serve"];
            }),
        );
        expect(v.join("\n")).toMatch(
            /field command: prefill runs an unknown entry point but decode runs an unknown entry point; upstream\/ records no KV settings for it/,
        );
    });
    it("the pair rule reads the facts it is given: a planted role list changes the verdict", async () => {
        const facts = {
            ...defaultFacts,
            pairRoles: {
                ...pairRoleSettings,
                "dynamo.sglang": pairRoleSettings["dynamo.sglang"].filter((r) => r.key !== "--disaggregation-mode"),
            },
        };
        expect(await violations([pdSettingsMatchPolicy(facts)], graph("sglang"))).toEqual([
            expect.stringMatching(/field --disaggregation-mode: prefill has --disaggregation-mode prefill but decode has decode/),
        ]);
    });
    it("the pair rule is upstream-check's: a writable mount or another mounted ConfigMap on decode is refused", async () => {
        const v = await violations(
            [pdSettingsMatch],
            decode(graph("vllm", "mooncake"), (m) => {
                for (const x of m.volumeMounts) if (x.mountPath === "/etc/mooncake") x.readOnly = false;
            }),
        );
        expect(v.join("\n")).toMatch(/field volumeMounts: prefill has volumeMounts \/etc\/mooncake \(ro\)/);
    });
    it("every engine's list names the settings that shape a KV block and the transfer", () => {
        expect(pairKvSettings["dynamo.vllm"].map((s) => s.key)).toEqual(
            expect.arrayContaining(["--kv-cache-dtype", "--block-size", "attention backend", "kv_connector", "NIXL backends", "--model"]),
        );
        expect(pairKvSettings["dynamo.sglang"].map((s) => s.key)).toEqual(
            expect.arrayContaining(["--kv-cache-dtype", "--page-size", "--disaggregation-transfer-backend", "--model-path"]),
        );
        expect(pairKvSettings["dynamo.trtllm"].map((s) => s.key)).toEqual(
            expect.arrayContaining(["cache_transceiver_config.backend", "kv_cache_config.dtype", "tokens per block"]),
        );
    });
});

describe("pd-kv-load-fails-loudly", () => {
    it("vLLM without kv_load_failure_policy (default recompute) or with recompute is refused", async () => {
        const unset = both(graph("vllm"), (m) => {
            const i = m.args.indexOf("--kv-transfer-config");
            const k = JSON.parse(m.args[i + 1]);
            delete k.kv_load_failure_policy;
            m.args[i + 1] = JSON.stringify(k);
        });
        expect(
            (await violations([pdFailLoudly], unset)).filter((x) =>
                /is "recompute" \(vLLM's default\): a failed KV read silently re-runs the prefill/.test(x),
            ),
        ).toHaveLength(2);
        const recompute = decode(graph("vllm"), (m) => {
            const i = m.args.indexOf("--kv-transfer-config");
            const k = JSON.parse(m.args[i + 1]);
            k.kv_load_failure_policy = "recompute";
            m.args[i + 1] = JSON.stringify(k);
        });
        expect(await violations([pdFailLoudly], recompute)).toHaveLength(1);
    });
    it("vLLM side channel: unset (default localhost), loopback, wildcard, or the node IP without hostNetwork are refused; the pod IP passes", async () => {
        const host = (v: Record<string, unknown> | string | undefined) =>
            decode(graph("vllm"), (m) => {
                m.env = m.env.filter((e: any) => e.name !== "VLLM_NIXL_SIDE_CHANNEL_HOST");
                if (v !== undefined)
                    m.env.push(
                        typeof v === "string"
                            ? { name: "VLLM_NIXL_SIDE_CHANNEL_HOST", value: v }
                            : { name: "VLLM_NIXL_SIDE_CHANNEL_HOST", valueFrom: v },
                    );
            });
        expect((await violations([pdFailLoudly], host(undefined))).join("\n")).toMatch(
            /VLLM_NIXL_SIDE_CHANNEL_HOST\]: is unset, so vLLM advertises "localhost"/,
        );
        for (const bad of ["127.0.0.1", "localhost", "0.0.0.0", "::", "[::1]"])
            expect((await violations([pdFailLoudly], host(bad))).join("\n"), bad).toMatch(
                /a loopback, wildcard or otherwise unproven address a peer cannot connect to/,
            );
        expect((await violations([pdFailLoudly], host({ fieldRef: { fieldPath: "status.hostIP" } }))).join("\n")).toMatch(
            /comes from status.hostIP/,
        );
        expect(await violations([pdFailLoudly], host("10.20.30.40"))).toEqual([]);
        expect(await violations([pdFailLoudly], host({ fieldRef: { fieldPath: "status.podIP" } }))).toEqual([]);
    });
    it("SGLang: --dist-init-addr on loopback, SGLANG_HOST_IP wildcard; Mooncake MOONCAKE_LOCAL_HOSTNAME loopback", async () => {
        expect(
            (
                await violations(
                    [pdFailLoudly],
                    decode(graph("sglang"), (m) => setArg(m, "--dist-init-addr", "127.0.0.1:5000")),
                )
            ).join("\n"),
        ).toMatch(/--dist-init-addr\]: is "127.0.0.1:5000"/);
        expect(
            (
                await violations(
                    [pdFailLoudly],
                    decode(graph("sglang"), (m) => setEnv(m, "SGLANG_HOST_IP", "0.0.0.0")),
                )
            ).join("\n"),
        ).toMatch(/SGLANG_HOST_IP is "0.0.0.0"/);
        const store = edit(
            graph("sglang", "mooncake"),
            "Deployment",
            (o) => {
                const c = o.spec.template.spec.containers[0];
                setEnv(c, "MOONCAKE_LOCAL_HOSTNAME", "localhost");
            },
            "llama-70b-mooncake-store",
        );
        expect((await violations([pdFailLoudly], store)).join("\n")).toMatch(/MOONCAKE_LOCAL_HOSTNAME is "localhost"/);
    });
    it("unroutable() knows loopback and wildcards", () => {
        for (const h of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "0.0.0.0", "::", "*"]) expect(unroutable(h), h).toBe(true);
        for (const h of ["10.0.0.5", "prefill-0.inference.svc", "fd00::5"]) expect(unroutable(h), h).toBe(false);
    });
});
