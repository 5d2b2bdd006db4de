/**
 * Principals the hub's key and secret policies name are looked up first: a same-account role that does not exist
 * stops the hub with the file and key that name it, before KMS or Secrets Manager would refuse the policy
 * (MalformedPolicyDocument). The mock account answers `aws.iam.getRole` like IAM (tools/mock-outputs.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import { hubCallerIssue, namedRoles } from "../programs/hub";
import { MOCK_CALLER_ARN_ENV } from "../lib/ci-roles";
import { parseStackConfig } from "../config/stack";
import { MOCK_ACCOUNT_ID, MOCK_MISSING_ROLES, MOCK_MISSING_TOPICS, MOCK_TOPIC_KEYS } from "../tools/mock-outputs";
import { byType, flatConfig, inputs, platformKeys, runRepoStack, stackConfigDoc } from "./helpers";

afterEach(() => {
    delete process.env[MOCK_CALLER_ARN_ENV];
    MOCK_MISSING_ROLES.clear();
    MOCK_MISSING_TOPICS.clear();
    MOCK_TOPIC_KEYS.clear();
});

const withSameAccountDeployer = () => {
    const d = stackConfigDoc("hub-prod");
    d["platform:hubDeployers"] = [`arn:aws:iam::${MOCK_ACCOUNT_ID}:role/ci/platform-hub-deployer`];
    return d;
};

describe("roles named in the hub's policies exist before a policy names them", () => {
    it("lists every named role with its hub file key, the default spoke deployers included", () => {
        const cfg = parseStackConfig(platformKeys(stackConfigDoc("hub-prod")), "stacks/Pulumi.hub-prod.yaml");
        if (cfg.role !== "hub") throw new Error("not a hub");
        const keys = namedRoles(cfg.hub, "aws", MOCK_ACCOUNT_ID).map((r) => r.key);
        expect(keys).toContain("platform:hubDeployers[0]");
        expect(keys.some((k) => /^platform:tenantKeys\.readers\.acme\[0\]$/.test(k))).toBe(true);
        expect(keys.some((k) => /^platform:spokeIdentities\.\w+\.deployerRoleArn/.test(k))).toBe(true);
    });

    it("a missing same-account hub deployer stops the hub naming the file and key; nothing names it", async () => {
        MOCK_MISSING_ROLES.add("platform-hub-deployer");
        await expect(runRepoStack("hub-prod", { config: flatConfig(withSameAccountDeployer()) })).rejects.toThrow(
            /Pulumi\.hub-prod\.yaml: platform:hubDeployers\[0\]: role arn:aws:iam::123456789012:role\/ci\/platform-hub-deployer does not exist in the hub's account 123456789012 .*create it before the hub's `up`/,
        );
    });

    it("the same file renders when the role exists, and the policies name it", async () => {
        const r = await runRepoStack("hub-prod", { config: flatConfig(withSameAccountDeployer()) });
        const policies = byType(r.resources, "aws:secretsmanager/secretPolicy:SecretPolicy").map((p) => inputs(p).policy);
        expect(policies.length).toBeGreaterThan(0);
        for (const p of policies) expect(p).toContain(`arn:aws:iam::${MOCK_ACCOUNT_ID}:role/ci/platform-hub-deployer`);
    });
});

describe("only a hub deployer (or key administrator) runs the hub's up: checked before anything it would fail on", () => {
    it("a caller that is not in platform:hubDeployers is refused naming the file and key", async () => {
        process.env[MOCK_CALLER_ARN_ENV] = `arn:aws:sts::${MOCK_ACCOUNT_ID}:assumed-role/admin/alice`;
        await expect(runRepoStack("hub-prod", { config: flatConfig(withSameAccountDeployer()) })).rejects.toThrow(
            /Pulumi\.hub-prod\.yaml[\s\S]*platform:hubDeployers: the caller arn:aws:sts::123456789012:assumed-role\/admin\/alice is not one of platform:hubDeployers/,
        );
    });

    it("a hub deployer's session (its role's path dropped in the session ARN) renders", async () => {
        process.env[MOCK_CALLER_ARN_ENV] = `arn:aws:sts::${MOCK_ACCOUNT_ID}:assumed-role/platform-hub-deployer/gha-123`;
        const r = await runRepoStack("hub-prod", { config: flatConfig(withSameAccountDeployer()) });
        expect(byType(r.resources, "aws:kms/key:Key").length).toBeGreaterThan(0);
    });

    it("pure: sessions count as their role, by account and name; users as themselves; key administrators too", () => {
        const cfg = {
            hubDeployers: ["arn:aws:iam::111122223333:role/ci/platform-hub-deployer"],
            keyAdministrators: ["arn:aws:iam::111122223333:role/break-glass"],
        };
        expect(hubCallerIssue(cfg, "arn:aws:sts::111122223333:assumed-role/platform-hub-deployer/s")).toBeUndefined();
        expect(hubCallerIssue(cfg, "arn:aws:iam::111122223333:role/ci/platform-hub-deployer")).toBeUndefined();
        expect(hubCallerIssue(cfg, "arn:aws:sts::111122223333:assumed-role/break-glass/s")).toBeUndefined();
        for (const arn of [
            "arn:aws:sts::999999999999:assumed-role/platform-hub-deployer/s",
            "arn:aws:iam::111122223333:user/platform-hub-deployer",
            "arn:aws:iam::111122223333:root",
            "arn:aws:sts::111122223333:assumed-role/platform-hub-deployer-x/s",
        ])
            expect(hubCallerIssue(cfg, arn), arn).toMatch(/is not one of platform:hubDeployers/);
    });
});

describe("the alarm topic is checked before an alarm names it", () => {
    const withTopic = (arn: string) => {
        const d = stackConfigDoc("hub-prod");
        d["platform:alarms"] = { ...d["platform:alarms"], topicArn: arn };
        return d;
    };

    it("a topic in another region than the hub's alarms is refused", async () => {
        await expect(
            runRepoStack("hub-prod", { config: flatConfig(withTopic(`arn:aws:sns:us-east-1:${MOCK_ACCOUNT_ID}:platform-alarms`)) }),
        ).rejects.toThrow(
            /Pulumi\.hub-prod\.yaml: platform:alarms\.topicArn: the topic is in us-east-1, the hub's alarms in ap-southeast-1/,
        );
    });

    it("a topic of the hub's account must exist; then the alarms name it", async () => {
        const arn = `arn:aws:sns:ap-southeast-1:${MOCK_ACCOUNT_ID}:platform-alarms`;
        MOCK_MISSING_TOPICS.add("platform-alarms");
        await expect(runRepoStack("hub-prod", { config: flatConfig(withTopic(arn)) })).rejects.toThrow(
            /platform:alarms\.topicArn: topic .* does not exist in the hub's account/,
        );
        MOCK_MISSING_TOPICS.clear();
        const r = await runRepoStack("hub-prod", { config: flatConfig(withTopic(arn)) });
        for (const a of byType(r.resources, "aws:cloudwatch/metricAlarm:MetricAlarm").map(inputs)) expect(a.alarmActions).toEqual([arn]);
    });

    it("an encrypted topic: refused under aws/sns or a key CloudWatch may not use; rendered under a key that lets it (main took it on trust)", async () => {
        const arn = `arn:aws:sns:ap-southeast-1:${MOCK_ACCOUNT_ID}:platform-alarms`;
        const config = flatConfig(withTopic(arn));
        MOCK_TOPIC_KEYS.set("platform-alarms", { kmsMasterKeyId: "alias/aws/sns" });
        await expect(runRepoStack("hub-prod", { config })).rejects.toThrow(
            /platform:alarms\.topicArn: topic .* is encrypted with the AWS managed key aws\/sns, which CloudWatch cannot use/,
        );
        const keyArn = `arn:aws:kms:ap-southeast-1:${MOCK_ACCOUNT_ID}:key/1234abcd-12ab-34cd-56ef-1234567890ab`;
        const admin = {
            Sid: "Admin",
            Effect: "Allow",
            Principal: { AWS: `arn:aws:iam::${MOCK_ACCOUNT_ID}:root` },
            Action: "kms:*",
            Resource: "*",
        };
        MOCK_TOPIC_KEYS.set("platform-alarms", { kmsMasterKeyId: keyArn, keyPolicy: { Version: "2012-10-17", Statement: [admin] } });
        await expect(runRepoStack("hub-prod", { config })).rejects.toThrow(
            /CloudWatch cannot publish to topic .* no unconditioned Allow of kms:Decrypt and kms:GenerateDataKey to the service principal cloudwatch\.amazonaws\.com/,
        );
        const cloudWatch = {
            Sid: "CloudWatchAlarms",
            Effect: "Allow",
            Principal: { Service: "cloudwatch.amazonaws.com" },
            Action: ["kms:Decrypt", "kms:GenerateDataKey*"],
            Resource: "*",
        };
        MOCK_TOPIC_KEYS.set("platform-alarms", {
            kmsMasterKeyId: keyArn,
            keyPolicy: { Version: "2012-10-17", Statement: [admin, cloudWatch] },
        });
        const r = await runRepoStack("hub-prod", { config });
        for (const a of byType(r.resources, "aws:cloudwatch/metricAlarm:MetricAlarm").map(inputs)) expect(a.alarmActions).toEqual([arn]);
    });
});
