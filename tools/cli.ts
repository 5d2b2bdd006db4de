/**
 * What every command of this repository does with `--help` / `-h`: prints its usage, what it does, its options and
 * examples on stdout and exits 0, before it reads a file, starts a server or connects anywhere.
 */
export function exitOnHelp(argv: readonly string[], help: string): void {
    if (!argv.includes("--help") && !argv.includes("-h")) return;
    process.stdout.write(`${help.replace(/^\n+/, "").trimEnd()}\n`);
    process.exit(0);
}
