import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { callMocks, computedOutputs } from "./mock-outputs";
import { unwrapWire } from "./wire";
import { OFFLINE_RENDER_ENV } from "../lib/ci-roles";

// Semi-internal SDK modules: pinned @pulumi/pulumi version (see package.json), checked by test/harness.test.ts.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const settings = require("@pulumi/pulumi/runtime/settings");
// eslint-disable-next-line @typescript-eslint/no-require-imports
const stackRuntime = require("@pulumi/pulumi/runtime/stack");

/**
 * The Pulumi SDK captures a stack trace for every promise it makes (@pulumi/pulumi@3.248.0 runtime/debuggable.js
 * `debuggablePromise`), thousands per render, and reads it only to report a promise still pending at exit, as text (a
 * template string). Formatting each one when it is made is about a tenth of a render, so those traces (and only those)
 * are formatted when read; every other error keeps the formatting of the hook that was there (Node's own, or a test
 * runner's source-mapping one). Installed when this module loads; call again where a runner may have replaced the hook
 * (test/setup.ts, before each test file).
 */
export function lazyPromiseTraces(): void {
    type Prepare = ((error: Error, frames: NodeJS.CallSite[]) => unknown) & { platformLazyPromiseTraces?: true };
    const inner = Error.prepareStackTrace as Prepare | undefined;
    if (!inner || inner.platformLazyPromiseTraces) return;
    const prepare: Prepare = (error, frames) =>
        frames[0]?.getFunctionName() === "debuggablePromise"
            ? { toString: () => `${error}${frames.map((f) => `\n    at ${f}`).join("")}` }
            : inner(error, frames);
    prepare.platformLazyPromiseTraces = true;
    Error.prepareStackTrace = prepare;
}
lazyPromiseTraces();

/** A resource as the engine saw it: registration request and mock response, in wire format. */
export interface CapturedResource {
    urn: string;
    type: string;
    name: string;
    parent: string;
    provider: string;
    custom: boolean;
    remote: boolean;
    dependencies: string[];
    /** Inputs in wire format (secrets and unknowns tagged). */
    inputs: Record<string, unknown>;
    /** Outputs (mock state) in wire format. */
    outputs: Record<string, unknown>;
    /**
     * The resource options the engine would act on, as sent in the registration request (mocks'
     * `MockResourceArgs` carries none of them, so they are read from the request itself).
     */
    options?: ResourceOptionsRecord;
}

/** Resource options recorded per resource (`resources.json`), so a test or a reviewer sees them. */
export interface ResourceOptionsRecord {
    /** `protect`: the engine refuses to delete (or replace) the resource. */
    protect: boolean;
    /** `retainOnDelete`: a delete removes it from the state only; the cloud object stays. */
    retainOnDelete: boolean;
    /** `deleteBeforeReplace`: on replacement the old one goes first (needed with fixed physical names). */
    deleteBeforeReplace: boolean;
}

/** Options of a registration request (RegisterResourceRequest protobuf getters, pinned @pulumi/pulumi). */
function requestOptions(req: any): ResourceOptionsRecord {
    return {
        protect: !!req.getProtect?.(),
        retainOnDelete: !!req.getRetainondelete?.(),
        deleteBeforeReplace: !!req.getDeletebeforereplace?.(),
    };
}

/** Outputs of an already-rendered stack, for StackReference reads. */
export interface StackOutputs {
    outputs: Record<string, unknown>;
    secretOutputNames: string[];
}

export interface RunStackOptions {
    project: string;
    stack: string;
    /** Flat config map as `pulumi.runtime.allConfig()` returns it (objects JSON-encoded). */
    config: Record<string, string>;
    secretKeys?: string[];
    /** Preview mode: computed outputs are unknown, as in `pulumi preview` of a new stack. */
    preview?: boolean;
    /** Rendered stacks by name; a StackReference `org/project/<name>` resolves to `<name>`. */
    stackOutputs?: Record<string, StackOutputs>;
    /** The program: a function returning the stack outputs (what index.ts exports). */
    program: () => Promise<Record<string, unknown> | undefined> | Record<string, unknown> | undefined;
}

export interface RunStackResult {
    resources: CapturedResource[];
    /** Stack outputs in wire format (secrets tagged). */
    outputs: Record<string, unknown>;
}

/**
 * Property set on an error the program threw: the SDK re-raises it through several internal promises
 * (unhandled rejections); runStack reports it once, so those copies are noise. tools/render.ts and
 * vitest.config.mts ignore unhandled rejections carrying this mark.
 */
export const HANDLED_MARK = "platformHandledByRunStack";

function markHandled(e: unknown) {
    if (e && typeof e === "object") (e as Record<string, unknown>)[HANDLED_MARK] = true;
}

/** True for an error runStack already reports (see {@link HANDLED_MARK}). */
export function isHandled(e: unknown): boolean {
    return !!e && typeof e === "object" && (e as Record<string, unknown>)[HANDLED_MARK] === true;
}

/** The stack-name part of a StackReference name (`organization/platform/hub-prod` -> `hub-prod`). */
export function stackRefKey(name: string): string {
    return name.split("/").pop() as string;
}

/**
 * Runs a Pulumi program under `pulumi.runtime.setMocks` and captures every resource registration (type,
 * name, parent, provider, inputs) by wrapping the mock monitor. Resources created before this call are not
 * captured (the SDK silently fakes them); callers must import program modules only after it starts.
 *
 * @throws whatever the program throws (e.g. ConfigError), after pending registrations settle
 */
export async function runStack(opts: RunStackOptions): Promise<RunStackResult> {
    const region =
        (() => {
            try {
                return JSON.parse(opts.config["aws:region"] ?? '""');
            } catch {
                return opts.config["aws:region"];
            }
        })() || "us-east-1";
    const preview = !!opts.preview;
    // The program runs under mocks: an offline render, never a real engine run (programs/hub.ts reads it). Set for
    // this run only: the caller's value is put back when it ends.
    const offlineBefore = process.env[OFFLINE_RENDER_ENV];
    process.env[OFFLINE_RENDER_ENV] = "1";
    pulumi.runtime.setAllConfig(opts.config, opts.secretKeys ?? []);
    await pulumi.runtime.setMocks(
        {
            newResource(args: pulumi.runtime.MockResourceArgs) {
                if (args.type === "pulumi:pulumi:StackReference") {
                    const key = stackRefKey(String(args.inputs.name));
                    const ref = opts.stackOutputs?.[key];
                    // A stack reading its own previous outputs (the hub's bundle revisions) before it was ever
                    // deployed sees an empty stack, as the real engine does for a new stack. Only self-references.
                    if (!ref && key === opts.stack)
                        return { id: String(args.inputs.name), state: { name: args.inputs.name, outputs: {}, secretOutputNames: [] } };
                    if (!ref)
                        throw new Error(
                            `StackReference "${args.inputs.name}": stack "${key}" has not been rendered (render it first, or check the name)`,
                        );
                    return {
                        id: String(args.inputs.name),
                        state: { name: args.inputs.name, outputs: ref.outputs, secretOutputNames: ref.secretOutputNames },
                    };
                }
                const inputs = args.inputs as Record<string, any>;
                const id = args.type.startsWith("pulumi:providers:") ? "provider-id" : `${args.name}-id`;
                const state = preview
                    ? { ...inputs }
                    : { ...inputs, ...computedOutputs(args.type, args.name, unwrapWire(inputs) as Record<string, any>, region) };
                return { id: preview && !args.type.startsWith("pulumi:providers:") ? (undefined as unknown as string) : id, state };
            },
            call(args: pulumi.runtime.MockCallArgs) {
                const m = callMocks[args.token];
                return m ? m(args.inputs as Record<string, any>, region) : {};
            },
            // "organization" is what a self-managed (DIY) backend reports, and what stack files use in StackReference names.
        },
        opts.project,
        opts.stack,
        preview,
        "organization",
    );

    const resources = new Map<string, CapturedResource>();
    let stackOutputs: Record<string, unknown> = {};
    const monitor = pulumi.runtime.getMonitor() as any;
    const register = monitor.registerResource.bind(monitor);
    const read = monitor.readResource.bind(monitor);
    const registerOutputs = monitor.registerResourceOutputs.bind(monitor);
    const capture = (
        req: any,
        res: any,
        inputs: Record<string, unknown>,
        parent: string,
        remote: boolean,
        custom: boolean,
        deps: string[],
    ) => {
        const urn = res.getUrn();
        resources.set(urn, {
            urn,
            type: req.getType(),
            name: req.getName(),
            parent,
            provider: req.getProvider?.() ?? "",
            custom,
            remote,
            dependencies: deps,
            inputs,
            outputs: res.getObject()?.toJavaScript() ?? {},
            options: requestOptions(req),
        });
    };
    monitor.registerResource = (req: any, cb: any) =>
        register(req, (err: any, res: any) => {
            if (!err && res)
                capture(
                    req,
                    res,
                    req.getObject()?.toJavaScript() ?? {},
                    req.getParent(),
                    req.getRemote(),
                    req.getCustom(),
                    req.getDependenciesList(),
                );
            cb(err, res);
        });
    monitor.readResource = (req: any, cb: any) =>
        read(req, (err: any, res: any) => {
            if (!err && res) {
                const urn = res.getUrn();
                resources.set(urn, {
                    urn,
                    type: req.getType(),
                    name: req.getName(),
                    parent: req.getParent(),
                    provider: req.getProvider(),
                    custom: true,
                    remote: false,
                    dependencies: req.getDependenciesList(),
                    inputs: req.getProperties()?.toJavaScript() ?? {},
                    outputs: res.getProperties()?.toJavaScript() ?? {},
                    options: { protect: false, retainOnDelete: false, deleteBeforeReplace: false },
                });
            }
            cb(err, res);
        });
    monitor.registerResourceOutputs = (req: any, cb: any) => {
        if (req.getUrn().includes("::pulumi:pulumi:Stack::")) {
            stackOutputs = req.getOutputs()?.toJavaScript() ?? {};
            // The root Stack's outputs, as the analyzer shows them to stack policies (policies/aws.ts reads them).
            const root = resources.get(req.getUrn());
            if (root) root.outputs = stackOutputs;
        }
        return registerOutputs(req, cb);
    };

    let failure: unknown;
    try {
        await stackRuntime.runInPulumiStack(async () => {
            try {
                return await opts.program();
            } catch (e) {
                markHandled(e);
                throw e;
            }
        });
    } catch (e) {
        failure = e;
    }
    try {
        await settings.waitForRPCs();
    } finally {
        if (offlineBefore === undefined) delete process.env[OFFLINE_RENDER_ENV];
        else process.env[OFFLINE_RENDER_ENV] = offlineBefore;
    }
    if (failure) {
        // What was declared before the program failed (tests assert "nothing half-applied" with it).
        if (failure && typeof failure === "object")
            Object.defineProperty(failure, "capturedResources", { value: [...resources.values()], enumerable: false });
        throw failure;
    }
    return { resources: [...resources.values()], outputs: stackOutputs };
}

/** Loads the repo's program (index.ts) after mocks are set. */
export function loadProgram(root = path.join(__dirname, "..")): () => Promise<Record<string, unknown> | undefined> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require(path.join(root, "index"));
    return typeof mod === "function" ? mod : mod.default;
}
