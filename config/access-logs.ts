import { z } from "zod";

/**
 * `platform:accessLogs` of the hub: S3 server access logging of the hub's two data buckets (the policy bucket and the
 * usage failure bucket) into a dedicated log bucket the hub creates (components/hub/AccessLogs.ts). Always on: every
 * read, write and ACK of a bundle, and every stored or replayed usage batch, leaves a record that names the caller, so
 * a reviewer can verify it from the hub stack alone, with no organisation CloudTrail trail assumed. Every field has a
 * default. Why server access logs rather than CloudTrail data events: docs/architecture.md ("Audit of the hub's data
 * buckets").
 */
export const AccessLogsConfigSchema = z
    .object({
        /**
         * Days a log object stays in the log bucket before S3 expires it. Default 365 (a year of bundle pulls and
         * replays to look back on); at least 1.
         */
        retentionDays: z.number().int().min(1).max(36500).default(365),
    })
    .strict();

export type AccessLogsConfig = z.infer<typeof AccessLogsConfigSchema>;
