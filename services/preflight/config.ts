import { z } from "zod";

/**
 * The RDMA preflight's environment contract (services/shared/env.ts): the variables services/preflight/preflight.sh
 * reads, with the defaults it applies (its header documents each). lib/preflight.ts renders the init container's
 * env by these names; test/service-env.test.ts checks that this list is exactly what the script reads and that every
 * rendered preflight container parses. A new variable is one entry here and its read in the script.
 */
export const PREFLIGHT_ENV = z.object({
    PREFLIGHT_FABRIC: z.enum(["infiniband", "efa"]).default("infiniband"),
    /** Pinned HCAs as UCX writes them, `mlx5_0:1,mlx5_3:1`. */
    PREFLIGHT_HCAS: z
        .string()
        .regex(/^[A-Za-z0-9_]+(:\d+)?(,[A-Za-z0-9_]+(:\d+)?)*$/, "HCA[:port],...")
        .optional(),
    PREFLIGHT_LINK_LAYER: z.enum(["InfiniBand", "Ethernet"]).default("InfiniBand"),
    /** Minimum port rate, Gb/s (gigabits, as /sys/class/infiniband/<hca>/ports/<p>/rate reports). */
    PREFLIGHT_MIN_RATE_GBPS: z.coerce.number().min(0).default(0),
    /** `<gpu_bdf>=<nic_bdf>,...` from the pool's rail table. */
    PREFLIGHT_GPU_NIC_MAP: z
        .string()
        .regex(/^[0-9a-fA-F:.]+=[0-9a-fA-F:.]+(,[0-9a-fA-F:.]+=[0-9a-fA-F:.]+)*$/, "<gpu_bdf>=<nic_bdf>,...")
        .optional(),
    PREFLIGHT_MIN_DEVICES: z.coerce.number().int().min(1).default(1),
    PREFLIGHT_REQUIRE_IPC_LOCK: z.enum(["0", "1"]).default("0"),
    /** `1`: the container is privileged (EFA), so it sees every host device and the device count is informational. */
    PREFLIGHT_PRIVILEGED: z.enum(["0", "1"]).default("0"),
    PREFLIGHT_GPUS: z.coerce.number().int().min(0).default(0),
    /** Where the AWS EFA installer puts libfabric's tools (`fi_info`) in the `-efa` images; default /opt/amazon/efa/bin. */
    PREFLIGHT_EFA_BIN: z.string().min(1).optional(),
    /** The image the preflight runs in (the workload's own), named when a tool the check needs is missing from it. */
    PREFLIGHT_IMAGE: z.string().min(1).optional(),
    /** Empty or unset: the `gpudirect` file of the rdma-preflight ConfigMap. */
    PREFLIGHT_GPUDIRECT: z.enum(["dmabuf", "peermem", ""]).optional(),
    PREFLIGHT_MIN_MEMLOCK_BYTES: z.coerce.number().int().positive().optional(),
    /** Roots of /sys, /proc, /dev (tests point them at fake trees). */
    PREFLIGHT_SYSFS: z.string().min(1).optional(),
    PREFLIGHT_PROC: z.string().min(1).optional(),
    PREFLIGHT_DEV: z.string().min(1).optional(),
});
