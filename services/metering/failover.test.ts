import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { makePolicy, type TestKey } from "../auth/test/harness";
import { IDENTITY_HEADER_PREFIX, IDENTITY_HEADERS } from "../shared/identity";
import { type Rig, startRig, truncateLedger } from "./testing/rig";
import { endpointDisappears } from "./testing/failover-drill";
import { startTwoSpokes, type TwoSpokes } from "./testing/two-spokes";

/**
 * Failover across two spokes with real parts: each spoke's auth service (Redis, signed bundles from S3) and
 * metering service (spool, shipper, Kinesis stand-in), one ledger (PostgreSQL) fed by the consumer, and the gateway
 * objects lib/ renders executed by the stand-in (services/metering/testing/two-spokes.ts).
 */

const MODEL = "meta-llama/Llama-3.3-70B-Instruct";
const alice: TestKey = { id: "key-alice", secret: "sk-alice-0123456789", tenant: "acme", team: "search", models: [MODEL] };
const bob: TestKey = { id: "key-bob", secret: "sk-bob-0123456789", tenant: "globex", team: "research", models: [MODEL] };

let rig: Rig;
let two: TwoSpokes;
/** Request ids each spoke logged since the test began (the stream is re-read from its start on every drain). */
let mark = { a: 0, b: 0 };

beforeAll(async () => {
    rig = await startRig();
    two = await startTwoSpokes({ rig, names: ["hn1", "hcm1"], model: MODEL, keys: [alice, bob] });
}, 120_000);
afterAll(async () => {
    await two?.stop();
    await rig?.stop();
});
beforeEach(async () => {
    await truncateLedger(rig.db);
    two.a.modelUp = true;
    two.b.modelUp = true;
    two.a.modelAnswer = 200;
    two.b.modelAnswer = 200;
    two.hops.n = 0;
    mark = { a: two.a.records.length, b: two.b.records.length };
});

const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
const bearer = (k: TestKey, extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${k.secret}`,
    "content-type": "application/json",
    ...extra,
});

/** Ledger rows of the requests this test made (either spoke's ids). */
async function ledgerRows(): Promise<Array<{ spoke: string; request_id: string; tenant: string; key_id: string }>> {
    const ids = [...two.a.records.slice(mark.a), ...two.b.records.slice(mark.b)].map((r) => String(r.requestId));
    return (
        await rig.db.query(
            "SELECT spoke, request_id, tenant, key_id FROM usage_events WHERE request_id = ANY($1) ORDER BY spoke, request_id",
            [ids],
        )
    ).rows;
}

describe("failover across two spokes", () => {
    it("hn1's endpoint gone: the request is served by hcm1, whose auth re-verifies the key; metered once, at hcm1, though both spokes log it", async () => {
        two.a.modelUp = false;
        const before = { a: two.a.records.length, b: two.b.records.length };
        const r = await two.a.request(bearer(alice), body);
        expect(r).toMatchObject({ status: 200, servedBy: "hcm1" });
        // The hop carried the tenant's key and no trusted identity header.
        expect(r.forwardedHeaders?.authorization).toBe(`Bearer ${alice.secret}`);
        expect(Object.keys(r.forwardedHeaders ?? {}).filter((h) => h.startsWith(IDENTITY_HEADER_PREFIX))).toEqual([]);
        // Both gateways logged it, each with its own request id; hcm1's identity is what its own auth decided.
        const logA = two.a.records.slice(before.a);
        const logB = two.b.records.slice(before.b);
        expect(logA).toHaveLength(1);
        expect(logB).toHaveLength(1);
        expect(String(logA[0].backendName)).toMatch(/^llm-gateway\/peer-hcm1\//);
        expect(logB[0]).toMatchObject({ tenant: "acme", keyId: alice.id, status: 200 });
        await two.a.metering.idle();
        // hn1's metering does not count it and gives its concurrency lease back.
        expect(two.a.outcomes.at(-1)).toMatchObject({ spooled: 0, forwarded: 1 });
        expect(two.a.released.at(-1)).toMatch(/^acme\/search\/key-alice:/);
        expect(two.b.outcomes.at(-1)).toMatchObject({ spooled: 1, forwarded: 0 });

        await two.drainToLedger();
        const rows = await ledgerRows();
        expect(rows).toEqual([{ spoke: "hcm1", request_id: String(logB[0].requestId), tenant: "acme", key_id: alice.id }]);
        // Every request either spoke logged that is in the ledger at all is in it once.
        expect(new Set(rows.map((x) => x.request_id)).size).toBe(rows.length);
    });

    it.each([
        [404, "its workers gone, the frontend's discovery dropped the model: Model not found"],
        [503, "the model registered without a complete worker set: not ready"],
    ] as const)("hn1's gateway and frontend live but its model dead (%i, %s): served by hcm1, metered once there", async (status, _why) => {
        // Route 53 sees hn1's gateway healthy; the dead model fails over in the request path instead.
        two.a.modelAnswer = status;
        const before = { a: two.a.records.length, b: two.b.records.length };
        const r = await two.a.request(bearer(alice), body);
        expect(r).toMatchObject({ status: 200, servedBy: "hcm1" });
        expect(two.hops.n).toBe(1);
        const logA = two.a.records.slice(before.a);
        const logB = two.b.records.slice(before.b);
        expect(String(logA[0].backendName)).toMatch(/^llm-gateway\/peer-hcm1\//);
        expect(logB[0]).toMatchObject({ tenant: "acme", keyId: alice.id, status: 200 });
        await two.a.metering.idle();
        expect(two.a.outcomes.at(-1)).toMatchObject({ spooled: 0, forwarded: 1 });
        await two.drainToLedger();
        expect(await ledgerRows()).toEqual([{ spoke: "hcm1", request_id: String(logB[0].requestId), tenant: "acme", key_id: alice.id }]);
    });

    it("a key hcm1 no longer accepts is refused at hcm1 even though hn1 let it through: identity is re-verified at the peer, nothing is metered", async () => {
        two.a.modelUp = false;
        // hcm1's bundle drops bob's key (revoked there first, as a revocation reaches spokes one by one).
        await two.republish("b", makePolicy({ models: { [MODEL]: undefined }, keys: [alice] }));
        try {
            const r = await two.a.request(bearer(bob), body);
            expect(r.status).toBe(401);
            expect(two.b.records.at(-1)).toMatchObject({ status: 401, tenant: "-" });
            await two.drainToLedger();
            expect(await ledgerRows()).toEqual([]);
            expect(two.a.outcomes.at(-1)).toMatchObject({ spooled: 0, forwarded: 1 });
        } finally {
            await two.republish("b", makePolicy({ models: { [MODEL]: undefined }, keys: [alice, bob] }));
        }
    });

    it("a client's forged identity headers never reach the peer: hcm1 meters the key's own tenant", async () => {
        two.a.modelUp = false;
        const forged = Object.fromEntries(Object.values(IDENTITY_HEADERS).map((h) => [h, "victim"]));
        const r = await two.a.request(bearer(bob, forged), body);
        expect(r).toMatchObject({ status: 200, servedBy: "hcm1" });
        expect(Object.values(r.forwardedHeaders ?? {})).not.toContain("victim");
        await two.drainToLedger();
        expect((await ledgerRows()).map((x) => [x.spoke, x.tenant, x.key_id])).toEqual([["hcm1", "globex", bob.id]]);
    });

    it("both endpoints up: each spoke serves and meters its own traffic, 50 + 50 requests counted exactly once", async () => {
        const rs = await Promise.all([
            ...Array.from({ length: 50 }, () => two.a.request(bearer(alice), body)),
            ...Array.from({ length: 50 }, () => two.b.request(bearer(bob), body)),
        ]);
        expect(rs.map((r) => r.servedBy)).toEqual([...Array(50).fill("hn1"), ...Array(50).fill("hcm1")]);
        await two.drainToLedger();
        const rows = await ledgerRows();
        expect(rows.filter((x) => x.spoke === "hn1")).toHaveLength(50);
        expect(rows.filter((x) => x.spoke === "hcm1")).toHaveLength(50);
        expect(new Set(rows.map((x) => x.request_id)).size).toBe(100);
    });

    it("both endpoints gone (no hosts on either spoke): 503 after one hop, no loop; hcm1's hop guard keeps hn1's forwarded request local; no tokens metered", async () => {
        two.a.modelUp = false;
        two.b.modelUp = false;
        // hn1's first attempt goes straight to hcm1 (priority spill: hn1's priority 0 has no hosts). At hcm1 the
        // forwarded request takes the hop guard (local backends only), whose backend has no hosts either: 503 there,
        // never sent back to hn1 (the same spill through the rule with peers would bounce it until the route timeout).
        const r = await two.a.request(bearer(alice), body);
        expect(r.status).toBe(503);
        expect(r.forwardedHeaders?.["x-llm-peer-hop"]).toBe("hn1");
        expect(two.hops.n).toBe(1);
        expect(two.a.records.length - mark.a).toBe(1);
        expect(two.b.records.length - mark.b).toBe(1);
        expect(two.b.records.at(-1)).toMatchObject({ status: 503, responseFlags: "UH" });
        expect(String(two.b.records.at(-1)?.backendName)).not.toMatch(/\/peer-/);
        await two.drainToLedger();
        const rows = await ledgerRows();
        // hn1 leaves it to the peer (forwarded, by backend name); hcm1 records its failed request, with no tokens.
        expect(rows.map((x) => x.spoke)).toEqual(["hcm1"]);
        const t = await rig.db.query("SELECT input_tokens + output_tokens AS n FROM usage_events WHERE request_id = ANY($1)", [
            rows.map((x) => x.request_id),
        ]);
        expect(t.rows.map((x) => Number(x.n))).toEqual([0]);
    });

    it("hn1's workers stopped, its frontend up (Dynamo answers 404 model_not_found): the 404 falls back, hcm1 serves; metered once, at hcm1", async () => {
        two.a.modelAnswer = 404;
        const r = await two.a.request(bearer(alice), body);
        expect(r).toMatchObject({ status: 200, servedBy: "hcm1" });
        expect(r.forwardedHeaders?.["x-llm-peer-hop"]).toBe("hn1");
        expect(two.hops.n).toBe(1);
        const logA = two.a.records.slice(mark.a);
        const logB = two.b.records.slice(mark.b);
        expect(logA.map((x) => [x.status, String(x.backendName).split("/")[1]])).toEqual([[200, "peer-hcm1"]]);
        expect(logB).toHaveLength(1);
        expect(logB[0]).toMatchObject({ status: 200, tenant: "acme", keyId: alice.id });
        await two.drainToLedger();
        expect((await ledgerRows()).map((x) => [x.spoke, x.key_id])).toEqual([["hcm1", alice.id]]);
    });

    it("workers stopped on both spokes: hcm1's 404 comes back after one hop and is not retried again, no loop, no tokens", async () => {
        two.a.modelAnswer = 404;
        two.b.modelAnswer = 404;
        const r = await two.a.request(bearer(alice), body);
        expect(r.status).toBe(404);
        expect(r.servedBy).toBeUndefined();
        // One hop: hcm1 takes the hop guard (local backends only) with x-envoy-max-retries 0, answers 404 there, and
        // hn1 has no peer priority left to try.
        expect(two.hops.n).toBe(1);
        expect(two.b.records.slice(mark.b).map((x) => [x.status, String(x.backendName).split("/")[1]])).toEqual([[404, "llama-70b"]]);
        expect(two.a.records.slice(mark.a).map((x) => x.status)).toEqual([404]);
        // hcm1, asked directly, answers its own 404 after one hop the other way (hn1's workers are gone too).
        two.hops.n = 0;
        expect((await two.b.request(bearer(alice), body)).status).toBe(404);
        expect(two.hops.n).toBe(1);
    });

    it("a client that sets x-llm-peer-hop itself only loses its own fallback: served locally when up, 503 (no hop) when its spoke's endpoint is gone", async () => {
        const up = await two.a.request(bearer(alice, { "x-llm-peer-hop": "forged" }), body);
        expect(up).toMatchObject({ status: 200, servedBy: "hn1" });
        two.a.modelUp = false;
        const down = await two.a.request(bearer(alice, { "x-llm-peer-hop": "forged" }), body);
        expect(down.status).toBe(503);
        expect(down.forwardedHeaders).toBeUndefined();
        expect(two.hops.n).toBe(0);
        expect(two.b.records.length - mark.b).toBe(0);
    });
});

describe("without the hop guards (as the pack refuses)", () => {
    it("both endpoints gone: the forwarded request is spilled back and bounces between the spokes (the loop the guards prevent)", async () => {
        const bare = await startTwoSpokes({ rig, names: ["hn1", "hcm1"], model: MODEL, keys: [alice], withoutHopGuards: true });
        try {
            bare.a.modelUp = false;
            bare.b.modelUp = false;
            await expect(bare.a.request(bearer(alice), body)).rejects.toThrow(/forwarded 9 times between the spokes: a failover loop/);
        } finally {
            await bare.stop();
        }
    });
});

describe("npm run chaos drill: one spoke's endpoint disappears mid-traffic", () => {
    it("loses no request and meters none twice", async () => {
        const r = await endpointDisappears(rig, { requests: 60, concurrency: 6 });
        expect(r).toMatchObject({ requests: 60, failed: 0, lost: 0, doubleCounted: 0, metered: 60 });
        expect(r.servedBy.hcm1).toBeGreaterThanOrEqual(30);
    });
});
