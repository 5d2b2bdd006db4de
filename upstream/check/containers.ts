import type { ComponentFacts, EntrypointFacts, FlagFact } from "../types";
import type { ContainerView } from "../refused";
import { vllmKvTransferConfigKeys } from "../vllm";
import { configMapsOf, containersOf, effectiveArgv, mountedFiles, safeJson, splitImage } from "./objects";
import type { CheckResult, Facts, Finding, Obj, RenderedStack } from "./types";

/** Flag lookup of an entry point's components: canonical names and aliases. */
function flagTable(ep: EntrypointFacts, facts: Facts): Map<string, { canonical: string; fact: FlagFact }> {
    const t = new Map<string, { canonical: string; fact: FlagFact }>();
    for (const id of ep.components) {
        for (const [name, fact] of Object.entries(facts.components[id]?.flags ?? {})) {
            t.set(name, { canonical: name, fact });
            for (const a of fact.aliases ?? []) t.set(a, { canonical: name, fact });
        }
    }
    return t;
}

function envKnown(name: string, comps: ComponentFacts[]): boolean {
    return comps.some((c) => Object.keys(c.env).some((k) => (k.endsWith("*") ? name.startsWith(k.slice(0, -1)) : k === name)));
}

/** The entry point whose argv prefix is the longest match of `argv`. */
export function findEntrypoint(argv: string[], facts: Facts): EntrypointFacts | undefined {
    let best: EntrypointFacts | undefined;
    for (const ep of facts.entrypoints) {
        if (ep.argv.length <= argv.length && ep.argv.every((a, i) => argv[i] === a) && (!best || ep.argv.length > best.argv.length))
            best = ep;
    }
    return best;
}

/**
 * Checks one container against the facts of its image: image tag known, entry point known, every flag known to the
 * entry point's components (with its `choices`), every env var read by a component of the image, vLLM
 * KVTransferConfig keys, the combinations upstream refuses (upstream/refused.ts) and what the image must provide for
 * the config (upstream/images.ts `imageRequirements`). A container whose image repository has no facts is listed as
 * not covered.
 */
export function checkContainer(
    stack: string,
    object: string,
    c: Obj,
    spec: Obj,
    ns: string | undefined,
    configMaps: Map<string, Obj>,
    facts: Facts,
    out: CheckResult,
): Finding[] {
    const cname = String(c.name);
    const findings: Finding[] = [];
    const { repository, tag } = splitImage(String(c.image ?? ""));
    const known = facts.images.filter((i) => i.repository === repository);
    if (known.length === 0) {
        out.uncovered.push(`${stack} ${object} ${cname}: ${c.image}`);
        return findings;
    }
    out.checkedContainers++;
    const f = (key: string, message: string) => findings.push({ stack, object, container: cname, key, message });
    const image = known.find((i) => i.tag === tag);
    if (!image) {
        f("image", `${c.image}: no facts for ${repository} at tag ${tag ?? "(none)"} (known: ${known.map((i) => i.tag).join(", ")})`);
        return findings;
    }

    const argv = effectiveArgv(c);
    const ep = argv.length ? findEntrypoint(argv, facts) : undefined;
    const flags: Record<string, string | true> = {};
    if (argv.length && !ep) f("command", `entry point ${JSON.stringify(argv.slice(0, 3).join(" "))} is not known for ${c.image}`);
    if (ep) {
        const table = flagTable(ep, facts);
        const rest = argv.slice(ep.argv.length);
        for (let i = 0; i < rest.length; i++) {
            const tok = rest[i];
            if (!tok.startsWith("-")) {
                f(`arg[${i}]`, `unexpected positional argument ${JSON.stringify(tok)} for ${ep.id}`);
                continue;
            }
            const eq = tok.indexOf("=");
            const name = eq > 0 ? tok.slice(0, eq) : tok;
            const hit = table.get(name);
            if (!hit) {
                f(
                    name,
                    `flag ${name} is not known to ${ep.id} (${ep.components.map((x) => `${x}@${facts.components[x]?.version}`).join(", ")})`,
                );
                continue;
            }
            let value: string | true = true;
            if (hit.fact.takesValue) {
                if (eq > 0) value = tok.slice(eq + 1);
                else if (i + 1 < rest.length) value = rest[++i];
                else {
                    f(name, `flag ${name} takes a value`);
                    continue;
                }
                if (hit.fact.choices && !hit.fact.choices.includes(value))
                    f(name, `${name}=${value} is not one of ${hit.fact.choices.join(", ")}`);
            } else if (eq > 0) {
                f(name, `flag ${name} is a switch and takes no value`);
            }
            if (flags[hit.canonical] !== undefined && !hit.fact.repeatable)
                f(
                    name,
                    `flag ${hit.canonical} is given twice${name === hit.canonical ? "" : ` (also as ${name})`}: ${ep.id} keeps the last, so the first is inert`,
                );
            flags[hit.canonical] = value;
        }
    }

    const comps = [...new Set([...image.components, ...(ep?.components ?? [])])]
        .map((id) => facts.components[id])
        .filter((x): x is ComponentFacts => !!x);
    const referenced = new Set(
        [...(c.command ?? []), ...(c.args ?? [])].flatMap((s: string) =>
            [...String(s).matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)].map((m) => m[1]),
        ),
    );
    const env: Record<string, string | { from: string }> = {};
    for (const e of c.env ?? []) {
        env[e.name] =
            e.value !== undefined ? String(e.value) : { from: e.valueFrom?.fieldRef?.fieldPath ?? JSON.stringify(e.valueFrom ?? {}) };
        if (!envKnown(e.name, comps) && !referenced.has(e.name)) {
            f(
                `env.${e.name}`,
                `env var ${e.name} is read by nothing known in ${c.image} (${comps.map((x) => `${x.component}@${x.version}`).join(", ")})`,
            );
        } else {
            // a value upstream restricts (an enum the component parses it into): checked, or refused when it comes from
            // elsewhere and cannot be (closed world)
            const choices = comps.map((x) => x.env[e.name]?.choices).find((x) => x !== undefined);
            if (choices && e.value === undefined)
                f(
                    `env.${e.name}`,
                    `${e.name} takes one of ${choices.join(", ")}; its value comes from valueFrom and cannot be checked: set it as a value`,
                );
            else if (choices && !choices.includes(String(e.value)))
                f(`env.${e.name}`, `${e.name}=${String(e.value)} is not one of ${choices.join(", ")}`);
        }
    }

    // vLLM KVTransferConfig keys.
    const kvt = typeof flags["--kv-transfer-config"] === "string" ? safeJson(flags["--kv-transfer-config"] as string) : undefined;
    if (flags["--kv-transfer-config"] !== undefined && ep?.components.includes("vllm")) {
        if (!kvt || typeof kvt !== "object") f("--kv-transfer-config", "is not a JSON object");
        else {
            const allowed = new Set<string>(vllmKvTransferConfigKeys.keys);
            const walk = (o: Obj, at: string) => {
                for (const k of Object.keys(o))
                    if (!allowed.has(k))
                        f(`--kv-transfer-config${at}.${k}`, `KVTransferConfig has no field ${k} (${vllmKvTransferConfigKeys.source})`);
                for (const [i, inner] of (o.kv_connector_extra_config?.connectors ?? []).entries())
                    walk(inner, `${at}.kv_connector_extra_config.connectors[${i}]`);
            };
            walk(kvt, "");
        }
    }

    const view: ContainerView = { entrypoint: ep?.id, flags, env, files: mountedFiles(c, spec, configMaps, ns) };
    for (const r of facts.refused) {
        const hit = r.check(view);
        if (hit)
            f(
                hit.key,
                `${r.id} (${r.component}, ${r.effect === "startup" ? "refused at start-up" : "silently degraded"}): ${hit.message} [${r.source}]`,
            );
    }

    const connectors = kvt
        ? [kvt.kv_connector, ...(kvt.kv_connector_extra_config?.connectors ?? []).map((x: Obj) => x?.kv_connector)].filter(Boolean)
        : [];
    const nixlBackends: string[] = kvt
        ? [kvt, ...(kvt.kv_connector_extra_config?.connectors ?? [])].flatMap((x: Obj) => x?.kv_connector_extra_config?.backends ?? [])
        : [];
    for (const req of facts.requirements) {
        const w = req.when;
        const applies =
            (w.env && env[w.env[0]] === w.env[1]) ||
            (w.flag && flags[w.flag[0]] === w.flag[1]) ||
            (w.kvConnector && connectors.includes(w.kvConnector)) ||
            (w.nixlBackend && nixlBackends.includes(w.nixlBackend));
        if (!applies) continue;
        const missing = req.needs.filter((n) => !image.provides.includes(n));
        const what = w.env
            ? `env.${w.env[0]}`
            : w.flag
              ? w.flag[0]
              : w.kvConnector
                ? "--kv-transfer-config"
                : "--kv-transfer-config.backends";
        if (missing.length)
            f(
                what,
                `${req.id}: ${c.image} lacks ${missing.join(", ")} (provides ${image.provides.join(", ") || "nothing listed"}) [${req.source}]`,
            );
    }
    return findings;
}

/** Rule: every container of every workload against its image's facts ({@link checkContainer}). */
export function containerRule(stack: RenderedStack, facts: Facts, out: CheckResult): Finding[] {
    const configMaps = configMapsOf(stack.objects);
    return containersOf(stack.objects).flatMap((x) =>
        checkContainer(stack.stack, x.object, x.container, x.spec, x.namespace, configMaps, facts, out),
    );
}
