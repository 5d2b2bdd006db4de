import { Client } from "pg";
import { boundedPgConfig } from "./db";
import { formatReport, reconcile } from "./reconcile";

/**
 * Reconciliation report from the command line (read-only):
 *   node -r ts-node/register/transpile-only services/ledger/report.ts [--spoke hn1] [--from 2026-11-29T00:00Z] [--to ...] [--json]
 * Connection from the standard libpq variables (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE) or
 * DATABASE_URL. Exits 2 when any spoke-hour has missing events, so a scheduler can alert on it.
 */
async function main(argv: string[]): Promise<number> {
    const opt = (k: string) => {
        const i = argv.indexOf(`--${k}`);
        return i >= 0 ? argv[i + 1] : undefined;
    };
    const db = new Client(boundedPgConfig(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {}));
    await db.connect();
    try {
        const rows = await reconcile(db, { spoke: opt("spoke"), from: opt("from"), to: opt("to") });
        process.stdout.write(argv.includes("--json") ? `${JSON.stringify(rows, null, 2)}\n` : formatReport(rows));
        return rows.some((r) => r.missing > 0) ? 2 : 0;
    } finally {
        await db.end();
    }
}

if (require.main === module) {
    main(process.argv.slice(2)).then(
        (code) => process.exit(code),
        (e) => {
            process.stderr.write(`report: ${(e as Error).message}\n`);
            process.exit(1);
        },
    );
}
