/**
 * `npm run status -- --help` (tools/status.ts imports this module first, so help needs none of its other modules).
 */
import * as path from "node:path";
import { exitOnHelpFirst } from "../cli";

export const HELP = `
usage: npm run status [-- --hub STACK] [--outputs FILE] [--s3-endpoint URL] [--max-behind-seconds N]
                      [--window-hours N] [--json] [--local] [--ledger-function NAME] [--region REGION]
                      [--lambda-endpoint URL] [--access-log-bucket NAME]

Where each spoke stands, read from the hub's own state (never from a spoke): the policy bundle revision the hub
published and the one the spoke ACKed, usage lag, quarantined usage, the last reconciliation, and a reconciliation
over the last --window-hours computed now; then every rollout in flight (endpoint, revision, step, weights, last
gate verdict; drive one with npm run rollout, docs/rollout.md). It also checks that the policy bucket's S3 server
access logs still arrive (a log object in the last 24 h in <namePrefix>-s3-access-logs-<account>-<region>); on a new
hub, with no log ever, the log bucket created less than 24 h ago (S3 ListBuckets, s3:ListAllMyBuckets) and the
policy bucket's logging still going there as the hub set it (S3 GetBucketLogging, s3:GetBucketLogging: that target
bucket, prefix policy-bundles/, keys partitioned by event time), it says it is waiting for the first ones instead.
Exit 1 when a spoke has a problem (no bundle published, behind, usage events that never reached the ledger) or those
logs stopped (or when logging started cannot be told, or the logging is off, goes elsewhere or cannot be read); 2 on
a usage error.

Hub outputs come from \`pulumi stack output --json --stack <hub>\` (Pulumi CLI and backend) or --outputs FILE:
that JSON, taken yourself (the file is not signed, and status trusts the bucket names, owner account and ledger
function it gives); out/<hub>/outputs.json of the offline render is for --local only. The policy bucket: the AWS SDK's default credentials.
The ledger has no route from outside its VPC: the status invokes the hub's ledger Lambda (hub output
usageLedger.opsFunction; lambda:InvokeFunction, which the hub deployers hold), which reads it as ledger_reporter.
With DATABASE_URL or PGHOST set it connects to that database instead (a ledger you can reach, e.g. a restored copy).

Options:
  --hub STACK              hub stack (default hub-prod)
  --outputs FILE           hub outputs JSON instead of asking Pulumi
  --s3-endpoint URL        an S3-compatible server instead of AWS S3
  --max-behind-seconds N   how long a spoke may serve an older revision (default 900)
  --window-hours N         reconciliation window (default 24)
  --ledger-function NAME   the ledger Lambda instead of hub output usageLedger.opsFunction
  --region REGION          the ledger Lambda's region (default: the output's, then AWS_REGION)
  --lambda-endpoint URL    a Lambda-compatible server instead of AWS Lambda
  --access-log-bucket NAME the hub's access log bucket, when not named after its policy bucket
  --json                   rows as JSON
  --local                  try it with no hub: starts a throwaway PostgreSQL (ledger schema) and S3 stand-in
                           (s3rver) on loopback, writes sample revisions, ACKs and usage for the spokes of
                           --outputs (default out/hub-prod/outputs.json, from npm run render), runs the status
                           against them, and removes them again; it skips the access-log check (no hub, no
                           logging to read)
  -h, --help               this text

Examples:
  npm run render && npm run status -- --local
  npm run status -- --hub hub-prod
  DATABASE_URL=postgres://... npm run status -- --outputs hub-outputs.json --json
`;

exitOnHelpFirst(path.join(__dirname, "..", "status.ts"), HELP);
