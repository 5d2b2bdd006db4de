/**
 * A few lines of SVG building: elements with escaped attributes and text, and text widths for the one font
 * the pictures use (DejaVu Sans Mono, advance width 1233/2048 em for every glyph — its `hmtx` table — so
 * boxes fit their labels without a layout engine). PNGs are rasterised with that same font (tools/report/png.ts).
 */

/** Font stack of every picture: DejaVu Sans Mono is loaded by the PNG renderer; viewers fall back to their monospace. */
export const FONT_FAMILY = "DejaVu Sans Mono, monospace";
/** Advance width of a DejaVu Sans Mono glyph in em (1233 units of 2048). */
export const MONO_ADVANCE_EM = 1233 / 2048;

/** Width in px of `text` at `size` px in the pictures' monospace font. */
export function textWidth(text: string, size: number): number {
    return [...text].length * size * MONO_ADVANCE_EM;
}

/** Escapes XML character data and attribute values. */
export function esc(s: string | number): string {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

type Attrs = Record<string, string | number | undefined>;

const num = (v: string | number) => (typeof v === "number" ? String(Math.round(v * 100) / 100) : v);

/** `<tag a="..."/>` or `<tag ...>children</tag>`; undefined attributes are left out. */
export function el(tag: string, attrs: Attrs, ...children: string[]): string {
    const a = Object.entries(attrs)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => ` ${k}="${esc(num(v as string | number))}"`)
        .join("");
    return children.length ? `<${tag}${a}>${children.join("")}</${tag}>` : `<${tag}${a}/>`;
}

/** A text element; `anchor` start | middle | end. */
export function text(
    x: number,
    y: number,
    s: string,
    opts: { size?: number; anchor?: string; weight?: string; fill?: string; cls?: string } = {},
): string {
    return el(
        "text",
        {
            x,
            y,
            "font-size": opts.size ?? 12,
            "text-anchor": opts.anchor,
            "font-weight": opts.weight,
            fill: opts.fill ?? "#1f2933",
            class: opts.cls,
        },
        esc(s),
    );
}

/** A whole document with a white background and a title (shown as tooltip, read by screen readers). */
export function svgDoc(width: number, height: number, title: string, body: string[]): string {
    return `${el(
        "svg",
        {
            xmlns: "http://www.w3.org/2000/svg",
            width: Math.ceil(width),
            height: Math.ceil(height),
            viewBox: `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`,
            "font-family": FONT_FAMILY,
        },
        el("title", {}, esc(title)),
        el("rect", { x: 0, y: 0, width: Math.ceil(width), height: Math.ceil(height), fill: "#ffffff" }),
        ...body,
    )}\n`;
}
