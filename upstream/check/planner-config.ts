/**
 * The Planner's rendered `--config` against PlannerConfig (upstream/planner.ts): every key is a field (or alias) of
 * the pinned model (closed world: pydantic ignores unknown top-level keys silently), choice fields hold a listed value,
 * and the model's validators hold. Pure; see ./view.ts.
 */
import { plannerConfigAliases, plannerConfigChoices, plannerConfigKeys, plannerConfigSource, plannerConfigValidators } from "../planner";
import { argvOf, type Finding, flagValue, podsOf, type StackView } from "./view";

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
