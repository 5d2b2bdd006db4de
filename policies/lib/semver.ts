/**
 * Release versions as the pack compares them (chart versions, image tags): `vX.Y.Z` or `X.Y.Z`, nothing after it.
 * One helper for every version rule of the pack (policies/gateway/install.ts, policies/rdma-platform.ts).
 */

/** A parsed release version: major, minor, patch. */
export type Semver = readonly [number, number, number];

/** Parsed `vX.Y.Z` (leading `v` optional, surrounding whitespace ignored); undefined when not a release version. */
export function semver(v: unknown): [number, number, number] | undefined {
    const m = /^v?(\d+)\.(\d+)\.(\d+)$/.exec(String(v ?? "").trim());
    return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** -1, 0, 1 comparing two parsed versions. */
export function cmpSemver(a: Semver, b: Semver): number {
    for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

/** `vX.Y.Z` text of a parsed version. */
export function semverText(v: Semver): string {
    return `v${v.join(".")}`;
}
