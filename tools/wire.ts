/**
 * Helpers for Pulumi's wire format of property values (what the engine and policy analyzers see):
 * secrets, unknowns, resource references and assets are objects tagged with a signature key.
 * Signatures from @pulumi/pulumi runtime/rpc.js (`specialSigKey`, `specialSecretSig`, `unknownValue`, ...).
 */
export const SIG_KEY = "4dabf18193072939515e22adb298388d";
export const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";
export const RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e";
export const ASSET_SIG = "c44067f5952c0a294b673a41bacd8c17";
export const ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7";
export const OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4";
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** Placeholder written wherever a secret value would appear in `out/`. */
export const SECRET_MASK = "[secret]";
/** Placeholder for a value that is unknown during preview. */
export const UNKNOWN_MASK = "[unknown]";

/** True if the wire value (at any depth) contains a secret. */
export function containsSecret(v: unknown): boolean {
    if (Array.isArray(v)) return v.some(containsSecret);
    if (v && typeof v === "object") {
        const o = v as Record<string, unknown>;
        if (o[SIG_KEY] === SECRET_SIG) return true;
        if (o[SIG_KEY] === OUTPUT_SIG && o.secret === true) return true;
        return Object.values(o).some(containsSecret);
    }
    return false;
}

/**
 * Converts a wire value to plain JSON for `out/`: secrets become {@link SECRET_MASK}, unknowns
 * {@link UNKNOWN_MASK}, resource references `{ urn }`, assets/archives a short description.
 */
export function maskWire(v: unknown): unknown {
    if (v === UNKNOWN) return UNKNOWN_MASK;
    if (Array.isArray(v)) return v.map(maskWire);
    if (v && typeof v === "object") {
        const o = v as Record<string, unknown>;
        switch (o[SIG_KEY]) {
            case SECRET_SIG:
                return SECRET_MASK;
            case RESOURCE_SIG:
                return { urn: o.urn };
            case ASSET_SIG:
                return { asset: o.path ?? o.uri ?? "(text)" };
            case ARCHIVE_SIG:
                return { archive: o.path ?? o.uri ?? "(assets)" };
            case OUTPUT_SIG:
                if (o.secret === true) return SECRET_MASK;
                return "value" in o ? maskWire(o.value) : UNKNOWN_MASK;
            default:
                return Object.fromEntries(
                    Object.entries(o)
                        .filter(([, x]) => x !== undefined)
                        .map(([k, x]) => [k, maskWire(x)]),
                );
        }
    }
    return v;
}

/** Unwraps secrets (keeping values) and output values, for code that needs the real shape (mock state). */
export function unwrapWire(v: unknown): unknown {
    if (Array.isArray(v)) return v.map(unwrapWire);
    if (v && typeof v === "object") {
        const o = v as Record<string, unknown>;
        if (o[SIG_KEY] === SECRET_SIG) return unwrapWire(o.value);
        if (o[SIG_KEY] === OUTPUT_SIG) return "value" in o ? unwrapWire(o.value) : undefined;
        if (o[SIG_KEY]) return v;
        return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, unwrapWire(x)]));
    }
    return v;
}

/** True if the wire value (at any depth) contains an unknown (preview) value. */
export function containsUnknown(v: unknown): boolean {
    if (v === UNKNOWN) return true;
    if (Array.isArray(v)) return v.some(containsUnknown);
    if (v && typeof v === "object") {
        const o = v as Record<string, unknown>;
        if (o[SIG_KEY] === OUTPUT_SIG && !("value" in o)) return true;
        return Object.values(o).some(containsUnknown);
    }
    return false;
}

/**
 * Stack outputs as another stack's StackReference would read them: top-level outputs that are unknown
 * (only possible when the referenced stack was itself rendered in preview mode) are left out, as a
 * not-yet-deployed output is absent from real state.
 */
export function referenceableOutputs(outputs: Record<string, unknown>): Record<string, unknown> {
    return Object.fromEntries(Object.entries(outputs).filter(([, v]) => !containsUnknown(v)));
}
