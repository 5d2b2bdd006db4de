import * as path from "node:path";

/**
 * `node -r <this>` runs a TypeScript entry point through the repository's esbuild loader (tools/register-esbuild.js):
 * what the tests spawn (renders, tools, services). It starts and renders a whole stack in about half the time of
 * `ts-node/register/transpile-only` with the same output, and loads no `domain` (production runs compiled
 * JavaScript without it).
 */
export const ESBUILD_LOADER = path.join(__dirname, "..", "tools", "register-esbuild.js");
