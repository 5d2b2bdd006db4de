import type { ComponentFacts, EntrypointFacts, ImageFacts, Source } from "./types";

/**
 * Valkey, the spoke's limit-counter store (components/spoke/CounterStore.ts `valkeyArgs`). Pinned image
 * `docker.io/valkey/valkey:8.1.11-alpine` (config/versions.ts `valkey`).
 *
 * The server reads every config directive as `--<name> <value>` on its command line (src/config.c `static_configs`,
 * one table for the file and the command line). Read at valkey-io/valkey@00b0bb72ce63a86c09bdd4c118c691bc74f596ad
 * (the stored snapshot of the default branch, not the 8.1.11 tag): the five directives the platform sets are in the
 * 7.2 to 9.x lines alike; re-read at the tag before adding any.
 */
const CONFIG: Source = "valkey-io/valkey@00b0bb72ce63a86c09bdd4c118c691bc74f596ad:src/config.c#static_configs";

/**
 * The image's `ENTRYPOINT ["docker-entrypoint.sh"]` and `CMD ["valkey-server"]`; the script runs `valkey-server` with
 * the given arguments (as a non-root user it only checks that the working directory `/data` is writable, so the
 * platform mounts an emptyDir there) and appends `$VALKEY_EXTRA_FLAGS`, which the platform does not set.
 */
const ENTRYPOINT: Source = "valkey-io/valkey-container@2a80026d51102f32b36b249542027cb11223a7f1:docker-entrypoint.sh";
const DOCKERFILE: Source = "valkey-io/valkey-container@00a2b211887fd46775bba37c554167a19783cca4:8.1/alpine/Dockerfile";

/** The directives the counter store sets. */
export const valkeyServer: ComponentFacts = {
    component: "valkey-server",
    version: "8.1.11",
    flags: {
        "--save": {
            takesValue: true,
            source: CONFIG,
            note: 'createSpecialConfig("save", MULTI_ARG_CONFIG): "" removes every snapshot point (no RDB persistence)',
        },
        "--appendonly": {
            takesValue: true,
            choices: ["yes", "no"],
            default: "no",
            source: CONFIG,
            note: 'createBoolConfig("appendonly"): yes/no (yesnotoi)',
        },
        "--maxmemory": {
            takesValue: true,
            default: "0",
            source: CONFIG,
            note: 'createULongLongConfig("maxmemory", MEMORY_CONFIG): a size such as 512mb; 0 is no limit',
        },
        "--maxmemory-policy": {
            takesValue: true,
            choices: [
                "volatile-lru",
                "volatile-lfu",
                "volatile-random",
                "volatile-ttl",
                "allkeys-lru",
                "allkeys-lfu",
                "allkeys-random",
                "noeviction",
            ],
            default: "noeviction",
            source: CONFIG,
            note: "maxmemory_policy_enum; noeviction answers writes with an error when memory is full (the auth service then answers 503)",
        },
        "--requirepass": {
            takesValue: true,
            source: CONFIG,
            note: 'createSDSConfig("requirepass", SENSITIVE_CONFIG): the default user\'s password',
        },
    },
    env: {},
};

/** `valkey-server` with its directives (rendered as the container's args, after the image's entry point script). */
export const valkeyEntrypoints: readonly EntrypointFacts[] = [
    { id: "valkey-server", argv: ["valkey-server"], components: ["valkey-server"], source: ENTRYPOINT },
];

/** The pinned Valkey image. */
export const valkeyImages: readonly ImageFacts[] = [
    { repository: "docker.io/valkey/valkey", tag: "8.1.11-alpine", components: ["valkey-server"], provides: [], source: DOCKERFILE },
];
