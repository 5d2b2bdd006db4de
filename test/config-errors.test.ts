/**
 * Bad stack files as a new user writes them: each must be refused with the stack file and the key
 * to edit named, at the right place (the hub for a placement its spoke would refuse), and nothing may reach out/.
 * Model facts come from config/models.ts (the models' config.json values, cited there).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FAILED_BATCH_RETENTION_DAYS } from "../components/hub/ledger/failures";
import { LEDGER_LOG_RETENTION_DAYS } from "../components/hub/ledger/database";
import { ACCESS_LOG_MIN_RETENTION_DAYS, AccessLogsConfigSchema } from "../config/hub";
import { hubBucketName, hubBucketNameIssue } from "../lib/hub-bucket-names";
import * as YAML from "yaml";
import { ConfigError, editDistance, nearest } from "../config/errors";
import { type HubConfig, parseFlatStackConfig, parseStackConfig } from "../config/stack";
import { checkHubStackName } from "../programs/load";
import { checkSpokeRegistry } from "../programs/spoke-registry";
import { ownsOutDir } from "../tools/render";
import { readStackFile } from "../lib/stackfiles";
import { flatConfig, platformKeys, ROOT, runRepoStack, STACKS, stackConfigDoc, stackFile } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

/** The clock of these tests: every key in hub-prod is valid on this day. */
const NOW = new Date("2026-12-01T00:00:00Z");
const HF_TOKEN = "hf_" + "Q7pXk2Lm9Zt4Rv8Wn3Yb6Hc1Jd5Fg0Sa2Ue";
const AWS_KEY_ID = "AKIA" + "Z3Q7XK2LM9PT4RV8";
const SK_TOKEN = "sk-" + "proj-9fQ2xL7mZt4Rv8Wn3Yb6Hc1Jd5Fg0S";

function issuesOf(fn: () => unknown): { file: string; issues: string[] } {
    try {
        fn();
    } catch (e) {
        if (e instanceof ConfigError) return { file: e.stackFile, issues: e.issues.map((i) => `${i.key}: ${i.message}`) };
        throw e;
    }
    return { file: "", issues: [] };
}

/** A repo stack file's config, mutated, parsed the way the program loads it (flat map, namespaces and all). */
function refusal(stack: string, mutate: (d: Record<string, any>) => void, secretKeys: string[] = []) {
    const doc = structuredClone(stackConfigDoc(stack));
    mutate(doc);
    return issuesOf(() => parseFlatStackConfig(flatConfig(doc), `stacks/Pulumi.${stack}.yaml`, secretKeys, { now: NOW }));
}

describe("nearest-name suggestions", () => {
    it("edit distance and the typo threshold", () => {
        expect(editDistance("platfrom", "platform")).toBe(2);
        expect(nearest("platfrom", ["platform", "aws", "kubernetes", "pulumi"])).toBe("platform");
        expect(nearest("hostnam", ["hostname", "tlsSecretName"])).toBe("hostname");
        expect(nearest("zzz", ["platform", "aws"])).toBeUndefined();
    });
});

describe("bad stack files: refused naming the file and the key", () => {
    const cases: Array<[string, string, (d: Record<string, any>) => void, string, RegExp]> = [
        // Unknown namespaces and keys, with the nearest known name.
        [
            "typo in the config namespace",
            "spoke-hn1",
            (d) => {
                d["platfrom:serving"] = { grove: true };
            },
            "platfrom:serving",
            /unknown config namespace "platfrom"; did you mean "platform:serving"\?/,
        ],
        [
            "unrelated namespace",
            "spoke-hn1",
            (d) => {
                d["mycompany:owner"] = "x";
            },
            "mycompany:owner",
            /unknown config namespace "mycompany" \(known: platform, aws, kubernetes, pulumi\)/,
        ],
        [
            "typo in a top-level key",
            "spoke-hn1",
            (d) => {
                d["platform:gatway"] = {};
            },
            "platform:gatway",
            /did you mean "gateway"\?/,
        ],
        [
            "typo in a key inside an object",
            "spoke-hn1",
            (d) => {
                d["platform:gateway"] = { listener: { hostnam: "api.example.com" } };
            },
            "platform:gateway.listener.hostnam",
            /did you mean "hostname"\?/,
        ],
        [
            "typo in a key of a union member",
            "spoke-sg1",
            (d) => {
                d["platform:cluster"].vpc.availabilityZone = ["ap-southeast-1a"];
            },
            "platform:cluster.vpc.availabilityZone",
            /did you mean "availabilityZones"\?/,
        ],
        [
            "typo in a hub endpoint key",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][1].maxModelLength = 8192;
            },
            "platform:endpoints[1].maxModelLength",
            /did you mean "maxModelLen"\?/,
        ],
        // Rollouts (config/rollout.ts): endpoints[3] is hcm1/qwen3-32b, which ships with one.
        [
            "a rollout without a gate",
            "hub-prod",
            (d) => {
                delete d["platform:endpoints"][3].rollout.gate;
            },
            "platform:endpoints[3].rollout.gate",
            /missing: a rollout without a gate is refused/,
        ],
        [
            "rollout steps that do not end at 100",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].rollout.steps = [10, 50];
                delete d["platform:endpoints"][3].rollout.state;
            },
            "platform:endpoints[3].rollout.steps",
            /must end at 100 \(the last step moves all traffic to the target\), got 50/,
        ],
        [
            "rollout steps that do not increase",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].rollout.steps = [10, 10, 100];
            },
            "platform:endpoints[3].rollout.steps[1]",
            /10 is not above the step before it \(10\): steps must be strictly increasing/,
        ],
        [
            "a rollout gate reading metrics sooner than the ingest delay allows",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].rollout.gate.ingestDelaySeconds = 30;
            },
            "platform:endpoints[3].rollout.gate.ingestDelaySeconds",
            /90/,
        ],
        [
            "a rollout gate without the promotion soak (the 100% step could never be judged)",
            "hub-prod",
            (d) => {
                delete d["platform:endpoints"][3].rollout.gate.promotion;
            },
            "platform:endpoints[3].rollout.gate.promotion",
            /missing: at the 100% step the source carries no traffic, so the rollout completes only after the target alone passes a soak/,
        ],
        [
            "a rollout added with a target too small ever to carry the 100% step (refused when written)",
            "hub-prod",
            (d) => {
                // The source runs 1 prefill + 1 decode replica of 2 GPUs; the target aggregated on 2 GPUs.
                d["platform:endpoints"][3].rollout.target.topology = { mode: "aggregated", workers: { replicas: 1, gpusPerWorker: 2 } };
                delete d["platform:endpoints"][3].rollout.state;
            },
            "platform:endpoints[3].rollout.target.topology",
            /the target v2-qwen3-32b can never carry the last step \(100%\): its aggregated workers have 2 GPUs, the source's disaggregated workers 4 .* size target.topology for 100% before the rollout starts/,
        ],
        [
            "a rollout on a model another endpoint of the spoke also serves",
            "hub-prod",
            (d) => {
                d["platform:endpoints"].push({ ...d["platform:endpoints"][3], name: "qwen-extra", rollout: undefined });
                delete d["platform:endpoints"][d["platform:endpoints"].length - 1].rollout;
            },
            "platform:endpoints[3].rollout",
            /endpoints\[6\] \(qwen-extra\) serves Qwen\/Qwen3-32B on spoke hcm1 too/,
        ],
        [
            "a graph whose name begins with another graph's on the same spoke (one frontend would discover both)",
            "hub-prod",
            (d) => {
                const { fallback: _, ...llama } = d["platform:endpoints"][0];
                d["platform:endpoints"].push({ ...llama, name: "llama-70b-fp8" });
            },
            "platform:endpoints[6].name",
            /graph llama-70b-fp8 on spoke hn1 begins with graph llama-70b \(endpoints\[0\]\)/,
        ],
        // Model revisions (config/endpoint.ts ModelRevisionSchema, model-revision-engine).
        [
            "a model revision that is no Hugging Face revision",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].modelRevision = "../main";
            },
            "platform:endpoints[3].modelRevision",
            /must be a Hugging Face revision: a 40-hex commit SHA or a tag\/branch name/,
        ],
        [
            "an abbreviated commit SHA as a rollout target's model revision",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].rollout.target = { modelRevision: "0a1b2c3d" };
            },
            "platform:endpoints[3].rollout.target.modelRevision",
            /abbreviated commit SHA is not resolved by huggingface_hub: give all 40 hex digits/,
        ],
        [
            "a model revision on an engine whose worker cannot be shown to honour it",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].rollout.target = {
                    engine: "trtllm",
                    modelRevision: "a".repeat(40),
                    tokenizerMatchesMain: "a".repeat(40),
                };
                d["platform:endpoints"][3].kvPool = { kind: "none" };
            },
            "platform:endpoints[3].rollout.target.modelRevision",
            /engine trtllm: Dynamo's TensorRT-LLM worker declares --revision in its diffusion argument group only.*model-revision-engine/,
        ],
        [
            "a model revision whose tokenizer nobody checked against main's (the frontend's)",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].modelRevision = "b".repeat(40);
                d["platform:endpoints"][3].rollout.target.tokenizerMatchesMain = "b".repeat(40);
            },
            "platform:endpoints[3].modelRevision",
            /the Dynamo frontend tokenizes with the model card's files, which Dynamo fetches at the repository's main.*set tokenizerMatchesMain to the same revision/,
        ],
        [
            "a rollout target changing the model revision that inherits the source's tokenizer check",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][3].modelRevision = "b".repeat(40);
                d["platform:endpoints"][3].tokenizerMatchesMain = "b".repeat(40);
                d["platform:endpoints"][3].rollout.target = { modelRevision: "c".repeat(40) };
            },
            "platform:endpoints[3].rollout.target.modelRevision",
            /set tokenizerMatchesMain to the same revision \(it names b{40}\)/,
        ],
        // Credentials in plain config.
        [
            "a Hugging Face token where a Secret's name goes",
            "spoke-hn1",
            (d) => {
                d["platform:serving"] = { hfTokenSecret: HF_TOKEN };
            },
            "platform:serving.hfTokenSecret",
            /looks like a Hugging Face token.*pulumi config set --secret platform:serving/,
        ],
        [
            "an AWS access key pasted into a URL",
            "spoke-hn1",
            (d) => {
                d["platform:serving"] = { prometheusEndpoint: `http://${AWS_KEY_ID}@prom:9090` };
            },
            "platform:serving.prometheusEndpoint",
            /looks like an AWS access key id/,
        ],
        [
            "a PEM key where the TLS Secret's name goes",
            "spoke-hn1",
            (d) => {
                d["platform:gateway"] = { listener: { tlsSecretName: "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" } };
            },
            "platform:gateway.listener.tlsSecretName",
            /looks like a PEM private key/,
        ],
        [
            "an sk- token as an API key id",
            "hub-prod",
            (d) => {
                d["platform:apiKeys"][0].id = SK_TOKEN;
            },
            "platform:apiKeys[0].id",
            /looks like an API secret key \(sk-\.\.\.\)/,
        ],
        [
            "a random string in a key named like a token",
            "spoke-hn1",
            (d) => {
                d["platform:serving"] = { hfTokenSecret: "Zq8vT2xK9mL4pR7wN3bY6hC1" };
            },
            "platform:serving.hfTokenSecret",
            /looks like a random secret value/,
        ],
        [
            "the AWS provider's secret key in plain text",
            "spoke-sg1",
            (d) => {
                d["aws:secretKey"] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
            },
            "aws:secretKey",
            /must be a Pulumi secret, not plain text.*pulumi config set --secret aws:secretKey/,
        ],
        // Refusals of what cannot work.
        [
            "an expired API key",
            "hub-prod",
            (d) => {
                d["platform:apiKeys"][4].expiresAt = "2026-11-30T00:00:00Z";
            },
            "platform:apiKeys[4].expiresAt",
            /API key "globex-research-dev" expired at 2026-11-30T00:00:00Z/,
        ],
        [
            "key rps above its team's",
            "hub-prod",
            (d) => {
                d["platform:apiKeys"][0].limits.requestsPerSecond = 60;
            },
            "platform:apiKeys[0].limits.requestsPerSecond",
            /60 is above team "acme\/search"'s 50 \(platform:tenants\[0\]\.teams\[0\]\.limits\.requestsPerSecond\)/,
        ],
        [
            "key tokens above its team's",
            "hub-prod",
            (d) => {
                d["platform:apiKeys"][0].limits.tokensPerWindow = 9000000;
            },
            "platform:apiKeys[0].limits.tokensPerWindow",
            /9000000 per 60 s is above team "acme\/search"'s 8000000 per 60 s/,
        ],
        [
            "key concurrency above a model's",
            "hub-prod",
            (d) => {
                d["platform:tenants"][0].teams[0].limits.concurrentRequests = 768;
                d["platform:apiKeys"][0].limits.concurrentRequests = 600;
            },
            "platform:apiKeys[0].limits.concurrentRequests",
            /600 is above model "meta-llama\/Llama-3.3-70B-Instruct"'s 512 \(platform:models\[0\]\.limits\.concurrentRequests\)/,
        ],
        [
            "team above every model",
            "hub-prod",
            (d) => {
                d["platform:tenants"][1].teams[0].limits.requestsPerSecond = 500;
            },
            "platform:tenants[1].teams[0].limits.requestsPerSecond",
            /500 is above every model's limit \(highest: 300 at platform:models\[1\]/,
        ],
        // Llama 3.3 70B: 64 attention heads, 8 KV heads (config.json); 64 % 3 != 0.
        [
            "a tensor-parallel size the model cannot split into",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][2].topology.workers.gpusPerWorker = 3;
            },
            "platform:endpoints[2].topology.workers.gpusPerWorker",
            /64 attention heads are not divisible by tensor-parallel size 3/,
        ],
        // Qwen3-32B: max_position_embeddings 40960 (config.json, rope_scaling null).
        [
            "a context length beyond the model's",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][1].maxModelLen = 131072;
            },
            "platform:endpoints[1].maxModelLen",
            /131072 tokens is beyond Qwen\/Qwen3-32B's max_position_embeddings 40960/,
        ],
        [
            "a planner budget below what the endpoint uses",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][0].planner.maxGpuBudget = 6;
            },
            "platform:endpoints[0].planner.maxGpuBudget",
            /6 GPUs is below the 8 the endpoint already uses/,
        ],
        [
            "an EKS API endpoint open to the internet",
            "spoke-sg1",
            (d) => {
                d["platform:cluster"].publicAccessCidrs = ["0.0.0.0/0"];
            },
            "platform:cluster.publicAccessCidrs[0]",
            /0\.0\.0\.0\/0 opens the cluster's Kubernetes API to the whole internet.*publicAccessFromAnywhere: true/,
        ],
        // The right key named.
        [
            "replicas raised on endpoints[0]",
            "hub-prod",
            (d) => {
                d["platform:endpoints"][0].topology.decode.replicas = 4;
            },
            "platform:endpoints[0].topology",
            /spoke "hn1" has 16 GPUs but its endpoints need 24 \(endpoints\[0\] llama-70b: 20, endpoints\[1\] qwen3-32b: 4\)/,
        ],
        [
            "a supernet too small for 8 rails",
            "spoke-hn1",
            (d) => {
                d["platform:backend"].railSupernet = "10.64.0.0/18";
            },
            "platform:backend.railSupernet",
            /10\.64\.0\.0\/18 holds 4 \/20 rail subnets but the node profiles have 8 rails: use a \/17 or larger supernet/,
        ],
        [
            "rail prefix shorter than the supernet",
            "spoke-hn1",
            (d) => {
                d["platform:backend"].railPrefixLength = 16;
                d["platform:backend"].railSupernet = "10.64.0.0/17";
            },
            "platform:backend.railPrefixLength",
            /\/16 rail subnets are larger than the \/17/,
        ],
        [
            "access logs kept less than 90 days",
            "hub-prod",
            (d) => {
                d["platform:accessLogs"] = { retentionDays: 1 };
            },
            "platform:accessLogs.retentionDays",
            /must be at least 90 days/,
        ],
        [
            "an EKS spoke with fabric: infiniband",
            "spoke-sg1",
            (d) => {
                d["platform:backend"] = { fabric: "infiniband" };
            },
            "platform:backend.fabric",
            /EKS spokes use EFA/,
        ],
    ];

    it.each(cases)("%s", (_title, stack, mutate, key, message) => {
        const r = refusal(stack, mutate);
        expect(r.file).toBe(`stacks/Pulumi.${stack}.yaml`);
        expect(
            r.issues.find((i) => i.startsWith(`${key}: `) && message.test(i)),
            `issues were:\n${r.issues.join("\n")}`,
        ).toBeDefined();
    });

    it("a credential is never repeated in the message", () => {
        for (const [stack, mutate] of [
            [
                "spoke-hn1",
                (d: Record<string, any>) => {
                    d["platform:serving"] = { hfTokenSecret: HF_TOKEN };
                },
            ],
            [
                "hub-prod",
                (d: Record<string, any>) => {
                    d["platform:apiKeys"][0].id = SK_TOKEN;
                },
            ],
        ] as const) {
            const r = refusal(stack, mutate);
            expect(r.issues.length).toBeGreaterThan(0);
            expect(r.issues.join("\n")).not.toContain(HF_TOKEN);
            expect(r.issues.join("\n")).not.toContain(SK_TOKEN);
        }
    });

    it("compliant variants pass: a Secret's name, a secure provider key, an explicit opt-in, the wrong-endpoint case blames only endpoints[0]", () => {
        expect(
            refusal("spoke-hn1", (d) => {
                d["platform:serving"] = { hfTokenSecret: "hf-token" };
                d["platform:gateway"] = { listener: { tlsSecretName: "api-tls" } };
            }).issues,
        ).toEqual([]);
        expect(
            refusal(
                "spoke-sg1",
                (d) => {
                    d["aws:secretKey"] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
                },
                ["aws:secretKey"],
            ).issues,
        ).toEqual([]);
        expect(
            refusal("spoke-sg1", (d) => {
                d["platform:cluster"].publicAccessCidrs = ["0.0.0.0/0"];
                d["platform:cluster"].publicAccessFromAnywhere = true;
            }).issues,
        ).toEqual([]);
        expect(refusal("hub-prod", () => undefined).issues).toEqual([]);
        const r = refusal("hub-prod", (d) => {
            d["platform:endpoints"][0].topology.decode.replicas = 4;
        });
        expect(r.issues.filter((i) => i.startsWith("platform:endpoints[1]"))).toEqual([]);
        // Neither endpoint alone exceeds the spoke: both are named, the user decides which to shrink.
        const both = refusal("hub-prod", (d) => {
            d["platform:endpoints"][1].topology.prefill.replicas = 5;
        });
        expect(both.issues.map((i) => i.slice(0, i.indexOf(": ")))).toEqual([
            "platform:endpoints[0].topology",
            "platform:endpoints[1].topology",
        ]);
        expect(both.issues[0]).toMatch(/need 20 \(endpoints\[0\] llama-70b: 8, endpoints\[1\] qwen3-32b: 12\); this endpoint uses 8$/);
    });

    it("an EKS spoke with fabric: infiniband is not reported as a missing railSupernet", () => {
        const r = refusal("spoke-sg1", (d) => {
            d["platform:backend"] = { fabric: "infiniband" };
        });
        expect(r.issues.filter((i) => i.includes("railSupernet:"))).toEqual([]);
    });
});

describe("platform:accessLogs.retentionDays: its floor against the ledger's retentions", () => {
    it("is at least the ledger's log retention and longer than a failed batch is kept; 90 is accepted", () => {
        expect(ACCESS_LOG_MIN_RETENTION_DAYS).toBeGreaterThanOrEqual(LEDGER_LOG_RETENTION_DAYS);
        expect(ACCESS_LOG_MIN_RETENTION_DAYS).toBeGreaterThan(FAILED_BATCH_RETENTION_DAYS);
        expect(AccessLogsConfigSchema.parse({ retentionDays: ACCESS_LOG_MIN_RETENTION_DAYS }).retentionDays).toBe(90);
        expect(AccessLogsConfigSchema.safeParse({ retentionDays: ACCESS_LOG_MIN_RETENTION_DAYS - 1 }).success).toBe(false);
    });
});

describe("hub bucket names longer than S3's 63 characters (platform:namePrefix with aws:region)", () => {
    it("each fixed bucket name is checked; the longest (the failure bucket) decides", () => {
        expect(hubBucketNameIssue("platform-stage", "ap-southeast-1")).toBeUndefined();
        expect(hubBucketName("failure", "platform-stage", "123456789012", "ap-southeast-1")).toHaveLength(63);
        expect(hubBucketNameIssue("platform-stage", "us-isof-south-1")).toMatch(
            /^the failure bucket <namePrefix>-usage-failed-batches-<account>-<region> would be 64 characters with platform:namePrefix "platform-stage" and aws:region "us-isof-south-1", over S3's 63: shorten platform:namePrefix by 1$/,
        );
        // The other two, with a prefix just short enough for the failure bucket, still fit.
        for (const kind of ["policy", "accessLogs"] as const)
            expect(hubBucketName(kind, "platform-stag", "123456789012", "us-isof-south-1").length).toBeLessThanOrEqual(63);
    });

    it("the program refuses it before creating anything, naming the stack file, platform:namePrefix and aws:region", async () => {
        const doc = structuredClone(stackConfigDoc("hub-prod"));
        doc["platform:namePrefix"] = "platform-stage";
        // Every region the pinned AWS SDK lists in partition aws fits; a longer one newer than the SDK, acknowledged
        // (lib/aws-partition.ts), does not.
        doc["aws:region"] = "ap-southeast-10";
        doc["platform:unlistedAwsRegions"] = ["ap-southeast-10"];
        const err = await runRepoStack("hub-prod", { config: flatConfig(doc) }).then(
            () => undefined,
            (e) => e,
        );
        expect(err).toBeInstanceOf(ConfigError);
        expect((err as ConfigError).stackFile).toMatch(/stacks\/Pulumi\.hub-prod\.yaml$/);
        expect((err as ConfigError).issues.map((i) => i.key)).toEqual(["platform:namePrefix"]);
        expect((err as ConfigError).message).toMatch(/aws:region "ap-southeast-10"/);
    });
});

describe("a hub stack name typo in a spoke", () => {
    it("is an error naming platform:spoke.hubStack and the known hub stacks", () => {
        const r = issuesOf(() => checkHubStackName("organization/platform/hub-prd", path.join(STACKS, "Pulumi.spoke-hn1.yaml")));
        expect(r.issues).toHaveLength(1);
        expect(r.issues[0]).toMatch(
            /^platform:spoke\.hubStack: "organization\/platform\/hub-prd" names hub stack "hub-prd", which has no hub stack file in .*; did you mean "organization\/platform\/hub-prod"\? \(known hub stacks: hub-prod\)$/,
        );
        expect(() => checkHubStackName("organization/platform/hub-prod", path.join(STACKS, "Pulumi.spoke-hn1.yaml"))).not.toThrow();
    });
    it("the program throws that ConfigError, not a StackReference stack trace", async () => {
        const doc = structuredClone(stackConfigDoc("spoke-hn1"));
        doc["platform:spoke"].hubStack = "organization/platform/hub-prd";
        const err = await runRepoStack("spoke-hn1", { config: flatConfig(doc) }).then(
            () => undefined,
            (e) => e,
        );
        expect(err).toBeInstanceOf(ConfigError);
        expect((err as ConfigError).issues.map((i) => i.key)).toEqual(["platform:spoke.hubStack"]);
    });
});

describe("a placement the hub accepts but its spoke refuses is a hub error on the hub file's key", () => {
    const hubFile = path.join(STACKS, "Pulumi.hub-prod.yaml");
    const hubIssues = (mutate: (d: Record<string, any>) => void) => {
        const d = structuredClone(stackConfigDoc("hub-prod"));
        mutate(d);
        const c = parseStackConfig(platformKeys(d), "stacks/Pulumi.hub-prod.yaml", { now: NOW });
        if (c.role !== "hub") throw new Error("not a hub");
        return issuesOf(() => checkSpokeRegistry(c.hub as HubConfig, hubFile));
    };
    it("the repo's placement passes", () => {
        expect(hubIssues(() => undefined).issues).toEqual([]);
    });
    it.each([
        // Equal TP on the pool, so only the EFA refusal is at stake (the hub refuses unequal TP on a Mooncake pool on its own).
        [
            "Mooncake on an EFA spoke",
            (d: Record<string, any>) => {
                const e = d["platform:endpoints"][4];
                e.kvPool = { kind: "mooncake", segmentSizeGiB: 256, storeReplicas: 2 };
                e.topology.decode.gpusPerWorker = e.topology.prefill.gpusPerWorker;
            },
            "platform:endpoints[4].kvPool",
            /pool "h200" is EFA: Mooncake's EFA transport needs a build with USE_EFA.*\(spoke stacks\/Pulumi\.spoke-sg1\.yaml would refuse this placement\)/,
        ],
        [
            "more Mooncake stores than nodes",
            (d: Record<string, any>) => {
                d["platform:endpoints"][2].kvPool.storeReplicas = 3;
            },
            "platform:endpoints[2].kvPool.storeReplicas",
            /3 Mooncake stores on pool "h200" with 2 node\(s\); at most one store per node \(spoke stacks\/Pulumi\.spoke-hcm1\.yaml would refuse/,
        ],
        [
            "an engine without the pool's shared-KV integration",
            (d: Record<string, any>) => {
                // Qwen on hn1 (one declared KV sharing group, so the salt rule holds) on TRT-LLM, with no priority class
                // above another (TRT-LLM ignores the request priority; config/serving-policy.ts refuses it otherwise).
                d["platform:endpoints"][1].engine = "trtllm";
                d["platform:servingClasses"].priority = { interactive: 0, standard: 0, batch: 0 };
            },
            "platform:endpoints[1].kvPool",
            /engine trtllm has no Mooncake shared-pool integration/,
        ],
    ] as const)("%s", (_t, mutate, key, message) => {
        const r = hubIssues(mutate);
        expect(r.file).toBe(hubFile);
        expect(
            r.issues.find((i) => i.startsWith(`${key}: `) && message.test(i)),
            `issues were:\n${r.issues.join("\n")}`,
        ).toBeDefined();
    });
});

describe("a spoke-file problem with the hub's placement is reported on the hub's endpoint, naming the spoke file and key", () => {
    let dir: string;
    beforeEach(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "placement-"));
        for (const f of fs.readdirSync(STACKS)) fs.copyFileSync(path.join(STACKS, f), path.join(dir, f));
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
    it("two GPU pools and no platform:serving.endpointPools entry for a placed endpoint", () => {
        const file = path.join(dir, "Pulumi.spoke-hcm1.yaml");
        const doc = YAML.parse(fs.readFileSync(file, "utf8"));
        const pools = doc.config["platform:nodePools"];
        pools.push({ ...pools[0], name: "h200-b", nodes: ["hcm1-gpu-03", "hcm1-gpu-04"] });
        fs.writeFileSync(file, YAML.stringify(doc));
        const c = parseStackConfig(platformKeys(stackConfigDoc("hub-prod")), "hub-prod", { now: NOW });
        if (c.role !== "hub") throw new Error("not a hub");
        const r = issuesOf(() => checkSpokeRegistry(c.hub, path.join(dir, "Pulumi.hub-prod.yaml")));
        expect(r.issues).toContain(
            `platform:endpoints[2]: ${path.relative(process.cwd(), file)} platform:serving.endpointPools.llama-70b: endpoint "llama-70b" is placed on this spoke but the spoke has 2 node pools (h200, h200-b); say which one runs it`,
        );
    });
});

describe("render: out/ of a real stack is left alone, and never holds a credential", () => {
    let tmp: string;
    beforeEach(() => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "config-errors-"));
    });
    afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

    const writeStack = (name: string, mutate: (d: Record<string, any>) => void, from = name) => {
        const doc = YAML.parse(fs.readFileSync(path.join(STACKS, `Pulumi.${from}.yaml`), "utf8"));
        mutate(doc.config);
        const file = path.join(tmp, "elsewhere", `Pulumi.${name}.yaml`);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, YAML.stringify(doc));
        return file;
    };
    const filesUnder = (dir: string): string[] =>
        fs.existsSync(dir)
            ? fs
                  .readdirSync(dir, { withFileTypes: true })
                  .flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]))
            : [];

    it("ownsOutDir: only stacks/Pulumi.<name>.yaml owns out/<name>", () => {
        expect(ownsOutDir(stackFile("spoke-hn1"))).toBe(true);
        expect(ownsOutDir(readStackFile(writeStack("spoke-hn1", () => undefined)))).toBe(false);
    });

    it("a bad file named like a real stack keeps that stack's out/; a planted token is refused and lands nowhere", async () => {
        const out = path.join(tmp, "out");
        fs.mkdirSync(path.join(out, "hub-prod"), { recursive: true });
        fs.writeFileSync(path.join(out, "hub-prod", "manifests.yaml"), "# the good render\n");
        const bad = writeStack("hub-prod", (c) => {
            c["platform:apiKeys"][0].team = 7;
        });
        const planted = writeStack(
            "hub-x",
            (c) => {
                c["platform:models"][0].id = HF_TOKEN;
            },
            "hub-prod",
        );
        const r = spawnSync(
            process.execPath,
            ["-r", ESBUILD_LOADER, "tools/render.ts", "--config", bad, "--config", planted, "--out", out],
            { cwd: ROOT, encoding: "utf8", env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true" }, timeout: 120_000 },
        );
        expect(r.status).toBe(1);
        expect(r.stdout).toContain(`${bad}: invalid stack configuration\n  - platform:apiKeys[0].team:`);
        expect(r.stdout).toMatch(/platform:models\[0\]\.id: looks like a Hugging Face token/);
        expect(fs.readFileSync(path.join(out, "hub-prod", "manifests.yaml"), "utf8")).toBe("# the good render\n");
        expect(fs.existsSync(path.join(out, "hub-x"))).toBe(false);
        expect(r.stdout + r.stderr).not.toContain(HF_TOKEN);
        for (const f of filesUnder(out)) expect(fs.readFileSync(f, "utf8")).not.toContain(HF_TOKEN);
    });
});

describe("a YAML mistake is reported at the line to fix", () => {
    let tmp: string;
    beforeEach(() => {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "yaml-line-"));
    });
    afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const errorOf = (edit: (lines: string[]) => void): string => {
        const lines = fs.readFileSync(path.join(STACKS, "Pulumi.spoke-hn1.yaml"), "utf8").split("\n");
        edit(lines);
        const file = path.join(tmp, "Pulumi.spoke-x.yaml");
        fs.writeFileSync(file, lines.join("\n"));
        try {
            readStackFile(file, "stacks/Pulumi.spoke-x.yaml");
        } catch (e) {
            return (e as Error).message;
        }
        throw new Error("no error");
    };
    const lineOf = (pattern: RegExp) =>
        fs
            .readFileSync(path.join(STACKS, "Pulumi.spoke-hn1.yaml"), "utf8")
            .split("\n")
            .findIndex((l) => pattern.test(l));

    it("an unclosed [ is reported on its own line, not where the parser gave up", () => {
        const i = lineOf(/^\s+nodes: \[/);
        const msg = errorOf((l) => {
            l[i] = l[i].replace("]", "");
        });
        expect(msg).toMatch(new RegExp(`^stacks/Pulumi.spoke-x.yaml: not valid YAML: line ${i + 1}, column \\d+: Flow sequence`));
        expect(msg).toContain(`  ${i + 1} |       nodes: [hn1-gpu-01, hn1-gpu-02 `);
    });

    it("an unclosed quote is reported where it opens, not at the end of the file", () => {
        const i = lineOf(/^\s+kubeconfigContext:/);
        const msg = errorOf((l) => {
            l[i] = l[i].replace("kubeconfigContext: ", 'kubeconfigContext: "');
        });
        expect(msg).toMatch(
            new RegExp(
                `not valid YAML: line ${i + 1}, column 24: Missing closing "quote\\n\\n  ${i + 1} \\|     kubeconfigContext: "hn1-admin`,
            ),
        );
    });

    it("a missing colon is reported on its line", () => {
        const i = lineOf(/^\s+region: vn-hanoi-1/);
        expect(
            errorOf((l) => {
                l[i] = l[i].replace("region:", "region");
            }),
        ).toMatch(new RegExp(`not valid YAML: line ${i + 1}, column 5: `));
    });
});
