import * as fs from "node:fs";
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { ConfigError, nearest } from "../config/errors";
import { parseFlatStackConfig, type StackConfig } from "../config/stack";
import { readStackFile } from "../lib/stackfiles";
import { stackAwsRegionIssues } from "../lib/aws-partition";

// Semi-internal SDK function (pinned @pulumi/pulumi, see package.json): whether a config key is a `secure:` value.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { isConfigSecret } = require("@pulumi/pulumi/runtime/config") as { isConfigSecret: (k: string) => boolean };

/**
 * Environment variable naming a file of the hub's published outputs (`pulumi stack output --json` of the hub, saved
 * by up.yml after each hub `up`, signed by the hub: lib/hub-publication.ts). Every real spoke run (pull-request
 * previews and `up`s) reads the hub from it instead of a StackReference: a StackReference makes the engine open the
 * hub's state with the hub's secrets provider (pulumi/pulumi#11109), the hub state KMS key, which only the hub
 * deployers may use (lib/ci-roles.ts).
 */
export const HUB_OUTPUTS_ENV = "PLATFORM_HUB_OUTPUTS";

/**
 * Path of the stack file shown in error messages: `$PLATFORM_STACK_FILE` when the offline renderer was
 * given `--config <file>`, else `stacks/Pulumi.<stack>.yaml` (Pulumi.yaml sets `stackConfigDir: stacks`), relative to
 * the working directory. Never throws for a missing file: it is only a path (callers check it exists).
 */
export function stackFilePath(): string {
    return process.env.PLATFORM_STACK_FILE ?? path.join("stacks", `Pulumi.${pulumi.getStack()}.yaml`);
}

/**
 * Hub stacks whose files sit in `dir` (the hub's checkSpokeRegistry reads its spoke files from its own directory, so a
 * spoke and its hub share one). Unreadable files are skipped.
 */
export function hubStacksIn(dir: string): string[] {
    if (!fs.existsSync(dir)) return [];
    const out: string[] = [];
    for (const f of fs
        .readdirSync(dir)
        .filter((x) => /^Pulumi\..+\.ya?ml$/.test(x))
        .sort()) {
        try {
            const s = readStackFile(path.join(dir, f));
            if (s.role === "hub") out.push(s.name);
        } catch {
            /* reported when that stack runs */
        }
    }
    return out;
}

/**
 * A spoke's `platform:spoke.hubStack` must name a hub whose stack file is beside the spoke's (its last path segment,
 * `organization/platform/hub-prod` -> `stacks/Pulumi.hub-prod.yaml` with `platform:role: hub`), so a typo is a
 * config error naming the key, not a failed StackReference read.
 *
 * @throws ConfigError naming the spoke file, `platform:spoke.hubStack` and the known hub stacks
 */
export function checkHubStackName(hubStack: string, stackFile: string): void {
    const dir = path.dirname(stackFile);
    // Beside the spoke file, and in the project's stackConfigDir (a file given with `render --config` from elsewhere).
    const dirs = [...new Set([dir, "stacks"].filter((d) => fs.existsSync(d)).map((d) => path.resolve(d)))];
    if (dirs.length === 0) return;
    const hubs = [...new Set(dirs.flatMap(hubStacksIn))].sort();
    const name = hubStack.split("/").pop() ?? "";
    if (hubs.includes(name)) return;
    const n = nearest(name, hubs);
    throw new ConfigError(stackFile, [
        {
            key: "platform:spoke.hubStack",
            message: `"${hubStack}" names hub stack "${name}", which has no hub stack file in ${[...new Set([dir, "stacks"])].join(" or ")}${n ? `; did you mean "${hubStack.slice(0, hubStack.length - name.length)}${n}"?` : ""} (known hub stacks: ${hubs.join(", ") || "none"})`,
        },
    ]);
}

/**
 * Reads and validates this stack's config: no unknown namespace, no credential in plain text, the `platform:*` keys,
 * for a spoke a hub stack that exists, for the hub the AWS provider's `aws:region` (the hub lives on AWS), and every AWS
 * region key a known region of partition aws (lib/aws-partition.ts `stackAwsRegionIssues`).
 * @throws ConfigError naming the file and keys.
 */
export function loadStackConfig(): StackConfig {
    const all = pulumi.runtime.allConfig();
    const secretKeys = Object.keys(all).filter((k) => isConfigSecret(k));
    const cfg = parseFlatStackConfig(all, stackFilePath(), secretKeys);
    if (cfg.role === "hub" && !all["aws:region"]) {
        throw new ConfigError(stackFilePath(), [
            { key: "aws:region", message: "missing; the hub runs on AWS: set the region of its control plane, e.g. ap-southeast-1" },
        ]);
    }
    if (cfg.role === "spoke") checkHubStackName(cfg.spoke.spoke.hubStack, stackFilePath());
    // Every AWS region key is one the pinned AWS SDK lists in partition aws, or acknowledged (lib/aws-partition.ts): a
    // typo fails here, not at `pulumi up`; another partition would render arn:aws: ARNs and cross-partition trust.
    const regions = stackAwsRegionIssues(cfg, all["aws:region"]);
    if (regions.length) throw new ConfigError(stackFilePath(), regions);
    return cfg;
}
