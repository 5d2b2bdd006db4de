/**
 * Mooncake RDMA rests on protocol rdma + an explicit device list with auto-discovery off, not on MC_FORCE_HCA:
 * kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/client_service.cpp `InitTransferEngine` sets auto_discover=false
 * when device names are given (unless MC_MS_AUTO_DISC=1) and installs RDMA on exactly those devices;
 * kvcache-ai/Mooncake@v0.3.12.post1:mooncake-transfer-engine/src/transfer_engine_impl.cpp reads MC_FORCE_HCA only
 * under auto_discover_.
 */
import { describe, expect, it } from "vitest";
import { mooncakeTransferEngine } from "../upstream/mooncake";
import { checkMooncakeDevices } from "../upstream/check/mooncake-devices";

const store = (env: Record<string, string>) => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "m-mooncake-store", namespace: "inference" },
    spec: {
        template: {
            metadata: { labels: {} },
            spec: {
                containers: [
                    {
                        name: "store",
                        image: "i:1",
                        command: ["python3", "-m", "mooncake.mooncake_store_service"],
                        env: Object.entries(env).map(([name, value]) => ({ name, value })),
                    },
                ],
            },
        },
    },
});
const cm = (c: Record<string, unknown>) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "mc", namespace: "inference" },
    data: { "mooncake.json": JSON.stringify(c) },
});
const run = (objects: object[]) => checkMooncakeDevices({ stack: "s", objects, releases: [] });

describe("upstream fact: MC_FORCE_HCA", () => {
    it("is recorded as inert under an explicit device list, with MC_MS_AUTO_DISC as what re-enables discovery", () => {
        expect(mooncakeTransferEngine.env.MC_FORCE_HCA.note).toMatch(/INERT.*explicit device list.*auto_discover=false/);
        expect(mooncakeTransferEngine.env.MC_MS_AUTO_DISC.source).toBe(
            "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/client_service.cpp#get_auto_discover",
        );
    });
});

describe("upstream-check: mooncake-rdma-devices", () => {
    it("rdma with rail devices passes; a vLLM client config with both passes", () => {
        expect(
            run([
                store({ MOONCAKE_PROTOCOL: "rdma", MOONCAKE_DEVICE: "mlx5_0,mlx5_3" }),
                cm({ master_server_address: "m:50051", protocol: "rdma", device_name: "mlx5_0" }),
            ]),
        ).toEqual([]);
    });
    it("MC_FORCE_HCA=1 without devices does not rescue a store: no device list is a finding", () => {
        const f = run([store({ MOONCAKE_PROTOCOL: "rdma", MC_FORCE_HCA: "1" })]);
        expect(f.map((x) => x.key)).toEqual(["env.MOONCAKE_device"]);
    });
    it("tcp (Mooncake's default, by omission), MC_MS_AUTO_DISC=1 and a tcp client config are findings", () => {
        expect(run([store({ MOONCAKE_DEVICE: "mlx5_0" })]).map((x) => x.key)).toEqual(["env.MOONCAKE_protocol"]);
        expect(run([store({ MOONCAKE_PROTOCOL: "rdma", MOONCAKE_DEVICE: "mlx5_0", MC_MS_AUTO_DISC: "1" })]).map((x) => x.key)).toEqual([
            "env.MC_MS_AUTO_DISC",
        ]);
        expect(run([cm({ master_server_address: "m:50051", protocol: "tcp", device_name: "" })]).map((x) => x.key)).toEqual([
            "data.mooncake.json.protocol",
            "data.mooncake.json.device",
        ]);
    });
});
