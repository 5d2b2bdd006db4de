/**
 * `node -r ./tools/register-esbuild.js <file.ts>`: runs TypeScript by transpiling each `.ts` file with esbuild
 * (a pinned dependency) as it is required, in place, so `__dirname` and relative paths stay what they are in the
 * source tree. No type-check (that is `npm run typecheck`).
 *
 * Why not ts-node here: ts-node loads Node's `repl`, which loads `domain`, and with `domain` loaded every
 * EventEmitter and every `emit` takes the domain-aware path (node:domain `EventEmitter.init`, `emit`). The
 * services run as compiled JavaScript without it (services/auth/Dockerfile), so the benchmarks must too, or they
 * measure a per-request cost production does not have.
 *
 * Transpiled files are kept in a content-keyed cache (`<tmpdir>/platform-esbuild-<esbuild version>/`, keyed by the
 * SHA-256 of the file's path and text and the options below), so a process started again (the tests start the
 * render, the tools and the services many times) reads each unchanged file's JavaScript instead of calling esbuild.
 * A changed file has a new key; `PLATFORM_ESBUILD_CACHE=0` turns the cache off.
 */
const esbuild = require("esbuild");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const OPTIONS = { loader: "ts", format: "cjs", target: "node20", sourcemap: "inline" };
const CACHE = process.env.PLATFORM_ESBUILD_CACHE === "0" ? undefined : path.join(os.tmpdir(), `platform-esbuild-${esbuild.version}`);
const OPTIONS_KEY = JSON.stringify(OPTIONS);

/** esbuild's CommonJS output for `filename` (whose text is `source`), from the cache when it holds this exact input. */
function transpile(source, filename) {
    if (!CACHE) return esbuild.transformSync(source, { ...OPTIONS, sourcefile: filename }).code;
    const key = crypto.createHash("sha256").update(OPTIONS_KEY).update("\0").update(filename).update("\0").update(source).digest("hex");
    const file = path.join(CACHE, `${key}.js`);
    try {
        return fs.readFileSync(file, "utf8");
    } catch {
        // Not cached yet (or unreadable): transpile and store it, written whole (rename) so a reader never sees half a file.
    }
    const { code } = esbuild.transformSync(source, { ...OPTIONS, sourcefile: filename });
    try {
        fs.mkdirSync(CACHE, { recursive: true });
        const tmp = `${file}.${process.pid}.tmp`;
        fs.writeFileSync(tmp, code);
        fs.renameSync(tmp, file);
    } catch {
        // A cache that cannot be written (read-only tmpdir) only costs the next process the transpile.
    }
    return code;
}

require.extensions[".ts"] = (module, filename) => {
    module._compile(transpile(fs.readFileSync(filename, "utf8"), filename), filename);
};
