import { execFileSync } from "node:child_process";
import * as fs from "node:fs";

/**
 * A hub stack's outputs as JSON: from `file` (an `out/<hub>/outputs.json` of the offline render, or a saved
 * `pulumi stack output --json`) or, without one, from `pulumi stack output --json --stack <hub>`.
 * @param otherwise what else the command accepts instead, named in the error (`--outputs FILE or --bucket`)
 * @throws Error naming the file, or the stack and the pulumi command, when the outputs cannot be read
 */
export function readHubOutputs(file: string | undefined, hub: string, otherwise = "--outputs FILE"): unknown {
    if (file) {
        try {
            return JSON.parse(fs.readFileSync(file, "utf8"));
        } catch (e) {
            throw new Error(`--outputs ${file}: cannot read hub outputs: ${(e as Error).message}`);
        }
    }
    try {
        return JSON.parse(
            execFileSync("pulumi", ["stack", "output", "--json", "--stack", hub], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }),
        );
    } catch (e) {
        throw new Error(
            `cannot read the outputs of hub stack ${hub} with \`pulumi stack output --json --stack ${hub}\` (${(e as Error).message.split("\n")[0]}); log in to the backend first, or pass ${otherwise}`,
        );
    }
}
