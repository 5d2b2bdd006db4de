/**
 * `node -r ts-node/register/transpile-only tools/report/comment.ts [--out out] [--artifact-url URL]`
 *
 * Prints the ONE pull-request comment the preview workflow keeps up to date: a marker line (how the workflow
 * finds its earlier comment to edit in place), `out/diff.md`, then every `out/<stack>/report.md` in a
 * collapsed section. Pictures cannot be shown from a comment (out/ is not hosted): their links point to the
 * workflow artifact holding out/. Kept under GitHub's 65,536-character comment limit.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** First line of the comment; the workflow edits the comment that starts with it. */
export const COMMENT_MARKER = "<!-- platform-render-report -->";
/** GitHub refuses comment bodies over 65,536 characters; leave room for the marker and notes. */
export const MAX_COMMENT_CHARS = 65000;

/** Demotes Markdown headings by one level (`# x` -> `## x`) outside code fences. */
export function demote(md: string): string {
    let fence = false;
    return md
        .split("\n")
        .map((l) => {
            if (/^\s*```/.test(l)) fence = !fence;
            return !fence && /^#{1,5} /.test(l) ? `#${l}` : l;
        })
        .join("\n");
}

/** Replaces picture embeds with a link to the artifact (or a note when there is none). */
export function pictureLinks(md: string, stack: string, artifactUrl?: string): string {
    return md.replace(/!\[([^\]]*)\]\(([^)]+)\)(?: \(\[PNG\]\([^)]+\)\))?/g, (_m, alt: string, file: string) =>
        artifactUrl ? `[${alt}: \`out/${stack}/${file}\`](${artifactUrl})` : `${alt}: \`out/${stack}/${file}\` (in the render artifact)`,
    );
}

/** The items of a report's `## Warnings` section (tools/report/markdown.ts), without their `- ⚠ ` mark. */
export function warningLines(report: string): string[] {
    const m = /^## Warnings\n\n((?:- .*\n?)+)/m.exec(report);
    return m
        ? m[1]
              .trimEnd()
              .split("\n")
              .map((l) => l.replace(/^- (⚠ )?/, ""))
        : [];
}

/** The comment body for the render in `outDir`. */
export function commentBody(outDir: string, artifactUrl?: string): string {
    const head = [
        COMMENT_MARKER,
        "# Offline render of this pull request",
        "",
        `Rendered by \`npm run render -- --diff <base>\`${artifactUrl ? `; manifests, reports and pictures: [render artifact](${artifactUrl})` : ""}.`,
        "",
    ];
    const diffFile = path.join(outDir, "diff.md");
    const diff = fs.existsSync(diffFile)
        ? demote(fs.readFileSync(diffFile, "utf8")).trimEnd()
        : "## Render diff\n\nNo diff was rendered (out/diff.md is missing).";
    const stacks = fs.existsSync(outDir)
        ? fs
              .readdirSync(outDir)
              .filter((s) => fs.existsSync(path.join(outDir, s, "report.md")))
              .sort()
        : [];
    const reports = stacks.map((s) => {
        const md = pictureLinks(demote(demote(fs.readFileSync(path.join(outDir, s, "report.md"), "utf8"))), s, artifactUrl).trimEnd();
        return `<details><summary><b>${s}</b> report</summary>\n\n${md}\n\n</details>`;
    });
    // Every report's warnings, first: what a reviewer must look at should not hide in a collapsed section.
    const warnings = stacks.flatMap((s) =>
        warningLines(fs.readFileSync(path.join(outDir, s, "report.md"), "utf8")).map((w) => `- **${s}**: ${w}`),
    );
    const warned = warnings.length ? ["## ⚠ Warnings", "", ...warnings, ""] : [];
    let body = `${[...head, ...warned, diff, "", "## Reports", "", ...reports].join("\n")}\n`;
    if (body.length > MAX_COMMENT_CHARS) {
        const note = `\n\n… truncated to ${MAX_COMMENT_CHARS} characters; the full diff and reports are in ${artifactUrl ? `the [render artifact](${artifactUrl})` : "the render artifact"} (out/diff.md, out/<stack>/report.md).\n`;
        body = body.slice(0, MAX_COMMENT_CHARS - note.length) + note;
    }
    return body;
}

if (require.main === module) {
    const argv = process.argv.slice(2);
    const opt = (name: string) => {
        const i = argv.indexOf(name);
        return i >= 0 ? argv[i + 1] : undefined;
    };
    process.stdout.write(commentBody(path.resolve(opt("--out") ?? "out"), opt("--artifact-url") || undefined));
}
