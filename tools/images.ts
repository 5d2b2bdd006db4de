/**
 * `npm run images -- [--base <git ref>]`: the container images this repository builds, as the matrix of
 * .github/workflows/images.yml. The list is derived from config/versions.ts only, never written in a workflow:
 * every entry whose image lives under `REGISTRY` is ours and must name its Dockerfile; its tag is the `version`
 * the Pulumi program deploys.
 *
 * Prints the matrix `[{ name, dockerfile, image, tag }]` as JSON. In GitHub Actions (`GITHUB_OUTPUT` set) it also
 * writes there `images` (the matrix), `registry` (the host to log in to) and `changed` (names of the images whose
 * build inputs changed between `--base` and HEAD: the Dockerfile, its `.dockerignore`, or a file that reaches the
 * build context; every image when the base cannot be diffed, none without `--base`). tools/image-guard.sh uses
 * `changed` to refuse a change to an image whose tag is already published.
 */
import * as fs from "node:fs";
import { exitOnHelp } from "./cli";
import * as path from "node:path";
import { REGISTRY, versions } from "../config/versions";
import { changedFiles } from "./ci-stacks";

const ROOT = path.join(__dirname, "..");

/** One image of ours: a row of the images.yml matrix. */
export interface ImageBuild {
    /** Last segment of the repository (`platform-auth`): job names and build-cache scopes. */
    name: string;
    /** Repo-relative Dockerfile; the build context is the repository root. */
    dockerfile: string;
    /** Repository without tag, under {@link REGISTRY}. */
    image: string;
    /** The tag the Pulumi program deploys (the entry's `version` in config/versions.ts). */
    tag: string;
}

/** Docker's tag grammar (distribution/reference). */
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * Every image of ours in a versions table: entries (at any depth) with a string `image`, optionally prefixed by
 * `repository`, that lives under `registry`. Sorted by name.
 * @param table the versions table (default: config/versions.ts)
 * @param registry the registry prefix of our images (default: {@link REGISTRY})
 * @param root repository root the Dockerfile paths are checked against
 * @throws when an entry of ours has no Dockerfile, a missing Dockerfile, no valid `version`, or a name another
 *   image already has; or when an entry names a Dockerfile but its image is not under `registry`
 */
export function imageMatrix(table: unknown = versions, registry: string = REGISTRY, root: string = ROOT): ImageBuild[] {
    const prefix = `${registry.replace(/\/+$/, "")}/`;
    const found: ImageBuild[] = [];
    const walk = (node: unknown, at: string): void => {
        if (!node || typeof node !== "object") return;
        const e = node as Record<string, unknown>;
        if (typeof e.image === "string") {
            const image = typeof e.repository === "string" ? `${e.repository}/${e.image}` : e.image;
            if (!image.startsWith(prefix)) {
                if (e.dockerfile !== undefined)
                    throw new Error(
                        `versions.${at}: names a dockerfile but its image ${image} is not under ${registry} (REGISTRY in config/versions.ts)`,
                    );
                return;
            }
            if (typeof e.dockerfile !== "string")
                throw new Error(
                    `versions.${at}: image ${image} is under ${registry}, so it is ours and must name its Dockerfile (dockerfile: "services/<name>/Dockerfile")`,
                );
            if (!fs.existsSync(path.join(root, e.dockerfile))) throw new Error(`versions.${at}: dockerfile ${e.dockerfile} does not exist`);
            if (typeof e.version !== "string" || !TAG.test(e.version))
                throw new Error(`versions.${at}: version ${JSON.stringify(e.version)} is not a valid image tag`);
            found.push({ name: image.slice(image.lastIndexOf("/") + 1), dockerfile: e.dockerfile, image, tag: e.version });
            return;
        }
        for (const [k, v] of Object.entries(e)) walk(v, at ? `${at}.${k}` : k);
    };
    walk(table, "");
    const names = new Map<string, string>();
    for (const b of found) {
        if (names.has(b.name)) throw new Error(`images ${names.get(b.name)} and ${b.image} share the name ${b.name}`);
        names.set(b.name, b.image);
    }
    return found.sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * The registry host to log in to: the first segment of the prefix, which must be a host (`ghcr.io`, `host:port`,
 * `localhost`), not a Docker Hub namespace.
 */
export function registryHost(registry: string = REGISTRY): string {
    const host = registry.split("/")[0];
    if (!/[.:]/.test(host) && host !== "localhost")
        throw new Error(`REGISTRY ${registry} must start with a registry host (e.g. ghcr.io/<org>)`);
    return host;
}

/**
 * The ignore file BuildKit uses for a Dockerfile: `<Dockerfile>.dockerignore` next to it, else `.dockerignore` at
 * the context root, else none (null).
 */
export function dockerignoreFile(dockerfile: string, root: string = ROOT): string | null {
    for (const f of [`${dockerfile}.dockerignore`, ".dockerignore"]) if (fs.existsSync(path.join(root, f))) return f;
    return null;
}

/** Patterns of a Dockerfile's ignore file (comments and blank lines dropped); none without one. */
export function dockerignorePatterns(dockerfile: string, root: string = ROOT): string[] {
    const f = dockerignoreFile(dockerfile, root);
    if (!f) return [];
    return fs
        .readFileSync(path.join(root, f), "utf8")
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("#"));
}

/** A .dockerignore pattern as an anchored regular expression (`**` any depth, `*` and `?` within a segment). */
function patternRegex(pattern: string): RegExp {
    const p = pattern
        .replace(/^\/+/, "")
        .replace(/^(\.\/)+/, "")
        .replace(/\/+/g, "/")
        .replace(/\/$/, "");
    let re = "";
    for (let i = 0; i < p.length; i++) {
        const c = p[i];
        if (c === "*" && p[i + 1] === "*") {
            i++;
            if (p[i + 1] === "/") {
                i++;
                re += "(?:.*/)?";
            } else re += ".*";
        } else if (c === "*") re += "[^/]*";
        else if (c === "?") re += "[^/]";
        else if (c === "[" || c === "]") re += c;
        else re += c.replace(/[.+^${}()|\\]/g, "\\$&");
    }
    return new RegExp(`^${re}$`);
}

/**
 * Whether a repo-relative path reaches the build context under .dockerignore patterns: the last pattern that
 * matches the path or one of its parent directories decides, `!` re-includes (moby/patternmatcher rules).
 */
export function inContext(file: string, patterns: string[]): boolean {
    const parts = file.replace(/^\.\//, "").replace(/\/$/, "").split("/");
    const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join("/"));
    let excluded = false;
    for (const raw of patterns) {
        const negated = raw.startsWith("!");
        const re = patternRegex(negated ? raw.slice(1).trim() : raw);
        if (prefixes.some((p) => re.test(p))) excluded = !negated;
    }
    return !excluded;
}

/**
 * Names of the images whose build inputs a change touches: the Dockerfile, its ignore file, or any file that
 * reaches its build context (deleted files count: removing one changes the image).
 * @param changed repo-relative paths (forward slashes), e.g. from `git diff --name-only`
 */
export function affectedImages(changed: string[], matrix: ImageBuild[], root: string = ROOT): string[] {
    return matrix
        .filter((b) => {
            const ignore = dockerignoreFile(b.dockerfile, root);
            const patterns = dockerignorePatterns(b.dockerfile, root);
            return changed.some((f) => f === b.dockerfile || f === ignore || inContext(f, patterns));
        })
        .map((b) => b.name);
}

const HELP = `
usage: npm run images [-- --base REF]

The container images this repository builds (the matrix of .github/workflows/images.yml), derived from
config/versions.ts: every image under our registry, its Dockerfile and the tag the program deploys. Prints the
matrix as JSON; in GitHub Actions also writes \`images\`, \`registry\` and \`changed\` (images whose build inputs
changed since REF) to GITHUB_OUTPUT.

Options:
  --base REF   also say which images' build inputs changed between REF and HEAD
  -h, --help   this text

Examples:
  npm run images
  npm run images -- --base origin/main
`;

function main() {
    const argv = process.argv.slice(2);
    exitOnHelp(argv, HELP);
    let base: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--base" && argv[i + 1] !== undefined) base = argv[++i];
        else throw new Error(`unknown argument ${argv[i]} (usage: images [--base <ref>])`);
    }
    const matrix = imageMatrix();
    let changed: string[] = [];
    if (base !== undefined) {
        let files: string[] | undefined;
        if (base && !/^0+$/.test(base)) {
            try {
                files = changedFiles(base, ROOT);
            } catch (e) {
                process.stderr.write(
                    `images: cannot diff against ${base} (${(e as Error).message.split("\n")[0]}); treating every image as changed\n`,
                );
            }
        } else process.stderr.write(`images: no base commit; treating every image as changed\n`);
        changed = files ? affectedImages(files, matrix) : matrix.map((b) => b.name);
    }
    if (process.env.GITHUB_OUTPUT) {
        const out = { images: matrix, registry: registryHost(), changed };
        fs.appendFileSync(
            process.env.GITHUB_OUTPUT,
            Object.entries(out)
                .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}\n`)
                .join(""),
        );
    }
    process.stdout.write(`${JSON.stringify(matrix)}\n`);
}

if (require.main === module) {
    try {
        main();
    } catch (e) {
        process.stderr.write(`images: ${(e as Error).message}\n`);
        process.exit(1);
    }
}
