/**
 * The one judgement of a handshake address a peer is told (vLLM `VLLM_NIXL_SIDE_CHANNEL_HOST`, SGLang `SGLANG_HOST_IP` /
 * `HOST_IP` / `--dist-init-addr`, Mooncake `MOONCAKE_LOCAL_HOSTNAME` / `local_hostname`), for upstream/refused.ts,
 * upstream/check/activation.ts and the policy pack (policies/pd-compat.ts).
 *
 * Closed world: an address is routable only when it is proven to be one: an IPv4 literal outside 0.0.0.0/8 ("this
 * network"), 127.0.0.0/8 (loopback), 169.254.0.0/16 (link-local), 224.0.0.0/4 (multicast) and 255.255.255.255; an IPv6
 * literal other than `::`, `::1`, link-local fe80::/10, multicast ff00::/8 and an IPv4-mapped address refused above; or
 * an RFC 1123 DNS name that is not `localhost`, under `.localhost` (RFC 6761 section 6.3) or Debian's `ip6-localhost` /
 * `ip6-loopback`, and whose last label is not all digits (glibc `inet_aton` reads `0` or `127.1` as an IPv4 address).
 * Everything else (`*`, `""`, `0`, an unexpanded `$(VAR)`) is refused.
 */

import { BlockList, isIPv4, isIPv6 } from "node:net";

const LOOPBACK_NAMES = ["localhost", "ip6-localhost", "ip6-loopback", "localhost.localdomain"];

/**
 * The address ranges no peer on another node can reach (module comment), as Node's own matcher (`net.BlockList`, which
 * also matches an IPv4-mapped IPv6 address `::ffff:a.b.c.d` against the IPv4 ranges).
 */
const UNROUTABLE_RANGES = (() => {
    const b = new BlockList();
    for (const [net, prefix] of [
        ["0.0.0.0", 8],
        ["127.0.0.0", 8],
        ["169.254.0.0", 16],
        ["224.0.0.0", 4],
        ["255.255.255.255", 32],
    ] as const)
        b.addSubnet(net, prefix, "ipv4");
    for (const [net, prefix] of [
        ["::", 128],
        ["::1", 128],
        ["fe80::", 10],
        ["ff00::", 8],
    ] as const)
        b.addSubnet(net, prefix, "ipv6");
    return b;
})();

/**
 * True unless `host` is proven to be an address a peer on another node can connect to (see the module comment).
 * `host` is a bare host: use {@link hostOf} on `host:port`.
 */
export function unroutable(host: string): boolean {
    const h = host
        .trim()
        .toLowerCase()
        .replace(/^\[(.*)\]$/, "$1");
    if (isIPv4(h)) return UNROUTABLE_RANGES.check(h, "ipv4");
    if (isIPv6(h)) return UNROUTABLE_RANGES.check(h, "ipv6");
    // A name, then: an RFC 1123 DNS name whose last label is not all digits (glibc inet_aton reads `0`, `127.1` or
    // `01.2.3.4` as an IPv4 address), and not a loopback name.
    const name = h.replace(/\.$/, "");
    const labels = name.split(".");
    if (name.length === 0 || name.length > 253) return true;
    if (!labels.every((l) => /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(l))) return true;
    if (/^\d+$/.test(labels[labels.length - 1])) return true;
    return LOOPBACK_NAMES.includes(name) || name.endsWith(".localhost");
}

/** Host part of `host:port`, `[v6]:port` or a bare host (an IPv6 literal without brackets is returned whole). */
export function hostOf(addr: string): string {
    const a = addr.trim();
    if (a.startsWith("[")) return a.slice(1, a.indexOf("]") > 0 ? a.indexOf("]") : undefined);
    return (a.match(/:/g) ?? []).length === 1 ? a.split(":")[0] : a;
}
