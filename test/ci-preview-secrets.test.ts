import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { ACCESS_POLICIES } from "../components/spoke/EksCluster";
import { ROOT } from "./helpers";

/** Pull-request previews run the pull request's own code: they must reach one site and read no Secret. */
describe("previews cannot read secrets", () => {
    const wf = YAML.parse(fs.readFileSync(path.join(ROOT, ".github", "workflows", "preview.yml"), "utf8"));
    it("each stack's preview job runs in its own environment, so its KUBECONFIG reaches that one site (main: every site's)", () => {
        const job = wf.jobs.preview;
        expect(job.environment).toBe("preview-${{ matrix.stack }}");
        const text = JSON.stringify(job.steps);
        expect(text).toContain("secrets.KUBECONFIG");
        // No other job holds a kubeconfig.
        for (const [name, j] of Object.entries<any>(wf.jobs)) if (name !== "preview") expect(JSON.stringify(j)).not.toContain("KUBECONFIG");
    });
    it("the EKS preview role's access policy is the view policy (no Secrets), never AdminView", () => {
        expect(ACCESS_POLICIES.preview).toBe("arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy");
    });
});
