/**
 * Names shared by the spoke's peer objects (lib/failover.ts), the policy pack that checks them
 * (policies/gateway/peer.ts) and metering, which leaves requests a peer served to that peer
 * (services/metering/normalise.ts). Imports nothing, so the pack and the service images load it on their own.
 */

/** Name prefix of every peer object (Backend, AIServiceBackend, CA ConfigMap); endpoints may not use it (config/failover.ts). */
export const PEER_PREFIX = "peer-";

/**
 * ConfigMap in the gateway namespace holding this spoke's failover block of the hub contract (`peers.json`): the
 * declaration the policy pack checks every peer Backend and peer backendRef against.
 */
export const PEER_DECLARATION_CONFIGMAP = "gateway-peers";
/** Key of the declaration in {@link PEER_DECLARATION_CONFIGMAP}. */
export const PEER_DECLARATION_KEY = "peers.json";

/** ConfigMap (key `ca.crt`) holding the CA a peer's edge certificate is verified with. */
export function peerCaConfigMapName(spoke: string): string {
    return `${PEER_PREFIX}${spoke}-ca`;
}

/**
 * Header a spoke sets on a request it forwards to a peer (the peer backendRef's `headerMutation.set`, value: the
 * forwarding spoke). At the peer such a request takes the model's hop guard rule (lib/failover.ts withPeerFallback:
 * local backends only), so the peer serves it locally or fails it, never forwarding it again, even when its local
 * backend has no hosts and Envoy's priority spill would send the first attempt on; its auth service also answers it
 * with {@link ENVOY_MAX_RETRIES_HEADER} `0`. Two spokes falling back to each other cannot loop. Nothing trusts its
 * value (metering tells a forwarded request by the backend name).
 * Outside the stripped `x-platform-`/`x-ai-eg-` prefixes on purpose: a client that sends it only turns off fallback for
 * its own request.
 */
export const PEER_HOP_HEADER = "x-llm-peer-hop";

/**
 * Envoy's per-request retry override: when set, it takes precedence over the route's `num_retries`
 * (envoyproxy/envoy source/common/router/retry_state_impl.cc: "The max retries header takes precedence if set"). The
 * gateway strips a client's copy early; only the auth service's answer sets it (ext_authz `headersToBackend`).
 */
export const ENVOY_MAX_RETRIES_HEADER = "x-envoy-max-retries";
