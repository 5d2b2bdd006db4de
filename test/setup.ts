import * as pulumi from "@pulumi/pulumi";
import { lazyPromiseTraces } from "../tools/harness";

// No Pulumi configuration from the previous file of this worker: each runStack sets its own (tools/harness.ts).
pulumi.runtime.setAllConfig({}, []);

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

// The SDK's per-promise stack traces formatted only when read, around Vitest's source-mapping formatter of every other
// error (tools/harness.ts lazyPromiseTraces): a runner may have replaced the hook since the last test file.
lazyPromiseTraces();
