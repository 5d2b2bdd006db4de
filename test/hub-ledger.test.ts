import { beforeAll, describe, expect, it } from "vitest";
import type { CapturedResource } from "../tools/harness";
import { byType, inputs, runRepoStack } from "./helpers";

let rs: CapturedResource[];
beforeAll(async () => {
    rs = (await runRepoStack("hub-prod")).resources;
});

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

describe("the ledger's order of creation", () => {
    const urn = (type: string, name: string) => rs.find((r) => r.type === type && r.name === name)!.urn;
    const deps = (type: string, name: string) => rs.find((r) => r.type === type && r.name === name)!.dependencies;
    it("Lambdas after their VPC execution policy; the migration after the endpoints it reaches its secrets through", () => {
        for (const id of ["consumer", "migrator", "reconciler"]) {
            expect(deps("aws:lambda/function:Function", `usage-ledger-${id}`)).toContain(
                urn("aws:iam/rolePolicyAttachment:RolePolicyAttachment", `usage-ledger-${id}-vpc`),
            );
        }
        for (const svc of ["secretsmanager", "monitoring"]) {
            expect(deps("aws:lambda/invocation:Invocation", "usage-ledger-migration")).toContain(
                urn("aws:ec2/vpcEndpoint:VpcEndpoint", `usage-ledger-${svc}`),
            );
        }
    });

    it("a first reconciliation runs at up, so the gaps alarm (missing data pages) does not fire on a fresh hub", () => {
        const first = inputs(
            rs.find((r) => r.type === "aws:lambda/invocation:Invocation" && r.name === "usage-ledger-first-reconciliation")!,
        );
        expect(first.functionName).toBe("platform-usage-reconciliation");
        const alarm = inputs(rs.find((r) => r.type === "aws:cloudwatch/metricAlarm:MetricAlarm" && r.name === "usage-ledger-gaps-alarm")!);
        expect(alarm.treatMissingData).toBe("breaching");
    });
});
