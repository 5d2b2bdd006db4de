import type * as pulumi from "@pulumi/pulumi";

/**
 * Where a part of the usage ledger declares its resources: the UsageLedger component is every resource's parent and
 * `name` prefixes every resource name, exactly as before the ledger was split into these modules, so no URN moved
 * (test/hub-urns.test.ts).
 */
export interface LedgerScope {
    /** The UsageLedger component's name (resource name prefix). */
    name: string;
    /** Plain child options (`parent` = the UsageLedger component). */
    parent: pulumi.CustomResourceOptions;
    /** Stateful or hard to recreate: protected and retained (the engine refuses to delete or replace them). */
    keep: pulumi.CustomResourceOptions;
    tags: Record<string, string>;
    /** The hub's region. */
    region: string;
    /**
     * First word of every fixed physical name (`platform:namePrefix`, config/hub.ts; default `platform`): the
     * cluster, streams, Lambdas, log groups, alarms, secrets, the failure bucket.
     */
    prefix: string;
}
