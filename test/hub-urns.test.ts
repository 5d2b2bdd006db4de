/**
 * The reviewed URN snapshot of hub-prod: test/fixtures/hub-prod-urns.json is the URN list of hub-prod as last reviewed
 * (`npm run render -- --out <dir> hub-prod`, `resources.json`), and the render must match it exactly. It was first taken
 * before components/hub/UsageLedger.ts was split into components/hub/ledger/*, which therefore moved no hub URN.
 * The ledger's protected resources (KMS key, streams, cluster, instances) would otherwise be deleted and recreated, which
 * `protect` refuses, or orphaned. A change that legitimately adds or renames hub resources updates that file in the
 * same pull request, where reviewers see every URN that moves.
 * Updated when each spoke's single role became one role per service: `spoke-<s>-role` / `-permissions` are now
 * `spoke-<s>-auth-role` / `-auth-permissions` and the new `spoke-<s>-metering-role` / `-metering-permissions`; and
 * for the new policy of the ledger VPC's S3 endpoint, `usage-ledger-s3-policy`. (The old `spoke-<s>-role` /
 * `-permissions` are no longer aliased to the auth role: a hub deployed by the previous release keeps them for one
 * release, components/hub/legacy-spoke-role.ts and test/hub-legacy-role.test.ts; this fresh render has none.) And for
 * the operator's ledger Lambda (services/reconciler/ops.ts: `usage-ledger-ops`, its role, policies and log group),
 * which `npm run status` and `npm run replay-usage` invoke because the database has no route from outside its VPC;
 * and for the policies of the ledger VPC's Secrets Manager and CloudWatch interface endpoints
 * (`usage-ledger-secretsmanager-policy`, `usage-ledger-monitoring-policy`); and each usage stream's resource policy
 * (`usage-ledger-<spoke>-put-policy`: only the spoke's metering role puts records); and the log group of the ledger
 * database's exported PostgreSQL log (`usage-ledger-db-postgresql-logs`, created before the cluster with retention and the
 * ledger key; the cluster's own URN is unchanged); and the S3 access log bucket of the two data buckets
 * (`platform:hub:AccessLogs` `access-logs`: the log bucket, its controls and policy, each data bucket's `BucketLogging`).
 * Removed deliberately since: the on-prem source keys'
 * `aws:iam/accessKey:AccessKey` and their `aws:secretsmanager/secretVersion:SecretVersion` (SpokeIdentity), now minted
 * outside Pulumi into the slot's secret (services/keys/spoke-key.ts; README "Rotating an on-prem key without an outage"
 * says how an existing hub forgets them without deleting the key a site runs on).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_HUB_NAME_PREFIX } from "../config/hub";
import { inputs, runRepoStack, stackConfigDoc } from "./helpers";

const REVIEWED_URNS = JSON.parse(fs.readFileSync(path.join(__dirname, "fixtures", "hub-prod-urns.json"), "utf8")) as string[];

describe.each([false, true])("hub-prod URNs against the reviewed snapshot (preview=%s)", (preview) => {
    it("are exactly the reviewed ones (none moved by the ledger split), the protected ledger resources included", async () => {
        const hub = await runRepoStack("hub-prod", { preview });
        const urns = new Set(hub.resources.map((r) => r.urn));
        const removed = REVIEWED_URNS.filter((u) => !urns.has(u));
        const added = [...urns].filter((u) => !REVIEWED_URNS.includes(u) && !u.endsWith("::pulumi:pulumi:Stack::platform-hub-prod"));
        expect({ removed, added }).toEqual({ removed: [], added: [] });
        const protectedLedger = hub.resources
            .filter((r) => r.urn.includes("platform:hub:UsageLedger$") && r.options?.protect)
            .map((r) => r.urn);
        expect(protectedLedger.length).toBeGreaterThanOrEqual(7); // key, 3 streams, cluster, 2 instances
        for (const u of protectedLedger) expect(REVIEWED_URNS).toContain(u);
    });
});

/**
 * A URN as the engine forms it: a resource without a parent component has the root stack's type left out of its type
 * (pulumi/pulumi@v3:sdk/go/common/resource/urn.go `NewURN`); the mocks keep `pulumi:pulumi:Stack$` in it.
 */
const engineUrn = (urn: string) => urn.replace("::pulumi:pulumi:Stack$", "::");

describe("README: the upgrade's import of the ledger database's PostgreSQL log group", () => {
    it("names the rendered resource, its parent component and the hub's AWS provider by their real URNs", async () => {
        const hub = await runRepoStack("hub-prod");
        const group = hub.resources.find(
            (r) => r.type === "aws:cloudwatch/logGroup:LogGroup" && r.name === "usage-ledger-db-postgresql-logs",
        )!;
        const parent = hub.resources.find((r) => r.urn === group.parent)!;
        const providerUrn = group.provider.slice(0, group.provider.lastIndexOf("::"));
        const provider = hub.resources.find((r) => r.urn === providerUrn)!;
        expect(provider.name).toBe("hub-aws");
        const namePrefix = (stackConfigDoc("hub-prod")["platform:namePrefix"] as string | undefined) ?? DEFAULT_HUB_NAME_PREFIX;
        const groupName = String(inputs(group).name);
        expect(groupName.startsWith(`/aws/rds/cluster/${namePrefix}-`)).toBe(true);
        const expected = [
            `pulumi import --stack hub-prod --generate-code=false ${group.type} ${group.name}`,
            groupName.replace(`/${namePrefix}-`, "/<namePrefix>-"),
            `--parent 'ul=${engineUrn(parent.urn)}'`,
            `--provider 'hubaws=${engineUrn(provider.urn)}'`,
        ].join(" ");
        expect(engineUrn(parent.urn)).toBe("urn:pulumi:hub-prod::platform::platform:hub:UsageLedger::usage-ledger");
        const readme = fs.readFileSync(path.join(__dirname, "..", "README.md"), "utf8");
        const commands = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)]
            .map((m) => m[1].replace(/\\\n\s*/g, "").trim())
            .filter((c) => c.startsWith("pulumi import") && c.includes(group.name));
        expect(commands).toEqual([expected]);
    });
});
