#!/bin/sh
# RDMA preflight: proves at pod start that the RDMA path is there, not only intended.
# Runs as an init container (same image as the workload) before NIXL/UCX or Mooncake start, and fails the pod
# with one line per problem instead of letting the transfer libraries fall back to TCP without an error.
#
# POSIX sh + awk only. Inputs (environment):
#   PREFLIGHT_FABRIC          infiniband (default) | efa
#   PREFLIGHT_HCAS            pinned HCAs as UCX writes them, "mlx5_0:1,mlx5_3:1" (port defaults to 1)   [infiniband]
#   PREFLIGHT_LINK_LAYER      expected port link layer, default "InfiniBand"                             [infiniband]
#   PREFLIGHT_MIN_RATE_GBPS   minimum port rate in Gb/s (gigabits, as /sys .../rate reports), default 0   [infiniband]
#   PREFLIGHT_GPU_NIC_MAP     "<gpu_bdf>=<nic_bdf>,..." from the pool's rail table; each visible GPU must
#                             find its PCIe-affine NIC in the pod (optional)                              [infiniband]
#   PREFLIGHT_MIN_DEVICES     minimum number of /dev/infiniband/uverbs* devices, default 1
#   PREFLIGHT_PRIVILEGED      1 = the container is privileged (sees every host device): the device count is then
#                             informational (also assumed when CAP_SYS_ADMIN is effective), default 0
#   PREFLIGHT_REQUIRE_IPC_LOCK 1 = CAP_IPC_LOCK must be effective (root + IPC_LOCK memlock path), default 0
#   PREFLIGHT_GPUS            GPUs the pod holds, default 0; > 0 adds the GPUDirect RDMA checks (InfiniBand: kernel
#                             mode and UCX registration, ucx_info required; EFA: FI_HMEM on the efa provider)
#   PREFLIGHT_GPUDIRECT       GPUDirect RDMA mode the spoke declares (platform:gpuOperator.gpuDirectRdma):
#                             dmabuf | peermem. Default: the file "gpudirect" next to this script (the
#                             rdma-preflight ConfigMap carries it, components/spoke/RdmaPreflight.ts)      [infiniband]
#   PREFLIGHT_MIN_MEMLOCK_BYTES accept a finite memlock limit of at least this many bytes; default: the
#                             limit must be unlimited
#   PREFLIGHT_IMAGE           the pod's image, named when a tool a check needs is missing from it
#   PREFLIGHT_EFA_BIN         where the AWS EFA installer puts libfabric's tools (fi_info) in the `-efa` images, which
#                             is not on PATH there; default /opt/amazon/efa/bin                            [efa]
#   PREFLIGHT_SYSFS / PREFLIGHT_PROC / PREFLIGHT_DEV  roots of /sys, /proc, /dev (tests point them at fake trees)
# Never skips silently: a check whose tool is missing from the image fails the pod naming the image and the tool.
# Exit status: 0 when every check passes, 1 when any fails (each failure is one "preflight: FAIL ..." line on stderr).

SYSFS=${PREFLIGHT_SYSFS:-/sys}
PROC=${PREFLIGHT_PROC:-/proc}
DEV=${PREFLIGHT_DEV:-/dev}
FABRIC=${PREFLIGHT_FABRIC:-infiniband}
LINK_LAYER=${PREFLIGHT_LINK_LAYER:-InfiniBand}
MIN_RATE=${PREFLIGHT_MIN_RATE_GBPS:-0}
MIN_DEVICES=${PREFLIGHT_MIN_DEVICES:-1}
IMAGE=${PREFLIGHT_IMAGE:-the pod image}
EFA_BIN=${PREFLIGHT_EFA_BIN:-/opt/amazon/efa/bin}
FAILED=0

fail() {
    echo "preflight: FAIL $*" >&2
    FAILED=1
}

# The workload's entrypoint raises the soft memlock limit the same way (root with SYS_RESOURCE, or a node whose
# LimitMEMLOCK=infinity makes the hard limit unlimited); do it here too so the check below sees what it will see.
ulimit -l unlimited 2>/dev/null || true

# 1. RDMA device nodes injected by the device plugin (rdma/rail_<i> or vpc.amazonaws.com/efa).
uverbs_count=0
for f in "$DEV"/infiniband/uverbs*; do
    [ -e "$f" ] && uverbs_count=$((uverbs_count + 1))
done
hca_count=0
for d in "$SYSFS"/class/infiniband/*; do
    [ -e "$d" ] && hca_count=$((hca_count + 1))
done
# A node with no RDMA hardware at all (a plain GPU server, or a pod scheduled off the RDMA pools): one line that
# says so, instead of one line per pinned HCA that cannot exist there.
if [ "$uverbs_count" -eq 0 ] && [ "$hca_count" -eq 0 ]; then
    echo "preflight: FAIL no RDMA device on this node: no $DEV/infiniband/uverbs* in the pod and no HCA under $SYSFS/class/infiniband (the node has no InfiniBand/EFA HCA, or its RDMA drivers are not loaded); fabric=$FABRIC needs one" >&2
    exit 1
fi
# A privileged container (EFA pods: lib/nixl.ts memlockPath) sees every device node of the host, so the count proves
# nothing about what the device plugin allocated to the pod: the count is then informational (still a FAIL when even
# the host has fewer). Privileged: PREFLIGHT_PRIVILEGED=1 (rendered from the container's securityContext) or
# CAP_SYS_ADMIN (bit 21) effective, which no unprivileged container of this platform holds.
privileged=0
[ "${PREFLIGHT_PRIVILEGED:-0}" = "1" ] && privileged=1
capeff_dev=$(awk '/^CapEff:/ { print $2 }' "$PROC/self/status" 2>/dev/null)
low_dev=$(echo "$capeff_dev" | awk '{ print substr($1, length($1) - 7) }')
case "$low_dev" in ''|*[!0-9a-fA-F]*) low_dev=0 ;; esac
[ $(( (0x$low_dev >> 21) & 1 )) -eq 1 ] && privileged=1
if [ "$uverbs_count" -eq 0 ]; then
    fail "no $DEV/infiniband/uverbs* in the pod: no RDMA device was injected (request the pool's RDMA resources in requests and limits)"
elif [ "$uverbs_count" -lt "$MIN_DEVICES" ]; then
    fail "$uverbs_count $DEV/infiniband/uverbs* device(s) in the pod, need at least $MIN_DEVICES"
elif [ "$privileged" -eq 1 ]; then
    echo "preflight: info privileged container: the $uverbs_count $DEV/infiniband/uverbs* device(s) seen are the host's, so the device check does not prove the pod's allocation of $MIN_DEVICES (informational; the kubelet admitted the pod only with its RDMA resource request)"
fi

# hca_of_pci <bdf>: prints the RDMA device whose PCI function is <bdf>, if any.
hca_of_pci() {
    for d in "$SYSFS"/class/infiniband/*; do
        [ -e "$d/device" ] || continue
        bdf=$(cd -P "$d/device" 2>/dev/null && pwd -P)
        if [ "${bdf##*/}" = "$1" ]; then
            echo "${d##*/}"
            return 0
        fi
    done
    return 1
}

# uverbs_of <hca>: the uverbs node name of an HCA (uverbsN), from sysfs.
uverbs_of() {
    for u in "$SYSFS"/class/infiniband/"$1"/device/infiniband_verbs/uverbs*; do
        [ -e "$u" ] && { echo "${u##*/}"; return 0; }
    done
    return 1
}

if [ "$FABRIC" = "infiniband" ]; then
    # 2. Every pinned HCA: present, its device node injected, port ACTIVE, right link layer, fast enough.
    old_ifs=$IFS
    IFS=,
    # shellcheck disable=SC2086 # split the comma list on purpose
    set -- ${PREFLIGHT_HCAS:-}
    IFS=$old_ifs
    for entry in "$@"; do
        hca=${entry%%:*}
        port=1
        case "$entry" in *:*) port=${entry#*:} ;; esac
        base="$SYSFS/class/infiniband/$hca"
        if [ ! -d "$base" ]; then
            fail "HCA $hca is missing: $base does not exist"
            continue
        fi
        node=$(uverbs_of "$hca")
        if [ -n "$node" ] && [ ! -e "$DEV/infiniband/$node" ]; then
            fail "HCA $hca: $DEV/infiniband/$node is not in the pod (its rail RDMA resource was not allocated)"
        fi
        pdir="$base/ports/$port"
        if [ ! -d "$pdir" ]; then
            fail "HCA $hca has no port $port ($pdir missing)"
            continue
        fi
        state=$(cat "$pdir/state" 2>/dev/null)
        case "$state" in
            *ACTIVE*) ;;
            *) fail "HCA $hca port $port state is \"${state:-unreadable}\", want ACTIVE" ;;
        esac
        layer=$(cat "$pdir/link_layer" 2>/dev/null)
        if [ "$layer" != "$LINK_LAYER" ]; then
            fail "HCA $hca port $port link layer is \"${layer:-unreadable}\", want $LINK_LAYER"
        fi
        rate_text=$(cat "$pdir/rate" 2>/dev/null)
        rate=$(echo "$rate_text" | awk '{ split($1, a, "."); print a[1] + 0 }')
        if [ -z "$rate_text" ] || [ "$rate" -lt "$MIN_RATE" ]; then
            fail "HCA $hca port $port rate is \"${rate_text:-unreadable}\", below the required $MIN_RATE Gb/s"
        fi
    done

    # 3. GPU <-> NIC affinity: each GPU the pod got must find its PCIe-affine rail NIC in the pod.
    if [ -n "${PREFLIGHT_GPU_NIC_MAP:-}" ]; then
        gpus_seen=0
        for g in "$PROC"/driver/nvidia/gpus/*; do
            [ -d "$g" ] || continue
            gpus_seen=$((gpus_seen + 1))
            gpu=$(echo "${g##*/}" | tr 'A-F' 'a-f')
            nic=$(echo ",$PREFLIGHT_GPU_NIC_MAP," | awk -v g="$gpu" 'BEGIN { RS = "," } { split($0, kv, "="); if (tolower(kv[1]) == g) { print tolower(kv[2]); exit } }')
            if [ -z "$nic" ]; then
                fail "GPU $gpu is not in the node pool's rail table (PREFLIGHT_GPU_NIC_MAP): the pod landed on a node of another model"
                continue
            fi
            hca=$(hca_of_pci "$nic")
            if [ -z "$hca" ]; then
                fail "GPU $gpu: its PCIe-affine rail NIC $nic is not an RDMA device on this node"
                continue
            fi
            node=$(uverbs_of "$hca")
            if [ -z "$node" ] || [ ! -e "$DEV/infiniband/$node" ]; then
                fail "GPU $gpu: its PCIe-affine rail NIC $hca ($nic) has no device node in the pod (request every rail resource)"
            fi
        done
        if [ "$gpus_seen" -eq 0 ]; then
            echo "preflight: warn no GPU listed under $PROC/driver/nvidia/gpus; GPU<->NIC affinity not checked"
        fi
    fi
fi

# 4. Memory locking: RDMA registration pins memory; a low RLIMIT_MEMLOCK makes ibv_reg_mr fail (ENOMEM) and
#    NCCL/UCX fall back (openucx/ucx#8229, NVIDIA/nvidia-container-toolkit#2037). The soft limit is what the engine
#    gets; a non-root user can raise it only up to the hard limit (setrlimit(2): raising the hard limit needs
#    CAP_SYS_RESOURCE), so a finite hard limit is named as the cause.
need=${PREFLIGHT_MIN_MEMLOCK_BYTES:-unlimited}
limits=$(awk '/^Max locked memory/ { print $4, $5 }' "$PROC/self/limits" 2>/dev/null)
soft=${limits%% *}
hard=${limits##* }
uid=$(awk '/^Uid:/ { print $2 }' "$PROC/self/status" 2>/dev/null)
# enough <value>: 0 when <value> satisfies $need
enough() {
    [ "$1" = "unlimited" ] && return 0
    [ "$need" = "unlimited" ] && return 1
    case "$1" in ''|*[!0-9]*) return 1 ;; esac
    [ "$1" -ge "$need" ]
}
want_text="unlimited"
[ "$need" != "unlimited" ] && want_text="at least $need bytes"
if [ -z "$limits" ]; then
    fail "memlock (ulimit -l): cannot read Max locked memory from $PROC/self/limits; want $want_text"
elif ! enough "$soft"; then
    if ! enough "$hard"; then
        fail "memlock (ulimit -l) is $soft bytes (hard limit $hard), want $want_text: uid ${uid:-unknown} cannot raise the hard limit; run as root with IPC_LOCK+SYS_RESOURCE (ulimit -l unlimited), or use a node pool with LimitMEMLOCK=infinity for containerd and kubelet"
    else
        fail "memlock (ulimit -l) is $soft bytes (hard limit $hard), want $want_text: the entrypoint must run ulimit -l unlimited before exec'ing the engine"
    fi
fi

# 5. CAP_IPC_LOCK (bit 14) effective, when the memlock path relies on it (a non-root container gets it only in
#    the bounding set: CapEff 0 for uid 1000, NVIDIA/nvidia-container-toolkit#2037).
if [ "${PREFLIGHT_REQUIRE_IPC_LOCK:-0}" = "1" ]; then
    capeff=$(awk '/^CapEff:/ { print $2 }' "$PROC/self/status" 2>/dev/null)
    low=$(echo "$capeff" | awk '{ print substr($1, length($1) - 3) }')
    case "$low" in ''|*[!0-9a-fA-F]*) low=0 ;; esac
    if [ $(( (0x$low >> 14) & 1 )) -ne 1 ]; then
        fail "CAP_IPC_LOCK is not effective (CapEff=${capeff:-unreadable}): run the container as root with capabilities.add [IPC_LOCK]"
    fi
fi

# 6. The transport library can see RDMA (UCX built without verbs picks tcp: ai-dynamo/dynamo PR #1314).
#    `ucx_info -d` prints one block per memory domain ("# Memory domain: mlx5_0", "register: ..., dmabuf, cost",
#    "memory types: host (access,reg,cache), cuda (reg,cache)") followed by its transports
#    (openucx/ucx@v1.21.0:src/tools/info/tl_info.c print_md_info; v1.21.0 is NIXL_UCX_REF of the Dynamo images,
#    ai-dynamo/dynamo container/context.yaml nixl_ucx_ref).
ucx_out=""
have_ucx=0
if command -v ucx_info >/dev/null 2>&1; then
    have_ucx=1
    ucx_out=$(ucx_info -d 2>/dev/null)
    if ! printf '%s\n' "$ucx_out" | grep -Eq 'Transport: (rc_mlx5|rc_verbs|dc_mlx5|ud_mlx5|ud_verbs|srd)([[:space:]]|$)'; then
        fail "ucx_info -d lists no RDMA transport (rc_mlx5, rc_verbs, dc_mlx5, ud_mlx5, ud_verbs, srd): UCX would run NIXL over tcp"
    fi
fi

# ucx_md <md> <field>: the text after "<field>:" in memory domain <md>'s block of `ucx_info -d`; "-" when the block
# exists without the field; nothing when there is no such memory domain.
ucx_md() {
    printf '%s\n' "$ucx_out" | awk -v md="$1" -v f="$2" '
        /^#[[:space:]]*Memory domain:/ { cur = $NF; if (cur == md) found = 1; next }
        cur == md { line = $0; sub(/^#[[:space:]]*/, "", line); if (index(line, f ":") == 1) { print substr(line, length(f) + 3); got = 1; exit } }
        END { if (found && !got) print "-" }'
}

# 7. GPUDirect RDMA: the rail HCAs must register CUDA memory in the declared mode, else NIXL/UCX stage every KV
#    block through host memory without an error. UCX v1.21.0 (src/uct/ib/base/ib_md.c uct_ib_md_open_common)
#    marks an ib memory domain CUDA-capable when a peer-memory driver file exists (peermem), or sets the dmabuf
#    register flag when ibv_reg_dmabuf_mr is supported; its cuda_copy domain exports CUDA memory as DMA-BUF when
#    the GPU reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (src/uct/cuda/cuda_copy/cuda_copy_md.c).
#    DMA-BUF needs the open GPU kernel modules and Linux >= 5.12; legacy peermem needs nvidia-peermem loaded
#    (NVIDIA GPU Operator "GPUDirect RDMA" docs).
if [ "$FABRIC" = "infiniband" ] && [ "${PREFLIGHT_GPUS:-0}" -gt 0 ] 2>/dev/null; then
    mode=${PREFLIGHT_GPUDIRECT:-}
    mode_file="$(dirname "$0")/gpudirect"
    if [ -z "$mode" ] && [ -r "$mode_file" ]; then
        mode=$(tr -d ' \n' < "$mode_file")
    fi
    hca_list=""
    for entry in "$@"; do hca_list="$hca_list${hca_list:+,}${entry%%:*}"; done
    case "$mode" in
        peermem)
            if [ ! -e "$SYSFS/kernel/mm/memory_peers/nv_mem/version" ] && [ ! -e "$SYSFS/module/nvidia_peermem/version" ] && [ ! -e "$SYSFS/module/nv_peer_mem/version" ]; then
                fail "GPUDirect RDMA mode peermem for HCA(s) $hca_list: nvidia_peermem is not loaded ($SYSFS/module/nvidia_peermem/version missing): UCX cannot register CUDA memory on the rails (GPU Operator driver.rdma.enabled=true loads it)"
            fi
            ;;
        dmabuf)
            release=$(cat "$PROC/sys/kernel/osrelease" 2>/dev/null)
            kver=$(echo "$release" | awk -F. '{ printf "%d", $1 * 1000 + $2 }')
            if [ -z "$release" ] || [ "$kver" -lt 5012 ]; then
                fail "GPUDirect RDMA mode dmabuf for HCA(s) $hca_list: kernel ${release:-unreadable} ($PROC/sys/kernel/osrelease) is older than 5.12, which DMA-BUF registration of GPU memory needs"
            fi
            nvver=$(head -n 1 "$PROC/driver/nvidia/version" 2>/dev/null)
            case "$nvver" in
                *"Open Kernel Module"*) ;;
                "") fail "GPUDirect RDMA mode dmabuf for HCA(s) $hca_list: $PROC/driver/nvidia/version is unreadable, so the open GPU kernel modules DMA-BUF needs cannot be proven" ;;
                *) fail "GPUDirect RDMA mode dmabuf for HCA(s) $hca_list: the GPU driver is the proprietary kernel module (\"$nvver\"); DMA-BUF needs the open GPU kernel modules (GPU Operator driver.kernelModuleType=open)" ;;
            esac
            ;;
        *)
            fail "GPUDirect RDMA mode is \"${mode:-unset}\" (PREFLIGHT_GPUDIRECT or $mode_file), want dmabuf or peermem: the pod holds GPUs and cannot prove GPU memory registration on HCA(s) $hca_list"
            ;;
    esac
    if [ "$have_ucx" -eq 1 ] && { [ "$mode" = "peermem" ] || [ "$mode" = "dmabuf" ]; }; then
        cuda_dmabuf=0
        printf '%s\n' "$ucx_out" | grep -Eq 'memory types:(.*[ ,])?cuda \([^)]*dmabuf' && cuda_dmabuf=1
        for hca in $(echo "$hca_list" | tr ',' ' '); do
            types=$(ucx_md "$hca" "memory types")
            if [ -z "$types" ]; then
                fail "HCA $hca: ucx_info -d shows no memory domain $hca: UCX cannot register memory on it (GPUDirect RDMA mode $mode)"
                continue
            fi
            if [ "$mode" = "peermem" ]; then
                if ! echo "$types" | grep -Eq '(^|[ ,])cuda( \(|,|$)'; then
                    fail "HCA $hca: UCX memory domain $hca cannot register CUDA memory in GPUDirect RDMA mode peermem (memory types: $types): KV would be staged through host memory"
                fi
            else
                reg=$(ucx_md "$hca" "register")
                case "$reg" in
                    *", dmabuf"*) ;;
                    *) fail "HCA $hca: UCX memory domain $hca cannot register DMA-BUF (register: $reg) in GPUDirect RDMA mode dmabuf: KV would be staged through host memory" ;;
                esac
                if [ "$cuda_dmabuf" -ne 1 ]; then
                    fail "HCA $hca: GPUDirect RDMA mode dmabuf but UCX's CUDA memory domain exports no DMA-BUF (no \"cuda (...dmabuf)\" in ucx_info -d memory types)"
                fi
            fi
        done
    elif [ "$have_ucx" -eq 0 ]; then
        fail "$IMAGE has no ucx_info on PATH: the pod holds GPUs and rail HCAs ($hca_list) but UCX's registration of CUDA memory (GPUDirect mode ${mode:-unset}) cannot be checked; use an image that carries ucx_info (upstream/images.ts provides)"
    fi
fi
# 8. EFA: libfabric's efa provider is there (else it falls back to sockets), and with GPUs it registers GPU memory
#    (FI_HMEM; without it KV is staged through host memory). The EFA installer puts fi_info in /opt/amazon/efa/bin,
#    which the `-efa` images do not put on PATH (ai-dynamo/dynamo@v1.5.0:container/templates/aws.Dockerfile).
if [ "$FABRIC" = "efa" ]; then
    fi_info_bin=$(command -v fi_info 2>/dev/null)
    [ -z "$fi_info_bin" ] && [ -x "$EFA_BIN/fi_info" ] && fi_info_bin="$EFA_BIN/fi_info"
    if [ -z "$fi_info_bin" ]; then
        fail "$IMAGE has no fi_info (not on PATH, not in $EFA_BIN): the EFA provider check cannot run; use the -efa image variant (upstream/images.ts)"
    elif ! "$fi_info_bin" -p efa -t FI_EP_RDM >/dev/null 2>&1; then
        fail "fi_info -p efa -t FI_EP_RDM finds no EFA provider: libfabric would fall back to the sockets (TCP) provider"
    elif [ "${PREFLIGHT_GPUS:-0}" -gt 0 ] 2>/dev/null && ! "$fi_info_bin" -p efa -t FI_EP_RDM -c FI_HMEM >/dev/null 2>&1; then
        fail "fi_info -p efa -t FI_EP_RDM -c FI_HMEM finds no EFA provider that registers GPU memory: the pod holds ${PREFLIGHT_GPUS} GPU(s) and KV would be staged through host memory (efa_nv_peermem or DMA-BUF missing on the node)"
    fi
fi

if [ "$FAILED" -ne 0 ]; then
    exit 1
fi
echo "preflight: OK fabric=$FABRIC devices=$uverbs_count hcas=${PREFLIGHT_HCAS:-none} memlock=$soft${mode:+ gpudirect=$mode}"
exit 0
