/**
 * Usage estimates for responses cut before the engine reported usage (a stream aborted before its final
 * usage chunk: the AI Gateway writes no token metadata then). Billing such a request
 * as zero would let a client avoid paying by disconnecting just before the end, so it is billed from what
 * the access log does know: request bytes in, response bytes out.
 *
 * The heuristics (documented in services/metering/README.md, "Estimates"):
 * - Prompt: {@link BYTES_PER_TOKEN} bytes of request body per token. ~4 characters per token is the usual
 *   figure for English text with BPE tokenizers (OpenAI's tokenizer guidance); the JSON envelope of the
 *   request is counted too, which over- rather than under-estimates, and is never zero for a request with a body.
 * - Completion, streamed: the response is OpenAI-style SSE, one `chat.completion.chunk` per generation step,
 *   each carrying about one token. Bytes sent / (bytes of one chunk with an empty delta for this model +
 *   {@link BYTES_PER_TOKEN}) gives the number of chunks, i.e. tokens.
 * - Completion, not streamed: body bytes beyond a fixed JSON envelope, at {@link BYTES_PER_TOKEN} per token.
 */

/** Average UTF-8 bytes per token for the estimate (BPE tokenizers, English text: ~4 characters per token). */
export const BYTES_PER_TOKEN = 4;

/**
 * Bytes of one SSE `chat.completion.chunk` with an empty `content` delta for `model`, as the OpenAI-compatible
 * frontends (vLLM, SGLang, Dynamo) frame it: `data: ` + JSON + blank line, with a 36-character `chatcmpl-` id
 * and a 10-digit `created`.
 */
export function sseChunkOverheadBytes(model: string): number {
    const chunk = {
        id: `chatcmpl-${"0".repeat(32)}`,
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, delta: { content: "" }, logprobs: null, finish_reason: null }],
    };
    return Buffer.byteLength(`data: ${JSON.stringify(chunk)}\n\n`, "utf8");
}

/** JSON envelope of a non-streamed chat completion (id, object, created, model, usage...) not counted as text. */
export const NON_STREAM_ENVELOPE_BYTES = 300;

/** Estimated prompt tokens from the request body size: `ceil(bytes / 4)`. */
export function estimatePromptTokens(bytesReceived: number): number {
    return Math.ceil(Math.max(0, bytesReceived) / BYTES_PER_TOKEN);
}

/**
 * Estimated completion tokens from the response body size.
 * @param stream true for an SSE response (chunk accounting), false for a JSON body
 */
export function estimateCompletionTokens(bytesSent: number, model: string, stream: boolean): number {
    const bytes = Math.max(0, bytesSent);
    if (stream) return Math.round(bytes / (sseChunkOverheadBytes(model) + BYTES_PER_TOKEN));
    return Math.ceil(Math.max(0, bytes - NON_STREAM_ENVELOPE_BYTES) / BYTES_PER_TOKEN);
}
