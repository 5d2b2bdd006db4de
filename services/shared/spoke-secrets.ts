/**
 * The Kubernetes Secrets that hold a spoke's generated secrets, created outside Pulumi by `npm run mint-key --
 * install-spoke-secrets` (tools/mint-key.ts, services/keys/spoke-secrets-install.ts) with values from node:crypto, so
 * they are in no Pulumi state and no preview: a pull request's preview holds the spoke's passphrase and runs the pull
 * request's own code. The spoke program only names them (components/spoke/CounterStore.ts, AuthService.ts,
 * Metering.ts). A Secret is namespaced: one copy per namespace whose pods read it (`namespaces`). Until a Secret exists
 * the pods that read it do not start (the kubelet reports CreateContainerConfigError and retries) and the spoke's `up`
 * waits on them.
 */

/** The counter store's Valkey (components/spoke/CounterStore.ts): service name, namespace (lib/gateway.ts GATEWAY_NAMESPACE) and port. */
export const COUNTER_STORE_ADDRESS = { service: "counters", namespace: "llm-gateway", port: 6379 } as const;

/**
 * The counter store's password (`password`: Valkey's `--requirepass`) and the clients' URL with it (`url`:
 * `AUTH_REDIS_URL` of the auth service, `METERING_REDIS_URL` of metering). Whoever holds it can reset rate limits.
 * Namespaces: Valkey's and the auth service's (lib/gateway.ts GATEWAY_NAMESPACE) and metering's (lib/labels.ts
 * PLATFORM_NAMESPACE; test/spoke-secrets.test.ts holds them equal). Both copies carry the same password.
 */
export const COUNTER_STORE_SECRET = {
    name: "platform-counter-store",
    keys: { password: "password", url: "url" },
    namespaces: ["llm-gateway", "platform-system"],
} as const;

/**
 * The HMAC key of tenants' KV-cache salts (services/auth/entitlement.ts; `AUTH_CACHE_SALT_KEY`, base64 of
 * {@link CACHE_SALT_KEY_BYTES} bytes), read only by the auth service (lib/gateway.ts GATEWAY_NAMESPACE). Rotating it
 * re-salts (cold-starts) every tenant's prefix cache.
 */
export const CACHE_SALT_SECRET = { name: "platform-auth-cache-salt-key", key: "key", namespaces: ["llm-gateway"] } as const;

/** Length of the cache-salt key in bytes (services/auth/config.ts `AUTH_CACHE_SALT_KEY` requires at least 32). */
export const CACHE_SALT_KEY_BYTES = 32;

/** Pure: the clients' URL of the counter store with `password` (secret content). */
export function counterStoreUrl(password: string): string {
    const a = COUNTER_STORE_ADDRESS;
    return `redis://:${password}@${a.service}.${a.namespace}.svc.cluster.local:${a.port}`;
}
