/**
 * Endpoint shapes upstream does not support, checked on the rendered graphs (the hub refuses them first:
 * config/endpoint.ts `endpointUpstreamIssues`). Facts and sources: upstream/activation.ts
 * - `mooncake-store-equal-tp`: every worker of a graph that reads/writes the Mooncake store pool runs one TP size;
 * - `vllm-disagg-model-speculative`: no model-based drafter on a disaggregated vLLM graph.
 * Pure; see ./view.ts.
 */
import { activationFact } from "../activation";
import { dynamoFrontend } from "../dynamo";
import { argvOf, type Finding, flagValue, parseJson, type PodView, podsOf, type StackView } from "./view";

const WORKERS = ["prefill", "decode", "worker"];

/** Does this worker load a Mooncake store client (vLLM MooncakeStoreConnector or SGLang HiCache mooncake)? */
function usesMooncakePool(p: PodView): boolean {
    const argv = argvOf(p.main);
    return argv.some((a) => a.includes("MooncakeStoreConnector")) || flagValue(argv, "--hicache-storage-backend") === "mooncake";
}

/** Tensor-parallel size of a worker (vLLM/SGLang `--tensor-parallel-size`, SGLang `--tp-size`); 1 when unset (both defaults). */
function tpOf(p: PodView): string {
    const argv = argvOf(p.main);
    const v = flagValue(argv, "--tensor-parallel-size") ?? flagValue(argv, "--tp-size") ?? flagValue(argv, "--tp");
    return v === undefined || v === true ? "1" : v;
}

/** Checks both rules on one stack. */
export function checkEndpointSupport(s: StackView): Finding[] {
    const out: Finding[] = [];
    const tpFact = activationFact("mooncake-store-equal-tp");
    const specFact = activationFact("vllm-disagg-model-speculative");
    const pods = podsOf(s.objects).filter((p) => p.graph && WORKERS.includes(p.componentType ?? ""));
    for (const graph of new Set(pods.map((p) => p.graph))) {
        const workers = pods.filter((p) => p.graph === graph);
        const pool = workers.filter(usesMooncakePool);
        const sizes = [...new Set(pool.map(tpOf))];
        if (sizes.length > 1) {
            for (const p of pool) {
                out.push({
                    stack: s.stack,
                    object: p.object,
                    container: p.main.name,
                    key: "--tensor-parallel-size",
                    message: `${tpFact.id} (${tpFact.feature}) would be ${tpFact.otherwise}: this worker runs TP${tpOf(p)} while others on the same Mooncake store pool run TP${sizes.filter((x) => x !== tpOf(p)).join("/TP")}; pool keys carry tp_rank, not TP size [${tpFact.source}]`,
                });
            }
        }
        const isVllm = workers.some((p) => argvOf(p.main).slice(0, 3).join(" ") === "python3 -m dynamo.vllm");
        const disagg = workers.some((p) => p.componentType === "prefill") && workers.some((p) => p.componentType === "decode");
        if (isVllm && disagg) {
            for (const p of workers) {
                const raw = flagValue(argvOf(p.main), "--speculative-config");
                if (raw === undefined) continue;
                const method = parseJson(raw)?.method;
                if (method === "ngram") continue;
                out.push({
                    stack: s.stack,
                    object: p.object,
                    container: p.main.name,
                    key: "--speculative-config",
                    message: `${specFact.id} (${specFact.feature}) would be ${specFact.otherwise}: ${JSON.stringify(method ?? raw)} speculative decoding on a disaggregated vLLM worker crashes silently under KV-transfer load (no fix recorded up to Dynamo ${dynamoFrontend.version}) [${specFact.source}]`,
                });
            }
        }
    }
    return out;
}
