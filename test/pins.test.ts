import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { REGISTRY, versions } from "../config/versions";
import { checkCommand, checkPins, NOT_REGISTRY_PINS, type Pin, pins } from "../tools/pins";

const ROOT = path.join(__dirname, "..");
const list = pins();

/** Every string leaf of the versions table, with its dotted key. */
function leaves(node: unknown, key = ""): Array<[string, string]> {
    if (typeof node === "string") return [[key, node]];
    if (!node || typeof node !== "object") return [];
    return Object.entries(node).flatMap(([k, v]) => leaves(v, key ? `${key}.${k}` : k));
}

describe("npm run pins: every pin of config/versions.ts, derived from the table", () => {
    it("lists every version and tag leaf of the table, except ours and the non-registry entries", () => {
        const listed = new Set(
            list.map((p) =>
                p.kind === "chart"
                    ? `${p.key}.version`
                    : p.key.endsWith(".imageTag") || /\.[a-z]+Version$/.test(p.key)
                      ? p.key
                      : `${p.key}.version`,
            ),
        );
        const versionLeaves = leaves(versions).filter(([k]) => /(^|\.)(version|imageTag|[a-z]+Version)$/.test(k));
        const expected = versionLeaves
            .filter(([k]) => !(k.split(".")[0] in NOT_REGISTRY_PINS))
            .filter(([k]) => {
                const entry = k
                    .split(".")
                    .slice(0, -1)
                    .reduce<any>((o, s) => o[s], versions);
                const image =
                    typeof entry.image === "string" ? (entry.repository ? `${entry.repository}/${entry.image}` : entry.image) : "";
                return !(image.startsWith(`${REGISTRY}/`) && !entry.chart);
            });
        expect(expected.length).toBeGreaterThan(15);
        for (const [k] of expected) expect(listed, `versions.${k} is not checked by npm run pins`).toContain(k);
        expect(list.length).toBe(expected.length);
    });

    it("checks charts by exact version in their repository and images by exact tag", () => {
        const find = (key: string) => list.find((p) => p.key === key)!;
        expect(checkCommand(find("networkOperator"))).toEqual([
            "helm",
            "show",
            "chart",
            "network-operator",
            "--repo",
            "https://helm.ngc.nvidia.com/nvidia",
            "--version",
            versions.networkOperator.version,
        ]);
        expect(checkCommand(find("aiGateway"))).toEqual([
            "helm",
            "show",
            "chart",
            "oci://docker.io/envoyproxy/ai-gateway-helm",
            "--version",
            versions.aiGateway.version,
        ]);
        // The release set's Multus (Mellanox/network-operator@v26.1.2:hack/release.yaml, entry Multus).
        expect(checkCommand(find("multus"))).toEqual([
            "docker",
            "manifest",
            "inspect",
            `${versions.multus.repository}/${versions.multus.image}:${versions.multus.version}`,
        ]);
        expect(find("otelCollector.imageTag")).toEqual({
            kind: "image",
            key: "otelCollector.imageTag",
            image: "otel/opentelemetry-collector-k8s",
            tag: versions.otelCollector.imageTag,
        });
        expect(list.some((p) => p.kind === "image" && p.image.startsWith(`${REGISTRY}/`))).toBe(false);
    });

    it("refuses an entry it cannot classify, a chart without repo, and an invalid tag", () => {
        expect(() => pins({ x: { chart: "c", version: "1" } })).toThrow("versions.x: chart c is not an oci:// reference and has no repo");
        expect(() => pins({ x: { image: "r/i", version: "bad tag" } })).toThrow('versions.x.version: "bad tag" is not a valid image tag');
        expect(() => pins({ x: { group: { y: 3 } } })).toThrow("versions.x.group.y: neither a chart, an image nor a group of pins");
        expect(() => pins({ x: { image: "r/i" } })).toThrow("versions.x: image r/i has no version");
    });

    it("--check reports every pin the registry does not have, after retries", () => {
        const calls: string[] = [];
        const exec = (argv: string[]) => {
            calls.push(argv.join(" "));
            if (argv.includes("bad:1")) throw Object.assign(new Error("exit 1"), { stderr: "manifest unknown\n" });
        };
        const sample: Pin[] = [
            { kind: "image", key: "a", image: "good", tag: "1" },
            { kind: "image", key: "b", image: "bad", tag: "1" },
        ];
        expect(checkPins(sample, exec, 3)).toEqual(["versions.b: image bad:1 not found (docker manifest inspect bad:1): manifest unknown"]);
        expect(calls.filter((c) => c.endsWith("bad:1"))).toHaveLength(3);
        expect(calls.filter((c) => c.endsWith("good:1"))).toHaveLength(1);
    });

    it(".github/workflows/pins.yml runs the check on pull requests that touch the pins, with helm installed", () => {
        const wf = YAML.parse(fs.readFileSync(path.join(ROOT, ".github", "workflows", "pins.yml"), "utf8"));
        expect(wf.on.pull_request.paths).toEqual(expect.arrayContaining(["config/versions.ts", "tools/pins.ts"]));
        const steps = wf.jobs.exist.steps as Array<Record<string, any>>;
        const helm = steps.findIndex((s) => String(s.uses ?? "").startsWith("azure/setup-helm@"));
        const check = steps.findIndex((s) => s.run === "npm run pins -- --check");
        expect(helm).toBeGreaterThan(-1);
        expect(check).toBeGreaterThan(helm);
    });
});
