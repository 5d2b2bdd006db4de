import * as path from "node:path";
import type { ChaosFigure, ChaosScenario } from "../shared/chaos";
import { IDENTITY_HEADERS } from "../shared/identity";
import { type SilentProxy, startSilentProxy } from "../shared/testing/silent-proxy";
import { type AuthService, startAuthService } from "./server";
import { check } from "./test/client";
import {
    hubKeys,
    type HubKeys,
    makePolicy,
    publishBundle,
    type RedisServer,
    type S3Server,
    startRedis,
    startS3,
    tempDir,
    type TempDir,
    testConfig,
    type TestKey,
} from "./test/harness";

/**
 * The auth service's fault scenarios for `npm run chaos` (tools/chaos.ts). Each starts its own redis-server,
 * s3rver, silent proxy (services/shared/testing/silent-proxy.ts) and auth service on loopback, injects one
 * fault, heals it, and reports the seconds from healing until the service answers correctly again. Every
 * wait is bounded ({@link RECOVERY_LIMIT_MS}); a scenario that does not recover in time throws.
 *
 * The auth service handles no usage events, so `lost` and `doubleCounted` are 0 by construction here; the
 * metering scenarios report the real counts.
 */

/** Longest a scenario waits for recovery before it throws, ms. */
export const RECOVERY_LIMIT_MS = 30_000;
/** Partition length, ms. */
const PARTITION_MS = 3_000;
/** Grant hold of the grant scenario, ms (services/auth/admission.ts; the default is 50). */
const GRANT_HOLD_MS = 200;
/** Poll interval of the S3 scenario, ms (the figure should be at most this). */
const POLL_MS = 1_000;

const MODEL = "Qwen/Qwen3-32B";
const k1: TestKey = { id: "k1", secret: "sk-chaos-one-aaaaaaaa", tenant: "acme", team: "core", models: [MODEL] };
const k2: TestKey = { id: "k2", secret: "sk-chaos-two-bbbbbbbb", tenant: "acme", team: "core", models: [MODEL] };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Rig {
    redis: RedisServer;
    s3: S3Server;
    hub: HubKeys;
    tmp: TempDir;
    proxy: SilentProxy;
    svc: AuthService;
}

/** Starts Redis, S3, a silent proxy in front of `via`, and an auth service whose `via` dependency goes through it. */
async function withRig<T>(via: "redis" | "s3" | "none", env: Record<string, string>, body: (r: Rig) => Promise<T>): Promise<T> {
    const [redis, s3] = await Promise.all([startRedis(), startS3()]);
    const tmp = tempDir("auth-chaos-");
    const hub = hubKeys();
    const spoke = "chaos";
    let proxy: SilentProxy | undefined;
    let svc: AuthService | undefined;
    try {
        await publishBundle(s3, hub, spoke, 1, makePolicy({ models: { [MODEL]: undefined }, keys: [k1] }));
        proxy = await startSilentProxy({ port: via === "s3" ? Number(new URL(s3.endpoint).port) : redis.port });
        svc = await startAuthService(
            testConfig({
                spoke,
                publicKey: hub.publicKey,
                cachePath: path.join(tmp.dir, "bundle.json"),
                env,
                redisUrl: via === "redis" ? `redis://127.0.0.1:${proxy.port}` : redis.url,
                s3Endpoint: via === "s3" ? `http://127.0.0.1:${proxy.port}` : s3.endpoint,
            }),
            { log: () => undefined },
        );
        if ((await check(svc.port, { key: k1.secret, model: MODEL })).status !== 200)
            throw new Error("auth service not healthy before the fault");
        return await body({ redis, s3, hub, tmp, proxy, svc });
    } finally {
        await svc?.close();
        await proxy?.close();
        await Promise.all([redis.stop(), s3.destroy()]);
        tmp.remove();
    }
}

/** Seconds until `ok` holds (polled every 25 ms). @throws after {@link RECOVERY_LIMIT_MS}. */
async function secondsUntil(what: string, ok: () => Promise<boolean>): Promise<number> {
    const t0 = Date.now();
    while (Date.now() - t0 < RECOVERY_LIMIT_MS) {
        if (await ok().catch(() => false)) return (Date.now() - t0) / 1000;
        await sleep(25);
    }
    throw new Error(`${what}: not recovered ${RECOVERY_LIMIT_MS / 1000} s after healing`);
}

const allowed = (svc: AuthService) => async () => (await check(svc.port, { key: k1.secret, model: MODEL })).status === 200;

/** Under load during the fault: counts the 503s (fail closed) and anything else that is not 200/503 (must be 0). */
async function during(svc: AuthService, ms: number): Promise<{ denied: number; wrong: number }> {
    let denied = 0;
    let wrong = 0;
    const end = Date.now() + ms;
    while (Date.now() < end) {
        const s = (await check(svc.port, { key: k1.secret, model: MODEL })).status;
        if (s === 503) denied++;
        else if (s !== 200) wrong++;
        await sleep(50);
    }
    return { denied, wrong };
}

export const scenarios: ChaosScenario[] = [
    {
        name: "auth: redis silent then healed",
        run: () =>
            withRig("redis", {}, async ({ proxy, svc }): Promise<ChaosFigure> => {
                proxy.silence();
                const d = await during(svc, PARTITION_MS);
                proxy.heal();
                const s = await secondsUntil("auth after a silent Redis partition", allowed(svc));
                return {
                    recoverySeconds: s,
                    lost: 0,
                    doubleCounted: 0,
                    detail: `${PARTITION_MS / 1000} s partition: ${d.denied} checks denied 503 (fail closed), ${d.wrong} other answers`,
                };
            }),
    },
    {
        name: "auth: redis silent while a busy key holds a grant",
        run: () =>
            withRig("redis", { AUTH_GRANT_HOLD_MS: String(GRANT_HOLD_MS) }, async ({ proxy, svc }): Promise<ChaosFigure> => {
                // 8 checks in flight for a second give the key a grant; then one check every 10 ms through the partition.
                let stop = false;
                const busy = Array.from({ length: 8 }, async () => {
                    while (!stop) await check(svc.port, { key: k1.secret, model: MODEL });
                });
                await sleep(1_000);
                stop = true;
                await Promise.all(busy);
                const metrics = await fetch(`http://127.0.0.1:${svc.opsPort}/metrics`).then((r) => r.text());
                const held = Number(/^auth_grant_held_slots (\S+)$/m.exec(metrics)?.[1] ?? NaN);
                const silencedAt = Date.now();
                proxy.silence();
                const after = { withinHold: 0, pastHold: 0, denied: 0, other: 0 };
                while (Date.now() - silencedAt < PARTITION_MS) {
                    const sent = Date.now();
                    const st = (await check(svc.port, { key: k1.secret, model: MODEL })).status;
                    if (st === 503) after.denied++;
                    else if (st === 200) after[sent - silencedAt > GRANT_HOLD_MS ? "pastHold" : "withinHold"]++;
                    else after.other++;
                    await sleep(10);
                }
                proxy.heal();
                const s = await secondsUntil("auth after a silent Redis partition with a grant held", allowed(svc));
                return {
                    recoverySeconds: s,
                    lost: 0,
                    doubleCounted: 0,
                    detail:
                        `${held} grant slots held at the partition; admitted from them ${after.withinHold} within the ${GRANT_HOLD_MS} ms hold, ` +
                        `${after.pastHold} after it (must be 0); ${after.denied} denied 503, ${after.other} other answers`,
                };
            }),
    },
    {
        name: "auth: redis killed and restarted",
        run: () =>
            withRig("none", {}, async ({ redis, svc }): Promise<ChaosFigure> => {
                await redis.stop();
                const d = await during(svc, PARTITION_MS);
                await redis.start();
                const s = await secondsUntil("auth after a Redis restart", allowed(svc));
                return {
                    recoverySeconds: s,
                    lost: 0,
                    doubleCounted: 0,
                    detail: `SIGKILL, ${PARTITION_MS / 1000} s down, restarted empty: ${d.denied} checks denied 503, ${d.wrong} other answers`,
                };
            }),
    },
    {
        name: "auth: S3 silent during a publish then healed",
        run: () =>
            withRig(
                "s3",
                { AUTH_POLL_INTERVAL_SECONDS: String(POLL_MS / 1000), AUTH_S3_TIMEOUT_MS: "400" },
                async ({ proxy, svc, s3, hub }): Promise<ChaosFigure> => {
                    proxy.silence();
                    await sleep(PARTITION_MS / 2);
                    await publishBundle(s3, hub, "chaos", 2, makePolicy({ models: { [MODEL]: undefined }, keys: [k1, k2] }));
                    const d = await during(svc, PARTITION_MS / 2);
                    proxy.heal();
                    const s = await secondsUntil("revision 2 after a silent S3 partition", async () => {
                        const r = await check(svc.port, { key: k2.secret, model: MODEL });
                        return r.status === 200 && r.headers.get(IDENTITY_HEADERS.revision) === "2";
                    });
                    return {
                        recoverySeconds: s,
                        lost: 0,
                        doubleCounted: 0,
                        detail:
                            `revision 2 published during a ${PARTITION_MS / 1000} s partition, poll interval ${POLL_MS / 1000} s; ` +
                            `last-known-good kept serving (${d.denied} denied, ${d.wrong} other answers)`,
                    };
                },
            ),
    },
];

if (require.main === module) {
    (async () => {
        for (const s of scenarios) {
            const f = await s.run();
            process.stdout.write(
                `${s.name}: recovery ${f.recoverySeconds?.toFixed(2) ?? "n/a"} s, lost ${f.lost}, double-counted ${f.doubleCounted} (${f.detail})\n`,
            );
        }
    })().then(
        () => process.exit(0),
        (e: unknown) => {
            process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
            process.exit(1);
        },
    );
}
