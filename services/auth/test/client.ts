import type { OpenAiError } from "../server";

/** A check response as Envoy would see it. */
export interface CheckResult {
    status: number;
    headers: Headers;
    /** Parsed JSON error body, or undefined for an empty body (allowed). */
    error?: OpenAiError["error"];
}

/**
 * Sends a check the way Envoy's HTTP ext_authz filter does: the client's method and `<prefix><path>`, the
 * client's Authorization (and any other headers given), and the buffered body.
 */
export async function check(
    port: number,
    o: {
        key?: string;
        model?: string;
        body?: string;
        path?: string;
        method?: string;
        headers?: Record<string, string>;
    },
): Promise<CheckResult> {
    const headers: Record<string, string> = { ...o.headers };
    if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
    const method = o.method ?? "POST";
    const body =
        method === "GET" || method === "HEAD"
            ? undefined
            : (o.body ?? JSON.stringify({ model: o.model, messages: [{ role: "user", content: "hi" }] }));
    const r = await fetch(`http://127.0.0.1:${port}${o.path ?? "/authz/v1/chat/completions"}`, { method, headers, body });
    const text = await r.text();
    return { status: r.status, headers: r.headers, error: text ? (JSON.parse(text) as OpenAiError).error : undefined };
}

/** GET on the operations port; returns status and body text. */
export async function ops(port: number, path: string): Promise<{ status: number; text: string }> {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: r.status, text: await r.text() };
}
