import * as net from "node:net";

/**
 * A loopback TCP proxy that simulates a *silent* network partition for tests and `npm run chaos`.
 *
 * Healthy: every accepted connection is forwarded byte for byte to `target`. {@link SilentProxy.silence}:
 * every open connection stops forwarding in both directions (bytes are read and dropped) but stays open, and
 * new connections are accepted and held the same way — the client's kernel sees a live TCP peer (its
 * keepalive probes are answered by this process's kernel), so only an application-level reply deadline can
 * notice. {@link SilentProxy.heal}: new connections forward again; connections that were silenced stay
 * silent until their client closes them, as after a partition during which the peer dropped its state (the
 * worst case: nothing ever comes back on the old socket, so the client must replace it).
 */
export interface SilentProxy {
    /** Port the proxy listens on (127.0.0.1). */
    readonly port: number;
    /** `http://127.0.0.1:<port>` (for clients that take an endpoint URL). */
    readonly endpoint: string;
    /** Connections accepted so far (tests: a client that reconnected after the heal). */
    readonly accepted: number;
    /** Stops forwarding on every connection, open and new; connections stay open. */
    silence(): void;
    /** New connections forward again; silenced ones stay black-holed. */
    heal(): void;
    /** Whether the proxy is silent now. */
    readonly silent: boolean;
    /** Client connections currently open (held or forwarding). */
    readonly openConnections: number;
    /** Closes the listener and every connection. */
    close(): Promise<void>;
}

interface Link {
    client: net.Socket;
    upstream?: net.Socket;
    silenced: boolean;
}

/**
 * Starts a {@link SilentProxy} on 127.0.0.1 (a free port unless `port` is given) in front of `target`.
 * @throws when the port cannot be bound.
 */
export async function startSilentProxy(target: { host?: string; port: number }, port = 0): Promise<SilentProxy> {
    const host = target.host ?? "127.0.0.1";
    const links = new Set<Link>();
    let silent = false;
    let accepted = 0;
    const server = net.createServer((client) => {
        accepted++;
        const link: Link = { client, silenced: silent };
        links.add(link);
        const drop = () => {
            links.delete(link);
            client.destroy();
            link.upstream?.destroy();
        };
        client.on("error", drop);
        client.on("close", drop);
        client.on("data", (d) => {
            if (!link.silenced) link.upstream?.write(d);
        });
        if (link.silenced) return;
        const upstream = net.connect(target.port, host);
        link.upstream = upstream;
        upstream.on("data", (d) => {
            if (!link.silenced) client.write(d);
        });
        // A partition hides the peer's close as well as its data.
        upstream.on("error", () => {
            if (!link.silenced) drop();
        });
        upstream.on("close", () => {
            if (!link.silenced) drop();
        });
    });
    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => {
            server.off("error", reject);
            resolve();
        });
    });
    const bound = (server.address() as net.AddressInfo).port;
    return {
        port: bound,
        endpoint: `http://127.0.0.1:${bound}`,
        get accepted() {
            return accepted;
        },
        get silent() {
            return silent;
        },
        get openConnections() {
            return links.size;
        },
        silence() {
            silent = true;
            for (const l of links) l.silenced = true;
        },
        heal() {
            silent = false;
        },
        close() {
            for (const l of links) {
                l.client.destroy();
                l.upstream?.destroy();
            }
            links.clear();
            return new Promise((resolve) => server.close(() => resolve()));
        },
    };
}
