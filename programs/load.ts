import * as pulumi from "@pulumi/pulumi";
import * as path from "path";
import { namespaceConfig, parseStackConfig, StackConfig } from "../config/stack";

/**
 * Path of the stack file shown in error messages: `$PLATFORM_STACK_FILE` when the offline renderer was
 * given `--config <file>`, else `stacks/Pulumi.<stack>.yaml` (Pulumi.yaml sets `stackConfigDir: stacks`).
 */
export function stackFilePath(): string {
    return process.env.PLATFORM_STACK_FILE ?? path.join("stacks", `Pulumi.${pulumi.getStack()}.yaml`);
}

/** Reads and validates this stack's `platform:*` config. @throws ConfigError naming the file and keys. */
export function loadStackConfig(): StackConfig {
    return parseStackConfig(namespaceConfig(pulumi.runtime.allConfig()), stackFilePath());
}
