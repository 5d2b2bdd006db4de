import { versions } from "../config/versions";
import { beforeAll, describe, expect, it } from "vitest";
import { SpokeContractSchema } from "../config/contract";
import { unwrapWire } from "../tools/wire";
import { byType, flatConfig, inputs, runHubAndSpoke, runRepoStack, stackConfigDoc } from "./helpers";

describe.each([false, true])("whole stacks under mocks (preview=%s)", (preview) => {
    it("hub: one versioned placement contract per spoke; no key in the program, only the hub file's hashes in the bundle model", async () => {
        const hub = await runRepoStack("hub-prod", { preview });
        const hubSpokes = (stackConfigDoc("hub-prod")["platform:spokes"] as Array<{ name: string }>).map((s) => s.name).sort();
        // The placement summary is pure config: known even in preview.
        const placement = unwrapWire(hub.outputs.placement) as Record<string, { endpoints: string[]; revision: string }>;
        expect(Object.keys(placement).sort()).toEqual(hubSpokes);
        expect(placement.hn1.endpoints).toEqual(["llama-70b", "qwen3-32b"]);
        // Keys are minted outside Pulumi (npm run mint-key): nothing under ApiKeys generates or writes a key, and each
        // tenant's secret is created empty, protected and retained on delete.
        const [apiKeys] = byType(hub.resources, "platform:hub:ApiKeys");
        const keyDocs = stackConfigDoc("hub-prod")["platform:apiKeys"] as Array<{ id: string; tenant: string; sha256: string }>;
        const under = hub.resources.filter((r) => r.parent === apiKeys.urn);
        expect([...new Set(under.map((r) => r.type))].sort()).toEqual([
            "aws:kms/key:Key",
            "aws:secretsmanager/secret:Secret",
            "aws:secretsmanager/secretPolicy:SecretPolicy",
        ]);
        const tenants = Object.keys(stackConfigDoc("hub-prod")["platform:tenantKeys"].readers).sort();
        const secrets = under.filter((r) => r.type === "aws:secretsmanager/secret:Secret");
        expect(secrets.map((r) => inputs(r).name).sort()).toEqual(tenants.map((t) => `platform/tenants/${t}/api-keys`));
        for (const r of secrets) expect(r.options).toMatchObject({ protect: true, retainOnDelete: true });
        expect(hub.outputs).not.toHaveProperty("apiKeys");
        expect(JSON.stringify(hub.outputs)).not.toMatch(/sk-h200-/);
        const model = unwrapWire(hub.outputs.accessModel) as { apiKeys: Array<{ id: string; sha256: string }> };
        expect(Object.fromEntries(model.apiKeys.map((k) => [k.id, k.sha256]))).toEqual(
            Object.fromEntries(keyDocs.map((k) => [k.id, k.sha256])),
        );
        if (preview) return;
        const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, unknown>;
        expect(Object.keys(contracts).sort()).toEqual(hubSpokes);
        const hn1 = SpokeContractSchema.parse(contracts.hn1);
        expect(hn1.endpoints.map((e) => e.name)).toEqual(["llama-70b", "qwen3-32b"]);
        expect(hn1.hub).toBe("hub-prod");
        expect(hn1.placementRevision).toBe(placement.hn1.revision);
        expect(Object.keys(unwrapWire(hub.outputs.tenantKeySecrets) as Record<string, string>).sort()).toEqual(tenants);
    });

    it("spoke: nodes labelled/tainted by SSA patches, one RDMA resource per rail, no rail IP networks", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1", preview);
        const rs = spoke.resources;
        const patches = byType(rs, "kubernetes:core/v1:NodePatch").map(inputs);
        expect(patches.map((p) => p.metadata.name).sort()).toEqual(["hn1-gpu-01", "hn1-gpu-02"]);
        expect(patches[0].metadata.labels).toMatchObject({
            "inference-platform.io/pool": "h200",
            "inference-platform.io/gpu-product": "NVIDIA-H200",
            "inference-platform.io/rail-topology": "rail-optimized-8",
            "inference-platform.io/fabric": "infiniband",
        });
        expect(patches[0].spec.taints).toEqual([{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }]);

        const [ncp] = byType(rs, "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy").map(inputs);
        expect(ncp.metadata.name).toBe("nic-cluster-policy");
        const plugin = JSON.parse(ncp.spec.rdmaSharedDevicePlugin.config);
        expect(plugin.configList.map((c: any) => [c.resourceName, c.selectors.ifNames[0]])).toEqual([
            ["rail_0", "ibp24s0"],
            ["rail_1", "ibp64s0"],
            ["rail_2", "ibp79s0"],
            ["rail_3", "ibp94s0"],
            ["rail_4", "ibp154s0"],
            ["rail_5", "ibp192s0"],
            ["rail_6", "ibp206s0"],
            ["rail_7", "ibp220s0"],
        ]);
        expect(ncp.spec.rdmaSharedDevicePlugin.version).toBe(versions.rdmaSharedDevicePlugin.version);

        // No pod of hn1 needs an IP on a rail (NIXL over UCX verbs, Mooncake, NCCL: upstream/activation.ts
        // ipoib-rail-networks), so neither the rail IP pools and networks nor Multus/IPoIB CNI/nv-ipam are rendered
        // (platform:backend.railNetworks off; test/rail-networks.test.ts renders them on).
        expect(Object.keys(ncp.spec)).toEqual(["rdmaSharedDevicePlugin"]);
        expect(byType(rs, "kubernetes:nv-ipam.nvidia.com/v1alpha1:IPPool")).toEqual([]);
        expect(byType(rs, "kubernetes:mellanox.com/v1alpha1:IPoIBNetwork")).toEqual([]);

        const gpuOp = byType(rs, "kubernetes:helm.sh/v3:Release")
            .map(inputs)
            .find((r) => r.chart === "gpu-operator")!;
        // DMA-BUF: nothing under driver.rdma but enabled: false (useHostMofed is read only with peermem, NVIDIA/gpu-operator@v25.10.1
        // api/nvidia/v1/clusterpolicy_types.go IsHostMOFED); NFD comes from the Network Operator, the GPU Operator's is off.
        expect(gpuOp.values.driver.rdma).toEqual({ enabled: false });
        expect(gpuOp.values.driver.kernelModuleType).toBe("open");
        expect(gpuOp.values.nfd).toEqual({ enabled: false });
    });

    it("spoke: every Kubernetes resource goes through the stack's explicit provider and sits under a component", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hcm1", preview);
        const [provider] = byType(spoke.resources, "pulumi:providers:kubernetes");
        expect(provider).toBeDefined();
        const k8s = spoke.resources.filter((r) => r.custom && r.type.startsWith("kubernetes:"));
        expect(k8s.length).toBeGreaterThan(20);
        for (const r of k8s) expect(r.provider, `${r.type} ${r.name}`).toContain(provider.urn);
        const components = new Set(spoke.resources.filter((r) => r.type.startsWith("platform:spoke:")).map((r) => r.urn));
        const nested = k8s.filter((r) => components.has(r.parent));
        expect(nested.length).toBe(k8s.length - 2); // only the two namespaces live at the stack root
        // hcm1's OEM profile in IB mode: rail 0 is PCI 0000:09:00.0 (ibp9s0f0), rail 3 is 0000:69:00.0 (ibp105s0f0),
        // not in netdev order (NVIDIA/k8s-launch-kit@aa1fef72 presets/UCSC-885A-M8-H22: eth3, eth2 in Ethernet mode).
        const [ncp] = byType(spoke.resources, "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy").map(inputs);
        const list = JSON.parse(ncp.spec.rdmaSharedDevicePlugin.config).configList;
        expect([list[0].selectors.ifNames, list[3].selectors.ifNames]).toEqual([["ibp9s0f0"], ["ibp105s0f0"]]);
    });
});

describe("spoke vs hub contract", () => {
    it("a spoke the hub does not know fails before creating anything, naming the key", async () => {
        const hub = await runRepoStack("hub-prod");
        const { stackFile } = await import("./helpers");
        const cfg = { ...stackFile("spoke-hn1").config };
        const spoke = JSON.parse(cfg["platform:spoke"]);
        cfg["platform:spoke"] = JSON.stringify({ ...spoke, name: "dn1" });
        await expect(
            runRepoStack("spoke-hn1", { config: cfg, stackOutputs: { "hub-prod": { outputs: hub.outputs, secretOutputNames: [] } } }),
        ).rejects.toThrow(
            /stacks\/Pulumi.spoke-hn1.yaml: invalid stack configuration\n {2}- platform:spoke.name: spoke "dn1" is not known to hub "organization\/platform\/hub-prod" \(known: hcm1, hn1, sg1\)/,
        );
    });

    it("a placement that does not fit the spoke is refused by the hub, naming the hub file's key", async () => {
        const hubDoc = structuredClone(stackConfigDoc("hub-prod"));
        const llama = (hubDoc["platform:endpoints"] as any[]).find((e) => e.spoke === "hn1" && e.name === "llama-70b");
        llama.kvPool.storeReplicas = 3; // hn1 has 2 GPU nodes: at most one Mooncake store per node
        const err = await runRepoStack("hub-prod", { config: flatConfig(hubDoc) }).then(
            () => undefined,
            (e) => e,
        );
        expect(err?.message).toMatch(
            /stacks\/Pulumi.hub-prod.yaml: invalid stack configuration\n {2}- platform:endpoints\[0\].kvPool.storeReplicas: 3 Mooncake stores on pool "h200" with 2 node\(s\); at most one store per node \(spoke stacks\/Pulumi.spoke-hn1.yaml would refuse this placement\)/,
        );
        expect((err.capturedResources as Array<{ type: string }>).map((r) => r.type)).toEqual(["pulumi:pulumi:Stack"]);
    });

    it("the spoke still refuses such a contract (one written by an older hub) before any resource is declared", async () => {
        const hub = await runRepoStack("hub-prod");
        const outputs = structuredClone(hub.outputs) as any;
        outputs.spokeContracts.hn1.endpoints[0].kvPool.storeReplicas = 3;
        const err = await runRepoStack("spoke-hn1", { stackOutputs: { "hub-prod": { outputs, secretOutputNames: [] } } }).then(
            () => undefined,
            (e) => e,
        );
        expect(err?.message).toMatch(
            /stacks\/Pulumi.spoke-hn1.yaml: invalid stack configuration\n {2}- hub output spokeContracts.hn1.endpoints\[0\].kvPool.storeReplicas: 3 Mooncake stores on pool "h200" with 2 node\(s\)/,
        );
        const declared = (err.capturedResources as Array<{ type: string }>).map((r) => r.type);
        expect(declared.filter((t) => !["pulumi:pulumi:Stack", "pulumi:pulumi:StackReference"].includes(t))).toEqual([]);
    });

    it("a hub without aws:region is refused naming the key, before any resource", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        delete doc["aws:region"];
        const err = await runRepoStack("hub-prod", { config: flatConfig(doc) }).then(
            () => undefined,
            (e) => e,
        );
        expect(err?.message).toBe(
            "stacks/Pulumi.hub-prod.yaml: invalid stack configuration\n  - aws:region: missing; the hub runs on AWS: set the region of its control plane, e.g. ap-southeast-1",
        );
        expect((err.capturedResources as Array<{ type: string }>).map((r) => r.type)).toEqual(["pulumi:pulumi:Stack"]);
    });
});

// "A spoke only touches its own data" must hold for credentials; stateful resources survive an ordinary
// `up`; the ledger database enforces TLS and least privilege; usage that cannot reach the ledger pages someone.
describe("hub on AWS as a security review would pass it (hub-prod)", () => {
    let hub: Awaited<ReturnType<typeof runRepoStack>>;
    const find = (type: string, name: string) => {
        const r = hub.resources.find((x) => x.type === type && x.name === name);
        expect(r, `${type} ${name}`).toBeDefined();
        return r!;
    };
    const all = (type: string) => byType(hub.resources, type);
    beforeAll(async () => {
        hub = await runRepoStack("hub-prod");
    });

    it("no spoke credential in any hub output: what a spoke's StackReference reads holds no key of any spoke", () => {
        expect(Object.keys(hub.outputs)).not.toContain("spokeCredentials");
        // The hub creates no AWS access key at all (services/keys/spoke-key.ts mints them into the slots' secrets).
        expect(all("aws:iam/accessKey:AccessKey")).toEqual([]);
        const readable = JSON.stringify(unwrapWire(hub.outputs));
        expect(readable).not.toMatch(/secretAccessKey|AKIA[0-9A-Z]{16}/);
        // Each spoke's contract names only its own identity.
        const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, any>;
        expect(contracts.sg1.identity.mode).toBe("pod-identity");
        expect(contracts.hn1.identity).toMatchObject({ mode: "access-key", slot: "2026-11", region: "ap-southeast-1" });
        expect(contracts.hn1.identity.secretArn).toContain("platform/spokes/hn1/source-key/2026-11");
        expect(JSON.stringify(contracts.hn1)).not.toContain("/hcm1/");
    });

    it("an on-prem spoke's key secret can be read only by that spoke's deployer (and written by the hub)", () => {
        const policies = all("aws:secretsmanager/secretPolicy:SecretPolicy");
        expect(
            policies
                .map((p) => p.name)
                .filter((n) => n.startsWith("spoke-"))
                .sort(),
        ).toEqual(["spoke-hcm1-key-2026-11-policy", "spoke-hn1-key-2026-11-policy"]);
        for (const p of policies.filter((x) => x.name.startsWith("spoke-"))) {
            const spoke = p.name.replace(/^spoke-|-key-.*$/g, "");
            const doc = JSON.parse(inputs(p).policy);
            const allow = doc.Statement.filter((s: any) => s.Effect === "Allow");
            expect(allow.map((s: any) => s.Principal)).toEqual([
                { AWS: `arn:aws:iam::111122223333:role/platform-spoke-deployer-${spoke}` },
                { AWS: stackConfigDoc("hub-prod")["platform:hubDeployers"] },
            ]);
            const deny = doc.Statement.find((s: any) => s.Effect === "Deny");
            expect(deny).toMatchObject({ Principal: "*", Action: ["secretsmanager:GetSecretValue"] });
            // Only this spoke's deployer and the hub's own deployer escape the deny: no other spoke's principal.
            expect(deny.Condition.ArnNotEquals["aws:PrincipalArn"]).toEqual([
                `arn:aws:iam::111122223333:role/platform-spoke-deployer-${spoke}`,
                ...stackConfigDoc("hub-prod")["platform:hubDeployers"],
            ]);
            // Only the hub's deployers write it (npm run mint-key -- spoke-access-key): not even the spoke's deployer.
            const write = doc.Statement.find((s: any) => s.Sid === "OnlyHubDeployersWrite");
            expect(write).toMatchObject({
                Effect: "Deny",
                Principal: "*",
                // Every way to change the value (a new SecretString or current version) or who may read it.
                Action: [
                    "secretsmanager:PutSecretValue",
                    "secretsmanager:UpdateSecret",
                    "secretsmanager:UpdateSecretVersionStage",
                    "secretsmanager:PutResourcePolicy",
                    "secretsmanager:DeleteResourcePolicy",
                    // ... and every way to destroy, restore, rotate, replicate or re-tag it.
                    "secretsmanager:DeleteSecret",
                    "secretsmanager:RestoreSecret",
                    "secretsmanager:RotateSecret",
                    "secretsmanager:CancelRotateSecret",
                    "secretsmanager:ReplicateSecretToRegions",
                    "secretsmanager:RemoveRegionsFromReplication",
                    "secretsmanager:StopReplicationToReplica",
                    "secretsmanager:TagResource",
                    "secretsmanager:UntagResource",
                ],
            });
            expect(write.Condition.ArnNotEquals["aws:PrincipalArn"]).toEqual(
                [...stackConfigDoc("hub-prod")["platform:hubDeployers"]].sort(),
            );
        }
    });

    it("keys have a maximum age and a source-IP condition when the site's egress is known; EKS spokes have no IAM user", () => {
        const users = all("aws:iam/user:User")
            .map((u) => inputs(u).name)
            .sort();
        expect(users).toEqual(["platform-spoke-hcm1-2026-11", "platform-spoke-hn1-2026-11"]);
        const hn1 = JSON.parse(inputs(find("aws:iam/userPolicy:UserPolicy", "spoke-hn1-assume-2026-11")).policy).Statement[0];
        // createdAt 2026-11-30 + maxKeyAgeDays 90 (stacks/Pulumi.hub-prod.yaml).
        expect(hn1.Condition).toEqual({
            DateLessThan: { "aws:CurrentTime": "2027-02-28T00:00:00Z" },
            IpAddress: { "aws:SourceIp": ["198.51.100.0/28"] },
        });
        for (const service of ["auth", "metering"]) {
            const hn1Role = JSON.parse(inputs(find("aws:iam/rolePolicy:RolePolicy", `spoke-hn1-${service}-permissions`)).policy);
            expect(hn1Role.Statement.find((s: any) => s.Sid === "DenyOutsideSiteEgress").Condition).toEqual({
                NotIpAddress: { "aws:SourceIp": ["198.51.100.0/28"] },
                Bool: { "aws:ViaAWSService": "false" },
            });
        }
        // One role per service, each trusting exactly one namespace/service-account pair.
        for (const [service, namespace] of [
            ["auth", "llm-gateway"],
            ["metering", "platform-system"],
        ]) {
            const sg1Trust = JSON.parse(inputs(find("aws:iam/role:Role", `spoke-sg1-${service}-role`)).assumeRolePolicy).Statement;
            expect(sg1Trust).toEqual([
                {
                    Sid: "EksPodIdentityOfThisServiceOnly",
                    Effect: "Allow",
                    Principal: { Service: "pods.eks.amazonaws.com" },
                    Action: ["sts:AssumeRole", "sts:TagSession"],
                    Condition: {
                        StringEquals: {
                            "aws:SourceAccount": "123456789012",
                            "aws:RequestTag/eks-cluster-arn": "arn:aws:eks:ap-southeast-1:123456789012:cluster/platform-sg1",
                            "aws:RequestTag/kubernetes-namespace": namespace,
                            "aws:RequestTag/kubernetes-service-account": service,
                        },
                    },
                },
            ]);
        }
    });

    it("rotation phase 1 (a second slot) keeps both keys valid; phase 2 moves the contract; the old slot goes only when removed", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:spokeIdentities"].hn1.keys.push({ id: "2027-02", createdAt: "2027-02-01" });
        const phase1 = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        // Each slot: its user and its (empty) secret; the keys are minted into them outside Pulumi.
        const slotsOf = (rs: typeof phase1.resources) =>
            [...byType(rs, "aws:iam/user:User"), ...byType(rs, "aws:secretsmanager/secret:Secret")]
                .map((k) => k.name)
                .filter((n) => n.includes("hn1"))
                .sort();
        expect(slotsOf(phase1.resources)).toEqual([
            "spoke-hn1-key-2026-11",
            "spoke-hn1-key-2027-02",
            "spoke-hn1-source-2026-11",
            "spoke-hn1-source-2027-02",
        ]);
        const trust = JSON.parse(inputs(phase1.resources.find((r) => r.name === "spoke-hn1-auth-role")!).assumeRolePolicy).Statement.map(
            (x: any) => x.Principal.AWS,
        );
        expect(trust).toHaveLength(2);
        expect((unwrapWire(phase1.outputs.spokeContracts) as any).hn1.identity.slot).toBe("2026-11");
        doc["platform:spokeIdentities"].hn1.activeKey = "2027-02";
        const phase2 = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        expect((unwrapWire(phase2.outputs.spokeContracts) as any).hn1.identity.slot).toBe("2027-02");
        expect(slotsOf(phase2.resources)).toEqual(slotsOf(phase1.resources));
    });

    it("roles-anywhere when the operator provides a CA bundle: trust anchor + profile, no IAM user or key for that spoke", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:spokeIdentities"].hcm1 = {
            mode: "roles-anywhere",
            caBundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            egressCidrs: ["192.0.2.0/28"],
        };
        const r = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        expect(byType(r.resources, "aws:iam/user:User").map((u) => inputs(u).name)).toEqual(["platform-spoke-hn1-2026-11"]);
        const anchor = byType(r.resources, "aws:rolesanywhere/trustAnchor:TrustAnchor").map(inputs);
        expect(anchor).toHaveLength(1);
        expect(anchor[0].source).toEqual({
            sourceType: "CERTIFICATE_BUNDLE",
            sourceData: { x509CertificateData: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" },
        });
        expect(byType(r.resources, "aws:rolesanywhere/profile:Profile")).toHaveLength(1);
        // Each service's role trusts only its own certificate CN (`<certificateCn>-<service>`); the profile names both.
        for (const service of ["auth", "metering"]) {
            const trust = JSON.parse(inputs(r.resources.find((x) => x.name === `spoke-hcm1-${service}-role`)!).assumeRolePolicy)
                .Statement[0];
            expect(trust.Principal).toEqual({ Service: "rolesanywhere.amazonaws.com" });
            expect(trust.Condition.StringEquals).toEqual({ "aws:PrincipalTag/x509Subject/CN": `platform-spoke-hcm1-${service}` });
        }
        expect(inputs(byType(r.resources, "aws:rolesanywhere/profile:Profile")[0]).roleArns).toHaveLength(2);
        expect((unwrapWire(r.outputs.spokeContracts) as any).hcm1.identity).toMatchObject({
            mode: "roles-anywhere",
            certificateCn: "platform-spoke-hcm1",
        });
    });

    it("stateful resources are protected and retained on delete, with fixed names; resources.json records the options", async () => {
        const { resourcesJson } = await import("../tools/outputs");
        const rows = resourcesJson(hub.resources) as Array<{ type: string; name: string; options: Record<string, boolean>; inputs: any }>;
        const stateful = rows.filter((r) =>
            [
                "aws:kms/key:Key",
                "aws:s3/bucket:Bucket",
                "aws:kinesis/stream:Stream",
                "aws:rds/cluster:Cluster",
                "aws:rds/clusterInstance:ClusterInstance",
            ].includes(r.type),
        );
        expect(stateful.map((r) => r.type).sort()).toEqual([
            "aws:kinesis/stream:Stream",
            "aws:kinesis/stream:Stream",
            "aws:kinesis/stream:Stream",
            "aws:kms/key:Key",
            "aws:kms/key:Key",
            "aws:kms/key:Key",
            "aws:rds/cluster:Cluster",
            "aws:rds/clusterInstance:ClusterInstance",
            "aws:rds/clusterInstance:ClusterInstance",
            "aws:s3/bucket:Bucket",
            "aws:s3/bucket:Bucket",
            "aws:s3/bucket:Bucket",
        ]);
        for (const r of stateful)
            expect(r.options, `${r.type} ${r.name}`).toEqual({ protect: true, retainOnDelete: true, deleteBeforeReplace: false });
        const named = (type: string) =>
            stateful
                .filter((r) => r.type === type)
                .map((r) => r.inputs.identifier ?? r.inputs.clusterIdentifier ?? r.inputs.bucket ?? r.inputs.name);
        expect(named("aws:rds/cluster:Cluster")).toEqual(["platform-usage-ledger"]);
        expect(named("aws:rds/clusterInstance:ClusterInstance").sort()).toEqual(["platform-usage-ledger-0", "platform-usage-ledger-1"]);
        expect(named("aws:s3/bucket:Bucket").sort()).toEqual([
            "platform-policy-bundles-123456789012-ap-southeast-1",
            "platform-s3-access-logs-123456789012-ap-southeast-1",
            "platform-usage-failed-batches-123456789012-ap-southeast-1",
        ]);
        // Spoke roles are named by prefix: a replacement creates the new role before it deletes the old one.
        for (const service of ["auth", "metering"]) {
            const role = rows.find((r) => r.name === `spoke-hn1-${service}-role`)!;
            expect(role.options.deleteBeforeReplace).toBe(false);
            expect([role.inputs.name, role.inputs.namePrefix]).toEqual([undefined, `hub-prod-hn1-${service}-`]);
        }
        // Something not stateful stays unprotected (the option is recorded, not assumed).
        expect(rows.find((r) => r.type === "aws:sqs/queue:Queue")!.options.protect).toBe(false);
    });

    it("ledger database: rds.force_ssl=1, master password managed by RDS, consumer as the ingest role behind a migration", () => {
        const cluster = inputs(all("aws:rds/cluster:Cluster")[0]);
        expect(cluster).toMatchObject({
            manageMasterUserPassword: true,
            dbClusterParameterGroupName: "platform-usage-ledger-aurora-postgresql16",
        });
        expect(cluster.masterPassword).toBeUndefined();
        const params = inputs(all("aws:rds/clusterParameterGroup:ClusterParameterGroup")[0]);
        expect(params.family).toBe("aurora-postgresql16");
        expect(params.parameters).toEqual([{ name: "rds.force_ssl", value: "1", applyMethod: "immediate" }]);
        const fns = Object.fromEntries(all("aws:lambda/function:Function").map((f) => [inputs(f).name, inputs(f)]));
        expect(Object.keys(fns).sort()).toEqual([
            "platform-usage-consumer",
            "platform-usage-ledger-migrator",
            "platform-usage-ledger-ops",
            "platform-usage-reconciliation",
        ]);
        expect(fns["platform-usage-consumer"].environment.variables.PGUSER).toBe("ledger_ingest");
        expect(fns["platform-usage-reconciliation"].environment.variables.PGUSER).toBe("ledger_reporter");
        const invocation = all("aws:lambda/invocation:Invocation")[0];
        expect(inputs(invocation).functionName).toBe("platform-usage-ledger-migrator");
        for (const m of all("aws:lambda/eventSourceMapping:EventSourceMapping")) expect(m.dependencies).toContain(invocation.urn);
        // The consumer's bundle runs no DDL at cold start.
        expect(fns["platform-usage-consumer"].code).toBeDefined();
    });

    it("alarms on the failure queue, the consumer's errors and iterator age and reconciliation gaps go to the topic in the hub file; the reconciliation is scheduled", () => {
        const alarms = Object.fromEntries<any>(all("aws:cloudwatch/metricAlarm:MetricAlarm").map((a) => [inputs(a).name, inputs(a)]));
        expect(Object.keys(alarms).sort()).toEqual([
            "platform-usage-consumer-errors",
            "platform-usage-consumer-iterator-age",
            "platform-usage-failure-queue",
            "platform-usage-reconciliation-gaps",
        ]);
        expect(alarms["platform-usage-consumer-errors"]).toMatchObject({
            namespace: "AWS/Lambda",
            metricName: "Errors",
            dimensions: { FunctionName: "platform-usage-consumer" },
            threshold: 0,
        });
        for (const a of Object.values(alarms)) expect(a.alarmActions).toEqual(["arn:aws:sns:ap-southeast-1:111122223333:platform-alarms"]);
        expect(alarms["platform-usage-failure-queue"]).toMatchObject({
            namespace: "AWS/SQS",
            metricName: "ApproximateNumberOfMessagesVisible",
            threshold: 0,
        });
        expect(alarms["platform-usage-consumer-iterator-age"]).toMatchObject({
            namespace: "AWS/Lambda",
            metricName: "IteratorAge",
            dimensions: { FunctionName: "platform-usage-consumer" },
            threshold: 3_600_000,
        });
        expect(alarms["platform-usage-reconciliation-gaps"]).toMatchObject({
            namespace: "Platform/Usage",
            metricName: "ReconciliationMissingEvents",
            dimensions: { Spoke: "all" },
            treatMissingData: "breaching",
        });
        const rule = inputs(all("aws:cloudwatch/eventRule:EventRule")[0]);
        expect(rule.scheduleExpression).toBe("rate(1 hour)");
        expect(inputs(all("aws:cloudwatch/eventTarget:EventTarget")[0]).arn).toMatch(/function:platform-usage-reconciliation$/);
    });

    it("a hub file without platform:alarms is refused naming the key", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        delete doc["platform:alarms"];
        await expect(runRepoStack("hub-prod", { config: flatConfig(doc) })).rejects.toThrow(/platform:alarms/);
    });
});

describe("on-prem spoke credentials come from its own key secret, never from the hub", () => {
    it("spoke-hn1 holds no source key at all (its pods mount the operator-installed Secret) and reads no hub credential", async () => {
        const { callMocks } = await import("../tools/mock-outputs");
        const { hub, spoke } = await runHubAndSpoke("spoke-hn1");
        const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, any>;
        const keyOf = (s: string) =>
            JSON.parse(
                String(
                    callMocks["aws:secretsmanager/getSecretVersion:getSecretVersion"](
                        { secretId: contracts[s].identity.secretArn },
                        "ap-southeast-1",
                    ).secretString,
                ),
            );
        const text = JSON.stringify(spoke.resources.map((r) => [unwrapWire(r.inputs), unwrapWire(r.outputs)]));
        for (const s of ["hn1", "hcm1"]) {
            expect(text).not.toContain(keyOf(s).secretAccessKey);
            expect(text).not.toContain(keyOf(s).accessKeyId);
        }
        // The spoke reads no hub output holding credentials: its only StackReference is the contract read.
        expect(byType(spoke.resources, "pulumi:pulumi:StackReference").map((r) => r.name)).toEqual(["hub"]);
    });

    it("a spoke whose contract says roles-anywhere stops naming the key (the images lack the signing helper)", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:spokeIdentities"].hn1 = {
            mode: "roles-anywhere",
            caBundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        };
        const hub = await runRepoStack("hub-prod", { config: flatConfig(doc) });
        const err = await runRepoStack("spoke-hn1", { stackOutputs: { "hub-prod": { outputs: hub.outputs, secretOutputNames: [] } } }).then(
            () => undefined,
            (e) => e,
        );
        expect(err?.message).toMatch(
            /hub output spokeContracts.hn1.identity.mode: roles-anywhere needs the IAM Roles Anywhere signing helper/,
        );
    });
});
