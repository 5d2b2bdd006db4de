import type { CapturedResource } from "../../tools/harness";

/**
 * Applies `fn` to the inputs and outputs of the resource with Pulumi name `name` (in place, on a cloned graph): how the
 * pack tests break one thing in a real rendered spoke.
 * @throws Error when no resource has that name
 */
export function edit(rs: CapturedResource[], name: string, fn: (o: Record<string, any>) => void): CapturedResource[] {
    const r = rs.find((x) => x.name === name);
    if (!r) throw new Error(`no resource ${name}`);
    fn(r.inputs as Record<string, any>);
    fn(r.outputs as Record<string, any>);
    return rs;
}
