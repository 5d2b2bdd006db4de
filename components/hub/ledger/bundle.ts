import * as aws from "@pulumi/aws";
import { createHash } from "node:crypto";
import * as esbuild from "esbuild";
import * as fs from "node:fs";
import * as path from "node:path";

/** The repository root (components/hub/ledger -> ../../..). */
export const REPO_ROOT = path.resolve(__dirname, "..", "..", "..");

/** The consumer Lambda's code, bundled from services/usage-consumer/handler.ts. */
export interface ConsumerBundle {
    /** CommonJS source of `index.js` (exports `handler`). */
    code: string;
    /** Base64 SHA-256 of `code` (Lambda `sourceCodeHash`): changes exactly when the code changes. */
    sha256: string;
}

/**
 * Bundles the usage consumer with esbuild (in-process, ~0.2 s), so `npm run render` and `pulumi up` need no
 * prebuilt artifact. The ledger schema (services/ledger/schema.sql) is inlined through `define`; the AWS SDK v3
 * is left external because the Lambda Node.js runtime provides it; `pg-native` is an optional peer of `pg`.
 * @throws Error with esbuild's messages when the bundle does not build
 */
export function bundleUsageConsumer(): ConsumerBundle {
    return bundleLambda(path.join("services", "usage-consumer", "handler.ts"));
}

/**
 * Bundles one hub Lambda (entry relative to the repo root; it exports `handler`) the same way as the consumer:
 * the migrator and the reconciliation (services/reconciler).
 * @throws Error with esbuild's messages when the bundle does not build
 */
export function bundleLambda(entry: string): ConsumerBundle {
    const cached = bundles.get(entry);
    if (cached && cached.inputs.every(([file, stamp]) => stampOf(file) === stamp)) return cached.bundle;
    const schema = path.join(REPO_ROOT, "services", "ledger", "schema.sql");
    const r = esbuild.buildSync({
        entryPoints: [path.join(REPO_ROOT, entry)],
        absWorkingDir: REPO_ROOT,
        bundle: true,
        write: false,
        metafile: true,
        platform: "node",
        target: "node24",
        format: "cjs",
        minify: true,
        legalComments: "none",
        logLevel: "silent",
        external: ["@aws-sdk/*", "pg-native"],
        define: {
            __LEDGER_SCHEMA_SQL__: JSON.stringify(fs.readFileSync(schema, "utf8")),
        },
    });
    const code = r.outputFiles[0].text;
    const bundle = { code, sha256: createHash("sha256").update(code).digest("base64") };
    const files = [schema, ...Object.keys(r.metafile.inputs).map((f) => path.resolve(REPO_ROOT, f))];
    bundles.set(entry, { bundle, inputs: files.map((f) => [f, stampOf(f)] as const) });
    return bundle;
}

/**
 * Bundles already built in this process, by entry, with the size and modification time of every file that went into
 * them (esbuild's metafile, and the inlined schema): a process that renders the hub many times (the test workers,
 * `npm run render` of several hubs) bundles each Lambda once, and an edited input builds it afresh.
 */
const bundles = new Map<string, { bundle: ConsumerBundle; inputs: ReadonlyArray<readonly [string, string]> }>();

/** `size:mtime` of a file, or `missing`. */
function stampOf(file: string): string {
    try {
        const st = fs.statSync(file);
        return `${st.size}:${st.mtimeMs}`;
    } catch {
        return "missing";
    }
}

/**
 * Lambda runtime of the hub's functions: Node.js 24, the platform's runtime (package.json `engines`, .nvmrc), so the
 * code runs on Lambda with the Node.js it is tested with (`aws.lambda.Runtime.NodeJS24dX` in @pulumi/aws 7.48.0).
 */
export const CONSUMER_RUNTIME: aws.lambda.Runtime = aws.lambda.Runtime.NodeJS24dX;
