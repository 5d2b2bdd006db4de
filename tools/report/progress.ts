/**
 * The render's progress on a terminal: one line per stack on stderr (`[2/4] spoke-hn1  program 1.9 s ...`),
 * timings per phase at the end. Quiet when stderr is not a TTY or `CI` is set (CI logs get one summary line).
 * Nothing here goes into `out/` (reruns stay byte-identical).
 */
import { performance } from "node:perf_hooks";

export interface ProgressStream {
    isTTY?: boolean;
    write(s: string): unknown;
}

interface StackTiming {
    stack: string;
    ok: boolean;
    totalMs: number;
    phases: Array<[string, number]>;
}

/** True when progress should be shown: a TTY and not CI (`CI` unset, empty, `0` or `false`). */
export function interactive(stream: ProgressStream, env: NodeJS.ProcessEnv = process.env): boolean {
    const ci = env.CI;
    return !!stream.isTTY && (ci === undefined || ci === "" || ci === "0" || ci.toLowerCase() === "false");
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Progress and timings of one render run. */
export class RenderProgress {
    private readonly started = performance.now();
    private readonly timings: StackTiming[] = [];
    private current?: { stack: string; start: number; phaseStart: number; phase: string; phases: Array<[string, number]> };
    private index = 0;

    constructor(
        private readonly total: number,
        private readonly stream: ProgressStream = process.stderr,
        readonly tty = interactive(stream),
    ) {}

    /** A stack starts (its first phase is `program`). */
    stack(name: string): void {
        this.index++;
        const now = performance.now();
        this.current = { stack: name, start: now, phaseStart: now, phase: "program", phases: [] };
        this.draw();
    }

    /** The current stack moves on to `phase` (e.g. `policy`, `report`, `write`). */
    phase(name: string): void {
        const c = this.current;
        if (!c) return;
        const now = performance.now();
        c.phases.push([c.phase, now - c.phaseStart]);
        c.phase = name;
        c.phaseStart = now;
        this.draw();
    }

    /** The current stack is done (rendered, or failed / skipped). */
    end(ok: boolean): void {
        const c = this.current;
        if (!c) return;
        const now = performance.now();
        c.phases.push([c.phase, now - c.phaseStart]);
        const t: StackTiming = { stack: c.stack, ok, totalMs: now - c.start, phases: c.phases };
        this.timings.push(t);
        this.current = undefined;
        if (this.tty)
            this.stream.write(
                `\r\x1b[2K[${this.index}/${this.total}] ${t.stack} ${ok ? "ok" : "FAILED"} ${secs(t.totalMs)} (${t.phases.map(([p, ms]) => `${p} ${secs(ms)}`).join(", ")})\n`,
            );
    }

    /** Something the user should see while it runs (base checkout, npm ci); TTY only. */
    note(s: string): void {
        if (this.tty) this.stream.write(`\r\x1b[2K${s}\n`);
    }

    private draw(): void {
        const c = this.current;
        if (this.tty && c) this.stream.write(`\r\x1b[2K[${this.index}/${this.total}] ${c.stack}: ${c.phase}…`);
    }

    /** The closing timings: per stack and phase on a TTY, one line otherwise. */
    summary(extra: Array<[string, number]> = []): void {
        const total = performance.now() - this.started;
        const extras = extra.map(([k, ms]) => `${k} ${secs(ms)}`);
        if (!this.tty) {
            this.stream.write(
                `render: ${this.timings.length} stack(s) in ${secs(total)}${extras.length ? ` (${extras.join(", ")})` : ""}\n`,
            );
            return;
        }
        const phaseTotals = new Map<string, number>();
        for (const t of this.timings) for (const [p, ms] of t.phases) phaseTotals.set(p, (phaseTotals.get(p) ?? 0) + ms);
        this.stream.write(
            `render: ${this.timings.length} stack(s) in ${secs(total)}: ${[...phaseTotals]
                .map(([p, ms]) => `${p} ${secs(ms)}`)
                .concat(extras)
                .join(", ")}\n`,
        );
    }

    /** Recorded timings (tests, benchmarks). */
    stacks(): ReadonlyArray<StackTiming> {
        return this.timings;
    }
}
