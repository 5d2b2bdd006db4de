import { execFileSync } from "node:child_process";

/**
 * Runs Prometheus' `promtool` in `cwd`. FAILS (never skips) when it is not installed: the alert-rule and dashboard
 * tests need Debian's `prometheus` package, which `.ci/run` installs.
 * @returns `ok: false` with promtool's output when it exits non-zero (a failing rule test)
 */
export function promtool(args: string[], cwd: string): { ok: boolean; out: string } {
    try {
        return { ok: true, out: execFileSync("promtool", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
    } catch (e: any) {
        if (e.code === "ENOENT")
            throw new Error("promtool not found: install Debian's `prometheus` package (apt-get install prometheus; .ci/run does)");
        return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
    }
}
