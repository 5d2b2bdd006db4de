import { z } from "zod";
import { parseCidr } from "./cidr";

/** One IPv4 CIDR, parsed (config/cidr.ts), not just any string. */
export const EgressCidrSchema = z.string().refine((s) => {
    try {
        parseCidr(s);
        return true;
    } catch {
        return false;
    }
}, "must be an IPv4 CIDR like 198.51.100.0/28");

/**
 * `egressCidrs` of an access-key spoke identity: the site's egress ranges, required (at least one). A long-lived
 * source key usable from anywhere is what a leaked key needs; the trust policy, the user's policy and the role's own
 * policy all check `aws:SourceIp` against these ranges (components/hub/SpokeIdentity.ts).
 */
export const RequiredEgressCidrsSchema = z
    .array(EgressCidrSchema)
    .min(1, "an access-key spoke needs the site's egress ranges (egressCidrs): its long-lived key must not work from anywhere");

/** `egressCidrs` of a roles-anywhere identity: optional, validated. */
export const OptionalEgressCidrsSchema = z.array(EgressCidrSchema).default([]);
