/**
 * SVG -> PNG with resvg's WebAssembly build (`@resvg/resvg-wasm`, no native binary, no install script) and the
 * DejaVu Sans Mono TrueType files of the `dejavu-fonts-ttf` package, so text renders the same on every machine
 * (system fonts are never loaded). The WASM module is initialised once per process.
 */
import * as fs from "node:fs";
import * as path from "node:path";

type ResvgModule = typeof import("@resvg/resvg-wasm");

let ready: Promise<{ mod: ResvgModule; fonts: Uint8Array[] }> | undefined;

/** Font files the pictures use (tools/report/svg.ts FONT_FAMILY). */
export const PICTURE_FONTS = ["DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"];

function init(): Promise<{ mod: ResvgModule; fonts: Uint8Array[] }> {
    if (!ready) {
        ready = (async () => {
            // eslint-disable-next-line @typescript-eslint/no-require-imports
            const mod: ResvgModule = require("@resvg/resvg-wasm");
            await mod.initWasm(fs.readFileSync(require.resolve("@resvg/resvg-wasm/index_bg.wasm")));
            const dir = path.join(path.dirname(require.resolve("dejavu-fonts-ttf/package.json")), "ttf");
            return { mod, fonts: PICTURE_FONTS.map((f) => fs.readFileSync(path.join(dir, f))) };
        })();
    }
    return ready;
}

/**
 * Rasterises an SVG document at `scale` (2 = sharp on high-DPI screens).
 * @throws Error when the SVG does not parse
 */
export async function svgToPng(svg: string, scale = 1.5): Promise<Buffer> {
    const { mod, fonts } = await init();
    const r = new mod.Resvg(svg, {
        fitTo: { mode: "zoom", value: scale },
        font: {
            fontBuffers: fonts,
            defaultFontFamily: "DejaVu Sans Mono",
            monospaceFamily: "DejaVu Sans Mono",
            sansSerifFamily: "DejaVu Sans Mono",
        },
    });
    const png = r.render().asPng();
    r.free();
    return Buffer.from(png);
}
