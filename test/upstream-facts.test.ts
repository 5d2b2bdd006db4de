/**
 * upstream/: the facts are internally consistent and match the pins of config/versions.ts, so the checker never
 * silently skips a pinned image. Dynamo 1.5.0 is a GA release (2026-09-18; SGLang 0.5.18, TRT-LLM 1.3.0rc25, vLLM 0.28.0;
 * docs.nvidia.com/dynamo/v1.5.0/reference/compatibility); its EFA images are tagged `-efa` since v1.3.0
 * (ai-dynamo/dynamo docs/fern/components/releases.data.ts).
 */
import { describe, expect, it } from "vitest";
import { versions } from "../config/versions";
import { components, entrypoints, imageRequirements, images, refusedCombinations } from "../upstream";
import * as facts from "../upstream";

const SOURCE = /^[\w.-]+\/[\w.-]+@[^:\s]+:[^\s]+$/;

describe("upstream facts", () => {
    it("every pinned Dynamo and Mooncake image (plain and -efa) has image facts", () => {
        const pinned = [
            ...Object.values(versions.dynamoRuntime).flatMap((r) => [`${r.image}:${r.version}`, `${r.image}:${r.efaVersion}`]),
            `${versions.dynamoPlanner.image}:${versions.dynamoPlanner.version}`,
        ];
        const known = new Set(images.map((i) => `${i.repository}:${i.tag}`));
        expect(pinned.filter((p) => !known.has(p))).toEqual([]);
    });
    it("Dynamo pins are one release; engine facts are read at that release's engine pins", () => {
        const release = versions.dynamoPlatform.version;
        expect([versions.dynamoPlanner.version, ...Object.values(versions.dynamoRuntime).map((r) => r.version)]).toEqual(
            Array(4).fill(release),
        );
        expect(Object.values(versions.dynamoRuntime).map((r) => r.efaVersion)).toEqual(Array(3).fill(`${release}-efa`));
        expect([components.vllm.version, components.sglang.version, components.trtllm.version]).toEqual([
            "v0.28.0",
            "v0.5.18",
            "1.3.0rc25",
        ]);
    });
    it("only the -efa variants provide what NCCL_NET=Libfabric and FI_PROVIDER=efa need", () => {
        const need = new Set(
            imageRequirements.filter((r) => r.id === "nccl-net-libfabric" || r.id === "fi-provider-efa").flatMap((r) => r.needs),
        );
        for (const i of images.filter((x) => x.repository.includes("ai-dynamo") && !x.repository.endsWith("dynamo-planner"))) {
            expect(
                [...need].every((n) => i.provides.includes(n)),
                `${i.repository}:${i.tag}`,
            ).toBe(i.tag.endsWith("-efa"));
        }
    });
    it("every image and entry point names components that have facts; every fact cites owner/repo@tag:path", () => {
        for (const i of images) for (const c of i.components) expect(components[c], `${i.repository}:${i.tag} -> ${c}`).toBeDefined();
        for (const e of entrypoints) for (const c of e.components) expect(components[c], `${e.id} -> ${c}`).toBeDefined();
        const sources: string[] = [
            ...Object.values(components).flatMap((c) => [...Object.values(c.flags), ...Object.values(c.env)].map((f) => f.source)),
            ...images.map((i) => i.source),
            ...entrypoints.map((e) => e.source),
            ...imageRequirements.map((r) => r.source),
            ...refusedCombinations.map((r) => r.source),
            ...facts.dynamoInjections.map((d) => d.source),
        ];
        expect(sources.filter((s) => !SOURCE.test(s))).toEqual([]);
    });
    it("a flag's env var takes the flag's choices (argparse checks a flag's value, never the env var's, which is its default)", () => {
        // Dynamo's add_argument(env_var=...) makes the env var the flag's default, which argparse does not check against
        // choices (ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/common/configuration/utils.py)
        const pairs: string[] = [];
        for (const c of Object.values(components))
            for (const [flag, fact] of Object.entries(c.flags)) {
                const env = /^env (DYN_[A-Z0-9_]+)/.exec(fact.note ?? "")?.[1];
                // an env var without a fact is refused by upstream-check as read by nothing known
                if (!env || !fact.choices || !c.env[env]) continue;
                pairs.push(`${c.component} ${flag} ${env}`);
                expect(c.env[env].choices, `${c.component}: ${env} of ${flag}`).toEqual(fact.choices);
            }
        expect(pairs).toEqual(
            expect.arrayContaining([
                "dynamo-frontend --router-mode DYN_ROUTER_MODE",
                "dynamo-vllm --disaggregation-mode DYN_VLLM_DISAGGREGATION_MODE",
                "dynamo-trtllm --disaggregation-mode DYN_TRTLLM_DISAGGREGATION_MODE",
            ]),
        );
    });
    it("Dynamo sets VLLM_NIXL_SIDE_CHANNEL_HOST only for a top-level NixlConnector/PdConnector, not MultiConnector", () => {
        const inj = facts.dynamoInjections.find((d) => d.env.includes("VLLM_NIXL_SIDE_CHANNEL_HOST"))!;
        expect(inj.kvConnectors).toEqual(["NixlConnector", "PdConnector"]);
        expect(components.vllm.env.VLLM_NIXL_SIDE_CHANNEL_HOST.default).toBe("localhost");
    });
});
