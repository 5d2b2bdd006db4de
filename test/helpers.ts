import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { onTestFinished } from "vitest";
import * as YAML from "yaml";
import { type CapturedResource, runStack, type RunStackResult, type StackOutputs } from "../tools/harness";
import { readStackFile, type StackFile } from "../lib/stackfiles";
import { referenceableOutputs, unwrapWire } from "../tools/wire";
import { sharedInRun } from "./run-share";

export const ROOT = path.join(__dirname, "..");
export const STACKS = path.join(ROOT, "stacks");

/** A repo stack file as the renderer reads it. */
export function stackFile(name: string): StackFile {
    return readStackFile(path.join(STACKS, `Pulumi.${name}.yaml`), `stacks/Pulumi.${name}.yaml`);
}

/** The `config:` map of a repo stack file as plain data (for mutation in tests). */
export function stackConfigDoc(name: string): Record<string, any> {
    return YAML.parse(fs.readFileSync(path.join(STACKS, `Pulumi.${name}.yaml`), "utf8")).config;
}

/** `platform:*` keys of a config doc as the loader sees them (short keys). */
export function platformKeys(doc: Record<string, any>): Record<string, unknown> {
    return Object.fromEntries(
        Object.entries(doc)
            .filter(([k]) => k.startsWith("platform:"))
            .map(([k, v]) => [k.slice("platform:".length), v]),
    );
}

/** Flat Pulumi config map from a config doc. */
export function flatConfig(doc: Record<string, any>): Record<string, string> {
    return Object.fromEntries(Object.entries(doc).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]));
}

/** The repo's program (index.ts), imported lazily so it is evaluated only after mocks are set. */
export async function repoProgram(): Promise<Record<string, unknown> | undefined> {
    const mod: any = await import("../index");
    const fn = typeof mod === "function" ? mod : mod.default;
    return fn();
}

/**
 * Renders of the repository's own stack files (no config or stack outputs given), kept for the rest of the test
 * file's process and shared with the run's other worker processes (test/run-share.ts): the same program over the same
 * file under the same mocks renders the same resources, and many tests read the default hub and spokes. Each caller
 * gets its own deep copy, so no test sees another's changes.
 */
const memo = new Map<string, Promise<unknown>>();
async function memoized<T>(key: string, run: () => Promise<T>): Promise<T> {
    let p = memo.get(key) as Promise<T> | undefined;
    if (!p) {
        p = sharedInRun(key, run);
        memo.set(key, p);
        p.catch(() => memo.delete(key));
    }
    return structuredClone(await p);
}

/** Runs the real program for a stack under mocks (the stack file as it is: memoized, see {@link memoized}). */
export async function runRepoStack(
    stack: string,
    opts: { preview?: boolean; config?: Record<string, string>; stackOutputs?: Record<string, StackOutputs> } = {},
): Promise<RunStackResult> {
    if (opts.config === undefined && opts.stackOutputs === undefined)
        return memoized(`stack|${stack}|${!!opts.preview}`, () => runRepoStackOnce(stack, opts));
    return runRepoStackOnce(stack, opts);
}

async function runRepoStackOnce(
    stack: string,
    opts: { preview?: boolean; config?: Record<string, string>; stackOutputs?: Record<string, StackOutputs> },
): Promise<RunStackResult> {
    const prev = process.env.PLATFORM_STACK_FILE;
    process.env.PLATFORM_STACK_FILE = `stacks/Pulumi.${stack}.yaml`;
    try {
        return await runStack({
            project: "platform",
            stack,
            config: opts.config ?? stackFile(stack).config,
            preview: opts.preview,
            stackOutputs: opts.stackOutputs,
            program: repoProgram,
        });
    } finally {
        if (prev === undefined) delete process.env.PLATFORM_STACK_FILE;
        else process.env.PLATFORM_STACK_FILE = prev;
    }
}

/**
 * A spoke's stack file config with `platform:spoke.hubKeyIds` pinning `keyId`, the key of the hub these tests sign with
 * (the mocks' seed): an operator's `stacks/` pins their real hub's key (README "Deploy for real"), which a test that
 * runs a spoke against a published outputs file (`PLATFORM_HUB_OUTPUTS`) must not depend on.
 */
export function spokeConfigPinning(stack: string, keyId: string): Record<string, string> {
    const doc = structuredClone(stackConfigDoc(stack));
    delete doc["platform:spoke"].hubKeyId;
    doc["platform:spoke"].hubKeyIds = [keyId];
    return flatConfig(doc);
}

/** Renders hub-prod then the given spoke, returning both results (memoized, see {@link memoized}). */
export async function runHubAndSpoke(spoke: string, preview = false): Promise<{ hub: RunStackResult; spoke: RunStackResult }> {
    return memoized(`hub-and-spoke|${spoke}|${preview}`, () => runHubAndSpokeOnce(spoke, preview));
}

async function runHubAndSpokeOnce(spoke: string, preview: boolean): Promise<{ hub: RunStackResult; spoke: RunStackResult }> {
    const hub = await runRepoStack("hub-prod", { preview });
    // A spoke's preview reads the hub's deployed state, never a hub preview (whose contract holds unknown ARNs
    // and keys): the spoke always references a normally rendered hub.
    const deployedHub = preview ? await runRepoStack("hub-prod") : hub;
    const spokeResult = await runRepoStack(spoke, {
        preview,
        stackOutputs: { "hub-prod": { outputs: referenceableOutputs(deployedHub.outputs), secretOutputNames: [] } },
    });
    return { hub, spoke: spokeResult };
}

export function byType(rs: CapturedResource[], type: string): CapturedResource[] {
    return rs.filter((r) => r.type === type);
}

/** Plain inputs (secrets unwrapped) of a captured resource. */
export function inputs(r: CapturedResource): Record<string, any> {
    return unwrapWire(r.inputs) as Record<string, any>;
}

/** A temporary directory for the running test, removed when the test finishes (pass or fail). */
export function testTempDir(prefix: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    return dir;
}
