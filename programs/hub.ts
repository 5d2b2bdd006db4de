import * as pulumi from "@pulumi/pulumi";
import { ApiKeys } from "../components/hub/ApiKeys";
import { CONTRACT_SCHEMA_VERSION, SpokeContract, contentHash } from "../config/contract";
import type { HubConfig } from "../config/stack";

/**
 * Pure: the per-spoke placement contracts (DESIGN §3) for a validated hub config. Every spoke the hub knows
 * gets a contract, possibly with no endpoints, so a spoke is never left guessing.
 */
export function buildSpokeContracts(hub: HubConfig, hubStack: string): Record<string, SpokeContract> {
    const out: Record<string, SpokeContract> = {};
    for (const s of [...hub.spokes].sort((a, b) => a.name.localeCompare(b.name))) {
        const endpoints = hub.endpoints.filter((e) => e.spoke === s.name);
        out[s.name] = {
            schemaVersion: CONTRACT_SCHEMA_VERSION,
            hub: hubStack,
            spoke: s.name,
            placementRevision: contentHash(endpoints),
            endpoints,
        };
    }
    return out;
}

/**
 * Pure: the tenant/team/key/limit model as the policy bundle will carry it, keyed for lookup by the spoke's
 * auth service. Key hashes are filled in by the caller (they are outputs of {@link ApiKeys}).
 */
export function accessModel(hub: HubConfig, keyHashes: Record<string, string>) {
    return {
        models: hub.models.map((m) => ({ id: m.id, limits: m.limits })),
        tenants: hub.tenants.map((t) => ({ id: t.id, displayName: t.displayName, teams: t.teams.map((x) => ({ id: x.id, limits: x.limits })) })),
        apiKeys: hub.apiKeys.map((k) => ({
            id: k.id, sha256: keyHashes[k.id], tenant: k.tenant, team: k.team, models: [...k.models].sort(), expiresAt: k.expiresAt, limits: k.limits,
        })),
    };
}

/** Builds the hub stack. Returns the stack outputs. */
export function buildHub(cfg: HubConfig, stackName: string) {
    const keys = new ApiKeys("api-keys", { keyIds: cfg.apiKeys.map((k) => k.id) });
    const spokeContracts = buildSpokeContracts(cfg, stackName);
    return {
        /** One versioned contract object per spoke; spokes read their entry through a StackReference. */
        spokeContracts,
        /** Placement summary: spoke -> endpoint names (for humans and dashboards). */
        placement: Object.fromEntries(Object.entries(spokeContracts).map(([k, c]) => [k, { revision: c.placementRevision, endpoints: c.endpoints.map((e) => e.name) }])),
        /** The access model with key hashes (no keys). */
        accessModel: keys.keyHashes.apply((h) => accessModel(cfg, h)),
        /** API keys by id: secret. */
        apiKeys: keys.keys,
    };
}
