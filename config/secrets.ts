import type { ConfigIssue } from "./errors";

/**
 * Credentials never belong in plain stack config: a plain value lands in the Pulumi state, in `npm run render`'s
 * `out/` and in CI logs. This module recognises values that look like one; the loader refuses them with the
 * `pulumi config set --secret` hint. Patterns are the issuers' documented token formats.
 */

/** Token formats by issuer (prefixes documented by each issuer). */
const PATTERNS: Array<[RegExp, string]> = [
    [/\b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b/, "an AWS access key id"],
    [/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/, "a PEM private key"],
    [/\bgh[pousr]_[A-Za-z0-9]{36,}\b/, "a GitHub token"],
    [/\bgithub_pat_[A-Za-z0-9_]{22,}\b/, "a GitHub fine-grained token"],
    [/\bhf_[A-Za-z0-9]{30,}\b/, "a Hugging Face token"],
    [/\bsk-[A-Za-z0-9_-]{20,}/, "an API secret key (sk-...)"],
    [/\bxox[abposr]-[A-Za-z0-9-]{10,}/, "a Slack token"],
    [/\bAIza[0-9A-Za-z_-]{35}\b/, "a Google API key"],
    [/\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/, "a JSON Web Token"],
    [/\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:[^\s@/]+@/i, "a URL with an embedded password"],
];

/** Last path segments that name a secret (or the name of one). */
const SECRET_NAME = /(secret|token|passw(or)?d|credential|private.?key|api.?key|access.?key)/i;

/** Provider config keys whose values are credentials: allowed only as `secure:` values. */
export const SECRET_CONFIG_KEYS: readonly string[] = ["aws:accessKey", "aws:secretKey", "aws:token", "kubernetes:kubeconfig"];

/** A Kubernetes object name (DNS-1123 subdomain) or an ARN: what a `...Secret`/`...SecretName` key legitimately holds. */
function isResourceName(v: string): boolean {
    return (v.length <= 253 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(v)) || /^arn:aws[a-z-]*:/.test(v);
}

/** Shannon entropy in bits per character. */
export function entropy(s: string): number {
    const counts = new Map<string, number>();
    for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
    let h = 0;
    for (const n of counts.values()) {
        const p = n / s.length;
        h -= p * Math.log2(p);
    }
    return h;
}

/**
 * What credential `value` looks like, or undefined. `keyName` is the last segment of its config path: in keys named
 * like a secret (`hfTokenSecret`, `password`, `apiKey`), any value that is not a resource name and is long and random
 * (>= 16 characters, >= 3.5 bits/char) counts.
 */
export function credentialKind(value: string, keyName: string): string | undefined {
    for (const [re, what] of PATTERNS) if (re.test(value)) return what;
    if (SECRET_NAME.test(keyName) && !isResourceName(value) && value.length >= 16 && entropy(value) >= 3.5) return "a random secret value";
    return undefined;
}

function fmt(key: string, path: Array<string | number>): string {
    return key + path.map((p) => (typeof p === "number" ? `[${p}]` : `.${p}`)).join("");
}

function walk(v: unknown, key: string, path: Array<string | number>, out: ConfigIssue[]) {
    if (typeof v === "string") {
        const last = path.length ? String(path[path.length - 1]) : key.slice(key.indexOf(":") + 1);
        const kind = credentialKind(v, typeof path[path.length - 1] === "number" ? String(path[path.length - 2] ?? last) : last);
        if (kind) {
            const k = fmt(key, path);
            out.push({
                key: k,
                message: `looks like ${kind} in plain config (the value is not shown). A credential never goes in a stack file: it would land in the state, in out/ and in logs. Keep it in the Kubernetes Secret or IAM role it belongs to and name that here, or if this stack must carry it, \`pulumi config set --secret ${key} ...\``,
            });
        }
    } else if (Array.isArray(v)) {
        v.forEach((x, i) => walk(x, key, [...path, i], out));
    } else if (v && typeof v === "object") {
        for (const [k, x] of Object.entries(v)) walk(x, key, [...path, k], out);
    }
}

/**
 * Plain (non-`secure:`) config values that hold a credential, and credential provider keys set in plain text.
 * Messages never repeat the value.
 *
 * @param all flat config map (`namespace:key` -> string, objects JSON-encoded)
 * @param secretKeys keys whose values are Pulumi secrets (`secure:` in the file): not scanned
 */
export function plainCredentials(all: Record<string, string>, secretKeys: ReadonlySet<string>): ConfigIssue[] {
    const out: ConfigIssue[] = [];
    for (const [key, raw] of Object.entries(all)) {
        if (secretKeys.has(key)) continue;
        if (SECRET_CONFIG_KEYS.includes(key)) {
            out.push({
                key,
                message: `must be a Pulumi secret, not plain text (the value is not shown): \`pulumi config set --secret ${key} ...\`, or better, leave it unset and use the ambient credentials / a kubeconfig context`,
            });
            continue;
        }
        let v: unknown = raw;
        try {
            v = JSON.parse(raw);
        } catch {
            /* plain string */
        }
        walk(v, key, [], out);
    }
    return out;
}
