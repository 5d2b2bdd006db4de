// `npm run lint:workflows [-- file.yml ...]`: validates GitHub Actions workflows with GitHub's own workflow
// parser (@actions/workflow-parser, from github.com/actions/languageservices: the schema and expression checks
// the Actions VS Code extension uses). Default: every .github/workflows/*.yml. Exit 1 on any error.
//
// The parser's ESM build imports its JSON schema without an import attribute, which Node (20 and later) refuses; a loader
// hook (registered below, before the parser is imported) supplies `type: "json"` for .json modules.
import { register } from "node:module";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

if (process.argv.includes("--help") || process.argv.includes("-h")) {
    process.stdout.write(`usage: npm run lint:workflows [-- file.yml ...]

Validates GitHub Actions workflows with GitHub's own workflow parser (@actions/workflow-parser): schema,
expressions, job graph. Default: every .github/workflows/*.yml. Exit 1 on any error.

Examples:
  npm run lint:workflows
  npm run lint:workflows -- .github/workflows/preview.yml
`);
    process.exit(0);
}

const hook = `export async function load(url, context, next) {
  if (url.endsWith(".json") && !context.importAttributes?.type) {
    return next(url, { ...context, importAttributes: { ...context.importAttributes, type: "json" } });
  }
  return next(url, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hook)}`);
const { parseWorkflow, convertWorkflowTemplate, NoOperationTraceWriter } = await import("@actions/workflow-parser");

/** Errors of one workflow file (schema, expressions, job graph), as `file (Line: n, Col: m): message`. */
export async function lintWorkflow(name, content) {
    const parsed = parseWorkflow({ name, content }, new NoOperationTraceWriter());
    const errors = parsed.context.errors.getErrors().map((e) => e.message);
    if (errors.length === 0 && parsed.value) {
        const template = await convertWorkflowTemplate(parsed.context, parsed.value);
        for (const e of template.errors ?? []) errors.push(e.Message);
    }
    return [...new Set(errors)];
}

const dir = ".github/workflows";
const files = process.argv.slice(2).length
    ? process.argv.slice(2)
    : readdirSync(dir)
          .filter((f) => /\.ya?ml$/.test(f))
          .sort()
          .map((f) => join(dir, f));
let failed = 0;
for (const f of files) {
    const errors = await lintWorkflow(relative(process.cwd(), f), readFileSync(f, "utf8"));
    if (errors.length) {
        failed++;
        for (const e of errors) process.stdout.write(`${e}\n`);
    } else process.stdout.write(`${relative(process.cwd(), f)}: ok\n`);
}
process.exit(failed ? 1 : 0);
