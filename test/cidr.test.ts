import { describe, expect, it } from "vitest";
import { findOverlaps, firstHost, overlaps, parseCidr, subnet } from "../config/cidr";

describe("CIDR arithmetic", () => {
    it("parses a CIDR and rejects host bits with a suggestion", () => {
        expect(parseCidr("10.64.0.0/16")).toMatchObject({ prefix: 16, text: "10.64.0.0/16" });
        expect(() => parseCidr("10.64.1.0/16")).toThrow(/host bits set; did you mean 10.64.0.0\/16/);
        expect(() => parseCidr("10.64.0.0")).toThrow(/not an IPv4 CIDR/);
        expect(() => parseCidr("300.1.0.0/16")).toThrow(/not an IPv4 address/);
    });

    it("cuts the i-th rail subnet out of a supernet", () => {
        const sup = parseCidr("10.64.0.0/16");
        expect(subnet(sup, 20, 0).text).toBe("10.64.0.0/20");
        expect(subnet(sup, 20, 1).text).toBe("10.64.16.0/20");
        expect(subnet(sup, 20, 7).text).toBe("10.64.112.0/20");
        expect(() => subnet(sup, 20, 16)).toThrow(/holds only 16 \/20 subnets, not 17/);
        expect(() => subnet(sup, 12, 0)).toThrow(/cannot cut \/12 subnets out of 10.64.0.0\/16/);
        expect(firstHost(subnet(sup, 20, 1))).toBe("10.64.16.1");
    });

    it("detects overlaps, including containment and shared edges", () => {
        expect(overlaps(parseCidr("10.0.0.0/8"), parseCidr("10.64.0.0/16"))).toBe(true);
        expect(overlaps(parseCidr("10.64.0.0/20"), parseCidr("10.64.16.0/20"))).toBe(false);
        expect(overlaps(parseCidr("10.64.15.0/24"), parseCidr("10.64.0.0/20"))).toBe(true);
        expect(
            findOverlaps([
                ["a", parseCidr("10.0.0.0/24")],
                ["b", parseCidr("10.0.1.0/24")],
                ["c", parseCidr("10.0.0.128/25")],
            ]),
        ).toEqual([["a", "c"]]);
    });
});
