/**
 * `npm run pins [-- --check]`: every upstream pin of config/versions.ts that lives in a registry: Helm charts (chart +
 * exact version, HTTP repository or `oci://` reference) and container images (repository + exact tag). The list is
 * derived from the versions table only, so a new pin is checked without editing a workflow.
 *
 * Without `--check` it prints the list as JSON. With `--check` it asks each registry whether the pin exists
 * (`helm show chart ... --version <v>`, `docker manifest inspect <image>:<tag>`; each retried 3 times) and exits 1
 * naming every pin that does not: a wrong pin fails a pull request (.github/workflows/pins.yml), not an `up`.
 *
 * Not registry pins, hence not listed: images of ours (under {@link REGISTRY}; images.yml builds and guards them)
 * and the entries in {@link NOT_REGISTRY_PINS}.
 */
import { execFileSync } from "node:child_process";
import { exitOnHelp } from "./cli";
import { REGISTRY, versions } from "../config/versions";

/** One pin and how to ask its registry for it. */
export type Pin =
    | { kind: "chart"; key: string; chart: string; repo?: string; version: string }
    | { kind: "image"; key: string; image: string; tag: string };

/** Entries of the versions table that name no registry artefact, and where they are checked instead. */
export const NOT_REGISTRY_PINS: Readonly<Record<string, string>> = {
    eksAddons: "EKS managed add-on versions: checked by the EKS API at create time (`aws eks describe-addon-versions`), not a registry",
    gatewayApi: "Gateway API release bundled by gateway-crds-helm: documentation of the set, not installed on its own",
};

/** Docker's tag grammar (distribution/reference). */
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * The registry pins of a versions table, in table order.
 * - an entry with `chart` and `version` is a chart (`repo` required unless `chart` is an `oci://` reference); its
 *   image, if it has one (`image` + `imageTag`), is an image pin too;
 * - an entry with `image` (optionally under `repository`) and no chart is an image; `version` and every `<x>Version`
 *   key are tags of it (e.g. the `-efa` variant);
 * - any other object is a group of entries (walked), any other value is an error.
 * @throws Error naming the `versions.<key>` that is neither, or a tag that is not a valid image tag
 */
export function pins(table: Record<string, unknown> = versions, registry: string = REGISTRY): Pin[] {
    const ours = `${registry.replace(/\/+$/, "")}/`;
    const out: Pin[] = [];
    const tag = (key: string, v: unknown): string => {
        if (typeof v !== "string" || !TAG.test(v)) throw new Error(`versions.${key}: ${JSON.stringify(v)} is not a valid image tag`);
        return v;
    };
    const walk = (node: unknown, key: string): void => {
        if (!node || typeof node !== "object" || Array.isArray(node))
            throw new Error(`versions.${key}: neither a chart, an image nor a group of pins`);
        const e = node as Record<string, unknown>;
        const image = typeof e.image === "string" ? (typeof e.repository === "string" ? `${e.repository}/${e.image}` : e.image) : undefined;
        if (typeof e.chart === "string") {
            if (typeof e.version !== "string") throw new Error(`versions.${key}: chart ${e.chart} has no version`);
            const oci = e.chart.startsWith("oci://");
            if (!oci && typeof e.repo !== "string")
                throw new Error(`versions.${key}: chart ${e.chart} is not an oci:// reference and has no repo`);
            out.push({ kind: "chart", key, chart: e.chart, ...(oci ? {} : { repo: e.repo as string }), version: e.version });
            if (image !== undefined && !image.startsWith(ours))
                out.push({ kind: "image", key: `${key}.imageTag`, image, tag: tag(`${key}.imageTag`, e.imageTag) });
            return;
        }
        if (image !== undefined) {
            if (image.startsWith(ours)) return;
            const tagKeys = Object.keys(e).filter((k) => k === "version" || /^[a-z][A-Za-z0-9]*Version$/.test(k));
            if (tagKeys.length === 0) throw new Error(`versions.${key}: image ${image} has no version`);
            for (const k of tagKeys)
                out.push({ kind: "image", key: k === "version" ? key : `${key}.${k}`, image, tag: tag(`${key}.${k}`, e[k]) });
            return;
        }
        for (const [k, v] of Object.entries(e)) walk(v, `${key}.${k}`);
    };
    for (const [k, v] of Object.entries(table)) {
        if (k in NOT_REGISTRY_PINS) continue;
        walk(v, k);
    }
    return out;
}

/** The command (argv) that succeeds exactly when the pin exists in its registry. */
export function checkCommand(p: Pin): string[] {
    if (p.kind === "image") return ["docker", "manifest", "inspect", `${p.image}:${p.tag}`];
    return p.repo
        ? ["helm", "show", "chart", p.chart, "--repo", p.repo, "--version", p.version]
        : ["helm", "show", "chart", p.chart, "--version", p.version];
}

/** Runs argv; throws with its output on a non-zero exit. */
export type Exec = (argv: string[]) => void;
const execReal: Exec = (argv) => {
    execFileSync(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
};

/**
 * Asks the registry for every pin (each up to `attempts` times, registries flake).
 * @returns one line per missing pin: `versions.<key>: <what> not found (<command>): <error>`
 */
export function checkPins(list: Pin[], exec: Exec = execReal, attempts = 3): string[] {
    const missing: string[] = [];
    for (const p of list) {
        const argv = checkCommand(p);
        let err: unknown;
        for (let i = 0; i < attempts; i++) {
            try {
                exec(argv);
                err = undefined;
                break;
            } catch (e) {
                err = e;
            }
        }
        if (err !== undefined) {
            const what = p.kind === "image" ? `image ${p.image}:${p.tag}` : `chart ${p.chart} ${p.version}`;
            const detail = String((err as { stderr?: Buffer | string }).stderr ?? (err as Error).message ?? err)
                .trim()
                .split("\n")[0];
            missing.push(`versions.${p.key}: ${what} not found (${argv.join(" ")}): ${detail}`);
        }
    }
    return missing;
}

const HELP = `
usage: npm run pins [-- --check]

Every upstream pin of config/versions.ts that lives in a registry: Helm charts (exact version) and container
images (exact tag). Prints the list as JSON. With --check asks each registry whether the pin exists
(\`helm show chart\`, \`docker manifest inspect\`; needs helm and docker) and exits 1 naming every one that does not.

Options:
  --check      ask the registries
  -h, --help   this text

Examples:
  npm run pins
  npm run pins -- --check
`;

function main(): void {
    const args = process.argv.slice(2);
    exitOnHelp(args, HELP);
    for (const a of args) if (a !== "--check") throw new Error(`unknown argument ${a} (usage: npm run pins [-- --check])`);
    const list = pins();
    if (!args.includes("--check")) {
        process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        return;
    }
    const missing = checkPins(list);
    for (const p of list)
        process.stdout.write(
            `${missing.some((m) => m.startsWith(`versions.${p.key}:`)) ? "MISSING" : "ok     "} ${checkCommand(p).join(" ")}\n`,
        );
    if (missing.length) {
        process.stderr.write(`${missing.length} of ${list.length} pins do not exist:\n${missing.map((m) => `  ${m}`).join("\n")}\n`);
        process.exit(1);
    }
    process.stdout.write(`all ${list.length} pins exist\n`);
}

if (require.main === module) {
    try {
        main();
    } catch (e) {
        process.stderr.write(`pins: ${(e as Error).message}\n`);
        process.exit(2);
    }
}
