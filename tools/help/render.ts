/**
 * `npm run render -- --help` (tools/render.ts imports this module first, so help needs none of the render's modules).
 */
import * as path from "node:path";
import { exitOnHelpFirst } from "../cli";

export const HELP = `
usage: npm run render [-- <stack>...] [--config FILE] [--stacks DIR] [--preview] [--out DIR] [--diff REF]

Renders stacks offline, through the Pulumi SDK with the engine mocked (no cloud, no Pulumi CLI), into out/<stack>/:
manifests.yaml, resources.json, policy.json, outputs.json, report.md and its picture. Hubs render before their
spokes. A bad stack file fails itself and the stacks that depend on it, never another stack's out/.
Exit 1 on a config error, a mandatory policy violation or an upstream-check finding.

Options:
  <stack>...      render only these stacks (and the hubs they reference)
  --config FILE   render this stack file too (one kept outside stacks/)
  --stacks DIR    read the stack files from DIR instead of stacks/ (try a change on a copy); the output goes
                  beside it, to DIR/../out, unless --out says otherwise
  --preview       render as \`pulumi preview\` sees it (values computed at deploy time unknown)
  --out DIR       write to DIR instead of out/
  --diff REF      also render git REF and write out/diff.md: what changed in the stack files, its effect on
                  capacity and placement, then the rendered objects
  -h, --help      this text

Examples:
  npm run render                                  every stack under stacks/ (about 10 s)
  npm run render -- spoke-hn1                     one spoke and its hub
  npm run render -- --diff origin/main            what a pull request changes, as CI renders it
  npm run render -- --config ~/Pulumi.spoke-dn1.yaml
`;

exitOnHelpFirst(path.join(__dirname, "..", "render.ts"), HELP);
