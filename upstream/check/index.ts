/**
 * The upstream rules, one registry for `npm run upstream-check` (tools/upstream-check.ts, over the offline render) and
 * the policy pack (policies/upstream.ts, over what `pulumi preview`/`up` applies). Pure: no file system, no YAML, no
 * `@pulumi/*`. Packages it imports (the PromQL parser) resolve from the repository's root node_modules, which the pack
 * needs next to policies/node_modules (test/policies/fact-base.test.ts, README "The policy pack is a closed world").
 *
 * To add a rule: write it in a new file of this folder as a {@link Rule} (`(stack, facts, result) => Finding[]`) and
 * append it to {@link rules}. Nothing else: both callers run every entry.
 */
import { charts } from "../charts";
import { components, entrypoints } from "../index";
import { imageRequirements, images } from "../images";
import { refusedCombinations } from "../refused";
import { containerRule } from "./containers";
import { helmValuesRule } from "./helm";
import { pairRule } from "./pairs";
import { kvClosedWorldRule } from "./kv-closed-world";
import { mooncakePairRule } from "./mooncake-pairs";
import { unreadPodTemplateRule } from "./walk";
import { signalsRule } from "./signals";
import { pairKvSettings, pairRoleSettings } from "../pairs";
import type { CheckResult, Facts, Finding, HelmRelease, Obj, RenderedStack, Rule } from "./types";

export * from "./types";
export { checkContainer, containerRule, findEntrypoint } from "./containers";
export { chartFactsOf, checkHelmValues, helmValuesRule, valuesPaths } from "./helm";
export { kvClosedWorldRule, kvExceptionsOf } from "./kv-closed-world";
export { mooncakePairRule } from "./mooncake-pairs";
export { signalsRule } from "./signals";
export type { KvException } from "./kv-closed-world";
export { componentRole, mainContainer, pairRule, pairSideOf } from "./pairs";
export { containersOf, effectiveArgv, objectName, podSpecs, splitImage } from "./objects";
export {
    dgdRole,
    effectivePodSpec,
    groupOf,
    type PodTemplateView,
    podTemplatesOf,
    unreadPodTemplateRule,
    unreadPodTemplates,
} from "./walk";

/** The facts of upstream/ (the only copy; the render, the CLI and the pack read these). */
export const defaultFacts: Facts = {
    components,
    entrypoints,
    images,
    charts,
    refused: refusedCombinations,
    requirements: imageRequirements,
    pairRoles: pairRoleSettings,
    pairKv: pairKvSettings,
};

/** Every upstream rule, in report order. Append new rules here. */
export const rules: readonly Rule[] = [
    // Closed world: a pod template the walker cannot read (upstream/check/walk.ts) would escape every rule below.
    unreadPodTemplateRule,
    containerRule,
    helmValuesRule,
    pairRule,
    kvClosedWorldRule,
    mooncakePairRule,
    // Features that take effect and peers that accept them (upstream/activation.ts), version pairs (upstream/compat.ts),
    // the observability chain (upstream/metrics.ts), one Prometheus for scrapes and the Planner, Mooncake devices,
    // what each engine supports per endpoint shape, the Planner's config keys (upstream/check/signals.ts).
    signalsRule,
];

/** An empty result to accumulate into. */
export function emptyResult(): CheckResult {
    return { findings: [], uncovered: [], checkedContainers: 0, checkedReleases: 0 };
}

/** Runs every rule of {@link rules} (or `only`) on one rendered stack; accumulates into `out`. */
export function checkRendered(
    stack: RenderedStack,
    facts: Facts = defaultFacts,
    out: CheckResult = emptyResult(),
    only: readonly Rule[] = rules,
): CheckResult {
    for (const rule of only) out.findings.push(...rule(stack, facts, out));
    return out;
}

/** Helm releases from Pulumi resource records (`{ type, name, inputs }`, tools/render resources.json). */
export function releasesOf(resources: readonly Obj[]): HelmRelease[] {
    return resources
        .filter((r) => r?.type === "kubernetes:helm.sh/v3:Release" || r?.type === "kubernetes:helm.sh/v4:Chart")
        .map((r) => {
            const i = r.inputs ?? {};
            return {
                name: String(r.name),
                chart: String(i.chart),
                version: String(i.version),
                repo: i.repositoryOpts?.repo,
                values: i.values,
            };
        });
}

/** One stack from manifests and resource records (the render's `manifests.yaml` and `resources.json`). */
export function checkStack(
    stack: string,
    manifests: Obj[],
    resources: Obj[],
    facts: Facts = defaultFacts,
    out: CheckResult = emptyResult(),
): CheckResult {
    return checkRendered(
        { stack, objects: manifests.filter((m) => m && typeof m === "object"), releases: releasesOf(resources) },
        facts,
        out,
    );
}

/** Human-readable line of one finding. */
export function formatFinding(f: Finding): string {
    return `${f.stack}: ${f.object}${f.container ? ` container ${f.container}` : ""}: ${f.key}: ${f.message}`;
}
