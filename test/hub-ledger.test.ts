import { beforeAll, describe, expect, it } from "vitest";
import type { CapturedResource } from "../tools/harness";
import { byType, flatConfig, inputs, runRepoStack, stackConfigDoc } from "./helpers";

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

describe("a major-version upgrade of the ledger is a bump of the pin, in place", () => {
    it("16.6 -> 17.4: same cluster and instances (URNs, identifiers), new engine version, a new per-family parameter group beside the old one", async () => {
        const d = stackConfigDoc("hub-prod");
        d["platform:usage"] = { ...(d["platform:usage"] ?? {}), engineVersion: "17.4" };
        const up = (await runRepoStack("hub-prod", { config: flatConfig(d) })).resources;
        const pick = (res: CapturedResource[], type: string): any[] =>
            byType(res, type).map((r) => ({ urn: r.urn, protect: r.options?.protect, ...inputs(r) }));
        const [before, after] = [pick(rs, "aws:rds/cluster:Cluster")[0], pick(up, "aws:rds/cluster:Cluster")[0]];
        expect(after.urn).toBe(before.urn);
        expect([after.clusterIdentifier, after.engineVersion, after.allowMajorVersionUpgrade, after.protect]).toEqual([
            before.clusterIdentifier,
            "17.4",
            true,
            true,
        ]);
        expect(after.dbClusterParameterGroupName).toBe("platform-usage-ledger-aurora-postgresql17");
        // Everything that replaces the cluster stays as it was (identifier, storage, key, subnets, master user).
        for (const k of [
            "clusterIdentifier",
            "engine",
            "engineMode",
            "databaseName",
            "masterUsername",
            "storageEncrypted",
            "kmsKeyId",
            "dbSubnetGroupName",
        ])
            expect(after[k], k).toEqual(before[k]);
        const params = pick(up, "aws:rds/clusterParameterGroup:ClusterParameterGroup")[0];
        expect([params.name, params.family, params.parameters]).toEqual([
            "platform-usage-ledger-aurora-postgresql17",
            "aurora-postgresql17",
            [{ name: "rds.force_ssl", value: "1", applyMethod: "immediate" }],
        ]);
        const instances = pick(up, "aws:rds/clusterInstance:ClusterInstance");
        expect(instances.map((i) => i.urn).sort()).toEqual(
            pick(rs, "aws:rds/clusterInstance:ClusterInstance")
                .map((i) => i.urn)
                .sort(),
        );
        for (const i of instances) expect([i.engineVersion, i.autoMinorVersionUpgrade]).toEqual(["17.4", false]);
    });
});

describe("the ledger roles' passwords rotate with platform:usage.rolePasswordRotation", () => {
    it("unset: no keeper (the first up's passwords stay); a mark: each password is keyed by it, and the migration re-runs on the new secret version", async () => {
        const pw = (res: CapturedResource[]) =>
            byType(res, "random:index/randomPassword:RandomPassword")
                .filter((r) => /usage-ledger-(ingest|reporter)-password/.test(r.name))
                .map(inputs);
        expect(pw(rs)).toHaveLength(2);
        for (const p of pw(rs)) expect(p.keepers).toBeUndefined();
        const d = stackConfigDoc("hub-prod");
        d["platform:usage"] = { ...(d["platform:usage"] ?? {}), rolePasswordRotation: "2026-12-01" };
        const up = (await runRepoStack("hub-prod", { config: flatConfig(d) })).resources;
        for (const p of pw(up)) expect(p.keepers).toEqual({ rotation: "2026-12-01" });
        const migration = up.find((r) => r.type === "aws:lambda/invocation:Invocation" && r.name === "usage-ledger-migration")!;
        // Its triggers carry each secret version's id (components/hub/ledger/functions.ts), so it runs after them.
        for (const role of ["ingest", "reporter"])
            expect(migration.dependencies).toContain(
                up.find((r) => r.type === "aws:secretsmanager/secretVersion:SecretVersion" && r.name === `usage-ledger-${role}-password`)!
                    .urn,
            );
        d["platform:usage"].rolePasswordRotation = "2026 12 01";
        await expect(runRepoStack("hub-prod", { config: flatConfig(d) })).rejects.toThrow(
            /platform:usage.rolePasswordRotation: must be a short mark/,
        );
    });
});

describe("the ledger's order of creation", () => {
    const urn = (type: string, name: string) => rs.find((r) => r.type === type && r.name === name)!.urn;
    const deps = (type: string, name: string) => rs.find((r) => r.type === type && r.name === name)!.dependencies;
    it("Lambdas after their VPC execution policy; the migration after the endpoints it reaches its secrets through", () => {
        for (const id of ["consumer", "migrator", "reconciler"]) {
            expect(deps("aws:lambda/function:Function", `usage-ledger-${id}`)).toContain(
                urn("aws:iam/rolePolicy:RolePolicy", `usage-ledger-${id}-vpc-network`),
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

describe("the ledger's log groups (the database's exported log, every Lambda's): ours, with retention and the ledger key", () => {
    it("every exported log type has its log group (90 days, ledger key), created before the cluster, which RDS then never creates", () => {
        const cluster = rs.find((r) => r.type === "aws:rds/cluster:Cluster" && r.name === "usage-ledger-db")!;
        const exported: string[] = inputs(cluster).enabledCloudwatchLogsExports;
        expect(exported).toEqual(["postgresql"]);
        const key = rs.find((r) => r.type === "aws:kms/key:Key" && r.name === "usage-ledger-key")!;
        for (const type of exported) {
            const group = rs.find((r) => r.type === "aws:cloudwatch/logGroup:LogGroup" && r.name === `usage-ledger-db-${type}-logs`);
            expect(group, type).toBeDefined();
            expect(inputs(group!)).toMatchObject({
                name: `/aws/rds/cluster/${inputs(cluster).clusterIdentifier}/${type}`,
                retentionInDays: 90,
                kmsKeyId: key.outputs.arn,
            });
            expect(cluster.dependencies, `the cluster waits for ${type}'s log group`).toContain(group!.urn);
        }
    });

    it("every Lambda of the hub has its log group (90 days, ledger key), created before the function, which Lambda then never creates", () => {
        const key = rs.find((r) => r.type === "aws:kms/key:Key" && r.name === "usage-ledger-key")!;
        const functions = byType(rs, "aws:lambda/function:Function");
        expect(functions.map((f) => inputs(f).name).sort()).toEqual([
            "platform-usage-consumer",
            "platform-usage-ledger-migrator",
            "platform-usage-ledger-ops",
            "platform-usage-reconciliation",
        ]);
        const lambdaGroups = byType(rs, "aws:cloudwatch/logGroup:LogGroup").filter((r) =>
            String(inputs(r).name).startsWith("/aws/lambda/"),
        );
        expect(lambdaGroups).toHaveLength(functions.length);
        for (const f of functions) {
            const name = inputs(f).name;
            const group = lambdaGroups.find((g) => inputs(g).name === `/aws/lambda/${name}`);
            expect(group, name).toBeDefined();
            expect(inputs(group!)).toMatchObject({ retentionInDays: 90, kmsKeyId: key.outputs.arn });
            expect(f.dependencies, `${name} waits for its log group`).toContain(group!.urn);
        }
    });

    it("the ledger key lets CloudWatch Logs use it for exactly those log groups: the database's and every Lambda's", () => {
        const key = rs.find((r) => r.type === "aws:kms/key:Key" && r.name === "usage-ledger-key")!;
        const cluster = inputs(rs.find((r) => r.type === "aws:rds/cluster:Cluster" && r.name === "usage-ledger-db")!);
        const logs = JSON.parse(inputs(key).policy).Statement.filter((s: any) =>
            [s.Principal?.Service ?? []].flat().some((p: string) => p.startsWith("logs.")),
        );
        expect(logs).toHaveLength(1);
        const region = stackConfigDoc("hub-prod")["aws:region"];
        expect(logs[0].Principal).toEqual({ Service: `logs.${region}.amazonaws.com` });
        const arns: string[] = logs[0].Condition.ArnEquals["kms:EncryptionContext:aws:logs:arn"];
        const postgresql = new RegExp(
            `^arn:aws:logs:${region}:\\d{12}:log-group:/aws/rds/cluster/${cluster.clusterIdentifier}/postgresql$`,
        );
        expect(arns.filter((a) => postgresql.test(a))).toHaveLength(1);
        // Exactly the ARNs (as CloudWatch Logs puts them in the encryption context) of the log groups the key encrypts.
        const encrypted = byType(rs, "aws:cloudwatch/logGroup:LogGroup").filter((g) => inputs(g).kmsKeyId === key.outputs.arn);
        expect(encrypted.length).toBe(1 + byType(rs, "aws:lambda/function:Function").length);
        expect([...arns].sort()).toEqual(encrypted.map((g) => g.outputs.arn).sort());
        expect(new Set(arns).size).toBe(arns.length);
    });
});
