import { SECRET_SIG, SIG_KEY } from "../tools/wire";

/**
 * Walkers over a stack's captured resources, as the engine would checkpoint them: the state-secrets tests of the hub
 * (test/hub-state-secrets.test.ts) and of the spokes (test/spoke-secrets.test.ts) list every Pulumi secret a stack
 * holds and every string it could print.
 */

/** Paths (`<type>::<name>.<inputs|outputs>.<path>`) of every Pulumi secret in a value. */
export function secretPaths(value: unknown, at: string, out: string[] = []): string[] {
    if (value && typeof value === "object") {
        const o = value as Record<string, unknown>;
        if (o[SIG_KEY] === SECRET_SIG) {
            out.push(at);
            return out;
        }
        for (const [k, v] of Object.entries(o)) secretPaths(v, `${at}.${k}`, out);
    }
    return out;
}

/** Every string in a value (secrets unwrapped). */
export function strings(value: unknown, out: string[] = []): string[] {
    if (typeof value === "string") out.push(value);
    else if (value && typeof value === "object") for (const v of Object.values(value)) strings(v, out);
    return out;
}
