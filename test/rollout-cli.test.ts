import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { hubFileOf, main } from "../tools/rollout";

describe("npm run rollout --hub: a stack name like the other tools, or a path", () => {
    it("resolves a stack name under stacks/, keeps a path, defaults to hub-prod", () => {
        expect(hubFileOf(undefined)).toBe(path.join("stacks", "Pulumi.hub-prod.yaml"));
        expect(hubFileOf("hub-prod")).toBe(path.join("stacks", "Pulumi.hub-prod.yaml"));
        expect(hubFileOf("hub-eu")).toBe(path.join("stacks", "Pulumi.hub-eu.yaml"));
        expect(hubFileOf("/tmp/x/Pulumi.hub-prod.yaml")).toBe("/tmp/x/Pulumi.hub-prod.yaml");
        expect(hubFileOf("Pulumi.hub-prod.yaml")).toBe("Pulumi.hub-prod.yaml");
    });

    it("the CLI reads the named stack's file", async () => {
        const out: string[] = [];
        // hn1/llama-70b of the shipped hub has no rollout: the message names the resolved file.
        const code = await main(["status", "hn1/llama-70b", "--hub", "hub-prod"], (s) => out.push(s));
        expect(out.join("\n")).toContain(path.join("stacks", "Pulumi.hub-prod.yaml"));
        expect(code).not.toBe(0);
    });
});
