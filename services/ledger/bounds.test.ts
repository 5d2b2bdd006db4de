import { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSilentProxy, type SilentProxy } from "../shared/testing/silent-proxy";
import { boundedPgConfig, discardClient, LEDGER_PG_BOUNDS } from "./db";
import { startPostgres, type TestPostgres } from "./testing/postgres";

/**
 * Ledger connections are bounded on a silent network (a loopback proxy that holds connections open and answers
 * nothing) and against a slow server; after the heal a new connection works at once.
 */
let pg: TestPostgres;
let proxy: SilentProxy;
beforeAll(async () => {
    pg = await startPostgres();
    proxy = await startSilentProxy({ host: "127.0.0.1", port: pg.port });
});
afterAll(async () => {
    await proxy?.close();
    await pg?.stop();
});

const cfg = () =>
    boundedPgConfig(
        { host: "127.0.0.1", port: proxy.port, user: "ledger", database: "ledger" },
        { connectionTimeoutMillis: 800, query_timeout: 1000, statement_timeout: 500 },
    );

describe("bounded PostgreSQL", () => {
    it("defaults: client-side query timeout above the server's statement timeout, TCP keepalive on", () => {
        expect(LEDGER_PG_BOUNDS.query_timeout).toBeGreaterThan(LEDGER_PG_BOUNDS.statement_timeout);
        expect(LEDGER_PG_BOUNDS.keepAlive).toBe(true);
        expect(LEDGER_PG_BOUNDS.idle_in_transaction_session_timeout).toBeGreaterThan(0);
    });

    it("a slow statement is cancelled by the server (statement_timeout, SQLSTATE 57014)", async () => {
        const c = new Client(cfg());
        await c.connect();
        await expect(c.query("SELECT pg_sleep(3)")).rejects.toMatchObject({ code: "57014" });
        expect((await c.query("SHOW idle_in_transaction_session_timeout")).rows[0].idle_in_transaction_session_timeout).toBe("30s");
        await c.end();
    });

    it("silent network: a query fails within query_timeout, a connect within connectionTimeoutMillis; after the heal a new client works", async () => {
        const c = new Client(cfg());
        await c.connect();
        expect((await c.query("SELECT 1 AS one")).rows[0].one).toBe(1);
        proxy.silence();
        let t = Date.now();
        await expect(c.query("SELECT 2")).rejects.toThrow("Query read timeout");
        expect(Date.now() - t).toBeLessThan(2500);
        discardClient(c);
        t = Date.now();
        const d = new Client(cfg());
        await expect(d.connect()).rejects.toThrow();
        expect(Date.now() - t).toBeLessThan(2500);
        proxy.heal();
        t = Date.now();
        const e = new Client(cfg());
        await e.connect();
        expect((await e.query("SELECT 3 AS three")).rows[0].three).toBe(3);
        expect(Date.now() - t).toBeLessThan(1000);
        await e.end();
    });
});
