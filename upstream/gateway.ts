import type { Source } from "./types";

/**
 * Agent Router (Envoy AI Gateway) ↔ Envoy Gateway minor versions built and tested together, from the AI Gateway's
 * compatibility table (envoyproxy/ai-gateway@v1.2.0:site/docs/compatibility.md; release notes v1.2.0: "moves to Envoy
 * Gateway v1.9.2"). config/versions.ts pins one set; the policy pack refuses any other pairing.
 */
export const gatewayCompatibleSets: ReadonlyArray<{ readonly aiGateway: string; readonly envoyGateway: string; readonly source: Source }> =
    [
        { aiGateway: "1.0", envoyGateway: "1.8", source: "envoyproxy/ai-gateway@v1.0.0:site/docs/compatibility.md" },
        { aiGateway: "1.1", envoyGateway: "1.8", source: "envoyproxy/ai-gateway@v1.1.0:site/docs/compatibility.md" },
        { aiGateway: "1.2", envoyGateway: "1.9", source: "envoyproxy/ai-gateway@v1.2.0:site/docs/compatibility.md" },
    ];

/**
 * Oldest AI Gateway whose controller overwrites a client-sent `x-ai-eg-model` instead of appending to it
 * (envoyproxy/ai-gateway PR #2410, first released in v1.1.0).
 */
export const aiGatewayMinimum: { readonly version: [number, number, number]; readonly source: Source } = {
    version: [1, 1, 0],
    source: "envoyproxy/ai-gateway@v1.1.0:internal/extproc/processor_impl.go",
};
