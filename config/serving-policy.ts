import { z } from "zod";
import { dynamoCacheSalt } from "../upstream/dynamo";
import { DnsLabel } from "./endpoint";
import { versions } from "./versions";

/**
 * `platform:servingClasses` of the hub: the named priority and latency classes teams and keys are entitled to.
 * - `priority`: class -> Dynamo's unified request priority (`nvext.agent_hints.priority`, i32; higher is served
 *   first). The KV router's queue moves a request `max(priority, 0)` seconds earlier (`priority_jump`,
 *   ai-dynamo/dynamo@v1.5.0:lib/llm/src/preprocessor.rs#routing_priorities); the vLLM worker passes `-priority` to
 *   vLLM, whose priority scheduler serves lower values first (components/src/dynamo/vllm/handlers.py); the SGLang
 *   worker passes it on as SGLang's priority (components/src/dynamo/sglang/request_handlers/handler_base.py
 *   `_priority_kwargs`).
 * - `latency`: class -> the router's strict pending-queue tier (`nvext.agent_hints.strict_priority`, u32; a higher
 *   tier is always dequeued first: ai-dynamo/dynamo@v1.5.0:lib/kv-router/src/scheduling/policy.rs `FcfsPolicy`).
 */
export const ServingClassesSchema = z
    .object({
        priority: z.record(DnsLabel, z.number().int().min(0).max(3600)),
        latency: z.record(DnsLabel, z.number().int().min(0).max(1000)),
    })
    .strict();
/** `platform:servingClasses` of the hub as parsed ({@link ServingClassesSchema}). */
export type ServingClasses = z.infer<typeof ServingClassesSchema>;

/**
 * A team's serving entitlement (`platform:tenants[i].teams[j].serving`): its priority and latency class and the
 * largest expected-output-length hint (`nvext.agent_hints.osl`, tokens) its requests may carry.
 */
export const TeamServingSchema = z
    .object({
        priorityClass: DnsLabel,
        latencyClass: DnsLabel,
        /** Largest `nvext.agent_hints.osl` accepted, tokens; a larger hint is refused (400). */
        maxOutputLengthHint: z.number().int().min(0),
    })
    .strict();

/** A key's narrowing of its team's entitlement (`platform:apiKeys[i].serving`): each field at most the team's. */
export const KeyServingSchema = TeamServingSchema.partial().strict();

/**
 * `platform:kvSharing` of the hub: the only places tenants share a KV cache. Tenants in one group get the same cache
 * salt for the group's models (their prompts' KV is reusable across them, and so observable by timing); everyone else
 * is isolated per tenant (or per team, `platform:tenants[i].kvCache: team`).
 */
export const KvSharingSchema = z
    .object({
        name: DnsLabel,
        tenants: z.array(DnsLabel).min(2),
        /** Models the group shares a cache on (each in `platform:models`). */
        models: z.array(z.string().min(1)).min(1),
        /** Why these tenants may see each other's cache hits (kept in the hub file for review). */
        reason: z.string().min(10),
    })
    .strict();
/** One `platform:kvSharing[]` entry of the hub as parsed ({@link KvSharingSchema}). */
export type KvSharing = z.infer<typeof KvSharingSchema>;

/** What the auth service enforces for one API key (carried per key in the signed bundle). */
export interface KeyServing {
    /** Dynamo `agent_hints.priority` ceiling. */
    priority: number;
    /** Dynamo `agent_hints.strict_priority` ceiling. */
    strictPriority: number;
    /** Largest `agent_hints.osl` accepted, tokens. */
    maxOutputLengthHint: number;
    /** Model id -> cache scope the salt is derived from (`tenant:<t>`, `team:<t>/<team>` or `shared:<group>`). */
    cacheScopes: Record<string, string>;
}

interface HubView {
    models: Array<{ id: string }>;
    tenants: Array<{
        id: string;
        kvCache?: "tenant" | "team";
        teams: Array<{ id: string; serving?: z.infer<typeof TeamServingSchema> }>;
    }>;
    apiKeys: Array<{ id: string; tenant: string; team: string; models: string[]; serving?: z.infer<typeof KeyServingSchema> }>;
    servingClasses?: ServingClasses;
    kvSharing: KvSharing[];
    endpoints: Array<{ model: string; engine: string; cacheScopes?: number }>;
}

type Issue = { path: (string | number)[]; message: string };

const lowest = (m: Record<string, number>): number => Math.min(0, ...Object.values(m));

/**
 * Pure: cross-checks of the serving entitlements and KV sharing against the hub's tenants, keys and endpoints:
 * classes must exist and each be used by a team; a key may only narrow its team; sharing groups name known tenants
 * and models, each tenant/model pair in at most one group; and an endpoint whose engine drops the cache salt (SGLang
 * and TRT-LLM under Dynamo 1.5.0, upstream/dynamo.ts `dynamoCacheSalt`) may serve only keys of one cache scope,
 * while one whose engine ignores priority (TRT-LLM) is refused once any class is above the lowest.
 */
export function servingPolicyIssues(h: HubView): Issue[] {
    const out: Issue[] = [];
    const cls = h.servingClasses;
    const used = { priority: new Set<string>(), latency: new Set<string>() };
    const teamServing = new Map<string, z.infer<typeof TeamServingSchema>>();
    h.tenants.forEach((t, i) =>
        t.teams.forEach((team, j) => {
            const s = team.serving;
            if (!s) return;
            teamServing.set(`${t.id}/${team.id}`, s);
            const path = ["tenants", i, "teams", j, "serving"];
            if (!cls) {
                out.push({ path, message: "a team's serving entitlement needs platform:servingClasses to name its classes" });
                return;
            }
            for (const k of ["priority", "latency"] as const) {
                const name = s[`${k}Class`];
                used[k].add(name);
                if (!(name in cls[k]))
                    out.push({
                        path: [...path, `${k}Class`],
                        message: `unknown ${k} class "${name}" (known: ${Object.keys(cls[k]).join(", ") || "none"})`,
                    });
            }
        }),
    );
    if (cls) {
        for (const k of ["priority", "latency"] as const)
            for (const name of Object.keys(cls[k]))
                if (!used[k].has(name))
                    out.push({
                        path: ["servingClasses", k, name],
                        message: `no team may use ${k} class "${name}": give it to a team (platform:tenants[].teams[].serving.${k}Class) or remove it`,
                    });
        h.tenants.forEach((t, i) =>
            t.teams.forEach((team, j) => {
                if (!team.serving)
                    out.push({
                        path: ["tenants", i, "teams", j, "serving"],
                        message: `team "${t.id}/${team.id}" has no serving entitlement; with platform:servingClasses every team names its priorityClass, latencyClass and maxOutputLengthHint`,
                    });
            }),
        );
    }
    h.apiKeys.forEach((k, i) => {
        const s = k.serving;
        if (!s) return;
        const team = teamServing.get(`${k.tenant}/${k.team}`);
        const path = ["apiKeys", i, "serving"];
        if (!cls || !team) {
            out.push({ path, message: `a key narrows its team's entitlement; team "${k.tenant}/${k.team}" has none` });
            return;
        }
        for (const c of ["priority", "latency"] as const) {
            const name = s[`${c}Class`];
            if (name === undefined) continue;
            if (!(name in cls[c])) {
                out.push({
                    path: [...path, `${c}Class`],
                    message: `unknown ${c} class "${name}" (known: ${Object.keys(cls[c]).join(", ")})`,
                });
                continue;
            }
            const teamName = team[`${c}Class`];
            if (cls[c][name] > (cls[c][teamName] ?? lowest(cls[c])))
                out.push({
                    path: [...path, `${c}Class`],
                    message: `${c} class "${name}" (${cls[c][name]}) is above team "${k.tenant}/${k.team}"'s "${teamName}" (${cls[c][teamName]}): a key may only narrow its team's entitlement, never raise it`,
                });
        }
        if (s.maxOutputLengthHint !== undefined && s.maxOutputLengthHint > team.maxOutputLengthHint)
            out.push({
                path: [...path, "maxOutputLengthHint"],
                message: `${s.maxOutputLengthHint} is above team "${k.tenant}/${k.team}"'s ${team.maxOutputLengthHint}: a key may only narrow its team's entitlement`,
            });
    });

    const tenants = new Set(h.tenants.map((t) => t.id));
    const models = new Set(h.models.map((m) => m.id));
    const sharedBy = new Map<string, string>();
    const groups = new Set<string>();
    h.kvSharing.forEach((g, i) => {
        if (groups.has(g.name)) out.push({ path: ["kvSharing", i, "name"], message: `duplicate sharing group "${g.name}"` });
        groups.add(g.name);
        g.tenants.forEach((t, j) => {
            if (!tenants.has(t)) out.push({ path: ["kvSharing", i, "tenants", j], message: `unknown tenant "${t}"` });
        });
        g.models.forEach((m, j) => {
            if (!models.has(m)) out.push({ path: ["kvSharing", i, "models", j], message: `unknown model "${m}"` });
            for (const t of g.tenants) {
                const other = sharedBy.get(`${t}\n${m}`);
                if (other)
                    out.push({
                        path: ["kvSharing", i, "tenants"],
                        message: `tenant "${t}" already shares model "${m}" in group "${other}"`,
                    });
                sharedBy.set(`${t}\n${m}`, g.name);
            }
        });
    });

    h.endpoints.forEach((e, i) => {
        if (!SALT_KEEPING_ENGINES.has(e.engine)) {
            const scopes = new Set(h.apiKeys.filter((k) => k.models.includes(e.model)).map((k) => cacheScope(h, k, e.model)));
            if (scopes.size > 1)
                out.push({
                    path: ["endpoints", i, "engine"],
                    message: `the ${e.engine} worker of Dynamo ${versions.dynamoPlatform.version} is not proven to keep the request's cache salt in the engine's prefix hash (SGLang's drops it; upstream/dynamo.ts dynamoCacheSalt), so its prefix cache would be shared by the ${scopes.size} cache scopes whose keys call "${e.model}" (${[...scopes].sort().join(", ")}): serve the model on vLLM, or declare these tenants in one platform:kvSharing group for it`,
                });
        }
        if (e.engine === "trtllm" && cls && Object.values(cls.priority).some((p) => p > lowest(cls.priority)))
            out.push({
                path: ["endpoints", i, "engine"],
                message: `the TRT-LLM worker of Dynamo ${versions.dynamoPlatform.version} never reads the request priority (it takes a top-level \`priority\` the frontend does not set, ai-dynamo/dynamo@v1.5.0:components/src/dynamo/trtllm/request_handlers/handler_base.py), so priority classes would be inert: serve the model on vLLM or SGLang`,
            });
        if (e.cacheScopes !== undefined)
            out.push({
                path: ["endpoints", i, "cacheScopes"],
                message: "is set by the hub from its keys (programs/hub.ts buildSpokeContracts), not in the hub file: remove it",
            });
    });
    return out;
}

/** Pure: how many distinct cache scopes the keys allowed `model` fall into (the endpoint's `cacheScopes`). */
export function cacheScopesOf(h: Pick<HubView, "tenants" | "kvSharing" | "apiKeys">, model: string): number {
    return new Set(h.apiKeys.filter((k) => k.models.includes(model)).map((k) => cacheScope(h, k, model))).size;
}

/** Engines whose Dynamo 1.5.0 worker hands the request's cache salt to the engine's prefix hash (upstream/dynamo.ts). */
export const SALT_KEEPING_ENGINES: ReadonlySet<string> = new Set(
    Object.entries(dynamoCacheSalt)
        .filter(([, f]) => f.keeps)
        .map(([engine]) => engine),
);

/** The cache scope a key's requests for `model` are salted with: its sharing group, else its team or tenant. */
export function cacheScope(h: Pick<HubView, "tenants" | "kvSharing">, key: { tenant: string; team: string }, model: string): string {
    const g = h.kvSharing.find((x) => x.tenants.includes(key.tenant) && x.models.includes(model));
    if (g) return `shared:${g.name}`;
    const t = h.tenants.find((x) => x.id === key.tenant);
    return t?.kvCache === "team" ? `team:${key.tenant}/${key.team}` : `tenant:${key.tenant}`;
}

/**
 * Pure: the entitlement the auth service enforces for one key: its own narrowing, else its team's classes, resolved
 * to numbers. Without `platform:servingClasses` every key gets priority 0, tier 0 and no output-length hint.
 */
export function keyServing(h: HubView, key: HubView["apiKeys"][number]): KeyServing {
    const cls = h.servingClasses;
    const team = h.tenants.find((t) => t.id === key.tenant)?.teams.find((x) => x.id === key.team)?.serving;
    const pick = (c: "priority" | "latency"): number => {
        if (!cls) return 0;
        const name = key.serving?.[`${c}Class`] ?? team?.[`${c}Class`];
        return name !== undefined && name in cls[c] ? cls[c][name] : lowest(cls[c]);
    };
    return {
        priority: pick("priority"),
        strictPriority: pick("latency"),
        maxOutputLengthHint: key.serving?.maxOutputLengthHint ?? team?.maxOutputLengthHint ?? 0,
        cacheScopes: Object.fromEntries([...key.models].sort().map((m) => [m, cacheScope(h, key, m)])),
    };
}
