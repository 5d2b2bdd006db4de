/** Severity of a {@link Logger} line. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Structured logger: one JSON object per line. Callers never pass secrets (API keys, Redis credentials). */
export type Logger = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** Logger writing JSON lines to stdout (info and below) and stderr (warn, error). */
export const jsonLogger: Logger = (level, msg, fields) => {
    const line = `${JSON.stringify({ time: new Date().toISOString(), level, service: "auth", msg, ...fields })}\n`;
    (level === "warn" || level === "error" ? process.stderr : process.stdout).write(line);
};

/** Message of an unknown thrown value. */
export function errorMessage(err: unknown): string {
    return err instanceof Error ? err.message : String(err);
}
