/**
 * The Planner's rendered `--config` against PlannerConfig (upstream/planner.ts): every key is a field (or alias) of
 * the pinned model (closed world: pydantic ignores unknown top-level keys silently), choice fields hold a listed value,
 * and the model's validators hold. Pure; see ./view.ts.
 */
import { activationFact } from "../activation";
import {
    type PlannerPool,
    plannerConfigAliases,
    plannerConfigChoices,
    plannerConfigKeys,
    plannerConfigSource,
    plannerConfigValidators,
    plannerScaleUpNeed,
} from "../planner";
import { argvOf, type Finding, flagValue, objectName, parseJson, podsOf, type StackView } from "./view";
import { podTemplatesOf } from "./walk";

/** Judges one parsed config. @returns problems as `[key, message]` */
export function plannerConfigProblems(c: unknown): Array<[string, string]> {
    if (!c || typeof c !== "object" || Array.isArray(c)) return [["--config", "is not a JSON object"]];
    const cfg = c as Record<string, any>;
    const out: Array<[string, string]> = [];
    const known = new Set(plannerConfigKeys);
    for (const k of Object.keys(cfg)) {
        if (!known.has(k) && !(k in plannerConfigAliases))
            out.push([
                `--config.${k}`,
                `${k} is not a PlannerConfig field; pydantic ignores it silently and the Planner runs on the default`,
            ]);
    }
    for (const [k, choices] of Object.entries(plannerConfigChoices)) {
        if (cfg[k] !== undefined && !choices.includes(cfg[k]))
            out.push([`--config.${k}`, `${JSON.stringify(cfg[k])} is not one of ${choices.join(", ")}`]);
    }
    for (const v of plannerConfigValidators) if (!v.holds(cfg)) out.push([`--config`, `validator ${v.id}: ${v.why} [${v.source}]`]);
    return out;
}

/** Checks every Planner of one stack. */
export function checkPlannerConfig(s: StackView): Finding[] {
    const out: Finding[] = [];
    for (const p of podsOf(s.objects)) {
        const argv = argvOf(p.main);
        if (argv.slice(0, 3).join(" ") !== "python3 -m dynamo.planner") continue;
        const raw = flagValue(argv, "--config");
        let parsed: unknown;
        if (typeof raw !== "string") parsed = undefined;
        else {
            try {
                parsed = JSON.parse(raw);
            } catch {
                parsed = undefined;
            }
        }
        const problems =
            raw === undefined
                ? [["--config", "missing: the Planner runs on every default (optimization_target throughput)"] as [string, string]]
                : parsed === undefined
                  ? [["--config", "not JSON this check can read (closed world)"] as [string, string]]
                  : plannerConfigProblems(parsed);
        for (const [key, message] of problems)
            out.push({
                stack: s.stack,
                object: p.object,
                container: p.main.name,
                key,
                message: `planner-config: ${message} [${plannerConfigSource}]`,
            });
    }
    return out;
}

/** PlannerConfig's defaults the headroom rule falls back on (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/planner/config/defaults.py). */
const DEFAULT_MAX_GPU_BUDGET = 8;
const DEFAULT_MIN_ENDPOINT = 1;

/**
 * `planner-scale-up-headroom` (upstream/activation.ts) on every rendered DynamoGraphDeployment with a Planner: its
 * `max_gpu_budget` at least the worker components' GPUs (replicas x the main container's `nvidia.com/gpu` limit, each
 * pool at least its min endpoint) plus the largest pool's GPUs per worker (upstream/planner.ts `plannerScaleUpNeed`).
 * Below it the Planner can never add that worker. A graph whose GPUs or config cannot be read is left to the rules
 * that read them (checkPlannerConfig, the pack's GPU rules).
 */
export function checkPlannerHeadroom(s: StackView): Finding[] {
    const fact = activationFact("planner-scale-up-headroom");
    const out: Finding[] = [];
    for (const o of s.objects) {
        if (o?.kind !== "DynamoGraphDeployment") continue;
        const ts = podTemplatesOf(o);
        const planner = ts.find((t) => t.role === "planner");
        if (!planner) continue;
        const main = (planner.spec.containers ?? []).find((c: any) => c?.name === "main") ?? planner.spec.containers?.[0];
        const cfg = main ? parseJson(flagValue(argvOf(main), "--config")) : undefined;
        if (!cfg || typeof cfg !== "object") continue;
        const budget = typeof cfg.max_gpu_budget === "number" ? cfg.max_gpu_budget : DEFAULT_MAX_GPU_BUDGET;
        if (budget < 0) continue; // -1 disables the ceiling (budget.py bounds_for_total)
        const min = typeof cfg.min_endpoint === "number" ? cfg.min_endpoint : DEFAULT_MIN_ENDPOINT;
        const pools: PlannerPool[] = [];
        for (const t of ts) {
            const role = t.role === "worker" ? "workers" : t.role;
            if (role !== "prefill" && role !== "decode" && role !== "workers") continue;
            const c = (t.spec.containers ?? []).find((x: any) => x?.name === "main") ?? t.spec.containers?.[0];
            const gpus = Number(c?.resources?.limits?.["nvidia.com/gpu"]);
            if (!Number.isInteger(gpus) || gpus <= 0) continue;
            const own = role === "prefill" ? cfg.prefill_min_endpoint : role === "decode" ? cfg.decode_min_endpoint : undefined;
            pools.push({ role, replicas: t.replicas, gpusPerWorker: gpus, ...(typeof own === "number" ? { minEndpoint: own } : {}) });
        }
        if (!pools.length) continue;
        const { start, step, need } = plannerScaleUpNeed(pools, min);
        if (budget < need)
            out.push({
                stack: s.stack,
                object: `${objectName(o)} ${planner.label}`,
                container: main.name,
                key: "--config.max_gpu_budget",
                message: `${fact.id} (${fact.feature}) would be ${fact.otherwise}: max_gpu_budget ${budget} is below the graph's ${start} GPUs plus one more ${step}-GPU worker (${need}) [${fact.source}]`,
            });
    }
    return out;
}
