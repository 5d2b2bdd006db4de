import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
// tools/report/png.ts loads its rasteriser only when it draws: importing the name loads nothing heavy.
import { PNG_CACHE_ENV } from "../tools/report/png";

/**
 * components/hub/ledger/bundle.ts `BUNDLE_CACHE_ENV`, not imported: the global setup loads no product module (that one
 * loads the AWS provider). test/metering.test.ts checks that the two agree.
 */
export const BUNDLE_CACHE_ENV = "PLATFORM_LAMBDA_BUNDLE_CACHE";

/**
 * services/ledger/testing/postgres.ts `PG_TEMPLATE_ENV`, not imported (that module loads the PostgreSQL client);
 * services/ledger/bounds.test.ts checks that the two agree.
 */
export const PG_TEMPLATE_ENV = "PLATFORM_PG_TEMPLATE";

/** Environment variable naming the folder one `vitest run` shares between its worker processes (test/run-share.ts). */
export const RUN_DIR_ENV = "PLATFORM_TEST_RUN_DIR";

/**
 * Vitest global setup: a fresh folder for this run, which every worker process (both projects) inherits through
 * {@link RUN_DIR_ENV} and which is removed when the run ends. Nothing in it outlives the run, so nothing in it can be
 * stale for the next one. A folder already named by the variable (an outer run) is used as it is.
 */
export default function setup(): (() => void) | undefined {
    if (process.env[RUN_DIR_ENV]) return undefined;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "platform-test-run-"));
    process.env[RUN_DIR_ENV] = dir;
    // The hub's Lambda bundles, built once for the run's workers and every render they spawn.
    process.env[BUNDLE_CACHE_ENV] = path.join(dir, "lambda-bundles");
    // One initialised PostgreSQL data directory, copied by every test server of the run.
    process.env[PG_TEMPLATE_ENV] = path.join(dir, "postgres-template");
    // Pictures rasterised once for the run's workers and every render they spawn.
    process.env[PNG_CACHE_ENV] = path.join(dir, "png");
    return () => {
        fs.rmSync(dir, { recursive: true, force: true });
        delete process.env[RUN_DIR_ENV];
        delete process.env[BUNDLE_CACHE_ENV];
        delete process.env[PG_TEMPLATE_ENV];
        delete process.env[PNG_CACHE_ENV];
    };
}
