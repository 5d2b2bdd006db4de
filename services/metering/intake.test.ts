import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, MeteringService } from "./service";
import { Spool } from "./spool";

/**
 * The OTLP intake is bounded: a sender that stalls (slow-loris headers, a body that never finishes) is cut off
 * by Node's `headersTimeout` / `requestTimeout` (answered 408, connection closed), and a body over the limit is
 * refused with 413, so a bad collector cannot pin sockets or memory of the metering service.
 */
let dir: string;
let spool: Spool;
let server: ReturnType<typeof createServer>;
let port: number;
beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "intake-"));
    spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
    const svc = new MeteringService({ spoke: "hn1", spool });
    server = createServer(svc, spool, {
        maxSpoolBytes: 1 << 20,
        maxBodyBytes: 64 * 1024,
        headersTimeoutMs: 500,
        requestTimeoutMs: 1000,
        keepAliveTimeoutMs: 500,
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await spool.close();
    fs.rmSync(dir, { recursive: true, force: true });
});

/** Opens a raw connection, writes `data`, and resolves with what came back and when the server closed it. */
function raw(data: string, waitMs = 5000): Promise<{ reply: string; closedAfterMs: number }> {
    return new Promise((resolve) => {
        const t0 = Date.now();
        let reply = "";
        const s = net.connect(port, "127.0.0.1", () => s.write(data));
        s.on("data", (b) => {
            reply += b.toString();
        });
        const done = () => {
            clearTimeout(timer);
            resolve({ reply, closedAfterMs: Date.now() - t0 });
        };
        s.on("close", done);
        s.on("error", () => undefined);
        const timer = setTimeout(() => {
            s.destroy();
        }, waitMs);
    });
}

describe("bounded OTLP intake", () => {
    it("headers that never finish: the connection is closed within the headers timeout", async () => {
        const r = await raw("POST /v1/logs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n");
        expect(r.closedAfterMs).toBeLessThan(2500);
        expect(r.reply).toMatch(/^HTTP\/1\.1 408/);
    });

    it("a body that never finishes: 408 within the request timeout", async () => {
        const r = await raw(
            'POST /v1/logs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"resourceLogs":',
        );
        expect(r.closedAfterMs).toBeLessThan(3000);
        expect(r.reply).toMatch(/^HTTP\/1\.1 408/);
    });

    it("an idle keep-alive connection is closed after the keep-alive timeout", async () => {
        const r = await raw("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
        expect(r.reply).toMatch(/^HTTP\/1\.1 200/);
        expect(r.closedAfterMs).toBeLessThan(2500);
    });

    it("a body over the limit is refused with 413", async () => {
        const res = await fetch(`http://127.0.0.1:${port}/v1/logs`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: "x".repeat(100 * 1024),
        });
        expect(res.status).toBe(413);
    });
});
