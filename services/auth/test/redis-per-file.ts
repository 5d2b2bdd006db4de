import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { type RedisServer, startRedis } from "./harness";

/**
 * One redis-server for the calling test file, on a free loopback port: started with a client before the file's
 * tests (`onStart` receives both), emptied before each test, stopped with its client after the file. Call at the
 * top level of a test file; a missing redis-server fails the file (harness.ts `startRedis`), never skips it.
 */
export function redisPerFile(onStart: (server: RedisServer, client: Redis) => void): void {
    let server: RedisServer | undefined;
    let client: Redis | undefined;
    beforeAll(async () => {
        server = await startRedis();
        client = new Redis(server.url);
        onStart(server, client);
    });
    afterAll(async () => {
        client?.disconnect();
        await server?.stop();
    });
    beforeEach(async () => {
        await client?.flushall();
    });
}
