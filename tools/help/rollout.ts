/**
 * `npm run rollout -- --help` (tools/rollout.ts imports this module first, so help needs none of its other modules).
 */
import * as path from "node:path";
import { exitOnHelpFirst } from "../cli";

export const HELP = `
usage: npm run rollout -- <status|advance|promote|hold|resume|abort> <[spoke/]endpoint> [options]

Drives a gated canary rollout of one endpoint (docs/rollout.md). Each command that moves the rollout writes the
next state into the hub stack file's platform:endpoints[].rollout (comments kept); review the diff, run
\`pulumi preview\` with the policy pack, then \`pulumi up\` the hub and the spoke. Nothing is deployed by this command.

  status    the rollout's phase, step, weights and last gate verdict; with --prometheus also the gate now (no write)
  advance   warming: health gate (the target's workers registered), then the first step's traffic;
            a step below 100%: waits (exit 3) until the spoke serves the step (the target's frontend answers the
            step's share of the requests, not merely the hub file written), then the gate compares the target with
            the source over the step's traffic from then on: pass writes the next step, a regression or missing
            series holds with what was measured, too few samples or too short a window waits (exit 3);
            the 100% step: the promotion soak (as promote)
  promote   the 100% step only (the source carries no traffic): the target alone over gate.promotion.soakSeconds
            of its traffic (error rate, optional TTFT/ITL bounds, minRequests); pass promotes: the endpoint takes the
            target's settings and revision, its graph keeps its name, the rollout block and the source graph go
  hold      stops the rollout where it is (--reason) until a person resumes or aborts
  resume    lifts a hold; the current step's window starts again
  abort     traffic back to the source first (both graphs stay); run again once applied to remove the target

Options:
  --hub STACK|FILE   hub stack name (stacks/Pulumi.<STACK>.yaml) or stack file path (default hub-prod)
  --prometheus URL   the endpoint's spoke Prometheus HTTP API (e.g. a port-forward of kube-prometheus-stack-prometheus)
  --reason TEXT      why (hold)
  --now ISO          evaluation time (default now; for rehearsals against recorded series)

Exit codes: 0 moved or nothing to do, 1 refused or bad input, 2 held, 3 waiting for more traffic.

Examples:
  npm run rollout -- status hcm1/qwen3-32b
  npm run rollout -- advance hcm1/qwen3-32b --prometheus http://127.0.0.1:9090
  npm run rollout -- promote hcm1/qwen3-32b --prometheus http://127.0.0.1:9090
  npm run rollout -- hold hcm1/qwen3-32b --reason "longer answers under review"
  npm run rollout -- abort hcm1/qwen3-32b
`;

exitOnHelpFirst(path.join(__dirname, "..", "rollout.ts"), HELP);
