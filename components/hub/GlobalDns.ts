import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { FailoverConfig } from "../../config/failover";
import { type DnsSpoke, healthCheckArgs, recordArgs } from "../../lib/failover";

/** Inputs of {@link GlobalDns}. */
export interface GlobalDnsArgs {
    /** `platform:failover` of the hub file. */
    failover: FailoverConfig;
    /** Each spoke behind the name, in `failover.spokes` order, with its edge from its spoke file (programs/failover.ts). */
    spokes: DnsSpoke[];
}

/**
 * The one hostname clients use: per spoke a Route 53 HTTPS health check against the spoke's gateway
 * (lib/failover.ts `healthCheckArgs`) and a CNAME record of the global name to the spoke's listener hostname carrying
 * that check, as latency records (`active-active`) or failover records (`primary-standby`; lib/failover.ts
 * `recordArgs`). Route 53 answers only with spokes whose check passes; when every check fails it answers with all of
 * them (Route 53 treats all-unhealthy as all-healthy), so clients still reach a gateway that may fall back further.
 * The check sees a spoke's gateway, not its models (one name serves every model; upstream/failover.ts
 * `route53SeesTheGateway`): a dead model behind a live gateway fails over per request to the peers (lib/failover.ts
 * FALLBACK_STATUS_CODES), docs/failover.md.
 */
export class GlobalDns extends pulumi.ComponentResource {
    /** Spoke -> Route 53 health check id. */
    public readonly healthCheckIds: Record<string, pulumi.Output<string>>;

    constructor(name: string, args: GlobalDnsArgs, opts?: pulumi.ComponentResourceOptions) {
        super("platform:hub:GlobalDns", name, {}, opts);
        this.healthCheckIds = {};
        for (const s of args.spokes) {
            const hc = new aws.route53.HealthCheck(`${name}-hc-${s.spoke}`, healthCheckArgs(s, args.failover), { parent: this });
            this.healthCheckIds[s.spoke] = hc.id;
            new aws.route53.Record(`${name}-${s.spoke}`, { ...recordArgs(s, args.failover), healthCheckId: hc.id }, { parent: this });
        }
        this.registerOutputs({ healthCheckIds: this.healthCheckIds });
    }
}
