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

const LOOPBACK_NAMES = ["localhost", "ip6-localhost", "ip6-loopback", "localhost.localdomain"];

function ipv4Unroutable(h: string): boolean | undefined {
    const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
    if (!m) return undefined;
    const o = m.slice(1).map(Number);
    if (o.some((x) => x > 255)) return true;
    return o[0] === 0 || o[0] === 127 || (o[0] === 169 && o[1] === 254) || (o[0] >= 224 && o[0] <= 239) || o.every((x) => x === 255);
}

/** Expands an IPv6 literal to 8 groups, undefined when it is not one (an embedded IPv4 tail becomes two groups). */
function ipv6Groups(h: string): number[] | undefined {
    if (!h.includes(":") || !/^[0-9a-f:.]+$/.test(h)) return undefined;
    let s = h;
    const v4 = /:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(s);
    if (v4) {
        const o = v4[1].split(".").map(Number);
        if (o.some((x) => x > 255)) return undefined;
        s = `${s.slice(0, v4.index)}:${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
    }
    const halves = s.split("::");
    if (halves.length > 2) return undefined;
    const parse = (p: string) => (p === "" ? [] : p.split(":"));
    const head = parse(halves[0]),
        tail = halves.length === 2 ? parse(halves[1]) : [];
    if ([...head, ...tail].some((g) => !/^[0-9a-f]{1,4}$/.test(g))) return undefined;
    const fill = 8 - head.length - tail.length;
    if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
    return [...head, ...Array(halves.length === 2 ? fill : 0).fill("0"), ...tail].map((g) => Number.parseInt(g, 16));
}

/**
 * True unless `host` is proven to be an address a peer on another node can connect to (see the module comment).
 * `host` is a bare host: use {@link hostOf} on `host:port`.
 */
export function unroutable(host: string): boolean {
    const h = host
        .trim()
        .toLowerCase()
        .replace(/^\[(.*)\]$/, "$1");
    const v4 = ipv4Unroutable(h);
    if (v4 !== undefined) return v4;
    const g = ipv6Groups(h);
    if (g) {
        if (g.every((x) => x === 0)) return true; // ::
        if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return true; // ::1
        if ((g[0] & 0xffc0) === 0xfe80 || (g[0] & 0xff00) === 0xff00) return true; // link-local, multicast
        if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff)
            return ipv4Unroutable(`${g[6] >> 8}.${g[6] & 255}.${g[7] >> 8}.${g[7] & 255}`) === true; // ::ffff:a.b.c.d
        return false;
    }
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
