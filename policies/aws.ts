import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { dependencyOfType, LABELS, ofType } from "./lib/resources";
import { peek } from "./lib/unknown";

/**
 * AWS side of the guard: a spoke only touches its own data, no long-lived key where a role would do,
 * state that an ordinary `pulumi up` cannot lose, node credentials out of pods' reach, TLS-only ledger database.
 * The pack stands alone: type tokens and names are repeated here (the program's own are in components/hub and
 * components/spoke).
 *
 * What the analyzer shows a policy: a resource's props and `opts.protect` (with `deleteBeforeReplace`); not
 * `retainOnDelete` (@pulumi/policy 1.21 server.js `getResourceOptions`), which `out/<stack>/resources.json` records
 * and test/program.test.ts checks instead.
 */

/** Pulumi type tokens these policies read. */
export const AWS_TYPES = {
    accessKey: "aws:iam/accessKey:AccessKey",
    user: "aws:iam/user:User",
    role: "aws:iam/role:Role",
    eksCluster: "aws:eks/cluster:Cluster",
    nodeGroup: "aws:eks/nodeGroup:NodeGroup",
    launchTemplate: "aws:ec2/launchTemplate:LaunchTemplate",
    rdsCluster: "aws:rds/cluster:Cluster",
    rdsClusterParameterGroup: "aws:rds/clusterParameterGroup:ClusterParameterGroup",
    k8sSecret: "kubernetes:core/v1:Secret",
    stack: "pulumi:pulumi:Stack",
} as const;

/**
 * Resource types whose loss or replacement loses data or trust: the ledger (Aurora cluster and instances), KMS
 * keys (a deleted key makes every retained bundle, ACK and snapshot unreadable), the policy bucket (audit trail),
 * the usage streams (events not yet ingested), the EKS cluster (every workload and volume).
 */
export const STATEFUL_TYPES = [
    "aws:rds/cluster:Cluster",
    "aws:rds/clusterInstance:ClusterInstance",
    "aws:kms/key:Key",
    "aws:s3/bucket:Bucket",
    "aws:kinesis/stream:Stream",
    "aws:eks/cluster:Cluster",
    "aws:dynamodb/table:Table",
] as const;

/** Tag the hub puts on everything of one spoke's identity (components/hub/SpokeIdentity.ts). */
export const SPOKE_TAG = "platform:spoke";
/** EKS Pod Identity's service principal (docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html). */
export const POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com";

function trustPrincipals(role: PolicyResource): string[] {
    let doc: any;
    try {
        doc = typeof role.props.assumeRolePolicy === "string" ? JSON.parse(role.props.assumeRolePolicy) : role.props.assumeRolePolicy;
    } catch {
        return [];
    }
    return [doc?.Statement ?? []].flat().flatMap((s: any) => [s?.Principal?.Service ?? [], s?.Principal?.AWS ?? []].flat());
}

/**
 * EKS spokes use EKS Pod Identity (or IRSA), never an IAM user key: in a stack with an EKS cluster, no IAM
 * access key and no Kubernetes Secret carrying an AWS secret access key; on the hub, no IAM user for a spoke whose
 * role is trusted by Pod Identity (an EKS spoke).
 */
export const awsEksNoAccessKeys: StackValidationPolicy = {
    name: "aws-eks-spoke-no-access-keys",
    description: "EKS spokes get AWS access from EKS Pod Identity or IRSA, never from a long-lived IAM access key.",
    remediationSteps:
        "Use platform:spokeIdentities.<spoke>.mode: pod-identity (the EKS default); remove aws.iam.AccessKey and any credentials-file Secret from the EKS spoke.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const rs = args.resources;
        if (ofType(rs, AWS_TYPES.eksCluster).length > 0) {
            for (const k of ofType(rs, AWS_TYPES.accessKey))
                report(
                    `IAM access key ${k.name} in an EKS spoke stack: EKS workloads get their role from EKS Pod Identity or IRSA, never a long-lived key.`,
                    k.urn,
                );
            // A Secret whose content is still being computed (a new stack's preview) gets it from another resource of
            // this stack; the only resource that mints an AWS key is aws.iam.AccessKey, refused just above. So the
            // content is judged where known and the key's source where not.
            for (const s of ofType(rs, AWS_TYPES.k8sSecret)) {
                const content = peek(() => JSON.stringify(s.props.stringData ?? {}) + JSON.stringify(s.props.data ?? {}));
                if (content.known && /aws_secret_access_key|secretAccessKey/.test(content.value))
                    report(
                        `Kubernetes Secret ${s.name} carries an AWS secret access key in an EKS spoke: bind the service account to its role with EKS Pod Identity instead.`,
                        s.urn,
                    );
            }
        }
        const podIdentitySpokes = new Set(
            ofType(rs, AWS_TYPES.role)
                .filter((r) => r.props.tags?.[SPOKE_TAG] && trustPrincipals(r).includes(POD_IDENTITY_PRINCIPAL))
                .map((r) => String(r.props.tags[SPOKE_TAG])),
        );
        for (const u of ofType(rs, AWS_TYPES.user)) {
            const spoke = u.props.tags?.[SPOKE_TAG];
            if (spoke && podIdentitySpokes.has(String(spoke)))
                report(
                    `IAM user ${u.name} for EKS spoke ${spoke}, whose role is trusted by EKS Pod Identity: an EKS spoke needs no user and no key.`,
                    u.urn,
                );
        }
    },
};

/** A tenant's API key as the hub mints it (components/hub/ApiKeys.ts: `sk-h200-` + 48 alphanumerics). */
export const PLATFORM_API_KEY = /sk-h200-[0-9A-Za-z]{48}(?![0-9A-Za-z])/;

/** Field names and value shapes that are AWS credentials or private keys. */
const CREDENTIAL_KEYS = /^(secretAccessKey|aws_secret_access_key|sessionToken|aws_session_token|privateKey)$/i;
const CREDENTIAL_VALUES: Array<[RegExp, string]> = [
    [/\b(AKIA|ASIA)[0-9A-Z]{16}\b/, "an AWS access key id"],
    // The platform's own API keys: prefix and length from components/hub/ApiKeys.ts (API_KEY_PREFIX, API_KEY_RANDOM_LENGTH).
    [PLATFORM_API_KEY, "a platform API key"],
    [/-----BEGIN (RSA |EC |OPENSSH |ENCRYPTED )?PRIVATE KEY-----/, "a private key"],
];

/**
 * Pure: where in `value` a credential is (`path: what`), for the no-credentials-in-outputs policy. A field named like
 * a credential is one whether or not its value is known yet; a value is scanned wherever it is known. A value still
 * being computed (a new stack's preview: the outputs of resources not created yet) is read with `peek` and left to the
 * scan of the same policy at `up`, when every output is known and the update is still refused before it completes.
 */
export function findCredentials(value: unknown, path = ""): string[] {
    if (typeof value === "string")
        return CREDENTIAL_VALUES.filter(([re]) => re.test(value)).map(([, what]) => `${path || "(value)"}: ${what}`);
    if (Array.isArray(value))
        return value.flatMap((_, i) => {
            const v = peek(() => value[i]);
            return v.known ? findCredentials(v.value, `${path}[${i}]`) : [];
        });
    if (value && typeof value === "object") {
        return Object.keys(value as Record<string, unknown>).flatMap((k) => {
            const p = path ? `${path}.${k}` : k;
            if (CREDENTIAL_KEYS.test(k)) return [`${p}: a credential field`];
            const v = peek(() => (value as Record<string, unknown>)[k]);
            return v.known ? findCredentials(v.value, p) : [];
        });
    }
    return [];
}

/**
 * No credential in stack outputs: any stack that reads this one through a StackReference (a spoke reads the whole
 * hub) would hold it, secret or not. Credentials travel per spoke (a key-slot secret only that spoke's deployer may
 * read), never in an output.
 */
export const awsNoCredentialOutputs: StackValidationPolicy = {
    name: "aws-no-credentials-in-outputs",
    description: "Stack outputs carry no AWS credential or private key: every StackReference reader would get it.",
    remediationSteps:
        "Deliver the credential to the one principal that needs it (components/hub/SpokeIdentity.ts writes a per-spoke Secrets Manager secret) and export only its ARN.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        for (const s of ofType(args.resources, AWS_TYPES.stack)) {
            const props = peek(() => s.props);
            if (!props.known) continue;
            for (const where of findCredentials(props.value))
                report(
                    `stack output ${where}: outputs are readable by every StackReference; deliver credentials per consumer instead.`,
                    s.urn,
                );
        }
    },
};

/**
 * Stateful resources are protected: `protect: true`, so no ordinary `up` deletes or replaces them (a replaced
 * ledger cluster is a new, empty one; a deleted KMS key makes retained bundles unreadable after its window).
 */
export const awsStatefulProtected: ResourceValidationPolicy = {
    name: "aws-stateful-protected",
    description:
        "Ledger database, KMS keys, the policy bucket, usage streams and EKS clusters must be protected (protect: true) and retained on delete.",
    remediationSteps:
        "Create them with { protect: true, retainOnDelete: true } (components/hub/UsageLedger.ts, PolicyStore.ts, components/spoke/EksCluster.ts).",
    enforcementLevel: "mandatory",
    validateResource: (args, report) => {
        if (!(STATEFUL_TYPES as readonly string[]).includes(args.type)) return;
        if (!args.opts?.protect)
            report(
                `${args.type} ${args.name} is not protected: an ordinary \`pulumi up\` may delete or replace it (set protect: true and retainOnDelete: true).`,
            );
    },
};

/** Node groups that run GPUs: an EKS accelerated (NVIDIA) AMI or the EFA fabric label. */
function isGpuGroup(g: PolicyResource): boolean {
    return /NVIDIA/.test(String(g.props.amiType ?? "")) || g.props.labels?.[LABELS.fabric] === "efa";
}

/**
 * IMDSv2 with a response hop limit of 1 on GPU nodes: with 2 (the EKS default for managed node groups), a pod on
 * the pod network reaches IMDS and takes the node role (docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html,
 * "Restrict access to the instance profile assigned to the worker node").
 */
export const awsImdsHopLimit: StackValidationPolicy = {
    name: "aws-gpu-nodes-imds-hop-limit",
    description: "GPU node groups use a launch template with httpTokens: required and httpPutResponseHopLimit: 1.",
    remediationSteps:
        'Set metadataOptions { httpTokens: "required", httpPutResponseHopLimit: 1 } on the node group\'s launch template (components/spoke/EfaNodeGroup.ts NODE_METADATA_OPTIONS).',
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const lts = ofType(args.resources, AWS_TYPES.launchTemplate);
        for (const g of ofType(args.resources, AWS_TYPES.nodeGroup).filter(isGpuGroup)) {
            // launchTemplate.id is the template's computed id (unknown in a new stack's preview): the template is found
            // through the node group's dependency on it, which is known in preview too.
            const ref = peek(() => g.props.launchTemplate as { id?: unknown; name?: unknown } | undefined);
            if (ref.known && !ref.value) {
                report(
                    `GPU node group ${g.name} has no launch template: EKS's default sets IMDS hop limit 2, so pods can take the node role.`,
                    g.urn,
                );
                continue;
            }
            const refName = ref.known ? peek(() => ref.value?.name) : undefined;
            const lt =
                dependencyOfType(g, AWS_TYPES.launchTemplate) ??
                lts.find((l) => refName?.known && refName.value && peek(() => l.props.name).known && l.props.name === refName.value);
            if (!lt) {
                report(
                    `GPU node group ${g.name}: its launch template is not in this stack, so its IMDS settings cannot be checked.`,
                    g.urn,
                );
                continue;
            }
            const md = lt.props.metadataOptions ?? {};
            if (md.httpTokens !== "required" || md.httpPutResponseHopLimit !== 1) {
                report(
                    `launch template ${lt.name} of GPU node group ${g.name}: metadataOptions httpTokens=${md.httpTokens ?? "(unset)"}, httpPutResponseHopLimit=${md.httpPutResponseHopLimit ?? "(unset)"}; need required and 1, or pods reach the node role through IMDS.`,
                    lt.urn,
                );
            }
        }
    },
};

/**
 * Aurora PostgreSQL refuses plaintext: its cluster parameter group (in this stack) sets `rds.force_ssl=1`
 * (docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraPostgreSQL.Security.html), and the master password is
 * managed and rotated by RDS (`manageMasterUserPassword`), never a value in the program or its state.
 */
export const awsRdsForceSsl: StackValidationPolicy = {
    name: "aws-rds-force-ssl",
    description: "Aurora PostgreSQL clusters use a cluster parameter group with rds.force_ssl=1 and an RDS-managed master password.",
    remediationSteps:
        'Attach an aws.rds.ClusterParameterGroup with { name: "rds.force_ssl", value: "1" } and set manageMasterUserPassword: true (components/hub/UsageLedger.ts).',
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const groups = ofType(args.resources, AWS_TYPES.rdsClusterParameterGroup);
        for (const c of ofType(args.resources, AWS_TYPES.rdsCluster).filter((r) => r.props.engine === "aurora-postgresql")) {
            const g = groups.find((x) => x.props.name === c.props.dbClusterParameterGroupName);
            const forced = (g?.props.parameters ?? []).some((p: any) => p.name === "rds.force_ssl" && String(p.value) === "1");
            if (!forced)
                report(
                    `Aurora cluster ${c.name}: ${g ? `parameter group ${g.name} does not set rds.force_ssl=1` : "no cluster parameter group of this stack is attached"}; plaintext connections are accepted.`,
                    c.urn,
                );
            if (c.props.manageMasterUserPassword !== true || c.props.masterPassword !== undefined)
                report(
                    `Aurora cluster ${c.name}: the master password is not managed by RDS (set manageMasterUserPassword: true, no masterPassword).`,
                    c.urn,
                );
        }
    },
};

/**
 * Resource types that generate key material into Pulumi state (their outputs are the secret): IAM access keys, IAM
 * login profiles and service-specific credentials (pulumi/pulumi-aws), every `random:` and `tls:` resource
 * (pulumi/pulumi-random, pulumi/pulumi-tls). Matched by prefix for the latter two, so a new generator of those
 * providers is refused until reviewed.
 */
export const KEY_GENERATOR_TYPES = {
    exact: [
        "aws:iam/accessKey:AccessKey",
        "aws:iam/userLoginProfile:UserLoginProfile",
        "aws:iam/serviceSpecificCredential:ServiceSpecificCredential",
    ],
    prefixes: ["random:", "tls:"],
} as const;

/**
 * The key generators the hub's state may hold, by URN without stack and project (`<parent types>$<type>::<name>`),
 * each reviewed: the ledger roles' passwords (components/hub/ledger; the database is reachable only inside its VPC)
 * and the bundle signing seed (components/hub/PolicyStore.ts, protected). test/hub-state-secrets.test.ts keeps the
 * same list for the program's state.
 */
export const HUB_REVIEWED_KEY_GENERATORS = [
    "platform:hub:UsageLedger$random:index/randomPassword:RandomPassword::usage-ledger-ingest-password",
    "platform:hub:UsageLedger$random:index/randomPassword:RandomPassword::usage-ledger-reporter-password",
    "platform:hub:PolicyStore$random:index/randomBytes:RandomBytes::policy-store-signing-seed",
] as const;

/** `<qualified type>::<name>` of a URN (`urn:pulumi:<stack>::<project>::<qualified type>::<name>`). */
function urnTail(urn: string): string {
    return urn.split("::").slice(2).join("::");
}

/**
 * The hub makes no key material but the reviewed generators: tenants' API keys and on-prem spokes' AWS source keys are
 * minted outside Pulumi (`npm run mint-key`, services/keys), because whatever the hub's state holds a `.apply` in the
 * hub's program can print. A hub stack is one with resources under a `platform:hub:` component.
 */
export const awsHubNoKeyGenerators: StackValidationPolicy = {
    name: "aws-hub-no-key-generators",
    description: "The hub stack generates no key material into its state beyond a reviewed list (ledger passwords, signing seed).",
    remediationSteps:
        "Mint keys outside Pulumi into their Secrets Manager secret (npm run mint-key; services/keys): the hub creates the secret empty. A new generator needs review: add its URN to HUB_REVIEWED_KEY_GENERATORS (policies/aws.ts) and test/hub-state-secrets.test.ts.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const rs = args.resources;
        if (!rs.some((r) => urnTail(r.urn).includes("platform:hub:"))) return;
        const reviewed = new Set<string>(HUB_REVIEWED_KEY_GENERATORS);
        for (const r of rs) {
            const generator =
                (KEY_GENERATOR_TYPES.exact as readonly string[]).includes(r.type) ||
                KEY_GENERATOR_TYPES.prefixes.some((p) => r.type.startsWith(p));
            if (generator && !reviewed.has(urnTail(r.urn)))
                report(
                    `${r.type} ${r.name} in the hub stack generates key material into its state (readable by any .apply of the hub's program); it is not a reviewed generator.`,
                    r.urn,
                );
        }
    },
};

/** The AWS policies of the pack, in report order. */
export const awsPolicies = [
    awsEksNoAccessKeys,
    awsNoCredentialOutputs,
    awsStatefulProtected,
    awsImdsHopLimit,
    awsRdsForceSsl,
    awsHubNoKeyGenerators,
];
