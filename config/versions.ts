/**
 * Registry prefix of the images this repository builds (`services/<name>/Dockerfile`). An entry of
 * {@link versions} whose image lives under it is ours: `npm run images` (tools/images.ts) lists it and
 * .github/workflows/images.yml builds it on pull requests and pushes `<image>:<version>` (immutable) on main.
 * Change the registry or namespace here only; the workflow logs in to this prefix's host with `GITHUB_TOKEN`,
 * which only ghcr.io accepts.
 */
export const REGISTRY = "ghcr.io/inference-platform";

/**
 * The NVIDIA Network Operator release: its chart version and the release set's image tags
 * (`network-operator-v<release>`, Mellanox/network-operator@v26.1.2:hack/release.yaml) move together.
 */
const NETWORK_OPERATOR_RELEASE = "26.1.2";
/** Tag of the images the Network Operator release set ships (nvcr.io/nvidia/mellanox/<image>:<tag>). */
const NETWORK_OPERATOR_SET_TAG = `network-operator-v${NETWORK_OPERATOR_RELEASE}` as const;
/**
 * The NVIDIA Dynamo release: platform chart, runtime images (and their `-efa` variants) and the planner image are
 * one release ({@link versions.dynamoPlatform}).
 */
const DYNAMO_RELEASE = "1.5.0";
/**
 * The Envoy Gateway release of the gateway set: its CRD chart and its controller chart are one release
 * ({@link versions.gatewayCrds}, {@link versions.envoyGateway}; chart and app version = the release tag).
 */
const ENVOY_GATEWAY_RELEASE = "v1.9.2";
/**
 * The Agent Router (Envoy AI Gateway) release of the gateway set: its CRD chart and its controller chart are one release
 * ({@link versions.aiGatewayCrds}, {@link versions.aiGateway}; chart and app version = the release tag).
 */
const AI_GATEWAY_RELEASE = "v1.2.0";

/**
 * Every pinned upstream version in one place. Charts are installed by exact version; images are
 * referenced by exact tag. Each entry names where the pin comes from. Bump here, nowhere else, and once: a release that
 * several pins share is one constant ({@link DYNAMO_RELEASE}, {@link NETWORK_OPERATOR_RELEASE},
 * {@link ENVOY_GATEWAY_RELEASE}, {@link AI_GATEWAY_RELEASE}). The render reads
 * these pins, and the policy pack and `npm run upstream-check` judge against the facts recorded in upstream/ for the
 * pinned version (image variants upstream/images.ts, chart values upstream/charts, gateway sets upstream/gateway.ts).
 * A bump without facts for the new version fails test/upstream-facts.test.ts and is refused by the pack; recording
 * those facts (read at the new tag, with their source) is part of the bump, never a second copy of the version.
 */
export const versions = {
    /**
     * NVIDIA Network Operator Helm chart (https://helm.ngc.nvidia.com/nvidia, chart `network-operator`). 26.1.2 is the
     * newest patch of the 26.1 line (tag v26.1.2, 2026-08-11; `deployment/network-operator/Chart.yaml` version 26.1.2); its
     * values keys equal 26.1.0's (upstream/charts/network-operator.ts). The chart no longer renders a NicClusterPolicy; we
     * own that CR. The CRDs we validate against are from the 26.7 development line and use no
     * field newer than it.
     */
    networkOperator: { repo: "https://helm.ngc.nvidia.com/nvidia", chart: "network-operator", version: NETWORK_OPERATOR_RELEASE },
    /**
     * Mellanox k8s-rdma-shared-dev-plugin image, pinned by its own upstream tag so the version policy can prove
     * it (minimum recorded in upstream/rdma-device-plugin.ts): >= v1.4.0 for the kubelet-restart re-registration fix
     * (PR #82), >= v1.1.0 for fail-on-missing-devices
     * (PR #24/#26); v1.5.3 is the latest tag (Mellanox/k8s-rdma-shared-dev-plugin@410b0f32 = v1.5.3). The release set's own build is
     * `nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin:network-operator-v26.1.2` (hack/release.yaml).
     */
    rdmaSharedDevicePlugin: { repository: "ghcr.io/mellanox", image: "k8s-rdma-shared-dev-plugin", version: "v1.5.3" },
    /**
     * Components the Network Operator release ships and tests together, exactly as its release manifest lists them:
     * `nvcr.io/nvidia/mellanox/<image>:network-operator-v26.1.2` (Mellanox/network-operator@v26.1.2:hack/release.yaml,
     * entries nvIpam, CniPlugins, Multus, Ipoib).
     */
    nvIpam: { repository: "nvcr.io/nvidia/mellanox", image: "nvidia-k8s-ipam", version: NETWORK_OPERATOR_SET_TAG },
    /** Standard CNI plugins deployed through NicClusterPolicy.spec.secondaryNetwork (same release set). */
    cniPlugins: { repository: "nvcr.io/nvidia/mellanox", image: "plugins", version: NETWORK_OPERATOR_SET_TAG },
    /**
     * Multus deployed through NicClusterPolicy.spec.secondaryNetwork: the release set's own image. The operator's Multus
     * DaemonSet is the thin plugin (`/install_multus --type thin`, then `/thin_entrypoint`;
     * Mellanox/network-operator@v26.1.2:manifests/state-multus-cni/0050-multus-ds.yml), which is what the release set's
     * image is built for; the upstream `-thick` build runs the thick multus daemon instead.
     */
    multus: { repository: "nvcr.io/nvidia/mellanox", image: "multus-cni", version: NETWORK_OPERATOR_SET_TAG },
    /** IPoIB CNI deployed through NicClusterPolicy.spec.secondaryNetwork (same release set). */
    ipoibCni: { repository: "nvcr.io/nvidia/mellanox", image: "ipoib-cni", version: NETWORK_OPERATOR_SET_TAG },
    /**
     * NVIDIA GPU Operator Helm chart (https://helm.ngc.nvidia.com/nvidia, chart `gpu-operator`).
     * GPUDirect RDMA: DMA-BUF (open kernel modules) by default, legacy nvidia-peermem selectable
     * (NVIDIA/cloud-native-docs gpu-operator/gpu-operator-rdma.rst). Release tag NVIDIA/gpu-operator@v25.10.1 exists (newer
     * lines v26.3.x and v26.7.0 exist too; moving is a tested upgrade, not a pin fix).
     */
    gpuOperator: { repo: "https://helm.ngc.nvidia.com/nvidia", chart: "gpu-operator", version: "v25.10.1" },
    /**
     * AWS EFA device plugin chart (aws/eks-charts `stable/aws-efa-k8s-device-plugin`, chart v0.5.30 / image
     * v0.5.20: `Chart.yaml` at aws/eks-charts@bfe91c4b, first released in repo tag v0.0.241). Its DaemonSet only runs on `supportedInstanceLabels.values`; we set that
     * list explicitly from the node groups so the allowlist provably contains them.
     */
    efaDevicePlugin: { repo: "https://aws.github.io/eks-charts", chart: "aws-efa-k8s-device-plugin", version: "v0.5.30" },
    /**
     * EKS managed add-ons. `vpc-cni` is pinned: EFA-only interfaces need VPC CNI >= 1.18.5 (EKS node-efa guide);
     * v1.20.1-eksbuild.3 is the version the EKS user guide's vpc-add-on-create page
     * names (awsdocs/amazon-eks-user-guide PR #1107). `null` = the EKS default for the cluster's pinned
     * Kubernetes version (`aws eks describe-addon-versions --kubernetes-version <v>`), fixed when created.
     */
    eksAddons: {
        "vpc-cni": "v1.20.1-eksbuild.3",
        coredns: null,
        "kube-proxy": null,
        "eks-pod-identity-agent": null,
        "aws-ebs-csi-driver": null,
    },
    /**
     * Agent Router (Envoy AI Gateway) and Envoy Gateway, pinned as ONE compatible set (the AI Gateway
     * version table): Agent Router v1.2.0 (2026-10-07) is built against Envoy Gateway v1.9.2, Envoy v1.39.1 and
     * Gateway API v1.6.1. v1.2.0 rather than v1.1.0 because it fixes usage lost when a client disconnects right
     * after the last SSE frame (ai-gateway#2571) and per-tenant QuotaPolicy buckets (ai-gateway#2551), and it
     * keeps the v1.1.0 `x-ai-eg-model` overwrite fix (ai-gateway#2410). Confirmed: theagentrouter/agent-router@826c03c6
     * release-notes/v1.2.0.md ("moves to Envoy Gateway v1.9.2, Gateway API v1.6"; charts and images keep their names). Upgrade one minor at a time, all four
     * charts together. Chart and app version = the release tag (OCI on Docker Hub). The CRDs in
     * upstream CRDs we validate against are EG v1.9.0 and AI Gateway v1.1.0; v1.2.0 only adds optional fields (schemas SOURCE.md).
     */
    gatewayCrds: { chart: "oci://docker.io/envoyproxy/gateway-crds-helm", version: ENVOY_GATEWAY_RELEASE },
    /**
     * cert-manager (the tenant edge's certificate: ACME DNS-01 or the site's CA; lib/edge.ts). Jetstack's chart
     * repository; chart and app version are the release tag. Values keys in upstream/charts/cert-manager.ts.
     */
    certManager: { repo: "https://charts.jetstack.io", chart: "cert-manager", version: "v1.19.1" },
    /**
     * AWS Load Balancer Controller (EKS spokes: provisions the gateway proxy's Network Load Balancer). aws/eks-charts
     * `stable/aws-load-balancer-controller` chart 3.5.0, `appVersion: v3.5.0`
     * (kubernetes-sigs/aws-load-balancer-controller@v3.5.0:helm/aws-load-balancer-controller/Chart.yaml, the chart's
     * source). Values keys in upstream/charts/aws-load-balancer-controller.ts; IAM policy in lib/aws-load-balancer-controller.ts.
     */
    awsLoadBalancerController: { repo: "https://aws.github.io/eks-charts", chart: "aws-load-balancer-controller", version: "3.5.0" },
    envoyGateway: { chart: "oci://docker.io/envoyproxy/gateway-helm", version: ENVOY_GATEWAY_RELEASE },
    aiGatewayCrds: { chart: "oci://docker.io/envoyproxy/ai-gateway-crds-helm", version: AI_GATEWAY_RELEASE },
    aiGateway: { chart: "oci://docker.io/envoyproxy/ai-gateway-helm", version: AI_GATEWAY_RELEASE },
    /** Gateway API release bundled by Envoy Gateway v1.9.x's gateway-crds-helm (documentation of the set; not installed separately). */
    gatewayApi: { version: "v1.6.1" },
    /**
     * Valkey (Redis-compatible, BSD) for the auth service's limit counters and concurrency leases. 8.1.x speaks
     * the Redis 7.2 protocol and scripting the auth service is tested against; 8.1.11 released 2026-10-26
     * (https://valkey.io/download/releases/v8-1-11/).
     */
    valkey: { image: "docker.io/valkey/valkey", version: "8.1.11-alpine" },
    /**
     * The platform's auth service (services/auth, built from its Dockerfile and pushed by CI, .github/workflows/images.yml).
     * Lives under {@link REGISTRY}; the tag is immutable: bump with every released change of services/auth.
     */
    authService: { image: `${REGISTRY}/platform-auth`, version: "0.1.0", dockerfile: "services/auth/Dockerfile" },
    /**
     * NVIDIA Dynamo platform Helm chart (operator; Grove, KAI, NATS, etcd optional subcharts), NGC repo
     * `https://helm.ngc.nvidia.com/nvidia/ai-dynamo` (install-dynamo.md). 1.5.0 is a GA release: "Dynamo v1.5.0 GA
     * release, Released Sep 18, 2026 · UCX 1.21.x" with SGLang 0.5.18 (NIXL 1.4.0), TensorRT-LLM 1.3.0rc25 (NIXL 1.3.1),
     * vLLM 0.28.0 (NIXL 1.3.2) (docs.nvidia.com/dynamo/v1.5.0/reference/compatibility; the docs index lists v1.5.0 and
     * the v1.5.1 patch). Its release note: "CRD storage version promoted to v1beta1 and the v1alpha1 admission webhook
     * endpoints removed; ... dropping the bundled snapshot chart, snapshot-agent image and DynamoCheckpoint CRD".
     * The Dynamo CRDs we validate against are from `main` at ai-dynamo/dynamo@2a6da14c (2026-08-21), before the 1.5.0
     * branch cut; the DGD/DCD/DGDR/DGDSA v1beta1 storage schemas we render against are the ones 1.5.0 ships, and the
     * DynamoCheckpoint CRD there is not part of 1.5.0 (nothing here renders one). NATS and etcd stay off: the default
     * request/event planes are TCP/ZMQ and discovery is Kubernetes (platform values.yaml).
     * Engine facts are recorded for these engine pins in upstream/ (vllm.ts, sglang.ts, trtllm.ts).
     * Not yet 1.5.1: the patch exists ("Dynamo v1.5.1 Patch, Released Oct 6, 2026 ... Fixes ... min_tokens on
     * tokenizer-free SGLang decode workers ... Backend pins are unchanged from v1.5.0", docs.nvidia.com/dynamo/latest/
     * reference/compatibility; docs.nvidia.com/dynamo/v1.6.1/reference/releases lists its GitHub release; the v1.6.0
     * deprecations page shows the same SGLang 0.5.18 / NIXL 1.4.0, vLLM 0.28.0 / NIXL 1.3.2, TRT-LLM 1.3.0rc25 / NIXL
     * 1.3.1 "from v1.5.1"), and it touches our SGLang decode workers (`--skip-tokenizer-init`), but its artifact list
     * (runtime images and their `-efa` variants, dynamo-planner, the dynamo-platform chart at 1.5.1) could not be read
     * from a source here, so nothing proves every tag we would render exists. Bump all of them together once the
     * release-artifacts page or the NGC tags are read, with the facts that name 1.5.0 (upstream/images.ts, compat.ts,
     * dynamo.ts, charts/dynamo-platform.ts) and the pack's verified chart versions.
     */
    dynamoPlatform: { repo: "https://helm.ngc.nvidia.com/nvidia/ai-dynamo", chart: "dynamo-platform", version: DYNAMO_RELEASE },
    /**
     * Dynamo runtime images, one per engine, same release as {@link versions.dynamoPlatform}
     * (nvcr.io/nvidia/ai-dynamo, docs.nvidia.com/dynamo release-artifacts). Tags are plain semver: the DGD webhook
     * rejects a main image without a parseable version unless runtimeVersionOverride is set.
     * The frontend runs from the engine's runtime image (`python3 -m dynamo.frontend`), as upstream examples do.
     * `efaVersion`: the AWS EFA variant (EFA installer with libfabric/`fi_info`, aws-ofi-nccl; built by
     * container/templates/aws.Dockerfile, ai-dynamo/dynamo efa-on-aws.mdx Step 3). Since v1.3.0 the suffix is `-efa`
     * ("EFA variants retagged from -efa-amd64 to -efa", ai-dynamo/dynamo docs/fern/components/releases.data.ts; v1.3.1
     * moved "all three EFA images" to EFA installer 1.49.0). Workers on EFA pools run it (lib/dgd.ts `efaRuntimeImage`).
     */
    dynamoRuntime: {
        vllm: { image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime", version: DYNAMO_RELEASE, efaVersion: `${DYNAMO_RELEASE}-efa` },
        sglang: { image: "nvcr.io/nvidia/ai-dynamo/sglang-runtime", version: DYNAMO_RELEASE, efaVersion: `${DYNAMO_RELEASE}-efa` },
        trtllm: { image: "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime", version: DYNAMO_RELEASE, efaVersion: `${DYNAMO_RELEASE}-efa` },
    },
    /**
     * Dedicated Planner image: from Dynamo 1.1.0 backend images no longer ship the planner's dependencies
     * (ai-dynamo/dynamo PR #8407; examples/backends/<engine>/deploy/disagg_planner.yaml), so the backend image fails with
     * ModuleNotFoundError .
     */
    dynamoPlanner: { image: "nvcr.io/nvidia/ai-dynamo/dynamo-planner", version: DYNAMO_RELEASE },
    // The Mooncake master and store have no pin of their own: they run the endpoint's `dynamoRuntime` image, whose
    // mooncake-transfer-engine wheel ships `mooncake_master` and `mooncake.mooncake_store_service`
    // (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/pyproject.toml), so pool and clients share one release.
    /**
     * OpenTelemetry Collector Helm chart (open-telemetry/opentelemetry-helm-charts, chart `opentelemetry-collector`;
     * tag opentelemetry-collector-0.170.0: Chart.yaml version 0.170.0, appVersion 0.158.0, newest seen 2026-08-20) and the Kubernetes distribution image, which carries the
     * OTLP receiver, `otlphttp` exporter, `memory_limiter` and the `file_storage` extension for the persistent
     * sending queue (opentelemetry-collector-releases distributions/otelcol-k8s/manifest.yaml). The access-log
     * collector in front of metering (components/spoke/Metering.ts).
     */
    otelCollector: {
        repo: "https://open-telemetry.github.io/opentelemetry-helm-charts",
        chart: "opentelemetry-collector",
        version: "0.170.0",
        image: "otel/opentelemetry-collector-k8s",
        imageTag: "0.158.0",
        command: "otelcol-k8s",
    },
    /**
     * The metering service image (services/metering/Dockerfile, pushed by CI like {@link versions.authService}); the tag
     * is immutable: bump with every released change of services/metering.
     */
    meteringService: { image: `${REGISTRY}/platform-metering`, version: "0.1.0", dockerfile: "services/metering/Dockerfile" },
} as const;
