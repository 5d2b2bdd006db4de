import type { ComponentFacts, EntrypointFacts, Source } from "./types";

/**
 * Dynamo KVBM (KV Block Manager) as the pinned vLLM runtime image carries it (the `kvbm` wheel: "Included in current vLLM
 * and TensorRT-LLM runtime images"), and the Hugging Face cache the fast-start model cache relies on. Read at
 * ai-dynamo/dynamo main 2a6da14c (2026-08-21, the public mirror; schemas/dynamo/SOURCE.md), the newest readable tree
 * before the v1.5.0 cut.
 *
 * What KVBM needs to take effect (vLLM):
 * - the connector: `--kv-transfer-config {"kv_connector":"DynamoConnector","kv_connector_module_path":
 *   "kvbm.vllm_integration.connector","kv_role":"kv_both"}` on an aggregated worker (examples/backends/vllm/deploy/
 *   agg_kvbm.yaml); on a disaggregated endpoint only the prefill runs it, under `PdConnector` with NixlConnector
 *   (disagg_kvbm.yaml), which this product does not render (config/endpoint.ts `kvbm-aggregated-only`);
 * - a tier size: without `DYN_KVBM_CPU_CACHE_GB` or `DYN_KVBM_DISK_CACHE_GB` the leader has no tier and fails
 *   (lib/llm/src/block_manager/distributed/leader.rs lists both as the fix);
 * - tier order: host (G2) before disk (G3); disk-only is experimental and bypasses the host tier
 *   (lib/llm/src/block_manager/config.rs `should_bypass_cpu_cache`); each lower tier at least as large as the one above
 *   (docs/fern/pages/reference/components/kvbm-configuration.mdx), else KVBM churns;
 * - one offloading backend per worker: KVBM, LMCache, FlexKV and HiCache "are alternatives, not cache layers to stack
 *   together" (docs/fern/pages/cli/kv-cache-offloading/overview.mdx); KVBM engines are vLLM and TensorRT-LLM.
 *
 * Transport (why the three variables below are inside the KV closed world, upstream/kv-transport.ts): KVBM's tiers are
 * local to the worker pod. G1<->G2 are CUDA copies into pinned host memory; the distributed worker's NIXL agent
 * creates only the POSIX backend (and GDS_MT when asked) for G2/G3 file I/O (lib/llm/src/block_manager/distributed/
 * worker.rs `build_agent`); the leader and the TP-rank workers talk over ZMQ at `tcp://127.0.0.1:56001/56002` by default
 * (lib/bindings/kvbm/src/block_manager/distributed/utils.rs), control plane inside the pod. No KV leaves the pod
 * through KVBM; P/D transfer stays NIXL's (the endpoint's other connector). Sizes are per worker: the leader divides
 * `GB x 10^9` by the sum of its TP ranks' bytes per block (leader.rs `compute_num_blocks`).
 */
const D = "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f";
export const KVBM_LEADER: Source = `${D}:lib/bindings/kvbm/src/block_manager/distributed/leader.rs`;
/** `create_disk_offload_filter`: `env_is_truthy(DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER)` returns no filter. */
export const KVBM_BLOCK_MANAGER: Source = `${D}:lib/bindings/kvbm/src/block_manager.rs#create_disk_offload_filter`;
export const KVBM_GUIDE: Source = `${D}:docs/fern/pages/developer-guide/knowledge-base/modular-components/kvbm/kvbm-guide.md`;
/** The value that turns the disk offload filter off, as the KVBM guide writes it (`export ...=true`). */
export const KVBM_DISK_OFFLOAD_FILTER_OFF = "true";
export const KVBM_DISK: Source = `${D}:lib/llm/src/block_manager/storage/disk.rs`;
export const KVBM_CONFIG_DOC: Source = `${D}:docs/fern/pages/reference/components/kvbm-configuration.mdx`;
export const KVBM_OFFLOAD_DOC: Source = `${D}:docs/fern/pages/cli/kv-cache-offloading/overview.mdx`;
export const KVBM_AGG_EXAMPLE: Source = `${D}:examples/backends/vllm/deploy/agg_kvbm.yaml`;
export const SNAPSHOT_DOC: Source = `${D}:docs/fern/pages/developer-guide/knowledge-base/kubernetes/kubernetes-operator/snapshot.md`;
export const MODEL_CACHE_DOC: Source = `${D}:docs/fern/pages/kubernetes/model-deployment/model-loading/model-caching.mdx`;

/** The vLLM connector class and module that load KVBM (agg_kvbm.yaml). */
export const KVBM_VLLM_CONNECTOR = {
    kv_connector: "DynamoConnector",
    kv_connector_module_path: "kvbm.vllm_integration.connector",
} as const;

/** KVBM's environment in the engine process. Only what the product renders is recorded; the rest stays refused. */
export const kvbm: ComponentFacts = {
    component: "kvbm",
    version: "1.5.0",
    flags: {},
    env: {
        DYN_KVBM_CPU_CACHE_GB: {
            source: KVBM_LEADER,
            note: "host (G2, pinned) tier per worker in decimal GB; setting it enables CPU offload",
        },
        DYN_KVBM_DISK_CACHE_GB: {
            source: KVBM_LEADER,
            note: "disk (G3) tier per worker in decimal GB; with no host tier KVBM offloads G1->G3 directly (experimental)",
        },
        DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER: {
            default: "false",
            source: KVBM_BLOCK_MANAGER,
            note: "truthy: no disk offload filter, every block evicted from the host tier goes to disk; unset: a FrequencyFilter(2, 600 s) passes only blocks with frequency >= 2 (frequency starts at 1, doubles on a hit, decays by 1 per step), SSD lifespan protection (kvbm-guide.md 'SSD Lifespan Protection'); not supported disk-only",
        },
        DYN_KVBM_DISK_CACHE_DIR: {
            default: "/tmp/",
            source: KVBM_DISK,
            note: "where the disk tier's files are created (mkostemp + fallocate, O_DIRECT unless disabled)",
        },
    },
};

/** The name KVBM gives a disk-tier file: `mkostemp("<DYN_KVBM_DISK_CACHE_DIR>/dynamo-kvbm-disk-cache-XXXXXX")`. */
export const KVBM_DISK_FILE_PREFIX = "dynamo-kvbm-disk-cache-";

/**
 * How a KVBM disk-tier file lives, which decides its clean-up (lib/faststart.ts `kvbmDiskCleanupPrelude`):
 * `DiskStorage::new` creates `DYN_KVBM_DISK_CACHE_DIR` if missing (create_dir_all), creates the file with mkostemp
 * (template {@link KVBM_DISK_FILE_PREFIX}`XXXXXX`), fallocates it to the tier's full size (zero-filling only under
 * `DYN_KVBM_DISK_ZEROFILL_FALLBACK`, which is not rendered), and `nixl_register` unlinks it right after registering it
 * with NIXL ("the file will be deleted when fd closes"); `Drop` unlinks it too. So a live worker's file has no name after
 * its start, and a file still named in the directory belongs to a process killed between mkostemp and registration (an
 * OOM kill or a failed probe at start-up): nothing removes it, and with a shared directory it holds the tier's full size
 * on the node's NVMe until someone does. Per-pod directories (a hostPath subdirectory per pod UID) and the start-up
 * sweep remove it. An emptyDir, which the kubelet removes with the pod, would be the simpler home, but it lives under
 * the kubelet's root directory, on the local NVMe only where the node puts that there (EKS's setup-local-disks raid0
 * does, an on-prem data filesystem such as a DGX's /raid does not), and it counts as the pod's ephemeral storage, so a
 * multi-TiB tier would have the kubelet evict its own worker.
 */
export const kvbmDiskFileLifecycle: readonly { source: Source; note: string }[] = [
    { source: KVBM_DISK, note: "DiskStorage::new (create_dir_all, mkostemp template, allocate_file), unlink, Drop" },
    {
        source: `${D}:lib/llm/src/block_manager/storage/nixl.rs`,
        note: "NixlRegisterableStorage for DiskStorage: nixl_register then self.unlink()",
    },
    { source: `${D}:lib/memory/src/disk.rs`, note: 'the same template; "we unlink the file only after we\'ve registered it with NIXL"' },
];

/** huggingface_hub as every engine image carries it: where weights are cached. */
export const huggingfaceHub: ComponentFacts = {
    component: "huggingface-hub",
    version: "03333b68",
    flags: {},
    env: {
        HF_HOME: {
            default: "~/.cache/huggingface",
            source: "huggingface/huggingface_hub@03333b689b5a2dee604676791c0792ede6246a31:src/huggingface_hub/constants.py#HF_HOME",
            note: "the hub cache is $HF_HOME/hub (models--<org>--<name>/snapshots/<rev>), the layout Dynamo's model-cache guide uses",
        },
        HF_TOKEN: {
            source: "huggingface/huggingface_hub@08060680c37127e5f828939448dff7d574c3bbab:src/huggingface_hub/utils/_auth.py#_get_token_from_environment",
            note: "the token get_token() uses for every Hub request, snapshot_download included (HUGGING_FACE_HUB_TOKEN only as a legacy fallback); a gated repository answers 401/403 without it. Rendered from a Secret (secretKeyRef), never as a value",
        },
    },
};

/**
 * The platform's model pre-stage (lib/faststart.ts `prestageDaemonSet`), run with the engine image's Python: the whole
 * script is part of the entry point, so any other `python3 -c` stays unknown.
 */
export const MODEL_PRESTAGE_ARGV = [
    "python3",
    "-c",
    "import sys\nfrom huggingface_hub import snapshot_download\nargs = sys.argv[1:]\njobs = []\nfor flag, value in zip(args[0::2], args[1::2]):\n    if flag == '--model':\n        jobs.append([value, None])\n    elif flag == '--revision' and jobs:\n        jobs[-1][1] = value\n    else:\n        sys.exit('unknown argument ' + flag)\nfor repo, rev in jobs:\n    print('pre-staging', repo, rev or 'main', '->', snapshot_download(repo_id=repo, revision=rev), flush=True)\n",
] as const;

/**
 * The user every Dynamo runtime image runs as: `USER dynamo`, created by `useradd -m -s /bin/bash -g 0 dynamo` and
 * checked to be uid 1000 (primary group 0, "for OpenShift compatibility"); the `-efa` variant switches back to
 * `USER dynamo` at its end (aws.Dockerfile). The Dynamo operator adds only `fsGroup: 1000` to the pod
 * (deploy/operator/internal/dynamo/graph.go `applyDefaultSecurityContext`), and fsGroup changes nothing on a hostPath
 * volume (kubelet's hostPath mounter reports `Managed: false` and its SetUp only type-checks; a DirectoryOrCreate
 * directory is made `os.MkdirAll(path, 0755)` as root: {@link HOSTPATH_MAKEDIR}). So a hostPath folder the worker or the
 * pre-stage writes must be handed to uid 1000 first (lib/faststart.ts `hostPathOwnerInitContainers`).
 */
export const DYNAMO_IMAGE_USER = {
    uid: 1000,
    gid: 0,
    /** Supplementary group the operator's pod-level `fsGroup` adds. */
    fsGroup: 1000,
    source: `${D}:container/templates/dynamo_runtime.Dockerfile#L14-L20` as Source,
    also: [
        `${D}:container/templates/dynamo_runtime.Dockerfile#L98` as Source,
        `${D}:container/templates/aws.Dockerfile#L65` as Source,
        `${D}:deploy/operator/internal/dynamo/graph.go#applyDefaultSecurityContext` as Source,
    ],
} as const;

/** How kubelet creates a `DirectoryOrCreate` hostPath that does not exist: owner root:root, mode 0755, never chowned. */
export const HOSTPATH_MAKEDIR = {
    uid: 0,
    gid: 0,
    mode: 0o755,
    source: "kubernetes/kubernetes@006d84d2c69114f79008e6d272294f64879a1e5b:pkg/volume/hostpath/host_path.go#makeDir" as Source,
} as const;

/**
 * How kubelet creates a missing `subPath`/`subPathExpr` directory inside a volume (the KVBM disk tier's per-pod
 * `<kvbm>/<pod UID>`): `mkdirat` with the mode of the volume's root, then `fchmod` to exactly that mode (umask undone,
 * setgid kept), as root. Under a root of {@link HOSTPATH_OWNER} (2775, group 0) the new directory is root-owned,
 * group 0 (setgid inheritance), mode 2775: writable by the image user through its group 0. It is created when the
 * container that mounts it starts, so after the init container that owns the root. Read through code search, not at
 * the tag: kubelet_pods.go `makeMounts` (`perm := fileinfo.Mode()` of the volume root, then `SafeMakeDir`).
 */
export const SUBPATH_MAKEDIR = {
    modeFrom: "volume root",
    source: "kubernetes/kubernetes@v1.33.0:pkg/volume/util/subpath/subpath_linux.go#doSafeMakeDir" as Source,
} as const;

/** Owner, group and mode a writable hostPath folder of the Dynamo images gets: setgid 2775 so new entries stay group 0. */
export const HOSTPATH_OWNER = { uid: DYNAMO_IMAGE_USER.uid, gid: DYNAMO_IMAGE_USER.gid, mode: 0o2775 } as const;

/**
 * Folders (container paths) the platform hands to the image user: the model cache and the KVBM disk tier
 * (lib/faststart.ts `MODEL_CACHE_MOUNT`, `KVBM_DISK_MOUNT`).
 */
export const OWNED_HOSTPATH_MOUNTS = ["/models", "/kvbm"] as const;

/**
 * argv that gives one existing folder to {@link HOSTPATH_OWNER}: GNU `install -d` on an existing directory does not
 * preserve it (coreutils/gnulib@0250386985b837c967b3682affd27965a0bc9d6d:lib/mkdir-p.c `make_dir_parents`,
 * preserve_existing false) and sets owner then mode (coreutils/gnulib@0632e115747ff96e93330c88f536d7354a7ce507:
 * lib/dirchownmod.c: fchown, then fchmod), so it needs CAP_CHOWN and, once the owner is 1000, CAP_FOWNER. Nothing
 * below the folder is touched. The runtime images are Ubuntu-based and carry coreutils `install`.
 */
export function hostPathOwnerArgv(mount: (typeof OWNED_HOSTPATH_MOUNTS)[number]): string[] {
    const o = HOSTPATH_OWNER;
    return ["install", "-d", "-o", String(o.uid), "-g", String(o.gid), "-m", o.mode.toString(8).padStart(4, "0"), mount];
}

/** The pre-stage DaemonSet's holding container: keeps the pod, and so the worker image, on the node. */
export const HOLD_ARGV = ["sleep", "infinity"] as const;

const PLATFORM_FS: Source = "inference-platform/platform@0.1.0:lib/faststart.ts#prestageDaemonSet";

export const platformModelCache: ComponentFacts = {
    component: "platform-model-cache",
    version: "0.1.0",
    flags: {
        "--model": { takesValue: true, source: PLATFORM_FS, note: "a Hugging Face repo id, repeatable" },
        "--revision": {
            takesValue: true,
            source: PLATFORM_FS,
            note: "the preceding --model's revision, passed to snapshot_download(revision=...); absent: main",
        },
    },
    env: {
        POD_UID: {
            source: "kubernetes/kubernetes@v1.33.0:pkg/kubelet/container/helpers.go#ExpandContainerVolumeMounts",
            note: "fieldRef metadata.uid on a worker with a KVBM disk tier (lib/faststart.ts workerFastStart): read by the kubelet, which expands the kvbm-disk volumeMount's subPathExpr $(POD_UID) from the container's env (a missing value fails the container), so each pod gets its own <localNvme>/kvbm/<uid> directory; the engine does not read it",
        },
    },
};

export const kvbmEntrypoints: readonly EntrypointFacts[] = [
    {
        id: "platform-model-cache",
        argv: MODEL_PRESTAGE_ARGV,
        components: ["platform-model-cache", "huggingface-hub", "python"],
        source: PLATFORM_FS,
    },
    { id: "platform-hold", argv: HOLD_ARGV, components: [], source: PLATFORM_FS },
    // One entry point per owned folder: the whole argv is fixed, so any other path or mode stays unknown.
    ...OWNED_HOSTPATH_MOUNTS.map((m) => ({
        id: `platform-hostpath-owner${m.replaceAll("/", "-")}`,
        argv: hostPathOwnerArgv(m),
        components: [],
        source: "inference-platform/platform@0.1.0:lib/faststart.ts#hostPathOwnerInitContainers" as Source,
    })),
];

/**
 * Dynamo Snapshot (checkpoint/restore) support by backend and worker shape, as the snapshot guide states it. The pinned
 * 1.5.0 platform chart no longer bundles the snapshot chart, snapshot-agent image or DynamoCheckpoint CRD
 * (config/versions.ts `dynamoPlatform`), so the product renders none of it (config/endpoint.ts `snapshot-*`).
 */
export const snapshotSupport: Readonly<Record<"vllm" | "sglang" | "trtllm", { singleGpu: string; multiGpu: string }>> = {
    vllm: { singleGpu: "supported", multiGpu: "highly experimental" },
    sglang: { singleGpu: "supported", multiGpu: "work in progress" },
    trtllm: { singleGpu: "experimental (aggregated text worker only)", multiGpu: "work in progress" },
};
