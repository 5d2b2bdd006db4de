/**
 * One fault scenario of `npm run chaos` (tools/chaos.ts): loopback only, bounded in time and count, stops by
 * itself. Each service that has failure modes exports `scenarios: ChaosScenario[]` from `services/<svc>/chaos.ts`;
 * the command runs them in order and prints one line per scenario.
 */
export interface ChaosScenario {
    /** Short id, e.g. `auth: redis silent then healed`. */
    readonly name: string;
    /** Runs the scenario against real local servers it starts and stops itself. */
    run(): Promise<ChaosFigure>;
}

/** What an operator asks before trusting the platform. */
export interface ChaosFigure {
    /** Seconds from the fault healing to the service being correct again (null when not applicable). */
    readonly recoverySeconds: number | null;
    /** Usage events lost (must be 0). */
    readonly lost: number;
    /** Usage events counted more than once, in the ledger or in the token counters (must be 0). */
    readonly doubleCounted: number;
    /** Free-form detail, one line. */
    readonly detail?: string;
}
