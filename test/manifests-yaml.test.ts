import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { isManifest, manifestsYaml, sortManifests, toManifest } from "../tools/outputs";
import { runHubAndSpoke } from "./helpers";

/**
 * out/<stack>/manifests.yaml is read by YAML 1.1 parsers too: kubectl (sigs.k8s.io/yaml over go-yaml) takes an
 * unquoted `no`, `n`, `on` or `off` as a boolean, so a container argument `--appendonly no` or an env value `n` written
 * plain would reach the API server as `false` and be refused (a []string, a string). Every shipped spoke's manifests
 * must mean the same under YAML 1.1 as the objects the program rendered.
 */
describe("manifests.yaml means the same to a YAML 1.1 reader (kubectl apply -f)", () => {
    for (const stack of ["spoke-hn1", "spoke-hcm1", "spoke-sg1"]) {
        it(`${stack}: every object parses back, under YAML 1.1, to what was rendered`, async () => {
            const r = (await runHubAndSpoke(stack)).spoke;
            const rendered = sortManifests(r.resources.filter(isManifest).map(toManifest));
            const text = manifestsYaml(r.resources);
            const asKubectl = YAML.parseAllDocuments(text, { version: "1.1" }).map((d) => d.toJS());
            expect(asKubectl).toEqual(JSON.parse(JSON.stringify(rendered)));
            // The case that broke: the counter store's `--appendonly no` (a 1.2 writer leaves `no` plain).
            expect(text).toContain('- "no"');
        });
    }
});
