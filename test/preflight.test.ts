/**
 * services/preflight/preflight.sh against fake sysfs/proc/dev trees: the pass case and each failure, asserting the
 * exact one-line messages and a non-zero exit. The tree mimics a DGX H200 pod on rails 0 and 1 (mlx5_0 at
 * 0000:18:00.0 for GPU0 0000:1b:00.0, mlx5_3 at 0000:40:00.0 for GPU1 0000:43:00.0) holding GPU1, with the
 * frontend HCA mlx5_1 also present in sysfs.
 */
import { versions } from "../config/versions";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PREFLIGHT_GPUDIRECT_KEY, PREFLIGHT_SCRIPT, preflightEnv } from "../lib/preflight";
import { kvFabricOf, memlockPath } from "../lib/nixl";
import { DGX } from "./policies/rdma-fixtures";
import { NodeProfileSchema, presetProfiles } from "../config/nodeProfile";

const P5EN = NodeProfileSchema.parse(presetProfiles().get("p5en-48xlarge"));
import { byType, inputs, runHubAndSpoke } from "./helpers";

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
    write(
        "proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         unlimited            unlimited            bytes\n",
    );
    write("proc/self/status", "Name:\tsh\nCapEff:\t00000000a80465fb\n");
    fs.mkdirSync(path.join(root, "proc/driver/nvidia/gpus/0000:43:00.0"), { recursive: true });
    // DMA-BUF prerequisites: open GPU kernel modules (their /proc banner) and Linux >= 5.12.
    write(
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U22)\nGCC version:  gcc version 13.3.0\n",
    );
    write("proc/sys/kernel/osrelease", "6.8.0-60-generic\n");
    fs.mkdirSync(path.join(root, "bin"), { recursive: true });
}

/**
 * `ucx_info -d` memory-domain blocks as UCX v1.21.0 prints them (openucx/ucx@v1.21.0:src/tools/info/tl_info.c
 * print_md_info: "register: <max>[, dmabuf], cost: ...", "memory types: <type> (<caps>), ..."), for rail HCAs
 * mlx5_0 and mlx5_3 and the cuda_copy domain. `ibCuda` adds `cuda` to the ib domains' registrable types (what
 * uct_ib_md_open_common does when /sys/module/nvidia_peermem/version exists); `ibDmabuf` the dmabuf register flag;
 * `cudaDmabuf` the DMA-BUF export of cuda_copy (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).
 */
function ucxInfo(o: { ibCuda?: boolean; ibDmabuf?: boolean; cudaDmabuf?: boolean; hcas?: string[] } = {}): string {
    const ib = (hca: string) =>
        [
            "#",
            `# Memory domain: ${hca}`,
            "#     Component: ib",
            `#             register: unlimited${o.ibDmabuf ? ", dmabuf" : ""}, cost: 16000 + 0.060 * N nsec`,
            "#           remote key: 8 bytes",
            "#           local memory handle is required for zcopy",
            "#           memory invalidation is supported",
            `#         memory types: host (access,reg,cache)${o.ibCuda ? ", cuda (reg,cache)" : ""}`,
            "#",
            "#      Transport: rc_mlx5",
            `#         Device: ${hca}:1`,
        ].join("\n");
    return [
        "#",
        "# Memory domain: cuda_cpy",
        "#     Component: cuda_cpy",
        "#             allocate: unlimited",
        "#             register: unlimited, cost: 0 nsec",
        `#         memory types: host (reg), cuda (access,alloc,reg,detect${o.cudaDmabuf ? ",dmabuf" : ""}), cuda-managed (access,alloc,reg,cache,detect)`,
        "#",
        "#      Transport: cuda_copy",
        "#         Device: cuda",
        ...(o.hcas ?? ["mlx5_0", "mlx5_3"]).map(ib),
    ].join("\n");
}

function fakeTool(name: string, output: string) {
    write(`bin/${name}`, `#!/bin/sh\ncat <<'OUT'\n${output}\nOUT\n`);
    fs.chmodSync(path.join(root, "bin", name), 0o755);
}

/** The pod's env for rails 0 and 1 (a GPU pod on a DMA-BUF spoke). */
function baseEnv(): Record<string, string> {
    return {
        PATH: `${path.join(root, "bin")}:/usr/bin:/bin`,
        PREFLIGHT_SYSFS: path.join(root, "sys"),
        PREFLIGHT_PROC: path.join(root, "proc"),
        PREFLIGHT_DEV: path.join(root, "dev"),
        PREFLIGHT_FABRIC: "infiniband",
        PREFLIGHT_HCAS: "mlx5_0:1,mlx5_3:1",
        PREFLIGHT_LINK_LAYER: "InfiniBand",
        PREFLIGHT_MIN_RATE_GBPS: "400",
        PREFLIGHT_MIN_DEVICES: "2",
        PREFLIGHT_REQUIRE_IPC_LOCK: "1",
        PREFLIGHT_GPU_NIC_MAP: "0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:40:00.0",
        PREFLIGHT_GPUS: "1",
        PREFLIGHT_GPUDIRECT: "dmabuf",
    };
}

/** Runs the script with {@link baseEnv} plus overrides. */
function run(env: Record<string, string> = {}) {
    const r = spawnSync("sh", [PREFLIGHT_SCRIPT], { encoding: "utf8", env: { ...baseEnv(), ...env } });
    return { status: r.status, stdout: r.stdout.trim(), errors: r.stderr.trim() === "" ? [] : r.stderr.trim().split("\n") };
}

// Every pod image carries a UCX whose rail domains register DMA-BUF, unless a test says otherwise.
beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-"));
    tree();
    fakeTool("ucx_info", ucxInfo({ ibDmabuf: true, cudaDmabuf: true }));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe("preflight.sh", () => {
    it("never skips silently: a GPU pod whose image has no ucx_info fails, naming the image", () => {
        fs.rmSync(path.join(root, "bin", "ucx_info"));
        expect(run({ PREFLIGHT_IMAGE: "example.com/engine:1" })).toEqual({
            status: 1,
            stdout: "",
            errors: [
                "preflight: FAIL example.com/engine:1 has no ucx_info on PATH: the pod holds GPUs and rail HCAs (mlx5_0,mlx5_3) but UCX's registration of CUDA memory (GPUDirect mode dmabuf) cannot be checked; use an image that carries ucx_info (upstream/images.ts provides)",
            ],
        });
    });
    it("EFA: fi_info is found where the EFA installer puts it (not on PATH in the -efa images); missing anywhere fails naming the image", () => {
        const efaBin = path.join(root, "opt/amazon/efa/bin");
        const env = {
            PREFLIGHT_FABRIC: "efa",
            PREFLIGHT_MIN_DEVICES: "2",
            PREFLIGHT_REQUIRE_IPC_LOCK: "0",
            PREFLIGHT_EFA_BIN: efaBin,
            PREFLIGHT_IMAGE: `${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.version}`,
        };
        expect(run(env)).toEqual({
            status: 1,
            stdout: "",
            errors: [
                `preflight: FAIL ${versions.dynamoRuntime.sglang.image}:${versions.dynamoRuntime.sglang.version} has no fi_info (not on PATH, not in ${efaBin}): the EFA provider check cannot run; use the -efa image variant (upstream/images.ts)`,
            ],
        });
        // The installer's fi_info: provider present; with GPUs it must also register GPU memory (FI_HMEM).
        write("opt/amazon/efa/bin/fi_info", '#!/bin/sh\ncase "$*" in *FI_HMEM*) exit ${NO_HMEM:-0} ;; esac\nexit 0\n');
        fs.chmodSync(path.join(efaBin, "fi_info"), 0o755);
        expect(run(env).status).toBe(0);
        expect(run({ ...env, PREFLIGHT_GPUS: "2" }).status).toBe(0);
        expect(run({ ...env, PREFLIGHT_GPUS: "2", NO_HMEM: "61" }).errors).toEqual([
            "preflight: FAIL fi_info -p efa -t FI_EP_RDM -c FI_HMEM finds no EFA provider that registers GPU memory: the pod holds 2 GPU(s) and KV would be staged through host memory (efa_nv_peermem or DMA-BUF missing on the node)",
        ]);
    });
    it("passes with ucx_info listing rc_mlx5 and DMA-BUF on both rail HCAs", () => {
        fakeTool("ucx_info", ucxInfo({ ibDmabuf: true, cudaDmabuf: true }));
        expect(run()).toEqual({
            status: 0,
            stdout: "preflight: OK fabric=infiniband devices=2 hcas=mlx5_0:1,mlx5_3:1 memlock=unlimited gpudirect=dmabuf",
            errors: [],
        });
    });
    it("no /dev/infiniband/uverbs* at all", () => {
        fs.rmSync(path.join(root, "dev/infiniband"), { recursive: true });
        const d = path.join(root, "dev");
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: [
                `preflight: FAIL no ${d}/infiniband/uverbs* in the pod: no RDMA device was injected (request the pool's RDMA resources in requests and limits)`,
                `preflight: FAIL HCA mlx5_0: ${d}/infiniband/uverbs0 is not in the pod (its rail RDMA resource was not allocated)`,
                `preflight: FAIL HCA mlx5_3: ${d}/infiniband/uverbs3 is not in the pod (its rail RDMA resource was not allocated)`,
                "preflight: FAIL GPU 0000:43:00.0: its PCIe-affine rail NIC mlx5_3 (0000:40:00.0) has no device node in the pod (request every rail resource)",
            ],
        });
    });
    it("a pinned HCA missing from the node", () => {
        fs.rmSync(path.join(root, "sys/class/infiniband/mlx5_3"), { recursive: true });
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: [
                `preflight: FAIL HCA mlx5_3 is missing: ${path.join(root, "sys")}/class/infiniband/mlx5_3 does not exist`,
                "preflight: FAIL GPU 0000:43:00.0: its PCIe-affine rail NIC 0000:40:00.0 is not an RDMA device on this node",
            ],
        });
    });
    it("port not ACTIVE", () => {
        write("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
        expect(run()).toEqual({ status: 1, stdout: "", errors: ['preflight: FAIL HCA mlx5_0 port 1 state is "1: DOWN", want ACTIVE'] });
    });
    it("wrong link layer (port flipped to Ethernet)", () => {
        write("sys/class/infiniband/mlx5_3/ports/1/link_layer", "Ethernet\n");
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: ['preflight: FAIL HCA mlx5_3 port 1 link layer is "Ethernet", want InfiniBand'],
        });
    });
    it("rate below the configured Gb/s", () => {
        write("sys/class/infiniband/mlx5_3/ports/1/rate", "200 Gb/sec (4X HDR)\n");
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: ['preflight: FAIL HCA mlx5_3 port 1 rate is "200 Gb/sec (4X HDR)", below the required 400 Gb/s'],
        });
    });
    it("memlock: a finite hard limit (containerd default 8 MiB) is named as the cause, with the uid", () => {
        write(
            "proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n",
        );
        write("proc/self/status", "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t00000000a80465fb\n");
        expect(run({ PREFLIGHT_GPUS: "0" })).toEqual({
            status: 1,
            stdout: "",
            errors: [
                "preflight: FAIL memlock (ulimit -l) is 8388608 bytes (hard limit 8388608), want unlimited: uid 1000 cannot raise the hard limit; run as root with IPC_LOCK+SYS_RESOURCE (ulimit -l unlimited), or use a node pool with LimitMEMLOCK=infinity for containerd and kubelet",
            ],
        });
    });
    it("memlock: hard limit unlimited but soft limit low means the entrypoint skipped ulimit -l", () => {
        write("proc/self/limits", "Max locked memory         65536                unlimited            bytes\n");
        expect(run({ PREFLIGHT_GPUS: "0" }).errors).toEqual([
            "preflight: FAIL memlock (ulimit -l) is 65536 bytes (hard limit unlimited), want unlimited: the entrypoint must run ulimit -l unlimited before exec'ing the engine",
        ]);
    });
    it("memlock: a finite limit at or above PREFLIGHT_MIN_MEMLOCK_BYTES passes, below it fails naming the need", () => {
        write("proc/self/limits", "Max locked memory         68719476736          68719476736          bytes\n");
        expect(run({ PREFLIGHT_GPUS: "0", PREFLIGHT_MIN_MEMLOCK_BYTES: "68719476736" }).status).toBe(0);
        expect(run({ PREFLIGHT_GPUS: "0", PREFLIGHT_MIN_MEMLOCK_BYTES: "137438953472" }).errors).toEqual([
            "preflight: FAIL memlock (ulimit -l) is 68719476736 bytes (hard limit 68719476736), want at least 137438953472 bytes: uid unknown cannot raise the hard limit; run as root with IPC_LOCK+SYS_RESOURCE (ulimit -l unlimited), or use a node pool with LimitMEMLOCK=infinity for containerd and kubelet",
        ]);
    });
    it("IPC_LOCK not effective (non-root: CapEff 0), and not required on the LimitMEMLOCK=infinity path", () => {
        write("proc/self/status", "Name:\tsh\nCapEff:\t0000000000000000\n");
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: [
                "preflight: FAIL CAP_IPC_LOCK is not effective (CapEff=0000000000000000): run the container as root with capabilities.add [IPC_LOCK]",
            ],
        });
        expect(run({ PREFLIGHT_REQUIRE_IPC_LOCK: "0" }).status).toBe(0);
        write("proc/self/status", "Name:\tsh\nCapEff:\t00000000a80425fb\n");
        expect(run().errors).toEqual([
            "preflight: FAIL CAP_IPC_LOCK is not effective (CapEff=00000000a80425fb): run the container as root with capabilities.add [IPC_LOCK]",
        ]);
    });
    it("ucx_info lists no RDMA transport (UCX built without verbs, ai-dynamo/dynamo PR #1314)", () => {
        fakeTool("ucx_info", "#      Transport: tcp\n#         Device: eth0\n#      Transport: cuda_copy");
        expect(run({ PREFLIGHT_GPUS: "0" })).toEqual({
            status: 1,
            stdout: "",
            errors: [
                "preflight: FAIL ucx_info -d lists no RDMA transport (rc_mlx5, rc_verbs, dc_mlx5, ud_mlx5, ud_verbs, srd): UCX would run NIXL over tcp",
            ],
        });
    });
    it("a plain GPU server with no InfiniBand at all fails with one line naming why", () => {
        fs.rmSync(path.join(root, "dev/infiniband"), { recursive: true });
        fs.rmSync(path.join(root, "sys/class/infiniband"), { recursive: true });
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: [
                `preflight: FAIL no RDMA device on this node: no ${path.join(root, "dev")}/infiniband/uverbs* in the pod and no HCA under ${path.join(root, "sys")}/class/infiniband (the node has no InfiniBand/EFA HCA, or its RDMA drivers are not loaded); fabric=infiniband needs one`,
            ],
        });
    });
    it("a GPU that is not in the pool's rail table", () => {
        fs.mkdirSync(path.join(root, "proc/driver/nvidia/gpus/0000:99:00.0"), { recursive: true });
        expect(run()).toEqual({
            status: 1,
            stdout: "",
            errors: [
                "preflight: FAIL GPU 0000:99:00.0 is not in the node pool's rail table (PREFLIGHT_GPU_NIC_MAP): the pod landed on a node of another model",
            ],
        });
    });
    describe("GPUDirect RDMA in the declared mode, per pinned HCA (UCX v1.21.0 memory domains)", () => {
        it("DMA-BUF: an ib memory domain without the dmabuf register flag fails naming HCA and mode", () => {
            fakeTool("ucx_info", ucxInfo({ ibDmabuf: false, cudaDmabuf: true }));
            expect(run().errors).toEqual([
                "preflight: FAIL HCA mlx5_0: UCX memory domain mlx5_0 cannot register DMA-BUF (register: unlimited, cost: 16000 + 0.060 * N nsec) in GPUDirect RDMA mode dmabuf: KV would be staged through host memory",
                "preflight: FAIL HCA mlx5_3: UCX memory domain mlx5_3 cannot register DMA-BUF (register: unlimited, cost: 16000 + 0.060 * N nsec) in GPUDirect RDMA mode dmabuf: KV would be staged through host memory",
            ]);
        });
        it("DMA-BUF: CUDA memory not exported as DMA-BUF by UCX's cuda_copy domain", () => {
            fakeTool("ucx_info", ucxInfo({ ibDmabuf: true, cudaDmabuf: false }));
            expect(run().errors).toEqual([
                'preflight: FAIL HCA mlx5_0: GPUDirect RDMA mode dmabuf but UCX\'s CUDA memory domain exports no DMA-BUF (no "cuda (...dmabuf)" in ucx_info -d memory types)',
                'preflight: FAIL HCA mlx5_3: GPUDirect RDMA mode dmabuf but UCX\'s CUDA memory domain exports no DMA-BUF (no "cuda (...dmabuf)" in ucx_info -d memory types)',
            ]);
        });
        it("DMA-BUF: the proprietary GPU kernel module, or a kernel older than 5.12, is refused", () => {
            write(
                "proc/driver/nvidia/version",
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
            );
            write("proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
            expect(run().errors).toEqual([
                `preflight: FAIL GPUDirect RDMA mode dmabuf for HCA(s) mlx5_0,mlx5_3: kernel 5.4.0-150-generic (${path.join(root, "proc")}/sys/kernel/osrelease) is older than 5.12, which DMA-BUF registration of GPU memory needs`,
                'preflight: FAIL GPUDirect RDMA mode dmabuf for HCA(s) mlx5_0,mlx5_3: the GPU driver is the proprietary kernel module ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"); DMA-BUF needs the open GPU kernel modules (GPU Operator driver.kernelModuleType=open)',
            ]);
        });
        it("peermem: passes with nvidia_peermem loaded and cuda in the ib domains' memory types", () => {
            write("sys/module/nvidia_peermem/version", "580.95.05\n");
            fakeTool("ucx_info", ucxInfo({ ibCuda: true }));
            expect(run({ PREFLIGHT_GPUDIRECT: "peermem" })).toEqual({
                status: 0,
                stdout: "preflight: OK fabric=infiniband devices=2 hcas=mlx5_0:1,mlx5_3:1 memlock=unlimited gpudirect=peermem",
                errors: [],
            });
        });
        it("peermem: nvidia_peermem not loaded, and an HCA whose domain cannot register cuda", () => {
            fakeTool("ucx_info", ucxInfo({ ibCuda: false, ibDmabuf: true, cudaDmabuf: true }));
            expect(run({ PREFLIGHT_GPUDIRECT: "peermem" }).errors).toEqual([
                `preflight: FAIL GPUDirect RDMA mode peermem for HCA(s) mlx5_0,mlx5_3: nvidia_peermem is not loaded (${path.join(root, "sys")}/module/nvidia_peermem/version missing): UCX cannot register CUDA memory on the rails (GPU Operator driver.rdma.enabled=true loads it)`,
                "preflight: FAIL HCA mlx5_0: UCX memory domain mlx5_0 cannot register CUDA memory in GPUDirect RDMA mode peermem (memory types: host (access,reg,cache)): KV would be staged through host memory",
                "preflight: FAIL HCA mlx5_3: UCX memory domain mlx5_3 cannot register CUDA memory in GPUDirect RDMA mode peermem (memory types: host (access,reg,cache)): KV would be staged through host memory",
            ]);
        });
        it("a pinned HCA with no UCX memory domain", () => {
            write("sys/module/nvidia_peermem/version", "580.95.05\n");
            fakeTool("ucx_info", ucxInfo({ ibCuda: true, hcas: ["mlx5_0"] }));
            expect(run({ PREFLIGHT_GPUDIRECT: "peermem" }).errors).toEqual([
                "preflight: FAIL HCA mlx5_3: ucx_info -d shows no memory domain mlx5_3: UCX cannot register memory on it (GPUDirect RDMA mode peermem)",
            ]);
        });
        it("a GPU pod with no declared mode fails closed; the mode is read from the ConfigMap file next to the script", () => {
            expect(run({ PREFLIGHT_GPUDIRECT: "" }).errors).toEqual([
                `preflight: FAIL GPUDirect RDMA mode is "unset" (PREFLIGHT_GPUDIRECT or ${path.dirname(PREFLIGHT_SCRIPT)}/gpudirect), want dmabuf or peermem: the pod holds GPUs and cannot prove GPU memory registration on HCA(s) mlx5_0,mlx5_3`,
            ]);
            // As mounted: the script and the `gpudirect` key of the rdma-preflight ConfigMap side by side.
            const mount = path.join(root, "mount");
            fs.mkdirSync(mount);
            fs.copyFileSync(PREFLIGHT_SCRIPT, path.join(mount, "preflight.sh"));
            fs.writeFileSync(path.join(mount, PREFLIGHT_GPUDIRECT_KEY), "peermem\n");
            const r = spawnSync("sh", [path.join(mount, "preflight.sh")], {
                encoding: "utf8",
                env: { ...baseEnv(), PREFLIGHT_GPUDIRECT: "" },
            });
            expect(r.stderr.trim()).toMatch(
                /^preflight: FAIL GPUDirect RDMA mode peermem for HCA\(s\) mlx5_0,mlx5_3: nvidia_peermem is not loaded/,
            );
        });
        it("pods without GPUs (Mooncake host-RAM stores) skip the GPUDirect check", () => {
            write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n");
            expect(run({ PREFLIGHT_GPUS: "0", PREFLIGHT_GPUDIRECT: "" }).status).toBe(0);
        });
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
        expect(r).toEqual({
            status: 1,
            stdout: "",
            errors: [
                `preflight: FAIL 2 ${path.join(root, "dev")}/infiniband/uverbs* device(s) in the pod, need at least 4`,
                "preflight: FAIL fi_info -p efa -t FI_EP_RDM finds no EFA provider: libfabric would fall back to the sockets (TCP) provider",
            ],
        });
    });
    it("EFA under privileged: true: every host uverbs device is visible, so the count is marked informational, never a proof; fewer than requested still fails", () => {
        write("bin/fi_info", "#!/bin/sh\nexit 0\n");
        fs.chmodSync(path.join(root, "bin", "fi_info"), 0o755);
        // A fake /dev with the host's 16 EFA uverbs nodes, as a privileged container sees them; the pod asked for 4.
        for (let i = 0; i < 16; i++) write(`dev/infiniband/uverbs${i}`, "");
        const env = { PREFLIGHT_FABRIC: "efa", PREFLIGHT_MIN_DEVICES: "4", PREFLIGHT_REQUIRE_IPC_LOCK: "0", PREFLIGHT_HCAS: "" };
        const info = `preflight: info privileged container: the 16 ${path.join(root, "dev")}/infiniband/uverbs* device(s) seen are the host's, so the device check does not prove the pod's allocation of 4 (informational; the kubelet admitted the pod only with its RDMA resource request)`;
        const ok = "preflight: OK fabric=efa devices=16 hcas=none memlock=unlimited";
        // Unprivileged: the count is the allocation (no info line).
        expect(run(env)).toEqual({ status: 0, stdout: ok, errors: [] });
        // Privileged, as rendered (PREFLIGHT_PRIVILEGED=1), or seen from the capabilities (CAP_SYS_ADMIN effective).
        expect(run({ ...env, PREFLIGHT_PRIVILEGED: "1" })).toEqual({ status: 0, stdout: `${info}\n${ok}`, errors: [] });
        write("proc/self/status", "Name:\tsh\nCapEff:\t000001ffffffffff\n");
        expect(run(env)).toEqual({ status: 0, stdout: `${info}\n${ok}`, errors: [] });
        // Even the host has fewer than the pod needs: still a failure.
        expect(run({ ...env, PREFLIGHT_MIN_DEVICES: "32" }).errors).toEqual([
            `preflight: FAIL 16 ${path.join(root, "dev")}/infiniband/uverbs* device(s) in the pod, need at least 32`,
        ]);
    });
    it("lib/preflight.ts marks the privileged EFA preflight, and only it", () => {
        const efa = kvFabricOf(P5EN);
        const envOf = (fabric: ReturnType<typeof kvFabricOf>) =>
            Object.fromEntries(
                preflightEnv({ fabric, memlock: memlockPath(fabric, false), minLinkRateGbps: 400, gpus: 4 }).map((e) => [e.name, e.value]),
            );
        expect(memlockPath(efa, false).securityContext.privileged).toBe(true);
        expect(envOf(efa).PREFLIGHT_PRIVILEGED).toBe("1");
        expect(envOf(kvFabricOf(DGX)).PREFLIGHT_PRIVILEGED).toBeUndefined();
    });
    it("the env lib/preflight.ts generates for a DGX worker matches the script's inputs", () => {
        const fabric = kvFabricOf(DGX);
        const env = Object.fromEntries(
            preflightEnv({ fabric, memlock: memlockPath(fabric, false), minLinkRateGbps: 400, gpus: 2 }).map((e) => [e.name, e.value]),
        );
        expect(env).toEqual({
            PREFLIGHT_FABRIC: "infiniband",
            PREFLIGHT_HCAS: "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
            PREFLIGHT_LINK_LAYER: "InfiniBand",
            PREFLIGHT_MIN_RATE_GBPS: "400",
            PREFLIGHT_MIN_DEVICES: "8",
            PREFLIGHT_GPU_NIC_MAP:
                "0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:40:00.0,0000:52:00.0=0000:4f:00.0,0000:61:00.0=0000:5e:00.0,0000:9d:00.0=0000:9a:00.0,0000:c3:00.0=0000:c0:00.0,0000:d1:00.0=0000:ce:00.0,0000:df:00.0=0000:dc:00.0",
            PREFLIGHT_GPUS: "2",
            PREFLIGHT_REQUIRE_IPC_LOCK: "1",
        });
    });
});

describe("the rdma-preflight ConfigMap carries the spoke's GPUDirect mode", () => {
    it("spoke-hn1 (platform:gpuOperator.gpuDirectRdma: dmabuf) ships the script and gpudirect: dmabuf", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1");
        const cms = byType(spoke.resources, "kubernetes:core/v1:ConfigMap")
            .map(inputs)
            .filter((c) => c.metadata?.name === "rdma-preflight");
        expect(cms).toHaveLength(1);
        expect(cms[0].data[PREFLIGHT_GPUDIRECT_KEY]).toBe("dmabuf\n");
        expect(cms[0].data["preflight.sh"]).toBe(fs.readFileSync(PREFLIGHT_SCRIPT, "utf8"));
    });
});
