/**
 * Request headers the Dynamo 1.5.0 OpenAI frontend reads into `nvext` before preprocessing, overriding the body
 * (`apply_header_routing_overrides`, called by every OpenAI/Anthropic handler in lib/llm/src/http/service/openai.rs),
 * that the platform sets. The one definition of their names: upstream/dynamo.ts `dynamoRequestHeaders` lists them with
 * their sources, and services/shared/identity.ts `DYNAMO_HEADERS` (the auth service sets them, the gateway forwards
 * them) is built from them. This module imports nothing, so the services' images compile it with them
 * (services/auth/Dockerfile, services/metering/Dockerfile copy it).
 */
const SOURCE =
    "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/protocols/common/extensions.rs#apply_header_routing_overrides";

export const DYNAMO_REQUEST_HEADERS = {
    /** -> `nvext.agent_hints.priority` (i32). */
    priority: {
        header: "x-dynamo-request-priority",
        nvext: "agent_hints.priority (i32; a malformed value falls back to the body's)",
        source: SOURCE,
    },
    /** -> `nvext.agent_hints.strict_priority` (u32, router queue tier). */
    strictPriority: { header: "x-dynamo-request-strict-priority", nvext: "agent_hints.strict_priority (u32)", source: SOURCE },
    /** -> `nvext.cache_salt` (`HEADER_TENANT_ID`): the salt, not the tenant's name. */
    cacheSalt: {
        header: "x-tenant-id",
        nvext: "cache_salt (non-empty; wins over nvext.cache_salt and the top-level cache_salt)",
        source: SOURCE,
    },
} as const;
