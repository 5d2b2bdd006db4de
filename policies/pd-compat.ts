import type { StackValidationPolicy } from "@pulumi/policy";
import { containerLabel, type Finding, stackPolicy } from "./lib/report";
import { type ContainerView, type EnvValue, engineOf, flagValue, type StackView } from "./lib/workloads";
import { hostOf, unroutable } from "../upstream/address";
import { pairKvSettings, vllmPdConnectorOf } from "../upstream/pairs";
import { defaultFacts, type Facts, pairRule } from "../upstream/check";
import { renderedStackOf } from "./upstream";

/**
 * Prefill and decode of one DynamoGraphDeployment must be able to talk. Health checks pass
 * either way; a pair that disagrees on anything that changes the shape, size or type of a KV block, the transfer, a
 * hash seed or the drafter fails or hangs on every handoff, or (vLLM's default) silently recomputes the prefill on the
 * decode worker. Closed world: the two main containers must be identical except the per-engine role settings of
 * upstream/pairs.ts (the only copy, shared with npm run upstream-check), which also names the KV-shaping settings and
 * why each matters (vLLM: compute_nixl_compatibility_hash and _validate_remote_agent_handshake,
 * vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py; SGLang
 * sgl-project/sglang@v0.5.18:python/sglang/srt/disaggregation/; TensorRT-LLM's cache transceiver).
 *
 * Also here: TP sizes must divide one another (vLLM maps KV heads between ranks by an integer ratio,
 * kv_connector/utils.py `TpKVTopology`); `KVTransferConfig.kv_load_failure_policy` must be "fail" (default
 * "recompute" silently re-runs the prefill, vllm/config/kv_transfer.py); every handshake address a peer is told
 * (`VLLM_NIXL_SIDE_CHANNEL_HOST`, default "localhost", vllm/envs.py; Dynamo sets it only for a top-level
 * NixlConnector, ai-dynamo/dynamo@v1.5.0:components/src/dynamo/vllm/args.py; SGLang's `--dist-init-addr` /
 * `SGLANG_HOST_IP` / `HOST_IP`, ai-dynamo/dynamo@v1.5.0:components/src/dynamo/sglang/request_handlers/prefill_handler.py
 * `_get_bootstrap_info`; Mooncake `MOONCAKE_LOCAL_HOSTNAME`) must be routable, never loopback or a wildcard.
 */

function json(raw: string | undefined): Record<string, any> | undefined {
    if (raw === undefined) return undefined;
    try {
        const v = JSON.parse(raw);
        return v && typeof v === "object" ? v : undefined;
    } catch {
        return undefined;
    }
}

/** The P/D connector of a vLLM `--kv-transfer-config` (MultiConnector: the first non-store sub-connector). */
export function vllmPdConnector(c: ContainerView): Record<string, any> | undefined {
    return vllmPdConnectorOf(json(flagValue(c, "--kv-transfer-config")));
}

/** A handshake address from env: bad if a loopback/wildcard literal, or a downward-API field that is not the pod's address. */
function addressProblem(v: EnvValue | undefined, c: ContainerView): string | undefined {
    if (!v) return undefined;
    if (v.fieldRef) {
        if (v.fieldRef === "status.podIP" || v.fieldRef === "status.podIPs") return undefined;
        if (v.fieldRef === "status.hostIP" && c.pod.hostNetwork) return undefined;
        return `comes from ${v.fieldRef}, which is not an address the pod listens on`;
    }
    if (v.value !== undefined && unroutable(hostOf(v.value)))
        return `is ${JSON.stringify(v.value)}, a loopback, wildcard or otherwise unproven address a peer cannot connect to (upstream/address.ts)`;
    return undefined;
}

interface Pair {
    ref: string;
    prefill: ContainerView;
    decode: ContainerView;
}

/** Prefill/decode main containers of each DGD. */
function pairs(v: StackView): Pair[] {
    const byDgd = new Map<string, ContainerView[]>();
    for (const c of v.containers) {
        if (c.kind !== "DynamoGraphDeployment" || c.init || c.container !== "main" || (c.role !== "prefill" && c.role !== "decode"))
            continue;
        byDgd.set(c.resource.urn, [...(byDgd.get(c.resource.urn) ?? []), c]);
    }
    const out: Pair[] = [];
    for (const cs of byDgd.values()) {
        for (const p of cs.filter((c) => c.role === "prefill"))
            for (const d of cs.filter((c) => c.role === "decode")) out.push({ ref: p.ref, prefill: p, decode: d });
    }
    return out;
}

const tpOf = (c: ContainerView) =>
    Number(flagValue(c, "--tensor-parallel-size") ?? flagValue(c, "--tp") ?? flagValue(c, "--tp-size") ?? "1");

type Out = Array<{ subject: string; finding: Finding; urn?: string }>;

/**
 * The policy's description, built from the facts: the KV-shaping settings it lists are upstream/pairs.ts
 * `pairKvSettings` (per entry point), never a second list in prose.
 */
export function pdSettingsDescription(kvSettings: typeof pairKvSettings = pairKvSettings): string {
    const kv = Object.entries(kvSettings)
        .map(([entrypoint, settings]) => `${entrypoint}: ${settings.map((k) => k.key).join(", ")}`)
        .join("; ");
    return `The prefill and decode workers of one DynamoGraphDeployment must run the same engine and be identical in image, flags, env and mounts (read-only flag and mounted ConfigMap contents included) except the per-engine role settings of upstream/pairs.ts (role flag, TP size, role-only switches); the KV-shaping settings of upstream/pairs.ts (${kv}) compare by meaning; a pair whose entry point upstream/ does not record is refused; TP sizes must divide. The rule is upstream/check/pairs.ts, the one npm run upstream-check runs.`;
}

/**
 * Prefill and decode agree on every setting that shapes a KV block or the transfer: `upstream/check` `pairRule` (the rule
 * `npm run upstream-check` runs, on the same objects as `upstream-rules` sees them, policies/upstream.ts
 * `renderedStackOf`), plus what only the pack refuses: engine arguments from a file and TP sizes that do not divide.
 *
 * The policy `pd-kv-settings-match` (mandatory): one violation per difference `pairRule` finds (naming the
 * DynamoGraphDeployment, the container and the key), per TensorRT-LLM worker that takes `--extra-engine-args` from a
 * file, per vLLM/SGLang worker that reads `--config` from a file, and per vLLM pair whose prefill and decode
 * `--tensor-parallel-size` do not divide one another (vLLM's NIXL connector maps KV heads between ranks by an integer
 * ratio: vllm-project/vllm@v0.28.0 kv_connector/utils.py `TpKVTopology`, as the module comment says).
 * @param facts the upstream facts `pairRule` compares with (tests pass reduced ones); default upstream/'s
 * @returns the stack policy; building it never throws, and its `validateStack` reports findings instead of throwing
 */
export function pdSettingsMatchPolicy(facts: Facts = defaultFacts): StackValidationPolicy {
    return stackPolicy(
        {
            name: "pd-kv-settings-match",
            description: pdSettingsDescription(),
            remediationSteps: "Render prefill and decode from one engine configuration (lib/dgd.ts); set a KV setting on both or neither.",
        },
        (v, resources) => {
            const out: Out = [];
            const conv = renderedStackOf(resources);
            for (const f of pairRule(conv.stack, facts))
                out.push({
                    subject: `${f.object} prefill/decode ${f.container}`,
                    finding: {
                        field: f.key,
                        problem: `${f.message}; the pair passes health checks and fails or hangs on every handoff`,
                        fix: `set ${f.key} the same on prefill and decode (only upstream/pairs.ts role settings may differ)`,
                    },
                    urn: conv.urnOf.get(f.object),
                });
            for (const { ref, prefill, decode } of pairs(v)) {
                const add = (field: string, problem: string, fix: string) =>
                    out.push({
                        subject: `${ref} prefill ${prefill.component}/decode ${decode.component}`,
                        finding: { field, problem, fix },
                        urn: prefill.resource.urn,
                    });
                const ep = engineOf(prefill);
                // A different or unknown engine is pairRule's finding (closed world); the extras below need one engine.
                if (!ep || ep !== engineOf(decode)) continue;
                if (ep === "trtllm")
                    for (const c of [prefill, decode]) {
                        if (flagValue(c, "--extra-engine-args") !== undefined)
                            add(
                                `${c.path}.args[--extra-engine-args]`,
                                "takes TensorRT-LLM engine args from a file, so its cache transceiver and KV settings cannot be compared with its peer's",
                                "pass them as --override-engine-args JSON",
                            );
                    }
                // vLLM and SGLang read further CLI arguments from a YAML file given with --config (vLLM FlexibleArgumentParser
                // `--config`; SGLang ServerArgs `--config`): settings there never reach the pack.
                if (ep === "vllm" || ep === "sglang")
                    for (const c of [prefill, decode]) {
                        if (flagValue(c, "--config") !== undefined)
                            add(
                                `${c.path}.args[--config]`,
                                `reads ${ep} arguments from the file ${flagValue(c, "--config")}, so its KV settings cannot be compared with its peer's`,
                                "pass the arguments on the command line",
                            );
                    }
                if (ep === "vllm") {
                    const tp = tpOf(prefill),
                        td = tpOf(decode);
                    if (Number.isFinite(tp) && Number.isFinite(td) && tp > 0 && td > 0 && Math.max(tp, td) % Math.min(tp, td) !== 0) {
                        add(
                            `${decode.path}.args[--tensor-parallel-size]`,
                            `prefill TP ${tp} and decode TP ${td} do not divide one another; vLLM's NIXL connector splits KV heads between ranks by an integer ratio`,
                            "use TP sizes where one divides the other",
                        );
                    }
                }
            }
            return out;
        },
    );
}

/** {@link pdSettingsMatchPolicy} on the facts of upstream/. */
export const pdSettingsMatch = pdSettingsMatchPolicy();

/** A failed KV load is an error, and the handshake address a peer is told is routable. */
export const pdFailLoudly = stackPolicy(
    {
        name: "pd-kv-load-fails-loudly",
        description:
            'Disaggregated vLLM workers must set kv_transfer_config kv_load_failure_policy "fail" (the default "recompute" silently re-runs the prefill on decode, vllm-project/vllm@v0.28.0 vllm/config/kv_transfer.py), and every handshake address a peer is told (vLLM VLLM_NIXL_SIDE_CHANNEL_HOST, default localhost; SGLang --dist-init-addr / SGLANG_HOST_IP / HOST_IP; Mooncake MOONCAKE_LOCAL_HOSTNAME) must be routable: set to the pod IP (downward API) or a real address, never loopback or a wildcard.',
        remediationSteps:
            'Add "kv_load_failure_policy": "fail" to --kv-transfer-config; set VLLM_NIXL_SIDE_CHANNEL_HOST from fieldRef status.podIP (lib/dgd.ts).',
    },
    (v) => {
        const out: Out = [];
        for (const c of v.containers) {
            if (c.init) continue;
            const add = (field: string, problem: string, fix: string) =>
                out.push({ subject: containerLabel(c), finding: { field, problem, fix }, urn: c.resource.urn });
            const mc = c.env.get("MOONCAKE_LOCAL_HOSTNAME");
            const mp = addressProblem(mc, c);
            if (mp) add(mc!.field, `MOONCAKE_LOCAL_HOSTNAME ${mp}`, "set it from fieldRef status.podIP");
            if (c.kind !== "DynamoGraphDeployment" || c.container !== "main" || (c.role !== "prefill" && c.role !== "decode")) continue;
            const engine = engineOf(c);
            if (engine === "vllm") {
                const kvt = json(flagValue(c, "--kv-transfer-config"));
                if (vllmPdConnector(c)) {
                    const policy = kvt?.kv_load_failure_policy ?? "recompute";
                    if (policy !== "fail")
                        add(
                            `${c.path}.args[--kv-transfer-config].kv_load_failure_policy`,
                            `is ${JSON.stringify(policy)}${kvt?.kv_load_failure_policy === undefined ? " (vLLM's default)" : ""}: a failed KV read silently re-runs the prefill on the decode worker`,
                            'set "kv_load_failure_policy": "fail"',
                        );
                }
                if (vllmPdConnector(c)?.kv_connector === "NixlConnector") {
                    const host = c.env.get("VLLM_NIXL_SIDE_CHANNEL_HOST");
                    if (!host)
                        add(
                            `${c.path}.env[VLLM_NIXL_SIDE_CHANNEL_HOST]`,
                            'is unset, so vLLM advertises "localhost" (Dynamo overrides it only for a top-level NixlConnector, falling back to 127.0.0.1): the peer\'s handshake goes to itself',
                            "set VLLM_NIXL_SIDE_CHANNEL_HOST from fieldRef status.podIP",
                        );
                    else {
                        const p = addressProblem(host, c);
                        if (p) add(host.field, `VLLM_NIXL_SIDE_CHANNEL_HOST ${p}`, "set it from fieldRef status.podIP");
                    }
                }
            }
            if (engine === "sglang") {
                const dia = flagValue(c, "--dist-init-addr");
                if (dia !== undefined && unroutable(hostOf(dia)))
                    add(
                        `${c.path}.args[--dist-init-addr]`,
                        `is ${JSON.stringify(dia)}; Dynamo advertises its host as the prefill bootstrap address, which a peer cannot reach`,
                        "use the pod IP ($(POD_IP) from the downward API) or drop the flag",
                    );
                for (const n of ["SGLANG_HOST_IP", "HOST_IP"]) {
                    const p = addressProblem(c.env.get(n), c);
                    if (p) add(c.env.get(n)!.field, `${n} ${p}`, `set ${n} from fieldRef status.podIP or remove it`);
                }
            }
        }
        return out;
    },
);

/** The prefill/decode compatibility policies. */
export const pdCompatPolicies: StackValidationPolicy[] = [pdSettingsMatch, pdFailLoudly];
