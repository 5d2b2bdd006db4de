import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { render, renderAllRepoStacks, renderSpokeHn1 } from "./cli-render";
import { ROOT, stackConfigDoc } from "./helpers";

let tmp: string;
beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "render-"));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function stackNames(): string[] {
    return fs
        .readdirSync(path.join(ROOT, "stacks"))
        .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
        .filter((x): x is string => !!x)
        .sort();
}

/**
 * `render --out <dir>/one spoke-hn1` into a fresh folder (test/cli-render.ts, shared with the run's other files that
 * read it): read by two tests (a rerun, one stack).
 */
async function renderOneStack() {
    const { out, ...r } = await renderSpokeHn1();
    return { out, r };
}

/**
 * `render --out <dir>/all` of every stack, over leftovers of an earlier render: a stack whose file is gone (to be
 * removed) and a folder that is no render (to be kept) (test/cli-render.ts, shared with the run's other files that
 * read it). Checked by the first test and, copied, the starting out/ of the typo test (whose spokes must re-render
 * byte for byte to it).
 */
async function renderAllStacks() {
    const { out, ...r } = await renderAllRepoStacks();
    return { out, r };
}

describe("npm run render", () => {
    it("renders every stack under stacks/ to out/<stack>/ with manifests, resources, policy; byte-identical on a rerun", async () => {
        const { out, r } = await renderAllStacks();
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(r.stdout).toContain("removed out/ of stacks that no longer exist: spoke-gone");
        expect(fs.readdirSync(out).sort()).toEqual([...stackNames(), "notes"].sort());
        // Not a terminal: no progress lines, one timing line at the end on stderr; nothing of it in out/.
        expect(r.stderr).toMatch(/^render: \d+ stack\(s\) in \d+\.\d s\n$/);
        for (const s of stackNames()) {
            const pictures = s.startsWith("hub") ? ["map.svg", "map.png"] : ["rails.svg", "rails.png"];
            for (const f of ["manifests.yaml", "resources.json", "policy.json", "outputs.json", "report.md", ...pictures])
                expect(fs.existsSync(path.join(out, s, f)), `${s}/${f}`).toBe(true);
            expect(fs.readFileSync(path.join(out, s, "report.md"), "utf8")).toContain(`](${pictures[0]}) ([PNG](${pictures[1]}))`);
            const policy = JSON.parse(fs.readFileSync(path.join(out, s, "policy.json"), "utf8"));
            expect(policy.mandatory).toEqual([]);
        }
        expect(r.stdout).toContain(`rendered ${stackNames().length}/${stackNames().length} stack(s)`);
        // Stable order: apiVersion, kind, namespace, name.
        const docs = YAML.parseAllDocuments(fs.readFileSync(path.join(out, "spoke-hn1", "manifests.yaml"), "utf8")).map((d) => d.toJS());
        const keys = docs.map((d) => [d.apiVersion, d.kind, d.metadata.namespace ?? "", d.metadata.name].join("\u0000"));
        expect(keys).toEqual([...keys].sort());
        const { out: again, r: rerun } = await renderOneStack();
        expect(rerun.code, rerun.stdout + rerun.stderr).toBe(0);
        for (const f of ["manifests.yaml", "resources.json", "report.md", "rails.svg", "rails.png"]) {
            expect(fs.readFileSync(path.join(again, "spoke-hn1", f)).equals(fs.readFileSync(path.join(out, "spoke-hn1", f))), f).toBe(true);
        }
        // Secrets never reach out/: no API key text anywhere, the output is masked.
        for (const s of stackNames()) {
            for (const f of fs.readdirSync(path.join(out, s)))
                expect(fs.readFileSync(path.join(out, s, f), "utf8")).not.toMatch(/sk-h200-[0-9a-z]{48}/);
        }
        expect(JSON.parse(fs.readFileSync(path.join(out, "hub-prod", "outputs.json"), "utf8")).outputs).not.toHaveProperty("apiKeys");
    });

    it("renders one named stack plus the hub it references, and nothing else", async () => {
        const { out: shared, r } = await renderOneStack();
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(fs.readdirSync(shared).sort()).toEqual(["hub-prod", "spoke-hn1"]);
        // Rendering one stack keeps the out/ folders of the others (into a copy: the shared render stays as it was).
        const out = path.join(tmp, "one");
        fs.cpSync(shared, out, { recursive: true });
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

describe("a bad spoke file fails itself, never another stack's output", () => {
    /** Every file under `dir` with its bytes, for an exact before/after comparison. */
    const snapshot = (dir: string): Record<string, string> =>
        Object.fromEntries(
            fs
                .readdirSync(dir, { recursive: true, withFileTypes: true })
                .filter((e) => e.isFile())
                .map((e) => {
                    const f = path.join(e.parentPath, e.name);
                    return [path.relative(dir, f), fs.readFileSync(f).toString("base64")];
                }),
        );

    it("a one-letter typo in a new spoke file: its own error headed by its file; the other spokes render, the hub's out/ is left as it was", async () => {
        // A copy of stacks/ and of a render of it, run from the copy's parent: its stack files are `stacks/...` there
        // as in the repository, so the render of the repository's files is what a rerun of the copy must reproduce.
        const work = path.join(tmp, "typo");
        const stacks = path.join(work, "stacks");
        fs.mkdirSync(stacks, { recursive: true });
        for (const f of fs.readdirSync(path.join(ROOT, "stacks"))) fs.copyFileSync(path.join(ROOT, "stacks", f), path.join(stacks, f));
        const out = path.join(work, "out");
        const first = await renderAllStacks();
        expect(first.r.code, first.r.stdout + first.r.stderr).toBe(0);
        for (const s of stackNames()) fs.cpSync(path.join(first.out, s), path.join(out, s), { recursive: true });
        const before = Object.fromEntries(stackNames().map((s) => [s, snapshot(path.join(out, s))]));

        // A new region copied from spoke-hn1, its own networks, and `railSupernett` for `railSupernet`.
        const doc = stackConfigDoc("spoke-hn1");
        doc["platform:spoke"].name = "dn1";
        doc["platform:frontend"].subnet = "10.30.0.0/24";
        doc["platform:backend"].railSupernett = doc["platform:backend"].railSupernet;
        delete doc["platform:backend"].railSupernet;
        fs.writeFileSync(path.join(stacks, "Pulumi.spoke-dn1.yaml"), YAML.stringify({ config: doc }));

        const r = await render(["--stacks", "stacks", "--out", "out"], work);
        expect(r.code).toBe(1);
        // Headed by the spoke file, with the spoke's keys; the hub is named as not rendered, not as the file in error.
        expect(r.stdout).toMatch(/Pulumi\.spoke-dn1\.yaml: invalid stack configuration\n {2}- platform:backend\.railSupernet: required/);
        expect(r.stdout).toContain('platform:backend.railSupernett: unknown key; did you mean "railSupernet"?');
        expect(r.stdout).not.toMatch(/Pulumi\.hub-prod\.yaml: invalid stack configuration/);
        expect(r.stdout).toContain(
            "Pulumi.hub-prod.yaml: not rendered: it checks every spoke file and Pulumi.spoke-dn1.yaml is wrong; out/hub-prod left as it was",
        );
        expect(r.stdout).toContain(`rendered ${stackNames().length - 1}/${stackNames().length + 1} stack(s); failed: hub-prod, spoke-dn1`);
        // Every other stack's out/ is byte for byte what it was (the spokes re-rendered identically, the hub untouched).
        for (const s of stackNames()) expect(snapshot(path.join(out, s)), s).toEqual(before[s]);
        expect(fs.existsSync(path.join(out, "spoke-dn1"))).toBe(false);
    }, 240_000); // a render of every stack (shared with the first test) and one of the spokes
});

describe("warnings reach the reviewer", () => {
    it("a warning the program logs is in the stack's report.md under Warnings and in the summary, not only on stderr", async () => {
        const stacks = path.join(tmp, "warn-stacks");
        fs.mkdirSync(stacks, { recursive: true });
        for (const f of fs.readdirSync(path.join(ROOT, "stacks"))) fs.copyFileSync(path.join(ROOT, "stacks", f), path.join(stacks, f));
        // An access key slot with no createdAt: the hub warns that the key has no maximum age (components/hub/SpokeIdentity.ts).
        const doc = stackConfigDoc("hub-prod");
        delete doc["platform:spokeIdentities"].hcm1.keys[0].createdAt;
        fs.writeFileSync(path.join(stacks, "Pulumi.hub-prod.yaml"), YAML.stringify({ config: doc }));
        const out = path.join(tmp, "warn-out");
        const r = await render(["--stacks", stacks, "--out", out, "hub-prod"]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        const warning = 'spoke hcm1: key slot "2026-11" has no createdAt, so its key has no maximum age';
        expect(fs.readFileSync(path.join(out, "hub-prod", "report.md"), "utf8")).toMatch(new RegExp(`## Warnings\\n\\n- ⚠ ${warning}`));
        expect(r.stdout).toContain(`  warning: ${warning}`);
        expect(r.stderr).not.toContain("warning:");
    }, 120_000);
});
