/**
 * Shapes of the upstream facts: what each pinned component reads, refuses and ships, as plain data with the
 * source it was read from. `lib/` generates from these facts, `policies/` and `npm run upstream-check`
 * (tools/upstream-check.ts) verify rendered objects against them. No imports: this folder has no dependencies.
 *
 * A fact is only recorded after reading it in the upstream repository at the pinned tag (`fetch`), never from
 * memory or a blog post. Add fields here only additively: several modules are written against these shapes.
 */

/**
 * Where a fact was read: `owner/repo@tag:path`, optionally `#L<start>[-L<end>]` or `#<symbol>`.
 * Example: `vllm-project/vllm@v0.11.0:vllm/envs.py#VLLM_NIXL_SIDE_CHANNEL_HOST`.
 */
export type Source = `${string}/${string}@${string}:${string}`;

/** Every fact carries its source and, where useful, a one-line note on why the product relies on it. */
export interface Fact {
    readonly source: Source;
    readonly note?: string;
}

/** A command-line flag an entry point accepts at its pinned version. */
export interface FlagFact extends Fact {
    /** `false` for a boolean switch (`--enable-x`), `true` when the flag takes a value (`--tp 8`, `--tp=8`). */
    readonly takesValue: boolean;
    /** Allowed values when upstream restricts them (argparse `choices`, an enum). */
    readonly choices?: readonly string[];
    /** Upstream default, as upstream writes it. */
    readonly default?: string;
    /** Other spellings upstream accepts for the same flag (argparse aliases, `--no-` forms). */
    readonly aliases?: readonly string[];
    /**
     * The flag may be given more than once and every occurrence counts (argparse `action="append"`); otherwise a second
     * occurrence replaces the first, which is then inert, and upstream-check refuses it.
     */
    readonly repeatable?: boolean;
}

/** An environment variable a component reads at its pinned version. */
export interface EnvFact extends Fact {
    /** Upstream default when unset, as upstream writes it. */
    readonly default?: string;
    /** Allowed values when upstream restricts them (an enum it parses the value into, argparse `choices` of its flag). */
    readonly choices?: readonly string[];
}

/** What one component (an entry point or a library inside an image) reads at one version. */
export interface ComponentFacts {
    /** Stable id, e.g. `vllm`, `sglang`, `trtllm`, `dynamo-frontend`, `dynamo-planner`, `mooncake-master`, `ucx`, `nccl`. */
    readonly component: string;
    /** The pinned version the facts were read at (a tag). */
    readonly version: string;
    /** Flags of the component's entry point(s), keyed by canonical spelling including dashes (`--tensor-parallel-size`). */
    readonly flags: Readonly<Record<string, FlagFact>>;
    /** Environment variables the component reads, keyed by name. A name ending in `*` is a prefix family (`UCX_*`). */
    readonly env: Readonly<Record<string, EnvFact>>;
}

/** The values keys a Helm chart's templates read at one chart version. */
export interface ChartFacts extends Fact {
    /** Chart name, e.g. `network-operator`. */
    readonly chart: string;
    /** Chart repository URL or `oci://` reference, as pinned in config/versions.ts. */
    readonly repository: string;
    /** Chart version, exactly as pinned. */
    readonly version: string;
    /**
     * Dotted values paths the templates (or a subchart) read. `*` matches any single map key segment
     * (`nodeSelector.*`). A path is a leaf unless listed in {@link openSubtrees}.
     */
    readonly valuesKeys: readonly string[];
    /** Paths whose whole subtree is passed through verbatim (`toYaml .Values.x`): anything below them is read. */
    readonly openSubtrees?: readonly string[];
}

/** One published image variant and what it carries. */
export interface ImageFacts extends Fact {
    /** Repository without tag, e.g. `nvcr.io/nvidia/ai-dynamo/vllm-runtime`. */
    readonly repository: string;
    /** Tag, exactly as pinned. */
    readonly tag: string;
    /** Component ids (see {@link ComponentFacts.component}) whose flags and env this image's processes read. */
    readonly components: readonly string[];
    /**
     * Libraries and tools the image provides that a config may name, e.g. `ucx`, `ucx_info`, `nixl`, `libfabric`,
     * `fi_info`, `efa-installer`, `aws-ofi-nccl`, `mooncake-transfer-engine`, `mooncake_master`.
     */
    readonly provides: readonly string[];
}

/**
 * What an orchestrator injects into a container on its own, depending on the backend and connector it sees, so the
 * rendered env alone does not tell what the process gets (e.g. Dynamo's vLLM worker setting
 * `VLLM_NIXL_SIDE_CHANNEL_HOST` only for a top-level `NixlConnector`/`PdConnector`).
 */
export interface InjectionFact extends Fact {
    /** Component doing the injection, e.g. `dynamo-vllm`. */
    readonly by: string;
    /** Environment variables it sets. */
    readonly env: readonly string[];
    /** The condition, in words. */
    readonly when: string;
    /** Machine-readable condition: the vLLM top-level `kv_connector` values for which the injection happens. */
    readonly kvConnectors?: readonly string[];
}

/** A process entry point: how a container's argv is recognised and which components' flags it accepts. */
export interface EntrypointFacts extends Fact {
    /** Stable id, e.g. `dynamo.vllm`. */
    readonly id: string;
    /** argv prefix after any `sh -c '<prelude> && exec "$@"' --` wrapper, e.g. `["python3", "-m", "dynamo.vllm"]`. */
    readonly argv: readonly string[];
    /** Components whose flags (and env) this process reads. */
    readonly components: readonly string[];
    /** Flag syntax: `double-dash` (argparse `--x v`/`--x=v`) or `gflags` (`--x v`/`--x=v`, single names). */
    readonly flagStyle?: "double-dash" | "gflags";
}

/** A configuration that needs something the image must provide (see {@link ImageFacts.provides}). */
export interface ImageRequirementFact extends Fact {
    readonly id: string;
    /** Env var and value (exact, case-sensitive) that name the need, or a flag and value. */
    readonly when: {
        readonly env?: readonly [string, string];
        readonly flag?: readonly [string, string];
        readonly kvConnector?: string;
        readonly nixlBackend?: string;
    };
    /** Items the image must list in `provides`. */
    readonly needs: readonly string[];
}
