/**
 * services/preflight/preflight.sh against fake sysfs/proc/dev trees: the pass case and each failure, asserting the
 * exact one-line messages and a non-zero exit. The tree mimics a DGX H200 pod on rails 0 and 1 (mlx5_0 at
 * 0000:18:00.0 for GPU0 0000:1b:00.0, mlx5_3 at 0000:40:00.0 for GPU1 0000:43:00.0) holding GPU1, with the
 * frontend HCA mlx5_1 also present in sysfs.
 */
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PREFLIGHT_SCRIPT, preflightEnv } from "../lib/preflight";
import { kvFabricOf, memlockPath } from "../lib/nixl";
import { DGX } from "./policies/rdma-fixtures";

let root: string;

const HCAS: Array<{ hca: string; pci: string; uverbs: string }> = [
    { hca: "mlx5_0", pci: "0000:18:00.0", uverbs: "uverbs0" },
    { hca: "mlx5_3", pci: "0000:40:00.0", uverbs: "uverbs3" },
    { hca: "mlx5_1", pci: "0000:29:00.0", uverbs: "uverbs1" },
];

function write(rel: string, text: string) {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, text);
}

function tree() {
    for (const h of HCAS) {
        const dev = `sys/devices/pci0000:00/${h.pci}`;
        fs.mkdirSync(path.join(root, dev, "infiniband_verbs", h.uverbs), { recursive: true });
        const cls = path.join(root, "sys/class/infiniband", h.hca);
        fs.mkdirSync(cls, { recursive: true });
        fs.symlinkSync(`../../../devices/pci0000:00/${h.pci}`, path.join(cls, "device"));
        write(`sys/class/infiniband/${h.hca}/ports/1/state`, "4: ACTIVE\n");
        write(`sys/class/infiniband/${h.hca}/ports/1/link_layer`, h.hca === "mlx5_1" ? "Ethernet\n" : "InfiniBand\n");
        write(`sys/class/infiniband/${h.hca}/ports/1/rate`, "400 Gb/sec (4X NDR)\n");
    }
    // The pod was given the rail HCAs' device nodes (rdma/rail_0, rdma/rail_1), not the frontend's.
    write("dev/infiniband/uverbs0", "");
    write("dev/infiniband/uverbs3", "");
    write("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         unlimited            unlimited            bytes\n");
    write("proc/self/status", "Name:\tsh\nCapEff:\t00000000a80465fb\n");
    fs.mkdirSync(path.join(root, "proc/driver/nvidia/gpus/0000:43:00.0"), { recursive: true });
    fs.mkdirSync(path.join(root, "bin"), { recursive: true });
}

function fakeTool(name: string, output: string) {
    write(`bin/${name}`, `#!/bin/sh\ncat <<'OUT'\n${output}\nOUT\n`);
    fs.chmodSync(path.join(root, "bin", name), 0o755);
}

/** Runs the script with the pod's env for rails 0 and 1 plus overrides. */
function run(env: Record<string, string> = {}) {
    const r = spawnSync("sh", [PREFLIGHT_SCRIPT], {
        encoding: "utf8",
        env: {
            PATH: `${path.join(root, "bin")}:/usr/bin:/bin`,
            PREFLIGHT_SYSFS: path.join(root, "sys"), PREFLIGHT_PROC: path.join(root, "proc"), PREFLIGHT_DEV: path.join(root, "dev"),
            PREFLIGHT_FABRIC: "infiniband", PREFLIGHT_HCAS: "mlx5_0:1,mlx5_3:1", PREFLIGHT_LINK_LAYER: "InfiniBand",
            PREFLIGHT_MIN_RATE_GBPS: "400", PREFLIGHT_MIN_DEVICES: "2", PREFLIGHT_REQUIRE_IPC_LOCK: "1",
            PREFLIGHT_GPU_NIC_MAP: "0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:40:00.0",
            ...env,
        },
    });
    return { status: r.status, stdout: r.stdout.trim(), errors: r.stderr.trim() === "" ? [] : r.stderr.trim().split("\n") };
}

beforeEach(() => { root = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-")); tree(); });
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe("preflight.sh", () => {
    it("passes on a healthy pod (no ucx_info in the image: that check is skipped)", () => {
        expect(run()).toEqual({ status: 0, stdout: "preflight: OK fabric=infiniband devices=2 hcas=mlx5_0:1,mlx5_3:1 memlock=unlimited", errors: [] });
    });
    it("passes with ucx_info listing rc_mlx5", () => {
        fakeTool("ucx_info", "#      Transport: tcp\n#         Device: eth0\n#      Transport: rc_mlx5\n#         Device: mlx5_3:1");
        expect(run().status).toBe(0);
    });
    it("no /dev/infiniband/uverbs* at all", () => {
        fs.rmSync(path.join(root, "dev/infiniband"), { recursive: true });
        const d = path.join(root, "dev");
        expect(run()).toEqual({ status: 1, stdout: "", errors: [
            `preflight: FAIL no ${d}/infiniband/uverbs* in the pod: no RDMA device was injected (request the pool's RDMA resources in requests and limits)`,
            `preflight: FAIL HCA mlx5_0: ${d}/infiniband/uverbs0 is not in the pod (its rail RDMA resource was not allocated)`,
            `preflight: FAIL HCA mlx5_3: ${d}/infiniband/uverbs3 is not in the pod (its rail RDMA resource was not allocated)`,
            "preflight: FAIL GPU 0000:43:00.0: its PCIe-affine rail NIC mlx5_3 (0000:40:00.0) has no device node in the pod (request every rail resource)",
        ] });
    });
    it("a pinned HCA missing from the node", () => {
        fs.rmSync(path.join(root, "sys/class/infiniband/mlx5_3"), { recursive: true });
        expect(run()).toEqual({ status: 1, stdout: "", errors: [
            `preflight: FAIL HCA mlx5_3 is missing: ${path.join(root, "sys")}/class/infiniband/mlx5_3 does not exist`,
            "preflight: FAIL GPU 0000:43:00.0: its PCIe-affine rail NIC 0000:40:00.0 is not an RDMA device on this node",
        ] });
    });
    it("port not ACTIVE", () => {
        write("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL HCA mlx5_0 port 1 state is \"1: DOWN\", want ACTIVE"] });
    });
    it("wrong link layer (port flipped to Ethernet)", () => {
        write("sys/class/infiniband/mlx5_3/ports/1/link_layer", "Ethernet\n");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL HCA mlx5_3 port 1 link layer is \"Ethernet\", want InfiniBand"] });
    });
    it("rate below the configured Gb/s", () => {
        write("sys/class/infiniband/mlx5_3/ports/1/rate", "200 Gb/sec (4X HDR)\n");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL HCA mlx5_3 port 1 rate is \"200 Gb/sec (4X HDR)\", below the required 400 Gb/s"] });
    });
    it("memlock not unlimited (containerd default 8 MiB)", () => {
        write("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL memlock limit is 8388608 bytes, want unlimited (run as root with IPC_LOCK+SYS_RESOURCE and ulimit -l unlimited, or a node pool with LimitMEMLOCK=infinity)"] });
    });
    it("IPC_LOCK not effective (non-root: CapEff 0), and not required on the LimitMEMLOCK=infinity path", () => {
        write("proc/self/status", "Name:\tsh\nCapEff:\t0000000000000000\n");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL CAP_IPC_LOCK is not effective (CapEff=0000000000000000): run the container as root with capabilities.add [IPC_LOCK]"] });
        expect(run({ PREFLIGHT_REQUIRE_IPC_LOCK: "0" }).status).toBe(0);
        write("proc/self/status", "Name:\tsh\nCapEff:\t00000000a80425fb\n");
        expect(run().errors).toEqual(["preflight: FAIL CAP_IPC_LOCK is not effective (CapEff=00000000a80425fb): run the container as root with capabilities.add [IPC_LOCK]"]);
    });
    it("ucx_info lists no RDMA transport (UCX built without verbs, ai-dynamo/dynamo PR #1314)", () => {
        fakeTool("ucx_info", "#      Transport: tcp\n#         Device: eth0\n#      Transport: cuda_copy");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL ucx_info -d lists no RDMA transport (rc_mlx5, rc_verbs, dc_mlx5, ud_mlx5, ud_verbs, srd): UCX would run NIXL over tcp"] });
    });
    it("a GPU that is not in the pool's rail table", () => {
        fs.mkdirSync(path.join(root, "proc/driver/nvidia/gpus/0000:99:00.0"), { recursive: true });
        expect(run()).toEqual({ status: 1, stdout: "", errors: ["preflight: FAIL GPU 0000:99:00.0 is not in the node pool's rail table (PREFLIGHT_GPU_NIC_MAP): the pod landed on a node of another model"] });
    });
    it("several problems: one line each", () => {
        write("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
        write("sys/class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
        write("proc/self/limits", "Max locked memory         65536                65536                bytes\n");
        const r = run();
        expect(r.status).toBe(1);
        expect(r.errors).toHaveLength(3);
    });
    it("EFA: fewer uverbs devices than requested, and fi_info without the efa provider", () => {
        fakeTool("fi_info", "");
        write("bin/fi_info", "#!/bin/sh\nexit 61\n");
        const r = run({ PREFLIGHT_FABRIC: "efa", PREFLIGHT_MIN_DEVICES: "4", PREFLIGHT_REQUIRE_IPC_LOCK: "0" });
        expect(r).toEqual({ status: 1, stdout: "", errors: [
            `preflight: FAIL 2 ${path.join(root, "dev")}/infiniband/uverbs* device(s) in the pod, need at least 4`,
            "preflight: FAIL fi_info -p efa -t FI_EP_RDM finds no EFA provider: libfabric would fall back to the sockets (TCP) provider",
        ] });
    });
    it("the env lib/preflight.ts generates for a DGX worker matches the script's inputs", () => {
        const fabric = kvFabricOf(DGX);
        const env = Object.fromEntries(preflightEnv({ fabric, memlock: memlockPath(fabric, false), minLinkRateGbps: 400, gpus: 2 }).map((e) => [e.name, e.value]));
        expect(env).toEqual({
            PREFLIGHT_FABRIC: "infiniband",
            PREFLIGHT_HCAS: "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
            PREFLIGHT_LINK_LAYER: "InfiniBand",
            PREFLIGHT_MIN_RATE_GBPS: "400",
            PREFLIGHT_MIN_DEVICES: "8",
            PREFLIGHT_GPU_NIC_MAP: "0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:40:00.0,0000:52:00.0=0000:4f:00.0,0000:61:00.0=0000:5e:00.0,0000:9d:00.0=0000:9a:00.0,0000:c3:00.0=0000:c0:00.0,0000:d1:00.0=0000:ce:00.0,0000:df:00.0=0000:dc:00.0",
            PREFLIGHT_REQUIRE_IPC_LOCK: "1",
        });
    });
});
