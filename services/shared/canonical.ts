import { createHash } from "node:crypto";

/** JSON with object keys sorted at every level, so equal values always serialise (and hash, and sign) equally. */
export function canonicalJson(value: unknown): string {
    return JSON.stringify(value, (_k, v) =>
        v && typeof v === "object" && !Array.isArray(v)
            ? Object.fromEntries(
                  Object.keys(v)
                      .sort()
                      .map((k) => [k, (v as Record<string, unknown>)[k]]),
              )
            : v,
    );
}

/** Hex SHA-256 of {@link canonicalJson}. */
export function contentHash(value: unknown): string {
    return createHash("sha256").update(canonicalJson(value)).digest("hex");
}
