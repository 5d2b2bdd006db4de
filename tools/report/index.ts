/**
 * The render report of one stack: `report.md` plus its pictures (spoke: `rails.svg`/`rails.png`, hub:
 * `map.svg`/`map.png`), as file name -> content for the renderer to write into `out/<stack>/`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { allPolicies } from "../../policies/policies";
import { namespaceConfig, parseStackConfig } from "../../config/stack";
import type { PolicyReport } from "../policy-runner";
import type { StackFile } from "../../lib/stackfiles";
import { maskWire } from "../wire";
import { reportMarkdown } from "./markdown";
import { buildView, type ReportInput, type ResourceRecord, type StackView } from "./model";
import { hubMapSvg, railWiringSvg } from "./pictures";
import { svgToPng } from "./png";

export type { ReportInput } from "./model";

/** The pack's policies as the report lists them (name, level; the pack's default level is mandatory). */
export const POLICY_INFO = allPolicies.map((p) => ({ name: p.name, enforcementLevel: String(p.enforcementLevel ?? "mandatory") }));

/**
 * The report input of a rendered stack, from what the renderer writes: `resources.json` rows (masked), the
 * masked outputs, the policy report and, for a spoke, its hub's outputs in wire format (masked here).
 * @throws ConfigError when the stack file does not validate (the program already refused it then)
 */
export function reportInput(
    s: StackFile,
    resources: unknown[],
    outputs: Record<string, unknown>,
    policy: PolicyReport,
    hubOutputs?: Record<string, unknown>,
    warnings: string[] = [],
): ReportInput {
    return {
        warnings,
        raw: namespaceConfig(s.config),
        stack: s.name,
        file: s.file,
        config: parseStackConfig(namespaceConfig(s.config), s.file),
        resources: resources as ResourceRecord[],
        outputs,
        policy,
        policies: POLICY_INFO,
        awsRegion: s.config["aws:region"],
        hubOutputs: hubOutputs ? (maskWire(hubOutputs) as Record<string, unknown>) : undefined,
    };
}

/**
 * Report files of one stack. PNGs are left out with `png: false` (tests of the text only). With `previousDir`
 * (the stack's current `out/` folder), a PNG whose SVG there is byte-identical is reused instead of rasterised
 * again (same bytes: the rasteriser is deterministic), which keeps reruns fast.
 */
export async function reportFiles(
    input: ReportInput,
    opts: { png?: boolean; previousDir?: string } = {},
): Promise<Record<string, string | Buffer>> {
    const view: StackView = buildView(input);
    const base = view.kind === "hub" ? "map" : "rails";
    const svg = view.kind === "hub" ? hubMapSvg(view) : railWiringSvg(view);
    const files: Record<string, string | Buffer> = { [`${base}.svg`]: svg };
    if (opts.png !== false) files[`${base}.png`] = previousPng(opts.previousDir, base, svg) ?? (await svgToPng(svg));
    files["report.md"] = reportMarkdown(view, [`${base}.svg`]);
    return files;
}

function previousPng(dir: string | undefined, base: string, svg: string): Buffer | undefined {
    if (!dir) return undefined;
    try {
        if (fs.readFileSync(path.join(dir, `${base}.svg`), "utf8") !== svg) return undefined;
        return fs.readFileSync(path.join(dir, `${base}.png`));
    } catch {
        return undefined;
    }
}
