import { z } from "zod";
import { DnsLabel, EndpointSchema } from "./endpoint";

/**
 * Version of the hub -> spoke deployment declaration. Bump only on purpose (DESIGN §3): a spoke
 * refuses a contract whose version it does not know instead of guessing.
 */
export const CONTRACT_SCHEMA_VERSION = 1 as const;

/**
 * What the hub declares for one spoke (DESIGN §3, "Placement"): the endpoints it must run. The hub
 * exports one of these per spoke under the stack output `spokeContracts`; the spoke reads its own entry
 * through a StackReference and validates it with this schema before creating anything.
 */
export const SpokeContractSchema = z.object({
    schemaVersion: z.literal(CONTRACT_SCHEMA_VERSION),
    /** Hub stack name that produced this contract. */
    hub: z.string(),
    spoke: DnsLabel,
    /** SHA-256 (hex) of the canonical JSON of `endpoints`: changes exactly when the placement changes. */
    placementRevision: z.string().regex(/^[0-9a-f]{64}$/),
    endpoints: z.array(EndpointSchema),
}).strict();

export type SpokeContract = z.infer<typeof SpokeContractSchema>;

export { canonicalJson, contentHash } from "../services/shared/canonical";
