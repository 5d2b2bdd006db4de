import { beforeAll, describe, expect, it } from "vitest";
import type { CapturedResource } from "../tools/harness";
import { byType, inputs, runRepoStack } from "./helpers";

let rs: CapturedResource[];
beforeAll(async () => { rs = (await runRepoStack("hub-prod")).resources; });

describe("the ledger stays at its pin and can be upgraded by bumping it", () => {
    it("no automatic minor upgrade (main's instances upgraded themselves, then the next up asked for a downgrade)", () => {
        const instances = byType(rs, "aws:rds/clusterInstance:ClusterInstance").map(inputs);
        expect(instances.length).toBeGreaterThan(0);
        for (const i of instances) expect(i.autoMinorVersionUpgrade).toBe(false);
        const [cluster] = byType(rs, "aws:rds/cluster:Cluster").map(inputs);
        expect(cluster.allowMajorVersionUpgrade).toBe(true);
        expect(cluster.dbClusterParameterGroupName).toMatch(/aurora-postgresql16$/);
    });
});
