import * as pulumi from "@pulumi/pulumi";
import * as path from "path";
import { ConfigError } from "../config/errors";
import { namespaceConfig, parseStackConfig, StackConfig } from "../config/stack";

/**
 * Path of the stack file shown in error messages: `$PLATFORM_STACK_FILE` when the offline renderer was
 * given `--config <file>`, else `stacks/Pulumi.<stack>.yaml` (Pulumi.yaml sets `stackConfigDir: stacks`).
 */
export function stackFilePath(): string {
    return process.env.PLATFORM_STACK_FILE ?? path.join("stacks", `Pulumi.${pulumi.getStack()}.yaml`);
}

/**
 * Reads and validates this stack's config: the `platform:*` keys, and for the hub the AWS provider's
 * `aws:region` (the hub lives on AWS). @throws ConfigError naming the file and keys.
 */
export function loadStackConfig(): StackConfig {
    const all = pulumi.runtime.allConfig();
    const cfg = parseStackConfig(namespaceConfig(all), stackFilePath());
    if (cfg.role === "hub" && !all["aws:region"]) {
        throw new ConfigError(stackFilePath(), [{ key: "aws:region", message: "missing; the hub runs on AWS: set the region of its control plane, e.g. ap-southeast-1" }]);
    }
    return cfg;
}
