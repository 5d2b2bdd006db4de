import * as k8s from "@pulumi/kubernetes";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runStack } from "../tools/harness";
import { ROOT } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

describe("test harness", () => {
    it("a resource created before mocks are set fails instead of vanishing", async () => {
        // Same setup file vitest loads (test/setup.ts), in its own process: the early registration must
        // crash it (unhandled rejection -> non-zero exit), not be silently faked by the SDK.
        const script = `require("./test/setup"); const k8s = require("@pulumi/kubernetes"); new k8s.core.v1.Namespace("too-early", { metadata: { name: "x" } });`;
        const run = promisify(execFile);
        const r = await run(process.execPath, ["-r", ESBUILD_LOADER, "-e", script], { cwd: ROOT }).then(
            () => ({ code: 0, stderr: "" }),
            (e) => e,
        );
        expect(r.code).not.toBe(0);
        expect(r.stderr).toMatch(/kubernetes:core\/v1:Namespace "too-early" was created before the test set its mocks/);
    });

    it("captures type, name, parent and inputs of resources created inside runStack", async () => {
        const r = await runStack({
            project: "platform",
            stack: "t",
            config: {},
            program: () => {
                new k8s.core.v1.Namespace("ns", { metadata: { name: "inference" } });
                return {};
            },
        });
        const ns = r.resources.find((x) => x.type === "kubernetes:core/v1:Namespace")!;
        expect(ns.name).toBe("ns");
        expect(ns.parent).toMatch(/::pulumi:pulumi:Stack::/);
        expect(ns.inputs).toMatchObject({ apiVersion: "v1", kind: "Namespace", metadata: { name: "inference" } });
    });
});
