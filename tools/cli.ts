/**
 * What every command of this repository does with `--help` / `-h`: prints its usage, what it does, its options and
 * examples on stdout and exits 0, before it reads a file, starts a server or connects anywhere.
 */
export function exitOnHelp(argv: readonly string[], help: string): void {
    if (!argv.includes("--help") && !argv.includes("-h")) return;
    process.stdout.write(`${help.replace(/^\n+/, "").trimEnd()}\n`);
    process.exit(0);
}

/**
 * {@link exitOnHelp} for a tool's help module (tools/help/<tool>.ts), which the tool imports first: on `--help` the
 * tool exits before its other imports load (the Pulumi SDK, the program, the policy pack: most of a second), so help
 * comes back at once. Only when `entry` (the tool's file) is the script node was started with, so importing the tool
 * (a test, another tool) never exits.
 */
export function exitOnHelpFirst(entry: string, help: string): void {
    if (require.main?.filename === entry) exitOnHelp(process.argv.slice(2), help);
}
