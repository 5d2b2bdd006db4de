import * as pulumi from "@pulumi/pulumi";

/**
 * Tripwire: before a test sets its own mocks (tools/harness.ts runStack does), any resource registration
 * fails loudly. Without this, a resource created at import time is silently faked by the SDK and the test
 * passes while testing nothing.
 */
void pulumi.runtime.setMocks(
    {
        newResource(args) {
            throw new Error(
                `resource ${args.type} "${args.name}" was created before the test set its mocks; create resources only inside runStack()`,
            );
        },
        call(args) {
            throw new Error(`invoke ${args.token} was called before the test set its mocks`);
        },
    },
    "platform",
    "tripwire",
    false,
);

/**
 * The Pulumi SDK captures a stack trace for every promise it makes (@pulumi/pulumi@3.248.0
 * runtime/debuggable.js `debuggablePromise`, read only by its report of promises left pending at exit): thousands per
 * render. Vitest's source-mapping `Error.prepareStackTrace` makes each several times as costly as Node's own, so those
 * traces (and only those) are formatted as V8 formats them by default, and only when read: the SDK keeps the value
 * and turns it into text (a template string) only to report a promise still pending at exit. Every other error keeps
 * Vitest's.
 */
type Prepare = (error: Error, frames: NodeJS.CallSite[]) => unknown;
const sourceMapped = Error.prepareStackTrace as (Prepare & { platformPulumiTraces?: true }) | undefined;
if (sourceMapped && !sourceMapped.platformPulumiTraces) {
    const prepare: Prepare & { platformPulumiTraces?: true } = (error, frames) =>
        frames[0]?.getFunctionName() === "debuggablePromise"
            ? { toString: () => `${error}${frames.map((f) => `\n    at ${f}`).join("")}` }
            : sourceMapped(error, frames);
    prepare.platformPulumiTraces = true;
    Error.prepareStackTrace = prepare;
}
