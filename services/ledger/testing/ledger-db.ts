import type { Client } from "pg";
import { afterAll, beforeAll } from "vitest";
import { migrate } from "../ledger";
import { startPostgres, type TestPostgres } from "./postgres";

/**
 * For a test file: a throwaway PostgreSQL server with the ledger schema, started before the file's tests and
 * stopped after them. Returns a handle whose `db` is the connected client and whose `connect()` opens another
 * connection (both valid inside tests and hooks).
 */
export function useLedgerDb(): { readonly db: Client; connect(): Promise<Client> } {
    let pg: TestPostgres | undefined;
    let db: Client | undefined;
    beforeAll(async () => {
        pg = await startPostgres();
        db = await pg.connect();
        await migrate(db);
    });
    afterAll(async () => {
        await db?.end();
        await pg?.stop();
    });
    return {
        get db(): Client {
            if (!db) throw new Error("useLedgerDb: the database is only available inside tests and hooks");
            return db;
        },
        connect(): Promise<Client> {
            if (!pg) throw new Error("useLedgerDb: the database is only available inside tests and hooks");
            return pg.connect();
        },
    };
}
