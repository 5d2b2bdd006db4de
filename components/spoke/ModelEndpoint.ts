import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { buildDgd, type DgdArgs, mooncakeClientConfigMapData } from "../../lib/dgd";
import { REVISION_LABEL, REVISION_OF_LABEL } from "../../lib/labels";
import { prestageDaemonSet } from "../../lib/faststart";
import { mooncakeNames } from "../../lib/mooncake";
import { frontendService } from "../../lib/serving";

export { frontendService };

/** Inputs of {@link ModelEndpoint}: lib/dgd.ts `DgdArgs` without `mooncake`, which is built here from the fields below. */
export type ModelEndpointArgs = Omit<DgdArgs, "mooncake"> & {
    /** Mooncake master `host:port` when the endpoint has a shared KV pool. */
    mooncakeMaster?: string;
    /** The Mooncake master's KV-event endpoint, when it publishes KV events (components/spoke/MooncakeStore.ts). */
    mooncakeKvEvents?: string;
    /** Set for a revisioned graph (lib/rollout.ts): the endpoint and revision it runs, as labels the pack reads. */
    revisionOf?: { endpoint: string; revision: string };
};

/**
 * One endpoint the hub placed on this spoke: a DynamoGraphDeployment (`nvidia.com/v1beta1`, named after the
 * endpoint) with a KV-routing Frontend, prefill/decode or aggregated workers on the endpoint's node pool, and a
 * Planner; plus the Mooncake client config when the endpoint uses the shared pool, and the image pre-pull / model-cache
 * DaemonSet when it asks for `fastStart.modelCache`. The spec is built by the pure
 * lib/dgd.ts `buildDgd`.
 *
 * @throws Error naming the endpoint, from the constructor: `kvPool` mooncake without `mooncakeMaster`; `fastStart.modelCache`
 *   on a pool whose node profile has no `localNvme`; and what lib/dgd.ts `buildDgd` throws (a worker needing more GPUs
 *   than a node of the pool has, a Mooncake pool on TRT-LLM, `modelRevision` on TRT-LLM) and lib/faststart.ts
 *   `prestageDaemonSet` throws (a gated model with no Secret named). Config validation and placement refuse these
 *   first, naming the stack file and key, so these errors guard programming mistakes.
 */
export class ModelEndpoint extends pulumi.ComponentResource {
    public readonly graph: k8s.apiextensions.CustomResource;
    /** Where the gateway sends this endpoint's traffic. */
    public readonly frontend: { name: string; namespace: string; port: number };

    constructor(name: string, args: ModelEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:spoke:ModelEndpoint", name, {}, opts);
        const e = args.endpoint;
        let mooncake: DgdArgs["mooncake"];
        const deps: pulumi.Resource[] = [];
        if (e.kvPool.kind === "mooncake") {
            if (!args.mooncakeMaster) throw new Error(`endpoint ${e.name}: kvPool mooncake needs mooncakeMaster`);
            const cmName = mooncakeNames(e.name).clientConfig;
            deps.push(
                new k8s.core.v1.ConfigMap(
                    `${name}-mooncake-client`,
                    {
                        metadata: { name: cmName, namespace: args.namespace },
                        data: mooncakeClientConfigMapData(args.pool.fabric, args.mooncakeMaster),
                    },
                    { parent: this },
                ),
            );
            mooncake = {
                master: args.mooncakeMaster,
                configMap: cmName,
                ...(args.mooncakeKvEvents ? { kvEventsEndpoint: args.mooncakeKvEvents } : {}),
            };
        }
        const dgd = buildDgd({ ...args, mooncake });
        if (args.revisionOf)
            dgd.metadata.labels = {
                ...dgd.metadata.labels,
                [REVISION_OF_LABEL]: args.revisionOf.endpoint,
                [REVISION_LABEL]: args.revisionOf.revision,
            };
        if (e.fastStart?.modelCache) {
            // Image pre-pull and per-node model cache on the pool's local NVMe (lib/faststart.ts), before the graph.
            const nvme = args.pool.localNvme;
            if (!nvme) throw new Error(`endpoint ${e.name}: fastStart.modelCache needs the node profile's localNvme`);
            const worker = dgd.spec.components.find((c) => c.type !== "frontend" && c.type !== "planner")!;
            const image = (worker.podTemplate.spec.containers as Array<{ image: string }>)[0].image;
            deps.push(
                new k8s.apps.v1.DaemonSet(
                    `${name}-prestage`,
                    prestageDaemonSet({
                        endpoint: e,
                        namespace: args.namespace,
                        image,
                        nodeSelector: args.pool.nodeSelector,
                        tolerations: args.pool.tolerations,
                        nvme,
                        hfTokenSecret: args.hfTokenSecret,
                        labels: { ...dgd.metadata.labels },
                    }) as unknown as k8s.apps.v1.DaemonSetArgs,
                    { parent: this },
                ),
            );
        }
        this.graph = new k8s.apiextensions.CustomResource(`${name}-dgd`, dgd, { parent: this, dependsOn: deps });
        this.frontend = frontendService(e.name);
        this.registerOutputs({ frontend: this.frontend });
    }
}
