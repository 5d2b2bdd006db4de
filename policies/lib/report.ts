import type { PolicyResource, ReportViolation, StackValidationArgs, StackValidationPolicy } from "@pulumi/policy";
import { type ContainerView, inScope, stackView, type StackView } from "./workloads";

/** One problem: the field that causes it, what is wrong, and how to fix it (no trailing periods). */
export interface Finding {
    field: string;
    problem: string;
    fix: string;
}

/** `DynamoGraphDeployment/llama-70b container prefill/main` or `Deployment/x container store`. */
export function containerLabel(c: ContainerView): string {
    return `${c.ref} container ${c.component ? `${c.component}/` : ""}${c.container}`;
}

/** The pack's message format: `<kind/name> container <c> field <f>: <problem>. Fix: <fix>.` */
export function message(subject: string, f: Finding): string {
    return `${subject} field ${f.field}: ${f.problem}. Fix: ${f.fix}.`;
}

/** Metadata every policy carries (mandatory by default: the pack exists to fail `pulumi preview`). */
export interface PolicyMeta {
    name: string;
    description: string;
    remediationSteps: string;
}

/**
 * A stack policy that checks every container matching `applies` (default: containers that move KV or collectives
 * over the network, see `inScope`), one violation per finding, attached to the workload resource.
 */
export function containerPolicy(
    meta: PolicyMeta,
    check: (c: ContainerView, v: StackView) => Finding[],
    applies: (c: ContainerView) => boolean = inScope,
): StackValidationPolicy {
    return {
        ...meta,
        enforcementLevel: "mandatory",
        validateStack: (args: StackValidationArgs, report: ReportViolation) => {
            const v = stackView(args.resources);
            for (const c of v.containers) {
                if (!applies(c)) continue;
                for (const f of check(c, v)) report(message(containerLabel(c), f), c.resource.urn);
            }
        },
    };
}

/** A stack policy over the whole resource list, reporting `[subject, finding, urn]` triples. */
export function stackPolicy(
    meta: PolicyMeta,
    check: (v: StackView, resources: PolicyResource[]) => Array<{ subject: string; finding: Finding; urn?: string }>,
): StackValidationPolicy {
    return {
        ...meta,
        enforcementLevel: "mandatory",
        validateStack: (args: StackValidationArgs, report: ReportViolation) => {
            const v = stackView(args.resources);
            for (const x of check(v, args.resources)) report(message(x.subject, x.finding), x.urn);
        },
    };
}
