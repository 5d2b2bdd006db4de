import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { loadCrds, ManifestValidator, strictify } from "../tools/validate";

// A small CRD in the shape `kubectl get crd -o yaml` exports (a List), written by the test.
const crdList = {
    apiVersion: "v1", kind: "List",
    items: [{
        apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition",
        metadata: { name: "widgets.example.com" },
        spec: {
            group: "example.com", scope: "Namespaced", names: { kind: "Widget", plural: "widgets" },
            versions: [{
                name: "v1", served: true, storage: true,
                schema: { openAPIV3Schema: {
                    type: "object",
                    properties: {
                        apiVersion: { type: "string" }, kind: { type: "string" }, metadata: { type: "object" },
                        spec: {
                            type: "object", required: ["size"],
                            properties: {
                                size: { type: "integer", format: "int32" },
                                mode: { type: "string", enum: ["fast", "safe"] },
                                port: { "x-kubernetes-int-or-string": true },
                                extra: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
                            },
                        },
                    },
                } },
            }],
        },
    }],
};

let dir: string;
let v: ManifestValidator;
beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "crds-"));
    fs.writeFileSync(path.join(dir, "widgets.yaml"), YAML.stringify(crdList));
    v = ManifestValidator.fromDir(dir);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const widget = (spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: "w", namespace: "ns" }) => ({ apiVersion: "example.com/v1", kind: "Widget", metadata, spec });

describe("schema validation of rendered objects", () => {
    it("indexes CRDs by group/version/kind from List exports", () => {
        expect([...loadCrds(dir).keys()]).toEqual(["example.com/v1/Widget"]);
    });

    it("accepts a valid custom resource, int-or-string and preserved unknown fields", () => {
        expect(v.validate(widget({ size: 3, mode: "fast", port: "http", extra: { anything: [1] } }))).toEqual([]);
        expect(v.validate(widget({ size: 3, port: 8080 }))).toEqual([]);
    });

    it("rejects unknown fields, wrong types, missing required fields and bad enums", () => {
        expect(v.validate(widget({ size: 3, sise: 4 }))).toEqual(["/spec: must NOT have additional properties 'sise'"]);
        expect(v.validate(widget({ size: "3" }))).toEqual(["/spec/size: must be integer"]);
        expect(v.validate(widget({ mode: "fast" }))).toEqual(["/spec: must have required property 'size'"]);
        expect(v.validate(widget({ size: 1, mode: "turbo" }))).toEqual(['/spec/mode: must be equal to one of the allowed values ["fast","safe"]']);
        expect(v.validate(widget({ size: 1 }, { name: "w", labelz: {} }))).toEqual(["/metadata/labelz: unknown field (not in V1ObjectMeta)"]);
    });

    it("validates core kinds against the Kubernetes schema, unknown fields included", () => {
        const dep = {
            apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d", namespace: "x" },
            spec: { replicas: 1, selector: { matchLabels: { a: "b" } }, template: { metadata: { labels: { a: "b" } }, spec: { containers: [{ name: "c", image: "i:1" }] } } },
        };
        expect(v.validate(dep)).toEqual([]);
        const typo = structuredClone(dep) as any;
        typo.spec.template.spec.containers[0].imagePullPolicyy = "Always";
        expect(v.validate(typo)).toEqual(["/spec/template/spec/containers/0/imagePullPolicyy: unknown field (not in V1Container)"]);
        const wrongType = structuredClone(dep) as any;
        wrongType.spec.replicas = "1";
        expect(v.validate(wrongType).join("\n")).toMatch(/\/spec\/replicas: must be integer/);
        expect(v.validate({ apiVersion: "example.com/v9", kind: "Gadget", metadata: { name: "g" } })).toEqual(["no schema for example.com/v9 Gadget: not a core kind and no CRD for it in the CRD directory"]);
    });

    it("adds additionalProperties:false only where properties are listed and unknown fields are not preserved", () => {
        const s = strictify({ type: "object", properties: { a: { type: "object", properties: { b: { type: "string" } } }, m: { type: "object", additionalProperties: { type: "string" } } } });
        expect(s.additionalProperties).toBe(false);
        expect(s.properties.a.additionalProperties).toBe(false);
        expect(s.properties.m.additionalProperties).toEqual({ type: "string" });
    });
});
