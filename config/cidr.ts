/**
 * IPv4 CIDR arithmetic for rail IP pools, frontend and cluster networks. Pure functions, no I/O.
 * Addresses are handled as unsigned 32-bit integers.
 */

export interface Cidr {
    /** Network address as an unsigned 32-bit integer (host bits zero). */
    network: number;
    /** Prefix length, 0-32. */
    prefix: number;
    /** The canonical text form, e.g. `10.64.0.0/20`. */
    text: string;
}

function ipToInt(ip: string): number {
    const parts = ip.split(".");
    if (parts.length !== 4) throw new Error(`"${ip}" is not an IPv4 address`);
    let n = 0;
    for (const p of parts) {
        if (!/^\d{1,3}$/.test(p) || Number(p) > 255) throw new Error(`"${ip}" is not an IPv4 address`);
        n = n * 256 + Number(p);
    }
    return n >>> 0;
}

/** Formats an unsigned 32-bit integer as dotted quad. */
export function intToIp(n: number): string {
    return [24, 16, 8, 0].map((s) => (n >>> s) & 255).join(".");
}

/**
 * Parses `a.b.c.d/len`.
 * @throws Error when the text is not a CIDR or has host bits set (`10.0.0.1/24`), which usually means a typo.
 */
export function parseCidr(text: string): Cidr {
    const m = /^(\d+\.\d+\.\d+\.\d+)\/(\d{1,2})$/.exec(text);
    if (!m) throw new Error(`"${text}" is not an IPv4 CIDR like 10.64.0.0/20`);
    const prefix = Number(m[2]);
    if (prefix > 32) throw new Error(`"${text}" has a prefix longer than 32`);
    const ip = ipToInt(m[1]);
    const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
    if ((ip & mask) >>> 0 !== ip) throw new Error(`"${text}" has host bits set; did you mean ${intToIp((ip & mask) >>> 0)}/${prefix}?`);
    return { network: ip, prefix, text };
}

/** Number of addresses in the block. */
export function size(c: Cidr): number {
    return 2 ** (32 - c.prefix);
}

/** True when the two blocks share at least one address. */
export function overlaps(a: Cidr, b: Cidr): boolean {
    const aEnd = a.network + size(a) - 1;
    const bEnd = b.network + size(b) - 1;
    return a.network <= bEnd && b.network <= aEnd;
}

/**
 * The `index`-th subnet of length `prefix` inside `parent` (`subnet(10.64.0.0/16, 20, 1)` = `10.64.16.0/20`).
 * @throws Error when `prefix` is shorter than the parent's or the index does not fit.
 */
export function subnet(parent: Cidr, prefix: number, index: number): Cidr {
    if (prefix < parent.prefix || prefix > 32) throw new Error(`cannot cut /${prefix} subnets out of ${parent.text}`);
    const count = 2 ** (prefix - parent.prefix);
    if (index < 0 || index >= count) throw new Error(`${parent.text} holds only ${count} /${prefix} subnets, not ${index + 1}`);
    const network = parent.network + index * 2 ** (32 - prefix);
    return { network, prefix, text: `${intToIp(network)}/${prefix}` };
}

/** First usable host address (network + 1), used as the rail gateway. */
export function firstHost(c: Cidr): string {
    return intToIp(c.network + 1);
}

/**
 * Every pair of overlapping blocks among `named` (label -> CIDR). Returns `[labelA, labelB]` pairs in input order.
 */
export function findOverlaps(named: Array<[string, Cidr]>): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (let i = 0; i < named.length; i++) {
        for (let j = i + 1; j < named.length; j++) {
            if (overlaps(named[i][1], named[j][1])) out.push([named[i][0], named[j][0]]);
        }
    }
    return out;
}
