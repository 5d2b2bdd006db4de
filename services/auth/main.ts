import { ConfigError, describeConfig, loadConfig } from "./config";
import { errorMessage, jsonLogger } from "./log";
import { startAuthService } from "./server";

/**
 * Entry point of the auth service container: validates the environment, starts the service, and shuts down
 * cleanly on SIGTERM/SIGINT (Kubernetes sends SIGTERM, then SIGKILL after the grace period).
 */
async function main(): Promise<void> {
    let config: ReturnType<typeof loadConfig>;
    try {
        config = loadConfig(process.env);
    } catch (err) {
        if (err instanceof ConfigError) {
            process.stderr.write(`${err.message}\n`);
            process.exit(2);
        }
        throw err;
    }
    jsonLogger("info", "starting auth service", { config: describeConfig(config) });
    const service = await startAuthService(config);
    const shutdown = (signal: string) => {
        jsonLogger("info", "shutting down", { signal });
        service.close().then(
            () => process.exit(0),
            (err: unknown) => {
                jsonLogger("error", "shutdown failed", { error: errorMessage(err) });
                process.exit(1);
            },
        );
    };
    process.once("SIGTERM", () => shutdown("SIGTERM"));
    process.once("SIGINT", () => shutdown("SIGINT"));
}

main().catch((err: unknown) => {
    jsonLogger("error", "auth service failed to start", { error: errorMessage(err) });
    process.exit(1);
});
