/**
 * docs/stack-file.md is generated from the zod schemas (tools/docs.ts): the committed file must be what the schemas
 * say now, so a key added, removed or re-documented in config/ without `npm run docs` fails here.
 */
import * as fs from "node:fs";
import { describe, expect, it } from "vitest";
import { keyComments, STACK_FILE_DOC, stackFileReference } from "../tools/docs";

describe("docs/stack-file.md", () => {
    it("matches the schemas (run npm run docs after changing config/)", () => {
        expect(fs.readFileSync(STACK_FILE_DOC, "utf8")).toBe(stackFileReference());
    });

    it("lists keys of both roles and both spoke variants with their defaults and comments", () => {
        const text = stackFileReference();
        expect(text).toContain(
            "| `platform:spokes[].gpus` | integer | required | GPUs the spoke can schedule; placement beyond this is rejected. |",
        );
        expect(text).toContain("| `platform:backend.rdmaHcaMax` | integer | default `63` | (`fabric: infiniband`) ");
        expect(text).toMatch(/\| `platform:nodeGroups\.gpu\[\]\.instanceType` \|/);
        expect(text).toMatch(/\| `platform:alarms\.iteratorAgeSeconds` \| integer \| default `3600` \|/);
        expect(keyComments().get("SpokeConfigSchema:spoke.hubStack")).toMatch(/^Hub stack, fully qualified/);
    });
});
