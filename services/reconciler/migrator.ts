import { Client } from "pg";
import { migrate, schemaSql } from "../ledger/ledger";
import { applyRoles } from "./roles";
import { loadMigratorEnv } from "./config";
import { secretString } from "./secrets";

/**
 * Ledger migrator Lambda (hub), invoked by `pulumi up` (aws.lambda.Invocation in components/hub/UsageLedger.ts)
 * whenever the schema or this code changes, before the consumer's event source mappings exist: connects as the
 * master user (password from the RDS-managed, RDS-rotated secret, read at each run), applies
 * services/ledger/schema.sql and the two least-privilege login roles (services/reconciler/roles.ts). The consumer
 * itself runs no DDL.
 *
 * Environment: services/reconciler/config.ts `MIGRATOR_ENV`.
 */
export async function handler(event: { schemaSha256?: string } = {}): Promise<{ ok: true; schemaSha256?: string }> {
    const env = loadMigratorEnv(process.env);
    const master = JSON.parse(await secretString(env.MASTER_SECRET_ARN)) as { username: string; password: string };
    const client = new Client({
        host: env.PGHOST,
        port: env.PGPORT,
        database: env.PGDATABASE,
        user: master.username,
        password: master.password,
        ssl: { rejectUnauthorized: true },
        connectionTimeoutMillis: 10_000,
    });
    await client.connect();
    try {
        await migrate(client, schemaSql());
        await applyRoles(
            client,
            {
                ingest: await secretString(env.INGEST_SECRET_ARN),
                reporter: await secretString(env.REPORTER_SECRET_ARN),
            },
            (s) => client.escapeLiteral(s),
        );
    } finally {
        await client.end().catch(() => undefined);
    }
    console.log(JSON.stringify({ msg: "ledger migrated", schemaSha256: event.schemaSha256 }));
    return { ok: true, schemaSha256: event.schemaSha256 };
}
