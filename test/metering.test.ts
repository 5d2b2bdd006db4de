import { versions } from "../config/versions";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { collectorValues, meteringEnv, spoolMaxBytes } from "../components/spoke/Metering";
import { bundleLambda, bundleUsageConsumer, consumerPolicy, usageStreamName } from "../components/hub/UsageLedger";
import { BUNDLE_CACHE_ENV, sharedBundleFile } from "../components/hub/ledger/bundle";
import { BUNDLE_CACHE_ENV as SETUP_BUNDLE_CACHE_ENV } from "./global-setup";
import { SpokeContractSchema } from "../config/contract";
import { MeteringConfigSchema, UsageLedgerConfigSchema, ledgerAvailabilityZones } from "../config/metering";
import { METERING_ACCESS_LOG_COLLECTOR } from "../services/shared/accesslog";
import { COUNTER_STORE_SECRET } from "../services/shared/spoke-secrets";
import { unwrapWire } from "../tools/wire";
import { byType, inputs, runHubAndSpoke } from "./helpers";

const out = (r: { outputs: Record<string, unknown> }, k: string) => unwrapWire(r.outputs[k]) as string;

describe("metering config", () => {
    it("defaults live in the schemas", () => {
        const hub = UsageLedgerConfigSchema.parse({});
        expect(hub).toEqual({
            vpcCidr: "10.250.0.0/22",
            engineVersion: "16.6",
            minAcu: 0.5,
            maxAcu: 8,
            instances: 2,
            backupRetentionDays: 14,
            streamRetentionHours: 168,
            consumerBatchSize: 500,
            deletionProtection: true,
        });
        expect(ledgerAvailabilityZones(hub, "ap-southeast-1")).toEqual(["ap-southeast-1a", "ap-southeast-1b"]);
        expect(MeteringConfigSchema.parse({})).toEqual({ replicas: 2, spoolVolumeGiB: 20, collectorReplicas: 2, collectorQueueGiB: 5 });
        expect(UsageLedgerConfigSchema.safeParse({ minAcu: 16, maxAcu: 8 }).success).toBe(false);
        // A retention that leaves no time to retry and replay (the failure destination fires a day before expiry).
        expect(UsageLedgerConfigSchema.safeParse({ streamRetentionHours: 24 }).success).toBe(false);
        expect(UsageLedgerConfigSchema.safeParse({ streamRetentionHours: 72 }).success).toBe(true);
        expect(spoolMaxBytes(20)).toBe(18_253_611_008);
    });

    it("the consumer may read exactly the usage streams and nothing else of Kinesis but ListStreams", () => {
        const p = consumerPolicy({
            streamArns: ["arn:s1"],
            queueArn: "arn:q",
            secretArn: "arn:sec",
            kmsKeyArn: "arn:k",
            logGroupArn: "arn:lg",
            region: "ap-southeast-1",
            failedBatchBucketArn: "arn:b",
            bucketOwner: "123456789012",
        });
        expect(p.Statement.map((s) => [s.Sid, s.Resource])).toEqual([
            ["ReadUsageStreams", ["arn:s1"]],
            ["ListStreams", "*"],
            ["FailureDestination", "arn:q"],
            ["DatabasePassword", "arn:sec"],
            ["DecryptDatabasePassword", "arn:k"],
            ["KeepFailedBatches", "arn:b/failed/*"],
            ["EncryptFailedBatches", "arn:k"],
            ["Logs", "arn:lg:*"],
        ]);
    });

    it("the collector queues persistently and retries metering forever", () => {
        const v = collectorValues({ namespace: "platform-system", replicas: 2, queueGiB: 5 }) as any;
        const exp = v.alternateConfig.exporters["otlphttp/metering"];
        expect(exp.logs_endpoint).toBe("http://metering.platform-system.svc.cluster.local:8080/v1/logs");
        expect([exp.encoding, exp.sending_queue.storage, exp.retry_on_failure.max_elapsed_time]).toEqual([
            "json",
            "file_storage/queue",
            "0s",
        ]);
        expect(v.alternateConfig.extensions["file_storage/queue"]).toEqual({
            directory: "/var/lib/otelcol/queue",
            fsync: true,
            timeout: "5s",
        });
        expect(v.alternateConfig.service.pipelines).toEqual({
            logs: { receivers: ["otlp"], processors: ["memory_limiter"], exporters: ["otlphttp/metering"] },
        });
        expect(v.fullnameOverride).toBe(METERING_ACCESS_LOG_COLLECTOR.service);
        expect(v.statefulset.volumeClaimTemplates[0].spec.resources.requests.storage).toBe("5Gi");
    });
});

describe("usage consumer bundle", () => {
    it("a bundle is built once per process and again when a file that went into it changes (an edit, a new import)", () => {
        const rel = path.join(".tmp", `bundle-cache-${process.pid}`);
        const dir = path.join(__dirname, "..", rel);
        fs.mkdirSync(dir, { recursive: true });
        try {
            const entry = path.join(dir, "entry.ts");
            const dep = path.join(dir, "dep.ts");
            fs.writeFileSync(dep, 'export const word = "first";\n');
            fs.writeFileSync(entry, 'import { word } from "./dep";\nexport const handler = () => word;\n');
            const one = bundleLambda(path.join(rel, "entry.ts"));
            expect(one.code).toContain("first");
            expect(bundleLambda(path.join(rel, "entry.ts"))).toBe(one); // the same object: not rebuilt
            // An edited import (a different size) is an input of the bundle: rebuilt.
            fs.writeFileSync(dep, 'export const word = "second, edited";\n');
            const two = bundleLambda(path.join(rel, "entry.ts"));
            expect(two.code).toContain("second, edited");
            expect(two.sha256).not.toBe(one.sha256);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("a bundle is shared with other processes through the run's folder, and taken only while its inputs are unchanged", () => {
        expect(SETUP_BUNDLE_CACHE_ENV).toBe(BUNDLE_CACHE_ENV);
        const rel = path.join(".tmp", `bundle-shared-${process.pid}`);
        const dir = path.join(__dirname, "..", rel);
        fs.mkdirSync(dir, { recursive: true });
        const prev = process.env[BUNDLE_CACHE_ENV];
        process.env[BUNDLE_CACHE_ENV] = path.join(dir, "shared");
        try {
            // Built here: written to the folder for the others.
            fs.writeFileSync(path.join(dir, "built.ts"), 'export const handler = () => "built";\n');
            const built = bundleLambda(path.join(rel, "built.ts"));
            expect(JSON.parse(fs.readFileSync(sharedBundleFile(path.join(rel, "built.ts"))!, "utf8")).bundle).toEqual(built);
            // Built by another process (planted): taken from the folder, no esbuild, while its input is as it was ...
            const entry = path.join(dir, "planted.ts");
            fs.writeFileSync(entry, 'export const handler = () => "planted";\n');
            const st = fs.statSync(entry);
            const planted = { bundle: { code: "from the folder", sha256: "x" }, inputs: [[entry, `${st.size}:${st.mtimeMs}`]] };
            fs.writeFileSync(sharedBundleFile(path.join(rel, "planted.ts"))!, JSON.stringify(planted));
            expect(bundleLambda(path.join(rel, "planted.ts")).code).toBe("from the folder");
            // ... and built afresh once it changed, the folder updated.
            fs.writeFileSync(entry, 'export const handler = () => "planted, then edited";\n');
            const edited = bundleLambda(path.join(rel, "planted.ts"));
            expect(edited.code).toContain("planted, then edited");
            expect(JSON.parse(fs.readFileSync(sharedBundleFile(path.join(rel, "planted.ts"))!, "utf8")).bundle).toEqual(edited);
        } finally {
            if (prev === undefined) delete process.env[BUNDLE_CACHE_ENV];
            else process.env[BUNDLE_CACHE_ENV] = prev;
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("builds at program run, runs no DDL (the migrator Lambda carries the schema), and loads with the handler exported", () => {
        const b = bundleUsageConsumer();
        // The consumer connects as ledger_ingest and applies no schema at cold start.
        expect(b.code).not.toContain("CREATE TABLE");
        expect(bundleLambda("services/reconciler/migrator.ts").code).toContain("CREATE TABLE IF NOT EXISTS usage_events");
        expect(b.sha256).toBe(bundleUsageConsumer().sha256); // deterministic
        const dir = fs.mkdtempSync(path.join(__dirname, "..", "node_modules", ".usage-consumer-"));
        try {
            fs.writeFileSync(path.join(dir, "index.js"), b.code);
            // eslint-disable-next-line @typescript-eslint/no-require-imports
            const mod = require(path.join(dir, "index.js"));
            expect([typeof mod.handler, typeof mod.processBatch, typeof mod.decodeBatch]).toEqual(["function", "function", "function"]);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("metering in the rendered stacks (mocks)", () => {
    it("hub: one encrypted stream per spoke, consumer with failure destination, Aurora Serverless v2, contract usage block, put-only grants", async () => {
        const { hub, spoke } = await runHubAndSpoke("spoke-hn1");
        const streams = byType(hub.resources, "aws:kinesis/stream:Stream").map(inputs);
        const spokes = streams.map((s) => s.name.replace("platform-usage-", "")).sort();
        expect(spokes.length).toBeGreaterThanOrEqual(2);
        for (const s of streams) {
            expect([s.encryptionType, s.kmsKeyId, s.retentionPeriod, s.streamModeDetails.streamMode]).toEqual([
                "KMS",
                "alias/aws/kinesis",
                168,
                "ON_DEMAND",
            ]);
        }
        const fn = inputs(byType(hub.resources, "aws:lambda/function:Function").find((f) => f.name === "usage-ledger-consumer")!);
        expect([fn.runtime, fn.handler, fn.sourceCodeHash]).toEqual(["nodejs24.x", "index.handler", bundleUsageConsumer().sha256]);
        expect(Object.values(JSON.parse(fn.environment.variables.STREAM_SPOKES)).sort()).toEqual(spokes);
        const queueArn = byType(hub.resources, "aws:sqs/queue:Queue")[0].outputs.arn;
        const maps = byType(hub.resources, "aws:lambda/eventSourceMapping:EventSourceMapping").map(inputs);
        expect(maps.length).toBe(spokes.length);
        for (const m of maps) {
            expect([
                m.destinationConfig.onFailure.destinationArn,
                m.bisectBatchOnFunctionError,
                m.maximumRetryAttempts,
                m.maximumRecordAgeInSeconds,
                m.startingPosition,
            ]).toEqual([queueArn, true, -1, 144 * 3600, "TRIM_HORIZON"]);
        }
        const db = byType(hub.resources, "aws:rds/cluster:Cluster")[0];
        const dbIn = inputs(db);
        expect([dbIn.engine, dbIn.engineMode, dbIn.storageEncrypted, dbIn.serverlessv2ScalingConfiguration]).toEqual([
            "aurora-postgresql",
            "provisioned",
            true,
            { minCapacity: 0.5, maxCapacity: 8 },
        ]);
        // The master password is managed and rotated by RDS: never in the program or its state.
        expect(dbIn.manageMasterUserPassword).toBe(true);
        expect(db.inputs.masterPassword).toBeUndefined();
        expect(byType(hub.resources, "aws:rds/clusterInstance:ClusterInstance").map((r) => inputs(r).instanceClass)).toEqual([
            "db.serverless",
            "db.serverless",
        ]);
        expect(JSON.stringify(hub.outputs)).not.toContain(
            String(
                unwrapWire(
                    byType(hub.resources, "random:index/randomPassword:RandomPassword").find(
                        (r) => r.name === "usage-ledger-ingest-password",
                    )!.outputs.result,
                ),
            ),
        );

        // Spoke identities: metering's role PutRecords (all the shipper sends) on exactly its own stream; auth's none.
        for (const s of spokes) {
            const kinesisOf = (service: string) =>
                JSON.parse(inputs(hub.resources.find((r) => r.name === `spoke-${s}-${service}-permissions`)!).policy).Statement.filter(
                    (x: any) => x.Effect === "Allow" && JSON.stringify(x.Action).includes("kinesis"),
                );
            expect(kinesisOf("metering")).toEqual([
                {
                    Sid: "PutUsageEvents",
                    Effect: "Allow",
                    Action: ["kinesis:PutRecords"],
                    Resource: `arn:aws:kinesis:ap-southeast-1:123456789012:stream/${usageStreamName(s)}`,
                },
            ]);
            expect(kinesisOf("auth")).toEqual([]);
        }
        const contract = SpokeContractSchema.parse((unwrapWire(hub.outputs.spokeContracts) as Record<string, unknown>).hn1);
        expect(contract.usage).toEqual({
            streamName: "platform-usage-hn1",
            streamArn: "arn:aws:kinesis:ap-southeast-1:123456789012:stream/platform-usage-hn1",
            region: "ap-southeast-1",
            roleArn: out(hub.resources.find((r) => r.name === "spoke-hn1-metering-role")!, "arn"),
        });
        expect(contract.usage.roleArn).not.toBe(contract.policy.roleArn);
        // On-prem each service's shared config assumes its own role under its own session name (what each trust admits).
        const awsConfig = (secret: string) =>
            String(
                unwrapWire(
                    inputs(spoke.resources.find((r) => r.type === "kubernetes:core/v1:Secret" && inputs(r).metadata.name === secret)!)
                        .stringData.config,
                ),
            );
        expect(awsConfig("metering-aws")).toContain(`role_arn = ${contract.usage.roleArn}\n`);
        expect(awsConfig("metering-aws")).toContain("role_session_name = platform-metering\n");
        expect(awsConfig("auth-aws")).toContain(`role_arn = ${contract.policy.roleArn}\n`);
        expect(awsConfig("auth-aws")).toContain("role_session_name = platform-auth\n");

        // Spoke: StatefulSet with a spool volume per pod shipping to its stream; collector; grant; secrets stay secret.
        const sts = byType(spoke.resources, "kubernetes:apps/v1:StatefulSet")
            .map(inputs)
            .find((x) => x.metadata.name === "metering")!;
        expect(sts.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe("20Gi");
        expect(sts.spec.persistentVolumeClaimRetentionPolicy).toEqual({ whenDeleted: "Retain", whenScaled: "Retain" });
        const env = Object.fromEntries(sts.spec.template.spec.containers[0].env.map((e: any) => [e.name, e.value ?? e.valueFrom]));
        expect(env).toMatchObject({
            ...meteringEnv({ spoke: "hn1", usage: contract.usage, policy: contract.policy, volumeGiB: 20 }),
            METERING_INSTANCE: { fieldRef: { fieldPath: "metadata.name" } },
            // The counter store's operator-installed Secret (services/shared/spoke-secrets.ts), its copy in platform-system.
            METERING_REDIS_URL: { secretKeyRef: { name: COUNTER_STORE_SECRET.name, key: "url" } },
        });
        expect(COUNTER_STORE_SECRET.namespaces).toContain(sts.metadata.namespace);
        expect(
            spoke.resources.filter((r) => r.type === "kubernetes:core/v1:Secret").map((r) => (unwrapWire(r.inputs) as any).metadata.name),
        ).not.toContain("metering-redis");
        const rel = byType(spoke.resources, "kubernetes:helm.sh/v3:Release")
            .map(inputs)
            .find((r) => r.chart === "opentelemetry-collector")!;
        expect([rel.version, rel.namespace, rel.name]).toEqual([versions.otelCollector.version, "platform-system", "metering-collector"]);
        // The gateway's EnvoyProxy sends its access log to the collector the grant admits it to.
        const proxy = spoke.resources.map((r) => unwrapWire(r.inputs) as any).find((x) => x?.kind === "EnvoyProxy")!;
        const sink = proxy.spec.telemetry.accessLog.settings[0].sinks[0].openTelemetry.backendRefs[0];
        const grant = spoke.resources.map((r) => unwrapWire(r.inputs) as any).find((x) => x?.kind === "ReferenceGrant")!;
        expect(grant.spec.from).toEqual([{ group: "gateway.envoyproxy.io", kind: "EnvoyProxy", namespace: proxy.metadata.namespace }]);
        expect(grant.metadata.namespace).toBe(sink.namespace);
        expect(grant.spec.to).toEqual([{ group: "", kind: "Service", name: sink.name }]);
        expect(sink.port).toBe(rel.values.ports.otlp.servicePort);
    });
});
