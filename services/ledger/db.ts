import type { Client, ClientConfig } from "pg";

/**
 * Bounds for every ledger connection (consumer Lambda, reconciliation, status). PostgreSQL and `pg` (8.23)
 * enforce different halves:
 * - `connectionTimeoutMillis` (pg `Client.connect`: the socket is destroyed when the server is not ready in time);
 * - `query_timeout` (pg, client side: the query is rejected when no reply arrives in time; the one bound that
 *   holds on a *silent* network, where the server never hears of the query); the client must then be
 *   discarded ({@link discardClient}): pg leaves the timed-out query as the connection's active query;
 * - `statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout` (server side, sent in the startup
 *   packet; PostgreSQL docs "Client Connection Defaults"): a slow statement is cancelled (SQLSTATE 57014), a
 *   transaction left open by a vanished client is ended, so it never holds locks on `usage_hourly` rows;
 * - `keepAlive` + `keepAliveInitialDelayMillis` (TCP keepalive on the socket): an idle pooled connection to a
 *   host that is gone errors instead of waiting for the kernel's default (~2 h).
 * `query_timeout` is above `statement_timeout`, so a slow-but-alive server answers with its own error first.
 */
export interface LedgerBounds {
    connectionTimeoutMillis: number;
    query_timeout: number;
    statement_timeout: number;
    lock_timeout: number;
    idle_in_transaction_session_timeout: number;
    keepAlive: true;
    keepAliveInitialDelayMillis: number;
}

/** Defaults: a Kinesis batch of 500 events ingests in tens of ms; 20 s means the server is in trouble. */
export const LEDGER_PG_BOUNDS: LedgerBounds = {
    connectionTimeoutMillis: 5_000,
    query_timeout: 25_000,
    statement_timeout: 20_000,
    lock_timeout: 10_000,
    idle_in_transaction_session_timeout: 30_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
};

/** `base` with the ledger bounds (overridable per field, e.g. shorter in tests). */
export function boundedPgConfig(base: ClientConfig, over: Partial<LedgerBounds> = {}): ClientConfig {
    return { ...base, ...LEDGER_PG_BOUNDS, ...over };
}

/**
 * Drops a client after an error without waiting on the peer: `end()` waits for the server to close the
 * connection, which a silent network never does. Destroys the socket; resolves at once.
 */
export function discardClient(client: Client): void {
    const c = client as unknown as { connection?: { stream?: { destroy(): void } } };
    try {
        c.connection?.stream?.destroy();
    } catch {
        /* already gone */
    }
    client.end().catch(() => undefined);
}
