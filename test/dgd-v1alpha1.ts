/**
 * Test helper: a rendered v1beta1 DynamoGraphDeployment in the deprecated v1alpha1 shape the API server still serves
 * (`spec.services{}`; `componentType`, with `subComponentType` for prefill/decode; the main container under
 * `extraPodSpec.mainContainer`, the other containers in `extraPodSpec.containers`; GPUs and other resources as
 * `resources.{limits,requests}.{gpu,custom}`; `scalingAdapter.enabled`; the graph's `env` as `envs`), the inverse of the
 * operator's conversion (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:deploy/operator/api/v1alpha1/shared_spec_conversion.go).
 */
export function toV1alpha1(dgd: Record<string, any>): Record<string, any> {
    const services: Record<string, any> = {};
    for (const c of dgd.spec.components) {
        const { containers, ...podSpec } = c.podTemplate.spec;
        const { name: _n, resources, ...main } = containers.find((x: any) => x.name === "main");
        const split = (r: Record<string, string> = {}) => {
            const { "nvidia.com/gpu": gpu, ...custom } = r;
            return { ...(gpu ? { gpu } : {}), ...(Object.keys(custom).length ? { custom } : {}) };
        };
        const worker = c.type === "prefill" || c.type === "decode";
        const others = containers.filter((x: any) => x.name !== "main");
        services[c.name] = {
            componentType: worker ? "worker" : c.type,
            ...(worker ? { subComponentType: c.type } : {}),
            ...(c.replicas !== undefined ? { replicas: c.replicas } : {}),
            ...(c.scalingAdapter ? { scalingAdapter: { enabled: true } } : {}),
            ...(c.sharedMemorySize ? { sharedMemory: { size: c.sharedMemorySize } } : {}),
            ...(resources ? { resources: { limits: split(resources.limits), requests: split(resources.requests) } } : {}),
            ...(c.podTemplate.metadata ? { extraPodMetadata: c.podTemplate.metadata } : {}),
            extraPodSpec: { ...podSpec, ...(others.length ? { containers: others } : {}), mainContainer: main },
        };
    }
    const { components: _c, env, ...rest } = dgd.spec;
    return {
        apiVersion: "nvidia.com/v1alpha1",
        kind: "DynamoGraphDeployment",
        metadata: dgd.metadata,
        spec: { ...rest, ...(env ? { envs: env } : {}), services },
    };
}
