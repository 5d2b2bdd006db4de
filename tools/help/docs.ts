/**
 * `npm run docs -- --help` (tools/docs.ts imports this module first, so help needs none of its other modules).
 */
import * as path from "node:path";
import { exitOnHelpFirst } from "../cli";

export const HELP = `
usage: npm run docs [-- --check]

Writes docs/stack-file.md, the reference of every stack-file key (type, required or default, description),
generated from the zod schemas in config/ and the TSDoc comments above each key.

Options:
  --check      write nothing; exit 1 when docs/stack-file.md is not what the schemas say
  -h, --help   this text

Examples:
  npm run docs
  npm run docs -- --check
`;

exitOnHelpFirst(path.join(__dirname, "..", "docs.ts"), HELP);
