/**
 * `npm run validate -- --crds <dir> [--out out] [manifests.yaml ...]`
 *
 * Validates every rendered Kubernetes object (`out/<stack>/manifests.yaml`):
 * - custom resources against the CRD schemas found in `<dir>` (CRD YAML as `kubectl get crd -o yaml` or
 *   upstream `config/crd/bases` files export them), with unknown fields rejected: `additionalProperties: false`
 *   is added wherever a schema lists `properties` and does not set `x-kubernetes-preserve-unknown-fields`, which is
 *   what the API server's pruning / strict field validation would do;
 * - core kinds against the Kubernetes OpenAPI (precompiled validators of `kubernetes-models`) plus an
 *   unknown-field check driven by the official client's model type maps (`@kubernetes/client-node`).
 * Exits non-zero when any object is invalid or has no schema at all.
 */
import Ajv, { type ValidateFunction } from "ajv";
import { exitOnHelp } from "./cli";
import addFormats from "ajv-formats";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";

type Json = Record<string, any>;

/** One CRD version's schema, keyed by `group/version/Kind`. */
interface CrdEntry {
    schema: Json;
    scope: "Namespaced" | "Cluster";
    file: string;
}

function* walkYaml(dir: string): Generator<string> {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) yield* walkYaml(p);
        else if (/\.ya?ml$/.test(e.name)) yield p;
    }
}

/**
 * Reads every CustomResourceDefinition in `dir` (recursively; multi-document files and `List` exports
 * accepted) and indexes each served version's `openAPIV3Schema` by `group/version/Kind`.
 */
export function loadCrds(dir: string): Map<string, CrdEntry> {
    const out = new Map<string, CrdEntry>();
    for (const file of walkYaml(dir)) {
        for (const doc of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
            const d = doc.toJS() as Json | null;
            const items: Json[] = d?.kind === "List" ? (d.items ?? []) : d ? [d] : [];
            for (const crd of items) {
                if (crd?.kind !== "CustomResourceDefinition") continue;
                const group = crd.spec.group;
                const kind = crd.spec.names.kind;
                for (const v of crd.spec.versions ?? []) {
                    const schema = v.schema?.openAPIV3Schema;
                    if (schema && v.served !== false) out.set(`${group}/${v.name}/${kind}`, { schema, scope: crd.spec.scope, file });
                }
            }
        }
    }
    return out;
}

/**
 * Makes a CRD structural schema reject unknown fields, as the API server's strict field validation does:
 * `additionalProperties: false` where `properties` are listed and unknown fields are not preserved;
 * int-or-string expanded; embedded resources get apiVersion/kind/metadata.
 */
export function strictify(s: Json): Json {
    if (!s || typeof s !== "object") return s;
    const o: Json = { ...s };
    if (o["x-kubernetes-int-or-string"] && !o.anyOf && !o.oneOf) {
        delete o.type;
        o.anyOf = [{ type: "integer" }, { type: "string" }];
    }
    if (o["x-kubernetes-embedded-resource"]) {
        o.properties = { apiVersion: { type: "string" }, kind: { type: "string" }, metadata: { type: "object" }, ...(o.properties ?? {}) };
    }
    if (o.properties) {
        o.properties = Object.fromEntries(Object.entries(o.properties).map(([k, v]) => [k, strictify(v as Json)]));
        if (o.additionalProperties === undefined && !o["x-kubernetes-preserve-unknown-fields"]) o.additionalProperties = false;
    }
    if (o.items) o.items = Array.isArray(o.items) ? o.items.map(strictify) : strictify(o.items);
    if (o.additionalProperties && typeof o.additionalProperties === "object") o.additionalProperties = strictify(o.additionalProperties);
    for (const k of ["allOf", "anyOf", "oneOf"]) if (Array.isArray(o[k])) o[k] = o[k].map(strictify);
    if (o.not) o.not = strictify(o.not);
    return o;
}

/** `@kubernetes/client-node`, loaded on first use (most of a second): `--help` and argument errors never wait for it. */
let k8sClient: Record<string, any> | undefined;

/** Field names of a `@kubernetes/client-node` model (e.g. `V1ObjectMeta`), or undefined for non-models. */
function modelFields(typeName: string): Map<string, string> | undefined {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    k8sClient ??= require("@kubernetes/client-node") as Record<string, any>;
    const cls = k8sClient[typeName];
    if (!cls || typeof cls.getAttributeTypeMap !== "function") return undefined;
    return new Map((cls.getAttributeTypeMap() as Array<{ baseName: string; type: string }>).map((a) => [a.baseName, a.type]));
}

/** Unknown-field errors for `value` against client-node type `typeName` (recursive). */
export function unknownFields(value: unknown, typeName: string, at = ""): string[] {
    if (value === null || value === undefined) return [];
    const arr = /^Array<(.+)>$/.exec(typeName);
    if (arr) return Array.isArray(value) ? value.flatMap((v, i) => unknownFields(v, arr[1], `${at}/${i}`)) : [];
    const map = /^\{ \[key: string\]: (.+); \}$/.exec(typeName);
    if (map)
        return value && typeof value === "object" ? Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1], `${at}/${k}`)) : [];
    const fields = modelFields(typeName);
    if (!fields || typeof value !== "object" || Array.isArray(value)) return [];
    const errs: string[] = [];
    for (const [k, v] of Object.entries(value as Json)) {
        const t = fields.get(k);
        if (t === undefined) errs.push(`${at}/${k}: unknown field (not in ${typeName})`);
        else errs.push(...unknownFields(v, t, `${at}/${k}`));
    }
    return errs;
}

/** client-node model name of a core kind: `apps/v1` `Deployment` -> `V1Deployment`. */
function coreModelName(apiVersion: string, kind: string): string {
    const version = apiVersion.split("/").pop() as string;
    return `${version[0].toUpperCase()}${version.slice(1)}${kind}`;
}

/** kubernetes-models class of a core kind, or undefined. */
function coreModel(apiVersion: string, kind: string): (new (o: Json) => { validate(): void }) | undefined {
    const modPath = `kubernetes-models/${apiVersion}`;
    try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        return require(modPath)[kind];
    } catch {
        return undefined;
    }
}

/**
 * CRD `pattern`s are Go (RE2) regular expressions, which may start with inline flags such as `(?i)` (the
 * prometheus-operator CRDs: `^(?i)(abort|warn)?$`); JavaScript has no inline flags, so a leading `(?flags)` group is
 * turned into RegExp flags. Other RE2 syntax is the subset JavaScript shares.
 */
export function goRegExp(source: string, flags: string): RegExp {
    const m = /^(\^?)\(\?([imsU]+)\)/.exec(source);
    if (!m) return new RegExp(source, flags);
    const extra = [...m[2]].filter((f) => f === "i" || f === "m" || f === "s").join("");
    return new RegExp(m[1] + source.slice(m[0].length), [...new Set(flags + extra)].join(""));
}
goRegExp.code = "goRegExp";

/**
 * Validates Kubernetes objects against CRDs (from a directory) and the core Kubernetes schemas: a custom resource
 * against its CRD version's `openAPIV3Schema` made strict ({@link strictify}: unknown fields rejected, as the API
 * server's pruning / strict field validation would), with Ajv (all errors, formats, Go-style patterns through
 * {@link goRegExp}); a core kind against `kubernetes-models`' validator plus {@link unknownFields} (the
 * `@kubernetes/client-node` model maps); `metadata` of both against `V1ObjectMeta`. Compiled schemas are cached per
 * `group/version/Kind`. Build one with {@link ManifestValidator.fromDir}.
 * @throws Error from {@link ManifestValidator.fromDir} when the directory does not exist or holds no CRD; from
 *   `validate` only Ajv's error when a CRD's schema does not compile (a broken CRD file), never for an invalid object
 *   (those are returned as `path: message` strings)
 */
export class ManifestValidator {
    private readonly ajv: Ajv;
    private readonly compiled = new Map<string, ValidateFunction>();

    constructor(private readonly crds: Map<string, CrdEntry>) {
        this.ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true, code: { regExp: goRegExp } });
        addFormats(this.ajv);
    }

    /**
     * @throws Error when `dir` does not exist or holds no CustomResourceDefinition: validation never degrades
     *   to "nothing to check" (a missing schema directory is a CI failure, not a skip).
     */
    static fromDir(dir: string): ManifestValidator {
        if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new Error(`CRD directory ${dir} does not exist`);
        const crds = loadCrds(dir);
        if (crds.size === 0)
            throw new Error(`CRD directory ${dir} holds no CustomResourceDefinition (YAML as \`kubectl get crd -o yaml\` exports it)`);
        return new ManifestValidator(crds);
    }

    /** True when there is a CRD schema for `apiVersion`/`kind`. */
    hasCrd(apiVersion: string, kind: string): boolean {
        return this.crds.has(`${apiVersion}/${kind}`);
    }

    /** Problems with one object, as `path: message` strings; empty when valid. */
    validate(obj: Json): string[] {
        const { apiVersion, kind } = obj ?? {};
        if (typeof apiVersion !== "string" || typeof kind !== "string") return ["object has no apiVersion/kind"];
        const errs: string[] = [];
        errs.push(...unknownFields(obj.metadata ?? {}, "V1ObjectMeta", "/metadata"));
        if (!obj.metadata?.name) errs.push("/metadata/name: missing");
        const key = `${apiVersion}/${kind}`;
        const crd = this.crds.get(key);
        if (crd) {
            let fn = this.compiled.get(key);
            if (!fn) {
                const schema = strictify(crd.schema);
                // metadata is checked above against ObjectMeta; the CRD leaves it open.
                if (schema.properties?.metadata) schema.properties.metadata = { type: "object" };
                fn = this.ajv.compile(schema);
                this.compiled.set(key, fn);
            }
            if (!fn(obj)) {
                for (const e of fn.errors ?? []) {
                    const extra =
                        e.keyword === "additionalProperties"
                            ? ` '${(e.params as Json).additionalProperty}'`
                            : e.keyword === "enum"
                              ? ` ${JSON.stringify((e.params as Json).allowedValues)}`
                              : "";
                    errs.push(`${e.instancePath || "/"}: ${e.message}${extra}`);
                }
            }
            if (crd.scope === "Cluster" && obj.metadata?.namespace) errs.push(`/metadata/namespace: ${kind} is cluster-scoped`);
            return errs;
        }
        const Model = coreModel(apiVersion, kind);
        if (!Model) return [`no schema for ${apiVersion} ${kind}: not a core kind and no CRD for it in the CRD directory`];
        try {
            new Model(obj).validate();
        } catch (e) {
            // kubernetes-models throws a ValidationError carrying ajv's `errors`.
            const details = (e as { errors?: Array<{ instancePath: string; message: string }> }).errors;
            if (details?.length) errs.push(...details.map((d) => `${d.instancePath || "/"}: ${d.message}`));
            else errs.push(String((e as Error).message));
        }
        errs.push(...unknownFields(obj, coreModelName(apiVersion, kind)).filter((e) => !e.startsWith("/metadata")));
        return errs;
    }
}

/** Result for one manifests file. */
export interface FileReport {
    file: string;
    objects: number;
    invalid: Array<{ object: string; errors: string[] }>;
    /** Objects of a kind named in `withoutCrd` for which the CRD directory has no schema: not validated, listed. */
    unvalidated: string[];
}

/**
 * Validates every document of a multi-document manifests file.
 * @param withoutCrd `group/version/Kind` keys the caller declares as having no CRD in the directory (each with its
 *   reason where it is declared, `.ci/run`): their objects are listed as not validated instead of invalid. A CRD that
 *   is present is always used.
 */
export function validateFile(v: ManifestValidator, file: string, withoutCrd: ReadonlySet<string> = new Set()): FileReport {
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))
        .map((d) => d.toJS() as Json)
        .filter(Boolean);
    const invalid: FileReport["invalid"] = [];
    const unvalidated: string[] = [];
    for (const o of docs) {
        const name = `${o.apiVersion} ${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`;
        const errors = v.validate(o);
        if (errors.length === 1 && errors[0].startsWith("no schema for ") && withoutCrd.has(`${o.apiVersion}/${o.kind}`))
            unvalidated.push(name);
        else if (errors.length) invalid.push({ object: name, errors });
    }
    return { file, objects: docs.length, invalid, unvalidated };
}

const HELP = `
usage: npm run validate -- --crds DIR [--out DIR] [manifests.yaml ...]

Validates every rendered Kubernetes object (out/<stack>/manifests.yaml, from npm run render): custom resources
against the CRD schemas in --crds (unknown fields rejected, as the API server would prune them), core kinds
against the Kubernetes OpenAPI. Exit 1 when an object is invalid or has no schema, 2 when --crds is missing or
holds no CRD.

Options:
  --crds DIR   directory of CRD YAML (kubectl get crd -o yaml, or upstream config/crd/bases files)
  --out DIR    rendered stacks (default out/)
  --without-crd GROUP/VERSION/KIND
               a kind whose CRD the directory does not hold: its objects are listed as not validated
               instead of failing (repeatable; say why where you pass it). A CRD present is always used.
  -h, --help   this text

Examples:
  npm run render && npm run validate -- --crds ../schemas
  npm run validate -- --crds ../schemas out/spoke-hn1/manifests.yaml
`;

function main() {
    const argv = process.argv.slice(2);
    exitOnHelp(argv, HELP);
    let crdDir: string | undefined;
    let outDir = path.join(process.cwd(), "out");
    const files: string[] = [];
    const withoutCrd = new Set<string>();
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--crds") crdDir = argv[++i];
        else if (argv[i] === "--without-crd") withoutCrd.add(argv[++i]);
        else if (argv[i] === "--out") outDir = argv[++i];
        else if (argv[i].startsWith("--")) throw new Error(`unknown option ${argv[i]}`);
        else files.push(argv[i]);
    }
    if (!crdDir) throw new Error("usage: npm run validate -- --crds <dir with CRD YAML> [--out out] [manifests.yaml ...]");
    if (files.length === 0) {
        if (!fs.existsSync(outDir)) throw new Error(`${outDir} does not exist; run npm run render first`);
        for (const s of fs.readdirSync(outDir).sort()) {
            const f = path.join(outDir, s, "manifests.yaml");
            if (fs.existsSync(f)) files.push(f);
        }
        if (files.length === 0) throw new Error(`no out/<stack>/manifests.yaml under ${outDir}; run npm run render first`);
    }
    const v = ManifestValidator.fromDir(crdDir);
    let bad = 0;
    let total = 0;
    let skipped = 0;
    for (const f of files) {
        const r = validateFile(v, f, withoutCrd);
        skipped += r.unvalidated.length;
        for (const u of r.unvalidated) process.stdout.write(`  ${u}: NOT validated (no CRD in ${crdDir}; --without-crd)\n`);
        total += r.objects;
        bad += r.invalid.length;
        process.stdout.write(`${path.relative(process.cwd(), f)}: ${r.objects} objects, ${r.invalid.length} invalid\n`);
        for (const i of r.invalid) for (const e of i.errors) process.stdout.write(`  ${i.object}: ${e}\n`);
    }
    process.stdout.write(
        `validated ${total - skipped} objects in ${files.length} file(s): ${bad} invalid${skipped ? `, ${skipped} not validated (no CRD: ${[...withoutCrd].join(", ")})` : ""}\n`,
    );
    process.exit(bad ? 1 : 0);
}

if (require.main === module) {
    try {
        main();
    } catch (e) {
        process.stderr.write(`validate: ${(e as Error).message}\n`);
        process.exit(2);
    }
}
