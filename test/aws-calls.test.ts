import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { AUTH_AWS_CALLS } from "../services/auth/aws-calls";
import { METERING_AWS_CALLS } from "../services/metering/aws-calls";
import { LEDGER_OPS_AWS_CALLS, MIGRATOR_AWS_CALLS, RECONCILER_AWS_CALLS } from "../services/reconciler/aws-calls";
import { REPLAY_TOOL_AWS_CALLS, STATUS_AWS_CALLS } from "../tools/aws-calls";
import { CONSUMER_AWS_CALLS, REPLAY_AWS_CALLS, RESCUE_AWS_CALLS } from "../services/usage-consumer/aws-calls";
import { INSTALL_SOURCE_KEY_AWS_CALLS, MINT_AWS_CALLS, SPOKE_KEY_AWS_CALLS } from "../services/keys/aws-calls";
import { ROOT } from "./helpers";

/** Every calls table (test/aws-simulate.test.ts evaluates each against the rendered policies). */
const TABLES = [
    AUTH_AWS_CALLS,
    METERING_AWS_CALLS,
    MIGRATOR_AWS_CALLS,
    RECONCILER_AWS_CALLS,
    LEDGER_OPS_AWS_CALLS,
    CONSUMER_AWS_CALLS,
    REPLAY_AWS_CALLS,
    RESCUE_AWS_CALLS,
    MINT_AWS_CALLS,
    SPOKE_KEY_AWS_CALLS,
    INSTALL_SOURCE_KEY_AWS_CALLS,
    STATUS_AWS_CALLS,
    REPLAY_TOOL_AWS_CALLS,
].flat();

/**
 * Product code under services/ and tools/ (the operator tools call AWS as the operator): not tests, test rigs,
 * benches or chaos drivers (they talk to local stand-ins).
 */
function productFiles(dir: string): string[] {
    return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) return ["test", "testing", "node_modules"].includes(e.name) ? [] : productFiles(p);
        return /\.ts$/.test(e.name) && !/\.test\.ts$|^bench\.ts$|^chaos\.ts$|\.d\.ts$/.test(e.name) ? [p] : [];
    });
}

/** SDK v3 commands a file constructs (`new GetObjectCommand(`, `new sm.GetSecretValueCommand(`). */
function sdkCommands(text: string): string[] {
    return [...text.matchAll(/new\s+(?:[A-Za-z_$][\w$]*\.)?([A-Z][\w$]*Command)\s*\(/g)].map((m) => m[1]);
}

describe("the AWS calls tables cover the code", () => {
    it("the scan finds commands however they are imported", () => {
        expect(sdkCommands("await s.send(new GetObjectCommand({}));\nnew sm.GetSecretValueCommand({ SecretId })")).toEqual([
            "GetObjectCommand",
            "GetSecretValueCommand",
        ]);
    });

    it("every SDK command a service or an operator tool sends is listed in a table for that file (so the simulator evaluates it)", () => {
        const files = ["services", "tools"].flatMap((d) => productFiles(path.join(ROOT, d)));
        // tools/ is scanned too (its status and replay tools call S3 and the ledger Lambda as the operator).
        expect(files.some((f) => f.endsWith(path.join("tools", "status.ts")))).toBe(true);
        const unlisted: string[] = [];
        let seen = 0;
        for (const f of files) {
            const rel = path.relative(ROOT, f).split(path.sep).join("/");
            for (const cmd of sdkCommands(fs.readFileSync(f, "utf8"))) {
                seen++;
                if (!TABLES.some((c) => c.command === cmd && c.source === rel)) unlisted.push(`${rel}: ${cmd}`);
            }
        }
        expect(seen).toBeGreaterThan(0);
        expect(unlisted).toEqual([]);
    });

    it("no table lists a command its source file does not send (no stale rows)", () => {
        const stale = TABLES.filter(
            (c) => c.command && !sdkCommands(fs.readFileSync(path.join(ROOT, c.source), "utf8")).includes(c.command),
        ).map((c) => `${c.source}: ${c.command}`);
        expect(stale).toEqual([]);
    });

    it("the simulator is test-only: no product file imports it", () => {
        const roots = ["services", "components", "programs", "lib", "config", "policies", "tools"].map((d) => path.join(ROOT, d));
        const walk = (d: string): string[] =>
            fs
                .readdirSync(d, { withFileTypes: true })
                .flatMap((e) => (e.isDirectory() ? (e.name === "node_modules" ? [] : walk(path.join(d, e.name))) : [path.join(d, e.name)]));
        const offenders = roots
            .flatMap(walk)
            .filter((f) => /\.(ts|js|mjs)$/.test(f) && !/\.test\.ts$/.test(f))
            .filter((f) => fs.readFileSync(f, "utf8").includes("@cloud-copilot/iam-simulate"));
        expect(offenders).toEqual([]);
    });
});
