import type { StackValidationPolicy } from "@pulumi/policy";
import { KEY_GENERATOR_TYPES } from "./aws";
import { CACHE_SALT_SECRET, COUNTER_STORE_SECRET } from "../services/shared/spoke-secrets";

/**
 * A spoke stack generates no key material into its state. A pull request's preview of a spoke holds the spoke's
 * `PULUMI_CONFIG_PASSPHRASE` and runs the pull request's own code, so whatever the spoke's state holds a `.apply`
 * can print. The spoke's own secrets (the counter store's password, the auth service's cache-salt key) are generated
 * by `npm run mint-key -- install-spoke-secrets` straight into Kubernetes Secrets (services/shared/spoke-secrets.ts);
 * the program only names them. Closed: every `random:` and `tls:` resource, and every AWS key generator, is refused in
 * a spoke; there is no reviewed exception. A stack is a spoke when a resource sits under a `platform:spoke:` component.
 */

/** `<qualified type>::<name>` of a URN (`urn:pulumi:<stack>::<project>::<qualified type>::<name>`). */
function urnTail(urn: string): string {
    return urn.split("::").slice(2).join("::");
}

/**
 * The operator-installed Secrets' names, from their one definition (services/shared/spoke-secrets.ts, which imports
 * nothing): a Pulumi-managed Secret by one of these names would hold the value in state.
 */
export const INSTALLED_SPOKE_SECRETS: readonly string[] = [COUNTER_STORE_SECRET.name, CACHE_SALT_SECRET.name];

/**
 * `spoke-no-key-generators` (mandatory): a spoke stack generates no key material into its state (no `random:`/`tls:`
 * resource, no AWS key) and manages none of the operator-installed Secrets ({@link INSTALLED_SPOKE_SECRETS}).
 */
export const spokeNoKeyGenerators: StackValidationPolicy = {
    name: "spoke-no-key-generators",
    description:
        "A spoke stack generates no key material into its state (no random:/tls: resource, no AWS key) and manages none of the operator-installed spoke Secrets.",
    remediationSteps:
        "Generate the value outside Pulumi into a Kubernetes Secret the program only names: npm run mint-key -- install-spoke-secrets (services/keys/spoke-secrets-install.ts, services/shared/spoke-secrets.ts). A spoke's preview holds its passphrase and runs the pull request's code.",
    enforcementLevel: "mandatory",
    validateStack: (args, report) => {
        const rs = args.resources;
        if (!rs.some((r) => urnTail(r.urn).includes("platform:spoke:"))) return;
        for (const r of rs) {
            const generator =
                (KEY_GENERATOR_TYPES.exact as readonly string[]).includes(r.type) ||
                KEY_GENERATOR_TYPES.prefixes.some((p) => r.type.startsWith(p));
            if (generator)
                report(
                    `${r.type} ${r.name} in a spoke stack generates key material into its state (readable by any .apply of a pull request's preview, which holds the spoke's passphrase).`,
                    r.urn,
                );
            const name = (r.props as { metadata?: { name?: unknown } }).metadata?.name;
            if (r.type === "kubernetes:core/v1:Secret" && typeof name === "string" && INSTALLED_SPOKE_SECRETS.includes(name))
                report(
                    `Kubernetes Secret ${name} (${r.name}) is managed by the spoke stack: it is installed by npm run mint-key -- install-spoke-secrets, and a Pulumi-managed copy would hold its value in the spoke's state and overwrite the installed one.`,
                    r.urn,
                );
        }
    },
};

/** The spoke-secret policies of the pack. */
export const spokeSecretPolicies: StackValidationPolicy[] = [spokeNoKeyGenerators];
