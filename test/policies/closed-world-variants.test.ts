/**
 * Closed-world variants found by a red-team review, run through the real pack (allPolicies): each unsafe variant of a
 * rendered spoke (normal and preview render) or of the KV fixture stack must add a mandatory finding, each safe variant
 * (same meaning as the rendered value, per the pinned upstream parser) must add none.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { allPolicies } from "../../policies/policies";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { mountedFiles } from "../../upstream/check/objects";
import { runHubAndSpoke } from "../helpers";
import { edit, endpoint, k8s, mainOf, setEnv, stack } from "./rdma-fixtures";

const SPOKE = "spoke-hn1";
const verdict = async (rs: CapturedResource[]) =>
    (await runPolicies(allPolicies, rs)).mandatory.map((f) => `${f.policyName}: ${f.message}`);
const kindOf = (r: CapturedResource) => r.type.split(":").pop();
/** Apply `fn` to inputs and outputs of every object of `kind` (the runner reads outputs; keep them equal). */
function each(rs: CapturedResource[], kind: string, fn: (o: any) => void): CapturedResource[] {
    const hit = rs.filter((r) => kindOf(r) === kind);
    if (!hit.length) throw new Error(`no ${kind} rendered`);
    for (const r of hit) for (const b of [r.inputs as any, r.outputs as any]) fn(b);
    return rs;
}
const frontendPolicy = (rs: CapturedResource[]) =>
    rs.map((r) => r.outputs as any).find((o) => o?.kind === "NetworkPolicy" && o.metadata?.namespace === "inference");

type V = { id: string; expect: "block" | "pass"; fn: (rs: CapturedResource[]) => CapturedResource[] };

const gatewayVariants: V[] = [
    {
        id: "AIGatewayRoute rule with a second match on x-tenant",
        expect: "block",
        fn: (rs) =>
            each(rs, "AIGatewayRoute", (o) => {
                o.spec.rules[0].matches = [...o.spec.rules[0].matches, { headers: [{ name: "x-tenant", type: "Exact", value: "acme" }] }];
            }),
    },
    {
        id: "AIGatewayRoute rule match with an extra header",
        expect: "block",
        fn: (rs) =>
            each(rs, "AIGatewayRoute", (o) => {
                o.spec.rules[0].matches[0].headers.push({ name: "x-debug", type: "Exact", value: "1" });
            }),
    },
    {
        id: "NetworkPolicy opening all ingress to the Dynamo frontend",
        expect: "block",
        fn: (rs) => {
            const np = frontendPolicy(rs);
            return [
                ...rs,
                k8s({
                    apiVersion: "networking.k8s.io/v1",
                    kind: "NetworkPolicy",
                    metadata: { name: "debug-open", namespace: np.metadata.namespace },
                    spec: { podSelector: structuredClone(np.spec.podSelector), policyTypes: ["Ingress"], ingress: [{}] },
                }),
            ];
        },
    },
    {
        id: "Service of type LoadBalancer selecting the Dynamo frontend",
        expect: "block",
        fn: (rs) => {
            const np = frontendPolicy(rs);
            return [
                ...rs,
                k8s({
                    apiVersion: "v1",
                    kind: "Service",
                    metadata: { name: "frontend-lb", namespace: np.metadata.namespace },
                    spec: { type: "LoadBalancer", selector: structuredClone(np.spec.podSelector.matchLabels), ports: [{ port: 8000 }] },
                }),
            ];
        },
    },
    {
        id: "NodePort Service named like a Dynamo frontend in another namespace",
        expect: "block",
        fn: (rs) => [
            ...rs,
            k8s({
                apiVersion: "v1",
                kind: "Service",
                metadata: { name: "llama-70b-frontend", namespace: "debug" },
                spec: { type: "NodePort", selector: { app: "anything" }, ports: [{ port: 8000 }] },
            }),
        ],
    },
    {
        id: "NetworkPolicy admitting an ipBlock to the Dynamo workers",
        expect: "block",
        fn: (rs) => [
            ...rs,
            k8s({
                apiVersion: "networking.k8s.io/v1",
                kind: "NetworkPolicy",
                metadata: { name: "workers-from-lab", namespace: "inference" },
                spec: {
                    podSelector: { matchLabels: { "nvidia.com/dynamo-component-type": "worker" } },
                    ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" } }] }],
                },
            }),
        ],
    },
    {
        id: "deny-all NetworkPolicy in the inference namespace (only restricts)",
        expect: "pass",
        fn: (rs) => [
            ...rs,
            k8s({
                apiVersion: "networking.k8s.io/v1",
                kind: "NetworkPolicy",
                metadata: { name: "deny-all", namespace: "inference" },
                spec: { podSelector: {}, policyTypes: ["Ingress"] },
            }),
        ],
    },
    {
        id: "ExternalName Service in the inference namespace",
        expect: "block",
        fn: (rs) => [
            ...rs,
            k8s({
                apiVersion: "v1",
                kind: "Service",
                metadata: { name: "shadow", namespace: "inference" },
                spec: { type: "ExternalName", externalName: "llm-proxy.example.com" },
            }),
        ],
    },
    {
        id: "rendered DGD graph-wide spec.env UCX_IB_GPU_DIRECT_RDMA=no",
        expect: "block",
        fn: (rs) =>
            each(rs, "DynamoGraphDeployment", (o) => {
                o.spec.env = [{ name: "UCX_IB_GPU_DIRECT_RDMA", value: "no" }];
            }),
    },
    {
        id: "ClientTrafficPolicy trusting 5 X-Forwarded-For hops",
        expect: "block",
        fn: (rs) =>
            each(rs, "ClientTrafficPolicy", (o) => {
                o.spec.clientIPDetection = { xForwardedFor: { numTrustedHops: 5 } };
            }),
    },
    {
        id: "ClientTrafficPolicy taking the client address from a custom header",
        expect: "block",
        fn: (rs) =>
            each(rs, "ClientTrafficPolicy", (o) => {
                o.spec.clientIPDetection = { customHeader: { name: "x-real-ip", failClosed: false } };
            }),
    },
    {
        id: "EnvoyProxy envoyService type NodePort",
        expect: "block",
        fn: (rs) =>
            each(rs, "EnvoyProxy", (o) => {
                const k = o.spec.provider.kubernetes ?? {};
                o.spec.provider.kubernetes = { ...k, envoyService: { ...(k.envoyService ?? {}), type: "NodePort" } };
            }),
    },
    {
        id: "EnvoyProxy proxy pod on the host network",
        expect: "block",
        fn: (rs) =>
            each(rs, "EnvoyProxy", (o) => {
                const k = o.spec.provider.kubernetes ?? {};
                o.spec.provider.kubernetes = { ...k, envoyDeployment: { ...(k.envoyDeployment ?? {}), pod: { hostNetwork: true } } };
            }),
    },
    {
        id: "EnvoyProxy proxy pod with a node selector (placement only)",
        expect: "pass",
        fn: (rs) =>
            each(rs, "EnvoyProxy", (o) => {
                const k = o.spec.provider.kubernetes ?? {};
                o.spec.provider.kubernetes = {
                    ...k,
                    envoyDeployment: { ...(k.envoyDeployment ?? {}), pod: { nodeSelector: { "node-role": "system" } } },
                };
            }),
    },
    {
        id: "EnvoyProxy envoyService type LoadBalancer (the default, spelled out)",
        expect: "pass",
        fn: (rs) =>
            each(rs, "EnvoyProxy", (o) => {
                const k = o.spec.provider.kubernetes ?? {};
                o.spec.provider.kubernetes = { ...k, envoyService: { ...(k.envoyService ?? {}), type: "LoadBalancer" } };
            }),
    },
    {
        id: "Backend pointing at an external host",
        expect: "block",
        fn: (rs) =>
            each(rs, "Backend", (o) => {
                o.spec.endpoints[0].fqdn.hostname = "llm-proxy.example.com";
            }),
    },
    {
        id: "Backend pointing at another namespace's Service",
        expect: "block",
        fn: (rs) =>
            each(rs, "Backend", (o) => {
                o.spec.endpoints[0].fqdn.hostname = o.spec.endpoints[0].fqdn.hostname.replace(/\.([a-z0-9-]+)\.svc/, ".sandbox.svc");
            }),
    },
    {
        id: "Backend pointing at the short cluster DNS name of its frontend",
        expect: "pass",
        fn: (rs) =>
            each(rs, "Backend", (o) => {
                o.spec.endpoints[0].fqdn.hostname = o.spec.endpoints[0].fqdn.hostname.replace(/\.cluster\.local$/, "");
            }),
    },
    {
        id: "ExternalName Service outside the model namespaces",
        expect: "block",
        fn: (rs) => [
            ...rs,
            k8s({
                apiVersion: "v1",
                kind: "Service",
                metadata: { name: "auth-shadow", namespace: "platform-system" },
                spec: { type: "ExternalName", externalName: "llm-proxy.example.com" },
            }),
        ],
    },
    {
        id: "ReferenceGrant from a tenant namespace to every Backend",
        expect: "block",
        fn: (rs) => [
            ...rs,
            k8s({
                apiVersion: "gateway.networking.k8s.io/v1beta1",
                kind: "ReferenceGrant",
                metadata: { name: "widen", namespace: "llm-gateway" },
                spec: {
                    from: [{ group: "aigateway.envoyproxy.io", kind: "AIGatewayRoute", namespace: "tenant-x" }],
                    to: [{ group: "gateway.envoyproxy.io", kind: "Backend" }],
                },
            }),
        ],
    },
];

const dgd = (fn: (o: any) => void, rs = stack()) => edit(rs, "DynamoGraphDeployment", fn);
const both = (fn: (m: any) => void, rs = stack()) =>
    dgd((o) => {
        fn(mainOf(o, "prefill"));
        fn(mainOf(o, "decode"));
    }, rs);
const configMap = (name: string, data: Record<string, string>) =>
    k8s({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "inference" }, data });
const envFrom = (ref: Record<string, unknown>) => (m: any) => {
    m.envFrom = [...(m.envFrom ?? []), ref];
};

/** Edit the Mooncake store service container(s) and their pod spec. */
const store = (rs: CapturedResource[], fn: (c: any, spec: any) => void) =>
    edit(rs, "Deployment", (o) => {
        for (const c of o.spec.template.spec.containers)
            if (JSON.stringify(c.command ?? []).includes("mooncake_store_service")) fn(c, o.spec.template.spec);
    });

/** The TRT-LLM fixture stack, with `--override-engine-args` of prefill and decode edited. */
const trtllm = (f?: (j: any) => void) =>
    both(
        (m) => {
            const i = m.args.indexOf("--override-engine-args");
            if (i < 0) throw new Error("no --override-engine-args rendered");
            const j = JSON.parse(m.args[i + 1]);
            f?.(j);
            m.args[i + 1] = JSON.stringify(j);
        },
        stack([endpoint({ engine: "trtllm", kvPool: { kind: "none" } })]),
    );

/** Edit the parsed `--kv-transfer-config` of one side. */
const kvt = (o: any, side: string, f: (k: any) => void) => {
    const m = mainOf(o, side);
    const i = m.args.indexOf("--kv-transfer-config");
    const k = JSON.parse(m.args[i + 1]);
    f(k);
    m.args[i + 1] = JSON.stringify(k);
};

const sglang = () => stack([endpoint({ engine: "sglang" })]);
/** The rail HCAs of the SGLang fixture (its HiCache Mooncake `device_name`), as a comma list. */
const railHcas = (m: any) => {
    const i = m.args.indexOf("--hicache-storage-backend-extra-config");
    return i < 0 ? "" : String(JSON.parse(m.args[i + 1]).device_name ?? "");
};

const kvVariants: V[] = [
    { id: "baseline", expect: "pass", fn: (rs) => rs },
    {
        id: "SGLang --disaggregation-ib-device with the rail HCAs",
        expect: "pass",
        fn: () =>
            both((m) => {
                if (!railHcas(m)) throw new Error("no HiCache device_name rendered");
                m.args.push("--disaggregation-ib-device", railHcas(m));
            }, sglang()),
    },
    {
        id: "SGLang --disaggregation-ib-device with a frontend NIC",
        expect: "block",
        fn: () => both((m) => m.args.push("--disaggregation-ib-device", "eth0"), sglang()),
    },
    {
        id: "pair: --dtype half on prefill, float16 on decode (one torch dtype)",
        expect: "pass",
        fn: (rs) =>
            dgd((o) => {
                mainOf(o, "prefill").args.push("--dtype", "half");
                mainOf(o, "decode").args.push("--dtype", "float16");
            }, rs),
    },
    {
        id: "pair: --dtype half on prefill, float32 on decode",
        expect: "block",
        fn: (rs) =>
            dgd((o) => {
                mainOf(o, "prefill").args.push("--dtype", "half");
                mainOf(o, "decode").args.push("--dtype", "float32");
            }, rs),
    },
    {
        id: "pair: prefill NIXL backends omitted (default [UCX]) vs decode explicit",
        expect: "pass",
        fn: (rs) => dgd((o) => kvt(o, "prefill", (k) => delete k.kv_connector_extra_config.connectors[0].kv_connector_extra_config), rs),
    },
    {
        id: "pair: decode kv_buffer_device omitted (default cuda) vs prefill cuda",
        expect: "pass",
        fn: (rs) => dgd((o) => kvt(o, "decode", (k) => delete k.kv_connector_extra_config.connectors[0].kv_buffer_device), rs),
    },
    {
        id: "pair: decode kv_load_failure_policy differs inside the JSON",
        expect: "block",
        fn: (rs) =>
            dgd(
                (o) =>
                    kvt(o, "decode", (k) =>
                        Object.assign(k.kv_connector_extra_config.connectors[0], { kv_load_failure_policy: "recompute" }),
                    ),
                rs,
            ),
    },
    // UCX reads bool/ternary/enum values case-insensitively (openucx/ucx@v1.21.0:src/ucs/config/parser.c).
    { id: "UCX_IB_GPU_DIRECT_RDMA=YES", expect: "pass", fn: (rs) => both((m) => setEnv(m, "UCX_IB_GPU_DIRECT_RDMA", "YES"), rs) },
    { id: "UCX_IB_GPU_DIRECT_RDMA=Y", expect: "pass", fn: (rs) => both((m) => setEnv(m, "UCX_IB_GPU_DIRECT_RDMA", "Y"), rs) },
    { id: "UCX_RNDV_SCHEME=GET_ZCOPY", expect: "pass", fn: (rs) => both((m) => setEnv(m, "UCX_RNDV_SCHEME", "GET_ZCOPY"), rs) },
    { id: "UCX_IB_GPU_DIRECT_RDMA=NO", expect: "block", fn: (rs) => both((m) => setEnv(m, "UCX_IB_GPU_DIRECT_RDMA", "NO"), rs) },
    {
        id: "UCX_IB_GPU_DIRECT_RDMA=on (UCX reads yes; refused: the fact keeps to case-free spellings)",
        expect: "block",
        fn: (rs) => both((m) => setEnv(m, "UCX_IB_GPU_DIRECT_RDMA", "on"), rs),
    },
    // InfiniBand addressing: only what forces global (GRH) addressing at openucx/ucx@v1.21.0 (src/uct/ib/base/ib_iface.c:
    // IS_GLOBAL true, or the deprecated ADDR_TYPE ib_global / ib_site_local); bool spellings of ucs_config_sscanf_bool.
    { id: "UCX_IB_IS_GLOBAL=YES", expect: "pass", fn: (rs) => both((m) => setEnv(m, "UCX_IB_IS_GLOBAL", "YES"), rs) },
    { id: "UCX_IB_IS_GLOBAL=on", expect: "pass", fn: (rs) => both((m) => setEnv(m, "UCX_IB_IS_GLOBAL", "on"), rs) },
    { id: "UCX_IB_IS_GLOBAL=n (LID-only)", expect: "block", fn: (rs) => both((m) => setEnv(m, "UCX_IB_IS_GLOBAL", "n"), rs) },
    {
        id: "UCX_IB_IS_GLOBAL=ON (on is matched exactly, UCX refuses it)",
        expect: "block",
        fn: (rs) => both((m) => setEnv(m, "UCX_IB_IS_GLOBAL", "ON"), rs),
    },
    { id: "UCX_IB_IS_GLOBAL=true (not a UCX bool)", expect: "block", fn: (rs) => both((m) => setEnv(m, "UCX_IB_IS_GLOBAL", "true"), rs) },
    {
        id: "deprecated UCX_IB_ADDR_TYPE=ib_global instead of UCX_IB_IS_GLOBAL",
        expect: "pass",
        fn: (rs) =>
            both((m) => {
                setEnv(m, "UCX_IB_IS_GLOBAL", undefined);
                setEnv(m, "UCX_IB_ADDR_TYPE", "ib_global");
            }, rs),
    },
    {
        id: "deprecated UCX_IB_ADDR_TYPE=IB_SITE_LOCAL (forces global too; enum read case-insensitively)",
        expect: "pass",
        fn: (rs) =>
            both((m) => {
                setEnv(m, "UCX_IB_IS_GLOBAL", undefined);
                setEnv(m, "UCX_IB_ADDR_TYPE", "IB_SITE_LOCAL");
            }, rs),
    },
    {
        id: "UCX_IB_ADDR_TYPE=eth instead of UCX_IB_IS_GLOBAL (inert on InfiniBand)",
        expect: "block",
        fn: (rs) =>
            both((m) => {
                setEnv(m, "UCX_IB_IS_GLOBAL", undefined);
                setEnv(m, "UCX_IB_ADDR_TYPE", "eth");
            }, rs),
    },
    {
        id: "UCX_IB_ADDR_TYPE=auto beside UCX_IB_IS_GLOBAL=y",
        expect: "block",
        fn: (rs) => both((m) => setEnv(m, "UCX_IB_ADDR_TYPE", "auto"), rs),
    },
    {
        id: "UCX_IB_ADDR_TYPE=ib_local beside UCX_IB_IS_GLOBAL=y",
        expect: "block",
        fn: (rs) => both((m) => setEnv(m, "UCX_IB_ADDR_TYPE", "ib_local"), rs),
    },
    { id: "TRT-LLM baseline (rendered --override-engine-args)", expect: "pass", fn: () => trtllm() },
    {
        id: "TRT-LLM --override-engine-args cache_transceiver_config.backend MPI",
        expect: "block",
        fn: () =>
            trtllm((j) => {
                j.cache_transceiver_config = { backend: "MPI" };
            }),
    },
    {
        id: "TRT-LLM --override-engine-args kv_cache_config.host_cache_size (KV offload to host)",
        expect: "block",
        fn: () =>
            trtllm((j) => {
                j.kv_cache_config = { ...j.kv_cache_config, host_cache_size: 68719476736 };
            }),
    },
    {
        id: "TRT-LLM --override-engine-args backend UCX (the transceiver's UCX path)",
        expect: "pass",
        fn: () =>
            trtllm((j) => {
                j.cache_transceiver_config = { backend: "UCX" };
            }),
    },
    {
        id: "TRT-LLM --extra-engine-args file (unread)",
        expect: "block",
        fn: () =>
            both(
                (m) => m.args.push("--extra-engine-args", "/etc/trt/extra.yaml"),
                stack([endpoint({ engine: "trtllm", kvPool: { kind: "none" } })]),
            ),
    },
    { id: "Mooncake store --define protocol=tcp", expect: "block", fn: (rs) => store(rs, (c) => c.args.push("--define", "protocol=tcp")) },
    { id: "Mooncake store --define=protocol=tcp", expect: "block", fn: (rs) => store(rs, (c) => c.args.push("--define=protocol=tcp")) },
    { id: "Mooncake store -D device_name=eth0", expect: "block", fn: (rs) => store(rs, (c) => c.args.push("-D", "device_name=eth0")) },
    {
        id: "Mooncake store -D device_name restating MOONCAKE_DEVICE",
        expect: "pass",
        fn: (rs) => store(rs, (c) => c.args.push("-D", `device_name=${c.env.find((e: any) => e.name === "MOONCAKE_DEVICE").value}`)),
    },
    {
        id: "Mooncake store --def protocol=tcp (argparse prefix)",
        expect: "block",
        fn: (rs) => store(rs, (c) => c.args.push("--def", "protocol=tcp")),
    },
    {
        id: "Mooncake store --define protocol=rdma (known safe)",
        expect: "pass",
        fn: (rs) => store(rs, (c) => c.args.push("--define", "protocol=rdma")),
    },
    {
        id: "Mooncake store --config file with protocol tcp",
        expect: "block",
        fn: (rs) => [
            ...store(rs, (c, spec) => {
                c.args.push("--config", "/etc/mc/store.json");
                spec.volumes = [...(spec.volumes ?? []), { name: "mc", configMap: { name: "mcstore" } }];
                c.volumeMounts = [...(c.volumeMounts ?? []), { name: "mc", mountPath: "/etc/mc" }];
            }),
            configMap("mcstore", { "store.json": '{"protocol":"tcp","device_name":""}' }),
        ],
    },
    {
        id: "mooncake.json ConfigMap volume listing its key in items (same file)",
        expect: "pass",
        fn: (rs) =>
            dgd((o) => {
                for (const c of o.spec.components)
                    for (const v of c.podTemplate.spec.volumes ?? [])
                        if (v.name === "mooncake-config") v.configMap.items = [{ key: "mooncake.json", path: "mooncake.json" }];
            }, rs),
    },
    {
        id: "mooncake.json mounted by subPath from a key with protocol tcp",
        expect: "block",
        fn: (rs) =>
            edit(
                dgd((o) => {
                    for (const n of ["prefill", "decode"])
                        for (const vm of mainOf(o, n).volumeMounts ?? [])
                            if (vm.name === "mooncake-config") {
                                vm.mountPath = "/etc/mooncake/mooncake.json";
                                vm.subPath = "evil";
                            }
                }, rs),
                "ConfigMap",
                (c) => {
                    if (c.data?.["mooncake.json"])
                        c.data = {
                            evil: JSON.stringify({ ...JSON.parse(c.data["mooncake.json"]), protocol: "tcp" }),
                            "mooncake.json": c.data["mooncake.json"],
                        };
                },
            ),
    },
    {
        id: "Mooncake store --config file not mounted",
        expect: "block",
        fn: (rs) => store(rs, (c) => c.args.push("--config", "/tmp/x.json")),
    },
    {
        id: "DGD graph-wide spec.env UCX_IB_GPU_DIRECT_RDMA=no",
        expect: "block",
        fn: (rs) =>
            dgd((o) => {
                o.spec.env = [{ name: "UCX_IB_GPU_DIRECT_RDMA", value: "no" }];
            }, rs),
    },
    {
        id: "DGD graph-wide spec.env UCX_TLS=tcp",
        expect: "block",
        fn: (rs) =>
            dgd((o) => {
                o.spec.env = [{ name: "UCX_TLS", value: "tcp" }];
            }, rs),
    },
    {
        id: "envFrom a ConfigMap of the stack setting UCX_IB_GPU_DIRECT_RDMA=no",
        expect: "block",
        fn: (rs) => [...both(envFrom({ configMapRef: { name: "tuning" } }), rs), configMap("tuning", { UCX_IB_GPU_DIRECT_RDMA: "no" })],
    },
    {
        id: "envFrom a ConfigMap with a prefix making UCX_TLS=tcp",
        expect: "block",
        fn: (rs) => [...both(envFrom({ prefix: "UCX_", configMapRef: { name: "tuning" } }), rs), configMap("tuning", { TLS: "tcp" })],
    },
    {
        id: "envFrom a ConfigMap of the stack with known-safe keys only",
        expect: "pass",
        fn: (rs) => [...both(envFrom({ configMapRef: { name: "tuning" } }), rs), configMap("tuning", { HF_HUB_OFFLINE: "1" })],
    },
    { id: "envFrom a Secret (contents unseen)", expect: "block", fn: (rs) => both(envFrom({ secretRef: { name: "tuning" } }), rs) },
    {
        id: "envFrom a ConfigMap not in the stack",
        expect: "block",
        fn: (rs) => both(envFrom({ configMapRef: { name: "kubectl-made" } }), rs),
    },
    {
        id: "native sidecar (initContainer restartPolicy Always) with GPUs and rails, UCX_IB_GPU_DIRECT_RDMA=no",
        expect: "block",
        fn: (rs) =>
            dgd((o) => {
                const c = o.spec.components.find((x: any) => x.name === "prefill");
                const m = structuredClone(mainOf(o, "prefill"));
                m.name = "engine2";
                m.restartPolicy = "Always";
                setEnv(m, "UCX_IB_GPU_DIRECT_RDMA", "no");
                c.podTemplate.spec.initContainers = [...(c.podTemplate.spec.initContainers ?? []), m];
            }, rs),
    },
];

for (const preview of [false, true])
    describe(`closed-world variants on ${SPOKE}${preview ? " (preview)" : ""}`, () => {
        let rendered: CapturedResource[] = [];
        let base: string[] = [];
        beforeAll(async () => {
            rendered = (await runHubAndSpoke(SPOKE, preview)).spoke.resources;
            base = await verdict(rendered);
        }, 120_000);
        it("renders with no mandatory finding", () => expect(base).toEqual([]));
        for (const v of gatewayVariants)
            it(`${v.expect}s: ${v.id}`, async () => {
                const added = (await verdict(v.fn(structuredClone(rendered)))).filter((m) => !base.includes(m));
                if (v.expect === "block") expect(added.length, v.id).toBeGreaterThan(0);
                else expect(added).toEqual([]);
            });
    });

describe("KV closed-world variants on the fixture stack", () => {
    let base: string[] = [];
    beforeAll(async () => {
        base = await verdict(stack());
    });
    for (const v of kvVariants)
        it(`${v.expect}s: ${v.id}`, async () => {
            const added = (await verdict(v.fn(stack()))).filter((m) => !base.includes(m));
            if (v.expect === "block") expect(added.length, v.id).toBeGreaterThan(0);
            else expect(added).toEqual([]);
        });
});

describe("mounted ConfigMap files follow items and subPath", () => {
    const cms = new Map([
        ["inference/mc", { kind: "ConfigMap", data: { evil: '{"protocol":"tcp"}', "mooncake.json": '{"protocol":"rdma"}' } }],
    ]);
    const spec = (items?: unknown) => ({ volumes: [{ name: "v", configMap: { name: "mc", ...(items ? { items } : {}) } }] });
    it("items remap a key to another path, and only listed keys appear", () => {
        const c = { volumeMounts: [{ name: "v", mountPath: "/etc/mooncake" }] };
        expect(mountedFiles(c, spec([{ key: "evil", path: "mooncake.json" }]), cms, "inference")).toEqual({
            "/etc/mooncake/mooncake.json": '{"protocol":"tcp"}',
        });
    });
    it("subPath mounts exactly the named key at mountPath", () => {
        const c = { volumeMounts: [{ name: "v", mountPath: "/etc/mooncake/mooncake.json", subPath: "evil" }] };
        expect(mountedFiles(c, spec(), cms, "inference")).toEqual({ "/etc/mooncake/mooncake.json": '{"protocol":"tcp"}' });
    });
    it("subPath follows an items path", () => {
        const c = { volumeMounts: [{ name: "v", mountPath: "/etc/mc.json", subPath: "cfg/store.json" }] };
        expect(mountedFiles(c, spec([{ key: "evil", path: "cfg/store.json" }]), cms, "inference")).toEqual({
            "/etc/mc.json": '{"protocol":"tcp"}',
        });
    });
});
