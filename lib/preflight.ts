import * as fs from "node:fs";
import * as path from "node:path";
import type { PREFLIGHT_ENV } from "../services/preflight/config";
import type { EnvName } from "../services/shared/env";
import type { EnvVar, KvFabric, MemlockPath, SecurityContext } from "./nixl";
import { gpuNicPcieMapping } from "./rails";

/**
 * The RDMA preflight (services/preflight/preflight.sh) as Kubernetes objects: the script ships in a ConfigMap
 * and runs as an init container with the workload's own image, resources and security context, so it sees
 * exactly the devices, GPUs, capabilities and memlock limit the engine will get (a static policy
 * proves RDMA was intended; the preflight proves it is there).
 */

/** Path of the script in this repo. */
export const PREFLIGHT_SCRIPT = path.join(__dirname, "..", "services", "preflight", "preflight.sh");

/** Name of the preflight init container; the policy pack looks for it (policies/rdma-workloads.ts, kept in sync by test). */
export const PREFLIGHT_CONTAINER = "rdma-preflight";

/** ConfigMap (in the workload namespace) carrying the script, and its key. */
export const PREFLIGHT_CONFIGMAP = "rdma-preflight";
/** Key of {@link PREFLIGHT_CONFIGMAP} holding the script (the file name it is mounted as). */
export const PREFLIGHT_KEY = "preflight.sh";
/**
 * ConfigMap key holding the spoke's GPUDirect RDMA mode (`dmabuf` | `peermem`, `platform:gpuOperator.gpuDirectRdma`);
 * mounted next to the script, which reads it as `$(dirname "$0")/gpudirect` when `PREFLIGHT_GPUDIRECT` is unset.
 */
export const PREFLIGHT_GPUDIRECT_KEY = "gpudirect";

/** GPUDirect RDMA kernel path a spoke declares (NVIDIA GPU Operator: DMA-BUF or legacy nvidia-peermem). */
export type GpuDirectMode = "dmabuf" | "peermem";

/** Where the ConfigMap is mounted in the init container. */
export const PREFLIGHT_MOUNT = "/opt/platform/preflight";

/** Pod volume name of the preflight ConfigMap. */
export const PREFLIGHT_VOLUME = "rdma-preflight";

let scriptCache: string | undefined;

/** The script text (read once). @throws Error when services/preflight/preflight.sh is missing */
export function preflightScript(): string {
    if (scriptCache === undefined) scriptCache = fs.readFileSync(PREFLIGHT_SCRIPT, "utf8");
    return scriptCache;
}

/** Inputs of one preflight run. */
export interface PreflightArgs {
    fabric: KvFabric;
    memlock: MemlockPath;
    /** Minimum port rate in Gb/s (gigabits; `platform:backend.minLinkRateGbps`). */
    minLinkRateGbps: number;
    /** GPUs of the pod; > 0 adds the GPU <-> NIC affinity check (InfiniBand) and the GPUDirect RDMA check (both fabrics). */
    gpus: number;
}

/** One variable of the script's contract (services/preflight/config.ts `PREFLIGHT_ENV`). */
const v = (name: EnvName<typeof PREFLIGHT_ENV>, value: string): EnvVar => ({ name, value });

/** Environment the script reads, by the names of its contract (services/preflight/config.ts `PREFLIGHT_ENV`). */
export function preflightEnv(a: PreflightArgs): EnvVar[] {
    const env: EnvVar[] = [v("PREFLIGHT_FABRIC", a.fabric.kind)];
    if (a.fabric.kind === "infiniband") {
        const rails = a.fabric.rails;
        env.push(
            v("PREFLIGHT_HCAS", rails.map((r) => `${r.hca}:1`).join(",")),
            v("PREFLIGHT_LINK_LAYER", "InfiniBand"),
            v("PREFLIGHT_MIN_RATE_GBPS", String(a.minLinkRateGbps)),
            v("PREFLIGHT_MIN_DEVICES", String(rails.length)),
        );
        if (a.gpus > 0) env.push(v("PREFLIGHT_GPU_NIC_MAP", gpuNicPcieMapping(rails)));
        // The GPUDirect mode itself comes from the ConfigMap (PREFLIGHT_GPUDIRECT_KEY): one value per spoke.
        env.push(v("PREFLIGHT_GPUS", String(a.gpus)));
    } else {
        env.push(v("PREFLIGHT_MIN_DEVICES", String(a.fabric.devicesPerGpu * Math.max(1, a.gpus))));
        // GPUs on EFA: the script checks GPU-memory registration (FI_HMEM) too.
        if (a.gpus > 0) env.push(v("PREFLIGHT_GPUS", String(a.gpus)));
    }
    env.push(v("PREFLIGHT_REQUIRE_IPC_LOCK", a.memlock.requireIpcLock ? "1" : "0"));
    // A privileged container sees every host device node: its device count is then informational (preflight.sh).
    if (a.memlock.securityContext.privileged) env.push(v("PREFLIGHT_PRIVILEGED", "1"));
    return env;
}

/** A container (core/v1 shape, the fields the platform sets). */
export interface ContainerSpec {
    name: string;
    image: string;
    command?: string[];
    args?: string[];
    env?: EnvVar[];
    envFrom?: Array<{ secretRef?: { name: string }; configMapRef?: { name: string } }>;
    resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
    securityContext?: SecurityContext;
    volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean; subPath?: string }>;
    ports?: Array<{ name?: string; containerPort: number; protocol?: string }>;
    readinessProbe?: Record<string, unknown>;
    workingDir?: string;
}

/**
 * The init container: same image as the workload (it carries `ucx_info`), the same GPU and RDMA resources (the
 * kubelet reuses an init container's devices for the app containers, so it checks the GPUs the engine will get)
 * and the same security context.
 */
export function preflightInitContainer(
    a: PreflightArgs & { image: string; resources: Record<string, string>; securityContext: SecurityContext },
): ContainerSpec {
    return {
        name: PREFLIGHT_CONTAINER,
        image: a.image,
        command: ["sh", `${PREFLIGHT_MOUNT}/${PREFLIGHT_KEY}`],
        // The image is named when a tool a check needs is missing (the script never skips a check silently).
        env: [...preflightEnv(a), v("PREFLIGHT_IMAGE", a.image)],
        resources: { requests: { ...a.resources }, limits: { ...a.resources } },
        securityContext: a.securityContext,
        volumeMounts: [{ name: PREFLIGHT_VOLUME, mountPath: PREFLIGHT_MOUNT, readOnly: true }],
    };
}

/** The pod volume mounting the preflight ConfigMap. */
export function preflightVolume(): { name: string; configMap: { name: string; defaultMode: number } } {
    return { name: PREFLIGHT_VOLUME, configMap: { name: PREFLIGHT_CONFIGMAP, defaultMode: 0o555 } };
}
