/**
 * One judgement of a handshake address (upstream/address.ts), closed world: npm run upstream-check
 * (upstream/refused.ts `sglang-host-ip-not-routable`, `vllm-nixl-side-channel-localhost`) and the pack
 * (policies/pd-compat.ts `pd-kv-load-fails-loudly`) refuse the same values, including the wildcard `*`, the empty
 * string, `0` (read by inet_aton as 0.0.0.0) and names under `.localhost`.
 */
import { describe, expect, it } from "vitest";
import { pdFailLoudly } from "../policies/pd-compat";
import { checkStack } from "../upstream/check";
import { hostOf, unroutable } from "../upstream/address";
import { edit, endpoint, mainOf, setEnv, stack, violations } from "./policies/rdma-fixtures";

const REFUSED = [
    "*",
    "",
    "0",
    "x.localhost",
    "localhost",
    "127.0.0.1",
    "127.1",
    "0.0.0.0",
    "::",
    "::1",
    "[::1]",
    "::ffff:127.0.0.1",
    "169.254.1.1",
    "fe80::1",
    "$(POD_IP)",
    "a_b.svc",
    "256.1.1.1",
];
const ROUTABLE = ["10.0.0.5", "prefill-0.inference.svc.cluster.local", "fd00::5", "[fd00::5]", "2001:db8::1"];

describe("unroutable (upstream/address.ts)", () => {
    it("refuses loopback, wildcard, link-local and anything not proven to be an address; accepts pod IPs and DNS names", () => {
        for (const h of REFUSED) expect(unroutable(h), JSON.stringify(h)).toBe(true);
        for (const h of ROUTABLE) expect(unroutable(h), h).toBe(false);
        expect(hostOf("10.0.0.5:5000")).toBe("10.0.0.5");
        expect(hostOf("[fd00::5]:5000")).toBe("fd00::5");
        expect(hostOf("fd00::5")).toBe("fd00::5");
    });
});

describe("upstream-check and the pack refuse the same SGLANG_HOST_IP values", () => {
    const rs = (v: string) =>
        edit(stack([endpoint({ engine: "sglang", kvPool: { kind: "none" } })]), "DynamoGraphDeployment", (o) => {
            setEnv(mainOf(o, "decode"), "SGLANG_HOST_IP", v);
        });
    const cli = (v: string) =>
        checkStack(
            "t",
            rs(v).map((r) => r.inputs),
            [],
        ).findings.filter((f) => f.key === "env.SGLANG_HOST_IP");
    const pack = async (v: string) => (await violations([pdFailLoudly], rs(v))).filter((m) => m.includes("SGLANG_HOST_IP"));
    for (const v of ["*", "", "0", "x.localhost", "127.0.0.1"])
        it(`${JSON.stringify(v)} is refused by both`, async () => {
            expect(cli(v)).toHaveLength(1);
            expect(await pack(v)).toHaveLength(1);
        });
    it("a pod IP literal passes both", async () => {
        expect(cli("10.0.0.5")).toEqual([]);
        expect(await pack("10.0.0.5")).toEqual([]);
    });
});
