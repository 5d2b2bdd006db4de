import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { loadCrds, ManifestValidator, strictify } from "../tools/validate";
import { ESBUILD_LOADER } from "./loader";

/** CRDs written for these tests (test/fixtures/crds, not upstream files): a List export and a single document. */
const CRDS = path.join(__dirname, "fixtures", "crds");
const ROOT = path.join(__dirname, "..");
let v: ManifestValidator;
beforeAll(() => {
    v = ManifestValidator.fromDir(CRDS);
});

/** Runs `npm run validate` (tools/validate.ts) in its own process. */
function cli(args: string[]) {
    return spawnSync(process.execPath, ["-r", ESBUILD_LOADER, "tools/validate.ts", ...args], {
        cwd: ROOT,
        encoding: "utf8",
        env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true" },
    });
}

const widget = (spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: "w", namespace: "ns" }) => ({
    apiVersion: "example.com/v1",
    kind: "Widget",
    metadata,
    spec,
});

describe("schema validation of rendered objects", () => {
    it("indexes CRDs by group/version/kind from List exports", () => {
        expect([...loadCrds(CRDS).keys()].sort()).toEqual(["example.com/v1/Widget", "example.com/v1alpha1/Gadget"]);
    });

    it("accepts a valid custom resource, int-or-string and preserved unknown fields", () => {
        expect(v.validate(widget({ size: 3, mode: "fast", port: "http", extra: { anything: [1] } }))).toEqual([]);
        expect(v.validate(widget({ size: 3, port: 8080 }))).toEqual([]);
    });

    it("rejects unknown fields, wrong types, missing required fields and bad enums", () => {
        expect(v.validate(widget({ size: 3, sise: 4 }))).toEqual(["/spec: must NOT have additional properties 'sise'"]);
        expect(v.validate(widget({ size: "3" }))).toEqual(["/spec/size: must be integer"]);
        expect(v.validate(widget({ mode: "fast" }))).toEqual(["/spec: must have required property 'size'"]);
        expect(v.validate(widget({ size: 1, mode: "turbo" }))).toEqual([
            '/spec/mode: must be equal to one of the allowed values ["fast","safe"]',
        ]);
        expect(v.validate(widget({ size: 1 }, { name: "w", labelz: {} }))).toEqual([
            "/metadata/labelz: unknown field (not in V1ObjectMeta)",
        ]);
    });

    it("validates core kinds against the Kubernetes schema, unknown fields included", () => {
        const dep = {
            apiVersion: "apps/v1",
            kind: "Deployment",
            metadata: { name: "d", namespace: "x" },
            spec: {
                replicas: 1,
                selector: { matchLabels: { a: "b" } },
                template: { metadata: { labels: { a: "b" } }, spec: { containers: [{ name: "c", image: "i:1" }] } },
            },
        };
        expect(v.validate(dep)).toEqual([]);
        const typo = structuredClone(dep) as any;
        typo.spec.template.spec.containers[0].imagePullPolicyy = "Always";
        expect(v.validate(typo)).toEqual(["/spec/template/spec/containers/0/imagePullPolicyy: unknown field (not in V1Container)"]);
        const wrongType = structuredClone(dep) as any;
        wrongType.spec.replicas = "1";
        expect(v.validate(wrongType).join("\n")).toMatch(/\/spec\/replicas: must be integer/);
        expect(v.validate({ apiVersion: "example.com/v9", kind: "Gadget", metadata: { name: "g" } })).toEqual([
            "no schema for example.com/v9 Gadget: not a core kind and no CRD for it in the CRD directory",
        ]);
    });

    it("adds additionalProperties:false only where properties are listed and unknown fields are not preserved", () => {
        const s = strictify({
            type: "object",
            properties: {
                a: { type: "object", properties: { b: { type: "string" } } },
                m: { type: "object", additionalProperties: { type: "string" } },
            },
        });
        expect(s.additionalProperties).toBe(false);
        expect(s.properties.a.additionalProperties).toBe(false);
        expect(s.properties.m.additionalProperties).toEqual({ type: "string" });
    });

    it("a cluster-scoped kind may not carry a namespace", () => {
        expect(v.validate({ apiVersion: "example.com/v1alpha1", kind: "Gadget", metadata: { name: "g" }, spec: { config: "{}" } })).toEqual(
            [],
        );
        expect(
            v.validate({ apiVersion: "example.com/v1alpha1", kind: "Gadget", metadata: { name: "g", namespace: "x" }, spec: {} }),
        ).toEqual(["/metadata/namespace: Gadget is cluster-scoped"]);
    });
});

describe("npm run validate -- --crds DIR", () => {
    let tmp: string;
    beforeAll(() => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "validate-"));
    });
    afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const manifests = (docs: unknown[]) => {
        const f = path.join(tmp, `m${Math.random().toString(36).slice(2)}.yaml`);
        fs.writeFileSync(f, docs.map((d) => YAML.stringify(d)).join("---\n"));
        return f;
    };

    it("fails, never skips, when the CRD directory is missing or holds no CRD", () => {
        const f = manifests([widget({ size: 1 })]);
        const missing = cli(["--crds", path.join(tmp, "no-such-dir"), f]);
        expect(missing.status).toBe(2);
        expect(missing.stderr).toContain(`validate: CRD directory ${path.join(tmp, "no-such-dir")} does not exist`);
        const empty = fs.mkdtempSync(path.join(tmp, "empty-"));
        const none = cli(["--crds", empty, f]);
        expect(none.status).toBe(2);
        expect(none.stderr).toContain("holds no CustomResourceDefinition");
        expect(cli([f]).status).toBe(2);
    });

    it("exits 0 on valid manifests and 1 naming the object and field on an invalid one", () => {
        const ok = cli([
            "--crds",
            CRDS,
            manifests([widget({ size: 1 }), { apiVersion: "v1", kind: "Namespace", metadata: { name: "ns" } }]),
        ]);
        expect(ok.status, ok.stderr).toBe(0);
        expect(ok.stdout).toMatch(/validated 2 objects in 1 file\(s\): 0 invalid/);
        const bad = cli(["--crds", CRDS, manifests([widget({ size: 1, sise: 2 })])]);
        expect(bad.status).toBe(1);
        expect(bad.stdout).toContain("example.com/v1 Widget ns/w: /spec: must NOT have additional properties 'sise'");
    });

    it("a kind without a CRD fails unless declared with --without-crd, then it is listed as not validated; a CRD present is still used", () => {
        const gizmo = { apiVersion: "example.com/v1", kind: "Gizmo", metadata: { name: "g", namespace: "ns" }, spec: {} };
        const f = manifests([gizmo, widget({ size: 1 })]);
        const plain = cli(["--crds", CRDS, f]);
        expect(plain.status).toBe(1);
        expect(plain.stdout).toContain("example.com/v1 Gizmo ns/g: no schema for example.com/v1 Gizmo");
        const declared = cli(["--crds", CRDS, "--without-crd", "example.com/v1/Gizmo", f]);
        expect(declared.status, declared.stdout).toBe(0);
        expect(declared.stdout).toContain("example.com/v1 Gizmo ns/g: NOT validated");
        expect(declared.stdout).toMatch(/validated 1 objects in 1 file\(s\): 0 invalid, 1 not validated/);
        // Declaring a kind whose CRD exists changes nothing: a bad Widget still fails.
        const still = cli(["--crds", CRDS, "--without-crd", "example.com/v1/Widget", manifests([widget({ size: 1, sise: 2 })])]);
        expect(still.status).toBe(1);
    });
});
