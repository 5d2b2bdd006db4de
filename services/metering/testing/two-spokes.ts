import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import type { Server } from "node:http";
import type { FailoverContract } from "../../../config/failover";
import { fallbackTrafficPolicy, peerObjects, routesWithPeers, withPeerFallback } from "../../../lib/failover";
import {
    aiGatewayRoutes,
    earlyHeaderStrip,
    GATEWAY_NAMESPACE,
    HEADERS_TO_EXT_AUTH,
    type RoutedEndpoint,
    securityPolicy as securityPolicyOf,
} from "../../../lib/gateway";
import { ENVOY_MAX_RETRIES_HEADER } from "../../shared/peer";
import { type AuthService, startAuthService } from "../../auth/server";
import {
    hubKeys,
    makePolicy,
    memoryLogger,
    publishBundle,
    type RedisServer,
    type S3Server,
    startRedis,
    startS3,
    tempDir,
    type TestKey,
    testConfig,
} from "../../auth/test/harness";
import type { Policy } from "../../shared/bundle";
import { AI_GATEWAY_MODEL_HEADER, IDENTITY_HEADERS } from "../../shared/identity";
import type { UsageEvent } from "../../shared/usage";
import type { LimitsSink } from "../limits";
import type { AccessLogRecord } from "../normalise";
import { toOtlpRequest } from "../otlp";
import { createServer, type IngestOutcome, MeteringService } from "../service";
import { KinesisTransport, Shipper } from "../shipper";
import { Spool } from "../spool";
import { TEST_CREDENTIALS, TEST_REGION } from "../../usage-consumer/testing/kinesis";
import type { Rig } from "./rig";

/**
 * Two spokes on loopback for failover tests and the chaos drill: each with its real auth service (its own Redis,
 * bundles from one S3 stand-in, signed by one hub key), its real metering service (fsynced spool, shipper to its
 * own Kinesis stream of the {@link Rig}) and a stand-in for its Envoy gateway and Dynamo frontend. The gateway
 * stand-in executes the objects lib/ renders for that spoke, nothing written for the test: the early header strip
 * (lib/gateway.ts earlyHeaderStrip), ext_authz with HEADERS_TO_EXT_AUTH and the identity headers copied back, the
 * rule of the model from the rendered AIGatewayRoutes with their peer backendRefs (lib/failover.ts
 * withPeerFallback: priority, headerMutation.remove), the retry of the rendered BackendTrafficPolicy (one attempt per
 * priority, its triggers and status codes) and one access-log record per request, in the fields Envoy writes
 * (services/shared/accesslog.ts), with the AI Gateway's backend name. The rule is chosen as Envoy would ({@link
 * selectRule}: header matches ANDed, the most header matches first), so a forwarded request takes its hop guard; a
 * backend without hosts (the spoke's endpoint gone) gets no load and the first attempt spills to the next priority. The peer hop crosses to the other spoke's
 * gateway stand-in with the headers the route leaves on the request.
 */

/** Hops after which the stand-in calls a request a loop and throws (the rendered routes allow one). */
const MAX_HOPS = 8;

/**
 * The rule Envoy picks for a request among the rendered AIGatewayRoutes: every rule whose match (headers ANDed; Exact by
 * value, RegularExpression as a full match, a missing header never matches) holds, the one with the most header
 * matches first (Gateway API precedence; Envoy Gateway sorts a listener's routes by it, upstream/failover.ts
 * hopGuardPrecedence), then route and rule order.
 */
export function selectRule<
    R extends { spec: { rules: Array<{ matches: Array<{ headers: Array<{ name?: string; type?: string; value: string }> }> }> } },
>(routes: R[], headers: Record<string, string>): { route: R; ruleIndex: number } | undefined {
    const candidates = routes.flatMap((route) =>
        route.spec.rules.flatMap((rule, ruleIndex) =>
            rule.matches
                .filter((m) =>
                    m.headers.every((x) => {
                        const v = headers[String(x.name).toLowerCase()];
                        if (v === undefined) return false;
                        return (x.type ?? "Exact") === "RegularExpression" ? new RegExp(`^(?:${x.value})$`).test(v) : v === x.value;
                    }),
                )
                .map((m) => ({ route, ruleIndex, n: m.headers.length })),
        ),
    );
    // Array.prototype.sort is stable: ties keep route and rule order.
    return candidates.sort((x, y) => y.n - x.n)[0];
}

/** What a client gets back, and which spoke's model answered. */
export interface ClientResult {
    status: number;
    servedBy?: string;
    /** Headers the hop to a peer carried (undefined when no hop). */
    forwardedHeaders?: Record<string, string>;
}

/** One spoke of the pair. */
export interface TestSpoke {
    name: string;
    auth: AuthService;
    metering: MeteringService;
    /** Lease releases the metering service made (tier ids + lease). */
    released: string[];
    /**
     * Whether the spoke's endpoint is there (false: its DynamoGraphDeployment deleted, the frontend Service gone, so the
     * local backend has no hosts and Envoy's priority load spills the first attempt to the peer).
     */
    modelUp: boolean;
    /**
     * What the spoke's Dynamo frontend answers for the model while it is up (upstream/failover.ts
     * `dynamoModelNotServed`): 200 served; 503 registered without a complete worker set; 404 no worker registers it
     * any more ("Model not found"). The gateway retries it at the next priority when the BackendTrafficPolicy's
     * `httpStatusCodes` list it.
     */
    modelAnswer: 200 | 404 | 503;
    /** Ingest outcomes of every access-log batch posted to metering. */
    outcomes: IngestOutcome[];
    /** Access-log records written (one per request reaching this gateway). */
    records: AccessLogRecord[];
    /** A client's request (`depth`: how many gateways it crossed before, for the stand-in's loop detection only). */
    request(headers: Record<string, string>, body: string, depth?: number): Promise<ClientResult>;
}

/** The pair and the shared parts. */
export interface TwoSpokes {
    a: TestSpoke;
    b: TestSpoke;
    /** Ships both spools to their streams and runs the consumer into the ledger (each batch twice: Lambda retries). */
    drainToLedger(): Promise<void>;
    /** Hops from one spoke's gateway to the other's so far (reset it to count one request's). */
    hops: { n: number };
    /** Re-publishes spoke `spoke`'s bundle with `policy` (revision 2) and syncs its auth service. */
    republish(spoke: "a" | "b", policy: Policy): Promise<void>;
    stop(): Promise<void>;
}

/** Options of {@link startTwoSpokes}. */
export interface TwoSpokesOptions {
    rig: Rig;
    names: [string, string];
    model: string;
    keys: TestKey[];
    /**
     * Renders each spoke's routes without the peer hop guards (lib/failover.ts withPeerFallback), as before they
     * existed and as the pack refuses: only to show the loop the guards prevent.
     */
    withoutHopGuards?: boolean;
}

/** Starts both spokes; each places `model` and falls back to the other (as the shipped hub does for hn1 and hcm1). */
export async function startTwoSpokes(o: TwoSpokesOptions): Promise<TwoSpokes> {
    const hub = hubKeys();
    const s3: S3Server = await startS3();
    const redis: RedisServer[] = [];
    const closers: Array<() => Promise<void>> = [];
    const policy = makePolicy({ models: { [o.model]: undefined }, keys: o.keys });
    const spokes = new Map<string, TestSpoke>();
    const streams: Array<{ spoke: string; stream: { name: string; arn: string }; shipper: Shipper }> = [];
    let revision = 1;
    /** Hops between the spokes so far (a request deeper than {@link MAX_HOPS} throws: a loop). */
    const hops = { n: 0 };

    const start = async (name: string, peer: string): Promise<TestSpoke> => {
        const r = await startRedis();
        redis.push(r);
        const tmp = tempDir(`failover-${name}-`);
        closers.push(async () => tmp.remove());
        await publishBundle(s3, hub, name, 1, policy);
        const auth = await startAuthService(
            testConfig({
                spoke: name,
                publicKey: hub.publicKey,
                s3Endpoint: s3.endpoint,
                redisUrl: r.url,
                cachePath: path.join(tmp.dir, "bundle.json"),
                env: { AUTH_REDIS_TIMEOUT_MS: "2000" },
            }),
            { log: memoryLogger().log },
        );
        await auth.bundles.syncOnce();
        closers.push(() => auth.close());

        const released: string[] = [];
        const limits: LimitsSink = {
            async releaseLease(e: UsageEvent, lease: string) {
                released.push(`${e.tenant}/${e.team}/${e.keyId}:${lease}`);
            },
            async addTokensOnce() {
                return true;
            },
        };
        const spool = await Spool.open({ dir: path.join(tmp.dir, "spool"), instance: "metering-0", maxBytes: 64 * 1024 * 1024 });
        const metering = new MeteringService({ spoke: name, spool, limits });
        const server: Server = createServer(metering, spool, { maxSpoolBytes: 64 * 1024 * 1024 });
        await new Promise<void>((res) => server.listen(0, "127.0.0.1", () => res()));
        const meteringPort = (server.address() as AddressInfo).port;
        const stream = await o.rig.stream(`usage-${name}`);
        const transport = new KinesisTransport({
            streamName: stream.name,
            region: TEST_REGION,
            credentials: TEST_CREDENTIALS,
            endpoint: o.rig.kin.endpoint,
        });
        const shipper = new Shipper(spool, transport, { minBackoffMs: 5, maxBackoffMs: 50, idleMs: 10 });
        shipper.start();
        streams.push({ spoke: name, stream, shipper });
        closers.push(async () => {
            await shipper.stop();
            await metering.idle();
            await new Promise<void>((res) => server.close(() => res()));
            await spool.close();
            transport.destroy();
        });

        // What the spoke renders for its gateway: its endpoint, the peer declaration from the contract, the routes.
        const endpoints: RoutedEndpoint[] = [{ name: "llama-70b", model: o.model }];
        const failover: FailoverContract = {
            peers: [{ spoke: peer, hostname: `llm.${peer}.example.com`, port: 443, ca: { kind: "system" }, models: [o.model] }],
        };
        const ns = GATEWAY_NAMESPACE;
        const rendered = withPeerFallback(aiGatewayRoutes(endpoints, ns, { requestSeconds: 1800, streamIdleSeconds: 300 }), failover, name);
        const routes = o.withoutHopGuards
            ? rendered.map((r) => ({ ...r, spec: { ...r.spec, rules: r.spec.rules.filter((x) => x.matches[0].headers.length === 1) } }))
            : rendered;
        const retry = new Map(
            routesWithPeers(routes).map((x) => [x.name, fallbackTrafficPolicy(x.name, ns, x.peers, x.modelNotFound).spec.retry] as const),
        );
        const peerBackends = new Set(peerObjects(failover, ns).flatMap((x) => (x.kind === "AIServiceBackend" ? [x.metadata.name] : [])));
        const strip = earlyHeaderStrip();
        const securityPolicy = securityPolicyOf({
            namespace: ns,
            auth: { service: "auth", namespace: ns, port: auth.port, pathPrefix: "/authz" },
            maxRequestBytes: 1 << 20,
            timeoutSeconds: 5,
        });

        const spoke: TestSpoke = {
            name,
            auth,
            metering,
            released,
            modelUp: true,
            modelAnswer: 200,
            outcomes: [],
            records: [],
            async request(clientHeaders, body, depth = 0) {
                const started = Date.now();
                // Envoy: early strip (ClientTrafficPolicy), then a generated request id (requestID: Generate).
                const h: Record<string, string> = {};
                for (const [k, v] of Object.entries(clientHeaders)) {
                    const n = k.toLowerCase();
                    if (strip.remove.includes(n) || strip.removeOnMatch.some((m) => n.startsWith(m.value))) continue;
                    h[n] = v;
                }
                h["x-request-id"] = randomUUID();
                // ext_authz (SecurityPolicy): the body and HEADERS_TO_EXT_AUTH; on 200 the identity headers are copied onto the request.
                const authHeaders: Record<string, string> = {};
                for (const k of HEADERS_TO_EXT_AUTH) if (h[k]) authHeaders[k] = h[k];
                const authz = await fetch(`http://127.0.0.1:${auth.port}/authz/v1/chat/completions`, {
                    method: "POST",
                    headers: authHeaders,
                    body,
                });
                await authz.arrayBuffer();
                const model = (JSON.parse(body) as { model: string }).model;
                const log = async (rec: Partial<AccessLogRecord>) => {
                    const full: AccessLogRecord = {
                        requestId: h["x-request-id"],
                        startTime: new Date(started).toISOString(),
                        durationMs: Math.max(0, Date.now() - started),
                        method: "POST",
                        path: "/v1/chat/completions",
                        responseFlags: "-",
                        bytesReceived: body.length,
                        bytesSent: 200,
                        contentType: "application/json",
                        ...Object.fromEntries(
                            (["tenant", "team", "keyId", "model", "lease"] as const).map((f) => [f, h[IDENTITY_HEADERS[f]] ?? "-"]),
                        ),
                        ...rec,
                    };
                    spoke.records.push(full);
                    const res = await fetch(`http://127.0.0.1:${meteringPort}/v1/logs`, {
                        method: "POST",
                        headers: { "content-type": "application/json" },
                        body: JSON.stringify(toOtlpRequest([full])),
                    });
                    if (res.status !== 200) throw new Error(`metering ${name} answered ${res.status}: ${await res.text()}`);
                };
                if (authz.status !== 200) {
                    await log({ status: authz.status, responseCodeDetails: "ext_authz_denied" });
                    return { status: authz.status };
                }
                for (const v of securityPolicy.spec.extAuth.http.headersToBackend) {
                    const x = authz.headers.get(v);
                    if (x !== null) h[v] = x;
                }
                // The AI Gateway sets the model header from the body; the rule is the most specific one that matches
                // across every rendered route (Gateway API precedence as Envoy Gateway sorts it: more header matches
                // first, upstream/failover.ts hopGuardPrecedence), so a forwarded request takes its hop guard.
                h[AI_GATEWAY_MODEL_HEADER] = model;
                const picked = selectRule(routes, h);
                if (!picked) {
                    await log({ status: 404, responseCodeDetails: "route_not_found" });
                    return { status: 404 };
                }
                const { route, ruleIndex } = picked;
                const rule = route.spec.rules[ruleIndex];
                const refs = rule.backendRefs
                    .map((ref, j) => ({
                        ref: ref as {
                            name: string;
                            priority?: number;
                            headerMutation?: { remove: string[]; set?: Array<{ name: string; value: string }> };
                        },
                        j,
                    }))
                    .sort((x, y) => (x.ref.priority ?? 0) - (y.ref.priority ?? 0));
                const policy = retry.get(route.metadata.name);
                // Envoy: x-envoy-max-retries, when present, takes precedence over the route's numRetries.
                const maxRetries = h[ENVOY_MAX_RETRIES_HEADER];
                const attempts = 1 + (maxRetries !== undefined ? Number(maxRetries) : (policy?.numRetries ?? 0));
                // Hosts per backend: the local frontend has none while the spoke's model is down (its DynamoGraphDeployment
                // deleted, the <dgd>-frontend Service gone); a peer gateway always resolves.
                const hasHosts = (ref: { name: string }) => peerBackends.has(ref.name) || spoke.modelUp;
                // Envoy's priority load: a priority without healthy hosts gets no load, it spills to the next one with
                // hosts (upstream/failover.ts envoyPrioritySpill) on the FIRST attempt; numAttemptsPerPriority 1 moves
                // each retry to a priority not tried yet. No priority with hosts left: 503 no_healthy_upstream.
                const tried = new Set<number>();
                let result: ClientResult = { status: 503 };
                let last = refs[0];
                let noHealthy = false;
                for (let attempt = 0; attempt < attempts; attempt++) {
                    const next = refs.find((x) => !tried.has(x.ref.priority ?? 0) && hasHosts(x.ref));
                    if (!next) {
                        // A retry with no priority left to try: 503, the hop (if any) still on record.
                        noHealthy = true;
                        result = { status: 503, ...(result.forwardedHeaders ? { forwardedHeaders: result.forwardedHeaders } : {}) };
                        break;
                    }
                    tried.add(next.ref.priority ?? 0);
                    last = next;
                    const { ref } = next;
                    const retriable = (status: number) =>
                        (policy?.retryOn.httpStatusCodes as readonly number[] | undefined)?.includes(status) ?? false;
                    if (!peerBackends.has(ref.name)) {
                        // The local Dynamo frontend: serves, or answers 503 / 404 model_not_found for a dead model.
                        result = spoke.modelAnswer === 200 ? { status: 200, servedBy: name } : { status: spoke.modelAnswer };
                        if (result.status === 200 || !retriable(result.status)) break;
                        continue;
                    }
                    // The hop: the headers left after the backendRef's headerMutation, to the peer's gateway.
                    const out = { ...h };
                    for (const n of ref.headerMutation?.remove ?? []) delete out[n];
                    for (const x of ref.headerMutation?.set ?? []) out[x.name] = x.value;
                    const target = spokes.get(ref.name.replace(/^peer-/, ""))!;
                    hops.n++;
                    if (depth + 1 > MAX_HOPS) throw new Error(`request forwarded ${depth + 1} times between the spokes: a failover loop`);
                    const r = await target.request(out, body, depth + 1);
                    result = { ...r, forwardedHeaders: out };
                    if (!retriable(r.status)) break;
                }
                const tokens = result.status === 200 ? { inputTokens: 42, outputTokens: 17, cachedInputTokens: 0, totalTokens: 59 } : {};
                await log({
                    status: result.status,
                    responseFlags: noHealthy ? "UH" : result.status === 503 && !result.servedBy ? "UF" : "-",
                    routeName: `${ns}/${route.metadata.name}`,
                    backendName: `${ns}/${last.ref.name}/route/${route.metadata.name}/rule/${ruleIndex}/ref/${last.j}`,
                    ...tokens,
                });
                return result;
            },
        };
        return spoke;
    };

    const a = await start(o.names[0], o.names[1]);
    spokes.set(a.name, a);
    const b = await start(o.names[1], o.names[0]);
    spokes.set(b.name, b);
    // Outcomes: wrap ingest to keep them.
    for (const s of [a, b]) {
        const ingest = s.metering.ingest.bind(s.metering);
        s.metering.ingest = async (records) => {
            const out = await ingest(records);
            s.outcomes.push(out);
            return out;
        };
    }
    return {
        a,
        b,
        hops,
        async drainToLedger() {
            for (const x of streams) {
                await x.shipper.drained(30_000);
                await o.rig.consume(x.stream, x.spoke, 2);
            }
        },
        async republish(which, p) {
            const s = which === "a" ? a : b;
            revision++;
            await publishBundle(s3, hub, s.name, revision, p);
            await s.auth.bundles.syncOnce();
        },
        async stop() {
            for (const c of closers.reverse()) await c().catch(() => undefined);
            await Promise.all(redis.map((r) => r.stop()));
            await s3.destroy();
        },
    };
}
