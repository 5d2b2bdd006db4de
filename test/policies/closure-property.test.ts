/**
 * Proves the closure (fast-check): every guarded container (prefill, decode, workers, Mooncake store) and every
 * gateway-path object of every shipped spoke stack, normal and preview render, is mutated: an unknown setting added from
 * each KV family, a known setting set to an unsafe value, one side of a prefill/decode pair changed, an unknown field
 * or kind added on the gateway path, the request id handed to the client. The pack must block every one, and pass the
 * known-safe variants taken from upstream (tuned thresholds, equivalent spellings, settings that only add an RDMA path).
 */
import * as fs from "node:fs";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { allPolicies } from "../../policies/policies";
import { GATEWAY_GROUPS, GATEWAY_SHAPES } from "../../policies/gateway/shape";
import { kvEnvFamilies, kvKnownSettings } from "../../upstream/kv-transport";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { runHubAndSpoke, STACKS } from "../helpers";

const spokes = fs
    .readdirSync(STACKS)
    .map((f) => /^Pulumi\.(spoke-.+)\.yaml$/.exec(f)?.[1])
    .filter((s): s is string => !!s)
    .sort();
const rendered: Record<string, CapturedResource[]> = {};
const baseline: Record<string, string[]> = {};
const verdict = async (rs: CapturedResource[]) =>
    (await runPolicies(allPolicies, rs)).mandatory.map((f) => `${f.policyName}: ${f.message}`);

beforeAll(async () => {
    for (const s of spokes)
        for (const preview of [false, true]) {
            const k = `${s}${preview ? " --preview" : ""}`;
            rendered[k] = (await runHubAndSpoke(s, preview)).spoke.resources;
            baseline[k] = await verdict(rendered[k]);
        }
}, 300_000);

/** Both inputs and outputs of a captured resource (the runner reads outputs; keep them equal). */
const bodies = (r: CapturedResource) => [r.inputs as Record<string, any>, r.outputs as Record<string, any>];

/** Guarded containers: DGD prefill/decode/worker mains and Mooncake store containers, as [resource index, path getter]. */
function guarded(rs: CapturedResource[]): Array<(o: Record<string, any>) => Record<string, any>[]> {
    const out: Array<(o: Record<string, any>) => Record<string, any>[]> = [];
    rs.forEach((r, i) => {
        if (r.type.endsWith(":DynamoGraphDeployment")) {
            out.push(
                ...((r.outputs as any).spec?.components ?? [])
                    .map((c: any, j: number) => ({ c, j }))
                    .filter(({ c }: any) => ["prefill", "decode", "worker"].includes(String(c.type ?? c.subComponentType).toLowerCase()))
                    .map(({ j }: any) =>
                        Object.assign(
                            (o: Record<string, any>) =>
                                o.spec.components[j].podTemplate.spec.containers.filter((x: any) => x.name === "main"),
                            { i },
                        ),
                    ),
            );
        } else if (
            r.type === "kubernetes:apps/v1:Deployment" &&
            JSON.stringify((r.outputs as any).spec?.template?.spec?.containers ?? []).includes("mooncake_store_service")
        ) {
            out.push(Object.assign((o: Record<string, any>) => o.spec.template.spec.containers, { i }));
        }
    });
    return out;
}

function mutate(k: string, fn: (rs: CapturedResource[]) => void): CapturedResource[] {
    const rs = structuredClone(rendered[k]);
    fn(rs);
    return rs;
}
function setEnvAll(rs: CapturedResource[], name: string, value: string, onlyDecode = false, onlyWhereFamilyUsed = false): void {
    const family = `${name.split("_")[0]}_`;
    for (const g of guarded(rs))
        for (const b of bodies(rs[(g as any).i]))
            for (const c of g(b)) {
                if (onlyDecode && !JSON.stringify(c.args ?? []).includes("decode")) continue;
                // A tuned knob of a library the container does not use turns that library's own rules on (UCX_* on a TCP-free
                // Mooncake store means "UCX in use, pin its transports"): safe variants go where the family is already set.
                if (onlyWhereFamilyUsed && !(c.env ?? []).some((e: any) => String(e.name).startsWith(family))) continue;
                c.env = (c.env ?? []).filter((e: any) => e.name !== name);
                c.env.push({ name, value });
            }
}

const knownNames = new Set(kvKnownSettings.map((s) => s.name));
const prefixes = ["UCX_", "NIXL_", "FI_", "FI_EFA_", "NCCL_", "MC_", "MOONCAKE_", "VLLM_", "SGLANG_", "TRTLLM_", "DYN_KVBM_", "CUDA_"];
const unknownKnob = fc
    .tuple(fc.constantFrom(...prefixes), fc.stringMatching(/^[A-Z][A-Z0-9_]{2,10}$/), fc.stringMatching(/^[a-z0-9]{1,6}$/))
    .map(([p, s, v]) => ({ name: `${p}${s}`, value: v }))
    .filter((x) => !knownNames.has(x.name) && kvEnvFamilies.some((f) => f.match.test(x.name)));
const unsafeSettings: Array<[string, string]> = [
    ["UCX_TLS", "tcp"],
    ["UCX_TLS", "tcp,cuda_copy"],
    ["UCX_TLS", "sm,cuda_copy"],
    ["UCX_IB_GPU_DIRECT_RDMA", "no"],
    ["UCX_RNDV_SCHEME", "am_bcopy"],
    ["UCX_PROTO_EMULATION_ENABLE", "y"],
    ["FI_PROVIDER", "tcp"],
    ["FI_PROVIDER", "sockets"],
    ["FI_EFA_USE_DEVICE_RDMA", "0"],
    ["FI_EFA_ENABLE_SHM_TRANSFER", "1"],
    ["NCCL_NET", "Socket"],
    ["NCCL_IB_DISABLE", "1"],
    ["NCCL_NET_GDR_LEVEL", "LOC"],
    ["MOONCAKE_PROTOCOL", "tcp"],
    ["MC_FORCE_HCA", "0"],
    ["SGLANG_DISAGGREGATION_NIXL_BACKEND", "POSIX"],
    ["VLLM_KV_CACHE_LAYOUT", "XYZ"],
    ["UCX_IB_ADDR_TYPE", "eth"],
    ["UCX_IB_IS_GLOBAL", "n"],
];
const unsafe = fc.constantFrom(...unsafeSettings);
/** Known-safe variants from upstream (tuned thresholds, equivalent spellings, settings that only add an RDMA path). */
const safeSettings: Array<[string, string]> = [
    ["UCX_RNDV_THRESH", "8192"],
    ["UCX_RNDV_THRESH", "inf"],
    ["UCX_RNDV_SCHEME", "put_zcopy"],
    ["UCX_IB_GPU_DIRECT_RDMA", "yes"],
    ["UCX_MAX_HCA_PER_GPU", "1"],
    ["NCCL_NET_GDR_LEVEL", "SYS"],
    ["MC_GID_INDEX", "3"],
    ["UCX_IB_ADDR_TYPE", "ib_global"],
    ["UCX_IB_IS_GLOBAL", "yes"],
];
const safe = fc.constantFrom(...safeSettings);

const stacks = () => Object.keys(rendered);

/**
 * Every case of a property, each once, on the stacks in turn (case i on stack i mod n): run first (fast-check's
 * `examples`), so each listed case is checked on every run instead of when the random draw happens to pick it, and the
 * random runs after them (`numRuns` counts both) explore further values. A verdict runs the whole pack over a spoke
 * (about 0.2 s), so the random part is kept to a few runs where the listed cases already cover every setting, kind and
 * value the property names.
 */
function everyCase<T extends unknown[]>(cases: T[], on: string[] = stacks()): Array<[string, ...T]> {
    return cases.map((c, i) => [on[i % on.length], ...c]);
}

describe("closure of the KV transport guard on every shipped spoke, normal and preview", () => {
    it("finds the spokes", () => expect(spokes.length).toBeGreaterThanOrEqual(3));
    it("every unknown knob of a KV family on every guarded container is refused", async () => {
        const everyPrefix = everyCase(prefixes.map((p) => [{ name: `${p}ZQ_PROBE`, value: "x1" }] as [{ name: string; value: string }]));
        expect(everyPrefix.filter(([, x]) => knownNames.has(x.name) || !kvEnvFamilies.some((f) => f.match.test(x.name)))).toEqual([]);
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...stacks()), unknownKnob, async (k, x) => {
                const v = await verdict(mutate(k, (rs) => setEnvAll(rs, x.name, x.value)));
                expect(v.join("\n"), `${k} ${x.name}=${x.value}`).toContain(
                    `the pack cannot prove \`${x.name}=${x.value}\` keeps KV on RDMA`,
                );
            }),
            // One unknown name under every prefix (every KV family), then random names.
            { examples: everyPrefix, numRuns: everyPrefix.length + 8 },
        );
    }, 300_000);
    it("every known setting at an unsafe value is refused", async () => {
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...stacks()), unsafe, async (k, [n, val]) => {
                const v = await verdict(mutate(k, (rs) => setEnvAll(rs, n, val)));
                expect(v.length, `${k} ${n}=${val}`).toBeGreaterThan(baseline[k].length);
            }),
            // Every unsafe setting once, then random pairings of setting and stack.
            { examples: everyCase(unsafeSettings.map((x) => [x] as [[string, string]])), numRuns: unsafeSettings.length + 3 },
        );
    }, 300_000);
    it("one side of a prefill/decode pair changed is refused", async () => {
        const pairNames = ["UCX_RNDV_THRESH", "MC_GID_INDEX", "UCX_MAX_HCA_PER_GPU", "PYTHONHASHSEED"];
        const pairKnob = fc.tuple(fc.constantFrom(...pairNames), fc.integer({ min: 1, max: 999_999 }));
        const pairStacks = stacks().filter((k) => guarded(rendered[k]).length > 1);
        // Every knob on two stacks, then random knobs, values and stacks.
        const everyKnob = everyCase(
            [...pairNames, ...pairNames].map((n, i) => [[n, 4242 + i]] as [[string, number]]),
            pairStacks,
        );
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...pairStacks), pairKnob, async (k, [n, num]) => {
                const val = String(num);
                const v = await verdict(mutate(k, (rs) => setEnvAll(rs, n, val, true)));
                expect(v.join("\n"), `${k} decode-only ${n}=${val}`).toMatch(new RegExp(`pd-kv-settings-match: .*${n}`));
            }),
            { examples: everyKnob, numRuns: everyKnob.length + 2 },
        );
    }, 300_000);
    it("known-safe variants pass (set on every guarded container alike)", async () => {
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...stacks()), safe, async (k, [n, val]) => {
                expect(await verdict(mutate(k, (rs) => setEnvAll(rs, n, val, false, true))), `${k} ${n}=${val}`).toEqual(baseline[k]);
            }),
            // Every safe variant once, then random pairings of variant and stack.
            { examples: everyCase(safeSettings.map((x) => [x] as [[string, string]])), numRuns: safeSettings.length + 2 },
        );
    }, 300_000);
    it("the shipped renders themselves pass", () => {
        for (const k of stacks()) expect(baseline[k], k).toEqual([]);
    });
});

describe("closure of the gateway path on every shipped spoke, normal and preview", () => {
    const gatewayObjects = (rs: CapturedResource[]) =>
        rs.map((r, i) => ({ r, i })).filter(({ r }) => GATEWAY_GROUPS.some((g) => r.type.startsWith(`kubernetes:${g}/`)));
    it("an unknown field on any gateway object is refused", async () => {
        // An object of every gateway kind once (on the stacks in turn, the next one that has the kind), then random
        // objects and field names.
        const kinds = [...new Set(stacks().flatMap((k) => gatewayObjects(rendered[k]).map(({ r }) => r.type)))].sort();
        const everyKind = kinds.map((t, j): [string, number, string] => {
            const k = [...stacks().slice(j % stacks().length), ...stacks()].find((x) =>
                gatewayObjects(rendered[x]).some(({ r }) => r.type === t),
            )!;
            return [k, gatewayObjects(rendered[k]).findIndex(({ r }) => r.type === t), "probeField"];
        });
        expect(kinds.length).toBeGreaterThanOrEqual(10);
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...stacks()), fc.nat(), fc.stringMatching(/^[a-z][a-zA-Z]{2,12}$/), async (k, n, field) => {
                const objs = gatewayObjects(rendered[k]);
                const { i, r } = objs[n % objs.length];
                const v = await verdict(
                    mutate(k, (rs) => {
                        for (const b of bodies(rs[i])) b.spec = { ...(b.spec ?? {}), [`x${field}`]: { enabled: true } };
                    }),
                );
                expect(v.join("\n"), `${k} ${r.type} spec.x${field}`).toMatch(
                    /gateway-closed-shape: .*is not a field the pack knows to be safe/,
                );
            }),
            { examples: everyKind, numRuns: everyKind.length + 5 },
        );
    }, 300_000);
    it("an unmodelled route, backend, patch or extension kind is refused", async () => {
        const kinds = [
            "gateway.networking.k8s.io/v1:HTTPRoute",
            "gateway.networking.k8s.io/v1:GRPCRoute",
            "gateway.networking.k8s.io/v1alpha2:TCPRoute",
            "gateway.networking.k8s.io/v1alpha2:TLSRoute",
            "gateway.networking.k8s.io/v1alpha2:UDPRoute",
            "gateway.envoyproxy.io/v1alpha1:EnvoyPatchPolicy",
            "gateway.envoyproxy.io/v1alpha1:EnvoyExtensionPolicy",
            // BackendTrafficPolicy is modelled (a peer fallback's retries only: policies/gateway/shape.ts); its other
            // fields are refused by the shape, as for every modelled kind.
            "gateway.envoyproxy.io/v1alpha1:HTTPRouteFilter",
            "inference.networking.k8s.io/v1:InferencePool",
            "gateway.networking.k8s.io/v1alpha3:BackendTLSPolicy",
        ];
        expect(kinds.map((k) => k.split(":")[1]).filter((k) => GATEWAY_SHAPES[k])).toEqual([]);
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...stacks()), fc.constantFrom(...kinds), async (k, t) => {
                const [gv, kind] = t.split(":");
                const obj = {
                    apiVersion: gv,
                    kind,
                    metadata: { name: "side-door", namespace: "llm-gateway" },
                    spec: { parentRefs: [{ name: "llm-gateway" }] },
                };
                const v = await verdict(
                    mutate(k, (rs) =>
                        rs.push({
                            urn: `urn:pulumi:x::p::kubernetes:${gv}:${kind}::side-door`,
                            type: `kubernetes:${gv}:${kind}`,
                            name: "side-door",
                            parent: "",
                            provider: "",
                            custom: true,
                            remote: false,
                            dependencies: [],
                            inputs: structuredClone(obj),
                            outputs: structuredClone(obj),
                        } as CapturedResource),
                    ),
                );
                expect(v.join("\n"), `${k} ${kind}`).toMatch(new RegExp(`gateway-closed-shape: ${kind} .*is not a shape the pack knows`));
            }),
            // Every kind once, then random pairings of kind and stack.
            { examples: everyCase(kinds.map((t) => [t] as [string])), numRuns: kinds.length + 2 },
        );
    }, 300_000);
    it("a request id kept from the client (or not set explicitly) is refused", async () => {
        const requestIds = ["PreserveOrGenerate", "Preserve", "Disable", undefined];
        await fc.assert(
            fc.asyncProperty(fc.constantFrom(...stacks()), fc.constantFrom(...requestIds), async (k, id) => {
                const v = await verdict(
                    mutate(k, (rs) => {
                        for (const r of rs.filter((x) => x.type.endsWith(":ClientTrafficPolicy")))
                            for (const b of bodies(r)) {
                                if (id === undefined) delete b.spec.headers.requestID;
                                else b.spec.headers.requestID = id;
                            }
                    }),
                );
                expect(v.join("\n"), `${k} requestID ${id}`).toMatch(/gateway-request-id-generated: /);
            }),
            // Every value once, then random pairings of value and stack.
            { examples: everyCase(requestIds.map((id) => [id] as [string | undefined])), numRuns: requestIds.length + 2 },
        );
    }, 300_000);
});
