import { ConfigError, type ConfigIssue, nearest, zodIssues } from "./errors";
import { type HubConfig, HubConfigSchema } from "./hub";
import { hubSemanticIssues } from "./hub-checks";
import { type EksRaw, type OnPremRaw, resolveEks, resolveSpoke } from "./resolve-spoke";
import { plainCredentials } from "./secrets";
import { type SpokeConfig, SpokeConfigSchema } from "./spoke";

// A stack file's schemas live by concept: hub keys (config/hub.ts, config/spoke-identity.ts, their cross-field checks in
// config/hub-checks.ts), spoke keys (config/spoke.ts, resolved by config/resolve-spoke.ts). This file loads a stack file.
export * from "./hub";
export * from "./hub-checks";
export * from "./spoke";
export * from "./spoke-identity";

/** Config namespace of every platform key in a stack file (`platform:role`, `platform:nodePools`, ...). */
export const CONFIG_NAMESPACE = "platform";

// ---------------------------------------------------------------- loading

/** A validated stack config: a hub's or a spoke's, by `role` (programs/load.ts `loadStackConfig`). */
export type StackConfig = { role: "hub"; hub: HubConfig } | { role: "spoke"; spoke: SpokeConfig };

/**
 * Collects the `platform:*` keys of a flat Pulumi config map (`pulumi.runtime.allConfig()` shape: values are
 * strings, objects JSON-encoded) into an object keyed by the short name.
 */
export function namespaceConfig(all: Record<string, string>, namespace = CONFIG_NAMESPACE): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(all)) {
        if (!k.startsWith(`${namespace}:`)) continue;
        let value: unknown = v;
        try {
            value = JSON.parse(v);
        } catch {
            /* plain string */
        }
        out[k.slice(namespace.length + 1)] = value;
    }
    return out;
}

/** Options of {@link parseStackConfig}. */
export interface ParseOptions {
    /** Time API key expiry is judged at (default: now). */
    now?: Date;
}

/** Config namespaces a stack file may use: this program's, and the providers it configures. */
export const KNOWN_NAMESPACES = [CONFIG_NAMESPACE, "aws", "kubernetes", "pulumi"] as const;

/**
 * Keys of a flat config map in a namespace nothing reads (`platfrom:serving`), with the nearest known namespace.
 * A key without a namespace is reported too (Pulumi prefixes the project name, so it is a hand-edited file).
 */
export function unknownNamespaces(all: Record<string, string>): ConfigIssue[] {
    const out: ConfigIssue[] = [];
    for (const key of Object.keys(all)) {
        const i = key.indexOf(":");
        const ns = i < 0 ? "" : key.slice(0, i);
        if ((KNOWN_NAMESPACES as readonly string[]).includes(ns)) continue;
        const n = nearest(ns, KNOWN_NAMESPACES);
        out.push({
            key,
            message: `unknown config namespace "${ns}"${n ? `; did you mean "${n}:${key.slice(i + 1)}"?` : ""} (known: ${KNOWN_NAMESPACES.join(", ")}); nothing reads this key`,
        });
    }
    return out;
}

/**
 * The whole check of one stack file's flat config map (`pulumi.runtime.allConfig()` shape): no unknown namespace, no
 * credential in plain text (config/secrets.ts), then {@link parseStackConfig} on the `platform:*` keys.
 *
 * @param secretKeys keys whose values are Pulumi secrets (`secure:`), which may hold credentials
 * @throws ConfigError naming the stack file and each bad key
 */
export function parseFlatStackConfig(
    all: Record<string, string>,
    stackFile: string,
    secretKeys: Iterable<string> = [],
    opts: ParseOptions = {},
): StackConfig {
    const issues = [...unknownNamespaces(all), ...plainCredentials(all, new Set(secretKeys))];
    if (issues.length) throw new ConfigError(stackFile, issues);
    return parseStackConfig(namespaceConfig(all), stackFile, opts);
}

/**
 * Validates the `platform:*` keys of one stack file and resolves node profiles and rail IP pools.
 * Nothing is created before this returns, so a bad file is never half-applied.
 *
 * @param raw the namespace map from {@link namespaceConfig}
 * @param stackFile path shown in errors, e.g. `stacks/Pulumi.spoke-hn1.yaml`
 * @throws ConfigError naming the stack file and each bad key (`platform:nodePools[0].profile`)
 */
export function parseStackConfig(raw: Record<string, unknown>, stackFile: string, opts: ParseOptions = {}): StackConfig {
    const role = raw.role;
    if (role !== "hub" && role !== "spoke") {
        throw new ConfigError(stackFile, [
            {
                key: "platform:role",
                message: role === undefined ? "missing; set it to hub or spoke" : `must be hub or spoke, not ${JSON.stringify(role)}`,
            },
        ]);
    }
    if (role === "hub") {
        const parsed = HubConfigSchema.safeParse(raw);
        if (!parsed.success) throw new ConfigError(stackFile, zodIssues(parsed.error, "platform:", HubConfigSchema));
        const semantic = hubSemanticIssues(parsed.data, opts.now ?? new Date());
        if (semantic.length) throw new ConfigError(stackFile, semantic);
        return { role, hub: parsed.data };
    }
    // The provider decides the fabric: say so, instead of the other fabric's missing keys (railSupernet on EKS).
    const provider = (raw.cluster as { provider?: unknown } | undefined)?.provider;
    const fabric = (raw.backend as { fabric?: unknown } | undefined)?.fabric;
    if (provider === "eks" && fabric !== undefined && fabric !== "efa") {
        throw new ConfigError(stackFile, [
            {
                key: "platform:backend.fabric",
                message: `an EKS spoke uses fabric: efa (EKS spokes use EFA, with no other platform:backend keys; ${JSON.stringify(fabric)} rails and railSupernet are for provider: onprem)`,
            },
        ]);
    }
    if (provider === "onprem" && fabric !== undefined && fabric !== "infiniband") {
        throw new ConfigError(stackFile, [
            {
                key: "platform:backend.fabric",
                message: `an on-prem spoke uses fabric: infiniband (rail-aligned InfiniBand with railSupernet; ${JSON.stringify(fabric)} is for provider: eks)`,
            },
        ]);
    }
    const parsed = SpokeConfigSchema.safeParse(raw);
    if (!parsed.success) throw new ConfigError(stackFile, zodIssues(parsed.error, "platform:", SpokeConfigSchema));
    const issues: ConfigIssue[] = [];
    if (parsed.data.cluster.provider === "eks" && raw.gpuOperator !== undefined) {
        issues.push({
            key: "platform:gpuOperator",
            message: "not used on an EKS spoke: the EKS AL2023 NVIDIA AMI provides the driver and GPUDirect (remove the key)",
        });
    }
    if (parsed.data.cluster.provider === "eks" && parsed.data.serving.systemNodeSelector !== undefined) {
        issues.push({
            key: "platform:serving.systemNodeSelector",
            message:
                "not used on an EKS spoke: Frontend, Planner and Mooncake master run on the CPU node group (platform:nodeGroups.cpu) by its own selector (remove the key)",
        });
    }
    const spoke: SpokeConfig =
        parsed.data.cluster.provider === "eks" ? resolveEks(parsed.data as EksRaw, issues) : resolveSpoke(parsed.data as OnPremRaw, issues);
    if (issues.length) throw new ConfigError(stackFile, issues);
    return { role, spoke };
}
