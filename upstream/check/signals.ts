/**
 * The activation, version-pair and observability rules as one entry for their callers (tools/upstream-check.ts now; the
 * rule registry of upstream/check later): each is a pure `(stack) => Finding[]` over the rendered objects and releases.
 */
import { checkActivation } from "./activation";
import { checkObservability } from "./observability";
import { checkVersionPairs, Unproven } from "./versions";
import type { Finding, StackView } from "./view";

export type { Unproven } from "./versions";
export { activationRules, checkActivation } from "./activation";
export { checkObservability, observabilityRule, scrapedSignals } from "./observability";
export { checkVersionPairs, versionRule } from "./versions";

/** Runs the activation, version-pair and observability rules on one stack. */
export function checkSignals(s: StackView): { findings: Finding[]; unproven: Unproven[] } {
    const v = checkVersionPairs(s);
    return { findings: [...checkActivation(s), ...v.findings, ...checkObservability(s)], unproven: v.unproven };
}
