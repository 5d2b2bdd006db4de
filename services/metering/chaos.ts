import { Redis } from "ioredis";
import { startRedis } from "../auth/test/harness";
import type { ChaosFigure, ChaosScenario } from "../shared/chaos";
import { type Rig, startRig } from "./testing/rig";
import { endpointDisappears } from "./testing/failover-drill";
import {
    kinesisSilentThenHealed,
    meteringKillAndRedeliver,
    poisonRecordInBatch,
    redeliveryAfterConsumerRestart,
} from "./testing/scenarios";

/**
 * Metering fault scenarios for `npm run chaos` (tools/chaos.ts). Each starts its own loopback PostgreSQL and
 * Kinesis-compatible server (and Redis where the token counters are checked) and stops them at the end.
 */
async function withRig<T>(fn: (rig: Rig) => Promise<T>): Promise<T> {
    const rig = await startRig();
    try {
        return await fn(rig);
    } finally {
        await rig.stop();
    }
}

const strip = <T extends ChaosFigure>(f: T): ChaosFigure => ({
    recoverySeconds: f.recoverySeconds,
    lost: f.lost,
    doubleCounted: f.doubleCounted,
    detail: f.detail,
});

export const scenarios: ChaosScenario[] = [
    {
        // Two spokes' auth + metering and one ledger; hn1's endpoint disappears mid-traffic (services/metering/testing/failover-drill.ts).
        name: "failover: one spoke's endpoint disappears mid-traffic",
        run: () => withRig(async (rig) => strip(await endpointDisappears(rig))),
    },
    {
        name: "metering: Kinesis silent 3 s, then healed",
        run: () => withRig(async (rig) => strip(await kinesisSilentThenHealed(rig, { silenceMs: 3000, requestTimeoutMs: 1000 }))),
    },
    {
        name: "metering: poison record (over 1 MiB) in a batch",
        run: () => withRig(async (rig) => strip(await poisonRecordInBatch(rig))),
    },
    {
        name: "metering: kill -9 mid-shipping, restart, batch redelivered",
        run: () =>
            withRig(async (rig) => {
                const redis = await startRedis();
                const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
                try {
                    const figures = [];
                    for (const step of ["after-spool", "after-tokens", "after-put", "mid-shipping"] as const)
                        figures.push(await meteringKillAndRedeliver(rig, client, redis.url, step));
                    return {
                        recoverySeconds: Math.max(...figures.map((f) => f.recoverySeconds ?? 0)),
                        lost: figures.reduce((n, f) => n + f.lost, 0),
                        doubleCounted: figures.reduce((n, f) => n + f.doubleCounted, 0),
                        detail: `kill -9 at 4 steps (spool, tokens, put, mid-shipping), ledger and ${figures.reduce((n, f) => n + f.counters, 0)} Redis token counters compared`,
                    };
                } finally {
                    client.disconnect();
                    await redis.stop();
                }
            }),
    },
    {
        name: "metering: batch redelivered after consumer restart",
        run: () => withRig(async (rig) => strip(await redeliveryAfterConsumerRestart(rig))),
    },
];
