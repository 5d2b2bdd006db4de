/**
 * The render report of one stack: `report.md` plus its pictures (spoke: `rails.svg`/`rails.png`, hub:
 * `map.svg`/`map.png`), as file name -> content for the renderer to write into `out/<stack>/`.
 */
import { reportMarkdown } from "./markdown";
import { buildView, ReportInput, StackView } from "./model";
import { hubMapSvg, railWiringSvg } from "./pictures";
import { svgToPng } from "./png";

export type { ReportInput } from "./model";

/** Report files of one stack. PNGs are left out with `png: false` (faster; tests of the text only). */
export async function reportFiles(input: ReportInput, opts: { png?: boolean } = {}): Promise<Record<string, string | Buffer>> {
    const view: StackView = buildView(input);
    const base = view.kind === "hub" ? "map" : "rails";
    const svg = view.kind === "hub" ? hubMapSvg(view) : railWiringSvg(view);
    const files: Record<string, string | Buffer> = { [`${base}.svg`]: svg };
    if (opts.png !== false) files[`${base}.png`] = await svgToPng(svg);
    files["report.md"] = reportMarkdown(view, [`${base}.svg`]);
    return files;
}
