/**
 * Every command of package.json answers `--help` with its usage, what it does and examples, and exits 0 without
 * reading a stack file, starting a server or connecting anywhere.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers";

const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
/** Scripts that are the standard tools themselves (their own --help), not commands of this repository. */
const NOT_OURS = new Set(["test", "test:unit", "test:e2e", "typecheck", "lint", "format", "format:check"]);
const commands = Object.entries(pkg.scripts).filter(([name]) => !NOT_OURS.has(name));

describe("--help on every command", () => {
    it("covers the commands the README names", () => {
        expect(commands.map(([n]) => n)).toEqual(
            expect.arrayContaining([
                "render",
                "new-spoke",
                "status",
                "chaos",
                "bench",
                "discover-node",
                "ci-stacks",
                "images",
                "pins",
                "validate",
                "upstream-check",
                "lint:workflows",
            ]),
        );
    });

    it.each(commands)("npm run %s -- --help: usage, examples, exit 0", (name, script) => {
        // The script's own command line (`node -r ./tools/register-esbuild.js tools/x.ts`), as npm runs it.
        const [cmd, ...args] = script.split(/\s+/);
        expect(cmd).toBe("node");
        for (const flag of ["--help", "-h"]) {
            const r = spawnSync(process.execPath, [...args, flag], {
                cwd: ROOT,
                encoding: "utf8",
                env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true", DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" },
                timeout: 60_000,
            });
            expect(r.status, `${name} ${flag}: ${r.stderr}`).toBe(0);
            expect(r.stdout).toMatch(new RegExp(`^usage: npm run ${name}\\b`));
            expect(r.stdout).toMatch(/\nExamples[^\n]*:\n {2}npm run /);
            expect(r.stderr).toBe("");
        }
    });
});
