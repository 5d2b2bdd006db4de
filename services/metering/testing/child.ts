import { type ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import { TEST_CREDENTIALS, TEST_REGION } from "../../usage-consumer/testing/kinesis";
import { toOtlpRequest } from "../otlp";
import type { AccessLogRecord } from "../normalise";

/**
 * The real metering process (services/metering/main.ts) as a child on loopback, for `kill -9` tests and chaos.
 */
export interface MeteringChild {
    port: number;
    proc: ChildProcess;
    /** SIGKILL and wait for the exit. */
    kill9(): Promise<void>;
    /** SIGTERM and wait; @returns the exit code */
    stop(): Promise<number | null>;
    /** Resolves true if the process exits by itself within `ms`. */
    exited(ms: number): Promise<boolean>;
    /** Value of a Prometheus gauge/counter without labels (NaN when absent). */
    metric(name: string): Promise<number>;
    /** POSTs access-log records as OTLP JSON. @returns the HTTP status, or 0 when the connection failed */
    post(records: AccessLogRecord[]): Promise<number>;
}

export interface MeteringChildOptions {
    spoolDir: string;
    port: number;
    stream: string;
    kinesisEndpoint: string;
    redisUrl?: string;
    failpoint?: "after-spool" | "after-tokens" | "after-put";
    spoke?: string;
}

export async function startMeteringChild(o: MeteringChildOptions): Promise<MeteringChild> {
    const env: NodeJS.ProcessEnv = {
        ...process.env,
        METERING_SPOKE: o.spoke ?? "hn1",
        METERING_INSTANCE: "metering-0",
        METERING_SPOOL_DIR: o.spoolDir,
        METERING_STREAM_NAME: o.stream,
        METERING_STREAM_REGION: TEST_REGION,
        METERING_KINESIS_ENDPOINT: o.kinesisEndpoint,
        METERING_PORT: String(o.port),
        METERING_BIND_ADDRESS: "127.0.0.1",
        METERING_KINESIS_TIMEOUT_MS: "2000",
        AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
        AWS_REGION: TEST_REGION,
    };
    if (o.redisUrl) env.METERING_REDIS_URL = o.redisUrl;
    if (o.failpoint) env.METERING_FAILPOINT = o.failpoint;
    const proc = spawn(
        process.execPath,
        ["-r", path.join(__dirname, "..", "..", "..", "tools", "register-esbuild.js"), path.join(__dirname, "..", "main.ts")],
        { env, stdio: "ignore" },
    );
    const exit = new Promise<void>((r) => proc.once("exit", () => r()));
    const base = `http://127.0.0.1:${o.port}`;
    const deadline = Date.now() + 30_000;
    for (;;) {
        try {
            if ((await fetch(`${base}/healthz`)).ok) break;
        } catch {
            /* not up yet */
        }
        if (Date.now() > deadline || proc.exitCode !== null) {
            proc.kill("SIGKILL");
            throw new Error("metering did not start");
        }
        await new Promise((r) => setTimeout(r, 100));
    }
    return {
        port: o.port,
        proc,
        async kill9() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
            await exit;
        },
        async stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
            await exit;
            return proc.exitCode;
        },
        async exited(ms) {
            return Promise.race([exit.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
        },
        async metric(name) {
            try {
                const m = new RegExp(`^${name} (-?\\d+)`, "m").exec(await (await fetch(`${base}/metrics`)).text());
                return m ? Number(m[1]) : NaN;
            } catch {
                return NaN;
            }
        },
        async post(records) {
            try {
                const res = await fetch(`${base}/v1/logs`, {
                    method: "POST",
                    headers: { "content-type": "application/json" },
                    body: JSON.stringify(toOtlpRequest(records)),
                });
                await res.text();
                return res.status;
            } catch {
                return 0;
            }
        },
    };
}
