import { z } from "zod";

/**
 * Service environment contracts. Each service defines its environment once, as a zod object schema in its own
 * `config.ts` (names, types, defaults; one entry per variable), and loads `process.env` through it at start.
 * The component that deploys the service renders the variables with {@link EnvVars} of that same schema, so a
 * name the service does not read is a type error, and test/service-env.test.ts loads every rendered
 * Deployment/StatefulSet/Lambda environment of every shipped stack through the service's own loader.
 *
 * This module and every service `config.ts` import only zod and Node built-ins at run time (no ioredis, pg,
 * AWS SDK): components import them into the Pulumi program.
 */

/** A service's environment schema (a zod object; refinements allowed). */
export type EnvContract = z.ZodObject;

/** The variable names of a contract. */
export type EnvName<C extends EnvContract> = Extract<keyof C["shape"], string>;

/**
 * Variables a deployment sets, by the contract's names only. `V` is `string` for a Kubernetes env value and
 * `pulumi.Input<string>` for a Lambda's `environment.variables`.
 */
export type EnvVars<C extends EnvContract, V = string> = { [K in EnvName<C>]?: V };

/** Variables the AWS SDK v3's default credential and region chain reads (`@smithy/shared-ini-file-loader`, `@aws-sdk/credential-provider-node`). */
export const AWS_SDK_ENV = {
    AWS_REGION: z.string().min(1).optional(),
    AWS_PROFILE: z.string().min(1).optional(),
    AWS_CONFIG_FILE: z.string().min(1).optional(),
    AWS_SHARED_CREDENTIALS_FILE: z.string().min(1).optional(),
};

/** Extra CA certificates Node.js loads at start (nodejs/node@v24: doc/api/cli.md `NODE_EXTRA_CA_CERTS`). */
export const NODE_RUNTIME_ENV = {
    NODE_EXTRA_CA_CERTS: z.string().min(1).optional(),
};

/**
 * Parses `env` with `contract`.
 * @throws Error starting `invalid <service> configuration:` and listing each invalid or missing variable with the
 *   reason (values are not echoed: some are secret)
 */
export function parseEnv<C extends EnvContract>(service: string, contract: C, env: NodeJS.ProcessEnv): z.output<C> {
    const r = contract.safeParse(env);
    if (!r.success) {
        const lines = r.error.issues.map((i) => `  ${i.path.join(".") || "(env)"}: ${i.message}`);
        throw new Error(`invalid ${service} configuration:\n${lines.join("\n")}`);
    }
    return r.data;
}

/** The names a contract declares (what a rendered environment may set). */
export function envNames(contract: EnvContract): string[] {
    return Object.keys(contract.shape);
}
