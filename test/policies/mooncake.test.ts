import { describe, expect, it } from "vitest";
import {
    k8sBytes,
    mooncakeBytes,
    mooncakeDevicesRailHcas,
    mooncakePolicies,
    mooncakeProtocolRdma,
    mooncakeSegmentFitsMemory,
} from "../../policies/mooncake";
import { edit, endpoint, k8s, mainOf, setArg, setEnv, setMooncakeProtocol, stack, violations } from "./rdma-fixtures";

const STORE = "Deployment/llama-70b-mooncake-store container store field spec.template.spec.containers[0]";
const P = "DynamoGraphDeployment/llama-70b container prefill/main field spec.components[2].podTemplate.spec.containers[0]";
const store = (fn: (c: Record<string, any>) => void) =>
    edit(stack(), "Deployment", (o) => fn(o.spec.template.spec.containers[0]), "llama-70b-mooncake-store");

describe("Mooncake policies on the generated pools", () => {
    it("vLLM (store connector) and SGLang (HiCache) graphs and their stores pass", async () => {
        expect(await violations(mooncakePolicies, stack())).toEqual([]);
        expect(await violations(mooncakePolicies, stack([endpoint({ engine: "sglang" })]))).toEqual([]);
    });
    it("the Mooncake master (no data path) is not a Mooncake RDMA user", async () => {
        const rs = stack().filter((r) => (r.inputs as any).metadata?.name === "llama-70b-mooncake-master");
        expect(await violations(mooncakePolicies, rs)).toEqual([]);
    });
});

describe("mooncake-protocol-rdma", () => {
    it("protocol unset on a store: Mooncake's default is tcp", async () => {
        expect(
            await violations(
                [mooncakeProtocolRdma],
                store((c) => setEnv(c, "MOONCAKE_PROTOCOL", undefined)),
            ),
        ).toEqual([
            `${STORE}.env[MOONCAKE_PROTOCOL]: sets no Mooncake protocol, so Mooncake uses its default, tcp. Fix: set MOONCAKE_PROTOCOL=rdma.`,
        ]);
    });
    it("tcp in the MOONCAKE_CONFIG_PATH JSON of a vLLM worker (read through the mounted ConfigMap)", async () => {
        const rs = setMooncakeProtocol(stack(), "tcp");
        const msgs = await violations([mooncakeProtocolRdma], rs);
        expect(msgs[0]).toBe(
            `${P.replace(" field spec.components[2].podTemplate.spec.containers[0]", "")} field ConfigMap llama-70b-mooncake-client key mooncake.json (MOONCAKE_CONFIG_PATH).protocol: Mooncake protocol is "tcp", not rdma or efa. Fix: set it to rdma (efa on EFA).`,
        );
        expect(msgs).toHaveLength(2);
    });
    it("tcp in SGLang's HiCache extra config, SGLANG_MOONCAKE_PROTOCOL=tcp and MC_FORCE_TCP=1", async () => {
        const rs = edit(stack([endpoint({ engine: "sglang" })]), "DynamoGraphDeployment", (o) => {
            const m = mainOf(o, "prefill");
            const i = m.args.indexOf("--hicache-storage-backend-extra-config");
            const j = JSON.parse(m.args[i + 1]);
            j.protocol = "tcp";
            m.args[i + 1] = JSON.stringify(j);
            setEnv(m, "SGLANG_MOONCAKE_PROTOCOL", "tcp");
            setEnv(m, "MC_FORCE_TCP", "true");
        });
        expect(await violations([mooncakeProtocolRdma], rs)).toEqual([
            `${P}.env[SGLANG_MOONCAKE_PROTOCOL]: Mooncake protocol is "tcp", not rdma or efa. Fix: set it to rdma (efa on EFA).`,
            `${P}.args[--hicache-storage-backend-extra-config].protocol: Mooncake protocol is "tcp", not rdma or efa. Fix: set it to rdma (efa on EFA).`,
            `${P}.env[MC_FORCE_TCP]: MC_FORCE_TCP=true forces the TCP transport. Fix: remove MC_FORCE_TCP.`,
        ]);
    });
});

describe("mooncake-devices-rail-hcas", () => {
    const fix = "Fix: set MOONCAKE_DEVICE=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11.";
    it("no device list (vllm-project/vllm PR #44919: auto-discovery picks unusable HCAs)", async () => {
        expect(
            await violations(
                [mooncakeDevicesRailHcas],
                store((c) => setEnv(c, "MOONCAKE_DEVICE", undefined)),
            ),
        ).toEqual([
            `${STORE}.env[MOONCAKE_DEVICE]: lists no Mooncake RDMA device, so Mooncake auto-discovers every HCA, including unusable or non-routable ones. ${fix}`,
        ]);
    });
    it("auto-discovery, a frontend NIC and a storage HCA", async () => {
        expect(
            await violations(
                [mooncakeDevicesRailHcas],
                store((c) => setEnv(c, "MOONCAKE_DEVICE", "auto-discovery")),
            ),
        ).toEqual([`${STORE}.env[MOONCAKE_DEVICE]: uses auto-discovery instead of the rail HCAs. ${fix}`]);
        expect(
            await violations(
                [mooncakeDevicesRailHcas],
                store((c) => setEnv(c, "MOONCAKE_DEVICE", "mlx5_0,mlx5_7,mlx5_8")),
            ),
        ).toEqual([
            `${STORE}.env[MOONCAKE_DEVICE]: mlx5_7 is a frontend (north-south) NIC of pool h200. ${fix}`,
            `${STORE}.env[MOONCAKE_DEVICE]: mlx5_8 is not a rail HCA of pool h200. ${fix}`,
        ]);
    });
    it("SGLang PD over Mooncake with --disaggregation-ib-device on the frontend NIC; MC_TE_FILTERS as the list", async () => {
        const rs = edit(stack([endpoint({ engine: "sglang", kvPool: { kind: "none" } })]), "DynamoGraphDeployment", (o) => {
            const m = mainOf(o, "decode");
            setArg(m, "--disaggregation-transfer-backend", "mooncake");
            setArg(m, "--disaggregation-ib-device", "mlx5_1");
            for (const [k, v] of [
                ["MOONCAKE_PROTOCOL", "rdma"],
                ["MC_ENABLE_DEST_DEVICE_AFFINITY", "1"],
            ])
                setEnv(m, k, v);
        });
        expect(await violations([mooncakeDevicesRailHcas], rs)).toEqual([
            `DynamoGraphDeployment/llama-70b container decode/main field spec.components[3].podTemplate.spec.containers[0].args[--disaggregation-ib-device]: mlx5_1 is a frontend (north-south) NIC of pool h200. ${fix}`,
        ]);
        const filtered = store((c) => {
            setEnv(c, "MOONCAKE_DEVICE", undefined);
            setEnv(c, "MC_TE_FILTERS", "mlx5_0,mlx5_3");
        });
        expect(await violations([mooncakeDevicesRailHcas], filtered)).toEqual([]);
    });
    it("no destination-device affinity on a rail-optimised pool", async () => {
        expect(
            await violations(
                [mooncakeDevicesRailHcas],
                store((c) => setEnv(c, "MC_ENABLE_DEST_DEVICE_AFFINITY", undefined)),
            ),
        ).toEqual([
            `${STORE}.env[MC_ENABLE_DEST_DEVICE_AFFINITY]: MC_ENABLE_DEST_DEVICE_AFFINITY is not 1 on a rail-optimised pool, so a transfer may cross rails through the spine. Fix: set MC_ENABLE_DEST_DEVICE_AFFINITY=1.`,
        ]);
    });
});

describe("mooncake-segment-fits-memory", () => {
    it("compliant: 512 GiB segment under a 528Gi limit", async () => {
        expect(await violations([mooncakeSegmentFitsMemory], stack())).toEqual([]);
    });
    it("a limit below the segment, and none at all", async () => {
        expect(
            await violations(
                [mooncakeSegmentFitsMemory],
                store((c) => {
                    c.resources.limits.memory = "500G";
                }),
            ),
        ).toEqual([
            `${STORE}.resources.limits.memory: memory limit 500G does not exceed the 512gb Mooncake segment. Fix: raise the memory limit above the segment size plus headroom.`,
        ]);
        expect(
            await violations(
                [mooncakeSegmentFitsMemory],
                store((c) => {
                    delete c.resources.limits.memory;
                }),
            ),
        ).toEqual([
            `${STORE}.resources.limits.memory: contributes a 512gb segment without a memory limit. Fix: set a memory limit above the segment size.`,
        ]);
    });
    it("size parsers: Mooncake (binary gb) and Kubernetes quantities", () => {
        expect(mooncakeBytes("10gb")).toBe(10 * 2 ** 30);
        expect(mooncakeBytes("3355443200")).toBe(3355443200);
        expect(k8sBytes("528Gi")).toBe(528 * 2 ** 30);
        expect(k8sBytes("500G")).toBe(500e9);
        expect(Number.isNaN(k8sBytes("lots"))).toBe(true);
    });
});

describe("a plain Deployment configured only through MOONCAKE_* is in scope", () => {
    it("is checked for protocol and devices", async () => {
        const d = k8s({
            apiVersion: "apps/v1",
            kind: "Deployment",
            metadata: { name: "lmcache", namespace: "inference" },
            spec: {
                selector: {},
                template: {
                    spec: {
                        containers: [
                            { name: "engine", image: "lmsysorg/sglang:v0.5.16", env: [{ name: "MOONCAKE_MASTER", value: "m:50051" }] },
                        ],
                    },
                },
            },
        });
        expect((await violations([mooncakeProtocolRdma, mooncakeDevicesRailHcas], [d])).map((m) => m.split(":")[0])).toEqual([
            "Deployment/lmcache container engine field spec.template.spec.containers[0].env[MOONCAKE_PROTOCOL]",
            "Deployment/lmcache container engine field spec.template.spec.containers[0].env[MOONCAKE_DEVICE]",
        ]);
    });
});
