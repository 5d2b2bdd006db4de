import { ENDPOINT_LABEL, type PoolPlacement } from "./dgd";
import { type EnvVar, memlockPath, MOONCAKE_MASTER_PORT, MOONCAKE_METRICS_PORT, mooncakeEnv, rdmaResources, wrappedCommand } from "./nixl";
import { type ContainerSpec, preflightInitContainer, preflightVolume } from "./preflight";
import { type BundledVersionFact, bundledVersions, masterPublishesKvEvents } from "../upstream/compat";

/**
 * A Mooncake host-RAM KV pool for one endpoint, as plain Kubernetes objects: the master (Deployment + ClusterIP
 * Service; RPC coordinator, no data path, no GPU) and the store pods that contribute DRAM on the pool's GPU nodes
 * and serve it over the rail HCAs. Shapes follow kvcache-ai/Mooncake
 * docs/source/deployment/kubernetes-deployment-guide/mooncake-on-kubernetes.md, with the RDMA plumbing that page
 * leaves out (rail resources instead of hostPath /dev/infiniband, memlock path, preflight).
 */

/** Object names of an endpoint's pool. */
export function mooncakeNames(endpoint: string) {
    return { master: `${endpoint}-mooncake-master`, store: `${endpoint}-mooncake-store`, clientConfig: `${endpoint}-mooncake-client` };
}

/** `host:port` of an endpoint's Mooncake master Service (cluster DNS). */
export function mooncakeMasterAddress(endpoint: string, namespace: string): string {
    return `${mooncakeNames(endpoint).master}.${namespace}.svc.cluster.local:${MOONCAKE_MASTER_PORT}`;
}

/** ZMQ PUB port the master publishes KV events on (`--kv_events_bind_endpoint`; 5557 in Dynamo's HiCache guide). */
export const MOONCAKE_KV_EVENTS_PORT = 5557;

/**
 * The master's KV-event endpoint as the Dynamo frontend dials it (`DYN_MOONCAKE_KV_EVENTS_ENDPOINT`), or undefined when
 * the pool image's Mooncake is not proven to publish KV events: `--enable_kv_events` exists from Mooncake v0.3.12
 * (kvcache-ai/Mooncake@v0.3.12.post1:mooncake-store/src/master.cpp `DEFINE_bool(enable_kv_events, false, ...)`), and
 * gflags refuses an unknown flag at start-up, so it is only rendered for a master whose release is recorded
 * (upstream/compat.ts `masterPublishesKvEvents`).
 */
export function mooncakeKvEventsEndpoint(
    endpoint: string,
    namespace: string,
    image: string,
    facts: readonly BundledVersionFact[] = bundledVersions,
): string | undefined {
    if (!masterPublishesKvEvents(image, facts)) return undefined;
    return `tcp://${mooncakeNames(endpoint).master}.${namespace}.svc.cluster.local:${MOONCAKE_KV_EVENTS_PORT}`;
}

/** Store service port (`mooncake_store_service --port`, 8088 in Mooncake's Kubernetes guide). */
export const MOONCAKE_STORE_PORT = 8088;

/**
 * Pod memory beyond the segment a store pod needs (GiB): the Python service, the 64 MiB local buffer and
 * allocator slack. The segment must stay below the memory limit (Mooncake Kubernetes guide, "Capacity").
 */
export const STORE_MEMORY_HEADROOM_GIB = 16;

/** Inputs of {@link buildMooncake} (and components/spoke/MooncakeStore.ts): one endpoint's Mooncake pool. */
export interface MooncakeArgs {
    /** Endpoint name: names the master and store objects ({@link mooncakeNames}) and their `app.kubernetes.io/instance`. */
    endpoint: string;
    /** Namespace of the master and stores (the inference namespace: the workers reach the master there). */
    namespace: string;
    /**
     * Image of master, stores and their preflight: the endpoint's own Dynamo runtime image, whose Mooncake wheel ships
     * `mooncake_master` and the store service (programs/serving.ts), so pool and clients run one Mooncake release.
     */
    image: string;
    /** The endpoint's node pool: stores run on its GPU nodes over its rail HCAs (fabric, memlock, selector, tolerations). */
    pool: PoolPlacement;
    /** Host DRAM each store pod contributes, in GiB (MOONCAKE_GLOBAL_SEGMENT_SIZE). */
    segmentSizeGiB: number;
    /** Store pods (`kvPool.storeReplicas`), at most one per node: at most `poolNodes`. */
    storeReplicas: number;
    /** Nodes in the pool; at most one store per node. */
    poolNodes: number;
    /** Lowest rail link rate the stores' preflight accepts, Gb/s (gigabits per second; `platform:backend.minLinkRateGbps`). */
    minLinkRateGbps: number;
    /**
     * Node selector of the CPU nodes the master runs on (no GPU, no RDMA data path). Unset or empty: no selector,
     * so it lands on any untainted node.
     */
    systemNodeSelector?: Record<string, string>;
    /** Version facts the master's KV-event support is decided from (upstream/compat.ts; tests plant their own). */
    versionFacts?: readonly BundledVersionFact[];
}

/** Labels of one part of the pool. */
function labels(endpoint: string, component: "master" | "store"): Record<string, string> {
    return {
        "app.kubernetes.io/name": `mooncake-${component}`,
        "app.kubernetes.io/instance": endpoint,
        "app.kubernetes.io/part-of": "inference-platform",
        [ENDPOINT_LABEL]: endpoint,
    };
}

/** The manifests of one endpoint's Mooncake pool (master Deployment, master Service, store Deployment). */
export interface MooncakeManifests {
    masterDeployment: Manifest;
    masterService: Manifest;
    storeDeployment: Manifest;
}

/** A Kubernetes object as plain data, read by tests and the component by path. */
// biome-ignore lint/suspicious/noExplicitAny: a manifest is arbitrary JSON, indexed by path where it is read
type Manifest = Record<string, any>;

/**
 * Builds the pool.
 *
 * @throws Error when more store replicas are asked than the pool has nodes (one store per node: they contribute
 *   host RAM, two on one node would compete for it), or on EFA pools (see {@link mooncakeEnv})
 */
export function buildMooncake(a: MooncakeArgs): MooncakeManifests {
    if (a.storeReplicas > a.poolNodes) {
        throw new Error(
            `endpoint ${a.endpoint}: kvPool.storeReplicas ${a.storeReplicas} exceeds the ${a.poolNodes} node(s) of pool ${a.pool.name}; at most one store per node`,
        );
    }
    const n = mooncakeNames(a.endpoint);
    const master = mooncakeMasterAddress(a.endpoint, a.namespace);
    const ml = labels(a.endpoint, "master");
    const kvEvents = !!mooncakeKvEventsEndpoint(a.endpoint, a.namespace, a.image, a.versionFacts);
    const masterArgs = [
        "--rpc_address",
        "$(POD_IP)",
        "--rpc_port",
        String(MOONCAKE_MASTER_PORT),
        "--metrics_port",
        String(MOONCAKE_METRICS_PORT),
    ];
    if (kvEvents) masterArgs.push("--enable_kv_events=true", "--kv_events_bind_endpoint", `tcp://0.0.0.0:${MOONCAKE_KV_EVENTS_PORT}`);
    const kvEventsPort = kvEvents ? [{ name: "kv-events", containerPort: MOONCAKE_KV_EVENTS_PORT }] : [];
    const sl = labels(a.endpoint, "store");

    const masterDeployment = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: n.master, namespace: a.namespace, labels: ml },
        spec: {
            replicas: 1,
            selector: { matchLabels: { "app.kubernetes.io/name": "mooncake-master", "app.kubernetes.io/instance": a.endpoint } },
            template: {
                metadata: { labels: ml },
                spec: {
                    ...(a.systemNodeSelector && Object.keys(a.systemNodeSelector).length
                        ? { nodeSelector: { ...a.systemNodeSelector } }
                        : {}),
                    containers: [
                        {
                            name: "master",
                            image: a.image,
                            command: ["mooncake_master"],
                            args: masterArgs,
                            env: [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
                            ports: [
                                { name: "rpc", containerPort: MOONCAKE_MASTER_PORT },
                                { name: "metrics", containerPort: MOONCAKE_METRICS_PORT },
                                ...kvEventsPort,
                            ],
                            readinessProbe: { tcpSocket: { port: MOONCAKE_MASTER_PORT }, initialDelaySeconds: 10, periodSeconds: 10 },
                        },
                    ],
                },
            },
        },
    };
    const masterService = {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: n.master, namespace: a.namespace, labels: ml },
        spec: {
            type: "ClusterIP",
            selector: { "app.kubernetes.io/name": "mooncake-master", "app.kubernetes.io/instance": a.endpoint },
            ports: [
                { name: "rpc", port: MOONCAKE_MASTER_PORT, targetPort: MOONCAKE_MASTER_PORT },
                { name: "metrics", port: MOONCAKE_METRICS_PORT, targetPort: MOONCAKE_METRICS_PORT },
                ...kvEventsPort.map((p) => ({ name: p.name, port: p.containerPort, targetPort: p.containerPort })),
            ],
        },
    };

    const memlock = memlockPath(a.pool.fabric, a.pool.memlockUnlimited);
    const rdma = rdmaResources(a.pool.fabric, 0);
    const memory = `${a.segmentSizeGiB + STORE_MEMORY_HEADROOM_GIB}Gi`;
    const env: EnvVar[] = mooncakeEnv(a.pool.fabric, master, { kind: "store", segmentSizeGiB: a.segmentSizeGiB });
    const store: ContainerSpec = {
        name: "store",
        image: a.image,
        command: wrappedCommand(memlock.prelude, ["python3", "-m", "mooncake.mooncake_store_service"]),
        args: ["--port", String(MOONCAKE_STORE_PORT)],
        env,
        ports: [{ name: "store", containerPort: MOONCAKE_STORE_PORT }],
        resources: { requests: { memory, ...rdma }, limits: { memory, ...rdma } },
        securityContext: memlock.securityContext,
    };
    const storeDeployment = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: n.store, namespace: a.namespace, labels: sl },
        spec: {
            replicas: a.storeReplicas,
            selector: { matchLabels: { "app.kubernetes.io/name": "mooncake-store", "app.kubernetes.io/instance": a.endpoint } },
            template: {
                metadata: { labels: sl },
                spec: {
                    nodeSelector: { ...a.pool.nodeSelector },
                    tolerations: a.pool.tolerations.map((t) => ({ ...t })),
                    affinity: {
                        podAntiAffinity: {
                            requiredDuringSchedulingIgnoredDuringExecution: [
                                {
                                    topologyKey: "kubernetes.io/hostname",
                                    labelSelector: {
                                        matchLabels: {
                                            "app.kubernetes.io/name": "mooncake-store",
                                            "app.kubernetes.io/instance": a.endpoint,
                                        },
                                    },
                                },
                            ],
                        },
                    },
                    initContainers: [
                        preflightInitContainer({
                            image: a.image,
                            fabric: a.pool.fabric,
                            memlock,
                            minLinkRateGbps: a.minLinkRateGbps,
                            gpus: 0,
                            resources: rdma,
                            securityContext: memlock.securityContext,
                        }),
                    ],
                    containers: [store],
                    volumes: [preflightVolume()],
                },
            },
        },
    };
    return { masterDeployment, masterService, storeDeployment };
}
