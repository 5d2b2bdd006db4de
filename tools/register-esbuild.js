/**
 * `node -r ./tools/register-esbuild.js <file.ts>`: runs TypeScript by transpiling each `.ts` file with esbuild
 * (a pinned dependency) as it is required, in place, so `__dirname` and relative paths stay what they are in the
 * source tree. No type-check (that is `npm run typecheck`).
 *
 * Why not ts-node here: ts-node loads Node's `repl`, which loads `domain`, and with `domain` loaded every
 * EventEmitter and every `emit` takes the domain-aware path (node:domain `EventEmitter.init`, `emit`). The
 * services run as compiled JavaScript without it (services/auth/Dockerfile), so the benchmarks must too, or they
 * measure a per-request cost production does not have.
 */
const esbuild = require("esbuild");
const fs = require("node:fs");

require.extensions[".ts"] = (module, filename) => {
    const { code } = esbuild.transformSync(fs.readFileSync(filename, "utf8"), {
        loader: "ts",
        format: "cjs",
        target: "node20",
        sourcemap: "inline",
        sourcefile: filename,
    });
    module._compile(code, filename);
};
