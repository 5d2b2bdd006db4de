import { execFile } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { promisify } from "util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { ROOT, stackConfigDoc } from "./helpers";

const run = promisify(execFile);

/** Runs `npm run render -- <args>` the way a user does (separate process, real CLI). */
async function render(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
        const r = await run(process.execPath, ["-r", "ts-node/register/transpile-only", "tools/render.ts", ...args], { cwd: ROOT, env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true" } });
        return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
        const x = e as { code: number; stdout: string; stderr: string };
        return { code: x.code, stdout: x.stdout, stderr: x.stderr };
    }
}

let tmp: string;
beforeAll(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), "render-")); });
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function stackNames(): string[] {
    return fs.readdirSync(path.join(ROOT, "stacks")).map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((x): x is string => !!x).sort();
}

describe("npm run render", () => {
    it("renders every stack under stacks/ to out/<stack>/ with manifests, resources, policy; byte-identical on a rerun", async () => {
        const out = path.join(tmp, "all");
        // Leftovers of an earlier render: a stack whose file is gone (removed), a folder that is no render (kept).
        fs.mkdirSync(path.join(out, "spoke-gone"), { recursive: true });
        fs.writeFileSync(path.join(out, "spoke-gone", "resources.json"), "[]");
        fs.mkdirSync(path.join(out, "notes"), { recursive: true });
        fs.writeFileSync(path.join(out, "notes", "todo.txt"), "keep");
        const r = await render(["--out", out]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(r.stdout).toContain("removed out/ of stacks that no longer exist: spoke-gone");
        expect(fs.readdirSync(out).sort()).toEqual([...stackNames(), "notes"].sort());
        // Not a terminal: no progress lines, one timing line at the end on stderr; nothing of it in out/.
        expect(r.stderr).toMatch(/^render: \d+ stack\(s\) in \d+\.\d s\n$/);
        for (const s of stackNames()) {
            const pictures = s.startsWith("hub") ? ["map.svg", "map.png"] : ["rails.svg", "rails.png"];
            for (const f of ["manifests.yaml", "resources.json", "policy.json", "outputs.json", "report.md", ...pictures]) expect(fs.existsSync(path.join(out, s, f)), `${s}/${f}`).toBe(true);
            expect(fs.readFileSync(path.join(out, s, "report.md"), "utf8")).toContain(`](${pictures[0]}) ([PNG](${pictures[1]}))`);
            const policy = JSON.parse(fs.readFileSync(path.join(out, s, "policy.json"), "utf8"));
            expect(policy.mandatory).toEqual([]);
        }
        expect(r.stdout).toContain(`rendered ${stackNames().length}/${stackNames().length} stack(s)`);
        // Stable order: apiVersion, kind, namespace, name.
        const docs = YAML.parseAllDocuments(fs.readFileSync(path.join(out, "spoke-hn1", "manifests.yaml"), "utf8")).map((d) => d.toJS());
        const keys = docs.map((d) => [d.apiVersion, d.kind, d.metadata.namespace ?? "", d.metadata.name].join("\u0000"));
        expect(keys).toEqual([...keys].sort());
        const again = path.join(tmp, "again");
        expect((await render(["--out", again, "spoke-hn1"])).code).toBe(0);
        for (const f of ["manifests.yaml", "resources.json", "report.md", "rails.svg", "rails.png"]) {
            expect(fs.readFileSync(path.join(again, "spoke-hn1", f)).equals(fs.readFileSync(path.join(out, "spoke-hn1", f))), f).toBe(true);
        }
        // Secrets never reach out/: no API key text anywhere, the output is masked.
        for (const s of stackNames()) {
            for (const f of fs.readdirSync(path.join(out, s))) expect(fs.readFileSync(path.join(out, s, f), "utf8")).not.toMatch(/sk-h200-[0-9a-z]{48}/);
        }
        expect(JSON.parse(fs.readFileSync(path.join(out, "hub-prod", "outputs.json"), "utf8")).outputs).not.toHaveProperty("apiKeys");
    });

    it("renders one named stack plus the hub it references, and nothing else", async () => {
        const out = path.join(tmp, "one");
        const r = await render(["--out", out, "spoke-hn1"]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(fs.readdirSync(out).sort()).toEqual(["hub-prod", "spoke-hn1"]);
        // Rendering one stack keeps the out/ folders of the others.
        expect((await render(["--out", out, "hub-prod"])).code).toBe(0);
        expect(fs.readdirSync(out).sort()).toEqual(["hub-prod", "spoke-hn1"]);
    });

    it("renders a stack file that lives anywhere (--config)", async () => {
        const dir = path.join(tmp, "elsewhere");
        fs.mkdirSync(dir, { recursive: true });
        const doc = stackConfigDoc("spoke-hcm1");
        fs.writeFileSync(path.join(dir, "Pulumi.spoke-hcm1.yaml"), YAML.stringify({ config: doc }));
        const out = path.join(tmp, "cfg");
        const r = await render(["--out", out, "--config", path.join(dir, "Pulumi.spoke-hcm1.yaml")]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(fs.readdirSync(out).sort()).toEqual(["hub-prod", "spoke-hcm1"]);
    });

    it("exits non-zero on a bad stack file, naming the file and the key, and writes nothing for that stack", async () => {
        const dir = path.join(tmp, "bad");
        fs.mkdirSync(dir, { recursive: true });
        const doc = stackConfigDoc("spoke-hn1");
        doc["platform:nodePools"][0].profile = "hgx-b300";
        const file = path.join(dir, "Pulumi.spoke-bad.yaml");
        fs.writeFileSync(file, YAML.stringify({ config: doc }));
        const out = path.join(tmp, "badout");
        fs.mkdirSync(path.join(out, "spoke-bad"), { recursive: true });
        fs.writeFileSync(path.join(out, "spoke-bad", "manifests.yaml"), "stale");
        const r = await render(["--out", out, "--config", file]);
        expect(r.code).toBe(1);
        expect(r.stdout).toContain(`${file}: invalid stack configuration`);
        expect(r.stdout).toContain('platform:nodePools[0].profile: unknown node profile "hgx-b300"');
        expect(r.stdout).not.toMatch(/at \w+ \(/); // no stack trace for a config error
        expect(fs.existsSync(path.join(out, "spoke-bad"))).toBe(false);
        expect(fs.existsSync(path.join(out, "hub-prod", "manifests.yaml"))).toBe(true);
    });
});
