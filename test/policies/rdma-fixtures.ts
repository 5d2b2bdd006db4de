/**
 * A compliant spoke graph for the RDMA guard tests, assembled from the real generators (lib/dgd.ts,
 * lib/mooncake.ts, lib/rails.ts, components' pure value builders) without running Pulumi: node pool patches,
 * the NicClusterPolicy, GPU Operator and dynamo-platform releases, the preflight ConfigMap, and endpoints.
 * Tests break exactly one thing and run the policies through tools/policy-runner.ts (the analyzer's own
 * deserialiser and unknown-value proxy).
 */
import type { Policy } from "@pulumi/policy";
import { dynamoPlatformValues } from "../../components/spoke/DynamoPlatform";
import { gpuOperatorValues } from "../../components/spoke/GpuOperator";
import { type Endpoint, EndpointSchema } from "../../config/endpoint";
import { type NodeProfile, NodeProfileSchema, presetProfiles, railsInOrder } from "../../config/nodeProfile";
import { versions } from "../../config/versions";
import { buildDgd, type DgdManifest, mooncakeClientConfigMapData, type PoolPlacement } from "../../lib/dgd";
import {
    FABRIC_LABEL,
    FRONTEND_NICS_ANNOTATION,
    GPU_TAINT,
    INFERENCE_NAMESPACE,
    MEMLOCK_LABEL,
    POOL_LABEL,
    RAIL_TABLE_ANNOTATION,
} from "../../lib/labels";
import { buildMooncake, mooncakeMasterAddress, mooncakeNames } from "../../lib/mooncake";
import { kvFabricOf } from "../../lib/nixl";
import { PREFLIGHT_CONFIGMAP, PREFLIGHT_KEY } from "../../lib/preflight";
import { rdmaSharedDevicePluginConfig } from "../../lib/rails";
import type { CapturedResource } from "../../tools/harness";
import { type PolicyReport, runPolicies } from "../../tools/policy-runner";

export const DGX: NodeProfile = NodeProfileSchema.parse(presetProfiles().get("dgx-h200"));

/** Pulumi type token of a Kubernetes object (`apps/v1` Deployment -> `kubernetes:apps/v1:Deployment`). */
export function k8sType(obj: { apiVersion: string; kind: string }): string {
    return `kubernetes:${obj.apiVersion.includes("/") ? obj.apiVersion : `core/${obj.apiVersion}`}:${obj.kind}`;
}

let seq = 0;
/** A captured custom resource whose inputs and outputs are `obj`. */
export function res(type: string, name: string, obj: Record<string, any>): CapturedResource {
    const clone = structuredClone(obj);
    return {
        urn: `urn:pulumi:test::platform::${type}::${name}-${seq++}`,
        type,
        name,
        parent: "",
        provider: "",
        custom: true,
        remote: false,
        dependencies: [],
        inputs: clone,
        outputs: structuredClone(clone),
    };
}

/** A Kubernetes object as a captured resource. */
export function k8s(obj: Record<string, any>): CapturedResource {
    return res(k8sType(obj as { apiVersion: string; kind: string }), String(obj.metadata?.name ?? "x"), obj);
}

export interface PoolOptions {
    name?: string;
    profile?: NodeProfile;
    memlockUnlimited?: boolean;
    nodes?: string[];
}

/** NodePatches of a pool as GpuNodePool writes them (pool label, fabric, memlock, rail table, frontend NICs). */
export function poolPatches(o: PoolOptions = {}): CapturedResource[] {
    const profile = o.profile ?? DGX;
    const name = o.name ?? "h200";
    const railTable = railsInOrder(profile).map((r) => ({
        rail: r.rail,
        gpu: r.gpu,
        gpuPciAddress: r.gpuPciAddress,
        hca: r.hca,
        netdev: r.netdev,
        pciAddress: r.pciAddress,
        numa: r.numa,
        linkLayer: r.linkLayer,
        linkRateGbps: r.linkRateGbps,
    }));
    return (o.nodes ?? ["gpu-01", "gpu-02"]).map((node) =>
        res("kubernetes:core/v1:NodePatch", `pool-${name}-${node}`, {
            apiVersion: "v1",
            kind: "Node",
            metadata: {
                name: node,
                labels: { [POOL_LABEL]: name, [FABRIC_LABEL]: "infiniband", [MEMLOCK_LABEL]: String(o.memlockUnlimited ?? false) },
                annotations: {
                    [RAIL_TABLE_ANNOTATION]: JSON.stringify(railTable),
                    [FRONTEND_NICS_ANNOTATION]: JSON.stringify(profile.frontend),
                },
            },
            spec: { taints: [{ ...GPU_TAINT }] },
        }),
    );
}

/** The platform around the workloads: NicClusterPolicy, GPU Operator (GPUDirect), dynamo-platform, preflight ConfigMap. */
export function platform(profiles: NodeProfile[] = [DGX]): CapturedResource[] {
    const v = versions.rdmaSharedDevicePlugin;
    return [
        res("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", "backend-nic-cluster-policy", {
            apiVersion: "mellanox.com/v1alpha1",
            kind: "NicClusterPolicy",
            metadata: { name: "nic-cluster-policy" },
            spec: {
                rdmaSharedDevicePlugin: {
                    repository: v.repository,
                    image: v.image,
                    version: v.version,
                    config: JSON.stringify(rdmaSharedDevicePluginConfig(profiles, 63)),
                },
            },
        }),
        res("kubernetes:helm.sh/v3:Release", "gpu-operator", {
            chart: "gpu-operator",
            version: versions.gpuOperator.version,
            values: gpuOperatorValues({ gpuDirectRdma: "dmabuf", useHostMofed: true }),
        }),
        res("kubernetes:helm.sh/v3:Release", "dynamo-platform", {
            chart: "dynamo-platform",
            version: versions.dynamoPlatform.version,
            values: dynamoPlatformValues({ grove: false, kaiScheduler: false, prometheusEndpoint: "http://prom:9090" }),
        }),
        k8s({
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: PREFLIGHT_CONFIGMAP, namespace: INFERENCE_NAMESPACE },
            data: { [PREFLIGHT_KEY]: "#!/bin/sh\n" },
        }),
    ];
}

/** The placement of a pool (as programs/serving.ts builds it). */
export function placement(o: PoolOptions = {}): PoolPlacement {
    const profile = o.profile ?? DGX;
    return {
        name: o.name ?? "h200",
        nodeSelector: { [POOL_LABEL]: o.name ?? "h200" },
        tolerations: [{ key: GPU_TAINT.key, operator: "Equal", value: GPU_TAINT.value, effect: GPU_TAINT.effect }],
        memlockUnlimited: o.memlockUnlimited ?? false,
        fabric: kvFabricOf(profile),
    };
}

/** An endpoint with defaults filled by the contract schema. */
export function endpoint(e: Record<string, unknown> = {}): Endpoint {
    return EndpointSchema.parse({
        name: "llama-70b",
        model: "meta-llama/Llama-3.3-70B-Instruct",
        spoke: "hn1",
        engine: "vllm",
        topology: { mode: "disaggregated", prefill: { replicas: 2, gpusPerWorker: 2 }, decode: { replicas: 1, gpusPerWorker: 4 } },
        kvPool: { kind: "mooncake", segmentSizeGiB: 512, storeReplicas: 2 },
        planner: { optimizationTarget: "load", maxGpuBudget: 12 },
        // As the hub places it (programs/hub.ts buildSpokeContracts): keys of one KV cache scope call the model.
        cacheScopes: 1,
        ...e,
    });
}

/** The DGD of an endpoint on a pool, plus its Mooncake objects. */
export function endpointObjects(e: Endpoint, o: PoolOptions = {}): { dgd: DgdManifest; others: Array<Record<string, any>> } {
    const pool = placement(o);
    const rt = versions.dynamoRuntime[e.engine];
    const master = mooncakeMasterAddress(e.name, INFERENCE_NAMESPACE);
    const names = mooncakeNames(e.name);
    const others: Array<Record<string, any>> = [];
    if (e.kvPool.kind === "mooncake") {
        const m = buildMooncake({
            endpoint: e.name,
            namespace: INFERENCE_NAMESPACE,
            image: `${rt.image}:${rt.version}`,
            pool,
            segmentSizeGiB: e.kvPool.segmentSizeGiB,
            storeReplicas: e.kvPool.storeReplicas,
            poolNodes: 2,
            minLinkRateGbps: 400,
        });
        others.push(m.masterDeployment, m.masterService, m.storeDeployment, {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: names.clientConfig, namespace: INFERENCE_NAMESPACE },
            data: mooncakeClientConfigMapData(pool.fabric, master),
        });
    }
    const dgd = buildDgd({
        endpoint: e,
        namespace: INFERENCE_NAMESPACE,
        pool,
        runtimeImage: `${rt.image}:${rt.version}`,
        plannerImage: `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
        prometheusEndpoint: "http://prom:9090",
        minLinkRateGbps: 400,
        mooncake: e.kvPool.kind === "mooncake" ? { master, configMap: names.clientConfig } : undefined,
    });
    return { dgd, others };
}

/** A full compliant graph: pool, platform, and the given endpoints. */
export function stack(endpoints: Endpoint[] = [endpoint()], o: PoolOptions = {}): CapturedResource[] {
    const out = [...poolPatches(o), ...platform([o.profile ?? DGX])];
    for (const e of endpoints) {
        const { dgd, others } = endpointObjects(e, o);
        out.push(k8s(dgd), ...others.map(k8s));
    }
    return out;
}

/** Applies `fn` to the inputs and outputs of every resource whose Kubernetes kind (and optional name) matches. */
export function edit(rs: CapturedResource[], kind: string, fn: (o: Record<string, any>) => void, name?: string): CapturedResource[] {
    let hit = false;
    const out = rs.map((r) => {
        const o = r.inputs as Record<string, any>;
        if (o.kind !== kind || (name !== undefined && o.metadata?.name !== name)) return r;
        hit = true;
        const c = structuredClone(r);
        fn(c.inputs as Record<string, any>);
        fn(c.outputs as Record<string, any>);
        return c;
    });
    if (!hit) throw new Error(`edit: no ${kind}${name ? ` ${name}` : ""} in the fixture`);
    return out;
}

/** `rs` with the Mooncake client ConfigMap's `mooncake.json` protocol set to `protocol` (the workers read it via MOONCAKE_CONFIG_PATH). */
export function setMooncakeProtocol(rs: CapturedResource[], protocol: string, configMap = "llama-70b-mooncake-client"): CapturedResource[] {
    return edit(
        rs,
        "ConfigMap",
        (o) => {
            const j = JSON.parse(o.data["mooncake.json"]);
            j.protocol = protocol;
            o.data["mooncake.json"] = JSON.stringify(j);
        },
        configMap,
    );
}

/** The component object of a v1beta1 DGD by name. */
export function component(dgd: Record<string, any>, name: string): Record<string, any> {
    const c = dgd.spec.components.find((x: any) => x.name === name);
    if (!c) throw new Error(`no component ${name}`);
    return c;
}

/** The main container of a DGD component. */
export function mainOf(dgd: Record<string, any>, name: string): Record<string, any> {
    return component(dgd, name).podTemplate.spec.containers.find((c: any) => c.name === "main");
}

/** Sets (or, with undefined, removes) an env var of a container. */
export function setEnv(c: Record<string, any>, name: string, value: string | undefined): void {
    c.env = (c.env ?? []).filter((e: any) => e.name !== name);
    if (value !== undefined) c.env.push({ name, value });
}

/** Replaces the value following `flag` in args (or removes flag and value with undefined). */
export function setArg(c: Record<string, any>, flag: string, value: string | undefined): void {
    const a: string[] = c.args;
    const i = a.indexOf(flag);
    if (value === undefined) {
        if (i >= 0) a.splice(i, 2);
        return;
    }
    if (i >= 0) a[i + 1] = value;
    else a.push(flag, value);
}

/** Runs policies and returns the mandatory messages. */
export async function violations(policies: Policy[], rs: CapturedResource[]): Promise<string[]> {
    const r: PolicyReport = await runPolicies(policies, rs);
    return r.mandatory.map((f) => f.message);
}
