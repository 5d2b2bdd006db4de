import { versions } from "../../config/versions";
import { describe, expect, it } from "vitest";
import {
    dgdApiShape,
    dgdCelRules,
    dgdImageSemver,
    dgdKvRouterEvents,
    dgdMainContainer,
    dgdMultinodeOrchestrator,
    dgdPlannerScaling,
    dgdRoleImages,
    dgdWorkerRoleFlags,
    dynamoPolicies,
    semverTag,
} from "../../policies/dynamo";
import { dynamoFrontendKvOnlyFlags, dynamoRemovedWorkerFlags } from "../../upstream/dynamo";
import { refusedCombinations } from "../../upstream/refused";
import { mooncakePolicies } from "../../policies/mooncake";
import { rdmaWorkloadPolicies } from "../../policies/rdma-workloads";
import { edit, endpoint, endpointObjects, k8s, mainOf, platform, poolPatches, setArg, setEnv, stack, violations } from "./rdma-fixtures";
import { toV1alpha1 } from "../dgd-v1alpha1";

function v1alpha1Stack(fn?: (o: Record<string, any>) => void) {
    const e = endpoint();
    const { dgd, others } = endpointObjects(e);
    const old = toV1alpha1(dgd);
    fn?.(old);
    return [...poolPatches(), ...platform(), k8s(old), ...others.map(k8s)];
}

const dgdEdit = (fn: (o: Record<string, any>) => void, rs = stack()) => edit(rs, "DynamoGraphDeployment", fn);
const L = "DynamoGraphDeployment/llama-70b";

describe("both DGD shapes", () => {
    // Schema validity of both forms against the upstream DGD CRD is checked by `npm run validate -- --crds <upstream CRD dir>`
    // in .ci/run; unit tests read no upstream CRDs (they pass from a bare clone).
    it("the v1alpha1 form of the generated graph passes every RDMA, Mooncake and DGD rule", async () => {
        expect(await violations([...rdmaWorkloadPolicies, ...mooncakePolicies, ...dynamoPolicies], v1alpha1Stack())).toEqual([]);
    });
    it("v1alpha1 violations are found at v1alpha1 field paths: UCX_TLS via graph envs, RDMA missing from resources.custom", async () => {
        const rs = v1alpha1Stack((o) => {
            o.spec.envs = [{ name: "UCX_TLS", value: "tcp,cuda_copy" }];
            for (const s of ["prefill", "decode"])
                for (const m of o.spec.services[s].extraPodSpec.mainContainer.env) if (m.name === "UCX_TLS") m.name = "UCX_TLS_UNUSED";
            delete o.spec.services.decode.resources.limits.custom;
            delete o.spec.services.decode.resources.requests.custom;
        });
        const msgs = await violations([...rdmaWorkloadPolicies], rs);
        expect(msgs).toContain(
            `${L} container prefill/main field spec.envs[UCX_TLS]: UCX_TLS=tcp,cuda_copy lets UCX use tcp, so a missing RDMA device degrades to TCP instead of failing. Fix: set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc.`,
        );
        expect(msgs).toContain(
            `${L} container decode/main field spec.services.decode.resources: requests no RDMA device (rdma/*, vpc.amazonaws.com/efa) for 4 GPU(s), so NIXL/UCX, Mooncake and NCCL fall back to TCP without an error. Fix: request the pool's rail resources (rdma/rail_<i>: 1 each) in both requests and limits.`,
        );
    });
});

describe("dgd-api-shape", () => {
    it("compliant: v1beta1 as generated, v1alpha1 as converted", async () => {
        expect(await violations([dgdApiShape], stack())).toEqual([]);
        expect(await violations([dgdApiShape], v1alpha1Stack())).toEqual([]);
    });
    it("v1alpha1 fields in a v1beta1 graph, and gpu inside a PodSpec", async () => {
        const rs = dgdEdit((o) => {
            o.spec.services = {};
            o.spec.components[3].componentType = "worker";
            mainOf(o, "prefill").resources.limits.gpu = "2";
        });
        expect(await violations([dgdApiShape], rs)).toEqual([
            `${L} field spec.services: is a v1alpha1 field in a v1beta1 DynamoGraphDeployment. Fix: move each service to spec.components[] (name, type, podTemplate).`,
            `${L} field spec.components[2].podTemplate.spec.containers[0].resources: uses the v1alpha1 resource key "gpu" inside a PodSpec. Fix: use nvidia.com/gpu and rdma/* keys in container resources.`,
            `${L} field spec.components[3].componentType: is a v1alpha1 field in a v1beta1 component. Fix: use the v1beta1 field (type, podTemplate, sharedMemorySize, container resources).`,
        ]);
    });
    it("v1beta1 fields in a v1alpha1 graph", async () => {
        const rs = v1alpha1Stack((o) => {
            o.spec.services.decode.podTemplate = {};
        });
        expect(await violations([dgdApiShape], rs)).toEqual([
            `${L} field spec.services.decode.podTemplate: is a v1beta1 field in a v1alpha1 service. Fix: use apiVersion nvidia.com/v1beta1 or the v1alpha1 field.`,
        ]);
    });
});

describe("dgd-main-container (ai-dynamo/dynamo PR #11421)", () => {
    it("compliant", async () => {
        expect(await violations([dgdMainContainer], stack())).toEqual([]);
    });
    it("engine container not named main; v1alpha1 main without image", async () => {
        expect(
            await violations(
                [dgdMainContainer],
                dgdEdit((o) => {
                    mainOf(o, "decode").name = "engine";
                }),
            ),
        ).toEqual([
            `${L} container decode/main field spec.components[3].podTemplate.spec.containers: component decode has no main container (containers: engine). Fix: add a container named main with the engine image.`,
        ]);
        expect(
            await violations(
                [dgdMainContainer],
                v1alpha1Stack((o) => {
                    delete o.spec.services.Frontend.extraPodSpec.mainContainer.image;
                }),
            ),
        ).toEqual([
            `${L} container Frontend/main field spec.services.Frontend.extraPodSpec.mainContainer.image: component Frontend's main container has no image. Fix: set the image (semver tag).`,
        ]);
    });
});

describe("dgd-image-semver", () => {
    it("compliant: 1.5.0, v0.5.16, and a custom tag with runtimeVersionOverride", async () => {
        expect(semverTag(`${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version}`)).toBe(
            versions.dynamoRuntime.vllm.version,
        );
        expect(semverTag("lmsysorg/sglang:v0.5.16")).toBe("v0.5.16");
        expect(semverTag("registry:5000/vllm-runtime")).toBeUndefined();
        const rs = dgdEdit((o) => {
            mainOf(o, "decode").image = "registry.local/vllm-runtime:my-build";
            o.spec.components[3].runtimeVersionOverride = "1.5.0";
        });
        expect(await violations([dgdImageSemver], rs)).toEqual([]);
    });
    it(":latest and a digest-only image", async () => {
        const rs = dgdEdit((o) => {
            mainOf(o, "Frontend").image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:latest";
            mainOf(o, "decode").image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:abc";
        });
        expect(await violations([dgdImageSemver], rs)).toEqual([
            `${L} container Frontend/main field spec.components[0].podTemplate.spec.containers[0].image: image nvcr.io/nvidia/ai-dynamo/vllm-runtime:latest has no semantic-version tag, so the webhook rejects the component. Fix: use a release tag (:X.Y.Z) or set runtimeVersionOverride.`,
            `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].image: image nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:abc has no semantic-version tag, so the webhook rejects the component. Fix: use a release tag (:X.Y.Z) or set runtimeVersionOverride.`,
        ]);
    });
});

describe("dgd-worker-role-flags", () => {
    const P = `${L} container prefill/main field spec.components[2].podTemplate.spec.containers[0].args`;
    it("compliant for every engine", async () => {
        for (const engine of ["vllm", "sglang", "trtllm"])
            expect(await violations([dgdWorkerRoleFlags], stack([endpoint({ engine, kvPool: { kind: "none" } })]))).toEqual([]);
    });
    it("ai-dynamo/dynamo #13238: vLLM prefill worker without --disaggregation-mode prefill", async () => {
        expect(
            await violations(
                [dgdWorkerRoleFlags],
                dgdEdit((o) => setArg(mainOf(o, "prefill"), "--disaggregation-mode", undefined)),
            ),
        ).toEqual([
            `${P}: prefill worker has no --disaggregation-mode prefill, so it registers as backend and no prefill pool exists. Fix: pass --disaggregation-mode prefill.`,
        ]);
    });
    it("ai-dynamo/dynamo #12089: the removed --is-prefill-worker flag; a prefill without --kv-transfer-config", async () => {
        const rs = dgdEdit((o) => {
            const m = mainOf(o, "prefill");
            setArg(m, "--kv-transfer-config", undefined);
            m.args.push("--is-prefill-worker");
        });
        expect(await violations([dgdWorkerRoleFlags], rs)).toEqual([
            `${P}: --is-prefill-worker is no longer a flag of Dynamo's worker and fails argument parsing (Dynamo's vllm worker). Fix: use --disaggregation-mode prefill.`,
            `${P}: vLLM prefill worker has no --kv-transfer-config, so it fails at start (the default connector is no longer NIXL). Fix: pass --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'.`,
        ]);
    });
    it("TRT-LLM: the old role flags fail argument parsing there too (the --trtllm.* scan exits on them), refused with that source", async () => {
        const D = `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].args`;
        const rs = dgdEdit(
            (o) => {
                mainOf(o, "prefill").args.push("--is-prefill-worker");
                mainOf(o, "decode").args.push("--is-decode-worker");
            },
            stack([endpoint({ engine: "trtllm", kvPool: { kind: "none" } })]),
        );
        expect(await violations([dgdWorkerRoleFlags], rs)).toEqual([
            `${P}: --is-prefill-worker is no longer a flag of Dynamo's worker and fails argument parsing: the --trtllm.* flag scan exits on it with "Unrecognized argument" (Dynamo's trtllm worker). Fix: use --disaggregation-mode prefill.`,
            `${D}: --is-decode-worker is no longer a flag of Dynamo's worker and fails argument parsing: the --trtllm.* flag scan exits on it with "Unrecognized argument" (Dynamo's trtllm worker). Fix: use --disaggregation-mode decode.`,
        ]);
        // Read at the pinned tree, not marked unproven: each entry point names the function that exits on the flag.
        for (const flag of ["--is-prefill-worker", "--is-decode-worker"]) {
            const at = dynamoRemovedWorkerFlags[flag];
            expect(Object.keys(at).sort(), flag).toEqual(["dynamo.sglang", "dynamo.trtllm", "dynamo.vllm"]);
            expect(at["dynamo.trtllm"]).toMatchObject({
                effect: "startup",
                source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/trtllm/dynamic_flags.py#parse_dynamic_flags",
            });
        }
    });
    it("SGLang: --connector parses (Dynamo's shared runtime arguments) and nothing reads it, refused as inert", async () => {
        const rs = dgdEdit((o) => mainOf(o, "prefill").args.push("--connector", "nixl"), stack([endpoint({ engine: "sglang" })]));
        expect(await violations([dgdWorkerRoleFlags], rs)).toEqual([
            `${P}: --connector is parsed by Dynamo's shared runtime arguments and read by nothing in the SGLang worker, so it selects no KV transfer (Dynamo's sglang worker). Fix: use --disaggregation-transfer-backend (SGLang's KV transfer backend).`,
        ]);
        expect(dynamoRemovedWorkerFlags["--connector"]["dynamo.sglang"].effect).toBe("silent");
        // TRT-LLM reads --connector (none, kvbm), so this rule leaves it to the upstream rules there.
        expect(dynamoRemovedWorkerFlags["--connector"]["dynamo.trtllm"]).toBeUndefined();
    });
    it("an SGLang decode component running --disaggregation-mode prefill", async () => {
        const rs = dgdEdit((o) => setArg(mainOf(o, "decode"), "--disaggregation-mode", "prefill"), stack([endpoint({ engine: "sglang" })]));
        expect(await violations([dgdWorkerRoleFlags], rs)).toEqual([
            `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].args: --disaggregation-mode prefill does not match component type decode. Fix: pass --disaggregation-mode decode.`,
        ]);
    });
});

describe("dgd-kv-router-events", () => {
    const FE = `${L} container Frontend/main field spec.components[0].podTemplate.spec.containers[0].args`;
    it("compliant: kv router with publishing workers; kv router in approximate mode", async () => {
        expect(await violations([dgdKvRouterEvents], stack())).toEqual([]);
        const approx = dgdEdit((o) => {
            mainOf(o, "Frontend").args.push("--no-router-kv-events");
            setArg(mainOf(o, "decode"), "--kv-events-config", undefined);
        });
        expect(await violations([dgdKvRouterEvents], approx)).toEqual([]);
    });
    it("a worker that publishes no KV events to a kv router", async () => {
        const rs = dgdEdit((o) => setArg(mainOf(o, "prefill"), "--kv-events-config", undefined));
        expect(await violations([dgdKvRouterEvents], rs)).toEqual([
            `${L} container prefill/main field spec.components[2].podTemplate.spec.containers[0].args: the frontend routes on KV events but this prefill worker publishes none, so the router sees no cache state. Fix: pass --kv-events-config with a zmq publisher.`,
        ]);
    });
    it("decode workers: events needed only under --router-conditional-disagg; SGLang decode on the chunk cache is refused", async () => {
        // Dynamo's router subscribes to no decode worker's events by default (KvEventSourceRequirement::NotRequired).
        const noDecode = (o: any) => setArg(mainOf(o, "decode"), "--kv-events-config", undefined);
        expect(await violations([dgdKvRouterEvents], dgdEdit(noDecode))).toEqual([]);
        const cond = dgdEdit((o) => {
            noDecode(o);
            mainOf(o, "Frontend").args.push("--router-conditional-disagg");
        });
        expect(await violations([dgdKvRouterEvents], cond)).toEqual([
            `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].args: the frontend routes on KV events but this decode worker publishes none, so the router sees no cache state. Fix: pass --kv-events-config with a zmq publisher.`,
        ]);
        // The same through the frontend's env var.
        const condEnv = dgdEdit((o) => {
            noDecode(o);
            setEnv(mainOf(o, "Frontend"), "DYN_ROUTER_CONDITIONAL_DISAGG", "true");
        });
        expect(await violations([dgdKvRouterEvents], condEnv)).toHaveLength(1);
        const sg = stack([endpoint({ engine: "sglang", kvPool: { kind: "none" } })]);
        expect(await violations([dgdKvRouterEvents], sg)).toEqual([]);
        const inert = dgdEdit(
            (o) => setArg(mainOf(o, "decode"), "--kv-events-config", '{"publisher":"zmq","endpoint":"tcp://*:5557"}'),
            sg,
        );
        expect(await violations([dgdKvRouterEvents], inert)).toEqual([
            `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].args: --kv-events-config on an SGLang decode worker without --disaggregation-decode-enable-radix-cache is inert: SGLang forces the chunk cache there, which publishes no KV events, yet Dynamo advertises the worker as a publisher. Fix: drop --kv-events-config from the decode worker (the KV router needs decode events only under --router-conditional-disagg), or keep the radix cache with --disaggregation-decode-enable-radix-cache.`,
        ]);
        const kept = (conditional: boolean) =>
            dgdEdit((o) => {
                setArg(mainOf(o, "decode"), "--kv-events-config", '{"publisher":"zmq","endpoint":"tcp://*:5557"}');
                mainOf(o, "decode").args.push("--disaggregation-decode-enable-radix-cache");
                if (conditional) mainOf(o, "Frontend").args.push("--router-conditional-disagg");
            }, sg);
        // With the radix cache it publishes, but without conditional disaggregation nobody subscribes: inert.
        const unread = `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].args: --kv-events-config on a P/D decode worker is inert: no KV-routing frontend of the graph runs --router-conditional-disagg (or DYN_ROUTER_CONDITIONAL_DISAGG), so the router requires no events from decode workers (KvEventSourceRequirement::NotRequired) and never subscribes. Fix: drop --kv-events-config from the decode worker (lib/dgd.ts renders none there), or turn conditional disaggregation on at the frontend.`;
        expect(await violations([dgdKvRouterEvents], kept(false))).toEqual([unread]);
        expect(await violations([dgdKvRouterEvents], kept(true))).toEqual([]);
        // vLLM the same way: the rendered decode worker has none; one planted is inert unless conditional disagg is on.
        const vllmDecode = '{"publisher":"zmq","topic":"kv-events","endpoint":"tcp://*:20080","enable_kv_cache_events":true}';
        expect(
            await violations(
                [dgdKvRouterEvents],
                dgdEdit((o) => setArg(mainOf(o, "decode"), "--kv-events-config", vllmDecode)),
            ),
        ).toEqual([unread]);
        expect(
            await violations(
                [dgdKvRouterEvents],
                dgdEdit((o) => {
                    setArg(mainOf(o, "decode"), "--kv-events-config", vllmDecode);
                    setEnv(mainOf(o, "Frontend"), "DYN_ROUTER_CONDITIONAL_DISAGG", "true");
                }),
            ),
        ).toEqual([]);
    });
    it("kv-only flags in round-robin mode, and --enforce-disagg", async () => {
        const rs = dgdEdit((o) => {
            const f = mainOf(o, "Frontend");
            setArg(f, "--router-mode", "round-robin");
            setEnv(f, "DYN_ROUTER_MODE", "round-robin");
            f.args.push("--router-conditional-disagg", "--enforce-disagg");
        });
        expect(await violations([dgdKvRouterEvents], rs)).toEqual([
            `${FE}: --enforce-disagg is deprecated and ignored: routing topology and readiness come from the registered worker types. Fix: remove it.`,
            `${FE}: --router-conditional-disagg requires --router-mode kv but the router mode is round-robin. Fix: set --router-mode kv or remove the flag.`,
        ]);
    });
    it("every kv-only flag of upstream/dynamo.ts outside kv mode, the upstream default excepted; the upstream rule agrees", async () => {
        const kvOnly = Object.entries(dynamoFrontendKvOnlyFlags);
        expect(kvOnly.map(([f]) => f)).toEqual(
            expect.arrayContaining([
                "--router-conditional-disagg",
                "--serve-indexer",
                "--router-prefill-load-model",
                "--shared-cache-type",
            ]),
        );
        const rr = (args: string[]) =>
            dgdEdit((o) => {
                const f = mainOf(o, "Frontend");
                setArg(f, "--router-mode", "round-robin");
                setEnv(f, "DYN_ROUTER_MODE", "round-robin");
                f.args.push(...args);
            });
        for (const [flag, fact] of kvOnly) {
            const value = fact.unless === undefined ? [] : [flag === "--shared-cache-type" ? "hicache" : "aic"];
            expect(await violations([dgdKvRouterEvents], rr([flag, ...value])), flag).toEqual([
                `${FE}: ${flag} requires --router-mode kv but the router mode is round-robin. Fix: set --router-mode kv or remove the flag.`,
            ]);
            const rule = refusedCombinations.find((r) => r.id === "dynamo-frontend-kv-only-flags")!;
            const view = { entrypoint: "dynamo.frontend", flags: { [flag]: value[0] ?? true }, env: {}, files: {} };
            expect(rule.check(view)?.key, flag).toBe(flag);
            if (fact.unless !== undefined) {
                expect(await violations([dgdKvRouterEvents], rr([flag, fact.unless])), `${flag} ${fact.unless}`).toEqual([]);
                expect(rule.check({ ...view, flags: { [flag]: fact.unless } }), flag).toBeUndefined();
            }
        }
    });
    it("router mode from DYN_ROUTER_MODE alone counts as kv (TRT-LLM worker without --publish-kv-events)", async () => {
        const rs = dgdEdit(
            (o) => {
                setArg(mainOf(o, "Frontend"), "--router-mode", undefined);
                const d = mainOf(o, "prefill");
                d.args = d.args.filter((a: string) => a !== "--publish-kv-events");
            },
            stack([endpoint({ engine: "trtllm", kvPool: { kind: "none" } })]),
        );
        expect(await violations([dgdKvRouterEvents], rs)).toEqual([
            `${L} container prefill/main field spec.components[2].podTemplate.spec.containers[0].args: the frontend routes on KV events but this prefill worker publishes none, so the router sees no cache state. Fix: pass --publish-kv-events.`,
        ]);
    });
});

describe("dgd-role-images", () => {
    it("compliant", async () => {
        expect(await violations([dgdRoleImages], stack())).toEqual([]);
    });
    it("ai-dynamo/dynamo PR #8407: planner on the backend image; workload-map PR #144: frontend on the planner image", async () => {
        const rs = dgdEdit((o) => {
            mainOf(o, "Planner").image = `${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version}`;
            mainOf(o, "Frontend").image = `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`;
        });
        expect(await violations([dgdRoleImages], rs)).toEqual([
            `${L} container Frontend/main field spec.components[0].podTemplate.spec.containers[0].image: frontend component runs the planner image ${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}. Fix: use the engine runtime image.`,
            `${L} container Planner/main field spec.components[1].podTemplate.spec.containers[0].image: planner runs ${versions.dynamoRuntime.vllm.image}:${versions.dynamoRuntime.vllm.version}, not the dynamo-planner image. Fix: use the dynamo-planner image of the Dynamo release (config/versions.ts \`dynamoPlanner\`).`,
        ]);
    });
});

describe("dgd-planner-scaling", () => {
    it("compliant: workers opted in, load target, min_endpoint 1", async () => {
        expect(await violations([dgdPlannerScaling], stack())).toEqual([]);
        expect(await violations([dgdPlannerScaling], v1alpha1Stack())).toEqual([]);
    });
    it("ai-dynamo/dynamo #13538: a worker without the scaling adapter; a GPU-utilisation target; min_endpoint 0", async () => {
        const rs = dgdEdit((o) => {
            delete o.spec.components[3].scalingAdapter;
            const p = mainOf(o, "Planner");
            const cfg = JSON.parse(p.args[1]);
            cfg.optimization_target = "gpu_utilization";
            cfg.min_endpoint = 0;
            p.args[1] = JSON.stringify(cfg);
        });
        expect(await violations([dgdPlannerScaling], rs)).toEqual([
            `${L} container decode/main field spec.components[3].scalingAdapter: does not opt into the scaling adapter, so the Planner patches the DGD directly (ai-dynamo/dynamo #13538). Fix: add scalingAdapter: {}.`,
            `${L} container Planner/main field spec.components[1].podTemplate.spec.containers[0].args[--config].optimization_target: optimization_target gpu_utilization is not a queue/KV-utilisation target (throughput, latency, load, sla); scaling on GPU busy was measured at TTFT p95 44.5 s. Fix: use optimization_target load with KV-cache and queue thresholds.`,
            `${L} container Planner/main field spec.components[1].podTemplate.spec.containers[0].args[--config].min_endpoint: min_endpoint 0 lets the planner scale a role to zero, removing the model. Fix: set min_endpoint to at least 1.`,
        ]);
    });
    it("a podTemplate DYN_FORWARDPASS_METRIC_PORT on a planned worker (it switches the forward-pass metrics load scaling reads)", async () => {
        const rs = dgdEdit((o) => setEnv(mainOf(o, "decode"), "DYN_FORWARDPASS_METRIC_PORT", ""));
        expect(await violations([dgdPlannerScaling], rs)).toEqual([
            `${L} container decode/main field spec.components[3].podTemplate.spec.containers[0].env.DYN_FORWARDPASS_METRIC_PORT: sets DYN_FORWARDPASS_METRIC_PORT, replacing the operator's 20380: it switches the forward-pass metrics the Planner's load scaling reads (empty: none, and the Planner silently stops scaling this role). Fix: remove DYN_FORWARDPASS_METRIC_PORT from the podTemplate and leave it to the operator.`,
        ]);
        // Without a Planner nothing reads the metrics: no finding.
        const noPlanner = dgdEdit((o) => {
            setEnv(mainOf(o, "decode"), "DYN_FORWARDPASS_METRIC_PORT", "");
            o.spec.components = o.spec.components.filter((c: any) => (c.componentType ?? c.type) !== "planner");
        });
        expect(await violations([dgdPlannerScaling], noPlanner)).toEqual([]);
    });
    it("v1alpha1: scalingAdapter {} is disabled, and autoscaling is ignored", async () => {
        const rs = v1alpha1Stack((o) => {
            o.spec.services.prefill.scalingAdapter = {};
            o.spec.services.decode.autoscaling = { enabled: true, minReplicas: 1, maxReplicas: 4 };
        });
        expect(await violations([dgdPlannerScaling], rs)).toEqual([
            `${L} container decode/main field spec.services.decode.autoscaling: autoscaling is deprecated and ignored by the operator, so nothing scales this component. Fix: use the Planner with the scaling adapter.`,
            `${L} container prefill/main field spec.services.prefill.scalingAdapter: scalingAdapter is present but not enabled (in v1alpha1 {} means disabled). Fix: set scalingAdapter.enabled: true.`,
        ]);
    });
});

describe("dgd-cel-rules", () => {
    it("compliant", async () => {
        expect(await violations([dgdCelRules], stack())).toEqual([]);
    });
    it("restart on create, case-insensitive duplicate names, minAvailable > replicas, eppConfig on a worker, two epps", async () => {
        const rs = dgdEdit((o) => {
            o.spec.restart = { id: "1" };
            o.spec.components[3].name = "Prefill";
            o.spec.components[2].minAvailable = 3;
            o.spec.components[2].eppConfig = {};
            o.spec.components.push({ name: "epp-a", type: "epp" }, { name: "epp-b", type: "epp" });
        });
        expect(await violations([dgdCelRules], rs)).toEqual([
            `${L} field spec.restart: must be unset on create. Fix: remove spec.restart; set spec.restart.id only after creation to request a restart.`,
            `${L} field spec.components[2].eppConfig: eppConfig is only allowed when type is epp. Fix: remove eppConfig.`,
            `${L} field spec.components[2].minAvailable: minAvailable 3 exceeds replicas 2. Fix: lower minAvailable to at most replicas.`,
            `${L} field spec.components[3].name: component name Prefill collides with prefill (names are unique case-insensitively). Fix: rename one of them.`,
            `${L} field spec.components[5].type: 2 components have type epp; at most one may. Fix: keep a single epp component.`,
        ]);
    });
});

describe("dgd-multinode-orchestrator", () => {
    it("multinode without Grove, then with Grove enabled in the platform release", async () => {
        const rs = dgdEdit((o) => {
            o.spec.components[3].multinode = { nodeCount: 2 };
        });
        expect(await violations([dgdMultinodeOrchestrator], rs)).toEqual([
            `${L} container decode/main field spec.components[3].multinode: is multinode but the stack installs neither Grove nor LWS. Fix: enable Grove in the dynamo-platform release (platform:serving.grove: true) or install LWS.`,
        ]);
        const grove = rs.map((r) =>
            (r.inputs as any).chart === "dynamo-platform"
                ? { ...r, outputs: { ...r.outputs, values: { global: { grove: { install: true, enabled: true } } } } }
                : r,
        );
        expect(await violations([dgdMultinodeOrchestrator], grove)).toEqual([]);
    });
});
