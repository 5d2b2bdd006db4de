import * as net from "net";

/**
 * A loopback TCP proxy that can make a network partition *silent*: connections stay open and nothing comes
 * back, as when a middlebox, a NAT entry or a peer host disappears without a FIN or RST. This is the failure a
 * connect timeout or a refused connection never shows: only an enforced request timeout (and a client that
 * then drops the socket) gets out of it.
 *
 * - `forward` (initial): every connection is piped to `target`.
 * - {@link SilentProxy.silence}: connections open now stop carrying bytes in both directions (their data is
 *   read and discarded, the sockets stay open); new connections are accepted and held, never forwarded.
 * - {@link SilentProxy.heal}: new connections are forwarded again. Connections silenced before stay silent
 *   for ever (the kernel keeps a dead socket; the client must give it up itself).
 */
export interface SilentProxy {
    /** `http://127.0.0.1:<port>` */
    endpoint: string;
    port: number;
    silence(): void;
    heal(): void;
    /** Connections accepted so far (tests: a client that reconnected after the heal). */
    readonly accepted: number;
    close(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1 (free port) in front of `target`. */
export async function startSilentProxy(target: { host: string; port: number }): Promise<SilentProxy> {
    let silent = false;
    let accepted = 0;
    const conns = new Set<{ client: net.Socket; upstream?: net.Socket; silenced: boolean }>();
    const server = net.createServer((client) => {
        accepted++;
        const c: { client: net.Socket; upstream?: net.Socket; silenced: boolean } = { client, silenced: silent };
        conns.add(c);
        client.on("error", () => undefined);
        client.on("close", () => { conns.delete(c); c.upstream?.destroy(); });
        if (c.silenced) { client.on("data", () => undefined); return; }
        const up = net.connect(target.port, target.host);
        c.upstream = up;
        up.on("error", () => client.destroy());
        up.on("close", () => { if (!c.silenced) client.destroy(); });
        client.on("data", (b) => { if (!c.silenced) up.write(b); });
        up.on("data", (b) => { if (!c.silenced) client.write(b); });
    });
    await new Promise<void>((resolve, reject) => { server.once("error", reject); server.listen(0, "127.0.0.1", () => resolve()); });
    const port = (server.address() as net.AddressInfo).port;
    return {
        endpoint: `http://127.0.0.1:${port}`,
        port,
        silence() { silent = true; for (const c of conns) c.silenced = true; },
        heal() { silent = false; },
        get accepted() { return accepted; },
        async close() {
            for (const c of conns) { c.client.destroy(); c.upstream?.destroy(); }
            await new Promise<void>((r) => server.close(() => r()));
        },
    };
}
