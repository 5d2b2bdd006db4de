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
