/**
 * Mooncake RDMA is guaranteed by protocol `rdma` plus an explicit device list, not by `MC_FORCE_HCA`: a store client
 * (the store service, vLLM's MooncakeStoreConnector, SGLang's HiCache backend) given `protocol: rdma` and device names
 * runs with auto-discovery off, installs the RDMA transport on exactly those HCAs and fails instead of falling back to
 * TCP (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/client_service.cpp `InitTransferEngine`); `MC_FORCE_HCA`
 * is read only under auto-discovery (mooncake-transfer-engine/src/transfer_engine_impl.cpp `init`). So every Mooncake
 * client must carry protocol rdma, a non-empty device list, and no `MC_MS_AUTO_DISC=1` (which turns discovery back on).
 * Closed world: a client whose settings cannot be read is a finding. Pure; see ./view.ts.
 */
import { argvOf, envOf, type Finding, flagValue, objectName, type Obj, parseJson, podsOf, type StackView } from "./view";

const SOURCE = "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/client_service.cpp#InitTransferEngine";

/** Checks every Mooncake client of one stack. */
export function checkMooncakeDevices(s: StackView): Finding[] {
    const out: Finding[] = [];
    const bad = (object: string, container: string | undefined, key: string, why: string) =>
        out.push({
            stack: s.stack,
            object,
            ...(container ? { container } : {}),
            key,
            message: `mooncake-rdma-devices: ${why}; Mooncake RDMA is guaranteed only by protocol rdma with an explicit device list and auto-discovery off [${SOURCE}]`,
        });
    const judge = (object: string, container: string | undefined, where: string, protocol: unknown, devices: unknown) => {
        if (protocol !== "rdma")
            bad(
                object,
                container,
                `${where}protocol`,
                `protocol is ${JSON.stringify(protocol ?? null)}, not rdma (Mooncake's default is tcp)`,
            );
        if (typeof devices !== "string" || devices.split(",").filter(Boolean).length === 0)
            bad(object, container, `${where}device`, "no explicit RDMA device list, so the client auto-discovers HCAs");
    };
    for (const p of podsOf(s.objects)) {
        const argv = argvOf(p.main);
        const env = (n: string) => envOf(p.main, n)?.value;
        if (env("MC_MS_AUTO_DISC") === "1")
            bad(
                p.object,
                p.main.name,
                "env.MC_MS_AUTO_DISC",
                "MC_MS_AUTO_DISC=1 turns topology auto-discovery back on and the explicit device list off",
            );
        const isStore = argv.slice(0, 3).join(" ") === "python3 -m mooncake.mooncake_store_service";
        if (isStore || envOf(p.main, "MOONCAKE_PROTOCOL") || envOf(p.main, "MOONCAKE_DEVICE"))
            judge(p.object, p.main.name, "env.MOONCAKE_", env("MOONCAKE_PROTOCOL"), env("MOONCAKE_DEVICE"));
        if (flagValue(argv, "--hicache-storage-backend") === "mooncake") {
            const extra = parseJson(flagValue(argv, "--hicache-storage-backend-extra-config"));
            if (!extra)
                bad(
                    p.object,
                    p.main.name,
                    "--hicache-storage-backend-extra-config",
                    "SGLang's Mooncake backend has no readable extra config",
                );
            else judge(p.object, p.main.name, "--hicache-storage-backend-extra-config.", extra.protocol, extra.device_name);
        }
    }
    // vLLM MooncakeStoreConnector reads its client settings from the JSON file MOONCAKE_CONFIG_PATH names (a ConfigMap here).
    for (const o of s.objects.filter((x: Obj) => x?.kind === "ConfigMap")) {
        for (const [k, v] of Object.entries(o.data ?? {})) {
            const c = parseJson(v);
            if (c && typeof c === "object" && "master_server_address" in c)
                judge(objectName(o), undefined, `data.${k}.`, c.protocol, c.device_name);
        }
    }
    return out;
}
