import { z } from "zod";
import { UnlistedAwsRegionsSchema } from "./aws-region";
import { DnsLabel, EndpointSchema, endpointGpus } from "./endpoint";
import { FailoverConfigSchema, failoverHubIssues } from "./failover";
import { LimitSetSchema } from "./limits";
import { rolloutHubIssues } from "./rollout";
import { UsageLedgerConfigSchema } from "./metering";
import { SpokeIdentityConfigSchema } from "./spoke-identity";
import { KeyServingSchema, KvSharingSchema, ServingClassesSchema, servingPolicyIssues, TeamServingSchema } from "./serving-policy";
import { HubDeployersSchema, KeyAdministratorsSchema, TenantKeysConfigSchema, tenantKeysIssues } from "./tenant-keys";

/** A GPU cluster the hub may place endpoints on. Its spoke stack file sets `platform:spoke.name` to `name`. */
export const SpokeRefSchema = z
    .object({
        name: DnsLabel,
        /** Stack name of the spoke (its file is `stacks/Pulumi.<stack>.yaml`). */
        stack: z.string().min(1),
        /** Where the cluster is (cloud region or site), for humans and dashboards. */
        region: z.string().min(1),
        provider: z.enum(["onprem", "eks"]),
        /** GPUs the spoke can schedule; placement beyond this is rejected. */
        gpus: z.number().int().positive(),
    })
    .strict();

/** A model clients may call (`platform:models[]`), with its platform-wide limits. */
export const ModelSchema = z
    .object({
        /** Model id as clients send it (`model` in the request body). */
        id: z.string().min(1),
        /** Platform-wide limits for this model, the first of the three tiers. */
        limits: LimitSetSchema,
    })
    .strict();

/** A team of a tenant (`platform:tenants[].teams[]`), with its limits: the second of the three tiers. */
export const TeamSchema = z
    .object({
        id: DnsLabel,
        limits: LimitSetSchema,
        /** Priority class, latency class and output-length-hint ceiling (config/serving-policy.ts). */
        serving: TeamServingSchema.optional(),
    })
    .strict();
/** A tenant (`platform:tenants[]`): its teams and its KV-cache isolation unit. */
export const TenantSchema = z
    .object({
        id: DnsLabel,
        displayName: z.string().min(1),
        teams: z.array(TeamSchema).min(1),
        /**
         * KV-cache isolation unit: `tenant` (default: the tenant's teams share one cache salt) or `team` (each team
         * its own). Sharing across tenants is only `platform:kvSharing`.
         */
        kvCache: z.enum(["tenant", "team"]).default("tenant"),
    })
    .strict();

/**
 * An API key's metadata. The key itself is minted outside Pulumi by `npm run mint-key` (services/keys/mint.ts), which
 * writes it only to the tenant's Secrets Manager secret and prints its SHA-256 for `sha256` here: the hub's program,
 * state and previews never hold a key, and only the hash reaches the signed policy bundle.
 */
export const ApiKeySchema = z
    .object({
        id: DnsLabel,
        tenant: DnsLabel,
        team: DnsLabel,
        /** Hex SHA-256 of the key, as `npm run mint-key` printed it (lower-case, 64 characters). Not secret. */
        sha256: z.string().regex(/^[0-9a-f]{64}$/, "must be the hex SHA-256 `npm run mint-key` printed (64 lower-case hex characters)"),
        /** Model ids this key may call; each must be in `platform:models`. */
        models: z.array(z.string().min(1)).min(1),
        /** Expiry as an ISO-8601 timestamp; the auth service answers 401 after it. */
        expiresAt: z.string().datetime({ offset: true }),
        limits: LimitSetSchema,
        /** Narrows the team's serving entitlement for this key (never raises it). */
        serving: KeyServingSchema.optional(),
    })
    .strict();

/** `platform:alarms` of the hub: where CloudWatch alarms (failure queue, iterator age, reconciliation gaps) notify. */
export const HubAlarmsSchema = z
    .object({
        /** An SNS topic the operator owns (subscriptions: pager, mail). */
        topicArn: z
            .string()
            .regex(
                /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$/,
                "must be an SNS topic ARN like arn:aws:sns:ap-southeast-1:111122223333:platform-alarms",
            ),
        /** Consumer iterator age that alarms, seconds (usage older than this has not reached the ledger). */
        iteratorAgeSeconds: z.number().int().min(60).default(3600),
        /** EventBridge schedule of the reconciliation (services/reconciler). */
        reconcileSchedule: z
            .string()
            .regex(/^(rate|cron)\(.+\)$/, "must be an EventBridge schedule expression like rate(1 hour)")
            .default("rate(1 hour)"),
        /** Hours the reconciliation looks back on each run. */
        reconcileLookbackHours: z
            .number()
            .int()
            .min(1)
            .max(24 * 35)
            .default(48),
    })
    .strict();
/** `platform:alarms` of the hub as parsed ({@link HubAlarmsSchema}, defaults filled in). */
export type HubAlarms = z.infer<typeof HubAlarmsSchema>;

/** The prefix of the shipped hub's physical names (`platform-usage-ledger`, `alias/platform-policy-bundles`, ...). */
export const DEFAULT_HUB_NAME_PREFIX = "platform";

/**
 * S3 bucket name prefixes AWS reserves (a bucket named with them is refused): `xn--`, `sthree-`, `amzn-s3-demo-`
 * (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
 */
const RESERVED_BUCKET_PREFIXES = ["sthree", "amzn-s3-demo"];

/**
 * Longest name prefix: the tightest limit it feeds is the failure bucket
 * `<prefix>-usage-failed-batches-<12-digit account>-<region>` (components/hub/ledger/failures.ts) under S3's 63
 * characters: 63 - 22 - 13 - 14 (`ap-southeast-1`) = 14. The other fixed bucket names are shorter with it: the policy
 * bucket `<prefix>-policy-bundles-<account>-<region>` (components/hub/PolicyStore.ts) and the access log bucket
 * `<prefix>-s3-access-logs-<account>-<region>` (components/hub/AccessLogs.ts). A region name longer than
 * 14 characters is caught once the program reads `aws:region` (lib/hub-bucket-names.ts `hubBucketNameIssue`). Every other fixed name (IAM role 64, Lambda
 * 64, Aurora identifier 63, Kinesis stream 128, secret 512, alarm 255, KMS alias 256) is shorter with it.
 */
export const HUB_NAME_PREFIX_MAX = 14;

/**
 * `platform:namePrefix` of the hub: the first word of every fixed physical name the hub creates (buckets, Kinesis
 * streams, the Aurora cluster and its instances, Lambdas and their log groups, alarms, KMS aliases, secrets). The
 * default is the shipped hub's names exactly (changing it on an applied hub would replace protected stateful
 * resources: the engine refuses); set it on a second hub in the same account (staging beside production).
 * Lower-case letters, digits and single hyphens, starting with a letter and ending with a letter or digit (the
 * intersection of S3, Aurora and Lambda naming), at most {@link HUB_NAME_PREFIX_MAX} characters.
 */
export const HubNamePrefixSchema = z
    .string()
    .regex(
        /^[a-z](?:[a-z0-9]|-(?!-))*[a-z0-9]$/,
        "must be lower-case letters, digits and single hyphens, start with a letter and end with a letter or digit (it begins S3 bucket, Aurora and Lambda names)",
    )
    .max(
        HUB_NAME_PREFIX_MAX,
        `must be at most ${HUB_NAME_PREFIX_MAX} characters (the failure bucket <prefix>-usage-failed-batches-<account>-<region> must fit S3's 63)`,
    )
    .refine(
        (p) => !RESERVED_BUCKET_PREFIXES.some((r) => p === r || p.startsWith(`${r}-`)),
        `must not begin with an S3-reserved bucket prefix (${RESERVED_BUCKET_PREFIXES.map((r) => `${r}-`).join(", ")})`,
    );

/**
 * Shortest `platform:accessLogs.retentionDays`: 90 days, as long as the ledger's own log groups keep theirs
 * (components/hub/ledger/database.ts `LEDGER_LOG_RETENTION_DAYS`) and longer than a failed batch stays replayable
 * (components/hub/ledger/failures.ts `FAILED_BATCH_RETENTION_DAYS`), so the record of who read or replayed a batch
 * outlives the batch. Expiry is the one deletion a bucket policy cannot stop (docs/architecture.md), so the hub file
 * cannot make it short. test/config-errors.test.ts keeps the three in that order.
 */
export const ACCESS_LOG_MIN_RETENTION_DAYS = 90;

/**
 * `platform:accessLogs` of the hub: S3 server access logging of the hub's two data buckets (the policy bucket and the
 * usage failure bucket) into a dedicated log bucket the hub creates (components/hub/AccessLogs.ts). Always on: every
 * read, write and ACK of a bundle, and every stored or replayed usage batch, leaves a record that names the caller, so
 * a reviewer can verify it from the hub stack alone, with no organisation CloudTrail trail assumed. Every field has a
 * default. Why server access logs rather than CloudTrail data events: docs/architecture.md ("Audit of the hub's data
 * buckets").
 */
export const AccessLogsConfigSchema = z
    .object({
        /**
         * Days a log object stays in the log bucket before S3 expires it. Default 365 (a year of bundle pulls and
         * replays to look back on); at least {@link ACCESS_LOG_MIN_RETENTION_DAYS} (90).
         */
        retentionDays: z
            .number()
            .int()
            .min(
                ACCESS_LOG_MIN_RETENTION_DAYS,
                `must be at least ${ACCESS_LOG_MIN_RETENTION_DAYS} days (as long as the ledger's log groups keep theirs, longer than a failed batch is kept): expiry is the one deletion of access logs no bucket policy stops`,
            )
            .max(36500)
            .default(365),
    })
    .strict();

/** `platform:accessLogs` of the hub as parsed ({@link AccessLogsConfigSchema}, defaults filled in). */
export type AccessLogsConfig = z.infer<typeof AccessLogsConfigSchema>;

/** The `platform:*` keys of a hub stack file (`platform:role: hub`). */
export const HubConfigSchema = z
    .object({
        role: z.literal("hub"),
        /** First word of every fixed physical name of the hub ({@link HubNamePrefixSchema}); default `platform`. */
        namePrefix: HubNamePrefixSchema.default(DEFAULT_HUB_NAME_PREFIX),
        spokes: z.array(SpokeRefSchema).min(1),
        models: z.array(ModelSchema).min(1),
        tenants: z.array(TenantSchema).min(1),
        apiKeys: z.array(ApiKeySchema),
        endpoints: z.array(EndpointSchema),
        /** Priority and latency classes teams and keys are entitled to (config/serving-policy.ts). */
        servingClasses: ServingClassesSchema.optional(),
        /** Where tenants share a KV cache (config/serving-policy.ts); nowhere else. */
        kvSharing: z.array(KvSharingSchema).default([]),
        /** Usage ledger (config/metering.ts); optional, every field defaulted. */
        usage: UsageLedgerConfigSchema.prefault({}),
        /** S3 server access logging of the policy and failure buckets ({@link AccessLogsConfigSchema}); optional, defaulted. */
        accessLogs: AccessLogsConfigSchema.prefault({}),
        /** Spoke name -> how it obtains its AWS identity (default: pod-identity on EKS, access-key on-prem). */
        spokeIdentities: z.record(z.string(), SpokeIdentityConfigSchema).default({}),
        /** Alarm destination (required: usage that cannot reach the ledger must page someone). */
        alarms: HubAlarmsSchema,
        /** The roles that deploy the hub (config/tenant-keys.ts), and who may read each tenant's keys. */
        hubDeployers: HubDeployersSchema,
        /** Break-glass key administrators besides the hub deployers (config/tenant-keys.ts). */
        keyAdministrators: KeyAdministratorsSchema,
        tenantKeys: TenantKeysConfigSchema,
        /** One client hostname over several spokes (config/failover.ts); optional. */
        failover: FailoverConfigSchema.optional(),
        /**
         * Regions newer than the pinned AWS SDK that this file names (`aws:region`): a region the SDK does not list is
         * otherwise refused as a typo (config/aws-region.ts). Remove an entry once the SDK lists it (it is refused then).
         */
        unlistedAwsRegions: UnlistedAwsRegionsSchema.optional(),
    })
    .strict()
    .superRefine((h, ctx) => {
        const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
        for (const x of tenantKeysIssues(h)) issue(x.path, x.message);
        for (const x of servingPolicyIssues(h)) issue(x.path, x.message);
        for (const x of failoverHubIssues(h)) issue(x.path, x.message);
        const dupes = <T>(items: T[], key: (t: T) => string, path: string, what: string) => {
            const seen = new Map<string, number>();
            items.forEach((it, i) => {
                const k = key(it);
                if (seen.has(k)) issue([path, i], `duplicate ${what} "${k}" (also ${path}[${seen.get(k)}])`);
                else seen.set(k, i);
            });
        };
        dupes(h.spokes, (s) => s.name, "spokes", "spoke name");
        for (const x of rolloutHubIssues(h.endpoints)) issue(x.path, x.message);
        for (const [name, id] of Object.entries(h.spokeIdentities)) {
            const s = h.spokes.find((x) => x.name === name);
            if (!s) issue(["spokeIdentities", name], `unknown spoke "${name}" (known: ${h.spokes.map((x) => x.name).join(", ")})`);
            else if (s.provider === "eks" && id.mode !== "pod-identity")
                issue(["spokeIdentities", name, "mode"], `an EKS spoke uses pod-identity (no long-lived key), not ${id.mode}`);
            else if (s.provider === "onprem" && id.mode === "pod-identity")
                issue(
                    ["spokeIdentities", name, "mode"],
                    "pod-identity is for EKS spokes; an on-prem spoke uses roles-anywhere (CA bundle) or access-key",
                );
        }
        // One spoke's credentials must never serve another: the deployer role reads the spoke's key secret, and a
        // certificate with a spoke's CN from a CA another spoke trusts would pass that spoke's trust anchor too
        // (components/hub/SpokeIdentity.ts).
        const deployerOf = new Map<string, string>();
        const cnOf = new Map<string, string>();
        for (const [name, id] of Object.entries(h.spokeIdentities)) {
            if (id.mode === "access-key") {
                // by role name (path included): an explicit ARN in the hub's account may name another spoke's default
                // role, and the hub's account is not known here
                const arn = id.deployerRoleArn ?? `role/platform-spoke-deployer-${name}`;
                const roleName = arn.slice(arn.indexOf("role/") + "role/".length);
                const other = deployerOf.get(roleName);
                if (other)
                    issue(
                        ["spokeIdentities", name, "deployerRoleArn"],
                        `role ${roleName} is also spoke "${other}"'s deployer role: it could read both spokes' key secrets and act as either; give each spoke its own`,
                    );
                else deployerOf.set(roleName, name);
            } else if (id.mode === "roles-anywhere") {
                const cn = id.certificateCn ?? `platform-spoke-${name}`;
                const k = `${id.caBundle.trim()}\n${cn}`;
                const other = cnOf.get(k);
                if (other)
                    issue(
                        ["spokeIdentities", name, "certificateCn"],
                        `"${cn}" under the same CA bundle is also spoke "${other}"'s certificate CN: one site's certificate would pass the other's trust anchor; give each spoke its own CN`,
                    );
                else cnOf.set(k, name);
            }
        }
        dupes(h.spokes, (s) => s.stack, "spokes", "spoke stack");
        dupes(h.models, (m) => m.id, "models", "model id");
        dupes(h.tenants, (t) => t.id, "tenants", "tenant id");
        dupes(h.apiKeys, (k) => k.id, "apiKeys", "API key id");
        // The auth service rejects a bundle in which two keys share a hash (services/auth/policy.ts PolicyIndex).
        dupes(h.apiKeys, (k) => k.sha256, "apiKeys", "API key sha256 (mint each key id its own key)");
        dupes(h.endpoints, (e) => `${e.spoke}/${e.name}`, "endpoints", "endpoint (spoke/name)");
        h.tenants.forEach((t, i) => dupes(t.teams, (x) => x.id, `tenants[${i}].teams` as string, "team id"));

        const models = new Set(h.models.map((m) => m.id));
        const spokes = new Map(h.spokes.map((s) => [s.name, s]));
        const teams = new Set(h.tenants.flatMap((t) => t.teams.map((x) => `${t.id}/${x.id}`)));
        h.apiKeys.forEach((k, i) => {
            if (!h.tenants.some((t) => t.id === k.tenant)) issue(["apiKeys", i, "tenant"], `unknown tenant "${k.tenant}"`);
            else if (!teams.has(`${k.tenant}/${k.team}`)) issue(["apiKeys", i, "team"], `tenant "${k.tenant}" has no team "${k.team}"`);
            k.models.forEach((m, j) => {
                if (!models.has(m)) issue(["apiKeys", i, "models", j], `unknown model "${m}" (known: ${[...models].join(", ")})`);
            });
        });
        const gpusBySpoke = new Map<string, number>();
        h.endpoints.forEach((e, i) => {
            if (!models.has(e.model)) issue(["endpoints", i, "model"], `unknown model "${e.model}" (known: ${[...models].join(", ")})`);
            if (!spokes.has(e.spoke))
                issue(["endpoints", i, "spoke"], `placement on unknown spoke "${e.spoke}" (known: ${[...spokes.keys()].join(", ")})`);
            gpusBySpoke.set(e.spoke, (gpusBySpoke.get(e.spoke) ?? 0) + endpointGpus(e));
        });
        for (const [name, used] of gpusBySpoke) {
            const s = spokes.get(name);
            if (s && used > s.gpus) {
                // Name every endpoint on the spoke (the one whose replicas grew is among them), or only the one that
                // alone exceeds the spoke: the other endpoints are not what to fix.
                const on = h.endpoints.map((e, i) => ({ e, i, n: endpointGpus(e) })).filter((x) => x.e.spoke === name);
                const alone = on.filter((x) => x.n > s.gpus);
                const list = on.map((x) => `endpoints[${x.i}] ${x.e.name}: ${x.n}`).join(", ");
                for (const x of alone.length ? alone : on) {
                    issue(
                        ["endpoints", x.i, "topology"],
                        `spoke "${name}" has ${s.gpus} GPUs but its endpoints need ${used} (${list}); this endpoint uses ${x.n}`,
                    );
                }
            }
        }
    });

/** A validated hub config: the `platform:*` keys of a hub stack file as parsed ({@link HubConfigSchema}, defaults filled in). */
export type HubConfig = z.infer<typeof HubConfigSchema>;
