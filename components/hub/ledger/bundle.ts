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
    const cached = bundles.get(entry) ?? readShared(entry);
    if (cached?.inputs.every(([file, stamp]) => stampOf(file) === stamp)) {
        bundles.set(entry, cached);
        return cached.bundle;
    }
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
    // This file too: it holds the build options.
    const files = [__filename, schema, ...Object.keys(r.metafile.inputs).map((f) => path.resolve(REPO_ROOT, f))];
    const built = { bundle, inputs: files.map((f) => [f, stampOf(f)] as const) };
    bundles.set(entry, built);
    writeShared(entry, built);
    return bundle;
}

/**
 * Environment variable naming a folder where bundles are also kept for other processes (a test run's workers and the
 * renders they spawn; test/global-setup.ts sets it): each is taken only while every file that went into it has the
 * size and modification time it had. Unset (`npm run render`, `pulumi up`): bundles are kept in this process only.
 */
export const BUNDLE_CACHE_ENV = "PLATFORM_LAMBDA_BUNDLE_CACHE";

type Built = { bundle: ConsumerBundle; inputs: ReadonlyArray<readonly [string, string]> };

/** The shared folder's file for an entry of this checkout built by this esbuild, or undefined when none is set. */
export function sharedBundleFile(entry: string): string | undefined {
    const dir = process.env[BUNDLE_CACHE_ENV];
    if (!dir) return undefined;
    const key = createHash("sha256").update(`${REPO_ROOT}\0${entry}\0${esbuild.version}`).digest("hex");
    return path.join(dir, `${key}.json`);
}

function readShared(entry: string): Built | undefined {
    const file = sharedBundleFile(entry);
    if (!file) return undefined;
    try {
        return JSON.parse(fs.readFileSync(file, "utf8")) as Built;
    } catch {
        return undefined; // not built yet (or being written)
    }
}

function writeShared(entry: string, built: Built): void {
    const file = sharedBundleFile(entry);
    if (!file) return;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(built));
    fs.renameSync(tmp, file); // whole or not at all for a reader in another process
}

/**
 * Bundles already built in this process, by entry, with the size and modification time of every file that went into
 * them (esbuild's metafile, and the inlined schema): a process that renders the hub many times (the test workers,
 * `npm run render` of several hubs) bundles each Lambda once, and an edited input builds it afresh.
 */
const bundles = new Map<string, Built>();

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
