/**
 * SVG -> PNG with resvg's WebAssembly build (`@resvg/resvg-wasm`, no native binary, no install script) and the
 * DejaVu Sans Mono TrueType files of the `dejavu-fonts-ttf` package, so text renders the same on every machine
 * (system fonts are never loaded). The WASM module is initialised once per process.
 */
import { createHash } from "node:crypto";
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
 * Environment variable naming a folder where PNGs are also kept for other processes (a test run's workers and the
 * renders they spawn; test/global-setup.ts sets it): keyed by the SVG, the scale and the versions of resvg and the
 * fonts, so a picture rasterised once in the run is read back by every later render of the same SVG, which then never
 * initialises the WebAssembly module (a third of a second). The rasteriser is deterministic (tools/report/index.ts
 * reuses a previous render's PNG on the same grounds; test/report.test.ts checks it with this folder unset). Unset
 * (`npm run render`): every picture is rasterised.
 */
export const PNG_CACHE_ENV = "PLATFORM_PNG_CACHE";

/** The shared folder's file for this picture, or undefined when none is set. */
function cacheFile(svg: string, scale: number): string | undefined {
    const dir = process.env[PNG_CACHE_ENV];
    if (!dir) return undefined;
    // Each package's package.json, found beside a file its exports map lets us resolve (resvg exports no package.json).
    const version = (file: string) =>
        (JSON.parse(fs.readFileSync(path.join(path.dirname(require.resolve(file)), "package.json"), "utf8")) as { version: string })
            .version;
    const key = createHash("sha256")
        .update(
            `${version("@resvg/resvg-wasm/index_bg.wasm")}\0${version("dejavu-fonts-ttf/package.json")}\0${PICTURE_FONTS.join(",")}\0${scale}\0`,
        )
        .update(svg)
        .digest("hex");
    return path.join(dir, `${key}.png`);
}

/**
 * Rasterises an SVG document at `scale` (2 = sharp on high-DPI screens).
 * @throws Error when the SVG does not parse
 */
export async function svgToPng(svg: string, scale = 1.5): Promise<Buffer> {
    const shared = cacheFile(svg, scale);
    if (shared) {
        try {
            return fs.readFileSync(shared);
        } catch {
            // Not rasterised in this run yet.
        }
    }
    const png = await rasterise(svg, scale);
    if (shared) {
        try {
            fs.mkdirSync(path.dirname(shared), { recursive: true });
            const tmp = `${shared}.${process.pid}.tmp`;
            fs.writeFileSync(tmp, png);
            fs.renameSync(tmp, shared); // whole, so a reader never sees half a file
        } catch {
            // A folder that cannot be written only costs the next process the rasterising.
        }
    }
    return png;
}

async function rasterise(svg: string, scale: number): Promise<Buffer> {
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
