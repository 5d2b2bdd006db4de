import type { ChartFacts, ComponentFacts, EntrypointFacts, ImageFacts, ImageRequirementFact } from "../types";
import type { RefusedCombination } from "../refused";
import type { PairKvSetting, RoleSetting } from "../pairs";

/**
 * Shapes of the upstream rules (upstream/check/): pure functions from rendered objects and facts to findings. No file
 * system, no YAML, no `@pulumi/*`: `npm run upstream-check` (tools/upstream-check.ts) feeds them the offline render and
 * the policy pack (policies/upstream.ts) feeds them the objects `pulumi preview`/`up` is about to apply, so both
 * enforce exactly the same rules on exactly the same facts.
 */

/** A rendered Kubernetes object (a manifest: apiVersion, kind, metadata, spec, data ...). */
export type Obj = Record<string, any>;

/** A Helm release of the stack: chart, exact version, inline values (Pulumi `helm.sh/v3:Release` / `v4:Chart` inputs). */
export interface HelmRelease {
    name: string;
    chart: string;
    version: string;
    repo?: string;
    values?: unknown;
}

/** What a stack renders: every Kubernetes object and every Helm release. */
export interface RenderedStack {
    stack: string;
    objects: readonly Obj[];
    releases: readonly HelmRelease[];
    /** The date exceptions are judged against (default: now). */
    now?: Date;
}

/** One problem: where (stack, object, container) and which key. */
export interface Finding {
    stack: string;
    object: string;
    container?: string;
    key: string;
    message: string;
}

/** The facts the rules run against (upstream/ by default, {@link defaultFacts}); tests pass their own. */
export interface Facts {
    components: Readonly<Record<string, ComponentFacts>>;
    entrypoints: readonly EntrypointFacts[];
    images: readonly ImageFacts[];
    charts: readonly ChartFacts[];
    refused: readonly RefusedCombination[];
    requirements: readonly ImageRequirementFact[];
    /** Settings prefill and decode may differ in, per entry point (upstream/pairs.ts); default when absent. */
    pairRoles?: Readonly<Record<string, readonly RoleSetting[]>>;
    /** KV-shaping settings compared by meaning, per entry point (upstream/pairs.ts); default when absent. */
    pairKv?: Readonly<Record<string, readonly PairKvSetting[]>>;
}

/** What a run of the rules found and what it looked at. */
export interface CheckResult {
    findings: Finding[];
    uncovered: string[];
    checkedContainers: number;
    checkedReleases: number;
}

/**
 * One rule: reads the rendered stack and the facts, returns findings (and may count what it covered in `result`).
 * Register it in upstream/check/index.ts {@link rules}; both the CLI and the pack pick it up from there.
 */
export type Rule = (stack: RenderedStack, facts: Facts, result: CheckResult) => Finding[];
